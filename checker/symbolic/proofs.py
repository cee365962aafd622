"""Prove scenarios: every safety invariant for all depths, by two methods, or refuted by a trace.

:func:`prove_scenario` wires the engines together for one scenario:

0. the compiled machine enumerates every reachable state (breadth-first, no symmetry
   reduction).  This is only *guidance*: it says which invariants some reachable state breaks
   (and at what depth), and it is the data lemmas are mined from.  Nothing is proved by it;
2. every invariant broken in the reachable states is **refuted** by bounded model checking
   (Z3), to the depth where the enumeration saw it first, so its path has the shortest
   length, and the path is replayed on the compiled machine.  The trace *kept* (and written)
   is the explicit engine's shortest counterexample, the one ``kvproof check`` writes, which
   must have the same length: one canonical trace per claim, so ``prove`` and ``check`` never
   rewrite each other's committed traces (the two shortest paths often differ at step 1);
3. **method 1, an inductive invariant** (:func:`~.lemmas.block`): starting from nothing, every
   counterexample to induction Z3 finds (a state satisfying the lemmas so far that breaks the
   safety predicate, or that steps out of the lemmas) is unreachable, and is blocked by a clause
   generalised against the reachable states (a few of its slot values no reachable state shows
   together).  The loop ends only when Z3 answers *unsat* to both questions: the lemmas are then
   inductive and imply every open invariant.  Init ⇒ Inv is checked too, and the conjunction is
   saved as a certificate that ``kvproof certify`` re-checks with a fresh solver;
4. **method 2, k-induction** (:func:`~.kinduction.k_induction`) with a simple-path constraint,
   whose inductive step assumes a *different* strengthening: the greatest inductive subset of
   the facts of at most three slot values true of every reachable state (:func:`~.lemmas.mine`
   and :func:`~.lemmas.houdini`: a fixed template, not steered by any counterexample and not by
   the invariants; its inductiveness is itself an unsat answer).

When a method stops without a proof, its last counterexample to induction is kept
(:attr:`ProofReport.failures`, rendered by :mod:`.cti`): the state, the action and the
invariant or lemma the step breaks.

An invariant is ``proved`` only when both methods proved it.  Each method that does not finish
within its budget leaves its invariants *inconclusive*; a proof is never claimed without an
unsat answer.  Spacer is not part of ``prove``: within 10 s per question it proved 83 of the
153 invariants when it was tried; the parametric theorems use it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import z3

from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.checker.symbolic.bmc import EngineError, bmc, confirmed_path
from kvproof.checker.symbolic.certificate import write_certificate
from kvproof.checker.symbolic.cti import InductionFailure, from_block, from_k_induction
from kvproof.checker.explicit.search import Limits
from kvproof.checker.symbolic.kinduction import InductionOutcome, k_induction
from kvproof.checker.symbolic.lemmas import Reachable, block, clause_term, explore_all, houdini, mine
from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.traces import Trace, write_trace
from kvproof.checker.symbolic.transition import TransitionSystem

__all__ = ["ProofBudget", "InvariantVerdict", "ProofReport", "prove_scenario", "render_invariant",
           "StrengthenedInduction", "strengthened_k_induction"]


@dataclass(frozen=True)
class ProofBudget:
    """How far each method may go before it is inconclusive."""

    refute_depth: int = 24
    refute_seconds: float = 300.0
    lemma_seconds: float = 600.0
    induction_seconds: float = 300.0
    max_k: int = 40
    max_states: int = 2_000_000
    template_arity: int = 3


@dataclass
class InvariantVerdict:
    """One invariant of one scenario: ``verdict`` is ``proved`` (both methods), ``refuted``
    (with ``trace``) or ``inconclusive``; ``invariant`` and ``induction`` say what each method
    found (``proved``, ``inconclusive``, or ``-`` when the invariant was refuted)."""

    invariant: str
    expected: str
    verdict: str
    lemmas: str = "-"
    induction: str = "-"
    trace: Trace | None = None
    trace_path: Path | None = None

    @property
    def outcome(self):
        """The verdict as an outcome (:mod:`kvproof.checker.outcome`): refuted with its trace,
        proved, or inconclusive."""
        from kvproof.checker.outcome import Refuted, outcome_named

        return Refuted(self.trace) if self.verdict == "refuted" else outcome_named(self.verdict)

    @property
    def matches(self) -> bool:
        """Proved where ``verified`` was expected, refuted where ``violated`` was."""
        from kvproof.checker.outcome import judge

        return judge(self.outcome, self.expected) == "matched"


@dataclass
class ProofReport:
    """Every invariant of one scenario, what each method said, and the certificate written."""

    scenario: Scenario
    rows: list[InvariantVerdict] = field(default_factory=list)
    states: int = 0
    explore_seconds: float = 0.0
    lemma_seconds: float = 0.0
    lemma_count: int = 0
    lemma_rounds: int = 0
    lemma_reason: str = ""
    houdini_seconds: float = 0.0
    houdini_candidates: int = 0
    houdini_kept: int = 0
    induction_seconds: float = 0.0
    induction_k: int = 0
    induction_reason: str = ""
    refute_seconds: float = 0.0
    certificate: Path | None = None
    invariant_text: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failures: list[InductionFailure] = field(default_factory=list)


def prove_scenario(scenario: Scenario, budget: ProofBudget = ProofBudget(),
                   certificates_dir: str | Path | None = None, traces_dir: str | Path | None = None,
                   progress: Callable[[str], None] | None = None) -> ProofReport:
    """Prove or refute every invariant of ``scenario`` (see the module docstring).  ``progress``,
    if given, is told as each phase starts which claims it works on and by which method."""
    say = progress or (lambda text: None)
    spec = scenario.build()
    machine = Machine(spec)
    ts = TransitionSystem(spec)
    expected = scenario.expectations(spec)
    names = ts.invariants()
    report = ProofReport(scenario)
    rows = {n: InvariantVerdict(n, expected.get(n, "verified"), "inconclusive") for n in names}

    t0 = time.perf_counter()
    say(f"{scenario.name}: enumerating the reachable states (the oracle) for {len(names)} invariants")
    try:
        states, first_hit = explore_all(machine, budget.max_states)
    except RuntimeError as e:  # too many states to enumerate: neither method can start
        report.lemma_reason = report.induction_reason = str(e)
        report.rows = [rows[n] for n in names]
        return report
    report.states, report.explore_seconds = len(states), time.perf_counter() - t0
    broken = [n for n in names if n in first_hit]

    # refutation: bounded model checking to the depth where the enumeration saw the violation;
    # the trace kept is the explicit engine's (the one `kvproof check` writes), of the same length
    if broken:
        depth = max(budget.refute_depth, max(first_hit[n] for n in broken))
        say(f"{scenario.name}: bounded model checking to depth {depth} refutes {_names(broken)}")
        run = bmc(ts, [spec.claim(n) for n in broken], depth, budget.refute_seconds)
        report.refute_seconds += run.seconds
        canonical = _explicit_traces(scenario, broken, budget.max_states) if run.hits else {}
        for name, (actions, path) in run.hits.items():
            try:
                confirmed_path(machine, name, actions, path)
            except EngineError as e:
                report.errors.append(str(e))
                continue
            trace = canonical.get(name)
            if trace is None or len(trace) != len(actions):
                report.errors.append(f"{name}: bounded model checking found a violation in {len(actions)} steps, "
                                     f"the explicit engine " + (f"in {len(trace)}" if trace else "none"))
                continue
            row = rows[name]
            row.verdict, row.trace = "refuted", trace
            if traces_dir is not None:
                row.trace_path = write_trace(trace, traces_dir)
        for n in broken:
            if rows[n].verdict != "refuted" and n not in run.hits:
                report.errors.append(f"{n}: broken at depth {first_hit[n]} in the enumeration, but bounded "
                                     f"model checking found no trace ({run.stopped})")
    open_ = [n for n in names if n not in first_hit]
    if not open_:
        report.rows = [rows[n] for n in names]
        return report

    # method 1: an inductive invariant, blocked counterexample by counterexample
    say(f"{scenario.name}: method 1 (inductive invariant) proves {_names(open_)}")
    safe = z3.And(*[ts.safe(n, ts.pre) for n in open_])
    t0 = time.perf_counter()
    try:
        clauses, report.lemma_rounds = block(ts, states, [], safe, budget.lemma_seconds)
        inv = z3.And(*[clause_term(ts.pre, c) for c in clauses]) if clauses else z3.BoolVal(True)
        init_ok = _unsat(z3.And(ts.init(ts.pre), ts.typed(ts.pre), z3.Not(inv)))
        if not init_ok:
            raise TimeoutError("the lemmas do not hold initially")
        report.lemma_count = len(clauses)
        report.invariant_text = render_invariant(ts, inv) if clauses else ["true"]
        for n in open_:
            rows[n].lemmas = "proved"
        if certificates_dir is not None:
            report.certificate = write_certificate(certificates_dir, scenario, ts, inv, open_, method="lemmas")
    except EngineError as e:
        report.errors.append(str(e))
        for n in open_:
            rows[n].lemmas = "inconclusive"
    except TimeoutError as e:
        report.lemma_reason = str(e)
        for n in open_:
            rows[n].lemmas = "inconclusive"
        cti = getattr(e, "cti", None)
        if cti is not None:
            lemma = None if cti.lemma is None else _text(ts, clause_term(ts.pre, cti.lemma))
            report.failures.append(from_block(machine, cti, _broken(ts, cti.state, open_), lemma,
                                              Reachable(ts, states).core))
    report.lemma_seconds = time.perf_counter() - t0

    # method 2: k-induction, its step strengthened by the Houdini lemmas of the fixed template
    say(f"{scenario.name}: method 2 (k-induction, Houdini lemmas) proves {_names(open_)}")
    m2 = strengthened_k_induction(ts, states, open_, budget)
    report.houdini_candidates, report.houdini_kept = m2.candidates, m2.kept
    report.houdini_seconds = m2.houdini_seconds
    ind = m2.outcome
    report.induction_seconds, report.induction_k = ind.seconds, ind.k
    if ind.status == "proved":
        for n in open_:
            rows[n].induction = "proved"
    else:
        report.induction_reason = m2.reason
        for n in open_:
            rows[n].induction = "refuted" if ind.status == "refuted" else "inconclusive"
        if ind.cti is not None and ind.status == "inconclusive":
            report.failures.append(from_k_induction(machine, ind.cti, Reachable(ts, states).core))
    for n in open_:
        row = rows[n]
        if row.lemmas == "proved" and row.induction == "proved":
            row.verdict = "proved"
    report.rows = [rows[n] for n in names]
    return report


def _names(claims: list[str], shown: int = 3) -> str:
    """The claims a phase works on, for a progress line: the first few by name, then a count."""
    if len(claims) <= shown:
        return ", ".join(claims)
    return ", ".join(claims[:shown]) + f" and {len(claims) - shown} more"


@dataclass
class StrengthenedInduction:
    """Method 2's answer: the k-induction ``outcome``, the Houdini ``candidates`` mined and
    ``kept``, the seconds Houdini took, and ``reason`` when it is not a proof."""

    outcome: InductionOutcome
    candidates: int = 0
    kept: int = 0
    houdini_seconds: float = 0.0
    reason: str = ""


def strengthened_k_induction(ts: TransitionSystem, states, claims: list[str],
                             budget: ProofBudget = ProofBudget()) -> StrengthenedInduction:
    """Method 2 over ``claims`` (invariants, or witnesses meaning "never reached"): k-induction
    whose step assumes the greatest inductive subset (Houdini) of the template facts of
    ``states`` (the reachable states, used only to pick candidates)."""
    t0 = time.perf_counter()
    assume, candidates, kept, why = None, 0, 0, ""
    try:
        cands = mine(ts, states, arity=budget.template_arity)
        alive, _ = houdini(ts, cands, budget.induction_seconds)
        candidates, kept = len(cands), len(alive)
        assume = z3.And(*[clause_term(ts.pre, c) for c in alive]) if alive else None
    except TimeoutError as e:
        why = f"Houdini lemmas: {e}"
    houdini_seconds = time.perf_counter() - t0
    left = max(1.0, budget.induction_seconds - houdini_seconds)
    ind = k_induction(ts, claims, budget.max_k, left, assume=assume)
    if ind.status != "proved":
        why = "; ".join(x for x in (why, ind.reason or f"a violation is reachable at depth {ind.k}") if x)
    return StrengthenedInduction(ind, candidates, kept, houdini_seconds, why)


def _explicit_traces(scenario: Scenario, names: list[str], max_states: int) -> dict[str, Trace]:
    """The shortest counterexample of each invariant of ``names``, as the explicit engine finds
    it (:func:`~kvproof.checker.explicit.run.check_scenario`, the trace ``kvproof check`` writes): one canonical trace
    per claim, whichever command writes it."""
    report = check_scenario(scenario, Limits(max_states=max_states), only=names)
    return {row.claim: row.result.trace for row in report.claims if getattr(row.result, "trace", None) is not None}


def _broken(ts: TransitionSystem, state: bytes, names) -> list[str]:
    """The invariants of ``names`` that the concrete ``state`` breaks."""
    values = [(b, z3.BoolVal(state[slot] == v)) for slot, vals in enumerate(ts.pre)
              for v, b in vals.items() if not isinstance(b, bool)]
    return [n for n in names if z3.is_false(z3.simplify(z3.substitute(ts.safe(n, ts.pre), *values)))]


def _unsat(term: Any) -> bool:
    s = z3.SolverFor("QF_FD")
    s.add(term)
    return s.check() == z3.unsat


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
