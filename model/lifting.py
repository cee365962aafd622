"""What a spec writes so that it can be lifted to sorts (every size), and what that costs nothing.

The lift (:mod:`.sorted_lift`) runs a spec's actions and claims once with each request, page or
chunk an element of an uninterpreted sort.  Most of the language lifts as it is: a field read at
a parameter is a function applied to an element, ``o.all_``/``o.any_`` over a domain are
quantifiers.  A few things a spec does with plain Python values need a name the lift can see;
each helper here behaves exactly as the plain code it replaces in every other interpretation:

* :func:`indices` - ``indices(n)`` is ``range(n)``; when ``n`` is a per-element count the lift left
  symbolic (a request's number of pages), it iterates that request's chunks as one bound element;
* :func:`per_element` - a method returning configuration about one element (a request's prompt
  length, whether it is over-long): plain Python everywhere, a *rigid symbol* of the lifted model
  (fixed for a run, any value) when called with a sorted element.  Python control flow on such a
  condition is a case split of the lifted action;
* :func:`over_approximated` - a guard helper that the lift may replace by "true" (a weaker guard:
  more behaviour, never less) when its body does what a sort cannot say (order of elements, index
  arithmetic); the lift then prints the helper's line as an abstraction;
* :func:`take_lowest_free` - reserve the lowest-numbered free entries of a pool; the lift reads it
  as "any distinct free entries" and prints that abstraction.

Iterating a :class:`~.layout.Domain` (``for r in self.k.req``) is ``range(domain.size)`` outside the
lift; inside, a domain the protocol declares as a sort yields one bound element.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from typing import Any, Callable

from kvproof.model.expr import SpecError, caller

__all__ = ["LiftRefused", "active_lift", "lifted", "indices", "per_element", "over_approximated", "take_lowest_free"]

_ACTIVE: ContextVar[Any] = ContextVar("kvproof_active_lift", default=None)


class LiftRefused(SpecError):
    """A construct of the spec that the lift to sorts cannot express: one line naming the spec's
    file and line and what blocks it."""


def active_lift() -> Any:
    """The lift run in progress (an object of :mod:`.sorted_lift`), or ``None`` (every other
    interpretation)."""
    return _ACTIVE.get()


def lifted(s: Any) -> bool:
    """Whether ``s`` (a pre- or next state an action receives) belongs to the lift to sorts: for
    a helper that keeps its concrete algorithm in the spec and hands the lift its reading
    (``if lifted(s): take_lowest_free(...)``)."""
    return active_lift() is not None


def indices(n: Any) -> Any:
    """``range(n)`` for a count ``n``; inside the lift, a per-element count (a request's pages)
    iterates as one bound element of its domain."""
    if isinstance(n, int) and not isinstance(n, bool):
        return range(n)
    lift = active_lift()
    if lift is None:
        raise TypeError(f"indices: expected an int, got {type(n).__name__}")
    return lift.indices(n, caller())


def per_element(result: str, derived: bool = False, at_least_one: bool = False) -> Callable:
    """Mark a method of a spec as configuration about the elements it is called with (its
    arguments are indices of sorted domains): ``result`` is ``"condition"`` (a bool) or
    ``"count:<domain>"`` (how many indices of that domain the element has, e.g. a request's
    pages).  Outside the lift the method runs as written.  In the lift it is a rigid symbol,
    unless ``derived``: then its body (computed from other per-element facts, e.g. a
    placeholder's one chunk or the prompt's pages) runs for an action parameter, and for a
    loop's bound element the rigid symbol is defined by that body, case by case (axioms).
    ``at_least_one`` (a count whose configuration never gives 0, e.g. a prompt's pages): the
    domain's first index is always counted, an axiom of the lift wherever a derived count is
    defined (one that names that first index, a placeholder's one chunk, must find it counted)."""
    if result != "condition" and not result.startswith("count:"):
        raise ValueError(f"per_element: result {result!r}: expected 'condition' or 'count:<domain>'")
    if at_least_one and not result.startswith("count:"):
        raise ValueError("per_element: at_least_one is for a count:<domain> result")

    def mark(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any) -> Any:
            lift = active_lift()
            if lift is not None and any(lift.symbolic(a) for a in args):
                if derived:
                    return lift.derived(fn, self, result, args, caller())
                return lift.rigid(fn.__name__, result, args, caller())
            return fn(self, *args)

        wrapper._kv_per_element = result
        wrapper._kv_at_least_one = at_least_one
        return wrapper

    return mark


def over_approximated(line: str) -> Callable:
    """Mark a guard helper (it returns a condition and writes nothing) that the lift may weaken
    to "true" when its body cannot be lifted (it compares elements by order, subtracts from an
    index ...); ``line`` says what is lost, e.g. ``"arrivals in any order (the spec: FIFO
    doors)"``.  A weakened guard admits more steps, so safety proved for the lifted model still
    holds; the lift prints ``line`` with the refusal that made it necessary."""

    def mark(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any) -> Any:
            lift = active_lift()
            if lift is None:
                return fn(self, *args)
            return lift.try_exact(fn, self, args, line, f"{type(self).__name__}.{fn.__name__}")

        wrapper._kv_over_approximated = line
        return wrapper

    return mark


def take_lowest_free(s: Any, n: Any, owner: str, size: int, count: Any, slot_of: Callable[[Any], tuple[str, Any]],
                     owned: Any, free: int = 0, content: str | None = None, filled: Any = None) -> None:
    """Reserve the ``count`` lowest-numbered free entries of a pool (guarded: the action needs
    that many): ``owner`` is the pool's owner field over its ``size`` entries (``free`` marks a
    free one); the ``c``-th entry taken is written at ``slot_of(c)`` (a ``(field, index)`` pair,
    the pool's NONE code ``size`` where none is taken) and its owner becomes ``owned``; with
    ``content``, that field of each entry taken becomes ``filled``.  The lift reads it as "any
    ``count`` distinct free entries" (an over-approximation it prints)."""
    lift = active_lift()
    if lift is not None:
        lift.take_free(s, n, owner, size, count, slot_of, owned, free, content, filled, caller())
        return
    o = s.ops
    own = getattr(s, owner)
    is_free = [own[p] == free for p in range(size)]
    ranks, seen = [], o.const(0)
    for p in range(size):
        ranks.append(seen)
        seen = seen + o.ite(is_free[p], o.const(1), o.const(0))
    s.require(seen >= count)
    for c in range(count):
        chosen = o.const(size)  # NONE
        for p in reversed(range(size)):
            chosen = o.ite(is_free[p] & (ranks[p] == c), o.const(p), chosen)
        field, index = slot_of(c)
        getattr(n, field)[index] = chosen
    for p in range(size):
        taken = is_free[p] & (ranks[p] < count)
        getattr(n, owner)[p] = o.ite(taken, owned, own[p])
        if content is not None:
            getattr(n, content)[p] = o.ite(taken, filled, getattr(s, content)[p])
