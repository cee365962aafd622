"""``kvproof conform`` for vLLM scenarios and traces: which to run on vLLM 0.33.0, and the report.

Targets are trace files, directories of traces, built-in scenario names or globs of them
(``vllm-*``).  Without ``--random`` every stored counterexample of the targets is replayed (exit
0 when all reproduce, 1 on a divergence); with ``--random N`` each scenario runs N random event
sequences (exit 0 when all agree, 1 with the minimal disagreement).  Bad input is raised as the
caller's one-line error type before the slow import of vLLM.
"""

from __future__ import annotations

import argparse
from typing import Callable

from kvproof.checker.conform import Conformed, Driver, run_on_engine
from kvproof.checker.traces import read_trace
from kvproof.model.scenario import Scenario
from kvproof.spec.vllm.conform.engine import ENGINE, EngineUnavailable, load_vllm
from kvproof.spec.vllm.conform.replay import ConformError

__all__ = ["run_conform", "Conformed", "DEFAULT_TARGET"]

DEFAULT_TARGET = "vllm-*"


def run_conform(args: argparse.Namespace, resolve: Callable[[str], Scenario], out, bad, progress=None) -> Conformed:
    """Run the command; ``resolve`` names a scenario, ``out`` is a rich console, ``bad`` builds
    the CLI's bad-input exception, ``progress`` (optional) has ``start(label)``, called as each
    trace or scenario begins.  Returns how it ended (:class:`~kvproof.checker.conform.Conformed`)."""
    return run_on_engine(args, resolve, out, bad, progress, engine=ENGINE, family="vllm", default=DEFAULT_TARGET,
                         load=load_vllm, unavailable=EngineUnavailable, error=ConformError, driver=_driver)


def _driver():
    """vLLM's side of the shared ``conform`` loops: trace replay, random sequences, and the
    harness's refusals (knobs it has no counterpart of)."""
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario
    from kvproof.spec.vllm.conform.replay import harness_for
    from kvproof.spec.vllm.conform.report import replay_trace

    def can_replay(path):
        trace = read_trace(path)
        harness_for(trace.scenario, trace.machine.spec).close()

    return Driver(ENGINE, replay_trace, lambda sc, n, seed: fuzz_scenario(sc, n, seed=seed), can_replay,
                  lambda sc: harness_for(sc, sc.build(), random=True).close(), (ConformError,))
