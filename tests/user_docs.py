"""The user-facing text: ``README.md`` and the pages of the docs site (``docs/**/*.md``).

The README's long text moved into the docs site; the tests that hold that text to the code (its
commands run, its flags exist, the figures ``--help`` cites) read it here, wherever it now is.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "pages", "page", "text"]

ROOT = Path(__file__).resolve().parents[1]


def pages() -> dict[str, str]:
    """Every user-facing Markdown file by its path relative to the repository: the README first,
    then the docs pages in path order."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {str(f.relative_to(ROOT)): f.read_text() for f in files}


def page(path: str) -> str:
    """One docs page's text, by its path under ``docs/`` (``how-to/run-the-tests.md``)."""
    return (ROOT / "docs" / path).read_text()


def text() -> str:
    """The README and every docs page, one after another."""
    return "\n".join(pages().values())
