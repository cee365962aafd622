"""Where two traces part: ``kvproof diff A B``.

Two counterexamples of the same claim - before and after a fix, from two engine variants, or
from two runs - usually share a prefix and then take different turns.  :func:`diff_traces`
finds the first step at which they differ (a different action, or the same action reaching a
different state) and lists what differs there: the scenarios' settings, the two actions, and
every field whose value differs in the states after that step.  States are compared by field
name and label, so traces of different scenarios compare too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.text import Text

from kvproof.checker.states import named_values
from kvproof.checker.traces import Trace
from kvproof.model.registry import canonical

__all__ = ["TraceDiff", "diff_traces", "render_diff"]


@dataclass
class TraceDiff:
    """The comparison of traces ``a`` and ``b``.

    ``common`` is how many steps they share (same action, same state after it); ``diverge`` is
    the first step where they differ (``None`` when they are identical), ``settings`` the
    scenario settings that differ, ``fields`` the ``(field[index], a value, b value)`` that
    differ in the states after step ``diverge``.  Traces of configurations of different sizes
    are compared on the fields both have.
    """

    a: Trace
    b: Trace
    common: int
    diverge: int | None
    settings: list[tuple[str, Any, Any]] = field(default_factory=list)
    fields: list[tuple[str, Any, Any]] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """Same steps and same states throughout."""
        return self.diverge is None


def _settings(trace: Trace) -> dict[str, Any]:
    """The scenario's configuration as flat ``table.key`` settings (the protocol's own tables,
    as it stores them) and its protocol."""
    data = trace.scenario.to_data()
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("name", "title", "description", "expect", "protocol"):
            continue
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        elif isinstance(value, list):
            out[key] = ", ".join(":".join(str(v) for v in (x.values() if isinstance(x, dict) else [x])) for x in value)
        else:
            out[key] = value
    out["protocol"] = canonical(trace.scenario.protocol) or "default"
    return out


def _flat(trace: Trace, k: int) -> dict[str, Any]:
    return named_values(trace.machine.spec.layout, trace.states[k])


def _label(trace: Trace, k: int) -> str | None:
    return trace.machine.label(trace.actions[k - 1]) if 1 <= k <= len(trace) else None


def _shown_label(trace: Trace, k: int) -> str | None:
    """Step ``k``'s label as renderings show it (requests named: ``R0@room0``)."""
    label = _label(trace, k)
    return None if label is None else trace.shown(label, k)


def diff_traces(a: Trace, b: Trace) -> TraceDiff:
    """Compare ``a`` and ``b`` step by step."""
    sa, sb = _settings(a), _settings(b)
    settings = [(k, sa.get(k), sb.get(k)) for k in dict.fromkeys([*sa, *sb]) if sa.get(k) != sb.get(k)]
    shared = [k for k in _flat(a, 0) if k in _flat(b, 0)]  # traces of different sizes: the fields both have

    def differing(k: int) -> list[tuple[str, Any, Any]]:
        fa, fb = _flat(a, k), _flat(b, k)
        return [(name, fa[name], fb[name]) for name in shared if fa[name] != fb[name]]

    common, diverge = 0, None
    for k in range(max(len(a.states), len(b.states))):
        if k >= len(a.states) or k >= len(b.states) or _label(a, k) != _label(b, k) or differing(k):
            diverge = k
            break
        common = k
    d = TraceDiff(a, b, common, diverge, settings)
    if diverge is not None and diverge < len(a.states) and diverge < len(b.states):
        d.fields = differing(diverge)
    return d


def render_diff(d: TraceDiff, name_a: str = "A", name_b: str = "B") -> Group:
    """The comparison as text: settings, the shared prefix, the first divergence and what
    differs there, and how each trace goes on."""
    a, b = d.a, d.b
    parts: list[Any] = [
        Text(f"A: {name_a}  ({a.scenario.name} · {a.claim}, {len(a)} steps)"),
        Text(f"B: {name_b}  ({b.scenario.name} · {b.claim}, {len(b)} steps)"),
    ]
    if d.settings:
        parts.append(Text("scenario settings that differ:", style="bold"))
        parts += [Text(f"  {k}: A {va} · B {vb}") for k, va, vb in d.settings]
    if d.identical:
        parts.append(Text(f"identical: the same {len(a)} steps through the same states", style="bold green"))
        return Group(*parts)
    k = d.diverge
    if k == 0:
        parts.append(Text("the traces differ from the initial state on", style="bold"))
    else:
        parts.append(Text(f"the same for {d.common} step{'s' if d.common != 1 else ''}"
                          + (f" (through step {d.common}: {_shown_label(a, d.common)})" if d.common else ""), style="bold"))
        parts.append(Text(f"first divergence at step {k}:", style="bold red"))
        parts.append(Text(f"  A: {_shown_label(a, k) or '(ends: ' + str(len(a)) + ' steps)'}"))
        parts.append(Text(f"  B: {_shown_label(b, k) or '(ends: ' + str(len(b)) + ' steps)'}"))
    if d.fields:
        where = "in the initial state" if k == 0 else f"after step {k}"
        parts.append(Text(f"fields that differ {where}:", style="bold"))
        parts += [Text(f"  {a.shown(name, k)}: A {a.shown(str(va), k)} · B {b.shown(str(vb), k)}")
                  for name, va, vb in d.fields]
    parts.append(Text(f"then A goes on for {len(a) - k} more step{'s' if len(a) - k != 1 else ''} "
                      f"(last: {_shown_label(a, len(a)) or 'initial state'}) and B for {len(b) - k} "
                      f"(last: {_shown_label(b, len(b)) or 'initial state'})"))
    return Group(*parts)
