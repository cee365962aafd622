"""Values of the sorted interpretation: how a code of the spec reads as a term over sorts.

The lift (:mod:`.sorted_lift`) keeps every number the spec computes as a Z3 term with the *value
domain* it belongs to, so that a constant code meets it as the right term:

* :class:`EnumDom` - a finite value domain (a phase, a flag, a clock at the scenario's bound) as a
  Z3 enumeration sort, one constant per code; order and ``+ k`` expand over the codes;
* :class:`RefDom` - a value domain whose codes name elements of a sorted index domain (an owner
  names a request, ``dest`` names a page): the element's term, its NONE code the sort's
  distinguished constant (``free`` as an owner, no page);
* :class:`IntDom` - a count (``o.count``) as a Z3 integer;
* :class:`SortDom` - a value of a rigid function's result sort (a tenant), compared only by ``==``.

A :class:`Num` is a term with its domain; a :class:`Poly` is a number whose domain is not known yet
(``o.ite(c, 1, 0)``), made a term where it meets one; :class:`Elem` is a sorted element (an action
parameter or a loop's bound element) and :class:`Code` is ``element + k`` (``owned_by(r)``), which
a :class:`RefDom` of offset ``k`` reads as the element itself.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable

import z3

from kvproof.model.lifting import LiftRefused

__all__ = ["EnumDom", "RefDom", "IntDom", "SortDom", "Num", "Poly", "Elem", "Code", "Card", "enum_sort", "WIDE"]

_ENUMS: dict[tuple, tuple[Any, list[Any]]] = {}


def _part(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in str(text))


def _ident(text: str) -> str:
    out = _part(text)
    return out if out and not out[0].isdigit() else f"v{out}"


def enum_sort(name: str, labels: tuple[str, ...]) -> tuple[str, Any, list[Any]]:
    """A Z3 enumeration sort for a value domain (declared once per name and labels in Z3's
    context): (sort name, sort, constants).  The sort's name is the domain's with a digest of its
    labels (``p_phase_3a9f0c``), its constants the domain's name and each label
    (``p_phase_new``): a function of the domain alone, so that the same domain gets the same
    names whatever was lifted before it in the process (another protocol's ``p_phase``, a clock
    of another size), and a certificate's text depends on its scenario only."""
    base = _ident(name)
    names = tuple(f"{base}_{_part(x)}" for x in labels)
    key = (base, names)
    if key not in _ENUMS:
        digest = hashlib.blake2s("\x00".join(map(str, labels)).encode(), digest_size=3).hexdigest()
        _ENUMS[key] = z3.EnumSort(f"{base}_{digest}", list(names))
    sort, consts = _ENUMS[key]
    return sort.name(), sort, consts


@dataclass(frozen=True, eq=False)
class EnumDom:
    """A finite value domain as an enumeration sort."""

    name: str
    sort_name: str
    sort: Any
    consts: tuple[Any, ...]

    def code(self, v: int, where: str) -> Any:
        if not 0 <= v < len(self.consts):
            raise LiftRefused(f"{where}: code {v} is not a value of {self.name} (0..{len(self.consts) - 1})")
        return self.consts[v]


@dataclass(frozen=True, eq=False)
class RefDom:
    """Codes naming elements of a sorted index domain: code ``none_code`` is the sort's constant
    ``none``; code ``i + offset`` is element ``i``."""

    name: str
    sort_name: str
    sort: Any
    none: Any
    none_code: int
    offset: int

    def compatible(self, other: "RefDom") -> bool:
        return self.sort_name == other.sort_name and self.none_code == other.none_code and self.offset == other.offset


@dataclass(frozen=True, eq=False)
class IntDom:
    """A count, as a Z3 integer."""

    name: str = "count"


@dataclass(frozen=True, eq=False)
class SortDom:
    """A value of an uninterpreted result sort (a rigid function's: a tenant)."""

    name: str
    sort: Any


INT = IntDom()


@dataclass(frozen=True, eq=False)
class Num:
    """A term of a value domain."""

    term: Any
    dom: Any


@dataclass(frozen=True, eq=False)
class Poly:
    """A number whose domain is known only where it meets a typed value: ``make(dom)`` is its term
    there."""

    make: Callable[[Any], Any]


class _Refusing:
    """What a spec must not do with a sorted element: Python control flow, order, arithmetic."""

    run: Any

    def _no(self, what: str) -> LiftRefused:
        from kvproof.model.expr import caller
        return LiftRefused(f"{caller()}: {what}")

    def __bool__(self) -> bool:
        raise self._no(f"Python control flow on a sorted element ({self})")

    def __index__(self) -> int:
        raise self._no(f"a sorted element ({self}) used as a Python index or number "
                       "(a table of the configuration indexed by an element: declare it, or use a per_element method)")

    __int__ = __index__

    def __hash__(self) -> int:
        raise self._no(f"a sorted element ({self}) used as a set member or dict key")

    def __sub__(self, other: Any) -> Any:
        raise self._no(f"index arithmetic on a sorted element ({self} - {other}): a sort has no predecessor")

    __rsub__ = __mul__ = __rmul__ = __floordiv__ = __mod__ = __neg__ = __sub__

    def __lt__(self, other: Any) -> Any:
        raise self._no(f"order on a sorted element ({self} < {other}): a sort has no order")

    __le__ = __gt__ = __ge__ = __lt__


class Elem(_Refusing):
    """A sorted element: an action parameter or a loop's bound element (``term`` a Z3 constant of
    sort ``sort_name``, over the index domain ``domain``)."""

    def __init__(self, run: Any, term: Any, sort_name: str, domain: str, var: Any = None):
        self.run, self.term, self.sort_name, self.domain, self.var = run, term, sort_name, domain, var

    def __repr__(self) -> str:
        return f"{self.domain} {self.term}"

    def __add__(self, k: Any) -> "Code":
        if isinstance(k, bool) or not isinstance(k, int):
            raise self._no(f"{self} + {k!r}: only a constant offset names an element's code (owned_by(r))")
        return Code(self, k)

    __radd__ = __add__

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        if isinstance(other, Elem):
            return self.run.condition(self.term == other.term)
        if isinstance(other, int):
            raise self._no(f"a sorted element compared with the fixed index {other} ({self} == {other}): "
                           "a sort has no numbered elements")
        return NotImplemented

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        if isinstance(other, Elem):
            return self.run.condition(self.term != other.term)
        if isinstance(other, int):
            raise self._no(f"a sorted element compared with the fixed index {other} ({self} != {other}): "
                           "a sort has no numbered elements")
        return NotImplemented

    __hash__ = _Refusing.__hash__

    def __lt__(self, other: Any) -> Any:
        if isinstance(other, Card) and other.domain == self.domain:
            return self.run.condition(other.member(self.term))
        first = self.run.first(self.domain) if isinstance(other, int) and not isinstance(other, bool) else None
        if first is not None and other == 1:  # the first index: the domain's distinguished element
            return self.run.condition(self.term == first)
        return super().__lt__(other)


class Code(_Refusing):
    """``element + offset``: the code naming ``element`` in a value domain of that offset."""

    def __init__(self, elem: Elem, offset: int):
        self.elem, self.offset, self.run = elem, offset, elem.run

    def __repr__(self) -> str:
        return f"{self.elem} + {self.offset}"

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return NotImplemented

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return NotImplemented

    __hash__ = _Refusing.__hash__


class Card(_Refusing):
    """A per-element count left symbolic (``pages(r)``): iterating it (:func:`~.lifting.indices`)
    yields one element of ``domain`` with ``member``; ``c < count`` is ``member(c)``."""

    def __init__(self, run: Any, name: str, args: tuple[Any, ...], domain: str, member: Callable[[Any], Any]):
        self.run, self.name, self.args, self.domain, self.member = run, name, args, domain, member

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(str(a) for a in self.args)})"

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        raise self._no(f"a per-element count ({self}) compared as a number: iterate indices({self.name}(...))")

    __ne__ = __eq__
    __hash__ = _Refusing.__hash__

    def __iter__(self):
        raise self._no(f"iterating a per-element count ({self}) directly: use indices(...)")


class _Wide:
    """The condition an :func:`~.lifting.over_approximated` helper stands for in the lift: only
    ``s.require`` may take it (where it is dropped)."""

    def __repr__(self) -> str:
        return "<over-approximated condition>"


WIDE = _Wide()
