"""How a protocol is written: actions (guard + effect) and claims, over a :class:`Layout`.

A protocol is a subclass of :class:`Spec`.  Its actions are methods decorated with
:func:`action`; each takes the pre-state ``s`` (a :class:`Pre`), the next state ``n`` (a
:class:`Post`) and one value per parameter domain::

    @action("decode", "req")
    def decode_abort(self, s, n, r):
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_WAITING))    # guard
        n.d_phase[r] = D_HELD                       # effect: only the fields that change

Guards are narrowed with ``s.require``; effects assign to ``n``; every read goes to the
pre-state.  The framework supplies the frame (all other fields unchanged).  Claims are methods
decorated with :func:`invariant` (must hold in every reachable state), :func:`invariant` with
``at="quiescent"`` (must hold where no action is enabled) or :func:`witness` (must be reachable,
so that a verified claim is never vacuous).

An engine variant is a subclass that overrides one action or one helper; definition order of
the base class is kept, so action ids stay stable across variants.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterator

from .layout import Domain, Field, Layout
from .ops import Ops

__all__ = [
    "Spec",
    "Pre",
    "Post",
    "ActionDef",
    "ActionInstance",
    "Claim",
    "action",
    "invariant",
    "witness",
]


@dataclass(frozen=True)
class ActionDef:
    """An action as declared: its name, actor, parameter domains and docstring."""

    name: str
    actor: str
    params: tuple[str, ...]
    doc: str


@dataclass(frozen=True)
class ActionInstance:
    """One action with concrete parameters; ``aid`` is its index in :attr:`Spec.instances`."""

    aid: int
    action: ActionDef
    args: tuple[int, ...]

    @property
    def name(self) -> str:
        """The action's name."""
        return self.action.name

    def params(self) -> dict[str, int]:
        """``{parameter domain: value}``."""
        return dict(zip(self.action.params, self.args))


@dataclass(frozen=True)
class Claim:
    """A named property: ``kind`` is ``invariant`` or ``witness``; ``at`` is ``always`` or
    ``quiescent`` (checked only in states where no action is enabled)."""

    name: str
    kind: str
    at: str
    doc: str


def action(actor: str, *params: str) -> Callable:
    """Declare a method as an action of ``actor`` over the named parameter domains."""

    def mark(fn: Callable) -> Callable:
        fn._kv_action = (actor, tuple(params))
        return fn

    return mark


def invariant(fn: Callable | None = None, *, at: str = "always") -> Callable:
    """Declare a method as an invariant (a safety claim), optionally checked only ``at`` quiescence."""
    if at not in ("always", "quiescent"):
        raise ValueError(f"invariant at={at!r}: expected 'always' or 'quiescent'")

    def mark(f: Callable) -> Callable:
        f._kv_claim = ("invariant", at)
        return f

    return mark(fn) if fn is not None else mark


def witness(fn: Callable) -> Callable:
    """Declare a method as a witness: a state predicate that must be reachable."""
    fn._kv_claim = ("witness", "always")
    return fn


class _FieldView:
    """Reads (on :class:`Pre`) or writes (on :class:`Post`) one array field."""

    __slots__ = ("_f", "_base", "_ops", "_layout")

    def __init__(self, f: Field, base: int, ops: Ops, layout: Layout):
        self._f, self._base, self._ops, self._layout = f, base, ops, layout

    def _slot(self, key: Any) -> int | None:
        idx = key if isinstance(key, tuple) else (key,)
        if all(isinstance(i, int) for i in idx):
            return self._layout.slot(self._f.name, *idx)
        if len(idx) != 1 or len(self._f.dims) != 1:
            raise TypeError(f"{self._f.name}: only one-dimensional fields take a value index")
        return None

    def __getitem__(self, key: Any) -> Any:
        slot = self._slot(key)
        if slot is not None:
            return self._ops.read(slot)
        return self._ops.read_at(self._base, self._f.width, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        slot = self._slot(key)
        if slot is not None:
            self._ops.write(slot, value)
        else:
            self._ops.write_at(self._base, self._f.width, key, value)


class Pre:
    """The pre-state of a step, read through ``ops``: ``s.field`` (scalar) or ``s.field[i]``."""

    def __init__(self, ops: Ops, layout: Layout):
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "_layout", layout)

    def __getattr__(self, name: str) -> Any:
        f = self._layout.by_name.get(name)
        if f is None:
            raise AttributeError(f"no field {name!r}")
        if not f.dims:
            return self.ops.read(self._layout.base[name])
        view = _FieldView(f, self._layout.base[name], self.ops, self._layout)
        object.__setattr__(self, name, view)
        return view

    def require(self, cond: Any) -> None:
        """Narrow the guard: the action is enabled only where ``cond`` holds."""
        self.ops.require(cond)


class Post(Pre):
    """The next state: ``n.field = v`` (scalar) or ``n.field[i] = v``; unassigned fields keep
    their pre-state values."""

    def __setattr__(self, name: str, value: Any) -> None:
        f = self._layout.by_name.get(name)
        if f is None or f.dims:
            raise AttributeError(f"cannot assign {name!r}: not a scalar field")
        self.ops.write(self._layout.base[name], value)


class Spec:
    """Base class of a protocol: domains, fields, actions and claims.

    Subclasses implement :meth:`build_fields`; actions and claims are found by their decorators
    in definition order (base classes first, an override keeps its base's position).
    """

    def build_fields(self) -> list[Field]:  # pragma: no cover - abstract
        """The state's fields, in layout order."""
        raise NotImplementedError

    def domain(self, name: str) -> Domain:  # pragma: no cover - abstract
        """The index domain called ``name`` (a parameter domain of some action)."""
        raise NotImplementedError

    @cached_property
    def layout(self) -> Layout:
        """The flat layout of the state."""
        return Layout(self.build_fields())

    def init_state(self) -> tuple[int, ...]:
        """The initial state (one, for this protocol family)."""
        return self.layout.init_state()

    def symmetry(self) -> Any:
        """Interchangeable elements of an index domain (a :class:`~.symmetry.Symmetry`), or
        ``None`` (the default: no symmetry reduction)."""
        return None

    # -- discovery ------------------------------------------------------------------------------
    def _marked(self, attr: str) -> Iterator[tuple[str, Any]]:
        """(name, mark) of every method carrying ``attr``, in base-first definition order.

        An override without the decorator keeps the mark of the method it overrides.
        """
        marks: dict[str, Any] = {}
        for klass in reversed(type(self).__mro__):
            for name, val in vars(klass).items():
                if hasattr(val, attr):
                    marks[name] = getattr(val, attr)
        for name, mark in marks.items():
            yield name, mark

    @cached_property
    def actions(self) -> list[ActionDef]:
        """Every declared action."""
        out = []
        for name, (actor, params) in self._marked("_kv_action"):
            out.append(ActionDef(name, actor, params, _doc(getattr(type(self), name))))
        return out

    @cached_property
    def instances(self) -> list[ActionInstance]:
        """Every (action, parameters) pair, numbered."""
        out: list[ActionInstance] = []
        for a in self.actions:
            for args in _product([range(self.domain(p).size) for p in a.params]):
                out.append(ActionInstance(len(out), a, args))
        return out

    @cached_property
    def claims(self) -> list[Claim]:
        """Every declared invariant and witness."""
        out = []
        for name, (kind, at) in self._marked("_kv_claim"):
            out.append(Claim(name, kind, at, _doc(getattr(type(self), name))))
        return out

    def claim(self, name: str) -> Claim:
        """The claim called ``name``; ``KeyError`` if there is none."""
        for c in self.claims:
            if c.name == name:
                return c
        raise KeyError(name)

    # -- evaluation through an interpretation -------------------------------------------------
    def run_action(self, inst: ActionInstance, ops: Ops) -> None:
        """Evaluate one action instance's guard and effect through ``ops``."""
        getattr(self, inst.action.name)(Pre(ops, self.layout), Post(ops, self.layout), *inst.args)

    def eval_claim(self, name: str, ops: Ops) -> Any:
        """Evaluate one claim's state predicate through ``ops``."""
        return getattr(self, name)(Pre(ops, self.layout))


def _doc(fn: Callable) -> str:
    return " ".join((fn.__doc__ or "").split())


def _product(ranges: list[range]) -> Iterator[tuple[int, ...]]:
    if not ranges:
        yield ()
        return
    for head in ranges[0]:
        for tail in _product(ranges[1:]):
            yield (head, *tail)
