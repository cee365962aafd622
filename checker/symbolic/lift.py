"""Proofs beyond enumeration at a fixed size: lemmas mined on a small instance, lifted by renaming.

``kvproof prove LARGE --lift-from SMALL`` proves the invariants of a configuration too large to
enumerate without enumerating it:

1. the small instance ``SMALL`` (same protocol, same engine, fewer requests or pages) is
   enumerated, and its template facts of at most three slot values (:func:`~.lemmas.mine`) are
   cut down to their greatest inductive subset there (:func:`~.lemmas.houdini`);
2. each surviving fact is **lifted** (:class:`Lifter`): instantiated under every injective
   renaming, into the larger instance, of the requests, pages and slots it mentions, an element
   going only to an element of the same kind (the protocol's :meth:`~kvproof.model.framework.Spec.index_sorts`:
   requests of the same tenant and prompt length).  Slots indexed by a renamed element move with
   it, values that name one (an owner, a KV content, a destination page) are renamed; every other
   index and value (chunks, ranks, clocks, generations, ``free``, ``old:<tenant>``) is kept, by
   label;
3. **Houdini on the larger instance** (Z3, its transition relation built from the spec as for
   every other proof; no state of it is enumerated) keeps the greatest inductive subset of the
   lifted candidates.  Two shortcuts only drop candidates sooner, never keep one: a candidate
   that a *sampled* reachable state breaks (a short breadth-first prefix and seeded random walks
   of the compiled machine) is dropped first, and after each counterexample to induction Z3
   returns, the states the compiled machine reaches from its post-state (and from renamings of
   it that are steps from states satisfying the candidates) drop the candidates they break;
   the loop still ends only on unsat;
4. the invariants are then cut down the same way, on top of the kept lemmas: the greatest set
   ``P`` of invariants with ``Init ⇒ Lemmas ∧ Safe_P`` and ``Lemmas ∧ Safe_P ∧ Next ⇒ Safe_P′``
   (each an unsat answer).  Every invariant of ``P`` is **proved** for the larger instance, at
   every depth: ``Lemmas ∧ Safe_P`` is an inductive invariant that implies it.  An invariant
   dropped is then tried by k-induction (:func:`~.kinduction.k_induction`) whose step assumes
   the kept lemmas and the invariants proved; one that neither closes is **inconclusive**, with
   the step that broke it (a state satisfying the lemmas and the other invariants, an action,
   the invariant it breaks).

A small instance must show what the invariant relates: with one request of a kind, no fact
about two requests of that kind is mined, and the larger instance's invariants that need one
stay inconclusive (two requests of one kind on two pages, lifted to three pages, proved every
invariant of the fixed admission scenario in one Houdini round; one of each kind proved 8 of 10).

Renaming is only a way to pick candidates: a renamed fact need not hold in the larger instance
(arrivals in order and lowest-free allocation tell elements apart), and Houdini drops those that
do not.  Nothing is proved without an unsat answer; a solver that gives up leaves everything
inconclusive.
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import z3

from kvproof.model.framework import Spec
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.checker.symbolic.certificate import write_certificate
from kvproof.checker.symbolic.cti import InductionFailure
from kvproof.checker.explicit.search import Limits, explore
from kvproof.checker.symbolic.kinduction import k_induction
from kvproof.checker.symbolic.lemmas import Clause, _Checker, clause_term, explore_all, houdini, mine
from kvproof.checker.states import named_values, state_changes
from kvproof.checker.symbolic.transition import TransitionSystem

__all__ = ["LiftError", "Lifter", "LiftBudget", "LiftRow", "LiftReport", "prove_lifted", "field_slots", "sample_states",
           "refuted_by"]


class LiftError(ValueError):
    """The two instances cannot be lifted between (one line: which field or sort differs)."""


def field_slots(layout) -> list[tuple[str, tuple[int, ...]]]:
    """``(field, index tuple)`` of every slot of ``layout``, in slot order (a row's sentinel has
    its last index equal to the last domain's size)."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for f in layout.fields:
        if not f.dims:
            out.append((f.name, ()))
            continue
        for k in range(f.width):
            lead, last = divmod(k, f.row)
            idx = [last]
            for d in reversed(f.dims[:-1]):
                lead, i = divmod(lead, d.size)
                idx.insert(0, i)
            out.append((f.name, tuple(idx)))
    return out


class Lifter:
    """Renames ground facts of the ``small`` spec instance into the ``large`` one.

    Both must be instances of one protocol whose fields have the same names, index domains and
    value domains; only the index sorts (:meth:`~kvproof.model.framework.Spec.index_sorts`) may
    differ in size.  Raises :class:`LiftError` otherwise."""

    def __init__(self, small: Spec, large: Spec, across_kinds: bool = False):
        self.across_kinds = across_kinds
        if type(small) is not type(large):
            raise LiftError(f"the two instances are of different protocols ({type(small).__name__} and "
                            f"{type(large).__name__})")
        ss = {s.domain.name: s for s in small.index_sorts()}
        sl = {s.domain.name: s for s in large.index_sorts()}
        if not ss:
            raise LiftError("the protocol declares no index sorts (Spec.index_sorts): nothing to rename lemmas over")
        if set(ss) != set(sl):
            raise LiftError(f"the two instances rename different sorts: {sorted(ss)} and {sorted(sl)}")
        self.small, self.large = small, large
        self.sorts = sorted(ss)
        self.ss, self.sl = ss, sl
        ls, ll = small.layout, large.layout
        self.slots = field_slots(ls)
        for f in ls.fields:
            g = ll.by_name.get(f.name)
            if g is None:
                raise LiftError(f"field {f.name}: not in the larger instance")
            if [d.name for d in f.dims] != [d.name for d in g.dims] or f.values.name != g.values.name:
                raise LiftError(f"field {f.name}: indexed or valued differently in the two instances")
            for d, e in zip(f.dims, g.dims):
                if d.name not in ss and d.size != e.size:
                    raise LiftError(f"field {f.name}: its index {d.name} has {d.size} elements in the smaller "
                                    f"instance and {e.size} in the larger; only {', '.join(self.sorts)} may grow")
        # per value domain: the sort its codes name, the small code's (element, role), the large
        # code of an (element, role), and every other code kept by label (or by number)
        self.refs: dict[str, tuple[str, tuple, dict]] = {}
        for name in self.sorts:
            for dom, refs in ss[name].refs.items():
                large_refs = sl[name].refs.get(dom)
                if large_refs is None:
                    raise LiftError(f"values {dom}: name a {name} in the smaller instance only")
                self.refs[dom] = (name, refs, {r: c for c, r in enumerate(large_refs) if r is not None})
        for f in ls.fields:
            dom, big = f.values, ll.by_name[f.name].values
            if dom.name not in self.refs and (dom.size, dom.labels) != (big.size, big.labels):
                raise LiftError(f"field {f.name}: its values ({dom.name}) differ between the two instances "
                                f"({dom.size} and {big.size} codes); only {', '.join(self.sorts)} may grow")
        self.kept: dict[str, dict[int, int]] = {}
        for f in ls.fields:
            dom, big = f.values, ll.by_name[f.name].values
            if dom.name in self.kept:
                continue
            refs = self.refs.get(dom.name, (None, (None,) * dom.size, {}))[1]
            large_refs = self.sl[self.refs[dom.name][0]].refs[dom.name] if dom.name in self.refs else (None,) * big.size
            out = {}
            for c in range(dom.size):
                if refs[c] is not None:
                    continue
                if dom.labels is not None and big.labels is not None:
                    if dom.labels[c] in big.labels:
                        d = big.labels.index(dom.labels[c])
                        if large_refs[d] is None:
                            out[c] = d
                elif c < big.size:
                    out[c] = c
            self.kept[dom.name] = out
        self.kinds_large = {name: {} for name in self.sorts}
        for name in self.sorts:
            for e, kind in enumerate(sl[name].kinds):
                self.kinds_large[name].setdefault(kind, []).append(e)

    def mentioned(self, clause: Clause) -> dict[str, list[int]]:
        """The elements of each sort ``clause`` mentions (by a slot's index or by a value)."""
        out: dict[str, set[int]] = {name: set() for name in self.sorts}
        layout = self.small.layout
        for slot, v in clause:
            fname, idx = self.slots[slot]
            f = layout.by_name[fname]
            for d, i in zip(f.dims, idx):
                if d.name in out:
                    out[d.name].add(i)
            ref = self.refs.get(f.values.name)
            if ref is not None and ref[1][v] is not None:
                out[ref[0]].add(ref[1][v][0])
        return {name: sorted(es) for name, es in out.items()}

    def renamings(self, clause: Clause) -> Iterable[dict[str, dict[int, int]]]:
        """Every injective renaming of the elements ``clause`` mentions into the larger
        instance, each element to one of its own kind (to any element with ``across_kinds``:
        a fact about two requests of different kinds is then also tried on two of one kind)."""
        per_sort = []
        for name, es in self.mentioned(clause).items():
            kinds = self.ss[name].kinds
            every = list(range(self.sl[name].domain.size))
            choices = [every if self.across_kinds else self.kinds_large[name].get(kinds[e], []) for e in es]
            per_sort.append([(name, dict(zip(es, images)))
                             for images in _injective(choices)])
        for combo in itertools.product(*per_sort):
            yield dict(combo)

    def rename(self, clause: Clause, sigma: dict[str, dict[int, int]]) -> Clause | None:
        """``clause`` under the renaming ``sigma``; ``None`` when one of its values does not
        exist in the larger instance (the fact is then vacuous there)."""
        ls, ll = self.small.layout, self.large.layout
        out = []
        for slot, v in clause:
            fname, idx = self.slots[slot]
            f = ls.by_name[fname]
            new_idx = tuple(sigma[d.name][i] if d.name in sigma else i for d, i in zip(f.dims, idx))
            ref = self.refs.get(f.values.name)
            if ref is not None and ref[1][v] is not None:
                e, role = ref[1][v]
                w = ref[2].get((sigma[ref[0]][e], role))
            else:
                w = self.kept[f.values.name].get(v)
            if w is None:
                return None
            out.append((ll.slot(fname, *new_idx), w))
        return tuple(sorted(out))

    def permutations(self, limit: int = 720) -> list[dict[str, dict[int, int]]]:
        """Renamings of the *larger* instance onto itself (each element to one of its kind),
        the identity first; at most ``limit`` (a seeded sample past it)."""
        per_sort = []
        for name in self.sorts:
            groups = list(self.kinds_large[name].values())
            maps = [{}]
            for g in groups:
                maps = [{**m, **dict(zip(g, p))} for m in maps for p in itertools.permutations(g)]
            per_sort.append([(name, m) for m in maps])
        out = [dict(combo) for combo in itertools.product(*per_sort)]
        if len(out) > limit:
            rest = random.Random(0).sample(out[1:], limit - 1)
            out = out[:1] + rest
        return out

    def permuter(self, sigma: dict[str, dict[int, int]]) -> Callable[[bytes], bytes]:
        """The state of the larger instance with its elements renamed by ``sigma`` (a
        permutation from :meth:`permutations`); sentinel slots stay."""
        ll = self.large.layout
        slots = field_slots(ll)
        target = list(range(ll.size))
        tables = []
        for slot, (fname, idx) in enumerate(slots):
            f = ll.by_name[fname]
            new = tuple(sigma[d.name].get(i, i) if d.name in sigma else i for d, i in zip(f.dims, idx))
            target[slot] = ll.slot(fname, *new)
            ref = self.refs.get(f.values.name)
            if ref is None:
                tables.append(None)
                continue
            large_refs = self.sl[ref[0]].refs[f.values.name]
            table = list(range(f.values.size))
            for c, r in enumerate(large_refs):
                if r is not None:
                    table[c] = ref[2][(sigma[ref[0]].get(r[0], r[0]), r[1])]
            tables.append(table)

        def apply(state: bytes) -> bytes:
            out = bytearray(len(state))
            for slot, v in enumerate(state):
                t = tables[slot]
                out[target[slot]] = v if t is None else t[v]
            return bytes(out)

        return apply

    def lift(self, clauses: Sequence[Clause]) -> list[Clause]:
        """Every renaming of every clause (:meth:`renamings`), without repeats, in order."""
        out: dict[Clause, None] = {}
        for c in clauses:
            for sigma in self.renamings(c):
                lifted = self.rename(c, sigma)
                if lifted is not None:
                    out[lifted] = None
        return list(out)


def sample_states(machine: Machine, prefix: int = 20000, walks: int = 200, walk_len: int = 200,
                  seed: int = 0) -> np.ndarray:
    """Reachable states of ``machine``, sampled, not enumerated: a breadth-first prefix of at
    most ``prefix`` states and ``walks`` seeded random walks of ``walk_len`` steps."""
    rows = explore(machine, Limits(max_states=prefix), claims=[], rows=True).rows
    seen = dict.fromkeys(rows)
    rng = random.Random(seed)
    for _ in range(walks):
        s = machine.init
        for _ in range(walk_len):
            succ = machine.successors(s)
            if not succ:
                break
            s = rng.choice(succ)[1]
            seen.setdefault(s, None)
    return np.frombuffer(b"".join(seen), dtype=np.uint8).reshape(len(seen), len(machine.init))


def refuted_by(states: np.ndarray, clauses: Sequence[Clause]) -> set[Clause]:
    """The clauses some row of ``states`` breaks (holds every value of the clause)."""
    cols: dict[tuple[int, int], np.ndarray] = {}
    out = set()
    for c in clauses:
        hit = None
        for lit in c:
            col = cols.get(lit)
            if col is None:
                col = cols[lit] = states[:, lit[0]] == lit[1]
            hit = col if hit is None else hit & col
        if hit.any():
            out.add(c)
    return out


def _injective(choices: list[list[int]]) -> Iterable[tuple[int, ...]]:
    """Every tuple picking one of ``choices[i]`` for each ``i``, no element twice."""
    if not choices:
        yield ()
        return
    for rest in _injective(choices[1:]):
        for x in choices[0]:
            if x not in rest:
                yield (x,) + rest


@dataclass(frozen=True)
class LiftBudget:
    """Budgets: the small instance's enumeration and the template's arity; Houdini's seconds on
    each instance; the seconds for cutting down the invariants (and for k-induction, up to
    ``max_k``); the sampled states of the larger instance (a breadth-first prefix and random
    walks) and the states explored from each counterexample to induction (``closure``);
    ``across_kinds`` renames an element to any element of its sort, not only its kind."""

    max_states: int = 2_000_000
    template_arity: int = 3
    small_seconds: float = 300.0
    large_seconds: float = 1200.0
    claim_seconds: float = 300.0
    sample_prefix: int = 20000
    sample_walks: int = 200
    sample_walk_len: int = 200
    closure: int = 2000
    max_k: int = 10
    across_kinds: bool = False


@dataclass
class LiftRow:
    """One invariant of the larger instance: ``verdict`` is ``proved`` or ``inconclusive``."""

    invariant: str
    expected: str
    verdict: str = "inconclusive"

    @property
    def outcome(self):
        """The verdict as an outcome (:mod:`kvproof.checker.outcome`): proved or inconclusive."""
        from kvproof.checker.outcome import outcome_named

        return outcome_named(self.verdict)

    @property
    def matches(self) -> bool:
        """Proved where ``verified`` was expected (an expected violation is never matched: it
        needs a trace, and this method gives none)."""
        from kvproof.checker.outcome import judge

        return judge(self.outcome, self.expected) == "matched"


@dataclass
class LiftReport:
    """What :func:`prove_lifted` found, and how long each phase took."""

    scenario: Scenario
    source: Scenario
    rows: list[LiftRow] = field(default_factory=list)
    small_states: int = 0
    small_candidates: int = 0
    small_kept: int = 0
    lifted: int = 0
    sampled: int = 0
    after_sampling: int = 0
    kept: int = 0
    houdini_rounds: int = 0
    claim_rounds: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    failures: list[InductionFailure] = field(default_factory=list)
    certificate: Path | None = None
    lemmas: list[Clause] = field(default_factory=list)
    by_induction: list[str] = field(default_factory=list)
    induction_k: int = 0
    induction_reason: str = ""

    @property
    def proved(self) -> list[str]:
        """The invariants proved for the larger instance."""
        return [r.invariant for r in self.rows if r.verdict == "proved"]


def prove_lifted(scenario: Scenario, source: Scenario, budget: LiftBudget = LiftBudget(),
                 certificates_dir: str | Path | None = None,
                 progress: Callable[[str], None] | None = None) -> LiftReport:
    """Prove the invariants of ``scenario`` with lemmas mined on ``source`` (a smaller instance)
    and lifted by renaming (see the module docstring); ``scenario`` is never enumerated.
    Raises :class:`LiftError` when the two cannot be lifted between."""
    say = progress or (lambda text: None)
    small, large = source.build(), scenario.build()
    lifter = Lifter(small, large, budget.across_kinds)
    ts = TransitionSystem(large)
    names = ts.invariants()
    expected = scenario.expectations(large)
    report = LiftReport(scenario, source, [LiftRow(n, expected.get(n, "verified")) for n in names])
    clock = report.seconds

    t0 = time.perf_counter()
    say(f"{source.name}: enumerating the smaller instance (the lemmas' source)")
    try:
        states, _ = explore_all(Machine(small), budget.max_states)
    except RuntimeError as e:
        report.reason = f"{source.name}: {e}"
        return report
    report.small_states = len(states)
    small_ts = TransitionSystem(small)
    cands = mine(small_ts, states, arity=budget.template_arity)
    clock["small"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    say(f"{source.name}: Houdini over {len(cands)} template facts")
    try:
        alive, _ = houdini(small_ts, cands, budget.small_seconds)
    except TimeoutError as e:
        report.reason = f"{source.name}: {e}"
        return report
    report.small_candidates, report.small_kept = len(cands), len(alive)
    clock["small_houdini"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    lifted = lifter.lift(alive)
    report.lifted = len(lifted)
    clock["lift"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if budget.sample_prefix or budget.sample_walks:
        say(f"{scenario.name}: dropping the lifted lemmas that sampled runs break ({budget.sample_walks} random walks)")
        sample = sample_states(Machine(large), budget.sample_prefix, budget.sample_walks, budget.sample_walk_len)
        broken = refuted_by(sample, lifted)
        lifted = [c for c in lifted if c not in broken]
        report.sampled = len(sample)
    report.after_sampling = len(lifted)
    clock["sample"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    say(f"{scenario.name}: Houdini over {len(lifted)} lifted lemmas (Z3, no enumeration)")
    ck = _Checker(ts, budget.large_seconds)
    try:
        kept, report.houdini_rounds = _houdini(ts, ck, lifted, t0 + budget.large_seconds, say,
                                              Machine(large), budget.closure,
                                              [lifter.permuter(p) for p in lifter.permutations()[1:]])
    except TimeoutError as e:
        report.reason = f"{scenario.name}: {e}"
        clock["houdini"] = time.perf_counter() - t0
        return report
    report.kept, report.lemmas = len(kept), kept
    clock["houdini"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    say(f"{scenario.name}: which invariants the kept lemmas make inductive")
    try:
        proved, failures = _claims(ts, ck, kept, names, budget.claim_seconds, report)
    except TimeoutError as e:
        report.reason = f"{scenario.name}: {e}"
        clock["claims"] = time.perf_counter() - t0
        return report
    clock["claims"] = time.perf_counter() - t0
    for row in report.rows:
        if row.invariant in proved:
            row.verdict = "proved"
    rest = [n for n in names if n not in proved]
    if rest and budget.max_k > 1:
        t0 = time.perf_counter()
        say(f"{scenario.name}: k-induction (k <= {budget.max_k}) of {len(rest)} invariants, "
            f"its step assuming the kept lemmas and the invariants proved")
        assume = z3.And(*[clause_term(ts.pre, c) for c in kept], *[ts.safe(n, ts.pre) for n in proved])
        ind = k_induction(ts, rest, budget.max_k, budget.claim_seconds, assume=assume)
        clock["k_induction"] = time.perf_counter() - t0
        report.induction_k = ind.k
        if ind.status == "proved":
            report.by_induction = rest
            for row in report.rows:
                if row.invariant in rest:
                    row.verdict = "proved"
            failures = []
        else:
            report.induction_reason = (ind.reason if ind.status == "inconclusive" else
                                       f"a state breaking one of them is reached in {ind.k} steps from Init "
                                       "(the base case; no trace is kept by this method)")
    if failures:
        machine = Machine(large)
        layout = large.layout
        for pre, aid, post, broken in failures:
            report.failures.append(InductionFailure(
                "lifted lemmas", named_values(layout, pre), None if aid is None else machine.label(aid),
                [] if post is None else state_changes(layout, pre, post), broken, [], []))
        report.reason = (f"the {len(kept)} lifted lemmas Houdini kept do not make "
                         f"{', '.join(n for n in names if n not in proved)} inductive"
                         + (f"; k-induction: {report.induction_reason}" if report.induction_reason else ""))
    if proved and certificates_dir is not None:
        inv = z3.And(*[clause_term(ts.pre, c) for c in kept], *[ts.safe(n, ts.pre) for n in proved])
        report.certificate = write_certificate(certificates_dir, scenario, ts, inv, proved, method="lifted-lemmas")
    return report


def _images(machine: Machine, perms: Sequence[Callable[[bytes], bytes]], pre: bytes, post: bytes,
            alive: list[Clause]) -> list[bytes]:
    """The renamings ``g(post)`` of a counterexample to induction ``pre -> post`` for which
    ``g(pre)`` satisfies every clause of ``alive`` and ``g(post)`` is one of its successors
    on the compiled machine: counterexamples to induction as well."""
    out = []
    for g in perms:
        p, q = g(pre), g(post)
        if q == post or any(all(p[i] == v for i, v in c) for c in alive):
            continue
        if any(u == q for _, u in machine.successors(p)):
            out.append(q)
    return out


def _closure(machine: Machine, alive: list[Clause], frontier: list[bytes], limit: int) -> list[Clause]:
    """``alive`` without every clause that some state breaks which is reached, in at most
    ``limit`` states explored breadth-first by the compiled machine, from the states of
    ``frontier``: the first is the post-state of a step from a state satisfying ``alive``,
    and each state explored satisfies what is left of ``alive`` once the clauses it breaks are
    dropped, so a step from it is a counterexample to induction too (sound: the greatest
    inductive subset keeps only clauses true after every step from a state satisfying it)."""
    by_first: dict[tuple[int, int], list[Clause]] = {}
    for c in alive:
        by_first.setdefault(c[0], []).append(c)
    dead: set[Clause] = set()
    seen = set(frontier)
    queue = list(frontier)
    n = 0
    while queue and n <= limit:
        t = queue.pop(0)
        n += 1
        for i, v in enumerate(t):
            for c in by_first.get((i, v), ()):
                if c not in dead and all(t[j] == w for j, w in c[1:]):
                    dead.add(c)
        if n > limit:
            break
        for _, u in machine.successors(t):
            if u not in seen:
                seen.add(u)
                queue.append(u)
    return [c for c in alive if c not in dead]


def _houdini(ts: TransitionSystem, ck: _Checker, candidates: Sequence[Clause], deadline: float,
             say: Callable[[str], None], machine: Machine, closure: int = 0,
             perms: Sequence[Callable[[bytes], bytes]] = ()) -> tuple[list[Clause], int]:
    """:func:`~.lemmas.houdini` with a deadline and a progress line per round: the greatest
    inductive subset of ``candidates`` (those false initially dropped first).  After each
    counterexample to induction Z3 finds, up to ``closure`` states reached from its post-state
    by the compiled machine drop the clauses they break too (:func:`_closure`), and so does
    every renaming by ``perms`` of the step that the compiled machine confirms is a step from a
    state satisfying the clauses (:func:`_images`); the result is
    still the solver's: the loop ends only on unsat."""
    init = ts.spec.init_state()
    alive = [c for c in dict.fromkeys(candidates) if not all(init[i] == v for i, v in c)]
    rounds = 0
    while alive:
        rounds += 1
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError(f"Houdini: time limit reached with {len(alive)} lemmas left, round {rounds}")
        ck.s.set("timeout", max(1, int(left * 1000)))
        pre = [ck.tracked(c) for c in alive]
        goal = ck.literal(z3.Or(*[z3.Not(clause_term(ck.ys, c)) for c in alive]))
        t = time.perf_counter()
        r = ck.s.check(*pre, goal)
        if r == z3.unsat:
            break
        if r != z3.sat:
            raise TimeoutError(f"Houdini: solver gave up ({ck.s.reason_unknown().splitlines()[0][:120]}) in round "
                               f"{rounds}, {len(alive)} of {len(candidates)} lemmas left")
        model = ck.s.model()
        before = len(alive)
        pre_state, post = ts.decode_state(model, ck.xs), ts.decode_state(model, ck.ys)
        frontier = [post] + _images(machine, perms, pre_state, post, alive)
        alive = _closure(machine, alive, frontier, closure)
        say(f"{ts.spec.__class__.__name__}: Houdini round {rounds}: {before - len(alive)} dropped, "
            f"{len(alive)} left ({time.perf_counter() - t:.1f} s)")
    return alive, rounds


def _claims(ts: TransitionSystem, ck: _Checker, kept: list[Clause], names: list[str], max_seconds: float,
            report: LiftReport) -> tuple[list[str], list[tuple[bytes, int | None, bytes | None, list[str]]]]:
    """The greatest set of ``names`` that, with the (inductive) ``kept`` lemmas, is inductive:
    those holding initially, then, while a step from a state satisfying the lemmas and the
    set breaks some of the set, those it breaks are dropped.  Returns the set and, per drop,
    ``(state, action, next state, invariants broken)``."""
    s0 = z3.SolverFor("QF_FD")
    s0.set("timeout", max(1, int(max_seconds * 1000)))
    s0.add(ts.init(ts.pre), ts.typed(ts.pre))
    failures = []
    live = []
    for n in names:
        r = s0.check(z3.Not(ts.safe(n, ts.pre)))
        if r == z3.unknown:
            raise TimeoutError(f"solver gave up on Init => {n}")
        if r == z3.sat:
            failures.append((ts.decode_state(s0.model(), ts.pre), None, None, [n]))
        else:
            live.append(n)
    ck.s.set("timeout", max(1, int(max_seconds * 1000)))
    pre = [ck.tracked(c) for c in kept]
    lits = {n: ck.literal(ts.safe(n, ck.xs)) for n in names}
    while live:
        report.claim_rounds += 1
        goal = ck.literal(z3.Or(*[z3.Not(ts.safe(n, ck.ys)) for n in live]))
        r = ck.s.check(*pre, *[lits[n] for n in live], goal)
        if r == z3.unsat:
            break
        if r != z3.sat:
            raise TimeoutError(f"solver gave up ({ck.s.reason_unknown().splitlines()[0][:120]})")
        m = ck.s.model()
        broken = [n for n in live if z3.is_false(m.eval(ts.safe(n, ck.ys), model_completion=True))]
        failures.append((ts.decode_state(m, ck.xs), m.eval(ts.tag("pre"), model_completion=True).as_long(),
                         ts.decode_state(m, ck.ys), broken))
        live = [n for n in live if n not in broken]
    return live, failures
