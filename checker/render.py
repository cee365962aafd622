"""Rendering: traces as one block per step, and the verdict table, with ``rich``.

Every renderer returns a ``rich`` renderable; :func:`to_text` turns one into plain text at a
fixed width without colour (what the tests compare, and what a pipe gets).  Highlighted cells
also carry a ``!`` so the story survives without colour.
"""

from __future__ import annotations

import io
from typing import Any, Iterable

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .results import ScenarioReport
from .traces import Trace

__all__ = ["render_trace", "render_reports", "to_text"]

HAZARD = "bold red"


def to_text(renderable: Any, width: int = 100) -> str:
    """``renderable`` as plain text at ``width`` columns, no colour, no trailing spaces."""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False,
                      no_color=True, highlight=False, emoji=False)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()) + "\n"


def _index_label(field, flat: int) -> str:
    dims = field.dims
    if len(dims) == 1:
        return str(dims[0].label(flat))
    n1 = dims[1].size
    return f"{dims[0].label(flat // n1)}, {dims[1].name} {flat % n1}"


def changes(trace: Trace, k: int) -> list[tuple[str, Any, Any]]:
    """``(field[index], old, new)`` for every value step ``k`` changed (labels, sentinels hidden)."""
    layout = trace.machine.spec.layout
    before, after = trace.states[k - 1], trace.states[k]
    out = []
    for f in layout.fields:
        base = layout.base[f.name]
        n = f.width - (1 if f.sentinel else 0)
        for j in range(n):
            a, b = before[base + j], after[base + j]
            if a != b:
                name = f.name if not f.dims else f"{f.name}[{_index_label(f, j)}]"
                out.append((name, f.values.label(a), f.values.label(b)))
    return out


def _content_cell(spec, owner: int, content: int) -> Text:
    k = spec.k
    if content == 0:
        return Text("·")
    if content <= k.R:
        label = f"R{content - 1} ({k.tenants[k.tenant[content - 1]]})"
        tenant = k.tenant[content - 1]
    else:
        tenant = content - 1 - k.R
        label = f"old ({k.tenants[tenant]})"
    foreign = owner != 0 and content != owner
    if foreign:
        other_tenant = tenant != k.tenant[owner - 1]
        return Text(label + (" !!" if other_tenant else " !"), style=HAZARD)
    return Text(label)


def page_map(trace: Trace, k: int, pool: str = "decode") -> Table:
    """The pages of one pool after step ``k``: owner and content, foreign content highlighted."""
    spec = trace.machine.spec
    state = trace.states[k]
    layout = spec.layout
    owner_f, content_f, n, prefix = (
        ("owner", "content", spec.k.D, "p") if pool == "decode" else ("src_owner", "src_content", spec.k.P, "q")
    )
    table = Table(box=None, show_header=True, pad_edge=False, padding=(0, 2, 0, 0))
    table.add_column(pool + " pages" if pool == "decode" else "prefill pages", style="dim")
    for p in range(n):
        table.add_column(f"{prefix}{p}")
    owners = [state[layout.slot(owner_f, p)] for p in range(n)]
    contents = [state[layout.slot(content_f, p)] for p in range(n)]
    table.add_row("owner", *[("free" if o == 0 else f"R{o - 1}") for o in owners])
    table.add_row("holds", *[_content_cell(spec, o, c) for o, c in zip(owners, contents)])
    return table


def _pool_changed(trace: Trace, k: int, owner_f: str, content_f: str) -> bool:
    return any(name.startswith(owner_f + "[") or name.startswith(content_f + "[")
               for name, _, _ in changes(trace, k))


def render_trace(trace: Trace, step: int | None = None) -> Group:
    """A trace as one block per step (or only block ``step``)."""
    spec = trace.machine.spec
    claim = spec.claim(trace.claim)
    parts: list[Any] = []
    head = Text()
    head.append(f"{trace.scenario.name}", style="bold")
    head.append(f" · {trace.claim} · {trace.kind}, {len(trace)} steps\n")
    head.append(trace.scenario.title)
    parts.append(head)
    steps = range(len(trace.states)) if step is None else [step]
    for k in steps:
        parts.append(Text(""))
        if k == 0:
            parts.append(Text("Step 0  initial state", style="bold"))
        else:
            inst = trace.machine.instances[trace.actions[k - 1]]
            line = Text(f"Step {k}  ", style="bold")
            line.append(trace.machine.label(inst.aid), style="bold cyan")
            line.append(f"   [{inst.action.actor}]", style="dim")
            parts.append(line)
            for name, old, new in changes(trace, k):
                parts.append(Text(f"  {name}: {old} → {new}"))
            args = {p: v for p, v in zip(inst.action.params, inst.args)}
            for note in spec.story(trace.states[k - 1], inst.name, args, trace.states[k]):
                style = HAZARD if note.level == "hazard" else "italic"
                parts.append(Text(("  ! " if note.level == "hazard" else "  · ") + note.text, style=style))
        parts.append(page_map(trace, k))
        if k == 0 or _pool_changed(trace, k, "src_owner", "src_content"):
            parts.append(page_map(trace, k, pool="prefill"))
    if step is None or step == len(trace.states) - 1:
        parts.append(Text(""))
        verb = "fails" if trace.kind == "counterexample" else "holds"
        last = Text(f"{'✗' if trace.kind == 'counterexample' else '✓'} {trace.claim} {verb} after step {len(trace)}",
                    style=HAZARD if trace.kind == "counterexample" else "bold green")
        parts.append(last)
        parts.append(Text(claim.doc, style="dim"))
    return Group(*parts)


def render_reports(reports: Iterable[ScenarioReport]) -> Group:
    """The verdict table, then where each counterexample was written and which searches were
    cut short."""
    table = Table(show_lines=False, pad_edge=False)
    for col, justify in (("scenario", "left"), ("claim", "left"), ("expected", "left"), ("found", "left"),
                         ("states", "right"), ("depth", "right"), ("seconds", "right")):
        table.add_column(col, justify=justify, no_wrap=True)
    written: list[Text] = []
    cut: list[Text] = []
    notes: list[Text] = []
    for rep in reports:
        for n, c in enumerate(rep.claims):
            style = "green" if c.matches else ("yellow" if c.verdict == "inconclusive" else HAZARD)
            found = c.verdict if c.matches else f"{c.verdict} ✗"
            depth = c.depth if c.depth is not None else rep.stats.depth
            table.add_row(rep.scenario.name if n == 0 else "", c.claim, c.expected, Text(found, style=style),
                          f"{rep.stats.states:,}", str(depth), f"{rep.stats.seconds:.2f}")
            if c.trace_path is not None:
                written.append(Text(f"  {c.trace_path}"))
        if not rep.complete:
            cut.append(Text(f"{rep.scenario.name}: search incomplete: {rep.reason}", style="yellow"))
        how = _search_note(rep)
        if how:
            notes.append(Text(f"{rep.scenario.name}: {how}", style="dim"))
    parts: list[Any] = [table]
    if written:
        parts += [Text("Counterexamples written:")] + written
    return Group(*parts, *notes, *cut)


def _search_note(rep: ScenarioReport) -> str:
    """How a search that used the large-proof options ran (empty for a plain one)."""
    s = rep.stats
    out = []
    if rep.symmetry:
        out.append(f"symmetry {rep.symmetry}" + (f", {s.represented:,} states represented ({s.reduction:.1f}x)"
                                                  if s.reduction > 1 else ""))
    if s.visited == "fingerprint":
        out.append(f"fingerprints, {s.bytes_per_state:.0f} bytes a state, collision bound {s.collision_probability:.1e}")
    if s.workers > 1:
        out.append(f"{s.workers} workers")
    return "; ".join(out)
