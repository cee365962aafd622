"""Verdicts and exit codes."""

from kvproof.checker.explicit import Stats
from kvproof.checker.results import ClaimReport, Inconclusive, ScenarioReport, Verified, Violated, exit_code
from kvproof.spec.scenario import builtin


def _report(*rows):
    rep = ScenarioReport(builtin("abort-race"), Stats(), True)
    rep.claims = [ClaimReport("c", "invariant", exp, res) for exp, res in rows]
    return rep


def test_exit_codes():
    assert exit_code([_report(("verified", Verified()), ("violated", Violated()))]) == 0
    assert exit_code([_report(("verified", Violated()))]) == 1
    assert exit_code([_report(("violated", Verified()))]) == 1
    assert exit_code([_report(("verified", Inconclusive("state limit")))]) == 2
    # a definite mismatch outranks an inconclusive result
    assert exit_code([_report(("verified", Inconclusive("x")), ("verified", Violated()))]) == 1


def test_an_inconclusive_result_never_matches():
    row = ClaimReport("c", "invariant", "verified", Inconclusive("time limit"))
    assert not row.matches and row.verdict == "inconclusive"
