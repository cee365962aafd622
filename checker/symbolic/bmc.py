"""Bounded model checking: the spec unrolled step by step, shortest violations first.

:class:`Unrolling` holds a SAT-based Z3 solver (``QF_FD``: finite domains, incremental) with
the initial state and ``k`` steps of the transition relation of a
:class:`~.transition.TransitionSystem`.  :func:`bmc` grows it one step at a time and, at every
depth, asks whether some open claim hits in the last state (an invariant fails, a witness
holds).  Because every depth below was asked first, the first hit is at a shortest length,
the same length the explicit engine's breadth-first search finds.

A hit is decoded from the model (the action tag of every step) into action ids and states;
:func:`bmc` returns it as is, and :func:`confirmed_path` replays it on the compiled machine
before anyone reports it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import z3

from kvproof.model.machine import Machine
from kvproof.model.replay import ReplayError, run_actions
from kvproof.model.framework import Claim
from kvproof.checker.symbolic.transition import TransitionSystem

__all__ = ["Unrolling", "BmcRun", "bmc", "confirmed_path", "EngineError"]


class EngineError(RuntimeError):
    """A symbolic engine produced something the explicit model does not reproduce."""


class Unrolling:
    """``init(x0) & step(x0, x1) & ... & step(x{k-1}, xk)`` in one incremental solver."""

    def __init__(self, ts: TransitionSystem, from_init: bool = True):
        self.ts = ts
        self.solver = z3.SolverFor("QF_FD")
        self.depth = 0
        x0 = ts.state(0)
        self.solver.add(ts.typed(x0))
        if from_init:
            self.solver.add(ts.init(x0))
        self._lits = 0

    def extend(self) -> None:
        """Add one more step."""
        ts, k = self.ts, self.depth
        self.solver.add(ts.step(ts.state(k), ts.state(k + 1), ts.tag(k)), ts.typed(ts.state(k + 1)))
        self.depth += 1

    def literal(self, term: Any) -> Any:
        """A fresh Boolean equivalent to ``term``, to pass as an assumption (keeps what the
        solver learned, unlike push/pop)."""
        self._lits += 1
        b = z3.Bool(f"kvproof_lit_{self._lits}")
        self.solver.add(b == term)
        return b

    def check(self, *assumptions: Any) -> Any:
        """``sat``, ``unsat`` or ``unknown`` under ``assumptions``."""
        return self.solver.check(*assumptions)


@dataclass
class BmcRun:
    """What :func:`bmc` found: per claim name, the path to its first hit (action ids, states);
    ``depth`` is the deepest length searched exhaustively (-1: not even the initial state, time
    ran out first); ``stopped`` says why it stopped."""

    hits: dict[str, tuple[list[int], list[bytes]]] = field(default_factory=dict)
    depth: int = -1
    seconds: float = 0.0
    stopped: str = ""
    checks: int = 0


def _hit_term(ts: TransitionSystem, claim: Claim, xs) -> Any:
    if claim.kind == "invariant":
        return z3.Not(ts.safe(claim.name, xs))
    return ts.holds(claim.name, xs)


def bmc(ts: TransitionSystem, claims: Sequence[Claim], max_depth: int,
        max_seconds: float | None = None, stop_when_all_hit: bool = True, stop_at_first_hit: bool = False,
        deadline: float | None = None) -> BmcRun:
    """Search paths of length ``0..max_depth`` for the first hit of each of ``claims`` (with
    ``stop_at_first_hit``, only up to the first depth where some claim hits).  Time is up
    ``max_seconds`` from now, or at ``deadline`` (a ``time.perf_counter()`` reading) when it is
    given; a depth the solver could not finish (a timeout, an interrupt) is not counted as
    searched."""
    start = time.perf_counter()
    if deadline is None and max_seconds is not None:
        deadline = start + max_seconds

    def gave_up(k: int) -> str:
        why = un.solver.reason_unknown()
        if deadline is not None and (time.perf_counter() > deadline or why in ("interrupted", "timeout", "canceled")):
            return f"time limit {max_seconds or 0:g} s reached at depth {k}"
        return f"solver gave up at depth {k}: {why}"

    def late() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    run = BmcRun()
    if late():
        run.stopped = f"time limit {max_seconds or 0:g} s reached before depth 0"
        run.seconds = time.perf_counter() - start
        return run
    try:
        un = Unrolling(ts)
        open_ = list(claims)
        k = 0
        while True:
            xs = ts.state(k)
            if open_:
                lits = {}
                for c in open_:  # building the terms takes a while on large scenarios: watch the clock
                    if late():
                        break
                    lits[c.name] = un.literal(_hit_term(ts, c, xs))
                if late():
                    run.stopped = f"time limit {max_seconds or 0:g} s reached at depth {k}"
                    break
                any_hit = un.literal(z3.Or(*lits.values()))
                verdict = un.check(any_hit)
                run.checks += 1
                if verdict == z3.unknown:
                    run.stopped = gave_up(k)
                    break
                if verdict == z3.sat:
                    unfinished = False
                    for c in list(open_):
                        answer = un.check(lits[c.name])
                        run.checks += 1
                        if answer == z3.sat:
                            run.hits[c.name] = ts.decode_path(un.solver.model(), k)
                            open_.remove(c)
                        elif answer == z3.unknown:
                            unfinished = True
                            break
                    if unfinished:  # depth k is not searched to the end: run.depth stays k - 1
                        run.stopped = gave_up(k)
                        break
            run.depth = k
            if run.hits and stop_at_first_hit:
                run.stopped = "a claim hit"
                break
            if not open_ and stop_when_all_hit:
                run.stopped = "every claim asked for hit"
                break
            if k >= max_depth:
                run.stopped = f"depth limit {max_depth} reached"
                break
            if deadline is not None and time.perf_counter() > deadline:
                run.stopped = f"time limit {max_seconds or 0:g} s reached at depth {k}"
                break
            un.extend()
            k += 1
    except z3.Z3Exception:
        # past the deadline the watchdog keeps interrupting Z3, and a call that is not a check
        # (reading a model, building a term) fails with "canceled": depth run.depth + 1 is unfinished
        if not late():
            raise
        run.stopped = f"time limit {max_seconds or 0:g} s reached at depth {run.depth + 1}"
    run.seconds = time.perf_counter() - start
    return run


def confirmed_path(machine: Machine, claim: str, actions: list[int], states: list[bytes]) -> list[bytes]:
    """Replay a symbolic path on the compiled machine: every action enabled, every state as the
    solver decoded it, and the claim hit at the last state.  Returns the replayed states;
    raises :class:`EngineError` naming the first thing that does not fit."""
    try:
        replayed = run_actions(machine, actions)
    except ReplayError as e:
        raise EngineError(f"symbolic path for {claim} does not replay: {e}") from None
    for k, (a, b) in enumerate(zip(replayed, states)):
        if a != b:
            raise EngineError(f"symbolic path for {claim}: state {k} differs from the model's")
    if not machine.claim_hits(claim, replayed[-1]):
        raise EngineError(f"symbolic path for {claim} replays but the claim does not hit at its end")
    return replayed
