"""The expected-verdict table: every scenario's verdicts and distinct-state count, as data.

``traces/expected.toml`` is written by ``kvproof check --write-expected`` and re-checked by the
tests (the TLA+ Examples manifest habit): a change to the spec that moves a verdict or a state
count shows up as a failing test, and the table is regenerated and committed with it.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from .results import ScenarioReport

__all__ = ["expected_table", "write_expected", "read_expected"]

HEADER = (
    "# Expected verdicts and distinct-state counts of the built-in catalogue.\n"
    "# Written by `kvproof check --write-expected traces/expected.toml`; re-checked by the tests.\n\n"
)


def expected_table(reports: list[ScenarioReport]) -> dict[str, Any]:
    """``{scenario: {states, depth, complete, verdicts: {claim: verdict}}}``."""
    return {
        r.scenario.name: {
            "states": r.stats.states,
            "transitions": r.stats.transitions,
            "depth": r.stats.depth,
            "complete": r.complete,
            "verdicts": {c.claim: c.verdict for c in r.claims},
        }
        for r in reports
    }


def write_expected(path: Path, reports: list[ScenarioReport]) -> None:
    """Write the table for ``reports`` to ``path`` atomically."""
    text = HEADER + tomli_w.dumps(expected_table(reports))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_expected(path: Path) -> dict[str, Any]:
    """The table stored at ``path``."""
    return tomllib.loads(path.read_text(encoding="utf-8"))
