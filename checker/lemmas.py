"""Inductive lemmas mined from the reachable states and confirmed by Z3 (a Houdini loop).

The explicit engine enumerates every reachable state of a scenario; what those states have in
common is a *candidate* invariant, and Z3 decides which candidates are actually inductive:

1. **Mining** (:func:`mine`): over the one-hot state bits, every *unary* fact "slot ``i`` never
   holds ``a``" and every *pairwise* fact "slots ``i`` and ``j`` never hold ``a`` and ``b``
   together" that is true of every reachable state (a binary clause
   ``¬(x_i = a ∧ x_j = b)``).  Candidates are only guesses: they are true of the states
   found, nothing more.
2. **Houdini** (:func:`houdini`): one incremental SAT solver holds ``Typed(x) ∧ Next(x, y) ∧
   Typed(y)`` and every candidate over ``x`` behind a tracking literal; it is asked for a step
   from a state satisfying all candidates still alive to one breaking some of them.  Each
   model drops every candidate it breaks; the loop ends when the answer is *unsat*: the
   conjunction of what is left is inductive (and holds initially, checked too).  Only an
   unsat answer ends it, so what it returns is proved, not guessed.
3. **Triples** (:func:`strengthen`): when the pairwise lemmas do not imply a safety predicate,
   the counterexample to induction (a state satisfying the lemmas and breaking the predicate,
   unreachable by construction) is blocked by the three-slot facts it breaks, mined the same
   way on the slots the predicate and the counterexample mention, and Houdini runs again.

The result, :class:`Lemmas`, is a conjunction of clauses over the template pre-state that is
checked inductive (Init ⇒ L, L ∧ Next ⇒ L′): both proof methods of :mod:`.proofs` may assume
it of every reachable state.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import z3

from .bmc import EngineError
from .transition import TransitionSystem

__all__ = ["Lemmas", "reachable_states", "explore_all", "mine", "houdini", "strengthen", "block", "clause_term",
           "inductive_lemmas"]

Clause = tuple  # ((slot, value), ...): "not all of these at once"


@dataclass
class Lemmas:
    """An inductive conjunction of clauses (each: the listed slot values never all hold)."""

    clauses: list[Clause]
    candidates: int = 0
    rounds: int = 0
    seconds: float = 0.0
    states: int = 0
    triples: int = 0
    notes: list[str] = field(default_factory=list)

    def term(self, ts: TransitionSystem, xs=None) -> Any:
        """The lemmas as one Z3 term over ``xs`` (default: the template pre-state)."""
        xs = ts.pre if xs is None else xs
        return z3.And(*[clause_term(xs, c) for c in self.clauses]) if self.clauses else z3.BoolVal(True)


def _bit(xs, slot: int, v: int) -> Any:
    b = xs[slot].get(v, False)
    return z3.BoolVal(b) if isinstance(b, bool) else b


def clause_term(xs, clause: Clause) -> Any:
    """``¬(x_i = a ∧ x_j = b ∧ …)`` as a disjunction of negated bits."""
    return z3.Or(*[z3.Not(_bit(xs, s, v)) for s, v in clause]) if len(clause) > 1 else z3.Not(_bit(xs, *clause[0]))


def reachable_states(machine: Any, max_states: int = 2_000_000) -> np.ndarray:
    """Every state reachable from ``machine.init`` (no symmetry reduction), one row per state."""
    return explore_all(machine, max_states)[0]


def explore_all(machine: Any, max_states: int = 2_000_000) -> tuple[np.ndarray, dict[str, int]]:
    """Every reachable state (breadth-first, no symmetry reduction), and for each claim of
    ``machine.claims`` that hits somewhere, the depth of its first hit (an invariant broken, a
    witness reached; a quiescent claim only where no action is enabled)."""
    init = machine.init
    seen = {init}
    frontier = [init]
    succ = machine.successors
    claims = machine.claims
    hit: dict[str, int] = {}
    depth = 0

    def note(mask: int) -> None:
        i = 0
        while mask:
            if mask & 1 and claims[i].name not in hit:
                hit[claims[i].name] = depth
            mask >>= 1
            i += 1

    while frontier:
        nxt = []
        for s in frontier:
            note(machine.hits(s))
            out = succ(s)
            if not out:
                note(machine.quiescent_hits(s))
            for _, t in out:
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt
        depth += 1
        if len(seen) > max_states:
            raise RuntimeError(f"more than {max_states} reachable states: too many to mine lemmas from")
    rows = np.frombuffer(b"".join(seen), dtype=np.uint8).reshape(len(seen), len(init))
    return rows, hit


def _free_slots(ts: TransitionSystem) -> list[int]:
    return [i for i, vals in enumerate(ts.pre) if any(not isinstance(b, bool) for b in vals.values())]


def mine(ts: TransitionSystem, states: np.ndarray, slots: Sequence[int] | None = None) -> list[Clause]:
    """Unary and pairwise clauses over ``slots`` (default: every non-sentinel slot) true of every
    row of ``states``."""
    free = _free_slots(ts) if slots is None else list(slots)
    out: list[Clause] = []
    seen_vals = {}
    for i in free:
        vals = set(np.unique(states[:, i]).tolist())
        seen_vals[i] = sorted(vals)
        for v in ts.pre[i]:
            if v not in vals:
                out.append(((i, v),))
    varying = [i for i in free if len(seen_vals[i]) > 1]
    for a, i in enumerate(varying):
        di = int(states[:, i].max()) + 1
        for j in varying[a + 1:]:
            dj = int(states[:, j].max()) + 1
            code = states[:, i].astype(np.int64) * dj + states[:, j]
            present = np.zeros(di * dj, dtype=bool)
            present[np.unique(code)] = True
            for va in seen_vals[i]:
                for vb in seen_vals[j]:
                    if not present[va * dj + vb]:
                        out.append(((i, va), (j, vb)))
    return out


def _holds(values: dict, clause: Clause) -> bool:
    return not all(values.get((s, v), False) for s, v in clause)


class _Checker:
    """One incremental solver with Typed(x) ∧ Next(x, y) ∧ Typed(y)."""

    def __init__(self, ts: TransitionSystem, max_seconds: float | None):
        self.ts = ts
        self.xs, self.ys = ts.pre, ts.state("post")
        self.s = z3.SolverFor("QF_FD")
        if max_seconds is not None:
            self.s.set("timeout", max(1, int(max_seconds * 1000)))
        self.s.add(ts.typed(self.xs), ts.typed(self.ys), ts.step(self.xs, self.ys, ts.tag("pre")))
        self.track: dict[Clause, Any] = {}
        self.n = 0

    def literal(self, term: Any) -> Any:
        self.n += 1
        b = z3.Bool(f"kvproof_h{self.n}")
        self.s.add(z3.Implies(b, term))
        return b

    def tracked(self, clause: Clause) -> Any:
        if clause not in self.track:
            self.track[clause] = self.literal(clause_term(self.xs, clause))
        return self.track[clause]

    def post_values(self, model: z3.ModelRef) -> dict:
        out = {}
        for slot, vals in enumerate(self.ys):
            for v, b in vals.items():
                out[(slot, v)] = b if isinstance(b, bool) else z3.is_true(model.eval(b, model_completion=True))
        return out


def houdini(ts: TransitionSystem, candidates: Sequence[Clause], max_seconds: float | None = None,
            checker: _Checker | None = None) -> tuple[list[Clause], int]:
    """The largest inductive subset of ``candidates`` (each true initially): drop every
    candidate a step from the others breaks, until Z3 answers unsat.  Returns (clauses, rounds);
    raises ``TimeoutError`` if the solver gives up."""
    ck = checker or _Checker(ts, max_seconds)
    alive = list(dict.fromkeys(candidates))
    init = ts.spec.init_state()
    alive = [c for c in alive if _holds({(s, v): init[s] == v for s, v in c}, c)]
    rounds = 0
    while alive:
        rounds += 1
        pre = [ck.tracked(c) for c in alive]
        goal = ck.literal(z3.Or(*[z3.Not(clause_term(ck.ys, c)) for c in alive]))
        r = ck.s.check(*pre, goal)
        if r == z3.unsat:
            break
        if r != z3.sat:
            raise TimeoutError(f"Houdini: solver gave up ({ck.s.reason_unknown().splitlines()[0][:120]})")
        vals = ck.post_values(ck.s.model())
        alive = [c for c in alive if _holds(vals, c)]
    return alive, rounds


def _cti(ts: TransitionSystem, lemmas: Any, safe: Any, max_seconds: float | None) -> Any:
    """A typed state satisfying ``lemmas`` and breaking ``safe``, or ``None``."""
    s = z3.SolverFor("QF_FD")
    if max_seconds is not None:
        s.set("timeout", max(1, int(max_seconds * 1000)))
    s.add(ts.typed(ts.pre), lemmas, z3.Not(safe))
    r = s.check()
    if r == z3.unsat:
        return None
    if r != z3.sat:
        raise TimeoutError(f"solver gave up ({s.reason_unknown()})")
    return s.model()


def _support(term: Any) -> set[int]:
    """Slots whose bits occur in ``term``."""
    names, seen, stack = set(), set(), [term]
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.sort() == z3.BoolSort() and "@pre" in t.decl().name():
            names.add(t.decl().name())
        stack.extend(t.children())
    return names


def strengthen(ts: TransitionSystem, states: np.ndarray, lemmas: list[Clause], safe: Any,
               max_seconds: float | None = None, max_rounds: int = 20) -> tuple[list[Clause], int, bool]:
    """Add three-slot lemmas until ``lemmas`` imply ``safe`` (or give up): returns (lemmas,
    triples added, implies safe)."""
    slot_of = {}
    for slot, vals in enumerate(ts.pre):
        for v, b in vals.items():
            if not isinstance(b, bool):
                slot_of[b.decl().name()] = slot
    cone = sorted({slot_of[n] for n in _support(safe) if n in slot_of})
    added = 0
    ck = _Checker(ts, max_seconds)
    tried: set[Clause] = set()
    for _ in range(max_rounds):
        model = _cti(ts, z3.And(*[clause_term(ts.pre, c) for c in lemmas]) if lemmas else z3.BoolVal(True),
                     safe, max_seconds)
        if model is None:
            return lemmas, added, True
        cti = ts.decode_state(model, ts.pre)
        # three-slot facts the CTI breaks, over the cone of the predicate: slot values never
        # seen together in a reachable state
        free = set(_free_slots(ts))
        focus = [i for i in cone if i in free]
        others = [i for i in free]
        new: list[Clause] = []
        rows = states
        for i, j in itertools.combinations(focus, 2):
            mask = (rows[:, i] == cti[i]) & (rows[:, j] == cti[j])
            sub = rows[mask]
            for k in others:
                if k in (i, j):
                    continue
                if not (sub[:, k] == cti[k]).any():
                    c = tuple(sorted(((i, int(cti[i])), (j, int(cti[j])), (k, int(cti[k])))))
                    if c not in tried:
                        tried.add(c)
                        new.append(c)
        if not new:
            return lemmas, added, False
        # generalise: every triple on the same slots that no reachable state shows
        slotsets = {tuple(s for s, _ in c) for c in new}
        more: list[Clause] = []
        for (i, j, k) in slotsets:
            code = (rows[:, i].astype(np.int64) * 256 + rows[:, j]) * 256 + rows[:, k]
            present = set(np.unique(code).tolist())
            vi, vj, vk = (sorted(set(np.unique(rows[:, s]).tolist())) for s in (i, j, k))
            for a in vi:
                for b in vj:
                    for c_ in vk:
                        if (a * 256 + b) * 256 + c_ not in present:
                            cl = ((i, a), (j, b), (k, c_))
                            if cl not in tried:
                                tried.add(cl)
                                more.append(cl)
        before = len(lemmas)
        lemmas, _ = houdini(ts, lemmas + new + more, max_seconds, ck)
        added += max(0, len(lemmas) - before)
    model = _cti(ts, z3.And(*[clause_term(ts.pre, c) for c in lemmas]), safe, max_seconds)
    return lemmas, added, model is None


def inductive_lemmas(ts: TransitionSystem, machine: Any, safe_terms: dict[str, Any],
                     max_seconds: float | None = None) -> tuple[Lemmas, dict[str, bool]]:
    """Mine, confirm and strengthen lemmas for ``safe_terms`` (name -> predicate over the
    template pre-state); returns the lemmas and, per name, whether they imply it."""
    start = time.perf_counter()
    states = reachable_states(machine)
    cands = mine(ts, states)
    clauses, rounds = houdini(ts, cands, max_seconds)
    lem = Lemmas(clauses, len(cands), rounds, 0.0, len(states))
    implied = {}
    for name, safe in safe_terms.items():
        clauses, added, ok = strengthen(ts, states, lem.clauses, safe, max_seconds)
        lem.clauses, lem.triples = clauses, lem.triples + added
        implied[name] = ok
    lem.seconds = time.perf_counter() - start
    return lem, implied


class _Reachable:
    """The reachable states as a numpy array, for membership and cube generalisation."""

    def __init__(self, ts: TransitionSystem, states: np.ndarray):
        self.rows = states
        self.set = {bytes(r) for r in states}
        self.free = [i for i in _free_slots(ts)]
        self.match_cache: dict[tuple[int, int], np.ndarray] = {}

    def match(self, slot: int, v: int) -> np.ndarray:
        key = (slot, v)
        m = self.match_cache.get(key)
        if m is None:
            m = self.rows[:, slot] == v
            if len(self.match_cache) < 20000:
                self.match_cache[key] = m
        return m

    def generalise(self, state: bytes, prefer: Sequence[int] = ()) -> Clause:
        """A small set of ``state``'s slot values that no reachable state shows together
        (``state`` must be unreachable): greedy, preferred slots first, then minimised."""
        alive = np.ones(len(self.rows), dtype=bool)
        chosen: list[int] = []
        pref = [i for i in prefer if i in self.free]
        rest = [i for i in self.free if i not in set(pref)]
        for i in pref:
            if not alive.any():
                break
            m = self.match(i, state[i])
            if (alive & ~m).any():
                alive &= m
                chosen.append(i)
        while alive.any():
            best, best_left = None, None
            for i in rest:
                if i in chosen:
                    continue
                left = int(np.count_nonzero(alive & self.match(i, state[i])))
                if best_left is None or left < best_left:
                    best, best_left = i, left
            if best is None:
                raise EngineError("a reachable state was asked to be blocked: the engines disagree")
            alive &= self.match(best, state[best])
            chosen.append(best)
        # minimise: drop a value if the others still exclude every reachable state
        for i in list(chosen):
            others = [k for k in chosen if k != i]
            m = np.ones(len(self.rows), dtype=bool)
            for k in others:
                m &= self.match(k, state[k])
            if not m.any():
                chosen = others
        return tuple(sorted((i, int(state[i])) for i in chosen))


def _slots_of(ts: TransitionSystem) -> dict[str, int]:
    out = {}
    for slot, vals in enumerate(ts.pre):
        for v, b in vals.items():
            if not isinstance(b, bool):
                out[b.decl().name()] = slot
    return out


def block(ts: TransitionSystem, states: np.ndarray, clauses: Sequence[Clause], safe: Any,
          max_seconds: float | None = None, max_rounds: int = 100000) -> tuple[list[Clause], int]:
    """Strengthen ``clauses`` (each true of every reachable state) until they are inductive and
    imply ``safe``: every counterexample to induction is an unreachable state, and is blocked by
    a clause generalised against the reachable states.  Ends only on unsat answers; returns
    (clauses, rounds).  Raises ``TimeoutError`` when the budget runs out."""
    start = time.perf_counter()
    deadline = None if max_seconds is None else start + max_seconds
    reach = _Reachable(ts, states)
    slot_of = _slots_of(ts)
    cone = sorted({slot_of[n] for n in _support(safe) if n in slot_of})
    xs, ys = ts.pre, ts.state("post")
    s = z3.SolverFor("QF_FD")
    # the step is behind a literal: a bad state need not have a successor
    stepping = z3.Bool("kvproof_step")
    s.add(ts.typed(xs), ts.tag_range(ts.tag("pre")),  # the tag's bounds at top level keep it finite-domain
          z3.Implies(stepping, z3.And(ts.typed(ys), ts.step(xs, ys, ts.tag("pre")))))
    kept = list(dict.fromkeys(clauses))
    for c in kept:
        s.add(clause_term(xs, c))
    bad = z3.Bool("kvproof_bad")
    s.add(z3.Implies(bad, z3.Not(safe)))
    n_goal = 0
    rounds = 0

    def remaining() -> float | None:
        if deadline is None:
            return None
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError(f"lemmas not inductive within {max_seconds:g} s")
        return left

    def solve(*assumptions):
        left = remaining()
        if left is not None:
            s.set("timeout", max(1, int(left * 1000)))
        r = s.check(*assumptions)
        if r == z3.unknown:
            raise TimeoutError(f"solver gave up ({s.reason_unknown().splitlines()[0][:120]})")
        return r

    def add(c: Clause) -> None:
        kept.append(c)
        s.add(clause_term(xs, c))

    while rounds < max_rounds:
        rounds += 1
        if solve(bad) == z3.sat:
            p = ts.decode_state(s.model(), xs)
            if p in reach.set:
                raise EngineError("a reachable state breaks the safety predicate: the engines disagree")
            add(reach.generalise(p, cone))
            continue
        n_goal += 1
        goal = z3.Bool(f"kvproof_goal{n_goal}")
        s.add(z3.Implies(goal, z3.Or(*[z3.Not(clause_term(ys, c)) for c in kept])))
        if solve(stepping, goal) == z3.unsat:
            return kept, rounds
        model = s.model()
        p = ts.decode_state(model, xs)
        q = ts.decode_state(model, ys)
        if p in reach.set:
            raise EngineError("a reachable state steps out of the reachable states: the engines disagree")
        broken = [c for c in kept if all(q[i] == v for i, v in c)]
        prefer = sorted({i for c in broken[:1] for i, _ in c})
        add(reach.generalise(p, prefer))
    raise TimeoutError(f"lemmas not inductive after {max_rounds} rounds")
