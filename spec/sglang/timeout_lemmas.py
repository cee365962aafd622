"""The *if* direction of the timeout theorem by lemmas over parametric atoms (T > W ⇒ safe).

Spacer does not find an invariant over unbounded integer clocks with the deadline ``T`` and the
latency bound ``W`` symbolic.  Here the counterexample-blocking loop of :mod:`.lemmas` runs over
*atoms* that mean the same thing for every ``T`` and ``W``:

* ``x = a`` for every slot whose domain does not depend on ``T`` or ``W``;
* for a hold timer: ``hold = 0``, ``hold ≥ T``; for a write: ``wr = a`` for each code below
  ``WR_FLIGHT``, ``wr = WR_FLIGHT`` (just issued), ``wr ≥ WR_FLIGHT + W`` (at the bound);
* relational: ``hold[r] ≤ wr − WR_FLIGHT`` for every write of request ``r`` (a write in flight
  while ``r`` is held has been in flight at least as long as the hold).

The reachable states of several concrete instances (``T > W``) give the atom valuations a lemma
must allow.  Z3 (linear integer arithmetic, ``T`` and ``W`` free with ``T > W ≥ 0``) answers the
two questions of the loop; every counterexample's atom valuation is blocked by a clause
generalised against the concrete valuations.  It ends only on unsat to both (then Init ⇒ Inv is
checked too): a proof for every ``T > W``.  A counterexample whose valuation equals a concrete
reachable one means the atoms are too coarse: the answer is then *inconclusive*, never proved.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import z3

from kvproof.model.machine import Machine
from kvproof.spec.sglang.protocol import WR_FLIGHT
from kvproof.model.scenario import builtin
from kvproof.checker.symbolic.lemmas import explore_all

__all__ = ["timeout_if_by_lemmas"]

CLAIMS = ["no_write_after_release", "decode_reads_only_own_pages", "no_cross_tenant_read"]
INSTANCES = [(1, 0), (2, 0), (2, 1), (3, 1), (3, 2), (4, 2), (4, 3)]


def _atoms(spec, xs, T, W, o):
    """Atoms as (name, value) over the state ``xs``: ``o`` is the comparison toolkit (Z3 or
    Python), so the same list serves the concrete states and the symbolic ones."""
    L = spec.layout
    out = []
    hold_base, wr_f = L.base["hold"], L.by_name["wr"]
    sentinels = dict(L.sentinel_slots())
    R = L.by_name["hold"].dims[0].size
    per_r = wr_f.width // R
    for f in L.fields:
        for k in range(f.width):
            i = L.base[f.name] + k
            if i in sentinels:
                continue
            x = xs[i]
            if f.name == "hold":
                out += [(f"hold[{k}]=0", o.eq(x, 0)), (f"hold[{k}]>=T", o.ge(x, T))]
            elif f.name == "wr":
                out += [(f"wr[{k}]={a}", o.eq(x, a)) for a in range(WR_FLIGHT + 1)]
                out.append((f"wr[{k}]>=F+W", o.ge(x, WR_FLIGHT + W)))
                r = k // per_r
                out.append((f"hold[{r}]<=age(wr[{k}])", o.le(xs[hold_base + r], x - WR_FLIGHT)))
            else:
                out += [(f"{f.name}[{k}]={a}", o.eq(x, a)) for a in range(f.values.size)]
    return out


class _Py:
    eq = staticmethod(lambda a, b: a == b)
    ge = staticmethod(lambda a, b: a >= b)
    le = staticmethod(lambda a, b: a <= b)


class _Z3:
    eq = staticmethod(lambda a, b: a == b)
    ge = staticmethod(lambda a, b: a >= b)
    le = staticmethod(lambda a, b: a <= b)


def _instance(t: int, w: int):
    base = builtin("timeout-bounded-latency")
    cfg = replace(base.config, engine=replace(base.config.engine, timeout=t, write_latency_bound=w))
    return replace(base, config=cfg).build()


def timeout_if_by_lemmas(max_seconds: float = 300.0, gap: int = 1) -> tuple[str, str, int]:
    """(verdict, reason, lemmas): ``proved`` only on unsat answers, for every ``T ≥ W + gap``,
    ``W ≥ 0`` (the theorem: ``gap = 1``; the tests try ``gap = 0``, which is false)."""
    from kvproof.spec.sglang.parametric import int_system as _int_system  # the integer reading of the same spec
    from kvproof.spec.sglang.parametric import parametric_spec as _parametric_spec
    from kvproof.checker.symbolic.z3ops import claim_term, state_vars

    start = time.perf_counter()
    rows, names = [], None
    for t, w in INSTANCES:
        spec = _instance(t, w)
        states, hit = explore_all(Machine(spec))
        if any(c in hit for c in CLAIMS):
            return "refuted", f"the explicit engine finds a violation at T={t}, W={w}", 0
        grid = np.array([list(s) for s in states], dtype=np.int64)  # one row per reachable state
        atoms = _atoms(spec, [grid[:, i] for i in range(grid.shape[1])], t, w, _Py)  # column-wise
        names = names or [n for n, _ in atoms]
        rows.append(np.column_stack([v for _, v in atoms]))
    seen = np.concatenate(rows).astype(bool)
    seen_set = {r.tobytes() for r in seen}

    T, W = z3.Ints("T W")
    spec = _parametric_spec(T, W)
    pre, typed, steps = _int_system(spec, T, W)
    post = state_vars(spec, "post")
    a_pre = [v for _, v in _atoms(spec, pre, T, W, _Z3)]
    a_post = [v for _, v in _atoms(spec, post, T, W, _Z3)]
    typed_post = z3.substitute(typed(pre), *zip(pre, post))
    trans = z3.Or(*[z3.And(g, *[y == t for y, t in zip(post, nxt)]) for _, g, nxt in steps])
    safe = z3.And(*[claim_term(spec, c, pre) for c in CLAIMS])
    s = z3.Solver()
    s.set("timeout", max(1, int(max_seconds * 1000)))
    stepping, bad = z3.Bools("kvproof_step kvproof_bad")
    s.add(T >= W + gap, W >= 0, typed(pre), z3.Implies(stepping, z3.And(typed_post, trans)),
          z3.Implies(bad, z3.Not(safe)))
    clauses: list[tuple] = []
    negated_post: list = []

    def term(atoms, c):
        return z3.Or(*[z3.Not(atoms[i]) if pol else atoms[i] for i, pol in c])

    def valuation(model, atoms):
        return np.array([z3.is_true(model.eval(a, model_completion=True)) for a in atoms], dtype=bool)

    def generalise(v: np.ndarray) -> tuple:
        if v.tobytes() in seen_set:
            raise LookupError("a counterexample's atoms equal a reachable state's: the atoms are too coarse")
        agree = seen == v  # agree[j, i]: reachable state j has atom i as v has it
        alive = np.ones(len(seen), dtype=bool)
        chosen: list[int] = []
        while alive.any():  # the atom that rules out the most reachable states still alive
            left = np.count_nonzero(agree[alive], axis=0)
            left[chosen] = len(seen) + 1
            best = int(np.argmin(left))  # the first of the fewest, as a scan in atom order finds
            alive &= agree[:, best]
            chosen.append(best)
        for i in list(chosen):  # drop atoms the clause does not need
            rest = [k for k in chosen if k != i]
            if not agree[:, rest].all(axis=1).any():
                chosen = rest
        return tuple(sorted((i, bool(v[i])) for i in chosen))

    n = 0
    try:
        while True:
            if time.perf_counter() - start > max_seconds:
                return "inconclusive", f"no inductive invariant within {max_seconds:g} s", len(clauses)
            r = s.check(bad)
            if r == z3.sat:
                c = generalise(valuation(s.model(), a_pre))
            elif r == z3.unsat:
                n += 1
                goal = z3.Bool(f"kvproof_goal{n}")
                s.add(z3.Implies(goal, z3.Or(*negated_post)) if negated_post else z3.Not(goal))
                r = s.check(stepping, goal)
                if r == z3.unsat:
                    break
                if r != z3.sat:
                    return "inconclusive", f"solver gave up ({s.reason_unknown()})", len(clauses)
                c = generalise(valuation(s.model(), a_pre))
            else:
                return "inconclusive", f"solver gave up ({s.reason_unknown()})", len(clauses)
            clauses.append(c)
            negated_post.append(z3.Not(term(a_post, c)))  # built once: the goal of every later round
            s.add(term(a_pre, c))
    except LookupError as e:
        return "inconclusive", str(e), len(clauses)
    inv = z3.And(*[term(a_pre, c) for c in clauses]) if clauses else z3.BoolVal(True)
    init = z3.And(*[x == v for x, v in zip(pre, spec.init_state())])
    chk = z3.Solver()
    chk.add(T >= W + gap, W >= 0, init, z3.Not(inv))
    if chk.check() != z3.unsat:
        return "inconclusive", "the lemmas do not hold initially", len(clauses)
    # the induction query assumed typed successors: typedness must itself be preserved
    chk = z3.Solver()
    chk.add(T >= W + gap, W >= 0, typed(pre), inv, trans, z3.Not(typed_post))
    if chk.check() != z3.unsat:
        return "inconclusive", "a step leaves the typed states", len(clauses)
    chk = z3.Solver()
    chk.add(T >= W + gap, W >= 0, init, z3.Not(typed(pre)))
    if chk.check() != z3.unsat:
        return "inconclusive", "the initial state is not typed", len(clauses)
    return "proved", f"{len(clauses)} lemmas over parametric atoms, inductive for every T ≥ W + {gap}, W ≥ 0", len(clauses)
