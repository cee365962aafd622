"""The explicit and the symbolic engine agree: verdicts, shortest lengths, random flag settings."""

from dataclasses import replace
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvproof.checker.explicit.search import Limits
from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.symbolic.proofs import ProofBudget
from kvproof.checker.results import Verified
from kvproof.checker.symbolic.run import check_scenario_bmc, cross_check, disagreements
from kvproof.spec.sglang.config import Config, Engine, Request
from kvproof.model.scenario import Scenario, builtin, builtin_names

from .conftest import checked


# Bounded model checking runs to the scenario's longest shortest violation, capped to keep the
# suite fast: hits within the cap must have the explicit length, none may appear before the
# explicit one.  `kvproof check --engine both` (cross_check, tested below) goes to the deepest
# explicit hit and proves the rest.
AGREEMENT_DEPTH = 8
CAP = 11


def _compare(sc, depth, explicit=None):
    explicit = explicit if explicit is not None else check_scenario(sc)
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


# Bounded model checking against the explicit engine on scenarios that between them set every
# engine flag and both SGLang protocols (each hazard H1-H8 and H13, checksum, TP 2 and TP 2x2,
# layer-wise transfer, room reuse, metadata slots, heartbeats, 0.5.23).  Agreement of the Z3
# encoding with the reference interpreter on *every* reachable state of *every* scenario is
# test_differential's catalogue tier; here the unrolling and shortest lengths are under test.
AGREEMENT = ["incident", "pr-36988", "abort-race", "pr-35049-drain-ack", "timeout-equals-latency",
             "receipt-ack", "pr-41404", "source-reuse", "checksum-supported", "lost-drain-ack",
             "ack-before-register", "hold-forever-heartbeat", "prefill-abort-propagated",
             "checksum-late-write-deferred", "tp2-every-rank", "tp2x2-hold-min", "room-reuse-generation",
             "aux-held", "layerwise-abort-race", "sglang-0.5.23-failed-send", "sglang-0.5.23-room-reuse",
             "sglang-0.5.23-aux-failed-send-unbounded", "failure-source-reuse", "placeholder-fresh-pages",
             "prefill-abort-waiting-timeout", "checksum-unsupported", "ack-target-cleared", "tp2-first-ack",
             "tp2x2-ready-any", "room-reuse-legacy-ack", "aux-freed-early", "pr-35049-any-free-pages",
             "sglang-0.5.23-shared-room-2p-guard"]


# The same for vLLM's pull-mode protocol: between them every knob of its Engine at every value the
# catalogue uses (lease lengths, heartbeats on and off, stalls, both latency bounds, aborts on both
# sides, #32255 and #25067 before and after, pull and push mode, the scheduler-side V12, V15 and V11
# knobs, fan-in and failed posts, replays, deferred WRITEs, V13's and V16's, per-rank READs and V8's fix,
# V17's re-registration and check); 0.33.0 as shipped (heartbeats, a
# stalling decode) is in the fast tier, the rest (3-5 s each) in the slow one.
AGREEMENT_VLLM = ["vllm-pull-ttl-expiry", "vllm-pull-lease-equals-read", "vllm-pull-heartbeat-stall",
                  "vllm-pull-abort-before-32255", "vllm-pull-abort-32255", "vllm-pull-abort-finished-before-25067",
                  "vllm-push-lease-expiry-stall", "vllm-push-abort-unanswered", "vllm-pull-reject-before-41269",
                  "vllm-pull-async-before-45357", "vllm-push-prefix-hit-before-48758",
                  # per-rank WRITEs with failed posts and PUSH_FAIL (V6, fan-in 2); a replayed reference
                  # refused (V9; the replay's actions and the shared heartbeat set)
                  "vllm-push-write-post-fails-50754", "vllm-pull-replayed-params-refused",
                  "vllm-push-deferred-write",  # a WRITE deferred behind a pending handshake (#55470)
                  # a parked full local hit's notify-only load before #56640 (V13); MLA's notify-only
                  # notification to the unread prefill rank naming decode's id, before #36958 (V16)
                  "vllm-pull-full-hit-before-56640", "vllm-pull-mla-notif-before-36958",
                  # V2: the reaper before #58222 and a hung READ; V14: the turn-2 check off, and on with
                  # a late clock offset (its overdue counter), READs within a tick
                  "vllm-pull-reaper-before-58222", "vllm-pull-turn2-before-47021",
                  "vllm-pull-turn2-clock-offset-47021",
                  "vllm-pull-sibling-read-before-56104",  # per-rank READs that fail, before #56104 (V8)
                  "vllm-pull-reregistered-no-generation-check",  # a re-registered prefill, no check (V17)
                  "vllm-pull-sibling-post-fails-before-56104",  # a READ that fails to post (V8)
                  "vllm-pull-appended-token-capped",  # V11 pull: an appended token, the count capped (#50558)
                  "vllm-pull-release-fails-drop-handle"]  # a failed handle release, the handle dropped (V8's third path)


def _family(name):
    """The family's scenarios of its base specs: the vllm-prefix-cache and vllm-multi-connector
    specs' settings are their own (pinned in tests/test_vllm_prefix_cache.py and
    tests/test_vllm_multi_connector.py), refused by the vllm spec."""
    own = {"vllm-prefix-cache", "vllm-multi-connector"}
    return [n for n in builtin_names() if builtin(n).family == name and builtin(n).protocol not in own]


@pytest.mark.parametrize("family,agreement,engine", [("sglang", AGREEMENT, Engine), ("vllm", AGREEMENT_VLLM, None)])
def test_the_agreement_scenarios_set_every_flag_to_every_value_the_catalogue_does(family, agreement, engine):
    from dataclasses import fields

    if engine is None:
        from kvproof.spec.vllm.config import Engine as engine
    catalogue = _family(family)
    assert set(agreement) <= set(catalogue) and catalogue
    engines = {n: builtin(n).config.engine for n in catalogue}  # builtin() builds a scenario each call
    for f in fields(engine):
        here = {repr(getattr(engines[n], f.name)) for n in agreement}
        everywhere = {repr(getattr(engines[n], f.name)) for n in catalogue}
        assert here == everywhere, f.name
    assert {builtin(n).protocol for n in agreement} == {builtin(n).protocol for n in catalogue}


# The last two vLLM agreement scenarios (3-4 s each) run only with --thorough: the test command is
# near its budget; vllm-push-write-post-fails-50754 (the per-rank WRITE encoding) stays in the slow tier.
THOROUGH_ONLY = ("vllm-pull-replayed-params-refused", "vllm-push-deferred-write",
                  "vllm-pull-reaper-before-58222", "vllm-pull-turn2-before-47021",  # V2, V14: 2.6 s, 1.2 s
                  "vllm-pull-sibling-read-before-56104",  # V8's per-rank READs: 4.5 s
                  "vllm-pull-sibling-post-fails-before-56104")


@lru_cache(maxsize=None)
def _settings(name):
    """The (flag, value) pairs a scenario sets, and its spec."""
    from dataclasses import fields

    sc = builtin(name)
    return frozenset({(f.name, repr(getattr(sc.config.engine, f.name))) for f in fields(sc.config.engine)}
                     | {("spec", sc.protocol)})


def covering(names, first=()):
    """A subset of ``names`` that sets every flag to every value ``names`` do between them
    (greedy: ``first``, then the scenario adding the most pairs not yet set, the earlier in
    ``names`` on a tie)."""
    chosen = [n for n in names if n in first]
    done = set().union(*(_settings(n) for n in chosen)) if chosen else set()
    need = set().union(*(_settings(n) for n in names))
    while done < need:
        best = max((n for n in names if n not in chosen), key=lambda n: len(_settings(n) - done))
        chosen.append(best)
        done |= _settings(best)
    return chosen


FIRST = ("abort-race", "pr-41404", "room-reuse-generation", "vllm-pull-heartbeat-stall")
# the test command's tier: a covering subset of each list (every flag at every value still set);
# --thorough: every scenario of both lists
COVERING = set(covering(AGREEMENT, FIRST)) | set(covering(AGREEMENT_VLLM, FIRST))


def test_the_covering_subset_sets_what_the_whole_list_sets():
    for names in (AGREEMENT, AGREEMENT_VLLM):
        sub = [n for n in names if n in COVERING]
        assert set().union(*map(_settings, sub)) == set().union(*map(_settings, names)) and len(sub) < len(names)
    assert covering(["abort-race", "abort-race"]) == ["abort-race"]  # nothing more needed once all is set


@pytest.mark.parametrize("name", [n if n in FIRST
                                  else pytest.param(n, marks=pytest.mark.thorough) if n in THOROUGH_ONLY or n not in COVERING
                                  else pytest.param(n, marks=pytest.mark.slow) for n in AGREEMENT + AGREEMENT_VLLM])
def test_engines_agree_on_the_scenarios_that_set_every_flag(name):
    sc = builtin(name)
    explicit = checked(name)
    lengths = [c.depth for c in explicit.claims if c.kind == "invariant" and c.verdict == "violated"]
    depth = min(max(lengths), CAP) if lengths else AGREEMENT_DEPTH
    _compare(sc, depth, explicit)


@pytest.mark.slow  # about 7 s
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


@pytest.mark.slow  # about 9 s
def test_cross_check_proves_what_never_hits_instead_of_searching_the_full_depth():
    explicit = checked("checksum-unsupported")  # depth 22; deepest hit 15
    agreement = cross_check(explicit)
    assert agreement.problems == [] and agreement.gaps == []
    assert agreement.bounded.stats.depth == 15
    never = {c.claim for c in explicit.claims if c.kind in ("invariant", "witness") and c.depth is None}
    assert set(agreement.proved) == never and "sometimes_checksum_mismatch" in never  # a witness never reached


@pytest.mark.slow  # about 5 s
def test_cross_check_catches_an_explicit_engine_that_missed_a_violation():
    explicit = checked("failure-before-pr-41404")
    [row] = [c for c in explicit.claims if c.claim == "no_write_after_release"]
    row.result = Verified()  # a mutant explicit engine: the 7-step violation not seen
    agreement = cross_check(explicit)
    assert any("no_write_after_release" in p and "bounded hit: True" in p for p in agreement.problems)


@pytest.mark.slow  # inner loop: over 2.5 s (the README's test command runs it)
def test_cross_check_catches_a_wrong_shortest_length():
    explicit = checked("failure-before-pr-41404")
    [row] = [c for c in explicit.claims if c.claim == "no_write_after_release"]
    row.result.trace.actions.insert(0, row.result.trace.actions[0])  # one step longer than it is
    agreement = cross_check(explicit)
    assert any("no_write_after_release: shortest length 8 (explicit) vs 7 (bounded)" in p for p in agreement.problems)


def test_cross_check_at_a_shallow_depth_is_not_established_never_agreed():
    explicit = checked("pr-41404")
    agreement = cross_check(explicit, depth=3)
    assert agreement.problems == [] and agreement.proved == []
    assert agreement.gaps and all("agreement not established" in g for g in agreement.gaps)


def test_cross_check_whose_proof_stops_says_why_with_a_counterexample_to_induction():
    explicit = checked("prefill-abort-propagated")
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


@pytest.mark.slow  # about 10 s
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FLAGS)
def test_random_flag_combinations_get_the_same_verdicts(flags):
    cfg = Config((Request("A", 1), Request("B", 1)), decode_pages=1, prefill_pages=2, context_limit=2,
                 engine=Engine(**flags))
    sc = Scenario("random", "random flags", "", cfg)
    explicit = check_scenario(sc, Limits())
    _compare(replace(sc), 7)
