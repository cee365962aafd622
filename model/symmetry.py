"""Symmetry declarations: which elements of an index domain are interchangeable.

A spec may declare (:meth:`~kvproof.model.framework.Spec.symmetry`) that some elements of one of
its index domains - requests of the same shape, say - are interchangeable: permuting them maps
every reachable state to a reachable state and every transition to a transition.  Permuting
element ``a`` with ``b`` moves every slot indexed by ``a`` to ``b`` (the element's *row*) and
rewrites every value that *refers* to ``a`` (an owner code ``a + 1``, say) to refer to ``b``.

A declaration is a claim, not a fact: the checker tests it on sampled reachable states (the
initial state, the claims and the successor sets must all commute with the permutations) and
refuses to reduce when it fails (:mod:`kvproof.checker.explicit.symmetry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from kvproof.model.layout import Domain

__all__ = ["Sort", "Symmetry", "IndexSort"]


@dataclass(frozen=True)
class Sort:
    """Interchangeable elements of one index ``domain``: each of ``classes`` is a group of
    elements any two of which may be swapped (elements in no class stay put)."""

    domain: Domain
    classes: tuple[tuple[int, ...], ...]

    @property
    def nontrivial(self) -> tuple[tuple[int, ...], ...]:
        """Classes of two or more elements (the only ones that permute anything)."""
        return tuple(c for c in self.classes if len(c) > 1)


@dataclass(frozen=True)
class Symmetry:
    """A sort and the value domains whose codes refer to its elements.

    ``refs`` maps a value domain's name to one entry per code: ``None`` for a code that no
    permutation changes, or ``(element, role)`` for a code that stands for ``element`` (``role``
    tells apart several codes of one element, e.g. "owned by" and "written by"); a permutation
    maps it to the code of the same role for the element's image.
    """

    sort: Sort
    refs: dict[str, tuple[tuple[int, int] | None, ...]] = field(default_factory=dict)
    also: tuple["Symmetry", ...] = ()
    """Further sorts permuted independently of this one (decode pages, say), each with its own
    references."""

    def describe(self) -> str:
        """The interchangeable groups, by label: ``R0~R1~R2, R3~R4``."""
        d = self.sort.domain
        own = ", ".join("~".join(str(d.label(e)) for e in c) for c in self.sort.nontrivial)
        return "; ".join([own] + [x.describe() for x in self.also])

    @property
    def order(self) -> int:
        """How many permutations the declaration allows (the group's size)."""
        n = 1
        for c in self.sort.nontrivial:
            for k in range(2, len(c) + 1):
                n *= k
        for x in self.also:
            n *= x.order
        return n


@dataclass(frozen=True)
class IndexSort:
    """One index domain whose elements a ground fact may be *renamed* over, from one instance of
    a protocol to a larger one (:mod:`kvproof.checker.symbolic.lift`).

    Unlike :class:`Symmetry` this claims nothing: it says which elements exist (``domain``),
    which of them are of the same kind (``kinds``: one hashable per element; a renaming maps an
    element only to an element of the same kind, in the larger instance too), and which value
    codes name an element (``refs``, as in :class:`Symmetry`: per value domain, one entry per
    code, ``None`` or ``(element, role)``).  A renamed fact is only a *candidate*; whether it
    holds in the larger instance is for a solver to decide.
    """

    domain: Domain
    kinds: tuple[Hashable, ...]
    refs: dict[str, tuple[tuple[int, int] | None, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.kinds) != self.domain.size:
            raise ValueError(f"{self.domain.name}: {len(self.kinds)} kinds for {self.domain.size} elements")
