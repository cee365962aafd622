"""Interpretations over many states at once, for the catalogue tier of the differential test.

The reference interpreter takes about 3 ms a state; the catalogue has over a million reachable
states.  So the slow tier evaluates everything over all of a scenario's states at once, with
numpy:

* :class:`BatchOps` - the reference semantics, one numpy column per value: every primitive of
  :class:`~kvproof.model.ops.ConcreteOps` applied elementwise (``eq`` is ``==`` on each state,
  ``ite`` is ``where``, ``require`` narrows a mask), with the same range checks on the states
  still enabled.  The random-spec tier holds it to :class:`ConcreteOps` itself.
* :func:`z3_values` - the value of Z3 terms (the integer and the one-hot encodings) on every
  state, by walking each term's DAG once and applying its operator to whole columns; a Z3
  operator it does not know is an error, never a guess.
"""

from __future__ import annotations

from functools import reduce
from typing import Any, Sequence

import numpy as np
import z3

from kvproof.model.framework import Spec
from kvproof.model.ops import Ops

__all__ = ["BatchOps", "batch_step", "batch_claim", "z3_values"]


class BatchOps(Ops):
    """The reference semantics over the rows of ``states`` (an ``(n, slots)`` int array)."""

    def __init__(self, states: np.ndarray):
        self.states = states
        self.n = states.shape[0]
        self.next: dict[int, np.ndarray] = {}  # the columns written, by slot
        self.mask = np.ones(self.n, dtype=bool)

    def const(self, v):
        return v

    def eq(self, a, b):
        return np.equal(a, b)

    def lt(self, a, b):
        return np.less(a, b)

    def add(self, a, b):
        return np.add(a, b, dtype=np.int32)

    def and_(self, *xs):
        return reduce(np.logical_and, xs, np.bool_(True))

    def or_(self, *xs):
        return reduce(np.logical_or, xs, np.bool_(False))

    def not_(self, x):
        return np.logical_not(x)

    def ite(self, c, a, b):
        return np.where(c, a, b)

    def ne(self, a, b):
        return np.not_equal(a, b)

    def le(self, a, b):
        return np.less_equal(a, b)

    def gt(self, a, b):
        return np.greater(a, b)

    def ge(self, a, b):
        return np.greater_equal(a, b)

    def implies(self, a, b):
        return np.logical_or(np.logical_not(a), b)

    def is_in(self, x, values):
        return self.or_(*[np.equal(x, v) for v in values])

    def all_(self, xs):
        return self.and_(*list(xs))

    def any_(self, xs):
        return self.or_(*list(xs))

    def min_(self, a, b):
        return np.minimum(a, b)

    def max_(self, a, b):
        return np.maximum(a, b)

    def count(self, conds):
        return reduce(lambda t, c: np.add(t, np.asarray(c, dtype=np.int32)), conds, np.int32(0))

    def _live(self, bad: Any) -> bool:
        return bool(np.any(np.logical_and(self.mask, bad)))

    def lookup(self, table, idx):
        idx = np.asarray(idx)
        if self._live((idx < 0) | (idx >= len(table))):
            raise IndexError(f"lookup index outside a table of {len(table)}")
        return np.asarray(table, dtype=np.int32)[np.clip(idx, 0, len(table) - 1)]

    def read(self, slot):
        return self.states[:, slot]

    def read_at(self, base, size, idx):
        idx = np.broadcast_to(np.asarray(idx), (self.n,))
        if self._live((idx < 0) | (idx >= size)):
            raise IndexError(f"index outside an array of {size}")
        return self.states[np.arange(self.n), base + np.clip(idx, 0, size - 1)]

    def require(self, cond):
        self.mask &= np.broadcast_to(np.asarray(cond, dtype=bool), (self.n,))

    def bound(self, value, size, what):
        value = np.asarray(value)
        if self._live((value < 0) | (value >= size)):
            raise ValueError(f"{what}: writes outside the field's values 0..{size - 1}")

    def write(self, slot, value):
        self.next[slot] = np.broadcast_to(np.asarray(value, dtype=np.int32), (self.n,))

    def write_at(self, base, size, idx, value):
        idx = np.broadcast_to(np.asarray(idx), (self.n,))
        if self._live((idx < 0) | (idx >= size)):
            raise IndexError(f"index outside an array of {size}")
        for k in range(size):
            here = self.next.get(base + k, self.states[:, base + k])
            self.next[base + k] = np.where(idx == k, value, here)

    def next_states(self, rows: np.ndarray) -> np.ndarray:
        """The next states of the given rows, every slot (``uint8``)."""
        out = self.states[rows].astype(np.uint8)
        for slot, col in self.next.items():
            out[:, slot] = col[rows]
        return out


def batch_step(spec: Spec, aid: int, states: np.ndarray) -> tuple[np.ndarray, BatchOps]:
    """(enabled mask, the interpretation holding the next states) of action instance ``aid``
    on every row of ``states`` (an ``int32`` array)."""
    ops = BatchOps(states)
    if not spec.run_action(spec.instances[aid], ops):
        return np.zeros(len(states), dtype=bool), ops
    return ops.mask.copy(), ops


def batch_claim(spec: Spec, name: str, states: np.ndarray) -> Any:
    """A claim's value on every row (a bool column; a liveness claim: ``[(label, column)]``)."""
    value = spec.eval_claim(name, BatchOps(states))
    n = len(states)
    if isinstance(value, list):
        return [(label, np.broadcast_to(np.asarray(v, dtype=bool), (n,))) for label, v in value]
    return np.broadcast_to(np.asarray(value, dtype=bool), (n,))


_K = z3
_ARITH = {
    _K.Z3_OP_LT: np.less, _K.Z3_OP_LE: np.less_equal, _K.Z3_OP_GT: np.greater, _K.Z3_OP_GE: np.greater_equal,
}


def z3_values(terms: Sequence[Any], columns: dict[int, np.ndarray], n: int,
              memo: dict[int, tuple[Any, np.ndarray]] | None = None) -> list[np.ndarray]:
    """The value of each Z3 term on each of ``n`` states; ``columns`` maps the id of every
    variable (``term.get_id()``) to its column (the caller keeps the variables alive).
    Python bools stand for themselves.  ``memo`` may be shared by calls over the same
    states."""
    memo = {} if memo is None else memo
    out = []
    for term in terms:
        if isinstance(term, bool):
            out.append(np.full(n, term))
            continue
        stack = [(term, False)]
        while stack:
            t, ready = stack.pop()
            tid = t.get_id()
            if tid in memo:
                continue
            kids = t.children()
            if not ready and kids:
                stack.append((t, True))
                stack.extend((k, False) for k in kids if k.get_id() not in memo)
                continue
            # the term is kept with its value: Z3 reuses the id of a term that was freed
            memo[tid] = (t, _apply(t, [memo[k.get_id()][1] for k in kids], columns, n))
        out.append(np.broadcast_to(memo[term.get_id()][1], (n,)))
    return out


def _apply(t: Any, args: list[np.ndarray], columns: dict[int, np.ndarray], n: int) -> np.ndarray:
    k = t.decl().kind()
    if k == _K.Z3_OP_UNINTERPRETED and not args:
        return columns[t.get_id()]
    if k == _K.Z3_OP_TRUE:
        return np.bool_(True)
    if k == _K.Z3_OP_FALSE:
        return np.bool_(False)
    if k == _K.Z3_OP_ANUM:
        return np.int32(t.as_long())
    if k == _K.Z3_OP_AND:
        return reduce(np.logical_and, args)
    if k == _K.Z3_OP_OR:
        return reduce(np.logical_or, args)
    if k == _K.Z3_OP_NOT:
        return np.logical_not(args[0])
    if k == _K.Z3_OP_IMPLIES:
        return np.logical_or(np.logical_not(args[0]), args[1])
    if k == _K.Z3_OP_XOR:
        return np.logical_xor(args[0], args[1])
    if k == _K.Z3_OP_ITE:
        return np.where(args[0], args[1], args[2])
    if k == _K.Z3_OP_EQ or k == _K.Z3_OP_IFF:
        return np.equal(args[0], args[1])
    if k == _K.Z3_OP_DISTINCT:
        if len(args) != 2:
            raise NotImplementedError("distinct of more than two terms")
        return np.not_equal(args[0], args[1])
    if k in _ARITH:
        return _ARITH[k](args[0], args[1])
    if k == _K.Z3_OP_ADD:
        return reduce(lambda a, b: np.add(a, b, dtype=np.int32), args)
    if k == _K.Z3_OP_SUB:
        return reduce(lambda a, b: np.subtract(a, b, dtype=np.int32), args)
    if k == _K.Z3_OP_UMINUS:
        return np.negative(args[0])
    if k == _K.Z3_OP_MUL:
        return reduce(lambda a, b: np.multiply(a, b, dtype=np.int32), args)
    raise NotImplementedError(f"Z3 operator {t.decl()} in {t}")
