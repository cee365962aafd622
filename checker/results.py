"""Results: what checking a claim found, and how a scenario's run compares with expectations.

Verdicts are nouns: :class:`Verified`, :class:`Violated` (with its trace), :class:`Inconclusive`
(with the reason the search stopped).  For a witness, *verified* means it was reached (with the
trace that reaches it) and *violated* that the exhaustive search never reached it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..spec.scenario import Scenario
from .explicit import Stats
from .traces import Trace

__all__ = ["Verified", "Violated", "Inconclusive", "Result", "ClaimReport", "ScenarioReport", "exit_code"]


@dataclass(frozen=True)
class Verified:
    """The claim holds in every reachable state (a witness: it is reachable, see ``trace``)."""

    trace: Trace | None = None
    verdict: str = "verified"


@dataclass(frozen=True)
class Violated:
    """The claim fails (a witness: it is unreachable); ``trace`` is a shortest counterexample."""

    trace: Trace | None = None
    verdict: str = "violated"


@dataclass(frozen=True)
class Inconclusive:
    """The search stopped before it could decide; ``reason`` says which limit stopped it."""

    reason: str
    verdict: str = "inconclusive"


Result = Verified | Violated | Inconclusive


@dataclass
class ClaimReport:
    """One claim of one scenario: what was expected, what was found, where its trace went."""

    claim: str
    kind: str
    expected: str
    result: Result
    trace_path: Path | None = None

    @property
    def verdict(self) -> str:
        """``verified``, ``violated`` or ``inconclusive``."""
        return self.result.verdict

    @property
    def matches(self) -> bool:
        """The verdict is the expected one (an inconclusive verdict never matches)."""
        return self.verdict == self.expected

    @property
    def depth(self) -> int | None:
        """Length of the trace, if there is one."""
        trace = getattr(self.result, "trace", None)
        return None if trace is None else len(trace)


@dataclass
class ScenarioReport:
    """Every checked claim of one scenario, with the search's statistics."""

    scenario: Scenario
    stats: Stats
    complete: bool
    reason: str = ""
    claims: list[ClaimReport] = field(default_factory=list)
    symmetry: str = ""
    """With symmetry reduction asked for: what it permuted, or why it was off or refused."""


def exit_code(reports: list[ScenarioReport]) -> int:
    """0 when every verdict matches, 1 when one does not, else 2 when one is inconclusive."""
    rows = [c for r in reports for c in r.claims]
    if any(c.verdict != "inconclusive" and not c.matches for c in rows):
        return 1
    if any(c.verdict == "inconclusive" for c in rows):
        return 2
    return 0
