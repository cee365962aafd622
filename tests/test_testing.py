"""kvproof.testing: assertions for a user's own tests."""

import pytest

from kvproof.model.scenario import builtin
from kvproof.testing import check, resolve_scenario


def test_the_release_we_run_is_verified():
    isolation = [c.claim for c in check("v0.5.22").report.claims
                 if c.kind == "invariant" and c.claim != "release_justified"]
    checked = check("v0.5.22").assert_verified(*isolation)
    # its deadline release is no drain proof: release_justified fails, with the counterexample as text
    with pytest.raises(AssertionError, match="v0.5.22: release_justified is violated; counterexample"):
        checked.assert_verified()
    assert set(v for c, v in checked.verdicts.items() if c != "release_justified") == {"verified", "reached"}
    witnesses = [c.claim for c in checked.report.claims if c.kind == "witness"]
    assert checked.assert_reached(*witnesses) is checked and checked.assert_verified(*witnesses) is checked
    assert checked.assert_expected() is checked


def test_the_incident_is_not_and_the_failure_shows_the_counterexample():
    with pytest.raises(AssertionError) as e:
        check("incident").assert_verified()
    text = str(e.value)
    assert "incident: no_cross_tenant_read is violated; counterexample (18 steps)" in text
    assert "! decode R1@room1 (tenant B) reads p1 holding R0@room0's KV (tenant A)" in text
    assert "no_write_after_release" not in text  # that one holds


def test_assert_violated_returns_the_trace():
    trace = check("abort-race").assert_violated("no_cross_tenant_read")
    assert len(trace) == 15 and trace.labels()[-1] == "decode_commit(req=R1)"
    with pytest.raises(AssertionError, match="expected violated"):
        check("pr-35049-drain-ack", claims=["no_cross_tenant_read"]).assert_violated("no_cross_tenant_read")


def test_inconclusive_never_passes():
    checked = check("v0.5.22", max_states=200)
    with pytest.raises(AssertionError, match="inconclusive"):
        checked.assert_verified()
    with pytest.raises(AssertionError, match="inconclusive"):
        checked.assert_expected()


def test_unknown_claims_and_scenarios(tmp_path):
    with pytest.raises(KeyError, match="was not checked"):
        check("abort-race", claims=["no_cross_tenant_read"]).assert_verified("pages_conserved")
    from kvproof.model.scenario import ScenarioError

    with pytest.raises(ScenarioError, match="unknown scenario"):
        check("nope")
    assert resolve_scenario(builtin("incident")).name == "incident"
