"""A state's values named as every report shows them: ``field[index]`` (labelled indices by their
labels, numbered ones as ``dim i``; sentinel slots hidden) and enum values by their labels.

:func:`named_values` names every value of one state, :func:`state_changes` those that differ
between two, :func:`slot_names` every slot.  The renderers (:mod:`kvproof.checker.report`) and the
explanation of a counterexample to induction (:mod:`kvproof.checker.symbolic.cti`) share them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["named_values", "state_changes", "slot_names"]


def _index_label(field, flat: int) -> str:
    """``R0`` / ``R0, chunk 1`` / ``R0, P1, chunk 0``: labelled indices, numbered ones named."""
    parts, rest = [], flat
    for d in reversed(field.dims):
        i = rest % d.size
        rest //= d.size
        parts.append(str(d.label(i)) if d.labels else f"{d.name} {i}")
    return ", ".join(reversed(parts))


def _slots(layout):
    """``(field[index], slot, field)`` of every slot of ``layout``, sentinels hidden."""
    for f in layout.fields:
        base = layout.base[f.name]
        cols = f.row - (1 if f.sentinel else 0)
        for row in range(f.rows):
            for j in range(cols):
                name = f.name if not f.dims else f"{f.name}[{_index_label(f, row * cols + j)}]"
                yield name, base + row * f.row + j, f


def _elements(layout, state):
    """``(field[index], code, field)`` of every element of ``state``, sentinels hidden."""
    for name, slot, f in _slots(layout):
        yield name, state[slot], f


def slot_names(layout) -> dict[int, str]:
    """``{slot: field[index]}`` for every slot that is not a sentinel, named as
    :func:`named_values` names them."""
    return {slot: name for name, slot, _ in _slots(layout)}


def state_changes(layout, before: bytes, after: bytes) -> list[tuple[str, Any, Any]]:
    """``(field[index], old, new)`` for every value that differs between two states."""
    return [(name, f.values.label(a), f.values.label(b))
            for (name, a, f), (_, b, _) in zip(_elements(layout, before), _elements(layout, after)) if a != b]


def named_values(layout, state) -> dict[str, Any]:
    """``{field[index]: label}`` of every element of ``state`` (sentinels hidden), named as
    :func:`state_changes` names them."""
    return {name: f.values.label(code) for name, code, f in _elements(layout, state)}
