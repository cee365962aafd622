"""What every protocol's ``kvproof conform`` shares: its targets (:func:`conform_targets`), the
progress display out of the way of a result line (:func:`bar_paused`), the outcome of a run on
the code (:class:`Conformance`), the replay of a stored counterexample and its verdict
(:func:`replay_stored`: :class:`Reproduced` or :class:`Diverged`, given the protocol's table of
how each claim's failure shows in what the code did), the two ways a protocol's ``conform`` command runs
(:func:`run_replays`, :func:`run_random`, given the protocol's :class:`Driver`), and random
conformance (:func:`random_sequences`): hypothesis draws event sequences the model allows, a protocol's
harness runs each on the real engine, and a disagreement is shrunk to a minimal sequence.

A sequence is built step by step from the model's enabled events (so every sequence is one the
model allows); ``run(actions)`` runs it on the real code and returns something with
``agrees``, ``diverged_at`` (1-based) and ``reason``.  Hypothesis shrinks a disagreeing sequence
by dropping and lowering choices; the last disagreement it reports is the minimal one.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kvproof.checker.outcome import WORDINGS, Inconclusive, Outcome, Tally, Verified, Violated, worded
from kvproof.checker.traces import read_trace
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario, builtin, builtins

__all__ = ["FuzzReport", "random_sequences", "conform_targets", "bar_paused", "StepResult", "Conformance",
           "Reproduced", "Diverged", "replay_stored", "Conformed", "Driver", "run_random", "run_replays",
           "run_on_engine"]


def conform_targets(args: argparse.Namespace, default: str, resolve: Callable[[str], Scenario],
                    bad) -> tuple[list[Path], list[Scenario]]:
    """The trace files and scenarios ``args.targets`` name (``default`` when none): trace files,
    directories of traces, built-in scenario names or globs of them (a scenario brings its
    stored traces from ``args.traces``); ``bad`` builds the one-line error."""
    traces: list[Path] = []
    scenarios: list[Scenario] = []
    for t in args.targets or [default]:
        p = Path(t)
        if p.is_dir():
            traces += sorted(p.glob("*.itf.json"))
        elif t.endswith(".json"):
            if not p.is_file():
                raise bad(f"{t}: no such trace file")
            traces.append(p)
        elif "*" in t:
            names = [s.name for s in builtins() if fnmatch.fnmatch(s.name, t)]
            if not names:
                raise bad(f"{t}: no built-in scenario matches")
            scenarios += [builtin(n) for n in names]
            traces += [q for n in names for q in sorted(Path(args.traces).glob(f"{n}__*.itf.json"))]
        else:
            sc = resolve(t)
            scenarios.append(sc)
            traces += sorted(Path(args.traces).glob(f"{sc.name}__*.itf.json"))
    return traces, scenarios


def bar_paused(progress):
    """The caller's progress display out of the way while a result line is printed."""
    return progress.paused() if progress is not None else contextlib.nullcontext()


@dataclass
class FuzzReport:
    """``sequences`` run, their steps, the time taken, and the minimal disagreement (if any)."""

    scenario: str
    sequences: int = 0
    steps: int = 0
    seconds: float = 0.0
    disagreement: list[str] = field(default_factory=list)
    result: Any = None

    @property
    def agrees(self) -> bool:
        """No sequence disagreed."""
        return not self.disagreement


def random_sequences(name: str, machine: Machine, run: Callable[[Sequence[int]], Any], sequences: int,
                     max_steps: int = 40, seed: int = 0) -> FuzzReport:
    """Run ``sequences`` random event sequences of ``machine`` through ``run``."""
    report = FuzzReport(name)
    failing: list = []
    t0 = time.perf_counter()

    @settings(max_examples=sequences, deadline=None, database=None, derandomize=True,
              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
              print_blob=False)
    @given(st.data())
    def agrees(data):
        state, actions = machine.init, []
        for _ in range(max_steps):
            enabled = machine.successors(state)
            if not enabled:
                break
            aid, state = enabled[data.draw(st.integers(0, len(enabled) - 1))]
            actions.append(aid)
        result = run(actions)
        report.sequences += 1
        report.steps += len(actions)
        if not result.agrees:
            failing[:] = [actions[: result.diverged_at], result]
            raise AssertionError(result.reason)

    agrees._hypothesis_internal_use_seed = seed
    try:
        agrees()
    except AssertionError:
        actions, result = failing
        report.disagreement = [machine.label(a) for a in actions]
        report.result = result
    report.seconds = time.perf_counter() - t0
    return report


@dataclass(frozen=True)
class StepResult:
    """One step: its label, and what differed (empty when model and code agree)."""

    step: int
    label: str
    differences: tuple[str, ...] = ()


@dataclass
class Conformance:
    """The outcome of running a sequence of events on the code: ``diverged_at`` is the first
    step (1-based) that differs (``None`` when every step matched)."""

    steps: list[StepResult] = field(default_factory=list)
    diverged_at: int | None = None
    reason: str = ""

    @property
    def agrees(self) -> bool:
        """Every step matched."""
        return self.diverged_at is None


@dataclass(frozen=True)
class Reproduced:
    """Every step matched and the claim fails in the code too (``how`` says how that was seen)."""

    path: Path
    claim: str
    steps: int
    how: str
    verdict: str = WORDINGS["conform"][Verified]

    @property
    def outcome(self) -> Outcome:
        """The trace's outcome on the code: a verification of the expectation that the code
        does what the model does (:data:`~kvproof.checker.outcome.WORDINGS`)."""
        return worded("conform", Verified, self.path)


@dataclass(frozen=True)
class Diverged:
    """The code differs from the model at ``step`` (1-based); ``reason`` names what differed."""

    path: Path
    claim: str
    step: int
    reason: str
    verdict: str = WORDINGS["conform"][Violated]

    @property
    def outcome(self) -> Outcome:
        """The trace's outcome on the code: a violation of the expectation that the code does
        what the model does."""
        return worded("conform", Violated, self.path)


ClaimCheck = Callable[[Any, Any], "str | None"]
"""How one claim's failure shows in the code: ``check(observation, trace)`` is ``None`` when the
claim does not fail in what the code did, else a detail of how it fails (``""`` for none)."""


def replay_stored(path: str | Path, harness_for: Callable, run_on_code: Callable,
                  claims: dict[str, ClaimCheck]) -> Reproduced | Diverged:
    """Replay a stored counterexample on a protocol's real code: ``harness_for(scenario, spec)``
    builds the harness (with ``observe()`` and ``close()``), ``run_on_code(machine, harness,
    actions)`` runs and compares every step (a :class:`Conformance`), and ``claims`` says how each
    claim's failure shows in the code's last observation (a claim it does not name reproduces
    when every step's observation is equal).  Raises the trace reader's and the harness's errors
    for input they cannot use."""
    trace = read_trace(path)
    harness = harness_for(trace.scenario, trace.machine.spec)
    try:
        result = run_on_code(trace.machine, harness, trace.actions)
        observed = harness.observe()
    finally:
        harness.close()
    p = Path(path)
    if not result.agrees:
        return Diverged(p, trace.claim, result.diverged_at, result.reason)
    check = claims.get(trace.claim)
    if check is None:
        return Reproduced(p, trace.claim, len(trace), "every step's observation equal")
    detail = check(observed, trace)
    if detail is None:
        return Diverged(p, trace.claim, len(trace), f"{trace.claim} does not fail in the code at the last step")
    return Reproduced(p, trace.claim, len(trace), f"{trace.claim} fails in the code" + (f" ({detail})" if detail else ""))


class Conformed(NamedTuple):
    """How a ``conform`` run ended: what ran, the outcome of each trace or scenario on the real
    engine (:data:`~kvproof.checker.outcome.WORDINGS`: ``conform``'s words for replays,
    ``conform --random``'s for random sequences), what the exit code means, and how many the
    harness cannot run (each named in a ``not run`` line; the run fails if nothing could run).
    Every outcome is judged against the expectation that the code does what the model does."""

    ran: str
    outcomes: tuple
    meaning: str
    skipped: int = 0

    @property
    def tally(self) -> Tally:
        """How the outcomes compare with the expectation (each agreeing one matched)."""
        return Tally.of((o, WORDINGS["conform"][Verified]) for o in self.outcomes)

    @property
    def matched(self) -> int:
        """How many traces or scenarios agreed with the real engine."""
        return self.tally.matched

    @property
    def mismatched(self) -> int:
        """How many did not."""
        return self.tally.mismatched

    @property
    def exit_code(self) -> int:
        """:func:`~kvproof.checker.outcome.exit_code` of the outcomes (0 or 1)."""
        return self.tally.exit_code

    @property
    def verdict(self) -> str:
        """The run's word: that of its first disagreement, else of an agreement."""
        bad = [o for o in self.outcomes if isinstance(o, Violated)]
        return (bad or [*self.outcomes, worded("conform", Verified)])[0].verdict


@dataclass(frozen=True)
class Driver:
    """What a protocol gives the shared ``conform`` loops: the engine's name, how to replay one
    stored trace (:class:`Reproduced` or :class:`Diverged`), how to run ``n`` random sequences
    of a scenario with a seed (a :class:`FuzzReport`), and, optionally, checks that raise one of
    ``refusals`` for a trace or scenario the harness cannot run (reported ``not run``)."""

    engine: str
    replay: Callable[[Path], Any]
    fuzz: Callable[[Scenario, int, int], FuzzReport]
    can_replay: Callable[[Path], None] | None = None
    can_fuzz: Callable[[Scenario], None] | None = None
    refusals: tuple[type[Exception], ...] = ()


def _runnable(items: list, check, name, refusals, out) -> tuple[list, int]:
    """The items ``check`` accepts and how many it refused; a ``not run`` line for each refused
    one, whose error is re-raised when it refuses them all."""
    if check is None:
        return items, 0
    keep, first = [], None
    for item in items:
        try:
            check(item)
        except refusals as e:
            out.print(f"{WORDINGS['conform'][Inconclusive]:<11} {name(item)}: {e}", soft_wrap=True, markup=False)
            first = first or e
            continue
        keep.append(item)
    if first is not None and not keep:
        raise first
    return keep, len(items) - len(keep)


def run_random(driver: Driver, args: argparse.Namespace, scenarios: list[Scenario], out, progress=None) -> Conformed:
    """``conform --random N``: N random sequences per scenario on the real engine; a line per
    scenario (the minimal disagreement when one disagrees)."""
    engine = driver.engine
    outcomes: list[Outcome] = []
    scenarios, skipped = _runnable(scenarios, driver.can_fuzz, lambda sc: sc.name, driver.refusals, out)
    if progress is not None:
        progress.total, progress.unit = len(scenarios), "scenarios"
    for sc in scenarios:
        if progress is not None:
            progress.start(f"{sc.name}: {args.random:,} random sequences on {engine}")
        rep = driver.fuzz(sc, args.random, args.seed)
        outcomes.append(worded("conform --random", Verified if rep.agrees else Violated, sc.name))
        with bar_paused(progress):
            if rep.agrees:
                out.print(f"{sc.name}: {rep.sequences:,} random sequences ({rep.steps:,} steps) agree "
                          f"with {engine} ({rep.seconds:.1f} s)", markup=False)
                continue
            out.print(f"{sc.name}: disagreement after {rep.sequences:,} sequences; minimal sequence:", markup=False)
            for k, label in enumerate(rep.disagreement, 1):
                out.print(f"  {k:3}  {label}", markup=False)
            out.print(f"  {rep.result.reason}", soft_wrap=True, markup=False)
    ran = (f"{len(scenarios)} scenario{'s' * (len(scenarios) != 1)}, {args.random:,} random sequences each "
           f"(seed {args.seed}) on {engine}")
    agree = all(isinstance(o, Verified) for o in outcomes)
    meaning = f"every scenario's sequences agree with {engine}" if agree else f"a sequence disagrees with {engine}"
    return Conformed(ran, tuple(outcomes), meaning, skipped)


def run_replays(driver: Driver, traces: list[Path], out, bad, progress=None) -> Conformed:
    """``conform`` on stored counterexamples: each replayed on the real engine, a line per trace
    (``reproduced`` with how, or ``diverged`` at a step with why); ``bad`` builds the one-line
    error when there is nothing to replay."""
    engine = driver.engine
    if not traces:
        raise bad("conform: no stored counterexample to replay (kvproof check writes them)")
    traces, skipped = _runnable(traces, driver.can_replay, lambda p: p.name, driver.refusals, out)
    outcomes: list[Outcome] = []
    if progress is not None:
        progress.total, progress.unit = len(traces), "traces"
    for path in traces:
        if progress is not None:
            progress.start(f"{path.name} on {engine}")
        v = driver.replay(path)
        outcomes.append(v.outcome)
        with bar_paused(progress):
            if isinstance(v.outcome, Verified):
                out.print(f"{v.verdict:<11} {path.name}: {v.steps} steps, {v.how}", soft_wrap=True, markup=False)
            else:
                out.print(f"{v.verdict:<11} {path.name} at step {v.step}: {v.reason}", soft_wrap=True, markup=False)
    ran = f"{len(traces)} trace{'s' * (len(traces) != 1)} replayed on {engine}"
    agree = all(isinstance(o, Verified) for o in outcomes)
    meaning = f"every trace reproduces on {engine}" if agree else f"a trace diverges on {engine}"
    return Conformed(ran, tuple(outcomes), meaning, skipped)


def run_on_engine(args: argparse.Namespace, resolve: Callable[[str], Scenario], out, bad, progress, *,
                  engine: str, family: str, default: str, load: Callable[[], Any], unavailable: type[Exception],
                  error: type[Exception], driver: Callable[[], Driver]) -> Conformed:
    """A protocol's whole ``kvproof conform`` command: ``--engine`` and the targets checked
    (every scenario must belong to the protocol named ``family``) as one-line bad
    input before the slow ``load()`` of the real engine, whose ``unavailable`` error is bad input
    too; then the stored counterexamples replayed or, with ``--random N``, N random sequences per
    scenario, through the protocol's ``driver()``; a harness ``error`` is bad input."""
    if args.engine not in (None, engine):
        raise bad(f"--engine {args.engine}: only {engine} is supported for {family} targets")
    traces, scenarios = conform_targets(args, default, resolve, bad)
    for sc in scenarios + [read_trace(path).scenario for path in traces]:  # bad input first, before the slow import
        if (theirs := sc.family_protocol().name) != family:
            raise bad(f"conform: {sc.name} is a scenario of the {theirs} protocol; run it separately from "
                      f"the {engine} targets")
    if progress is not None:
        progress.note(f"importing {engine}")
    try:
        load()
    except unavailable as e:
        raise bad(f"conform: {e}") from None
    try:
        if args.random:
            return run_random(driver(), args, scenarios or [read_trace(p).scenario for p in traces[:1]], out,
                              progress)
        return run_replays(driver(), traces, out, bad, progress)
    except error as e:
        raise bad(f"conform: {e}") from None
