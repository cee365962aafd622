"""A table as plain aligned columns: every cell in full, whatever the width.

Rich's own :class:`rich.table.Table` fits a table to the console's width by cutting cells
(``violat…``, a state count gone), which is what a CI log must never show.  An
:class:`AlignedTable` lays its columns out from their widest cell and draws each row as one line
of text, the columns two spaces apart and a rule of ``-`` under the header; a line wider than the
console is left long (the terminal or the log viewer wraps it), never cut.  Print it with
``soft_wrap=True`` (:func:`~kvproof.checker.report.render.to_text` does) so that rich does not
crop it either.
"""

from __future__ import annotations

from typing import Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

__all__ = ["AlignedTable"]

_GAP = "  "


class AlignedTable:
    """Rows of cells (``str`` or :class:`rich.text.Text`, whose style is kept on a terminal)
    under a header; ``justify`` gives each column ``"left"`` or ``"right"``."""

    def __init__(self, header: Sequence[str], justify: Sequence[str]):
        if len(header) != len(justify):
            raise ValueError("one justification per column")
        self.header = tuple(header)
        self.justify = tuple(justify)
        self.rows: list[tuple[Text, ...]] = []
        self._notes: dict[int, list[Text]] = {}  # after row n: lines that span the table

    def add_row(self, *cells: str | Text) -> None:
        """One row, a cell per column."""
        if len(cells) != len(self.header):
            raise ValueError(f"expected {len(self.header)} cells, got {len(cells)}")
        self.rows.append(tuple(c if isinstance(c, Text) else Text(str(c)) for c in cells))

    def add_note(self, line: str | Text) -> None:
        """A line under the last row that spans the table: it is printed in full and does not
        widen any column (what a row's cells need to say more about it)."""
        self._notes.setdefault(len(self.rows) - 1, []).append(line if isinstance(line, Text) else Text(line))

    @property
    def row_count(self) -> int:
        """How many rows (the header not counted)."""
        return len(self.rows)

    def widths(self) -> list[int]:
        """Each column's width: its widest cell, header included."""
        return [max([cell_len(h), *(r[k].cell_len for r in self.rows)]) for k, h in enumerate(self.header)]

    def lines(self) -> list[Text]:
        """The header, its rule and one line per row (each followed by its notes), no trailing
        spaces."""
        widths = self.widths()

        def line(cells: Sequence[Text], style: str = "") -> Text:
            out = Text(style=style)
            for k, (cell, w) in enumerate(zip(cells, widths)):
                if k:
                    out.append(_GAP)
                pad = " " * (w - cell.cell_len)
                if self.justify[k] == "right":
                    out.append(pad)
                    out.append_text(cell)
                else:
                    out.append_text(cell)
                    out.append(pad)
            out.rstrip()
            return out

        head = line([Text(h) for h in self.header], "bold")
        rule = line([Text("-" * w) for w in widths])
        out = [head, rule, *self._notes.get(-1, ())]
        for n, r in enumerate(self.rows):
            out += [line(r), *self._notes.get(n, ())]
        return out

    def plain(self) -> str:
        """The table as plain text, one line per row."""
        return "\n".join(t.plain for t in self.lines())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for t in self.lines():
            t.no_wrap, t.overflow, t.end = True, "ignore", "\n"
            yield t
