"""Unbounded proofs by k-induction with a simple-path constraint (the second, independent method).

For a safety predicate ``P`` (the conjunction of the invariants asked for) and ``k = 1, 2, ...``:

* base case: no path of length ``< k`` from the initial state ends in a state breaking ``P``
  (bounded model checking, :class:`~.bmc.Unrolling`);
* inductive step: no *simple* path ``x0 .. xk`` of typed states (all states pairwise
  different) has ``P`` in ``x0 .. x{k-1}`` and breaks it in ``xk``.

When both hold, ``P`` holds in every reachable state: a reachable state breaking ``P`` would
end a shortest path, whose last ``k + 1`` states form a simple path as above (or the path is
shorter than ``k``, which the base case rules out).  The simple-path constraint makes the method
complete for finite systems (``k`` up to the longest simple path), so a bound on ``k`` or on
time is what stops it: then the result is *inconclusive*, never proved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import z3

from kvproof.checker.symbolic.bmc import Unrolling
from kvproof.checker.symbolic.transition import TransitionSystem

__all__ = ["InductionCounterexample", "InductionOutcome", "k_induction"]


@dataclass(frozen=True)
class InductionCounterexample:
    """The last inductive step Z3 could not close: a simple path of typed states ``states``
    (``len(actions) + 1`` of them) by the action instances ``actions``, the invariants holding
    in every state but the last, and ``broken`` (the invariants the last state breaks)."""

    states: tuple[bytes, ...]
    actions: tuple[int, ...]
    broken: tuple[str, ...]


@dataclass
class InductionOutcome:
    """``status`` is ``proved`` (at ``k``), ``refuted`` (a bad state at depth ``k`` from the
    initial state) or ``inconclusive`` (``reason``); when inconclusive because the step was satisfiable,
    ``cti`` is its counterexample at the largest ``k`` tried."""

    status: str
    k: int = 0
    seconds: float = 0.0
    reason: str = ""
    cti: InductionCounterexample | None = None


def k_induction(ts: TransitionSystem, invariants: Sequence[str], max_k: int = 40,
                max_seconds: float | None = None, assume: Any = None) -> InductionOutcome:
    """Prove the conjunction of ``invariants`` by k-induction, for ``k`` up to ``max_k`` (a
    witness among them stands for "never reached": :meth:`~.transition.TransitionSystem.never_hits`).

    ``assume`` (a term over the template pre-state) is a strengthening the inductive step may
    assume of every state of its path.  It must hold in every reachable state, which the caller
    has to have *proved* (e.g. it is inductive: :func:`~.lemmas.houdini`); the base case does
    not use it."""
    start = time.perf_counter()
    deadline = None if max_seconds is None else start + max_seconds

    def prop(xs):
        return z3.And(*[ts.never_hits(name, xs) for name in invariants])

    base = Unrolling(ts)
    step = Unrolling(ts, from_init=False)
    if assume is not None:
        step.solver.add(ts.sub(assume, ts.state(0)))
    for solver in (base.solver, step.solver):
        if max_seconds is not None:
            solver.set("timeout", max(1, int(max_seconds * 1000)))
    cti = None
    for k in range(1, max_k + 1):
        # base case: depth k - 1 from the initial state is safe
        verdict = base.check(base.literal(z3.Not(prop(ts.state(k - 1)))))
        if verdict == z3.sat:
            return InductionOutcome("refuted", k - 1, time.perf_counter() - start)
        if verdict == z3.unknown:
            return InductionOutcome("inconclusive", k, time.perf_counter() - start, _why(base, max_seconds), cti)
        base.extend()
        # inductive step over a simple path x0 .. xk
        step.solver.add(prop(ts.state(k - 1)))
        step.extend()
        if assume is not None:
            step.solver.add(ts.sub(assume, ts.state(k)))
        for j in range(k):
            step.solver.add(z3.Not(ts.equal(ts.state(j), ts.state(k))))
        verdict = step.check(step.literal(z3.Not(prop(ts.state(k)))))
        if verdict == z3.unsat:
            return InductionOutcome("proved", k, time.perf_counter() - start)
        if verdict == z3.unknown:
            return InductionOutcome("inconclusive", k, time.perf_counter() - start, _why(step, max_seconds), cti)
        cti = _counterexample(ts, step.solver.model(), k, invariants)
        if deadline is not None and time.perf_counter() > deadline:
            return InductionOutcome("inconclusive", k, time.perf_counter() - start,
                                    f"not {k}-inductive, and the time limit {max_seconds:g} s was reached", cti)
    return InductionOutcome("inconclusive", max_k, time.perf_counter() - start,
                            f"not k-inductive for any k up to {max_k}", cti)


def _counterexample(ts: TransitionSystem, model: z3.ModelRef, k: int,
                    invariants: Sequence[str]) -> InductionCounterexample:
    """The step's path ``x0 .. xk`` in ``model``, and the invariants ``xk`` breaks."""
    actions, states = ts.decode_path(model, k)
    last = ts.state(k)
    broken = tuple(n for n in invariants
                   if z3.is_false(model.eval(ts.never_hits(n, last), model_completion=True)))
    return InductionCounterexample(tuple(states), tuple(actions), broken)


def _why(un: Unrolling, max_seconds: float | None) -> str:
    why = un.solver.reason_unknown()
    if max_seconds is not None and ("timeout" in why or "canceled" in why):
        return f"time limit {max_seconds:g} s reached"
    return f"solver gave up: {why}"
