"""The symbolic interpretation: the same guards, effects and claims evaluated with Z3 terms.

:class:`Z3Ops` implements the operations facade over Z3 integer and Boolean terms, one integer
variable per state slot.  :func:`step_terms` turns one action instance into its guard and the
next value of every slot (the frame included); :func:`claim_term` turns a claim into a Boolean
term.  These are the building blocks of the Z3 engine; nothing here re-encodes the protocol.
"""

from __future__ import annotations

from typing import Any, Sequence

import z3

from kvproof.model.framework import ActionInstance, Spec
from kvproof.model.ops import Ops

__all__ = ["Z3Ops", "state_vars", "step_terms", "claim_term"]


def _t(v: Any) -> Any:
    if isinstance(v, bool):
        return z3.BoolVal(v)
    if isinstance(v, int):
        return z3.IntVal(v)
    return v


class Z3Ops(Ops):
    """Evaluates through Z3: reads are the pre-state variables, writes build next-state terms,
    ``require`` collects the guard's conjuncts."""

    def __init__(self, pre: Sequence[Any]):
        self.pre = list(pre)
        self.next = list(pre)
        self.guard: list[Any] = []

    def const(self, v):
        return _t(v)

    def native_kind(self, x):
        if z3.is_bool(x):
            return "condition"
        if z3.is_int(x):
            return "number"
        return None

    def eq(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return z3.BoolVal(a == b)
        return _t(a) == _t(b)

    def lt(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return z3.BoolVal(a < b)
        return _t(a) < _t(b)

    def add(self, a, b):
        return _t(a) + _t(b)

    def and_(self, *xs):
        return z3.And(*[_t(x) for x in xs]) if xs else z3.BoolVal(True)

    def or_(self, *xs):
        return z3.Or(*[_t(x) for x in xs]) if xs else z3.BoolVal(False)

    def not_(self, x):
        return z3.Not(_t(x))

    def ite(self, c, a, b):
        return z3.If(_t(c), _t(a), _t(b))

    def lookup(self, table, idx):
        if isinstance(idx, int):
            return z3.IntVal(table[idx])
        out = z3.IntVal(table[-1])
        for k in reversed(range(len(table) - 1)):
            out = z3.If(idx == k, z3.IntVal(table[k]), out)
        return out

    def read(self, slot):
        return self.pre[slot]

    def read_at(self, base, size, idx):
        if isinstance(idx, int):
            return self.pre[base + idx]
        out = self.pre[base + size - 1]
        for k in reversed(range(size - 1)):
            out = z3.If(idx == k, self.pre[base + k], out)
        return out

    def require(self, cond):
        self.guard.append(_t(cond))

    def write(self, slot, value):
        self.next[slot] = _t(value)

    def write_at(self, base, size, idx, value):
        if isinstance(idx, int):
            return self.write(base + idx, value)
        for k in range(size):
            self.next[base + k] = z3.If(idx == k, _t(value), self.next[base + k])


def state_vars(spec: Spec, tag: str) -> list[Any]:
    """One Z3 integer per slot of ``spec``'s layout, named ``field[i]@tag``."""
    out = []
    for f in spec.layout.fields:
        out.extend(z3.Int(f"{f.name}[{k}]@{tag}") for k in range(f.width))
    return out


def step_terms(spec: Spec, inst: ActionInstance, pre: Sequence[Any]) -> tuple[Any, list[Any]]:
    """(guard, next-state terms) of one action instance over the pre-state variables ``pre``.

    Slots the action does not write keep their pre-state variable: that is the frame."""
    ops = Z3Ops(pre)
    if not spec.run_action(inst, ops):
        return z3.BoolVal(False), list(pre)
    return z3.And(*ops.guard) if ops.guard else z3.BoolVal(True), ops.next


def claim_term(spec: Spec, name: str, pre: Sequence[Any]) -> Any:
    """A claim's state predicate as a Z3 Boolean over ``pre`` (for a liveness claim, its list
    of ``(label, pending)`` obligations as Z3 Booleans)."""
    value = spec.eval_claim(name, Z3Ops(pre))
    if isinstance(value, list):
        return [(label, _t(term)) for label, term in value]
    return _t(value)
