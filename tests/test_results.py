"""Verdicts and exit codes."""

import pytest

from kvproof.checker.results import (ClaimReport, Inconclusive, Reached, ScenarioReport, Stats, Unreachable, Verified, Violated,
                                     default_expectation, found, judged, not_found)
from kvproof.checker.outcome import exit_code as _exit_code


def exit_code(reports):
    return _exit_code(judged(reports))
from kvproof.model.scenario import builtin


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


def test_a_witness_is_reached_or_unreachable_never_verified():
    assert isinstance(found("witness", None), Reached) and found("witness", None).verdict == "reached"
    assert isinstance(not_found("witness"), Unreachable) and not_found("witness").verdict == "unreachable"
    assert found("invariant", None).verdict == found("liveness", None).verdict == "violated"
    assert not_found("invariant").verdict == not_found("liveness").verdict == "verified"
    assert default_expectation("witness") == "reached" and default_expectation("invariant") == "verified"
    row = ClaimReport("w", "witness", "reached", Reached())
    assert row.matches and not ClaimReport("w", "witness", "verified", Reached()).matches
    assert exit_code([_report(("unreachable", Reached()))]) == 1


def test_expectations_of_selects_claims_defaults_the_unset_and_names_the_unknown():
    from kvproof.checker.results import expectations_of
    from kvproof.model.scenario import ScenarioError, builtin
    sc = builtin("abort-race")
    spec = sc.build()
    every = expectations_of(sc, spec)
    assert every == sc.expectations(spec) and every["no_write_after_release"] == "violated"
    assert expectations_of(sc, spec, ["no_write_after_release"]) == {"no_write_after_release": "violated"}
    kinds = {c.name: c.kind for c in spec.claims}
    unset = next(n for n in kinds if n not in every)
    assert expectations_of(sc, spec, [unset]) == {unset: "reached" if kinds[unset] == "witness" else "verified"}
    with pytest.raises(ScenarioError, match="unknown invariant or witness 'no_write_after_releas'; did you mean"):
        expectations_of(sc, spec, ["no_write_after_releas"])
