"""Inductive lemmas mined from the reachable states and confirmed by Z3.

The explicit engine enumerates every reachable state of a scenario (:func:`explore_all`: its
search keeping the rows); what those states have in common is a *candidate*, and Z3 decides what
is actually inductive.  The enumeration is only an oracle: nothing here is proved without an
unsat answer.

* :func:`block` (method 1 of ``kvproof prove``): IC3's blocking loop with exact reachability in
  place of IC3's frames.  Every counterexample to induction Z3 finds (a typed state satisfying
  the lemmas so far that breaks the safety predicate, or that steps out of the lemmas) is an
  unreachable state, and is blocked by a clause generalised against the reachable states: a
  few of its slot values that no reachable state shows together.  It ends when Z3 answers
  unsat to both questions.
* :func:`mine` and :func:`houdini` (the strengthening of method 2, k-induction): every unary
  fact "slot ``i`` never holds ``a``", every pairwise fact "slots ``i`` and ``j`` never hold
  ``a`` and ``b`` together" and every three-slot fact not implied by those, true of every
  reachable state, cut down to the greatest inductive subset: one incremental SAT solver,
  every candidate behind a tracking literal, every candidate a step from the others breaks is
  dropped, until Z3 answers unsat.

A clause is a tuple of ``(slot, value)`` pairs: "not all of these at once".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import z3

from kvproof.checker.symbolic.bmc import EngineError
from kvproof.checker.explicit.search import Limits, explore
from kvproof.checker.symbolic.transition import TransitionSystem

__all__ = ["reachable_states", "explore_all", "mine", "houdini", "block", "clause_term",
           "BlockCounterexample", "BlockTimeout", "Reachable"]

Clause = tuple  # ((slot, value), ...): "not all of these at once"


@dataclass(frozen=True)
class BlockCounterexample:
    """The last counterexample to induction :func:`block` saw: a typed ``state`` satisfying the
    lemmas so far that breaks the safety predicate (``action`` is ``None``), or that steps by
    the action instance ``action`` to ``next_state``, which breaks ``lemma``."""

    state: bytes
    action: int | None = None
    next_state: bytes | None = None
    lemma: Clause | None = None


class BlockTimeout(TimeoutError):
    """:func:`block` ran out of budget; ``cti`` is the counterexample it was blocking last."""

    def __init__(self, message: str, cti: BlockCounterexample | None):
        super().__init__(message)
        self.cti = cti


def _bit(xs, slot: int, v: int) -> Any:
    b = xs[slot].get(v, False)
    return z3.BoolVal(b) if isinstance(b, bool) else b


def clause_term(xs, clause: Clause) -> Any:
    """``¬(x_i = a ∧ x_j = b ∧ …)`` as a disjunction of negated bits."""
    return z3.Or(*[z3.Not(_bit(xs, s, v)) for s, v in clause]) if len(clause) > 1 else z3.Not(_bit(xs, *clause[0]))


def reachable_states(machine: Any, max_states: int = 2_000_000) -> np.ndarray:
    """Every state reachable from ``machine.init`` (no symmetry reduction), one row per state."""
    return explore_all(machine, max_states)[0]


def explore_all(machine: Any, max_states: int = 2_000_000,
                deadline: float | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """Every reachable state (breadth-first, no symmetry reduction, one row per state in the
    order the search found them: :func:`~kvproof.checker.explicit.search.explore` with ``rows``), and
    for each claim of ``machine.claims`` that hits somewhere, the depth of its first hit (an
    invariant broken, a witness reached; a quiescent claim only where no action is enabled).
    Raises ``RuntimeError`` past ``max_states`` states or ``deadline`` (a
    ``time.perf_counter()`` reading)."""
    now = time.perf_counter()
    limits = Limits(max_states=max_states) if deadline is None else \
        Limits(max_states=max_states, max_seconds=max(deadline - now, 0.0), started=now)
    found = explore(machine, limits, rows=True)
    if not found.complete:
        if found.reason == limits.time_reason:
            raise RuntimeError("time limit reached while enumerating the reachable states")
        raise RuntimeError(f"more than {max_states} reachable states: too many to mine lemmas from")
    rows = np.frombuffer(b"".join(found.rows), dtype=np.uint8).reshape(len(found.rows), len(machine.init))
    first = sorted(found.hit_at.items(), key=lambda hit: hit[1])  # in the order the search met them
    return rows, {machine.claims[i].name: len(found.path(sid)) for i, sid in first}


def _free_slots(ts: TransitionSystem) -> list[int]:
    return [i for i, vals in enumerate(ts.pre) if any(not isinstance(b, bool) for b in vals.values())]


def mine(ts: TransitionSystem, states: np.ndarray, slots: Sequence[int] | None = None,
         arity: int = 3) -> list[Clause]:
    """Every fact of at most ``arity`` (1 to 3) slot values over ``slots`` (default: every
    non-sentinel slot) that no row of ``states`` shows together: "slot ``i`` never holds ``a``",
    "slots ``i``, ``j`` never hold ``a``, ``b`` together", and "slots ``i``, ``j``, ``k`` never
    hold ``a``, ``b``, ``c`` together".  A wider fact already implied by a narrower one (some
    part of it is never seen either) is left out."""
    if not 1 <= arity <= 3:
        raise ValueError(f"the template's arity is 1, 2 or 3, not {arity}")
    free = _free_slots(ts) if slots is None else list(slots)
    out: list[Clause] = []
    seen_vals = {}
    for i in free:
        vals = set(np.unique(states[:, i]).tolist())
        seen_vals[i] = sorted(vals)
        for v in ts.pre[i]:
            if v not in vals:
                out.append(((i, v),))
    if arity == 1:
        return out
    varying = [i for i in free if len(seen_vals[i]) > 1]
    col = {i: states[:, i].astype(np.int32) for i in varying}  # room for a pair's code
    size = {i: int(col[i].max()) + 1 for i in varying}
    pair_seen: dict[tuple[int, int], np.ndarray] = {}
    for a, i in enumerate(varying):
        for j in varying[a + 1:]:
            present = np.bincount(col[i] * size[j] + col[j], minlength=size[i] * size[j]) > 0
            pair_seen[i, j] = present
            for va in seen_vals[i]:
                for vb in seen_vals[j]:
                    if not present[va * size[j] + vb]:
                        out.append(((i, va), (j, vb)))
    if arity == 3:
        out += _triples(states, varying, size, pair_seen)
    return out


def _triples(states: np.ndarray, varying: list[int], size: dict[int, int],
             pair_seen: dict[tuple[int, int], np.ndarray]) -> list[Clause]:
    """The three-slot facts of :func:`mine` whose three pairs are each seen somewhere.

    One bitset over the rows per (slot, value); for each pair of values seen together, the
    rows holding both, ANDed at once with the bitsets of every later slot's values: a value
    no such row shows completes a triple never seen."""
    pad = (-len(states)) % 64
    keys: list[tuple[int, int]] = []
    masks = []
    for k in varying:
        for c in range(size[k]):
            keys.append((k, c))
            masks.append(np.packbits(np.concatenate([states[:, k] == c, np.zeros(pad, dtype=bool)])))
    bits = np.array(masks).view(np.uint64)  # one row of 64-bit words per (slot, value)
    first: dict[int, int] = {}
    for r, (k, _) in enumerate(keys):
        first.setdefault(k, r)
    out: list[Clause] = []
    for a, i in enumerate(varying):
        for b in range(a + 1, len(varying) - 1):
            j = varying[b]
            later = first[varying[b + 1]]
            for va in range(size[i]):
                for vb in range(size[j]):
                    if not pair_seen[i, j][va * size[j] + vb]:
                        continue
                    both = bits[first[i] + va] & bits[first[j] + vb]
                    for r in np.flatnonzero(~(bits[later:] & both).any(axis=1)):
                        k, vc = keys[later + r]
                        if pair_seen[i, k][va * size[k] + vc] and pair_seen[j, k][vb * size[k] + vc]:
                            out.append(((i, va), (j, vb), (k, vc)))
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


class Reachable:
    """The reachable states as a numpy array, for membership and cube generalisation."""

    def __init__(self, ts: TransitionSystem, states: np.ndarray):
        self.rows = states
        self.set = {bytes(r) for r in states}
        self.free = [i for i in _free_slots(ts)]

    def core(self, state: bytes) -> Clause:
        """A few of ``state``'s slot values that no reachable state shows together (none when
        ``state`` is reachable)."""
        return () if bytes(state) in self.set else self.generalise(state)

    def generalise(self, state: bytes, prefer: Sequence[int] = ()) -> Clause:
        """A small set of ``state``'s slot values that no reachable state shows together
        (``state`` must be unreachable): greedy, preferred slots first, then minimised."""
        rows = self.rows
        st = np.frombuffer(bytes(state), dtype=np.uint8)
        idx = np.arange(len(rows))
        chosen: list[int] = []
        free = set(self.free)
        pref = [i for i in prefer if i in free]
        rest = np.array([i for i in self.free if i not in set(pref)], dtype=np.int64)
        for i in pref:
            if not idx.size:
                break
            m = rows[idx, i] == st[i]
            if not m.all():
                idx = idx[m]
                chosen.append(i)
        taken = np.zeros(len(rest), dtype=bool)
        while idx.size:
            if taken.all():
                raise EngineError("a reachable state was asked to be blocked: the engines disagree")
            counts = (rows[np.ix_(idx, rest)] == st[rest]).sum(axis=0)
            counts[taken] = len(rows) + 1
            k = int(np.argmin(counts))  # the first slot leaving fewest reachable states
            taken[k] = True
            best = int(rest[k])
            idx = idx[rows[idx, best] == st[best]]
            chosen.append(best)
        # minimise: drop a value if the others still exclude every reachable state
        for i in list(chosen):
            others = [k for k in chosen if k != i]
            if not others:
                continue
            cols = np.array(others, dtype=np.int64)
            if not np.all(rows[:, cols] == st[cols], axis=1).any():
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
    reach = Reachable(ts, states)
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
    cti: BlockCounterexample | None = None

    def remaining() -> float | None:
        if deadline is None:
            return None
        left = deadline - time.perf_counter()
        if left <= 0:
            raise BlockTimeout(f"lemmas not inductive within {max_seconds:g} s", cti)
        return left

    def solve(*assumptions):
        left = remaining()
        if left is not None:
            s.set("timeout", max(1, int(left * 1000)))
        r = s.check(*assumptions)
        if r == z3.unknown:
            raise BlockTimeout(f"solver gave up ({s.reason_unknown().splitlines()[0][:120]})", cti)
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
            cti = BlockCounterexample(p)
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
        cti = BlockCounterexample(p, model.eval(ts.tag("pre"), model_completion=True).as_long(), q,
                                  broken[0] if broken else None)
        prefer = sorted({i for c in broken[:1] for i, _ in c})
        add(reach.generalise(p, prefer))
    raise BlockTimeout(f"lemmas not inductive after {max_rounds} rounds", cti)
