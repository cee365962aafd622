"""How a protocol is written: actions (guard + effect) and claims, over a :class:`Layout`.

A protocol is a subclass of :class:`Spec`.  Its actions are methods decorated with
:func:`action`; each takes the pre-state ``s`` (a :class:`Pre`), the next state ``n`` (a
:class:`Post`) and one value per parameter domain::

    @action("decode", "req")
    def decode_abort(self, s, n, r):
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_WAITING))    # guard
        n.d_phase[r] = D_HELD                       # effect: only the fields that change

Guards are narrowed with ``s.require`` (and an override widens its base's with
``with s.widen(extra): super()...``); effects assign to ``n``; reads of ``s`` go to the
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

from kvproof.model.expr import BOOL, SpecError, SpecOps, Value, caller
from kvproof.model.layout import Domain, Field, Layout
from kvproof.model.narrate import derive_messages, derive_page_maps, derive_timelines
from kvproof.model.narration import Lane, Message, Note, PageMap, PageTimeline
from kvproof.model.ops import Disabled, Ops

__all__ = [
    "SpecError",
    "Spec",
    "ConfiguredSpec",
    "Pre",
    "Post",
    "ActionDef",
    "StaticallyDisabled",
    "ActionInstance",
    "Claim",
    "action",
    "invariant",
    "witness",
    "liveness",
]


@dataclass(frozen=True)
class ActionDef:
    """An action as declared: its name, actor, parameter domains and docstring.

    ``fair`` actions are ones the real engine runs eventually once they stay enabled (time,
    transfer progress, heartbeats, message handling); fair liveness assumes weak fairness of
    exactly these.  Aborts, failures, losses and deaths are the environment's choice: not fair.
    """

    name: str
    actor: str
    params: tuple[str, ...]
    doc: str
    fair: bool = False


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
    """A named property: ``kind`` is ``invariant``, ``witness`` or ``liveness``; ``at`` is
    ``always``, ``quiescent`` (checked only in states where no action is enabled) or ``fair``
    (a liveness claim, checked on the whole state graph under weak fairness)."""

    name: str
    kind: str
    at: str
    doc: str


def action(actor: str, *params: str, fair: bool = False) -> Callable:
    """Declare a method as an action of ``actor`` over the named parameter domains; ``fair``
    marks it as one the engine runs eventually (see :class:`ActionDef`)."""

    def mark(fn: Callable) -> Callable:
        fn._kv_action = (actor, tuple(params), fair)
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


def liveness(fn: Callable) -> Callable:
    """Declare a method as a liveness claim: it returns ``[(label, pending), ...]``, a fixed list
    of obligations, each a state predicate that must not stay true forever on a fair path
    ("every held page is eventually released": pending = the page is held)."""
    fn._kv_claim = ("liveness", "fair")
    return fn


class StaticallyDisabled(Disabled):
    """An action instance that the configuration rules out (``s.require(False)``)."""


class _FieldView:
    """Reads (on :class:`Pre`) or writes (on :class:`Post`) one array field.

    Indices are plain ints (parameters, loop variables), except the last one, which may be a
    number read from the state (an index read from the state)."""

    __slots__ = ("_f", "_lang", "_layout", "_next")

    def __init__(self, f: Field, lang: SpecOps, layout: Layout, next_state: bool):
        self._f, self._lang, self._layout, self._next = f, lang, layout, next_state

    def _what(self, key: Any) -> str:
        idx = key if isinstance(key, tuple) else (key,)
        return f"{self._f.name}[{', '.join(str(i) if _is_index(i) else '...' for i in idx)}]"

    def _where(self, key: Any) -> tuple[int | None, Any]:
        idx = key if isinstance(key, tuple) else (key,)
        name = self._f.name
        if len(idx) == len(self._f.dims) and all(type(i) is int for i in idx):  # the common case: plain ints
            try:
                return self._layout.slot(name, *idx), None
            except IndexError as e:
                raise SpecError(f"{caller()}: {self._what(key)}: {e}") from None
        if len(idx) != len(self._f.dims):
            raise SpecError(f"{caller()}: {self._what(key)}: {name} takes {len(self._f.dims)} "
                            f"index(es), got {len(idx)}")
        for i in idx:
            if not _is_index(i) and not (isinstance(i, Value) and i.kind != BOOL):
                got = f"a {i.kind}" if isinstance(i, Value) else f"{type(i).__name__} {i!r}"
                raise SpecError(f"{caller()}: {self._what(key)}: an index is an int or a number read from "
                                f"the state, got {got}")
        if all(_is_index(i) for i in idx):
            try:
                return self._layout.slot(name, *idx), None
            except IndexError as e:
                raise SpecError(f"{caller()}: {self._what(key)}: {e}") from None
        if not all(_is_index(i) for i in idx[:-1]):
            raise SpecError(f"{caller()}: {self._what(key)}: only the last index may be a state value")
        try:
            base = self._layout.row_base(name, *idx[:-1])
        except IndexError as e:
            raise SpecError(f"{caller()}: {self._what(key)}: {e}") from None
        return None, (base, idx[-1])

    def __getitem__(self, key: Any) -> Any:
        slot, row = self._where(key)
        lang = self._lang
        if self._next:
            if slot is not None:
                return lang.next_value(slot)
            return lang.next_value_at(row[0], self._f.row, row[1], self._what(key))
        if slot is not None:
            return lang.read(slot)
        return lang.read_at(row[0], self._f.row, row[1], self._what(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        if not self._next:
            raise SpecError(f"{caller()}: {self._what(key)} = ...: the pre-state is read-only; "
                            "assign to the next state (n.field[...] = value)")
        slot, row = self._where(key)
        values = self._f.values.size
        if slot is not None:
            self._lang.write(slot, value, values, self._what(key))
        else:
            self._lang.write_at(row[0], self._f.row, row[1], value, values, self._what(key))


def _is_index(i: Any) -> bool:
    return isinstance(i, int) and not isinstance(i, bool)


class Pre:
    """The pre-state of a step, read through ``ops``: ``s.field`` (scalar) or ``s.field[i]``.

    Every read is a :class:`~.expr.Value`; ``s.ops`` is the facade (:class:`~.expr.SpecOps`)."""

    _next = False

    def __init__(self, lang: SpecOps, layout: Layout):
        object.__setattr__(self, "ops", lang)
        object.__setattr__(self, "_layout", layout)

    def __getattr__(self, name: str) -> Any:
        f = self._layout.by_name.get(name)
        if f is None:
            raise AttributeError(f"no field {name!r}")
        if not f.dims:
            slot = self._layout.base[name]
            return self.ops.next_value(slot) if self._next else self.ops.read(slot)
        view = _FieldView(f, self.ops, self._layout, self._next)
        object.__setattr__(self, name, view)
        return view

    def __setattr__(self, name: str, value: Any) -> None:
        raise SpecError(f"{caller()}: s.{name} = ...: the pre-state is read-only; assign to the next state "
                        f"(n.{name} = value)")

    def require(self, cond: Any) -> None:
        """Narrow the guard: the action is enabled only where ``cond`` holds.

        A plain ``False`` (a flag or a size, known when the instance is built) disables the
        action statically: evaluation stops here in every interpretation, so the rest of the
        action may use fields that only exist when the flag is on."""
        if cond is False:
            raise StaticallyDisabled
        if cond is True:
            return
        if not (isinstance(cond, Value) and cond.kind == BOOL):
            got = f"a {cond.kind}" if isinstance(cond, Value) else f"{type(cond).__name__} {cond!r}"
            raise SpecError(f"{caller()}: require: expected a condition, got {got} "
                            "(compare a number to get one: x == CODE)")
        self.ops.require(cond)

    def widen(self, extra: Any) -> Any:
        """Widen the guard: ``with s.widen(extra): super().action(s, n, r)`` enables the action
        where the guards required inside the block hold *or* ``extra`` holds, with the same
        effect; guards required outside the block still narrow it.  So an override relaxes a
        guard without copying the action::

            def decode_release_deferred(self, s, n, r):
                with s.widen((s.d_phase[r] == D_HELD) & saw_abort):
                    super().decode_release_deferred(s, n, r)

        ``extra`` is a condition (or a Python bool).  Only conditions on the state are widened:
        a plain ``False`` required inside (a flag, a size) still rules the instance out.  The
        effect must be well-defined wherever the widened guard holds (indices in range, codes
        in their fields), as for any guard.  Each ``s.require(c)`` inside narrows by ``c |
        extra`` (so the conjunction is the block's guard or ``extra``), in every engine alike;
        the reference interpreter, where ``extra`` is false, stops at the first false ``c``
        exactly as without ``widen``."""
        if not isinstance(extra, bool) and not (isinstance(extra, Value) and extra.kind == BOOL):
            got = f"a {extra.kind}" if isinstance(extra, Value) else f"{type(extra).__name__} {extra!r}"
            raise SpecError(f"{caller()}: widen: expected a condition, got {got}")
        return self.ops.widen(extra)


class Post(Pre):
    """The next state: ``n.field = v`` (scalar) or ``n.field[i] = v``; unassigned fields keep
    their pre-state values.  Reading ``n.field[i]`` gives what this action wrote so far (the
    pre-state value where it wrote nothing), so an override can read what ``super()`` wrote."""

    _next = True

    def __setattr__(self, name: str, value: Any) -> None:
        f = self._layout.by_name.get(name)
        if f is None or f.dims:
            raise SpecError(f"{caller()}: n.{name} = ...: not a scalar field of the state")
        self.ops.write(self._layout.base[name], value, f.values.size, name)


class Spec:
    """Base class of a protocol: domains, fields, actions and claims.

    Subclasses implement :meth:`build_fields` (and :meth:`domain` only for a parameter domain
    that indexes no field); actions and claims are found by their decorators in definition
    order (base classes first, an override keeps its base's position).
    """

    def build_fields(self) -> list[Field]:  # pragma: no cover - abstract
        """The state's fields, in layout order."""
        raise NotImplementedError

    def domain(self, name: str) -> Domain:
        """The index domain called ``name`` (a parameter domain of some action).  Default: the
        domain of that name that indexes a field of the state (``Field("owner", (req,), ...)``
        makes ``req`` a parameter domain); override it for a parameter that indexes no field."""
        found = self._index_domains.get(name)
        if found is None:
            known = ", ".join(sorted(self._index_domains)) or "none"
            raise SpecError(f"{type(self).__name__}: no field of the state is indexed by a domain called {name!r} "
                            f"(those that are: {known}); an action's parameter domain either indexes a field "
                            "or is returned by the spec's own domain(name)")
        return found

    @cached_property
    def _index_domains(self) -> dict[str, Domain]:
        """The index domains of the state's fields, by name (each name one domain)."""
        out: dict[str, Domain] = {}
        for f in self.layout.fields:
            for d in f.dims:
                if out.setdefault(d.name, d) != d:
                    raise SpecError(f"{type(self).__name__}: two different index domains are called {d.name!r} "
                                    f"({out[d.name]} and {d}); give them different names")
        return out

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

    def index_sorts(self) -> tuple[Any, ...]:
        """The index domains a lemma may be renamed over from a smaller instance to a larger one
        (:class:`~.symmetry.IndexSort`, one per domain; default: none, so nothing is lifted)."""
        return ()

    def lift_sorts(self) -> Any:
        """What the lift to sorts (:mod:`.sorted_lift`) needs to read this protocol: which index
        domains are sorts and which value domains name their elements (a
        :class:`~.sorted_lift.SortDecl`), or ``None`` (the default: the protocol is not lifted)."""
        return None

    def small_instances(self) -> tuple[Any, ...]:
        """Small instances of this instance's engine (specs of the same class, fewer requests and
        pages) whose reachable states the all-sizes pipeline mines for candidate lemmas of the
        lifted model (default: none)."""
        return ()

    def link_instances(self) -> tuple[Any, ...]:
        """Instances of this instance's engine at other sizes, at which ``prove --all-sizes``
        proves the lifted model's link with the spec before using it (default:
        :meth:`small_instances`)."""
        return self.small_instances()

    def size_label(self) -> str:
        """How reports name this instance's size (default: its number of slots)."""
        return f"{len(self.init_state())} slots"

    def link_size(self) -> str:
        """How ``prove --all-sizes --link`` names the size it proves the claims at, in words
        (default: ``its size``)."""
        return "its size"

    # -- narration (optional): how the general layers tell this protocol's traces ---------------
    # The defaults narrate nothing protocol-specific; a protocol overrides what it can tell
    # (:mod:`.narration` has the vocabulary).
    def shown_params(self, inst: ActionInstance) -> tuple[str, ...]:
        """The parameters an action instance's label shows (default: all of them)."""
        return inst.action.params

    def story(self, pre: Any, name: str, args: dict[str, int], post: Any) -> list[Note]:
        """Notes on the concrete step ``name(args)`` from ``pre`` to ``post`` (default: none)."""
        return []

    def narration(self) -> Any:
        """What this protocol declares for its diagrams (a :class:`~.narrate.Narration`: lanes,
        the lane of each actor, the field changes that are messages, page pools, reads), from
        which :meth:`lanes`, :meth:`messages` and :meth:`page_timelines` are derived; ``None``
        (the default) declares nothing, and a protocol may override those three instead."""
        return None

    @cached_property
    def _narration(self) -> Any:
        return self.narration()

    def lanes(self) -> tuple[Lane, ...]:
        """The participants of a sequence diagram (default: the declared lanes, else one lane
        per actor)."""
        if self._narration is not None:
            return tuple(self._narration.lanes)
        return tuple(Lane(a, a) for a in dict.fromkeys(x.actor for x in self.actions))

    def messages(self, step: int, pre: Any, inst: ActionInstance, post: Any, label: str) -> list[Message]:
        """Step ``step`` as messages between lanes (default: derived from the declared
        narration, :func:`~.narrate.derive_messages`; without one, a note with the action's
        label on its actor's lane)."""
        if self._narration is not None:
            return derive_messages(self, self._narration, step, pre, inst, post, label)
        return [Message(step, inst.action.actor, inst.action.actor, label, "note")]

    def page_maps(self, pre: Any, post: Any) -> list[PageMap]:
        """Tables of the state's resource pools to show after a step (``pre`` is ``None`` at
        the initial state; default: each declared pool the step changed,
        :func:`~.narrate.derive_page_maps`; without a narration, none)."""
        if self._narration is not None:
            return derive_page_maps(self, self._narration, pre, post)
        return []

    def display_names(self, states: Any, actions: Any) -> list[dict[str, str]]:
        """Per state of a trace (``states[k]``, reached by ``actions[k-1]``), the names every
        rendering shows for index labels of that state (``{label: name}``), for a protocol
        whose index slots stand for changing things; labels not renamed stay (default: none
        is; the state and trace files always keep the labels)."""
        return [{} for _ in states]

    def page_timelines(self, states: Any, actions: Any, include_quiet: bool = False) -> list[PageTimeline]:
        """Each page through a trace (default: each page of the declared pools,
        :func:`~.narrate.derive_timelines`; without a narration, none)."""
        if self._narration is not None:
            return derive_timelines(self, self._narration, states, actions, include_quiet)
        return []

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
        for name, (actor, params, fair) in self._marked("_kv_action"):
            out.append(ActionDef(name, actor, params, _doc(getattr(type(self), name)), fair))
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
    def run_action(self, inst: ActionInstance, ops: Ops) -> bool:
        """Evaluate one action instance's guard and effect through the interpretation ``ops``;
        ``False`` when the configuration rules the instance out (then nothing more was
        evaluated)."""
        lang = SpecOps(ops)
        try:
            getattr(self, inst.action.name)(Pre(lang, self.layout), Post(lang, self.layout), *inst.args)
        except StaticallyDisabled:
            return False
        return True

    def eval_claim(self, name: str, ops: Ops) -> Any:
        """Evaluate one claim's state predicate through the interpretation ``ops``: its raw
        condition (for a liveness claim: its list of ``(label, pending)`` obligations)."""
        value = getattr(self, name)(Pre(SpecOps(ops), self.layout))
        if isinstance(value, list):
            return [(label, _condition(v, f"{name}: obligation {label}")) for label, v in value]
        return _condition(value, name)


class ConfiguredSpec(Spec):
    """A spec built from one configuration object, as the shipped protocols are.

    The configuration's ``problems()`` and then :meth:`config_problems` list what makes it
    unusable; the first is raised as ``ValueError``, so an instance exists only for a usable
    configuration.  The instance keeps the configuration as ``cfg``, its ``engine`` (the engine
    variant's flags) as ``e``, and ``codes(cfg)`` (the value codes and domains that depend on
    the instance's sizes) as ``k``; its fields are ``fields_of(k)``.  A protocol sets the two
    class attributes::

        codes = Codes
        fields_of = staticmethod(build_fields)
    """

    codes: Callable[[Any], Any]
    """Configuration -> the codes object kept as ``k`` (a protocol's ``Codes`` class)."""
    fields_of: Callable[[Any], list[Field]]
    """``k`` -> the state's fields, in layout order (a ``staticmethod``)."""

    def __init__(self, cfg: Any):
        problems = [*cfg.problems(), *self.config_problems(cfg)]
        if problems:
            raise ValueError(problems[0])
        self.cfg = cfg
        self.e = cfg.engine
        self.k = self.codes(cfg)

    def config_problems(self, cfg: Any) -> list[str]:
        """What makes ``cfg`` unusable for this class in particular, beyond ``cfg.problems()``
        (default: nothing)."""
        return []

    def build_fields(self) -> list[Field]:
        """The state's fields: ``fields_of(k)``."""
        return self.fields_of(self.k)


def _condition(value: Any, what: str) -> Any:
    """The raw condition a claim returned (a Python bool stays one)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, Value) and value.kind == BOOL:
        return value.raw
    got = f"a {value.kind}" if isinstance(value, Value) else f"{type(value).__name__} {value!r}"
    raise SpecError(f"claim {what}: expected a condition, got {got}")


def _doc(fn: Callable) -> str:
    return " ".join((fn.__doc__ or "").split())


def _product(ranges: list[range]) -> Iterator[tuple[int, ...]]:
    if not ranges:
        yield ()
        return
    for head in ranges[0]:
        for tail in _product(ranges[1:]):
            yield (head, *tail)
