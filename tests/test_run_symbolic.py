"""The explicit and the symbolic engine agree: verdicts, shortest lengths, random flag settings."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvproof.checker.explicit import Limits
from kvproof.checker.run import check_scenario
from kvproof.checker.proofs import ProofBudget
from kvproof.checker.results import Verified
from kvproof.checker.run_symbolic import check_scenario_bmc, cross_check, disagreements
from kvproof.spec.sglang.config import Config, Engine, Request
from kvproof.model.scenario import Scenario, builtin, builtin_names

# Bounded model checking runs to the scenario's longest shortest violation, capped to keep the
# suite fast: hits within the cap must have the explicit length, none may appear before the
# explicit one.  `kvproof check --engine both` (cross_check, tested below) goes to the deepest
# explicit hit and proves the rest.
AGREEMENT_DEPTH = 8
CAP = 11


def _compare(sc, depth):
    explicit = check_scenario(sc)
    bounded = check_scenario_bmc(sc, depth)
    rows = {c.claim: c for c in bounded.claims}
    for c in explicit.claims:
        b = rows[c.claim]
        if c.kind == "liveness":  # fair lassos need the whole graph: the bounded engine does not judge them
            assert b.verdict == "inconclusive", (sc.name, c.claim)
            continue
        if c.depth is not None and c.depth <= depth:  # an explicit hit within reach: same length
            assert b.depth == c.depth, (sc.name, c.claim)
            assert b.verdict == c.verdict, (sc.name, c.claim)
        else:  # no explicit hit within the depth: no bounded hit either
            assert b.depth is None and b.verdict == "inconclusive", (sc.name, c.claim, b.depth)
    return explicit, bounded


@pytest.mark.parametrize("name", builtin_names())
def test_engines_agree_on_every_scenario(name):
    sc = builtin(name)
    explicit = check_scenario(sc)
    lengths = [c.depth for c in explicit.claims if c.claim in {x.claim for x in explicit.claims}
               and c.kind == "invariant" and c.verdict == "violated"]
    depth = min(max(lengths), CAP) if lengths else AGREEMENT_DEPTH
    _compare(sc, depth)


def test_full_depth_agreement_on_a_small_scenario():
    sc = builtin("pr-41404")
    explicit = check_scenario(sc)
    bounded = check_scenario_bmc(sc, explicit.stats.depth)
    assert disagreements(explicit, bounded) == []


def test_disagreements_are_reported():
    sc = builtin("abort-race")
    explicit = check_scenario(sc)
    shallow = check_scenario_bmc(sc, 5)  # stops before the 6-step violation
    problems = disagreements(explicit, shallow)
    assert any("no_write_after_release" in p for p in problems)


def test_cross_check_proves_what_never_hits_instead_of_searching_the_full_depth():
    explicit = check_scenario(builtin("checksum-unsupported"))  # depth 22; deepest hit 15
    agreement = cross_check(explicit)
    assert agreement.problems == [] and agreement.gaps == []
    assert agreement.bounded.stats.depth == 15
    never = {c.claim for c in explicit.claims if c.kind in ("invariant", "witness") and c.depth is None}
    assert set(agreement.proved) == never and "sometimes_checksum_mismatch" in never  # a witness never reached


def test_cross_check_catches_an_explicit_engine_that_missed_a_violation():
    explicit = check_scenario(builtin("failure-before-pr-41404"))
    [row] = [c for c in explicit.claims if c.claim == "no_write_after_release"]
    row.result = Verified()  # a mutant explicit engine: the 7-step violation not seen
    agreement = cross_check(explicit)
    assert any("no_write_after_release" in p and "bounded hit: True" in p for p in agreement.problems)


def test_cross_check_catches_a_wrong_shortest_length():
    explicit = check_scenario(builtin("failure-before-pr-41404"))
    [row] = [c for c in explicit.claims if c.claim == "no_write_after_release"]
    row.result.trace.actions.insert(0, row.result.trace.actions[0])  # one step longer than it is
    agreement = cross_check(explicit)
    assert any("no_write_after_release: shortest length 8 (explicit) vs 7 (bounded)" in p for p in agreement.problems)


def test_cross_check_at_a_shallow_depth_is_not_established_never_agreed():
    explicit = check_scenario(builtin("pr-41404"))
    agreement = cross_check(explicit, depth=3)
    assert agreement.problems == [] and agreement.proved == []
    assert agreement.gaps and all("agreement not established" in g for g in agreement.gaps)


def test_cross_check_whose_proof_stops_says_why_with_a_counterexample_to_induction():
    explicit = check_scenario(builtin("prefill-abort-propagated"))
    agreement = cross_check(explicit, budget=ProofBudget(max_k=1, template_arity=1))
    assert agreement.problems == [] and agreement.proved == []
    assert any("not proved: not k-inductive for any k up to 1" in g for g in agreement.gaps)
    assert agreement.failure is not None and agreement.failure.breaks and agreement.failure.unreachable


FLAGS = st.fixed_dictionaries({
    "release_policy": st.sampled_from(["immediate", "drain_ack", "drain_ack_or_timeout"]),
    "receipt_ack_taken_as_drain": st.booleans(),
    "transfer_failures": st.booleans(),
    "defer_on_every_failure": st.booleans(),
    "hold_source_until_drained": st.booleans(),
    "checksum": st.booleans(),
    "client_aborts": st.booleans(),
    "timeout": st.integers(1, 2),
    "write_latency_bound": st.sampled_from([None, 0, 1, 2]),
})


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FLAGS)
def test_random_flag_combinations_get_the_same_verdicts(flags):
    cfg = Config((Request("A", 1), Request("B", 1)), decode_pages=1, prefill_pages=2, context_limit=2,
                 engine=Engine(**flags))
    sc = Scenario("random", "random flags", "", cfg)
    explicit = check_scenario(sc, Limits())
    _compare(replace(sc), 7)
