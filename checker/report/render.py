"""Rendering: traces as one block per step, and the verdict table, with ``rich``.

Every renderer returns a ``rich`` renderable; :func:`to_text` turns one into plain text at a
fixed width without colour (what the tests compare, and what a pipe gets).  Highlighted cells
also carry a ``!`` so the story survives without colour.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Iterable

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from kvproof.checker.report.columns import AlignedTable
from kvproof.checker.report.focus import Focus
from kvproof.model.narration import Cell, PageMap, rename
from kvproof.checker.explicit.liveness import pending_throughout
from kvproof.checker.results import ScenarioReport
from kvproof.checker.states import named_values, state_changes
from kvproof.checker.traces import Trace

__all__ = ["render_trace", "render_reports", "traces_written", "to_text", "changes", "PageMapView", "verdict_sentence"]

HAZARD = "bold red"


def to_text(renderable: Any, width: int = 100) -> str:
    """``renderable`` as plain text at ``width`` columns, no colour, no trailing spaces; an
    :class:`~.columns.AlignedTable` in it is never cut (its lines may be wider than ``width``)."""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False,
                      no_color=True, highlight=False, emoji=False)
    console.print(renderable, crop=False)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()) + "\n"


def changes(trace: Trace, k: int) -> list[tuple[str, Any, Any]]:
    """``(field[index], old, new)`` for every value step ``k`` changed (labels, sentinels hidden)."""
    return state_changes(trace.machine.spec.layout, trace.states[k - 1], trace.states[k])


def page_map(pm: PageMap, columns: list[int] | None = None) -> Table:
    """One of the protocol's page maps (:class:`~kvproof.model.narration.PageMap`) as a table,
    hazard cells highlighted; ``columns`` picks the pages shown (default: all)."""
    keep = range(len(pm.columns)) if columns is None else columns
    table = Table(box=None, show_header=True, pad_edge=False, padding=(0, 2, 0, 0))
    table.add_column(pm.title, style="dim", no_wrap=True)
    for j in keep:
        table.add_column(pm.columns[j], no_wrap=True)
    for label, cells in pm.rows:
        table.add_row(label, *[Text(cells[j].text, style=HAZARD if cells[j].hazard else "") for j in keep])
    return table


_GAP = 2  # the table's padding between columns


class PageMapView:
    """A page map that stays readable at any pool size: the whole table when it fits the width;
    otherwise only the pages that matter (changed since ``before``, the same pool's map one step
    earlier, or holding a hazard; at the initial state, pages unlike most), in as many tables as
    the width needs, and one line counting the rest."""

    def __init__(self, pm: PageMap, before: PageMap | None = None):
        self.pm, self.before = pm, before

    def _column(self, j: int) -> tuple[str, ...]:
        return tuple(cells[j].text for _, cells in self.pm.rows)

    def _width(self, j: int) -> int:
        return max([cell_len(self.pm.columns[j]), *(cell_len(cells[j].text) for _, cells in self.pm.rows)]) + _GAP

    def shown(self) -> tuple[list[int], str]:
        """The pages shown when the whole map does not fit, and the line about the rest."""
        pm, n = self.pm, len(self.pm.columns)
        hazard = {j for _, cells in pm.rows for j, c in enumerate(cells) if c.hazard}
        before = self.before
        if before is not None and before.columns == pm.columns and len(before.rows) == len(pm.rows):
            changed = {j for j in range(n) if any(b[1][j].text != a[1][j].text for b, a in zip(before.rows, pm.rows))}
            keep = sorted(changed | hazard)
            rest = (f"… {n - len(keep)} other {pm.title} unchanged by this step" if keep else
                    f"{pm.title}: none of the {n} changed by this step")
        else:
            from collections import Counter

            usual, times = Counter(self._column(j) for j in range(n)).most_common(1)[0]
            keep = sorted({j for j in range(n) if times == 1 or self._column(j) != usual} | hazard)
            said = ", ".join(f"{label} {text}" for (label, _), text in zip(pm.rows, usual))
            rest = f"… {n - len(keep)} other {pm.title}: {said}" if keep else f"{pm.title}: all {n} {said}"
        return keep, rest if len(keep) < n else ""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        pm = self.pm
        label = max([cell_len(pm.title), *(cell_len(lbl) for lbl, _ in pm.rows)]) + _GAP
        if label + sum(self._width(j) for j in range(len(pm.columns))) <= options.max_width:
            yield page_map(pm)
            return
        keep, rest = self.shown()
        chunk: list[int] = []
        used = label
        for j in keep:
            w = self._width(j)
            if chunk and used + w > options.max_width:
                yield page_map(pm, chunk)
                chunk, used = [], label
            chunk.append(j)
            used += w
        if chunk:
            yield page_map(pm, chunk)
        if rest:
            yield Text(rest, style="dim")


def shown_map(pm: PageMap, names: dict[str, str]) -> PageMap:
    """``pm`` with its row labels and cells as renderings show them (``names``: one state's
    :attr:`~kvproof.checker.traces.Trace.names`)."""
    if not names:
        return pm
    rows = tuple((rename(label, names), tuple(Cell(rename(c.text, names), c.hazard) for c in cells))
                 for label, cells in pm.rows)
    return PageMap(pm.title, pm.columns, rows)


def full_state(trace: Trace, k: int) -> Table:
    """Every field of the state after step ``k`` (sentinels hidden), one line each."""
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
    table.add_column(no_wrap=True)
    table.add_column()
    for name, value in named_values(trace.machine.spec.layout, trace.states[k]).items():
        table.add_row(Text(f"  {trace.shown(name, k)}"), Text(trace.shown(str(value), k)))
    return table


def render_trace(trace: Trace, step: int | None = None, only: Focus | None = None, full: bool = False) -> Group:
    """A trace as one block per step (or only block ``step``).  With ``only`` (a
    :class:`~kvproof.checker.report.focus.Focus`), only the steps, changes and notes that concern its
    tokens, without page maps.  With ``full``, each block ends with every field of its state.
    Page maps too wide for the width show only the pages that matter (:class:`PageMapView`)."""
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
        if only and k == 0:
            continue
        block: list[Any] = [Text("")]
        if k == 0:
            block.append(Text("Step 0  initial state", style="bold"))
        else:
            inst = trace.machine.instances[trace.actions[k - 1]]
            line = Text(f"Step {k}  ", style="bold")
            line.append(trace.shown(trace.machine.label(inst.aid), k), style="bold cyan")
            line.append(f"   [{inst.action.actor}]", style="dim")
            block.append(line)
            for name, old, new in changes(trace, k):
                if only is None or only.change(name, old, new):
                    block.append(Text(f"  {trace.shown(name, k)}: {trace.shown(str(old), k - 1)} → "
                                      f"{trace.shown(str(new), k)}"))
            args = {p: v for p, v in zip(inst.action.params, inst.args)}
            for note in spec.story(trace.states[k - 1], inst.name, args, trace.states[k]):
                if only is not None and not only.text(note.text):
                    continue
                style = HAZARD if note.level == "hazard" else "italic"
                block.append(Text(("  ! " if note.level == "hazard" else "  · ") + trace.shown(note.text, k),
                                  style=style))
        if only:
            if len(block) > 2:  # something in this step concerns the focus
                parts += block
            continue
        parts += block
        before = {pm.title: shown_map(pm, trace.names[k - 1])
                  for pm in spec.page_maps(None, trace.states[k - 1])} if k else {}
        for pm in spec.page_maps(trace.states[k - 1] if k else None, trace.states[k]):
            parts.append(PageMapView(shown_map(pm, trace.names[k]), before.get(pm.title)))
        if full:
            parts += [Text(f"State after step {k} (every field)" if k else "Initial state (every field)",
                           style="bold"), full_state(trace, k)]
        if trace.loop is not None and k == trace.loop and k < len(trace):
            parts.append(Text(f"↺ the loop starts here: steps {k + 1}-{len(trace)} come back to this state",
                              style="bold yellow"))
    if step is None or step == len(trace.states) - 1:
        parts.append(Text(""))
        parts.append(_verdict_line(trace))
        parts.append(Text(claim.doc, style="dim"))
    return Group(*parts)


def verdict_sentence(trace: Trace) -> str:
    """The closing line of ``trace`` as plain text: where the claim fails (or holds), and for
    a lasso, which steps repeat forever with what pending."""
    return _verdict_line(trace).plain


def _verdict_line(trace: Trace) -> Text:
    """The closing line: where the claim fails (or holds), and for a lasso, what repeats."""
    if trace.kind == "witness":
        return Text(f"✓ {trace.claim} holds after step {len(trace)}", style="bold green")
    if trace.loop is None:
        return Text(f"✗ {trace.claim} fails after step {len(trace)}", style=HAZARD)
    pending = trace.shown(", ".join(pending_throughout(trace.machine, trace.claim, trace.states[trace.loop:])),
                          len(trace)) or "?"
    if trace.loop == len(trace):
        return Text(f"✗ {trace.claim} fails: after step {trace.loop} nothing can move, with {pending} "
                    "forever", style=HAZARD)
    return Text(f"✗ {trace.claim} fails: steps {trace.loop + 1}-{len(trace)} repeat forever, with {pending} "
                "throughout (a fair cycle: every action the engine runs eventually is taken in it or "
                "disabled somewhere on it)", style=HAZARD)


def _not_started(rep: ScenarioReport) -> bool:
    """No search of the scenario ran (not one state explored: a time limit ran out before it),
    so every claim of it is inconclusive."""
    return not rep.complete and rep.stats.states == 0 and all(c.verdict == "inconclusive" for c in rep.claims)


def render_reports(reports: Iterable[ScenarioReport], verbose: bool = False) -> Group:
    """The verdict table as plain aligned columns, every cell in full (:class:`AlignedTable`),
    then the notes, the searches cut short and one line saying how many counterexamples were
    written where.

    One scenario (or ``verbose``) gets a row per claim.  Several get the compact table: a row per
    scenario (its claims, how they compare with expectations, states, depth, seconds) and, under
    it, a line for every claim whose verdict is not the expected one; ``verbose`` also lists
    every trace file.  The scenarios no search reached (the time budget ran out before them) are
    one line after the table, not a row each."""
    reports = list(reports)
    searched = [r for r in reports if not _not_started(r)]
    table = _claim_table(searched) if verbose or len(searched) <= 1 else _scenario_table(searched)
    written: list[Path] = []
    cut: list[Text] = []
    notes: list[Text] = []
    untouched: dict[str, list[ScenarioReport]] = {}
    for rep in reports:
        if _not_started(rep):
            untouched.setdefault(rep.reason, []).append(rep)
            continue
        written += [c.trace_path for c in rep.claims if c.trace_path is not None]
        if not rep.complete:
            cut.append(Text(f"{rep.scenario.name}: search incomplete: {rep.reason}", style="yellow"))
        how = _search_note(rep)
        if how:
            notes.append(Text(f"{rep.scenario.name}: {how}", style="dim"))
        notes += [Text(f"{rep.scenario.name}: note: {note}", style="yellow") for note in rep.notes]
    for reason, reps in untouched.items():
        claims = sum(len(r.claims) for r in reps)
        cut.append(Text(f"not searched: {len(reps):,} {'scenario' if len(reps) == 1 else 'scenarios'} "
                        f"({claims:,} {'claim' if claims == 1 else 'claims'}, every one inconclusive): {reason} "
                        f"before them: {', '.join(r.scenario.name for r in reps)}", style="yellow"))
    parts: list[Any] = [table] if table.row_count else []
    if written:
        parts.append(Text(traces_written(written), no_wrap=True, overflow="ignore"))
        if verbose:
            parts += [Text(f"  {p}", no_wrap=True, overflow="ignore") for p in written]  # a path is not wrapped
    return Group(*parts, *notes, *cut)


_CLAIM_COLUMNS = (("scenario", "left"), ("claim", "left"), ("expected", "left"), ("found", "left"),
                  ("states", "right"), ("depth", "right"), ("seconds", "right"))
_SCENARIO_COLUMNS = (("scenario", "left"), ("claims", "right"), ("found", "left"), ("states", "right"),
                     ("depth", "right"), ("seconds", "right"))


def _found(c) -> Text:
    """A claim's verdict, marked ``✗`` (and red) when it is not the expected one."""
    style = "green" if c.matches else ("yellow" if c.verdict == "inconclusive" else HAZARD)
    return Text(c.verdict if c.matches else f"{c.verdict} ✗", style=style)


def _claim_table(reports: list[ScenarioReport]) -> AlignedTable:
    """A row per claim of every scenario (the scenario named on its first row)."""
    table = AlignedTable(*zip(*_CLAIM_COLUMNS))
    for rep in reports:
        for n, c in enumerate(rep.claims):
            depth = c.depth if c.depth is not None else rep.stats.depth
            table.add_row(rep.scenario.name if n == 0 else "", c.claim, c.expected, _found(c),
                          f"{rep.stats.states:,}", str(depth), f"{rep.stats.seconds:.2f}")
    return table


def _scenario_table(reports: list[ScenarioReport]) -> AlignedTable:
    """A row per scenario, and under it a line for each claim that did not get its expected
    verdict (what it expected, what was found, the trace's depth)."""
    table = AlignedTable(*zip(*_SCENARIO_COLUMNS))
    for rep in reports:
        odd = [c for c in rep.claims if not c.matches]
        wrong = sum(c.verdict != "inconclusive" for c in odd)
        said = [f"{wrong:,} unexpected" if wrong else "", f"{len(odd) - wrong:,} inconclusive" if len(odd) > wrong else ""]
        found = Text(", ".join(s for s in said if s) or "as expected",
                     style=HAZARD if wrong else "yellow" if odd else "green")
        table.add_row(rep.scenario.name, f"{len(rep.claims):,}", found, f"{rep.stats.states:,}",
                      str(rep.stats.depth), f"{rep.stats.seconds:.2f}")
        for c in odd:
            line = Text(f"  {c.claim}: expected {c.expected}, found ")
            line.append_text(_found(c))
            if c.depth is not None:
                line.append(f" (depth {c.depth})")
            table.add_note(line)
    return table


def traces_written(paths: list[Path]) -> str:
    """One line for the trace files a run wrote: how many, and the folder (or folders) they are
    in; a single trace is named in full (``kvproof show`` takes that path)."""
    if len(paths) == 1:
        return f"1 trace written: {paths[0]}"
    folders = list(dict.fromkeys(str(p.parent) for p in paths))
    where = ", ".join(f"{f}/" for f in folders)
    return f"{len(paths):,} traces written to {where}"


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
    if rep.backend_note.startswith("native backend unavailable"):  # the default fell back: say so
        out.append(f"Python engine ({rep.backend_note})")
    return "; ".join(out)
