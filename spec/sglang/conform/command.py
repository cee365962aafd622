"""``kvproof conform``: which traces and scenarios to run on SGLang 0.5.23, and the report.

Targets are trace files, directories of traces, built-in scenario names or globs of them
(default ``sglang-0.5.23-*``).  Without ``--random`` every stored counterexample of the targets
is replayed (exit 0 when all reproduce, 1 on a divergence); with ``--random N`` each scenario
runs N random event sequences (exit 0 when all agree, 1 with the minimal disagreement).  Bad
input is raised as the caller's one-line error type before the slow import of SGLang.
"""

from __future__ import annotations

import argparse
from typing import Callable

from kvproof.model.scenario import Scenario
from kvproof.checker.conform import Conformed, Driver, run_on_engine
from kvproof.spec.sglang.conform.errors import ConformError
from kvproof.spec.sglang.conform.stubs import ENGINE, EngineUnavailable, load_sglang

__all__ = ["run_conform", "Conformed", "DEFAULT_TARGET"]

DEFAULT_TARGET = "sglang-0.5.23-*"


def run_conform(args: argparse.Namespace, resolve: Callable[[str], Scenario], out, bad, progress=None) -> Conformed:
    """Run the command; ``resolve`` names a scenario, ``out`` is a rich console, ``bad`` builds
    the CLI's bad-input exception, ``progress`` (optional) has ``start(label)``, called as each
    trace or scenario begins.  Returns how it ended (:class:`~kvproof.checker.conform.Conformed`)."""
    return run_on_engine(args, resolve, out, bad, progress, engine=ENGINE, family="sglang", default=DEFAULT_TARGET,
                         load=load_sglang, unavailable=EngineUnavailable, error=ConformError, driver=_driver)


def _driver():
    """SGLang's side of the shared ``conform`` loops: trace replay and random sequences."""
    from kvproof.spec.sglang.conform.fuzz import fuzz_scenario
    from kvproof.spec.sglang.conform.report import replay_trace

    return Driver(ENGINE, replay_trace, lambda sc, n, seed: fuzz_scenario(sc, n, seed=seed))
