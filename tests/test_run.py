"""Checking scenarios end to end: pinned counts and lengths, limits, selections, traces."""

import pytest

from kvproof.checker.explicit.search import Limits
from kvproof.checker.results import Inconclusive
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import ScenarioError, builtin, builtin_names

from .conftest import checked

# Every scenario of the catalogue getting its expected verdicts is tests/test_expected.py's
# (the same file as the table of them, so that the catalogue is explored once).


# Pinned distinct-state counts (Stateright's habit): a spec change that moves one must be deliberate.
PINNED = {"incident": 68, "pr-36988": 62, "pr-38935": 89, "abort-race": 2958, "pr-35049-drain-ack": 1109,
          "failure-before-pr-41404": 199, "pr-41404": 317, "ack-target-cleared": 26, "room-reuse-generation": 666,
          "tp2-every-rank": 30449, "failure-source-reuse": 169, "failure-source-held": 108}


@pytest.mark.parametrize("name,states", PINNED.items())
def test_pinned_state_counts(name, states):
    assert checked(name).stats.states == states


def test_counterexample_lengths_are_shortest_and_pinned():
    rep = checked("abort-race")
    depth = {c.claim: c.depth for c in rep.claims}
    assert depth["no_write_after_release"] == 6   # admit, prealloc, metadata, forward, write, abort
    assert depth["no_cross_tenant_read"] == 15
    rep = checked("incident")
    assert {c.claim: c.depth for c in rep.claims}["no_cross_tenant_read"] == 18


def test_a_truncated_search_is_inconclusive_never_verified():
    rep = check_scenario(builtin("v0.5.22"), Limits(max_states=5000))
    assert not rep.complete
    # release_justified's deadline release (9 steps) is found before the limit: a real violation
    assert all(isinstance(c.result, Inconclusive) for c in rep.claims
               if c.kind == "invariant" and c.claim != "release_justified")
    assert {c.claim: c.verdict for c in rep.claims}["release_justified"] == "violated"
    # a witness reached before the limit is still a real witness
    assert any(c.verdict == "reached" for c in rep.claims if c.kind == "witness")
    assert all(c.verdict in ("reached", "inconclusive") for c in rep.claims if c.kind == "witness")


def test_a_spent_budget_leaves_every_claim_inconclusive_without_a_search():
    import time

    rep = check_scenario(builtin("hold-forever-heartbeat"), Limits(max_seconds=1, started=time.perf_counter() - 2))
    assert not rep.complete and rep.reason == "time limit 1 s reached" and rep.stats.states == 0
    assert {c.verdict for c in rep.claims} == {"inconclusive"}
    assert {c.kind for c in rep.claims} == {"invariant", "witness", "liveness"}


def test_only_named_claims_are_checked_and_unknown_names_are_refused():
    rep = check_scenario(builtin("abort-race"), only=["no_write_after_release"])
    assert [c.claim for c in rep.claims] == ["no_write_after_release"]
    assert rep.claims[0].verdict == "violated"
    with pytest.raises(ScenarioError, match="unknown invariant or witness 'nope'"):
        check_scenario(builtin("abort-race"), only=["nope"])


def test_traces_are_written_only_for_violated_invariants(tmp_path):
    rep = check_scenario(builtin("abort-race"), traces_dir=tmp_path)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f"abort-race__{c}.itf.json" for c in
                             ["decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
                              "release_justified"])
    assert all(c.trace_path is None for c in rep.claims if c.verdict != "violated" or c.kind != "invariant")
