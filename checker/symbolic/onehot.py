"""The one-hot interpretation: the same guards, effects and claims as propositional Z3 terms.

Every state slot is a set of Boolean variables, one per value of its domain (``field[i]=v@t``);
exactly one of them is true.  A value computed by the spec is a *guarded value set*: a mapping
``{value: condition}`` whose conditions are exclusive and, in a typed state, exhaustive.  So a
comparison is a disjunction over pairs of values, an addition combines the pairs, an indexed read
chooses a slot per index value, and nothing is left but Booleans.  SAT-based bounded model
checking, k-induction and Spacer's IC3 all work far better on this shape than on integer terms
(measured in the README's figures); :class:`~.z3ops.Z3Ops` over integers stays the direct
reading of the spec, and the tests hold the two to the same answers.

Python values stay Python where they can (a constant is ``{v: True}``, a decided condition is a
Python ``bool``), so flags and sizes fold away as they do in the compiled engine.
"""

from __future__ import annotations

from typing import Any, Sequence

import z3

from kvproof.model.ops import Ops

__all__ = ["OneHotOps", "Values", "conj", "disj", "neg"]

Values = dict  # {value: condition}: a guarded value set


def conj(xs: Sequence[Any]) -> Any:
    """Conjunction, folding Python booleans."""
    out = []
    for x in xs:
        if x is True:
            continue
        if x is False:
            return False
        out.append(x)
    if not out:
        return True
    return out[0] if len(out) == 1 else z3.And(*out)


def disj(xs: Sequence[Any]) -> Any:
    """Disjunction, folding Python booleans."""
    out = []
    for x in xs:
        if x is False:
            continue
        if x is True:
            return True
        out.append(x)
    if not out:
        return False
    return out[0] if len(out) == 1 else z3.Or(*out)


def neg(x: Any) -> Any:
    """Negation, folding Python booleans."""
    if x is True or x is False:
        return not x
    return z3.Not(x)


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or z3.is_bool(x)


def _vals(x: Any) -> Values:
    if isinstance(x, dict):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return {x: True}
    raise TypeError(f"not a value: {x!r}")


def _collect(pairs) -> Values:
    acc: dict[int, list[Any]] = {}
    for v, c in pairs:
        if c is False:
            continue
        acc.setdefault(v, []).append(c)
    return {v: disj(cs) for v, cs in acc.items()}


class OneHotOps(Ops):
    """Evaluates through guarded value sets over one-hot state bits.

    ``pre[slot]`` is the slot's value set over its bits; writes build ``next``; ``require``
    collects the guard's conjuncts."""

    def __init__(self, pre: Sequence[Values]):
        self.pre = list(pre)
        self.next = list(pre)
        self.guard: list[Any] = []

    def const(self, v):
        return v if isinstance(v, bool) else {v: True}

    def eq(self, a, b):
        a, b = _vals(a), _vals(b)
        return disj([conj([ca, b[v]]) for v, ca in a.items() if v in b])

    def lt(self, a, b):
        a, b = _vals(a), _vals(b)
        return disj([conj([ca, cb]) for va, ca in a.items() for vb, cb in b.items() if va < vb])

    def add(self, a, b):
        a, b = _vals(a), _vals(b)
        return _collect((va + vb, conj([ca, cb])) for va, ca in a.items() for vb, cb in b.items())

    def and_(self, *xs):
        return conj(xs)

    def or_(self, *xs):
        return disj(xs)

    def not_(self, x):
        return neg(x)

    def ite(self, c, a, b):
        if c is True or c is False:
            chosen = a if c else b
            return chosen if _is_bool(chosen) else _vals(chosen)
        if _is_bool(a) and _is_bool(b):
            return disj([conj([c, a]), conj([neg(c), b])])
        a, b = _vals(a), _vals(b)
        nc = neg(c)
        return _collect([(v, conj([c, ca])) for v, ca in a.items()]
                        + [(v, conj([nc, cb])) for v, cb in b.items()])

    def lookup(self, table, idx):
        idx = _vals(idx)
        return _collect((table[i], c) for i, c in idx.items() if 0 <= i < len(table))

    def read(self, slot):
        return self.pre[slot]

    def read_at(self, base, size, idx):
        idx = _vals(idx)
        pairs = []
        for i, ci in idx.items():
            if 0 <= i < size:
                pairs.extend((v, conj([ci, cv])) for v, cv in self.pre[base + i].items())
        return _collect(pairs)

    def require(self, cond):
        self.guard.append(cond)

    def write(self, slot, value):
        self.next[slot] = value if isinstance(value, dict) else _vals(value)

    def write_at(self, base, size, idx, value):
        idx = _vals(idx)
        for k in range(size):
            if k in idx:
                self.next[base + k] = self.ite(idx[k], value, self.next[base + k])
