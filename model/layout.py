"""The finite, typed state: domains, fields, and their layout as one flat tuple of small ints.

Every state is a flat tuple of ints, one per slot, in ``range(256)`` (so the explicit engine can
store it as ``bytes``) - unless a field's values number more than 256 (at most
:data:`MAX_WIDE_CODES`): such a layout is *wide* (:attr:`Layout.wide`), its states are tuples of
ints (:meth:`Layout.pack`), and only the reference interpreter and the Python-compiled steps
run over it (``kvproof validate``'s reference search); the searches that keep one byte a slot
(the explicit engine, the C code, the factored search) refuse it with one line.  A :class:`Field` is a scalar or an array indexed by one or two finite domains; its
values are codes of a value :class:`Domain`, which also names them for traces and rendering.

A one-dimensional field may carry a *sentinel slot*: one hidden extra slot after its last element
that holds the field's initial value forever.  Reading the field at the index domain's NONE code
(which equals the domain's size) lands there, so an index read is total in every interpretation
without a branch.  The sentinel is not part of a trace; the type invariant checks it never changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from functools import cached_property
from typing import Any, Sequence

__all__ = ["Domain", "Field", "Layout", "LayoutError", "MAX_CODES", "MAX_WIDE_CODES"]

MAX_CODES = 256
"""The most codes a field's values may have in a layout whose states are ``bytes`` (one byte a slot)."""
MAX_WIDE_CODES = 65536
"""The most codes a domain may have at all: past :data:`MAX_CODES` the layout is wide (its states
tuples of ints)."""


class LayoutError(ValueError):
    """A state or a decoded trace value that does not fit the layout."""


@dataclass(frozen=True)
class Domain:
    """A finite set of codes ``0..size-1`` with optional display labels.

    Labelled domains are shown (and stored in traces) by label; unlabelled ones are numbers.
    """

    name: str
    size: int
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.labels is not None and len(self.labels) != self.size:
            raise LayoutError(f"domain {self.name}: {len(self.labels)} labels for {self.size} codes")
        if not 0 < self.size <= MAX_WIDE_CODES:
            raise LayoutError(f"domain {self.name}: size {self.size} outside 1..{MAX_WIDE_CODES}")

    def __iter__(self):
        """The codes ``0..size-1`` (``for r in domain``); inside the lift to sorts
        (:mod:`.lifting`), a domain the protocol declares as a sort yields one bound element."""
        from kvproof.model.lifting import active_lift
        lift = active_lift()
        if lift is not None:
            return lift.iterate(self)
        return iter(range(self.size))

    def label(self, code: int) -> str | int:
        """The display form of ``code``."""
        if not 0 <= code < self.size:
            raise LayoutError(f"{code} is not a code of {self.name} (0..{self.size - 1})")
        return self.labels[code] if self.labels else code

    def code(self, value: Any) -> int:
        """The code of a display form (a label or a number)."""
        if self.labels is not None:
            if isinstance(value, str) and value in self._index:
                return self._index[value]
            raise LayoutError(f"{value!r} is not one of {self.name}: {', '.join(self.labels)}")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.size:
            raise LayoutError(f"{value!r} is not a number in 0..{self.size - 1} ({self.name})")
        return value

    @property
    def _index(self) -> dict[str, int]:
        return {lab: i for i, lab in enumerate(self.labels or ())}


@dataclass(frozen=True)
class Field:
    """One named part of the state.

    ``dims`` are the index domains (none for a scalar; any number for an array); ``values`` is
    the value domain; ``init`` the initial code of every element; ``sentinel`` adds the hidden
    NONE slot described in the module docstring at the end of every row (the last index).
    """

    name: str
    dims: tuple[Domain, ...]
    values: Domain
    init: int = 0
    doc: str = ""
    sentinel: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        """Sizes of the index domains."""
        return tuple(d.size for d in self.dims)

    @property
    def row(self) -> int:
        """Slots of one row (the last index), its sentinel included; 1 for a scalar."""
        if not self.dims:
            return 1
        return self.dims[-1].size + (1 if self.sentinel else 0)

    @property
    def rows(self) -> int:
        """Number of rows: the product of every index domain but the last."""
        n = 1
        for d in self.dims[:-1]:
            n *= d.size
        return n

    @property
    def width(self) -> int:
        """Slots this field takes in the flat state, sentinels included."""
        return self.rows * self.row


@dataclass
class Layout:
    """Fields laid out one after another in a flat tuple."""

    fields: list[Field]
    base: dict[str, int] = dc_field(init=False)
    size: int = dc_field(init=False)

    def __post_init__(self) -> None:
        self.base = {}
        offset = 0
        names = set()
        for f in self.fields:
            if f.name in names:
                raise LayoutError(f"field {f.name} declared twice")
            names.add(f.name)
            if f.sentinel and not f.dims:
                raise LayoutError(f"field {f.name}: a scalar cannot have a sentinel slot")
            if not 0 <= f.init < f.values.size:
                raise LayoutError(f"field {f.name}: initial code {f.init} outside its values")
            self.base[f.name] = offset
            offset += f.width
        self.size = offset
        self.by_name = {f.name: f for f in self.fields}
        self.wide = any(f.values.size > MAX_CODES for f in self.fields)
        """Whether some field has more than :data:`MAX_CODES` codes: its states are tuples of
        ints, not ``bytes`` (:meth:`pack`)."""

    def pack(self, state: Sequence[int]) -> bytes | tuple[int, ...]:
        """``state`` as the searches store it: ``bytes``, or a tuple of ints for a wide layout."""
        return tuple(state) if self.wide else bytes(state)

    def too_wide(self) -> str | None:
        """``None``, or one line saying why a search that keeps one byte a slot cannot run over
        this layout (the widest field's codes)."""
        if not self.wide:
            return None
        f = max(self.fields, key=lambda f: f.values.size)
        return (f"field {f.name} has {f.values.size} codes ({f.values.name}): more than a byte holds "
                f"({MAX_CODES}); only the reference search runs over this layout")

    def row_base(self, name: str, *leading: int) -> int:
        """The first slot of the row ``name[leading...]`` (every index but the last)."""
        f = self.by_name[name]
        if len(leading) != len(f.dims) - 1:
            raise LayoutError(f"{name} rows take {len(f.dims) - 1} indices, got {len(leading)}")
        flat = 0
        for i, d in zip(leading, f.dims[:-1]):
            if not 0 <= i < d.size:
                raise IndexError(f"{name}: index {i} outside {d.name} (0..{d.size - 1})")
            flat = flat * d.size + i
        return self.base[name] + flat * f.row

    def slot(self, name: str, *idx: int) -> int:
        """The flat slot of ``name[idx...]`` for concrete indices (bounds-checked; the NONE
        index of a field with sentinels is its row's sentinel slot)."""
        f = self.by_name[name]
        if len(idx) != len(f.dims):
            raise LayoutError(f"{name} takes {len(f.dims)} indices, got {len(idx)}")
        if not f.dims:
            return self.base[name]
        last, n = idx[-1], f.dims[-1].size
        if not (0 <= last < n or (f.sentinel and last == n)):
            raise IndexError(f"{name}: index {last} outside {f.dims[-1].name} (0..{n - 1})")
        return self.row_base(name, *idx[:-1]) + last

    @cached_property
    def value_sizes(self) -> tuple[int, ...]:
        """How many codes each slot's field has, slot by slot (computed once: the compilers ask
        for it per action instance and per claim)."""
        out: list[int] = []
        for f in self.fields:
            out.extend([f.values.size] * f.width)
        return tuple(out)

    def init_state(self) -> tuple[int, ...]:
        """Every field at its initial code."""
        out: list[int] = []
        for f in self.fields:
            out.extend([f.init] * f.width)
        return tuple(out)

    def sentinel_slots(self) -> list[tuple[int, int]]:
        """(slot, required value) of every sentinel slot."""
        out = []
        for f in self.fields:
            if f.sentinel:
                b = self.base[f.name]
                out.extend((b + k * f.row + f.row - 1, f.init) for k in range(f.rows))
        return out

    def type_errors(self, state: Sequence[int]) -> list[str]:
        """Why ``state`` is not a well-typed state of this layout (empty when it is)."""
        if len(state) != self.size:
            return [f"state has {len(state)} slots, layout has {self.size}"]
        errors = []
        for f in self.fields:
            b = self.base[f.name]
            cols = f.row - (1 if f.sentinel else 0)
            for k in range(f.rows):
                for j in range(cols):
                    v = state[b + k * f.row + j]
                    if not 0 <= v < f.values.size:
                        errors.append(f"{f.name}[{k * cols + j}] = {v} outside {f.values.name}")
        for slot, value in self.sentinel_slots():
            if state[slot] != value:
                errors.append(f"sentinel slot {slot} changed to {state[slot]}")
        return errors

    # -- named views, for traces and rendering ----------------------------------------------
    def decode(self, state: Sequence[int]) -> dict[str, Any]:
        """``{field: value}`` with labels, nested lists for arrays, sentinels hidden."""
        out: dict[str, Any] = {}
        for f in self.fields:
            b = self.base[f.name]
            if not f.dims:
                out[f.name] = f.values.label(state[b])
                continue
            cols = f.dims[-1].size
            rows = [[f.values.label(state[b + k * f.row + j]) for j in range(cols)] for k in range(f.rows)]
            out[f.name] = _nest(rows, [d.size for d in f.dims[:-1]])
        return out

    def encode(self, values: dict[str, Any]) -> tuple[int, ...]:
        """The inverse of :meth:`decode`; raises :class:`LayoutError` naming what does not fit."""
        missing = [f.name for f in self.fields if f.name not in values]
        extra = [k for k in values if k not in self.by_name]
        if missing:
            raise LayoutError(f"missing field(s): {', '.join(missing)}")
        if extra:
            raise LayoutError(f"unknown field(s): {', '.join(extra)}")
        out: list[int] = []
        for f in self.fields:
            v = values[f.name]
            try:
                if not f.dims:
                    out.append(f.values.code(v))
                    continue
                for row in _flatten(v, [d.size for d in f.dims[:-1]], f.name):
                    out.extend(f.values.code(x) for x in _as_list(row, f.dims[-1].size, f.name))
                    if f.sentinel:
                        out.append(f.init)
            except LayoutError as e:
                raise LayoutError(f"field {f.name}: {e}") from None
        return tuple(out)


def _nest(rows: list[Any], sizes: list[int]) -> Any:
    """Group a flat list of rows into nested lists by the leading index sizes."""
    if not sizes:
        return rows[0]
    step = len(rows) // sizes[0]
    return [_nest(rows[i * step:(i + 1) * step], sizes[1:]) for i in range(sizes[0])]


def _flatten(v: Any, sizes: list[int], name: str) -> list[Any]:
    """The rows of a nested value, checking every leading size."""
    if not sizes:
        return [v]
    out: list[Any] = []
    for item in _as_list(v, sizes[0], name):
        out.extend(_flatten(item, sizes[1:], name))
    return out


def _as_list(v: Any, n: int, name: str) -> list[Any]:
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise LayoutError(f"expected a list of {n}, got {v!r}")
    return list(v)
