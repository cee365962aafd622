"""Checking scenarios from a user's own tests.

::

    from kvproof.testing import check

    def test_our_engine_config_is_isolated():
        check("deploy/kvproof/our-engine.toml").assert_verified()

    def test_the_release_we_run():
        check("v0.5.22").assert_verified("no_write_after_release", "no_cross_tenant_read")

    def test_the_known_race_is_still_found():
        trace = check("abort-race").assert_violated("no_cross_tenant_read")
        assert len(trace) == 15

:func:`check` runs the explicit engine on a built-in scenario (by name), a scenario file (by
path) or a :class:`~kvproof.model.scenario.Scenario`, and returns a :class:`Checked` whose
assertions fail with the counterexample, as ``kvproof show`` prints it.  An inconclusive
verdict (a limit cut the search short) never passes an assertion.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from kvproof.checker.explicit.search import Limits
from kvproof.checker.report.render import render_trace, to_text
from kvproof.checker.results import ClaimReport, ScenarioReport
from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.traces import Trace
from kvproof.model.registry import trust_variant
from kvproof.model.scenario import Scenario, builtin, load_scenario

__all__ = ["check", "Checked", "resolve_scenario"]


def resolve_scenario(scenario: str | PathLike | Scenario) -> Scenario:
    """A :class:`Scenario` as given, a built-in one by name, or a scenario file by path."""
    if isinstance(scenario, Scenario):
        return scenario
    text = str(scenario)
    if isinstance(scenario, PathLike) or text.endswith(".toml") or Path(text).is_file():
        return load_scenario(text)
    return builtin(text)


def check(
    scenario: str | PathLike | Scenario,
    *,
    claims: list[str] | None = None,
    max_states: int | None = None,
    max_seconds: float | None = None,
    max_depth: int | None = None,
    variants: tuple[str | PathLike, ...] = (),
) -> "Checked":
    """Check ``scenario`` (every claim it expects, or only ``claims``) and return the outcome;
    ``variants`` are the engine variant files (code, run as trusted) its ``protocol`` may name."""
    for v in variants:
        trust_variant(v)
    sc = resolve_scenario(scenario)
    report = check_scenario(sc, Limits(max_states, max_seconds, max_depth), claims)
    return Checked(report)


class Checked:
    """What :func:`check` found, with assertions for tests."""

    def __init__(self, report: ScenarioReport):
        self.report = report

    @property
    def verdicts(self) -> dict[str, str]:
        """``{claim: verdict}``: ``verified`` / ``violated`` for an invariant or liveness claim,
        ``reached`` / ``unreachable`` for a witness, or ``inconclusive``."""
        return {c.claim: c.verdict for c in self.report.claims}

    def _row(self, claim: str) -> ClaimReport:
        for c in self.report.claims:
            if c.claim == claim:
                return c
        raise KeyError(f"{claim!r} was not checked in {self.report.scenario.name} "
                       f"(checked: {', '.join(self.verdicts)})")

    def trace(self, claim: str) -> Trace | None:
        """The trace found for ``claim``: a counterexample of an invariant, or the path to a
        witness; ``None`` when there is none."""
        return getattr(self._row(claim).result, "trace", None)

    def _explain(self, c: ClaimReport) -> str:
        name = self.report.scenario.name
        if c.verdict == "inconclusive":
            return f"{name}: {c.claim} is inconclusive: {c.result.reason}"
        text = f"{name}: {c.claim} is {c.verdict}"
        trace = self.trace(c.claim)
        if trace is not None and c.kind == "invariant":
            text += f"; counterexample ({len(trace)} steps):\n" + to_text(render_trace(trace), width=100)
        return text

    def assert_verified(self, *claims: str) -> "Checked":
        """Every named claim (default: every invariant checked) is verified: an invariant holds
        in every reachable state; a witness named here must be reached (the old meaning of
        "verified" for a witness, kept as a synonym: :meth:`assert_reached` says it plainly)."""
        names = list(claims) or [c.claim for c in self.report.claims if c.kind == "invariant"]
        bad = [c for c in map(self._row, names) if c.verdict != ("reached" if c.kind == "witness" else "verified")]
        if bad:
            raise AssertionError("\n\n".join(self._explain(c) for c in bad))
        return self

    def assert_reached(self, *witnesses: str) -> "Checked":
        """Every named witness is reached (default: every witness checked)."""
        names = list(witnesses) or [c.claim for c in self.report.claims if c.kind == "witness"]
        bad = [c for c in map(self._row, names) if c.verdict != "reached"]
        if bad:
            raise AssertionError("\n\n".join(self._explain(c) + " (expected reached)" for c in bad))
        return self

    def assert_violated(self, claim: str) -> Trace | None:
        """``claim`` is violated; returns its counterexample.  For a witness (the old meaning of
        "violated", kept as a synonym) it must be unreachable, and there is no trace."""
        c = self._row(claim)
        want = "unreachable" if c.kind == "witness" else "violated"
        if c.verdict != want:
            raise AssertionError(self._explain(c) + f" (expected {want})")
        return self.trace(claim)

    def assert_expected(self) -> "Checked":
        """Every verdict is the one the scenario expects (the ``kvproof check`` gate)."""
        bad = [c for c in self.report.claims if not c.matches]
        if bad:
            raise AssertionError("\n\n".join(f"{self._explain(c)} (expected {c.expected})" for c in bad))
        return self

    def __repr__(self) -> str:
        return f"Checked({self.report.scenario.name}: {self.verdicts})"
