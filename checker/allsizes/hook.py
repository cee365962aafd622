"""What the lift (:func:`~.sorted_allsizes.lifted_model`) hands the all-sizes pipeline
(:mod:`.prove`): the model (:class:`AllSizesModel`) and its joined templates (:class:`Join`).  Its own module so that the
lift's model builder (:mod:`.sorted_allsizes`) and the pipeline both use it without a cycle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kvproof.checker.allsizes.quantified import Candidate, ParametricSystem

__all__ = ["AllSizesModel", "Join"]


@dataclass
class AllSizesModel:
    """What :func:`prove_all_sizes` works on for one engine: the parametric ``system``;
    the ``targets`` (claim names it states); ``small``, a spec instance to mine candidates
    from; ``lift(clause)``, a ground clause of ``small`` as a candidate (``None``: not
    expressible); and ``fixed``/``abstractions``, lines saying what stays fixed and what is
    over-approximated."""

    system: ParametricSystem
    targets: tuple[str, ...]
    small: Any
    lift: Callable[[tuple], Candidate | None]
    fixed: tuple[str, ...] = ()
    abstractions: tuple[str, ...] = ()
    joins: Callable[[Any], Sequence["Join"]] | None = None
    """The joined templates (:class:`Join`) of the small instance's reachable states (one row
    each), or ``None`` (no pointer to join through)."""
    link: Callable[[str | None, str], Any] | None = None
    """``link(invariant, source)``: the :class:`~.link.LinkMap` of the scenario's own instance
    and ``system`` (hypotheses: the conjuncts of ``invariant``, a certificate's one-line
    invariant read from ``source``), or ``None`` (no link at a fixed size)."""
    filter_sizes: dict[str, int] | None = None
    """The bounded instance Houdini filters on first (each uninterpreted sort's size, its
    sentinel included); ``None``: no bounded filter, Houdini runs on the unbounded system only."""
    triples: Callable[[Sequence[tuple]], list[tuple]] | None = None
    """Which three-value facts of the small instance ``--template-arity 3`` keeps; ``None``: those
    of one element by the protocol's index sorts (:func:`~.prove.one_element_triples`)."""
    more: tuple[tuple[Any, ...], ...] = ()
    """Further instances mined the same way, each ``(small, lift, joins)`` or ``(small, lift,
    joins, triples)`` (that instance's own choice of three-value facts; without it,
    :attr:`triples`): what ``small`` cannot show within an enumerable size (e.g. several ranks
    beside several requests, a request that sends fewer chunks than it reserved)."""
    prelink: Callable[[Callable[[str], None]], tuple[list[str], str]] | None = None
    """Checked before any candidate is mined: the link of ``system`` with the spec at fixed sizes,
    returning (one line per size, "" or why the model is not the spec's); a model that fails it is
    not used (a lifted model: :func:`~.sorted_allsizes.link_at_sizes`)."""


@dataclass
class Join:
    """A template joined through a pointer: one row per reachable state of the small instance
    and per element holding a pointer (e.g. a request's chunk and the page it names), its
    ``columns`` the slots of that element and of the element pointed to, with values coded by the
    protocol (a request relative to the element: itself, none, another).  A fact never seen in
    ``rows`` that names at least one of the pointed element's columns (``targets``) is lifted by
    ``lift`` (a tuple of (column, value) pairs to a :class:`~.quantified.Candidate`, or ``None``)
    to a formula quantified over the pointing element only, the pointed one being the pointer's
    term: how lemmas such as "a live request's landed chunk's page holds its own KV" are found."""

    name: str
    columns: tuple[str, ...]
    rows: Any
    domains: tuple[tuple[int, ...], ...]
    targets: frozenset[int]
    lift: Callable[[tuple], Candidate | None]
