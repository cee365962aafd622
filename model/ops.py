"""The operations facade: the only way the spec computes with state values.

Guards, effects and claims never use Python control flow on a state value. They call these
operations instead, so that one spec can be evaluated in four ways:

* :class:`ConcreteOps` (here) - plain Python ints and bools, the reference interpreter;
* ``kvproof.model.compiler.CodegenOps`` - Python source text, compiled once into the explicit
  engine's straight-line successor function;
* ``kvproof.checker.symbolic.z3ops.Z3Ops`` - Z3 terms, the symbolic engine's transition relation;
* ``kvproof.model.ccompiler.COps`` - C source text, the native backend's successor and claim
  functions (``check --backend native``).

An interpretation implements the primitives marked *primitive* below; everything else is derived
from them here, once.  Python control flow on *parameters* (a request id, a chunk index) and on the
scenario's configuration (a flag, a size) is allowed: those are plain values in every
interpretation.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

__all__ = ["Ops", "ConcreteOps", "Disabled", "RangeError"]


class Disabled(Exception):
    """Raised by :meth:`ConcreteOps.require` when an action's guard is false."""


class RangeError(ValueError):
    """A value written into a field lies outside the field's codes (a spec bug)."""


class Ops:
    """The facade. Values are whatever the interpretation uses (int/bool, source text, Z3 terms)."""

    # -- primitives on values -------------------------------------------------------------
    def const(self, v: int | bool) -> Any:  # pragma: no cover - primitive
        """A literal value (*primitive*)."""
        raise NotImplementedError

    def eq(self, a: Any, b: Any) -> Any:  # pragma: no cover - primitive
        """a == b (*primitive*)."""
        raise NotImplementedError

    def lt(self, a: Any, b: Any) -> Any:  # pragma: no cover - primitive
        """a < b (*primitive*)."""
        raise NotImplementedError

    def add(self, a: Any, b: Any) -> Any:  # pragma: no cover - primitive
        """a + b (*primitive*)."""
        raise NotImplementedError

    def and_(self, *xs: Any) -> Any:  # pragma: no cover - primitive
        """Conjunction; ``and_()`` is true (*primitive*)."""
        raise NotImplementedError

    def or_(self, *xs: Any) -> Any:  # pragma: no cover - primitive
        """Disjunction; ``or_()`` is false (*primitive*)."""
        raise NotImplementedError

    def not_(self, x: Any) -> Any:  # pragma: no cover - primitive
        """Negation (*primitive*)."""
        raise NotImplementedError

    def ite(self, c: Any, a: Any, b: Any) -> Any:  # pragma: no cover - primitive
        """If-then-else on values: ``a`` where ``c`` holds, else ``b`` (*primitive*)."""
        raise NotImplementedError

    def lookup(self, table: Sequence[int], idx: Any) -> Any:  # pragma: no cover - primitive
        """``table[idx]`` for a constant table and a value index (*primitive*)."""
        raise NotImplementedError

    # -- primitives on state ----------------------------------------------------------------
    def read(self, slot: int) -> Any:  # pragma: no cover - primitive
        """The pre-state's value at a fixed slot (*primitive*)."""
        raise NotImplementedError

    def read_at(self, base: int, size: int, idx: Any) -> Any:  # pragma: no cover - primitive
        """The pre-state's value at ``base + idx`` where ``idx`` is a value in ``range(size)``."""
        raise NotImplementedError

    def require(self, cond: Any) -> None:  # pragma: no cover - primitive
        """Narrow the action's guard by ``cond`` (*primitive*)."""
        raise NotImplementedError

    def write(self, slot: int, value: Any) -> None:  # pragma: no cover - primitive
        """Set the next state's value at a fixed slot (*primitive*)."""
        raise NotImplementedError

    def write_at(self, base: int, size: int, idx: Any, value: Any) -> None:  # pragma: no cover
        """Set the next state's value at ``base + idx`` for a value index (*primitive*)."""
        raise NotImplementedError

    def native_kind(self, x: Any) -> str | None:
        """``"number"`` or ``"condition"`` when ``x`` is one of this interpretation's own values
        handed to the spec as a parameter (the symbolic engine's unknown timeout), else
        ``None`` (the default: an interpretation takes only ints and bools from outside)."""
        return None

    # -- derived ------------------------------------------------------------------------------
    def ne(self, a: Any, b: Any) -> Any:
        """a != b."""
        return self.not_(self.eq(a, b))

    def le(self, a: Any, b: Any) -> Any:
        """a <= b."""
        return self.not_(self.lt(b, a))

    def gt(self, a: Any, b: Any) -> Any:
        """a > b."""
        return self.lt(b, a)

    def ge(self, a: Any, b: Any) -> Any:
        """a >= b."""
        return self.not_(self.lt(a, b))

    def implies(self, a: Any, b: Any) -> Any:
        """a implies b."""
        return self.or_(self.not_(a), b)

    def is_in(self, x: Any, values: Iterable[int]) -> Any:
        """x is one of the constant ``values``."""
        return self.or_(*[self.eq(x, v) for v in values])

    def all_(self, xs: Iterable[Any]) -> Any:
        """Conjunction of an iterable."""
        return self.and_(*list(xs))

    def any_(self, xs: Iterable[Any]) -> Any:
        """Disjunction of an iterable."""
        return self.or_(*list(xs))

    def min_(self, a: Any, b: Any) -> Any:
        """The smaller of two values."""
        return self.ite(self.lt(b, a), b, a)

    def max_(self, a: Any, b: Any) -> Any:
        """The larger of two values."""
        return self.ite(self.lt(a, b), b, a)

    def count(self, conds: Iterable[Any]) -> Any:
        """How many of ``conds`` hold."""
        total = self.const(0)
        for c in conds:
            total = self.add(total, self.ite(c, self.const(1), self.const(0)))
        return total

    def bound(self, value: Any, size: int, what: str) -> None:
        """``value``, about to be written into a field, must be a code in ``range(size)``.

        An interpretation that can evaluate it checks it (the reference raises, the compiled
        engine checks at run time where its static range does not settle it); the symbolic ones
        need not, since their type invariant admits no other value."""


class ConcreteOps(Ops):
    """The reference interpreter: evaluates one action instance on one concrete state.

    Reads come from ``state``; writes go to a copy; :meth:`require` raises :class:`Disabled`.
    Index reads are bounds-checked, so a spec that reads outside an array fails loudly here
    (the compiled engine relies on that check being exercised by the tests).
    """

    def __init__(self, state: Sequence[int]):
        self.state = tuple(state)
        self.next = list(self.state)

    def result(self) -> tuple[int, ...]:
        """The next state built by the writes so far."""
        return tuple(self.next)

    def const(self, v):
        return v

    def eq(self, a, b):
        return a == b

    def lt(self, a, b):
        return a < b

    def add(self, a, b):
        return a + b

    def and_(self, *xs):
        return all(xs)

    def or_(self, *xs):
        return any(xs)

    def not_(self, x):
        return not x

    def ite(self, c, a, b):
        return a if c else b

    def lookup(self, table, idx):
        if not 0 <= idx < len(table):
            raise IndexError(f"lookup index {idx} outside a table of {len(table)}")
        return table[idx]

    def read(self, slot):
        return self.state[slot]

    def read_at(self, base, size, idx):
        if not 0 <= idx < size:
            raise IndexError(f"index {idx} outside an array of {size}")
        return self.state[base + idx]

    def require(self, cond):
        if not cond:
            raise Disabled

    def bound(self, value, size, what):
        if not 0 <= value < size:
            raise RangeError(f"{what}: writes {value}, outside the field's values 0..{size - 1}")

    # The derived operations, written out again in plain Python (not through the shared
    # derivations of :class:`Ops`): the differential tests compare every other interpretation
    # with this one, so a bug in the shared derivations cannot hide behind itself.
    def ne(self, a, b):
        return a != b

    def le(self, a, b):
        return a <= b

    def gt(self, a, b):
        return a > b

    def ge(self, a, b):
        return a >= b

    def implies(self, a, b):
        return (not a) or b

    def is_in(self, x, values):
        return x in tuple(values)

    def all_(self, xs):
        return all(list(xs))

    def any_(self, xs):
        return any(list(xs))

    def min_(self, a, b):
        return min(a, b)

    def max_(self, a, b):
        return max(a, b)

    def count(self, conds):
        return sum(1 for c in conds if c)

    def write(self, slot, value):
        self.next[slot] = int(value)

    def write_at(self, base, size, idx, value):
        if not 0 <= idx < size:
            raise IndexError(f"index {idx} outside an array of {size}")
        self.next[base + idx] = int(value)
