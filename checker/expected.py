"""The expected-verdict table: every scenario's verdicts and distinct-state count, as data.

``traces/expected.toml`` is written by ``kvproof check --write-expected`` and re-checked by the
tests (the TLA+ Examples manifest habit): a change to the spec that moves a verdict or a state
count shows up as a failing test, and the table is regenerated and committed with it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from .atomic import write_text_atomic
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
    write_text_atomic(path, HEADER + tomli_w.dumps(expected_table(reports)))


def read_expected(path: Path) -> dict[str, Any]:
    """The table stored at ``path``."""
    return tomllib.loads(path.read_text(encoding="utf-8"))
