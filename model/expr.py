"""Values of the modelling language, and the one facade every spec computes through.

A spec never sees an interpretation's raw values (Python ints, compiled source text, Z3
terms).  Every read of the state is a :class:`Value`, and so is everything computed from one:

* its operators build the same expression as the ops facade in every interpretation:
  ``s.p_phase[r] == P_NEW`` is ``o.eq(s.p_phase[r], P_NEW)``; ``<``, ``<=``, ``>``, ``>=``,
  ``!=``, ``+`` and ``- k`` (a constant) likewise; ``&``, ``|`` and ``~`` join conditions;
* a value has a *kind*, a number (a code of some domain) or a condition, and operations check
  it: a condition is not a number (``o.eq(cond, 1)`` is refused), only numbers are compared by
  order or added, only conditions are joined;
* anything that would let Python decide on a state value is refused with one
  :class:`SpecError` line naming the file, the line and the operation to use instead: a truth
  test (``if``, ``and``, ``or``, ``not``, ``any``/``all``, ``in``), ``int()``, indexing a Python
  list, hashing.  Python would otherwise evaluate the test once, when the spec is compiled, and
  silently build a different model in each engine.

Operations on plain Python values (parameters, flags, sizes) fold in Python, so configuration
decisions stay Python control flow in every interpretation.

:class:`SpecOps` is the facade a spec receives as ``s.ops``: it unwraps values, checks kinds,
calls the interpretation (:class:`~.ops.Ops`) and wraps what comes back.  It also remembers the
writes of the current step, so that the next state reads back what this action wrote.
"""

from __future__ import annotations

import functools
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

from kvproof.model.ops import Ops, RangeError

__all__ = ["SpecError", "Value", "SpecOps", "caller", "INT", "BOOL"]

INT, BOOL = "number", "condition"

_HERE = {os.path.normcase(os.path.abspath(__file__))}


class SpecError(ValueError):
    """A protocol (or a user's engine variant) that misuses the modelling language: the
    message is one line naming the file, the line and the operation to use instead."""


def _language_files() -> set[str]:
    """The modules that implement the language (frames inside them are not the spec's)."""
    if len(_HERE) == 1:
        here = os.path.dirname(next(iter(_HERE)))
        for name in ("framework.py", "ops.py", "expr.py", "lifting.py", "sorted_values.py", "sorted_lift.py"):
            _HERE.add(os.path.normcase(os.path.join(here, name)))
    return _HERE


@functools.lru_cache(maxsize=4096)
def _normal(filename: str) -> str:
    """A code object's file name as :func:`_language_files` holds it (the lift asks per operation)."""
    return os.path.normcase(os.path.abspath(filename))


@functools.lru_cache(maxsize=4096)
def _shown(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies below it, else as it is."""
    try:
        rel = os.path.relpath(path, cwd)
        if not rel.startswith(".."):
            return rel
    except ValueError:  # pragma: no cover - another drive on Windows
        pass
    return path


def caller(function: bool = False) -> str:
    """``file:line`` of the innermost frame outside the language's own modules: the line of
    the spec (or variant) that is being evaluated. With ``function``, ``file:Class.method``
    instead: a name that stays the same when lines above it move (what a certificate records)."""
    inside = _language_files()
    frame = sys._getframe(1)
    while frame is not None and _normal(frame.f_code.co_filename) in inside:
        frame = frame.f_back
    if frame is None:  # pragma: no cover - always called from some spec code
        return "<spec>"
    # a certificate's name for the function is relative to the project (the directory that holds
    # ``spec/``), whatever the working directory; a line, for a person, to the latter
    path = _shown(frame.f_code.co_filename, _project_root() if function else os.getcwd())
    if function:
        return f"{path}:{frame.f_code.co_qualname}"
    return f"{path}:{frame.f_lineno}"


@functools.lru_cache(maxsize=1)
def _project_root() -> str:
    """The directory that holds the protocols' ``spec/`` (the checkout in an editable install,
    the package itself otherwise): what :func:`caller` names a certificate's functions from."""
    import kvproof

    for entry in kvproof.__path__:
        if os.path.isdir(os.path.join(entry, "spec")):
            return entry
    return os.getcwd()  # pragma: no cover - every layout has spec/ on the package path


def _refuse(what: str, instead: str) -> SpecError:
    return SpecError(f"{caller()}: {what}: {instead}")


def _kind_of(x: Any) -> str:
    return BOOL if isinstance(x, bool) else INT


class Value:
    """A value computed from the state: an interpretation's raw value and its kind.

    Operators build expressions (see the module docstring); truth tests and conversions to
    Python raise :class:`SpecError`."""

    __slots__ = ("lang", "raw", "kind")

    def __init__(self, lang: "SpecOps", raw: Any, kind: str):
        self.lang, self.raw, self.kind = lang, raw, kind

    def __repr__(self) -> str:
        return f"Value({self.kind}: {self.raw!r})"

    # -- comparisons and arithmetic ------------------------------------------------------------
    def __eq__(self, other: Any) -> "Value":  # type: ignore[override]
        return self.lang.eq(self, other)

    def __ne__(self, other: Any) -> "Value":  # type: ignore[override]
        return self.lang.ne(self, other)

    def __lt__(self, other: Any) -> "Value":
        return self.lang.lt(self, other)

    def __le__(self, other: Any) -> "Value":
        return self.lang.le(self, other)

    def __gt__(self, other: Any) -> "Value":
        return self.lang.gt(self, other)

    def __ge__(self, other: Any) -> "Value":
        return self.lang.ge(self, other)

    def __add__(self, other: Any) -> "Value":
        return self.lang.add(self, other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> "Value":
        if isinstance(other, bool) or not isinstance(other, int):
            raise _refuse("a state value minus another value", "only a constant can be subtracted (x - 1)")
        return self.lang.add(self, -other)

    def __rsub__(self, other: Any) -> "Value":
        raise _refuse("a number minus a state value", "only a constant can be subtracted from a value (x - 1)")

    # -- conditions ----------------------------------------------------------------------------
    def __and__(self, other: Any) -> "Value":
        return self.lang.and_(self, other)

    __rand__ = __and__

    def __or__(self, other: Any) -> "Value":
        return self.lang.or_(self, other)

    __ror__ = __or__

    def __invert__(self) -> "Value":
        return self.lang.not_(self)

    # -- what Python must not decide -----------------------------------------------------------
    def __bool__(self) -> bool:
        raise _refuse(f"Python control flow on a state value ({self.kind})",
                      "use s.require(cond) for a guard, o.ite(cond, a, b) to choose a value, "
                      "& | ~ (or o.and_, o.or_, o.not_, o.any_, o.all_) to join conditions")

    def __index__(self) -> int:
        raise _refuse("a state value used as a Python index or number",
                      "use o.lookup(table, x) for a constant table, or index a state field with it")

    __int__ = __index__

    def __hash__(self) -> int:
        raise _refuse("a state value used as a set member or dict key", "compare values with == instead")

    def __iter__(self):
        raise _refuse("iterating over a state value", "a state value is one number or condition")

    def __mul__(self, other: Any):
        raise _refuse("multiplication of a state value", "the language has +, - k, comparisons and o.lookup")

    __rmul__ = __truediv__ = __floordiv__ = __mod__ = __pow__ = __neg__ = __mul__

    def __xor__(self, other: Any):
        raise _refuse("^ on a state value", "use o.ne(a, b) for exclusive or, & | ~ to join conditions")

    __rxor__ = __lshift__ = __rshift__ = __xor__


def _describe(x: Any) -> str:
    return x.kind if isinstance(x, Value) else f"{type(x).__name__} {x!r}"


class SpecOps:
    """The ops facade as a spec sees it (``s.ops``): typed :class:`Value`\\ s over one
    interpretation ``raw`` (see the module docstring).  The operation names are those of
    :class:`~.ops.Ops`; plain Python operands fold in Python."""

    def __init__(self, raw: Ops, value_sizes: Sequence[int] = ()):
        self.raw = raw
        self._sizes = value_sizes
        self._writes: list[tuple[int, int, Any, Any]] = []  # (base, size, raw index or None, raw value)
        self._widened: list[Any] = []  # the raw extra condition of each open widen block

    # -- unwrapping and wrapping ---------------------------------------------------------------
    def _in(self, x: Any, kind: str, op: str) -> Any:
        """The raw form of operand ``x`` of ``op``, which must be of ``kind``."""
        if isinstance(x, Value):
            if x.lang is not self:
                raise _refuse(f"{op}: a value of another step", "values live within one action or claim")
            if x.kind != kind:
                raise _refuse(f"{op}: expected a {kind}, got a {x.kind}", _convert_hint(kind))
            return x.raw
        if isinstance(x, int):
            if _kind_of(x) != kind:
                raise _refuse(f"{op}: expected a {kind}, got {x!r}", _convert_hint(kind))
            return x
        native = self.raw.native_kind(x)
        if native is not None:  # a parameter the interpretation itself supplies (a Z3 unknown)
            if native != kind:
                raise _refuse(f"{op}: expected a {kind}, got a {native}", _convert_hint(kind))
            return x
        raise _refuse(f"{op}: {_describe(x)} is not a value of the spec language",
                      "operands are state values, ints (codes, parameters) or bools")

    def _out(self, raw: Any, kind: str) -> Value:
        return Value(self, raw, kind)

    @staticmethod
    def _plain(*xs: Any) -> bool:
        """Every operand is a Python int or bool (so Python computes the result)."""
        return all(isinstance(x, int) for x in xs)

    def _kind(self, x: Any) -> str:
        if isinstance(x, Value):
            return x.kind
        if isinstance(x, int):
            return _kind_of(x)
        return self.raw.native_kind(x) or INT  # anything else is refused by _in, with its name

    def _same(self, a: Any, b: Any, op: str) -> str:
        """The common kind of two operands that may be numbers or conditions."""
        ka, kb = self._kind(a), self._kind(b)
        if ka != kb:
            raise _refuse(f"{op}: a {ka} and a {kb}", "compare numbers with numbers and conditions with conditions "
                          "(o.ite(cond, 1, 0) turns a condition into a number)")
        return ka

    # -- values ----------------------------------------------------------------------------------
    def const(self, v: int | bool) -> Value:
        """A literal as a value of the interpretation."""
        if not isinstance(v, int):
            raise _refuse(f"const: {v!r} is not an int or a bool", "constants are codes or truth values")
        return self._out(self.raw.const(v), _kind_of(v))

    def eq(self, a: Any, b: Any) -> Any:
        """``a == b`` (two numbers or two conditions)."""
        kind = self._same(a, b, "==")
        if self._plain(a, b):
            return a == b
        x, y = self._in(a, kind, "=="), self._in(b, kind, "==")
        if kind == BOOL:  # two conditions: both hold or neither (every interpretation has and/or/not)
            r = self.raw
            return self._out(r.or_(r.and_(x, y), r.and_(r.not_(x), r.not_(y))), BOOL)
        return self._out(self.raw.eq(x, y), BOOL)

    def ne(self, a: Any, b: Any) -> Any:
        """``a != b``."""
        kind = self._same(a, b, "!=")
        if self._plain(a, b):
            return a != b
        if kind == BOOL:
            return self.not_(self.eq(a, b))
        return self._out(self.raw.ne(self._in(a, kind, "!="), self._in(b, kind, "!=")), BOOL)

    def _order(self, name: str, sym: str, a: Any, b: Any, py) -> Any:
        if self._plain(a, b):
            self._in(a, INT, sym), self._in(b, INT, sym)
            return py(a, b)
        return self._out(getattr(self.raw, name)(self._in(a, INT, sym), self._in(b, INT, sym)), BOOL)

    def lt(self, a: Any, b: Any) -> Any:
        """``a < b`` on numbers."""
        return self._order("lt", "<", a, b, lambda x, y: x < y)

    def le(self, a: Any, b: Any) -> Any:
        """``a <= b`` on numbers."""
        return self._order("le", "<=", a, b, lambda x, y: x <= y)

    def gt(self, a: Any, b: Any) -> Any:
        """``a > b`` on numbers."""
        return self._order("gt", ">", a, b, lambda x, y: x > y)

    def ge(self, a: Any, b: Any) -> Any:
        """``a >= b`` on numbers."""
        return self._order("ge", ">=", a, b, lambda x, y: x >= y)

    def add(self, a: Any, b: Any) -> Any:
        """``a + b`` on numbers."""
        if self._plain(a, b):
            return self._in(a, INT, "+") + self._in(b, INT, "+")
        return self._out(self.raw.add(self._in(a, INT, "+"), self._in(b, INT, "+")), INT)

    def min_(self, a: Any, b: Any) -> Any:
        """The smaller of two numbers."""
        if self._plain(a, b):
            return min(self._in(a, INT, "min_"), self._in(b, INT, "min_"))
        return self._out(self.raw.min_(self._in(a, INT, "min_"), self._in(b, INT, "min_")), INT)

    def max_(self, a: Any, b: Any) -> Any:
        """The larger of two numbers."""
        if self._plain(a, b):
            return max(self._in(a, INT, "max_"), self._in(b, INT, "max_"))
        return self._out(self.raw.max_(self._in(a, INT, "max_"), self._in(b, INT, "max_")), INT)

    def lookup(self, table: Sequence[int], idx: Any) -> Any:
        """``table[idx]`` for a constant table of numbers and a number ``idx``."""
        table = tuple(table)
        if not table or not all(isinstance(v, int) and not isinstance(v, bool) for v in table):
            raise _refuse("lookup: the table must be a non-empty sequence of ints", "o.lookup((3, 1, 2), x)")
        if self._plain(idx):
            i = self._in(idx, INT, "lookup")
            if not 0 <= i < len(table):
                raise _refuse(f"lookup: index {i} outside a table of {len(table)}", "index within the table")
            return table[i]
        return self._out(self.raw.lookup(table, self._in(idx, INT, "lookup")), INT)

    # -- conditions ------------------------------------------------------------------------------
    def and_(self, *xs: Any) -> Any:
        """Conjunction of conditions; ``and_()`` is true."""
        if self._plain(*xs):
            return all(self._in(x, BOOL, "and_") for x in xs)
        return self._out(self.raw.and_(*[self._in(x, BOOL, "and_") for x in xs]), BOOL)

    def or_(self, *xs: Any) -> Any:
        """Disjunction of conditions; ``or_()`` is false."""
        if self._plain(*xs):
            return any(self._in(x, BOOL, "or_") for x in xs)
        return self._out(self.raw.or_(*[self._in(x, BOOL, "or_") for x in xs]), BOOL)

    def not_(self, x: Any) -> Any:
        """Negation of a condition."""
        if self._plain(x):
            return not self._in(x, BOOL, "not_")
        return self._out(self.raw.not_(self._in(x, BOOL, "not_")), BOOL)

    def implies(self, a: Any, b: Any) -> Any:
        """``a`` implies ``b``."""
        if self._plain(a, b):
            return (not self._in(a, BOOL, "implies")) or self._in(b, BOOL, "implies")
        return self._out(self.raw.implies(self._in(a, BOOL, "implies"), self._in(b, BOOL, "implies")), BOOL)

    def all_(self, xs: Iterable[Any]) -> Any:
        """Conjunction of an iterable of conditions."""
        xs = list(xs)
        if self._plain(*xs):
            return self.and_(*xs)
        return self._out(self.raw.all_([self._in(x, BOOL, "all_") for x in xs]), BOOL)

    def any_(self, xs: Iterable[Any]) -> Any:
        """Disjunction of an iterable of conditions."""
        xs = list(xs)
        if self._plain(*xs):
            return self.or_(*xs)
        return self._out(self.raw.any_([self._in(x, BOOL, "any_") for x in xs]), BOOL)

    def is_in(self, x: Any, values: Iterable[int]) -> Any:
        """Number ``x`` is one of the constant ``values``."""
        values = list(values)
        for v in values:
            self._in(v, INT, "is_in")
            if isinstance(v, Value):
                raise _refuse("is_in: the values must be constants", "o.is_in(x, (A, B))")
        if self._plain(x):
            return self._in(x, INT, "is_in") in values
        return self._out(self.raw.is_in(self._in(x, INT, "is_in"), values), BOOL)

    def count(self, conds: Iterable[Any]) -> Any:
        """How many of ``conds`` hold (a number)."""
        conds = list(conds)
        if self._plain(*conds):
            return sum(1 for c in conds if self._in(c, BOOL, "count"))
        return self._out(self.raw.count([self._in(c, BOOL, "count") for c in conds]), INT)

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        """``a`` where condition ``c`` holds, else ``b`` (two numbers or two conditions)."""
        kind = self._same(a, b, "ite")
        if self._plain(c):
            self._in(a, kind, "ite"), self._in(b, kind, "ite")
            return a if self._in(c, BOOL, "ite") else b
        raw_c = self._in(c, BOOL, "ite")
        if self._plain(a, b) and a == b and type(a) is type(b):
            return a
        return self._out(self.raw.ite(raw_c, self._in(a, kind, "ite"), self._in(b, kind, "ite")), kind)

    # -- guards ----------------------------------------------------------------------------------
    def require(self, cond: Any) -> None:
        """Narrow the action's guard by condition ``cond``; inside :meth:`widen` blocks, by
        ``cond`` or any of their extra conditions."""
        raw = self._in(cond, BOOL, "require")
        if self._widened:
            raw = self.raw.or_(raw, *self._widened)
        self.raw.require(raw)

    @contextmanager
    def widen(self, extra: Any) -> Iterator[None]:
        """Within the block, every guard required holds *or* ``extra`` does (see
        :meth:`~.framework.Pre.widen`).  Each ``require(c)`` inside narrows by ``c | extra``,
        and the conjunction of those is the block's guard or ``extra``; so the reference
        interpreter, where ``extra`` is false, stops at the first false ``c`` as it would
        without the block, and where ``extra`` is true evaluates the whole (enabled) action."""
        self._widened.append(self._in(extra, BOOL, "widen"))
        try:
            yield
        finally:
            self._widened.pop()

    # -- state -----------------------------------------------------------------------------------
    def number(self, x: Any, what: str) -> Any:
        """The raw number a field stores for ``x``: a number as it is, a condition as 1 or 0."""
        if isinstance(x, Value) and x.kind == BOOL:
            return self.raw.ite(self._in(x, BOOL, what), 1, 0)
        if isinstance(x, bool):
            return int(x)
        return self._in(x, INT, what)

    def read(self, slot: int) -> Value:
        """The pre-state's number at a fixed slot."""
        return self._out(self.raw.read(slot), INT)

    def read_at(self, base: int, size: int, idx: Any, what: str) -> Value:
        """The pre-state's number at ``base + idx`` for a number ``idx`` in ``range(size)``."""
        raw_idx = self._in(idx, INT, what)
        try:
            return self._out(self.raw.read_at(base, size, raw_idx), INT)
        except IndexError as e:
            raise _refuse(f"{what}: {e}", "index within the field (a NONE index needs a sentinel)") from None

    def write(self, slot: int, value: Any, values: int, what: str) -> None:
        """Set the next state's number at a fixed slot; ``values`` is the field's value count."""
        raw = self.number(value, what)
        self._bound(raw, values, what)
        self.raw.write(slot, raw)
        self._writes.append((slot, 1, None, raw))

    def write_at(self, base: int, size: int, idx: Any, value: Any, values: int, what: str) -> None:
        """Set the next state's number at ``base + idx`` for a number ``idx``."""
        raw_idx = self._in(idx, INT, what)
        raw = self.number(value, what)
        self._bound(raw, values, what)
        try:
            self.raw.write_at(base, size, raw_idx, raw)
        except IndexError as e:
            raise _refuse(f"{what}: {e}", "index within the field") from None
        self._writes.append((base, size, raw_idx, raw))

    def _bound(self, raw: Any, values: int, what: str) -> None:
        """A number written into a field must be one of its codes (checked where it can be)."""
        if isinstance(raw, int) and not 0 <= raw < values:
            raise _refuse(f"{what}: writes {raw}, outside the field's values 0..{values - 1}",
                          "write a code of the field's value domain")
        try:
            self.raw.bound(raw, values, what)
        except RangeError as e:
            raise _refuse(str(e), "write a code of the field's value domain") from None

    def next_value(self, slot: int) -> Value:
        """What the next state holds at ``slot`` after this action's writes so far."""
        cur = self.raw.read(slot)
        for base, size, idx, value in self._writes:
            if idx is None:
                if base == slot:
                    cur = value
            elif base <= slot < base + size:
                cur = self.raw.ite(self.raw.eq(idx, slot - base), value, cur)
        return self._out(cur, INT)

    def next_value_at(self, base: int, size: int, idx: Any, what: str) -> Value:
        """What the next state holds at ``base + idx`` (a number ``idx``)."""
        self._in(idx, INT, what)
        out: Any = self.next_value(base + size - 1)
        for k in reversed(range(size - 1)):
            out = self.ite(self.eq(idx, k), self.next_value(base + k), out)
        return out


def _convert_hint(kind: str) -> str:
    if kind == BOOL:
        return "compare the number to get a condition (x == CODE, x != 0)"
    return "o.ite(cond, 1, 0) turns a condition into a number"
