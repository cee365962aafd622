"""Results: what checking a claim found, and how a scenario's run compares with expectations.

Verdicts are nouns, the outcomes of :mod:`kvproof.checker.outcome` (re-exported here).  An invariant or a liveness claim is :class:`Verified` (it holds: a complete
search found no state, or no fair lasso, that breaks it) or :class:`Violated` (with its
counterexample).  A witness is :class:`Reached` (with the trace that reaches it) or
:class:`Unreachable` (a complete search never reached it).  :class:`Inconclusive` carries the
reason the search stopped before it could decide.

What a search cut short by a limit establishes stays established: an invariant violation found
(its trace starts at the initial state), a witness reached, a liveness violation whose lasso
loops only through fully expanded states.  Everything else it leaves inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvproof.model.scenario import Scenario, ScenarioError, did_you_mean
from kvproof.checker.outcome import Inconclusive, Reached, Unreachable, Verified, Violated, judge
from kvproof.checker.traces import Trace

__all__ = ["Stats", "Verified", "Violated", "Reached", "Unreachable", "Inconclusive", "Result", "ClaimReport",
           "ScenarioReport", "judged", "found", "not_found", "default_expectation", "expectations_of"]


@dataclass
class Stats:
    """What a search did."""

    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    quiescent: int = 0
    visited: str = "exact"
    """How states were stored: ``exact`` or ``fingerprint`` (64-bit)."""
    bytes_per_state: float = 0.0
    """Bytes stored per distinct state: its key, parent number and action (with the graph
    kept: the state, its parent, action and depth, and its share of the edge arrays; the
    numbering dict's own overhead is not counted)."""
    collision_probability: float = 0.0
    """With fingerprints: bound on the chance that a fingerprint collision hid a state."""
    represented: int = 0
    """With symmetry reduction: concrete states the explored representatives stand for (the sum
    of their orbit sizes); otherwise equal to ``states``."""
    workers: int = 1
    worker_cpu: tuple[float, ...] = ()
    """With several workers: CPU seconds each worker process spent (its share of the work)."""

    @property
    def reduction(self) -> float:
        """Concrete states per explored state (1.0 without symmetry reduction)."""
        return self.represented / self.states if self.states and self.represented else 1.0

    @property
    def states_per_second(self) -> float:
        """Distinct states found per second of search (0 when none were searched)."""
        if not self.states:
            return 0.0
        return self.states / self.seconds if self.seconds > 0 else float("inf")


Result = Verified | Violated | Reached | Unreachable | Inconclusive


def found(kind: str, trace: Trace | None) -> Result:
    """The result of a claim that hit: an invariant (or liveness claim) violated, a witness
    reached, with the trace that shows it."""
    return Reached(trace) if kind == "witness" else Violated(trace)


def not_found(kind: str) -> Result:
    """The result of a claim a complete search never saw hit: verified, or for a witness
    unreachable."""
    return Unreachable() if kind == "witness" else Verified()


def default_expectation(kind: str) -> str:
    """The verdict a claim is expected to get when nothing says otherwise."""
    return "reached" if kind == "witness" else "verified"


def expectations_of(scenario: Scenario, spec, only=None) -> dict[str, str]:
    """The verdict each claim to check is expected to get: the scenario's expectations, or with
    ``only`` (claim names) just those claims, a claim the scenario sets no verdict for expecting
    :func:`default_expectation`; an unknown name is a :class:`ScenarioError` that suggests the
    nearest one."""
    expected = scenario.expectations(spec)
    if not only:
        return expected
    kinds = {x.name: x.kind for x in spec.claims}
    unknown = [c for c in only if c not in kinds]
    if unknown:
        raise ScenarioError(f"unknown invariant or witness {unknown[0]!r}{did_you_mean(unknown[0], kinds)} "
                            "(kvproof list --claims names them)")
    return {c: expected.get(c, default_expectation(kinds[c])) for c in only}


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
        """``verified`` / ``violated`` (an invariant or liveness claim), ``reached`` /
        ``unreachable`` (a witness), or ``inconclusive``."""
        return self.result.verdict

    @property
    def matches(self) -> bool:
        """The verdict is the expected one (an inconclusive verdict never matches)."""
        return judge(self.result, self.expected) == "matched"

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
    backend: str = "python"
    """Which engine ran the search: ``python``, ``native`` (the model compiled to C) or ``ray``."""
    backend_note: str = ""
    """Under the default backend (``auto``), why the Python engine ran rather than the native one."""
    notes: list[str] = field(default_factory=list)
    """What the run noticed besides the verdicts: for an engine variant, each witness the
    scenario does not list that the variant makes unreachable (reachable in the spec it
    subclasses), so a verified invariant may be vacuous."""
    checkpoint: dict | None = None
    """With ``--checkpoint``: the checkpoint ``file``, where the search ``resumed_from``
    (``{"n_states", "depth"}``; ``None``: from the start), how many checkpoints it ``written``,
    and whether the file was ``kept`` (the time limit stopped the search) or removed (it ended)."""


def judged(reports: list[ScenarioReport]) -> list[tuple[Result, str]]:
    """Every claim's outcome with the verdict expected of it, over ``reports``: what
    :func:`kvproof.checker.outcome.exit_code` maps to the run's exit code."""
    return [(c.result, c.expected) for r in reports for c in r.claims]
