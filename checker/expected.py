"""The expected-verdict table: every scenario's verdicts and distinct-state count, as data.

``traces/expected.toml`` is written by ``kvproof check --write-expected`` and re-checked by the
tests (the TLA+ Examples manifest habit): a change to the spec that moves a verdict or a state
count shows up as a failing test, and the table is regenerated and committed with it.

A witness's verdict is ``reached`` or ``unreachable``; a table written before those words
existed says ``verified`` / ``violated`` for a witness, and :func:`read_expected` reads them as
the new words (for the claims it knows to be witnesses).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Mapping

import tomli_w

from kvproof.model.scenario import builtins, expected_verdict
from kvproof.checker.atomic import write_text_atomic
from kvproof.checker.results import ScenarioReport

__all__ = ["expected_table", "write_expected", "read_expected", "catalogue_kinds"]

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


def catalogue_kinds() -> dict[str, dict[str, str]]:
    """``{scenario: {claim: kind}}`` of the built-in catalogue."""
    return {sc.name: {c.name: c.kind for c in sc.build().claims} for sc in builtins()}


def read_expected(path: Path, kinds: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """The table stored at ``path``, a witness's old verdict words read as ``reached`` /
    ``unreachable``; ``kinds`` (``{scenario: {claim: kind}}``, default: the built-in
    catalogue's) says which claims are witnesses."""
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    kinds = catalogue_kinds() if kinds is None else kinds
    for name, entry in table.items():
        known = kinds.get(name, {})
        verdicts = entry.get("verdicts") if isinstance(entry, dict) else None
        if isinstance(verdicts, dict):
            for claim, verdict in verdicts.items():
                if isinstance(verdict, str):
                    verdicts[claim] = expected_verdict(known.get(claim, ""), verdict)
    return table
