"""Prove scenarios: every safety invariant for all depths, by two methods, or refuted by a trace.

:func:`prove_scenario` wires the Z3 engines together for one scenario:

1. the conjunction of the invariants is given to Spacer (Horn clauses).  When Spacer finds it
   violated, bounded model checking finds the shortest violation (up to ``refute_depth``
   steps), which is replayed on the compiled machine and kept as a trace; the refuted
   invariants leave the conjunction and Spacer tries again.  When Spacer proves what is left,
   its inductive invariant is saved as a certificate under ``certificates_dir``.  When Spacer
   gives up, bounded model checking still searches for violations, so a buggy scenario is
   refuted with a trace rather than left unproved;
2. the invariants left are proved again, independently, by k-induction with a simple-path
   constraint.

Each method that does not finish within its budget leaves its invariants *inconclusive*; a
proof is never claimed without an unsat answer.  If a method finds the conjunction reachable
beyond ``refute_depth``, bounded model checking is resumed until the violation is found.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3

from ..model.machine import Machine
from ..spec.scenario import Scenario
from .bmc import EngineError, bmc, confirmed_path
from .certificate import write_certificate
from .horn import spacer_prove
from .kinduction import k_induction
from .traces import Trace, write_trace
from .transition import TransitionSystem

__all__ = ["ProofBudget", "InvariantVerdict", "ProofReport", "prove_scenario", "render_invariant"]


@dataclass(frozen=True)
class ProofBudget:
    """How far each method may go before it is inconclusive."""

    refute_depth: int = 24
    refute_seconds: float = 120.0
    spacer_seconds: float = 60.0
    induction_seconds: float = 60.0
    max_k: int = 40


@dataclass
class InvariantVerdict:
    """One invariant of one scenario: ``verdict`` is ``proved`` (both methods), ``refuted``
    (with ``trace``) or ``inconclusive``; ``spacer`` and ``induction`` say what each method
    found (``proved``, ``inconclusive``, or ``-`` when the invariant was refuted first)."""

    invariant: str
    expected: str
    verdict: str
    spacer: str = "-"
    induction: str = "-"
    trace: Trace | None = None
    trace_path: Path | None = None

    @property
    def matches(self) -> bool:
        """Proved where ``verified`` was expected, refuted where ``violated`` was."""
        return {"proved": "verified", "refuted": "violated"}.get(self.verdict) == self.expected


@dataclass
class ProofReport:
    """Every invariant of one scenario, what each method said, and the certificate written."""

    scenario: Scenario
    rows: list[InvariantVerdict] = field(default_factory=list)
    spacer_seconds: float = 0.0
    spacer_reason: str = ""
    induction_seconds: float = 0.0
    induction_k: int = 0
    induction_reason: str = ""
    refute_seconds: float = 0.0
    certificate: Path | None = None
    invariant_text: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def prove_scenario(scenario: Scenario, budget: ProofBudget = ProofBudget(),
                   certificates_dir: str | Path | None = None, traces_dir: str | Path | None = None) -> ProofReport:
    """Prove or refute every invariant of ``scenario`` (see the module docstring)."""
    spec = scenario.build()
    machine = Machine(spec)
    ts = TransitionSystem(spec)
    expected = scenario.expectations(spec)
    names = ts.invariants()
    report = ProofReport(scenario)
    rows = {n: InvariantVerdict(n, expected.get(n, "verified"), "inconclusive") for n in names}

    def refute(depth: int, seconds: float, first_only: bool) -> None:
        claims = [spec.claim(n) for n in names if rows[n].verdict != "refuted"]
        run = bmc(ts, claims, depth, seconds, stop_at_first_hit=first_only)
        report.refute_seconds += run.seconds
        for name, (actions, states) in run.hits.items():
            try:
                replayed = confirmed_path(machine, name, actions, states)
            except EngineError as e:
                report.errors.append(str(e))
                continue
            trace = Trace(scenario, machine, name, "counterexample", actions, replayed)
            row = rows[name]
            row.verdict, row.trace = "refuted", trace
            if traces_dir is not None:
                row.trace_path = write_trace(trace, traces_dir)

    def open_now() -> list[str]:
        return [n for n in names if rows[n].verdict != "refuted"]

    # Spacer on the conjunction; each refutation is turned into shortest traces by BMC and the
    # refuted invariants leave the conjunction, until Spacer proves what is left or gives up.
    proved: dict[str, Any] = {}  # invariant name -> an inductive invariant implying it
    horn = None
    while open_now():
        before = len(open_now())
        horn = spacer_prove(ts, open_now(), budget.spacer_seconds)
        report.spacer_seconds += horn.seconds
        if horn.status != "refuted":
            break
        refute(budget.refute_depth, budget.refute_seconds, first_only=True)
        if len(open_now()) == before:
            break
    if horn is not None and horn.status == "proved":
        proved = {n: horn.invariant for n in open_now()}
    elif open_now():
        # one invariant at a time: smaller questions, each with its own budget
        reasons = set()
        for n in open_now():
            one = spacer_prove(ts, [n], budget.spacer_seconds)
            report.spacer_seconds += one.seconds
            if one.status == "proved":
                proved[n] = one.invariant
            else:
                reasons.add(one.reason or "Spacer finds a violation")
        unresolved = [n for n in open_now() if n not in proved]
        if unresolved:
            # still look for violations, so that a buggy scenario is refuted with a trace
            refute(budget.refute_depth, budget.refute_seconds, first_only=False)
            left = [n for n in open_now() if n not in proved]
            if left:
                report.spacer_reason = (f"no inductive invariant for {', '.join(left)}: "
                                        + "; ".join(sorted(reasons)))
    open_ = open_now()
    if open_:
        for n in open_:
            rows[n].spacer = "proved" if n in proved else "inconclusive"
        done = [n for n in open_ if n in proved]
        if done:
            invariant = z3.And(*{id(t): t for t in (proved[n] for n in done)}.values())
            invariant = z3.simplify(invariant)
            report.invariant_text = render_invariant(ts, invariant)
            if certificates_dir is not None:
                report.certificate = write_certificate(certificates_dir, scenario, ts, invariant, done)
        ind = k_induction(ts, open_, budget.max_k, budget.induction_seconds)
        report.induction_seconds, report.induction_k = ind.seconds, ind.k
        if ind.status == "proved":
            for n in open_:
                rows[n].induction = "proved"
        else:
            report.induction_reason = ind.reason or f"a violation is reachable at depth {ind.k}"
            for n in open_:
                rows[n].induction = "refuted" if ind.status == "refuted" else "inconclusive"
        for n in open_:
            row = rows[n]
            if row.spacer == "proved" and row.induction == "proved":
                row.verdict = "proved"
    report.rows = [rows[n] for n in names]
    return report


_BIT = re.compile(r"^(?P<field>\w+)\[(?P<k>\d+)\]=(?P<v>\d+)@pre$")


def _atom(ts: TransitionSystem, name: str) -> str:
    m = _BIT.match(name)
    if not m:
        return name
    f = ts.layout.by_name[m["field"]]
    k, v = int(m["k"]), int(m["v"])
    if not f.dims:
        return f"{f.name} = {f.values.label(v)}"
    row = getattr(f, "row", f.dims[-1].size)  # slots per row, sentinel included
    lead, last = divmod(k, row) if len(f.dims) > 1 else (0, k)
    parts = []
    for d in reversed(f.dims[:-1]):
        lead, i = divmod(lead, d.size)
        parts.insert(0, str(d.label(i)))
    parts.append(str(f.dims[-1].label(last)) if last < f.dims[-1].size else "none")
    if len(f.dims) > 1:
        parts[-1] = f"{f.dims[-1].name} {parts[-1]}"
    return f"{f.name}[{', '.join(parts)}] = {f.values.label(v)}"


def _text(ts: TransitionSystem, t: Any) -> str:
    if z3.is_true(t):
        return "true"
    if z3.is_false(t):
        return "false"
    if z3.is_const(t):
        return _atom(ts, t.decl().name())
    if z3.is_not(t):
        inner = t.arg(0)
        if z3.is_const(inner):
            return _atom(ts, inner.decl().name()).replace(" = ", " ≠ ")
        return f"¬({_text(ts, inner)})"
    if z3.is_and(t):
        return " ∧ ".join(_paren(ts, a) for a in t.children())
    if z3.is_or(t):
        negs = [a for a in t.children() if z3.is_not(a)]
        poss = [a for a in t.children() if not z3.is_not(a)]
        if negs and poss:  # a clause reads best as an implication
            lhs = " ∧ ".join(_paren(ts, a.arg(0)) for a in negs)
            rhs = " ∨ ".join(_paren(ts, a) for a in poss)
            return f"{lhs} ⇒ {rhs}"
        return " ∨ ".join(_paren(ts, a) for a in t.children())
    return str(t)


def _paren(ts: TransitionSystem, t: Any) -> str:
    s = _text(ts, t)
    return f"({s})" if (z3.is_and(t) or z3.is_or(t)) and len(t.children()) > 1 else s


def render_invariant(ts: TransitionSystem, term: Any) -> list[str]:
    """The inductive invariant as readable lemmas, one per conjunct, grouped by the first field
    each mentions (``owner[p0] = R0 ⇒ d_phase[R0] = waiting ∨ ...``)."""
    conjuncts = list(term.children()) if z3.is_and(term) else [term]
    lines = [_text(ts, c) for c in conjuncts]
    order = {f.name: i for i, f in enumerate(ts.layout.fields)}

    def key(line: str) -> tuple[int, str]:
        m = re.match(r"[¬(]*(\w+)", line)
        return (order.get(m.group(1), len(order)) if m else len(order), line)

    return sorted(lines, key=key)
