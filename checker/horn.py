"""Unbounded proofs by constrained Horn clauses, solved by Z3's Spacer engine (IC3/PDR).

The safety question "is a state breaking the invariants reachable?" becomes three clauses over
an unknown predicate ``Inv`` on the one-hot state bits of a
:class:`~.transition.TransitionSystem`::

    Init(x)                          -> Inv(x)
    Inv(x) & Typed(x) & Next(x, y)   -> Inv(y)
    Inv(x) & Typed(x) & not Safe(x)  -> false

``sat`` means Spacer found an interpretation of ``Inv``: an inductive invariant, nobody wrote
it, and it is returned as a term over the template pre-state so it can be printed and stored as
a certificate.  ``unsat`` means a bad state is reachable (the caller then finds a shortest trace
by bounded model checking).  A timeout or ``unknown`` is neither.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import z3

from kvproof.checker.transition import TransitionSystem

__all__ = ["HornOutcome", "spacer_prove"]


@dataclass
class HornOutcome:
    """``status`` is ``proved`` (with ``invariant``), ``refuted`` or ``unknown`` (``reason``)."""

    status: str
    invariant: Any = None
    seconds: float = 0.0
    reason: str = ""


def _valid(term: Any) -> bool:
    s = z3.SolverFor("QF_FD")
    s.add(z3.Not(term))
    return s.check() == z3.unsat


def _quantified(term: Any) -> bool:
    seen, stack = set(), [term]
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_quantifier(t):
            return True
        stack.extend(t.children())
    return False


def spacer_prove(ts: TransitionSystem, invariants: Sequence[str], max_seconds: float | None = None) -> HornOutcome:
    """Ask Spacer for an inductive invariant implying every one of ``invariants``."""
    start = time.perf_counter()
    xs, ys, tag = ts.pre, ts.state("post"), ts.tag("pre")
    bx, by = ts.bits(xs), ts.bits(ys)
    inv = z3.Function("Inv", *[z3.BoolSort()] * len(bx), z3.BoolSort())
    safe = z3.And(*[ts.safe(name, xs) for name in invariants])
    if _valid(z3.Implies(ts.typed(xs), safe)):
        # true of every typed state (e.g. a claim about rejected requests where none is
        # over-long): the type invariant is the inductive invariant, no search needed
        return HornOutcome("proved", z3.BoolVal(True), time.perf_counter() - start)
    s = z3.SolverFor("HORN")
    if max_seconds is not None:
        s.set("timeout", max(1, int(max_seconds * 1000)))
    s.add(z3.ForAll(bx, z3.Implies(ts.init(xs), inv(*bx))))
    s.add(z3.ForAll(bx + by + [tag], z3.Implies(z3.And(inv(*bx), ts.typed(xs), ts.step(xs, ys, tag)), inv(*by))))
    s.add(z3.ForAll(bx, z3.Implies(z3.And(inv(*bx), ts.typed(xs), z3.Not(safe)), False)))
    verdict = s.check()
    seconds = time.perf_counter() - start
    if verdict == z3.sat:
        term = z3.simplify(s.model().eval(inv(*bx)))  # no model completion: the bits stay symbolic
        if _quantified(term):
            return HornOutcome("unknown", None, seconds, "Spacer's invariant is quantified; not kept as a proof")
        return HornOutcome("proved", term, seconds)
    if verdict == z3.unsat:
        return HornOutcome("refuted", None, seconds)
    why = s.reason_unknown()
    if max_seconds is not None and ("timeout" in why or "canceled" in why):
        why = f"Spacer found no invariant within {max_seconds:g} s"
    return HornOutcome("unknown", None, seconds, why)
