"""``kvproof conform``: which traces and scenarios to run on SGLang 0.5.23, and the report.

Targets are trace files, directories of traces, built-in scenario names or globs of them
(default ``sglang-0.5.23-*``).  Without ``--random`` every stored counterexample of the targets
is replayed (exit 0 when all reproduce, 1 on a divergence); with ``--random N`` each scenario
runs N random event sequences (exit 0 when all agree, 1 with the minimal disagreement).  Bad
input is raised as the caller's one-line error type before the slow import of SGLang.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, NamedTuple

from kvproof.model.scenario import Scenario
from kvproof.checker.conform import bar_paused, conform_targets
from kvproof.checker.traces import read_trace
from kvproof.spec.sglang.conform.errors import ConformError
from kvproof.spec.sglang.conform.stubs import ENGINE, EngineUnavailable, load_sglang

__all__ = ["run_conform", "Conformed", "DEFAULT_TARGET"]

DEFAULT_TARGET = "sglang-0.5.23-*"


class Conformed(NamedTuple):
    """How a ``conform`` run ended: its exit code (0 or 1), what ran, how many traces or
    scenarios agreed with the real engine and how many did not, and what the code means."""

    exit_code: int
    ran: str
    matched: int
    mismatched: int
    meaning: str


def run_conform(args: argparse.Namespace, resolve: Callable[[str], Scenario], out, bad, progress=None) -> Conformed:
    """Run the command; ``resolve`` names a scenario, ``out`` is a rich console, ``bad`` builds
    the CLI's bad-input exception, ``progress`` (optional) has ``start(label)``, called as each
    trace or scenario begins.  Returns how it ended (:class:`Conformed`)."""
    if args.engine not in (None, ENGINE):
        raise bad(f"--engine {args.engine}: only {ENGINE} is supported")
    traces, scenarios = conform_targets(args, DEFAULT_TARGET, resolve, bad)
    for sc in scenarios + [read_trace(path).scenario for path in traces]:  # bad input first, before the slow import
        if sc.family and sc.family != "sglang":
            raise bad(f"conform: {sc.name} is a scenario of the {sc.family} protocol; run it separately from "
                      f"the {ENGINE} targets")
    if progress is not None:
        progress.note(f"importing {ENGINE}")
    try:
        load_sglang()
    except EngineUnavailable as e:
        raise bad(f"conform: {e}") from None
    try:
        if args.random:
            return _random(args, scenarios or [read_trace(p).scenario for p in traces[:1]], out, progress)
        return _replay(traces, out, bad, progress)
    except ConformError as e:
        raise bad(f"conform: {e}") from None


def _random(args: argparse.Namespace, scenarios: list[Scenario], out, progress=None) -> Conformed:
    from kvproof.spec.sglang.conform.fuzz import fuzz_scenario

    code = agreed = 0
    if progress is not None:
        progress.total, progress.unit = len(scenarios), "scenarios"
    for sc in scenarios:
        if progress is not None:
            progress.start(f"{sc.name}: {args.random:,} random sequences on {ENGINE}")
        rep = fuzz_scenario(sc, args.random, seed=args.seed)
        agreed += rep.agrees
        with bar_paused(progress):
            if rep.agrees:
                out.print(f"{sc.name}: {rep.sequences:,} random sequences ({rep.steps:,} steps) agree "
                          f"with {ENGINE} ({rep.seconds:.1f} s)")
                continue
            code = 1
            out.print(f"{sc.name}: disagreement after {rep.sequences:,} sequences; minimal sequence:")
            for k, label in enumerate(rep.disagreement, 1):
                out.print(f"  {k:3}  {label}")
            out.print(f"  {rep.result.reason}", soft_wrap=True)
    ran = (f"{len(scenarios)} scenario{'s' * (len(scenarios) != 1)}, {args.random:,} random sequences each "
           f"(seed {args.seed}) on {ENGINE}")
    meaning = (f"every scenario's sequences agree with {ENGINE}" if code == 0
               else f"a sequence disagrees with {ENGINE}")
    return Conformed(code, ran, agreed, len(scenarios) - agreed, meaning)


def _replay(traces: list[Path], out, bad, progress=None) -> Conformed:
    from kvproof.spec.sglang.conform.report import replay_trace

    if not traces:
        raise bad("conform: no stored counterexample to replay (kvproof check writes them)")
    code = reproduced = 0
    if progress is not None:
        progress.total, progress.unit = len(traces), "traces"
    for path in traces:
        if progress is not None:
            progress.start(f"{path.name} on {ENGINE}")
        v = replay_trace(path)
        with bar_paused(progress):
            if v.verdict == "reproduced":
                out.print(f"reproduced  {path.name}: {v.steps} steps, {v.how}", soft_wrap=True)
                reproduced += 1
            else:
                code = 1
                out.print(f"diverged    {path.name} at step {v.step}: {v.reason}", soft_wrap=True)
    ran = f"{len(traces)} trace{'s' * (len(traces) != 1)} replayed on {ENGINE}"
    meaning = f"every trace reproduces on {ENGINE}" if code == 0 else f"a trace diverges on {ENGINE}"
    return Conformed(code, ran, reproduced, len(traces) - reproduced, meaning)
