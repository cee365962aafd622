"""vLLM 0.33.0's decode-side prefix cache (the spec ``vllm-prefix-cache``): a block shared by live
requests with a reference count, hits, eviction and failed-load recovery.  Pinned state counts
and verdicts of its scenarios, the counterexamples told step by step, mutants its claims catch,
and the knobs it refuses."""

import pytest

from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.vllm.config import Config, Engine, Request
from kvproof.spec.vllm.prefix_cache import COMPUTED, OTHER, RECOMPUTE, VllmPrefixCache
from kvproof.spec.vllm.protocol import VllmPd

from .conftest import checked

STABLE, IDENTICAL, QUIESCENT = "shared_block_stable_while_read", "prefix_reads_identical_kv", "quiescent_releases_shared_block"

# scenario: (distinct states, the invariants it violates)
CATALOGUE = {
    "vllm-prefix-sync-recompute-49250": (75, {STABLE, IDENTICAL}),
    "vllm-prefix-sync-recompute-sharers-wait": (59, set()),
    "vllm-prefix-sync-fail-26813": (37, set()),
    "vllm-prefix-sync-fail-no-evict": (48, {IDENTICAL}),
    "vllm-prefix-async-recompute": (216, set()),
    "vllm-prefix-async-cached-at-alloc": (261, {STABLE, IDENTICAL}),
}


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_state_counts_and_verdicts_are_pinned(name):
    states, violated = CATALOGUE[name]
    rep = checked(name)
    assert builtin(name).protocol == "vllm-prefix-cache"
    assert rep.complete and rep.stats.states == states
    assert {c.claim for c in rep.claims if c.kind == "invariant" and c.verdict == "violated"} == violated
    assert all(c.matches for c in rep.claims)
    # no claim is vacuous: two requests hold the block at once, and a load of it fails, in every scenario
    reached = {c.claim for c in rep.claims if c.kind == "witness" and c.verdict == "reached"}
    assert {"sometimes_prefix_hit_served", "sometimes_shared_load_fails"} <= reached


@pytest.mark.parametrize("before,after", [
    ("vllm-prefix-sync-recompute-49250", "vllm-prefix-sync-recompute-sharers-wait"),
    ("vllm-prefix-sync-fail-no-evict", "vllm-prefix-sync-fail-26813"),
    ("vllm-prefix-async-cached-at-alloc", "vllm-prefix-async-recompute"),
])
def test_each_pair_differs_in_one_knob(before, after):
    a, b = builtin(before).config.engine, builtin(after).config.engine
    differ = {k for k in vars(a) if getattr(a, k) != getattr(b, k)}
    assert len(differ) == 1, differ


def _labels(spec, claim):
    m = Machine(spec)
    i = [c.name for c in m.claims].index(claim)
    ex = explore(m, claims=[i])
    return m, ex, i


def test_49250_the_sharer_reads_before_the_recompute():
    """The shortest wrong read: R0 allocates X, R1 hits it in the same schedule, the load fails,
    the recovery rewinds R0 only, and R1 commits on X before R0's recompute."""
    spec = builtin("vllm-prefix-sync-recompute-49250").build()
    m = Machine(spec)
    s = m.run("decode_schedule_new_request(req=R0)", "decode_schedule_new_request(req=R1)",
              "connector_get_block_ids_with_load_errors()", "decode_handle_invalid_blocks()")
    lay = spec.layout
    assert s[lay.slot("pfx", 0)] == RECOMPUTE and s[lay.slot("pfx", 1)] == COMPUTED
    assert s[lay.slot("x_ref")] == 2 and s[lay.slot("x_hash")] == 1  # not evicted under recompute
    assert m.claim_hits(STABLE, s)
    end = m.run("decode_update_from_output(req=R1)", state=s)
    assert m.claim_hits(IDENTICAL, end)
    # with the HYPOTHETICAL fix the sharer cannot run before the recompute
    fixed = Machine(builtin("vllm-prefix-sync-recompute-sharers-wait").build())
    t = fixed.run("decode_schedule_new_request(req=R0)", "decode_schedule_new_request(req=R1)",
                  "connector_get_block_ids_with_load_errors()", "decode_handle_invalid_blocks()")
    with pytest.raises(ValueError, match="not enabled"):
        fixed.run("decode_update_from_output(req=R1)", state=t)
    fixed.run("decode_execute_model_recompute(req=R0)", "decode_update_from_output(req=R1)", state=t)


def test_26813_eviction_makes_a_later_request_miss():
    for name, hash_after in (("vllm-prefix-sync-fail-26813", 0), ("vllm-prefix-sync-fail-no-evict", 1)):
        spec = builtin(name).build()
        m = Machine(spec)
        s = m.run("decode_schedule_new_request(req=R0)", "connector_get_block_ids_with_load_errors()",
                  "decode_handle_invalid_blocks()")
        assert s[spec.layout.slot("x_hash")] == hash_after
        assert s[spec.layout.slot("x_ref")] == 0  # the failed request freed its reference


class TouchCountedTwice(VllmPrefixCache):
    """A hit that ``touch``-es the block twice (``ref_cnt += 2``: it never returns to the free queue)."""

    def decode_schedule_new_request(self, s, n, r):
        o = s.ops
        hit = o.and_(o.eq(s.x_hash, 1), o.lt(s.x_ref, self.k.R - 1))
        super().decode_schedule_new_request(s, n, r)
        n.x_ref = o.ite(hit, o.add(s.x_ref, 2), n.x_ref)


class EvictsUnderHolder(VllmPrefixCache):
    """Eviction that ignores ``ref_cnt`` (takes a held block)."""

    def decode_get_new_blocks_evicts(self, s, n):
        s.require(s.ops.eq(s.x_hash, 1))
        n.x_hash = 0
        n.x_content = OTHER


class FinishKeepsRef(VllmPrefixCache):
    """``free_blocks`` forgotten when a request finishes (a leaked reference)."""

    def _release(self, s, n, r, when):
        return s.ops.const(False)


MUTANTS = [
    ("a hit counted twice", "vllm-prefix-sync-fail-26813", TouchCountedTwice, STABLE),
    ("eviction of a held block", "vllm-prefix-sync-fail-26813", EvictsUnderHolder, IDENTICAL),
    ("a leaked reference", "vllm-prefix-async-recompute", FinishKeepsRef, QUIESCENT),
]


@pytest.mark.parametrize("what,scenario,mutant,claim", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_mutant_changes_the_verdict(what, scenario, mutant, claim):
    sc = builtin(scenario)
    assert sc.expect[claim] == "verified"
    m, ex, i = _labels(sc.build(), claim)
    assert ex.complete and i not in ex.hit_at
    m, ex, i = _labels(mutant(sc.config), claim)
    assert ex.complete and i in ex.hit_at, f"mutant '{what}' survived"


def test_the_knobs_are_refused_where_they_mean_nothing():
    two = (Request("A"), Request("A"))
    with pytest.raises(ValueError, match="prefix_sharing"):
        VllmPd(Config(two, engine=Engine(prefix_sharing=True)))
    with pytest.raises(ValueError, match="prefix_sharing"):
        VllmPrefixCache(Config(two, engine=Engine()))
    assert any("prefix-sharing knob" in p for p in Engine(kv_load_failure_policy="recompute").problems())
    assert any("sharers_wait_for_recompute" in p
               for p in Engine(prefix_sharing=True, sharers_wait_for_recompute=True).problems())


def test_conform_refuses_the_model_only_spec_in_one_line():
    from kvproof.spec.vllm.conform.replay import ConformError, harness_for

    sc = builtin("vllm-prefix-sync-recompute-49250")
    with pytest.raises(ConformError, match="model-only"):
        harness_for(sc, sc.build())
