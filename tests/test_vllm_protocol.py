"""vLLM 0.33.0's PD protocol, pull and push mode (spec/vllm): its catalogue's state counts and verdicts,
mutants its claims must catch, its scenario tables, and its traces told in vLLM's terms."""

from pathlib import Path

import pytest

from kvproof.checker.cli import main
from kvproof.checker.explicit.search import explore
from kvproof.model.framework import action
from kvproof.model.machine import Machine
from kvproof.model.scenario import ScenarioError, builtin, builtin_names, parse_scenario
from kvproof.spec.vllm.config import Config, Engine, Request
from kvproof.spec.vllm.protocol import VllmPd
from kvproof.spec.vllm.state import (
    D_ENDED, D_HELD, D_READING, D_TRACKED, D_WAITING, OUT_ABORTED, OUT_ERROR, OUT_SUCCESS, P_HELD, P_SENT, RD_DONE, RD_FAILED,
    RD_POSTED, RD_RETAINED, RD_TAKEN, READ_FOREIGN, READ_OWN, WN_FAIL,
)

from .conftest import checked

TRACES = Path(__file__).resolve().parents[1] / "traces"
ISOLATION = {"decode_reads_only_own_pages", "no_cross_tenant_read"}

# scenario: (distinct states, the invariants it violates)
CATALOGUE = {
    "vllm-pull-ttl-expiry": (606, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-lease-outlasts-read": (546, set()),
    "vllm-pull-lease-equals-read": (725, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-heartbeat-stall": (2050, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-heartbeat": (221, set()),
    "vllm-pull-abort-before-32255": (2987, ISOLATION | {"no_write_after_release"}),
    "vllm-pull-abort-32255": (2217, set()),
    "vllm-pull-abort-finished-before-25067": (2539, ISOLATION | {"no_source_free_while_read"}),
    "vllm-push-lease-expiry-stall": (1656, ISOLATION | {"no_source_free_while_read"}),
    "vllm-push-heartbeat": (197, set()),
    "vllm-push-abort-unanswered": (2630, {"no_source_free_while_read", "quiescent_holds_nothing"}),
    "vllm-push-write-post-fails": (1361, set()),
    "vllm-push-write-post-fails-50754": (2748, set()),
    "vllm-pull-replayed-params": (11612, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-replayed-params-refused": (689, set()),
    "vllm-push-deferred-write": (4698, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-reject-before-41269": (21, {"quiescent_holds_nothing"}),
    "vllm-pull-reject-41269": (34, set()),
    "vllm-pull-async-before-45357": (869, ISOLATION | {"no_write_after_release"}),
    "vllm-pull-async-45357": (293, set()),
    "vllm-push-prefix-hit-before-48758": (119, {"decode_reads_only_own_pages"}),
    "vllm-push-prefix-hit-48758": (119, set()),
    "vllm-pull-reject-lease-41269": (729, set()),
    "vllm-push-reject": (23, {"quiescent_holds_nothing"}),
    "vllm-push-reject-lease": (271, set()),
    "vllm-pull-full-hit-before-56640": (10, {"quiescent_holds_nothing"}),
    "vllm-pull-full-hit-56640": (206, set()),
    "vllm-pull-mla-notif-before-36958": (15, {"quiescent_holds_nothing"}),
    "vllm-pull-mla-notif-36958": (30, set()),
    "vllm-pull-reaper-before-58222": (11327, {"no_source_free_while_read", "quiescent_holds_nothing"}),
    "vllm-pull-reaper-58222": (12487, {"no_source_free_while_read", "quiescent_holds_nothing"}),
    "vllm-pull-turn2-before-47021": (747, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-turn2-47021": (395, set()),
    "vllm-pull-turn2-slow-read-47021": (1642, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-turn2-clock-offset-47021": (1151, ISOLATION | {"no_source_free_while_read"}),
    "vllm-pull-sibling-read-before-56104": (29153, ISOLATION | {"no_write_after_release", "no_source_free_while_read"}),
    "vllm-pull-sibling-read-56104": (14885, set()),
    "vllm-pull-reregistered-no-generation-check": (446, {"decode_reads_only_own_pages"}),
    "vllm-pull-reregistered-generation-check": (446, set()),
    "vllm-pull-sibling-post-fails-before-56104": (26435, ISOLATION | {"no_write_after_release",
                                                                     "no_source_free_while_read"}),
    "vllm-pull-sibling-post-fails-56104": (9427, set()),
    "vllm-pull-appended-token-prefix-hit": (149, {"decode_reads_only_own_pages"}),  # V11 pull (#50558), as shipped
    "vllm-pull-appended-token-capped": (149, set()),  # its HYPOTHETICAL fix
    "vllm-pull-release-fails-drop-handle": (2463, ISOLATION | {"no_write_after_release",
                                                               "no_source_free_while_read"}),
    "vllm-pull-release-fails-retain-handle": (1686, set()),
    # ttl-expiry and push lease-expiry-stall with scenario-chosen request ids: the same counts
    "vllm-pull-chosen-ids": (606, ISOLATION | {"no_source_free_while_read"}),
    "vllm-push-chosen-ids": (1656, ISOLATION | {"no_source_free_while_read"}),
}
HELD_FOREVER = {"vllm-push-abort-unanswered", "vllm-pull-reject-before-41269", "vllm-push-reject",
                "vllm-push-write-post-fails", "vllm-pull-full-hit-before-56640",
                "vllm-pull-mla-notif-before-36958", "vllm-pull-reaper-before-58222",
                "vllm-pull-reaper-58222"}  # V5, V12, V6, V13, V16, a hung READ (V2's pair): liveness violated
REAPER = {"vllm-pull-reaper-before-58222": "violated", "vllm-pull-reaper-58222": "verified"}  # V2
BENIGN_LEASE = ["vllm-pull-lease-outlasts-read", "vllm-pull-heartbeat", "vllm-push-heartbeat",
                "vllm-pull-reject-lease-41269"]  # V1 / V7 closed


def test_the_catalogue_lists_the_vllm_scenarios_after_sglangs():
    names = builtin_names()
    vllm = [n for n in names if builtin(n).family == "vllm"]
    sglang = [n for n in names if builtin(n).family == "sglang"]
    assert names[:len(sglang)] == sglang  # SGLang's first, then vLLM's in one run, then the other families'
    assert names[len(sglang):len(sglang) + len(vllm)] == vllm
    # the specs vllm-prefix-cache's and vllm-multi-connector's scenarios are pinned in
    # tests/test_vllm_prefix_cache.py and tests/test_vllm_multi_connector.py
    assert [n for n in vllm if builtin(n).protocol == "vllm"] == list(CATALOGUE)
    assert {builtin(n).protocol for n in vllm} == {"vllm", "vllm-prefix-cache", "vllm-multi-connector"}


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_state_counts_and_verdicts_are_pinned(name):
    states, violated = CATALOGUE[name]
    rep = checked(name)
    assert rep.complete and rep.stats.states == states
    assert states < 50_000
    assert {c.claim for c in rep.claims if c.kind == "invariant" and c.verdict == "violated"} == violated
    assert all(c.matches for c in rep.claims)
    assert all(c.verdict == "reached" for c in rep.claims if c.kind == "witness" and c.expected == "reached")
    live = {c.claim: c.verdict for c in rep.claims if c.kind == "liveness"}
    if builtin(name).config.engine.decode_may_stall:  # may stall forever: weak fairness cannot promise progress
        assert live == {}
    else:  # V5: the aborted push load is held forever, V12 before #41269 the rejected one, V6 the half-written one; everything else ends
        bad = "violated" if name in HELD_FOREVER else "verified"
        want = {"held_pages_are_released": bad, "requests_end": bad}
        if name in REAPER:
            want["expired_leases_are_reaped"] = REAPER[name]
        assert live == want


def test_every_verified_scenario_exercises_reads_and_reuse():
    for name in CATALOGUE:
        got = {c.claim: c.verdict for c in checked(name).claims}
        # V13 before #56640: R0 is parked forever and R1 never gets decode's only block
        served = "unreachable" if name == "vllm-pull-full-hit-before-56640" else "reached"
        assert got["sometimes_request_succeeds"] == served, name
    for name in BENIGN_LEASE:
        got = {c.claim: c.verdict for c in checked(name).claims}
        assert got["sometimes_source_block_reused"] == "reached", name
        assert got["sometimes_lease_expires_before_read"] == "unreachable", name


# scenario pair: (before the fix, with it, the witness only the hazard reaches)
PAIRS = [("vllm-pull-reject-before-41269", "vllm-pull-reject-41269", "sometimes_rejection_frees_prefill", False),
         ("vllm-pull-async-before-45357", "vllm-pull-async-45357", "sometimes_block_reused_under_gpu_step", True),
         ("vllm-push-prefix-hit-before-48758", "vllm-push-prefix-hit-48758", "sometimes_suffix_slot_gets_prefix", True),
         ("vllm-pull-full-hit-before-56640", "vllm-pull-full-hit-56640", "sometimes_full_hit_served", False),
         ("vllm-pull-mla-notif-before-36958", "vllm-pull-mla-notif-36958", "sometimes_mla_notif_unrecognized", True),
         ("vllm-pull-sibling-read-before-56104", "vllm-pull-sibling-read-56104", "sometimes_failed_under_sibling_read",
          True),
         ("vllm-pull-reregistered-no-generation-check", "vllm-pull-reregistered-generation-check",
          "sometimes_read_through_stale_registration", True),
         ("vllm-pull-sibling-post-fails-before-56104", "vllm-pull-sibling-post-fails-56104",
          "sometimes_failed_under_sibling_read", True),
         ("vllm-pull-appended-token-prefix-hit", "vllm-pull-appended-token-capped", "sometimes_suffix_slot_gets_prefix",
          True),
         ("vllm-pull-release-fails-drop-handle", "vllm-pull-release-fails-retain-handle",
          "sometimes_failed_under_unreleased_read", True)]


@pytest.mark.parametrize("before,after,witness,hazard_reaches", PAIRS, ids=[p[0] for p in PAIRS])
def test_each_scheduler_side_pair_differs_only_in_the_fix(before, after, witness, hazard_reaches):
    """V12, V15, V11: the two scenarios differ in one knob, the fix; the hazard's witness is
    reached on one side only (V12: the fix's witness, freeing on the notification, only with
    it), and the fix's own witness keeps its pass from being vacuous."""
    a, b = builtin(before), builtin(after)
    da, db = a.config.engine.__dict__, b.config.engine.__dict__
    assert [k for k in da if da[k] != db[k]] in (["reject_notifies_prefill"], ["defer_block_free"], ["prefix_end_trim"],
                                                 ["report_notify_only_recv"], ["mla_notif_remote_id"],
                                                 ["failure_waits_for_siblings"], ["registration_generation_check"],
                                                 ["remote_token_cap"],  # V11 pull: a HYPOTHETICAL fix
                                                 ["retains_unreleased_handle"])
    assert a.config.requests == b.config.requests
    got_a = {c.claim: c.verdict for c in checked(before).claims}
    got_b = {c.claim: c.verdict for c in checked(after).claims}
    assert got_a[witness] == ("reached" if hazard_reaches else "unreachable")
    assert got_b[witness] == ("unreachable" if hazard_reaches else "reached")
    for name in ("sometimes_request_rejected", "sometimes_finished_under_gpu_step", "sometimes_read_fails",
                 "sometimes_failed_load_waits_for_sibling", "sometimes_load_fails",
                 "sometimes_reregistered_request_served", "sometimes_read_post_fails", "sometimes_release_fails",
                 "sometimes_failed_load_waits_for_release"):
        if name in got_a:
            assert got_a[name] == got_b[name] == "reached"


# -- mutants: a broken engine must change a verdict ------------------------------------------------
class HeartbeatDoesNotExtend(VllmPd):
    """Decode sends heartbeats but prefill's ``_handle_heartbeat`` never extends a lease."""

    def decode_send_heartbeats(self, s, n):
        o = s.ops
        s.require(self._running(s))
        s.require(o.eq(s.hb_age, self.k.I))
        s.require(o.any_(o.is_in(s.d_phase[r], D_TRACKED) for r in self.reqs))
        n.hb_age = 0


class NotifyAtPost(VllmPd):
    """The completion notification is sent when the READ is posted (a notify-only message),
    not carried by the READ after its data moved."""

    def decode_start_load_kv(self, s, n, r):
        super().decode_start_load_kv(s, n, r)
        n.notif[r] = 1


class FreeAbortedLoadAtOnce(VllmPd):
    """#32255 reverted in code while the flag says it is on."""

    def decode_abort(self, s, n, r):
        o = s.ops
        s.require(o.is_in(s.d_phase[r], D_TRACKED))
        s.require(self._running(s))
        n.outcome[r] = OUT_ABORTED
        n.d_phase[r] = D_ENDED
        self._free(s, n, r, "owner", "dest")


class PushFreesAtPost(VllmPd):
    """Push: prefill reports ``finished_sending`` as soon as its WRITE is posted, not when the
    WRITE handle is done."""

    def prefill_push_write(self, s, n, r):
        super().prefill_push_write(s, n, r)
        n.p_phase[r] = P_SENT
        n.lease[r] = 0
        self._free(s, n, r, "src_owner", "src")


class RejectionTellsNobody(VllmPd):
    """#41269's flag on, but the rejected request's notify-only notification is never sent."""

    def decode_reject_request(self, s, n, r):
        super().decode_reject_request(s, n, r)
        n.notif[r] = 0


class FenceMissesStepNPlus1(VllmPd):
    """#45357's flag on, but the finished request's block goes back to the pool at once (the
    fence does not wait for the step in flight)."""

    def decode_finished_recving(self, s, n, r):
        o = s.ops
        s.require(o.eq(s.rd[r], RD_DONE))
        s.require(o.is_in(s.d_phase[r], (D_READING, D_HELD)))
        s.require(self._running(s))
        loading = o.eq(s.d_phase[r], D_READING)
        n.outcome[r] = o.ite(loading, OUT_SUCCESS, s.outcome[r])
        n.read[r] = o.ite(loading, self._classify(s, r), s.read[r])
        n.d_phase[r] = D_ENDED
        n.inflight[r] = o.ite(loading, 1, s.inflight[r])
        self._free(s, n, r, "owner", "dest")


class PairsFromTheFront(VllmPd):
    """#48758's flag on, but the transfer pairs prefill's prefix block with decode's slot."""

    def _move_data(self, s, n, r):
        o = s.ops
        s.require(o.eq(s.rd[r], RD_POSTED))
        n.rd[r] = RD_TAKEN
        n.content[s.dest[r]] = s.src_content[s.src_prefix[r]]
class CountsOneNotification(VllmPd):
    """Push with per-rank WRITEs: decode finishes the load on the first notification, whatever
    ``pp_size * producers_per_consumer`` says."""

    def decode_get_new_notifs(self, s, n, r, w):
        super().decode_get_new_notifs(s, n, r, w)
        o = s.ops
        served = o.eq(s.d_phase[r], D_READING)
        n.outcome[r] = o.ite(served, OUT_SUCCESS, s.outcome[r])
        n.read[r] = o.ite(served, self._classify(s, r), s.read[r])
        n.d_phase[r] = D_ENDED
        self._free(s, n, r, "owner", "dest")


class PushFailEndsAtOnce(VllmPd):
    """Hypothetical #50754 done differently: a PUSH_FAIL fails the load at once, without waiting
    for the sibling ranks' WRITEs."""

    def decode_get_new_notifs(self, s, n, r, w):
        super().decode_get_new_notifs(s, n, r, w)
        o = s.ops
        fail = o.eq(s.wnotif[r, w], WN_FAIL)
        n.d_phase[r] = o.ite(fail, D_ENDED, n.d_phase[r])
        self._free(s, n, r, "owner", "dest", when=fail)


class RefusesOnlyConsumedReferences(VllmPd):
    """The fail-closed V9 fix done halfway: decode refuses a reference only once the request that
    first carried it ended (a concurrent replay gets through)."""

    def _reference_admitted(self, s, r):
        o = s.ops
        t = self.k.origin[r]
        return o.any_(o.eq(s.d_phase[x], D_ENDED) for x in self.reqs if x != r and self.k.origin[x] == t)


class NotifyOnlyNotReported(VllmPd):
    """#56640's flag on, but the notify-only path records the load only for a request the
    scheduler did not park (``awaiting_kvs`` gating inverted): a parked full hit is never reported."""

    def decode_read_blocks_notify_only(self, s, n, r):
        super().decode_read_blocks_notify_only(s, n, r)
        n.rd[r] = s.rd[r]



class MlaRankCountsTwo(VllmPd):
    """#36958's id, but the notify-only notification carries a consumer count of 2 for one decode
    rank (an ``expected_consumers`` mismatch, V16): rank 1 counts 1 of 2 and never reports."""

    def prefill_get_new_notifs_mla_rank(self, s, n, r):
        s.require(s.ops.eq(s.mla_notif[r], 1))
        n.mla_notif[r] = 0


class Turn2NeverDeclines(VllmPd):
    """#47021's flag on, but ``_is_turn2_read_expired`` never fires."""

    def _turn2_read_expired(self, s, r):
        return s.ops.const(False)


class Turn2DeclineKeepsBlock(VllmPd):
    """A declined turn-2 READ ends the request but keeps its block."""

    def decode_decline_turn2_read(self, s, n, r):
        super().decode_decline_turn2_read(s, n, r)
        n.owner[s.dest[r]] = s.owner[s.dest[r]]
class FailsBeforeSiblingsStop(VllmPd):
    """V8's fix done halfway: decode reports a failed READ at once unless the failed handle is
    the last one posted (it waits for earlier siblings only), so a failure of rank w0 is
    reported while rank w1's READ still writes."""

    @action("decode", "req", fair=True)
    def decode_pop_done_transfers(self, s, n, r):
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.d_phase[r], D_READING))
        xs = [s.wr[r, w] for w in range(self.k.F)]
        ok = o.all_(o.eq(x, RD_DONE) for x in xs)
        failed = o.and_(o.eq(xs[0], RD_FAILED), *[o.ne(x, RD_TAKEN) for x in xs[1:]])
        s.require(o.or_(ok, failed))
        n.outcome[r] = o.ite(ok, OUT_SUCCESS, OUT_ERROR)
        n.read[r] = o.ite(ok, self._classify(s, r), s.read[r])
        n.d_phase[r] = D_ENDED
        self._free(s, n, r, "owner", "dest")


class ReportsUnreleasedFailure(VllmPd):
    """V8's third path done halfway: ``_pop_done_transfers`` retains a handle whose release
    failed, but the failure is reported once no handle is in progress (``PROC``), as if a
    retained error handle had stopped: the failure is reported while its DMA may still land."""

    @action("decode", "req", fair=True)
    def decode_pop_done_transfers(self, s, n, r):
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.d_phase[r], D_READING))
        s.require(self._running(s))
        xs = [s.wr[r, w] for w in range(self.k.F)]
        ok = o.all_(o.eq(x, RD_DONE) for x in xs)
        failed = o.and_(o.any_(o.is_in(x, (RD_FAILED, RD_RETAINED)) for x in xs),
                        o.all_(o.is_in(x, (RD_DONE, RD_FAILED, RD_RETAINED)) for x in xs))
        s.require(o.or_(ok, failed))
        n.outcome[r] = o.ite(ok, OUT_SUCCESS, OUT_ERROR)
        n.read[r] = o.ite(ok, self._classify(s, r), s.read[r])
        n.d_phase[r] = D_ENDED
        self._free(s, n, r, "owner", "dest")


class ChecksOnlyOnFirstContact(VllmPd):
    """V17's check done halfway: decode handshakes with prefill once and never compares the
    registration generation again (the cached descriptors are kept after a re-registration)."""

    @action("decode", "req", fair=True)
    def decode_read_blocks_for_req(self, s, n, r):
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.d_phase[r], D_WAITING))
        n.d_phase[r] = D_READING
        for w in range(self.k.F):
            n.wr[r, w] = RD_POSTED
        loaded = o.ite(o.eq(s.d_gen, 0), s.p_gen, o.add(s.d_gen, -1))
        n.d_gen = o.add(loaded, 1)
        n.rgen[r] = loaded


MUTANTS = [
    ("heartbeat does not extend the lease", "vllm-pull-heartbeat", HeartbeatDoesNotExtend, "no_source_free_while_read"),
    ("notification before the data moved", "vllm-pull-lease-outlasts-read", NotifyAtPost, "no_source_free_while_read"),
    ("aborted load freed at once", "vllm-pull-abort-32255", FreeAbortedLoadAtOnce, "no_write_after_release"),
    ("push: heartbeat does not extend the lease", "vllm-push-heartbeat", HeartbeatDoesNotExtend,
     "no_source_free_while_read"),
    ("push: source freed when the WRITE is posted", "vllm-push-heartbeat", PushFreesAtPost, "no_source_free_while_read"),
    ("V12: rejection tells nobody", "vllm-pull-reject-41269", RejectionTellsNobody, "quiescent_holds_nothing"),
    ("V15: fence misses step N+1", "vllm-pull-async-45357", FenceMissesStepNPlus1, "no_write_after_release"),
    ("V11: blocks paired from the front", "vllm-push-prefix-hit-48758", PairsFromTheFront, "decode_reads_only_own_pages"),
    ("V11 pull: the capped count still pairs the prefix", "vllm-pull-appended-token-capped", PairsFromTheFront,
     "decode_reads_only_own_pages"),
    ("push fan-in: decode counts one notification", "vllm-push-write-post-fails", CountsOneNotification,
     "decode_reads_only_own_pages"),
    ("#50754: PUSH_FAIL frees the block under a sibling WRITE", "vllm-push-write-post-fails-50754",
     PushFailEndsAtOnce, "no_write_after_release"),
    ("V14: the turn-2 check never declines", "vllm-pull-turn2-47021", Turn2NeverDeclines, "no_cross_tenant_read"),
    ("V14: a declined READ keeps its block", "vllm-pull-turn2-47021", Turn2DeclineKeepsBlock, "pages_conserved"),
    ("V9 fix refusing only consumed references", "vllm-pull-replayed-params-refused", RefusesOnlyConsumedReferences,
     "no_cross_tenant_read"),
    ("V13: the parked full hit is not reported", "vllm-pull-full-hit-56640", NotifyOnlyNotReported,
     "quiescent_holds_nothing"),
    ("V16: rank 1 expects two notifications", "vllm-pull-mla-notif-36958", MlaRankCountsTwo, "quiescent_holds_nothing"),
    ("V8: failure reported before a sibling READ stopped", "vllm-pull-sibling-read-56104", FailsBeforeSiblingsStop,
     "no_write_after_release"),
    ("V17: registration checked on first contact only", "vllm-pull-reregistered-generation-check",
     ChecksOnlyOnFirstContact, "decode_reads_only_own_pages"),
    ("V8: a failure reported with an unreleased handle retained", "vllm-pull-release-fails-retain-handle",
     ReportsUnreleasedFailure, "no_write_after_release"),
]


def _hits(spec, claim):
    m = Machine(spec)
    i = [c.name for c in m.claims].index(claim)
    ex = explore(m, claims=[i])
    return ex.complete, i in ex.hit_at


@pytest.mark.parametrize("what,scenario,mutant,claim", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_mutant_changes_the_verdict(what, scenario, mutant, claim):
    sc = builtin(scenario)
    assert sc.expect[claim] == "verified"
    assert _hits(sc.build(), claim) == (True, False)
    assert _hits(mutant(sc.config), claim) == (True, True), f"mutant '{what}' survived"


# -- the model's own promises -------------------------------------------------------------------------
def test_a_late_notification_is_seen_on_prefill_and_changes_nothing_on_decode():
    spec = builtin("vllm-pull-ttl-expiry").build()
    m = Machine(spec)
    labels = ["prefill_request_finished(req=R0)", "clock_tick()", "prefill_reap_expired_lease(req=R0)",
              "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)", "nixl_read_take_data(req=R0)",
              "nixl_read_complete(req=R0)"]
    before = m.run(*labels)
    after = m.run("prefill_get_new_notifs(req=R0)", state=before)
    changed = {f.name for f in spec.layout.fields
               if any(before[spec.layout.slot(f.name, *i)] != after[spec.layout.slot(f.name, *i)] for i in _idx(f))}
    assert changed == {"notif", "late"}


def _idx(f):
    if not f.dims:
        return [()]
    if len(f.dims) == 1:
        return [(i,) for i in range(f.dims[0].size)]
    raise AssertionError(f.name)


def test_the_read_takes_the_source_as_it_is_when_the_data_moves():
    spec = builtin("vllm-pull-ttl-expiry").build()
    m = Machine(spec)
    s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)",
              "clock_tick()", "prefill_reap_expired_lease(req=R0)", "prefill_request_finished(req=R1)")
    assert s[spec.layout.slot("rd", 0)] == RD_POSTED
    s = m.run("nixl_read_take_data(req=R0)", state=s)
    assert s[spec.layout.slot("content", 0)] == 2  # R1's KV in R0's destination block p0


# -- scenario tables ----------------------------------------------------------------------------------
GOOD = {"name": "x", "protocol": "vllm", "sizes": {"prefill_blocks": 1, "decode_blocks": 2},
        "requests": [{"tenant": "A"}]}


def test_the_tables_round_trip_through_a_trace():
    for name in CATALOGUE:
        sc = builtin(name)
        again = parse_scenario(sc.to_data(), "t")
        assert again.config == sc.config and again.family == "vllm"


@pytest.mark.parametrize("patch,message", [
    ({"sizes": {"prefill_blocks": 0, "decode_blocks": 2}}, "x.toml: [sizes].prefill_blocks: expected a whole number in 1..4, got 0"),
    ({"requests": [{"tenant": "A", "pages": 2}]}, "x.toml: requests[0]: expected a table with exactly tenant"),
    ({"engine": {"kv_lease_duration": 0}}, "x.toml: [engine].kv_lease_duration: expected a whole number of ticks in 1..6, got 0"),
    ({"engine": {"heartbeat_interval": "never"}}, "x.toml: [engine].heartbeat_interval: expected a whole number of ticks in 1..6 or \"none\""),
    ({"engine": {"decode_may_stall": 1}}, "x.toml: [engine].decode_may_stall: expected true or false, got 1"),
    ({"engine": {"lease": 3}}, "x.toml: [engine].lease: expected one of mode, kv_lease_duration"),
    ({"engine": {"mode": "both"}}, "x.toml: [engine].mode: expected one of pull, push, got 'both'"),
    ({"engine": {"write_fan_in": 4}}, "x.toml: [engine].write_fan_in: expected a whole number in 1..3, got 4"),
])
def test_bad_tables_are_one_line(patch, message):
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**GOOD, **patch}, "x.toml")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_knobs_default_to_0_33_0_as_shipped():
    sc = parse_scenario(GOOD, "x.toml")
    assert sc.config == Config((Request("A"),), 1, 2, Engine())
    assert sc.config.engine.heartbeat_interval == 1 and sc.config.engine.delay_free_aborted_load


# -- traces in vLLM's terms -----------------------------------------------------------------------------
def test_push_decode_finishes_the_load_on_the_writes_notification_only():
    spec = builtin("vllm-push-heartbeat").build()
    m = Machine(spec)
    s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_send_push_reg(req=R0)",
              "prefill_push_write(req=R0)", "nixl_write_land(req=R0)")
    assert m.step(s, _aid(m, "decode_finished_recving(req=R0)")) is None
    s = m.run("nixl_write_complete(req=R0)", "decode_finished_recving(req=R0)", state=s)
    assert s[spec.layout.slot("read", 0)] == READ_OWN and s[spec.layout.slot("notif", 0)] == 0  # own KV, count consumed


def test_push_abort_holds_the_block_before_push_reg_and_the_registration_still_goes_out():
    """0.33.0 (found by kvproof conform): an aborted push load is held until finished_recving
    whether or not its PUSH_REG went out; the worker sends the registration all the same."""
    spec = builtin("vllm-push-abort-unanswered").build()
    m = Machine(spec)
    s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_abort(req=R0)")
    assert s[spec.layout.slot("owner", s[spec.layout.slot("dest", 0)])] == 1  # still R0's
    s = m.run("decode_send_push_reg(req=R0)", "prefill_push_write(req=R0)", "nixl_write_land(req=R0)",
              "nixl_write_complete(req=R0)", "decode_finished_recving(req=R0)", state=s)
    assert s[spec.layout.slot("d_phase", 0)] == D_ENDED and s[spec.layout.slot("owner", 0)] == 0


def test_push_write_done_after_the_lease_ran_out_is_reaped_not_sent():
    """0.33.0 (found by kvproof conform): get_transfer_results reaps an expired lease before it
    polls the WRITE handles, so only the reap is enabled once the lease is 0."""
    spec = builtin("vllm-push-heartbeat").build()
    m = Machine(spec)
    s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_send_push_reg(req=R0)",
              "prefill_push_write(req=R0)", "nixl_write_land(req=R0)", "nixl_write_complete(req=R0)")
    assert m.step(s, _aid(m, "prefill_get_transfer_results(req=R0)")) is not None  # lease running: sent
    s = m.run("decode_finished_recving(req=R0)", "clock_tick()", "clock_tick()", "clock_tick()", state=s)
    assert s[spec.layout.slot("lease", 0)] == 0
    assert m.step(s, _aid(m, "prefill_get_transfer_results(req=R0)")) is None
    assert m.step(s, _aid(m, "prefill_reap_expired_lease(req=R0)")) is not None


def test_v6_one_rank_fails_decode_counts_one_of_two_and_heartbeats_keep_both_blocks():
    """0.33.0: rank w0's WRITE lands and is counted, rank w1's post fails and sends nothing:
    decode holds the half-written block at 1 of 2, keeps heartbeating, and prefill's lease never
    runs out; with #50754 (hypothetical) w1's PUSH_FAIL completes the count as a failure."""
    head = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_send_push_reg(req=R0)",
            "prefill_xfer_blocks(req=R0, wrank=w0)", "prefill_xfer_blocks_fails(req=R0, wrank=w1)",
            "nixl_write_land_part(req=R0, wrank=w0)", "nixl_write_complete_part(req=R0, wrank=w0)",
            "decode_get_new_notifs(req=R0, wrank=w0)"]
    spec = builtin("vllm-push-write-post-fails").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run(*head)
    assert s[g("counted", 0)] == 1 and s[g("d_phase", 0)] == D_READING and s[g("wr", 0, 1)] == RD_FAILED
    assert s[g("content", 0, 0)] == 1 and s[g("content", 1, 0)] == 0  # half written: w0's part is R0's
    for _ in range(4):
        s = m.run("clock_tick()", "decode_send_heartbeats()", state=s)
    assert s[g("lease", 0)] > 0 and s[g("p_phase", 0)] == P_HELD and s[g("owner", 0)] == 1
    assert not any(m.label(a).startswith("decode_get_new_notifs") for a in range(len(m.instances))
                   if m.step(s, a) is not None)
    spec = builtin("vllm-push-write-post-fails-50754").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run(*head)
    assert s[g("wnotif", 0, 1)] == WN_FAIL
    s = m.run("decode_get_new_notifs(req=R0, wrank=w1)", state=s)
    assert s[g("d_phase", 0)] == D_ENDED and s[g("outcome", 0)] == OUT_ERROR and s[g("owner", 0)] == 0


def test_v9_a_replay_shares_its_references_heartbeat_and_its_notification():
    """0.33.0: R2 carries R0's kv_transfer_params.  Its READ's notification names R0, so prefill
    frees R0's block while R0's own READ is still posted; and when R2 ends, decode's
    _stop_heartbeat discards R0's id from the heartbeat set although R0 still loads."""
    spec = builtin("vllm-pull-replayed-params").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_on_new_request(req=R2)",
              "decode_start_load_kv(req=R0)", "decode_start_load_kv(req=R2)", "nixl_read_take_data(req=R2)",
              "nixl_read_complete(req=R2)", "decode_finished_recving(req=R2)")
    assert s[g("read", 2)] == READ_OWN and s[g("hb_set", 0)] == 0 and s[g("d_phase", 0)] == D_READING
    assert m.step(s, _aid(m, "decode_send_heartbeats()")) is None  # R0 loads, but no HB names it
    s = m.run("prefill_get_new_notifs(req=R2)", state=s)
    assert s[g("p_phase", 0)] == P_SENT and s[g("src_owner", 0)] == 0 and s[g("rd", 0)] == RD_POSTED


def test_show_tells_the_replayed_reference(capsys):
    code = main(["show", str(TRACES / "vllm-pull-replayed-params__no_cross_tenant_read.itf.json")])
    out = capsys.readouterr().out
    assert code == 0 and "the READ for R2 (carrying R0's kv_transfer_params) takes q0, which R0 no longer holds: it " \
        "holds R1's KV (tenant B)" in out and "decode runs R2 (tenant A)" in out


def test_a_replay_must_name_an_earlier_request():
    with pytest.raises(ScenarioError, match=r"requests\[1\].replays: expected the index of an earlier request"):
        parse_scenario({**GOOD, "requests": [{"tenant": "A"}, {"tenant": "A", "replays": 1}]}, "x.toml")


def test_v7_deferred_it_is_the_deferral_that_breaks_isolation():
    """The same instance with the handshake always ready (no deferral) verifies every invariant:
    the WRITE is bounded below the lease, so only the deferred WRITE, posted after the lease
    was reaped, carries tenant B's KV."""
    from dataclasses import replace

    sc = builtin("vllm-push-deferred-write")
    assert _hits(sc.build(), "no_cross_tenant_read") == (True, True)
    ready = VllmPd(replace(sc.config, engine=replace(sc.config.engine, push_handshake_may_defer=False)))
    for claim in ISOLATION | {"no_source_free_while_read"}:
        assert _hits(ready, claim) == (True, False), claim


def test_show_tells_the_deferred_write(capsys):
    code = main(["show", str(TRACES / "vllm-push-deferred-write__no_cross_tenant_read.itf.json")])
    out = capsys.readouterr().out
    assert code == 0 and "R0's WRITE waits in _deferred_push_inbox" in out
    assert "posts R0's deferred WRITE of q0 after R0's lease was reaped: nothing checks it (#55470)" in out


def test_show_tells_the_failed_post(capsys):
    code = main(["show", str(TRACES / "vllm-push-write-post-fails__requests_end.itf.json")])
    out = capsys.readouterr().out
    assert code == 0 and '"Push WRITE submission failed; releasing handle"' in out
    assert "whose count cannot complete (V6)" in out and "requests_end fails" in out


def _aid(m, label):
    return next(i for i in range(len(m.instances)) if m.label(i) == label)


def test_show_tells_the_lease_expiry_in_vllms_words(capsys):
    code = main(["show", str(TRACES / "vllm-pull-heartbeat-stall__no_cross_tenant_read.itf.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "decode_stall()" in out and "prefill_reap_expired_lease(req=R0)" in out
    assert '"Releasing expired KV blocks for request R0"' in out and "decode is not told" in out
    assert "the READ for R0 takes q0, which R0 no longer holds: it holds R1's KV (tenant B)" in out
    assert "served with HTTP 200" in out and "no_cross_tenant_read fails after step 13" in out


def test_show_tells_the_push_write_outstanding_at_expiry(capsys):
    code = main(["show", str(TRACES / "vllm-push-lease-expiry-stall__no_cross_tenant_read.itf.json")])
    out = capsys.readouterr().out
    assert code == 0 and "decode_send_push_reg(req=R0)" in out and "prefill_push_write(req=R0)" in out
    assert "the WRITE for R0 takes q0, which R0 no longer holds: it holds R1's KV (tenant B)" in out


def test_a_bad_vllm_scenario_file_is_one_line_with_exit_3(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprotocol = "vllm"\n[sizes]\nprefill_blocks = 1\ndecode_blocks = 1\n'
                   '[[requests]]\ntenant = "A"\n[engine]\nmode = "both"\n')
    code = main(["check", str(bad), "--no-traces"])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and "[engine].mode: expected one of pull, push, got 'both'" in err
    good = tmp_path / "good.toml"
    good.write_text(bad.read_text().replace('mode = "both"', 'mode = "push"'))
    # it names no claim in [expect]: refused, in one line
    assert main(["check", str(good), "--no-traces"]) == 3
    assert "[expect].decode_reads_only_own_pages: missing" in capsys.readouterr().err
    # with the default: the router's delay unbounded, the lease expires before decode takes the request (V1),
    # so the invariants the file expects "verified" are violated: exit 1
    good.write_text(good.read_text() + '[expect]\ndefault = "verified"\n')
    assert main(["check", str(good), "--no-traces", "--quiet"]) == 1
    good.write_text(good.read_text().replace("[expect]", "arrival_latency_bound = 0\nread_latency_bound = 1\n[expect]"))
    assert main(["check", str(good), "--no-traces", "--quiet"]) == 0


# -- the scheduler's side (V12, V15, V11) ------------------------------------------------------------------
def test_a_rejection_frees_prefill_on_its_notification_only_with_41269():
    for name, freed in (("vllm-pull-reject-41269", True), ("vllm-pull-reject-before-41269", False)):
        spec = builtin(name).build()
        m = Machine(spec)
        s = m.run("prefill_request_finished(req=R0)", "decode_reject_request(req=R0)")
        assert s[spec.layout.slot("dest", 0)] == spec.k.D and s[spec.layout.slot("outcome", 0)] == OUT_ABORTED
        step = m.step(s, _aid(m, "prefill_get_new_notifs(req=R0)"))
        assert (step is not None) == freed, name
        if freed:
            assert step[spec.layout.slot("p_phase", 0)] == P_SENT and step[spec.layout.slot("src_owner", 0)] == 0
            assert step[spec.layout.slot("late", 0)] == 0
        else:  # nothing can free q0 (the timeout is beyond the horizon): R1 is never prefilled
            assert s[spec.layout.slot("p_phase", 0)] == P_HELD
            assert [m.label(a) for a in range(len(m.instances)) if m.step(s, a) is not None] == []


def test_async_scheduling_defers_the_free_until_step_n_plus_1_is_processed():
    spec = builtin("vllm-pull-async-45357").build()
    m = Machine(spec)
    s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)",
              "nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)", "decode_finished_recving(req=R0)")
    lay = spec.layout
    assert s[lay.slot("d_phase", 0)] == D_ENDED and s[lay.slot("owner", 0)] == 1 and s[lay.slot("inflight", 0)] == 1
    s = m.run("decode_update_from_output(req=R0)", state=s)
    assert s[lay.slot("owner", 0)] == 0 and s[lay.slot("content", 0)] == 1  # R0's own late write, then freed


def test_the_suffix_slot_gets_the_prefix_when_paired_from_the_front():
    for name, read in (("vllm-push-prefix-hit-48758", READ_OWN), ("vllm-push-prefix-hit-before-48758", READ_FOREIGN)):
        spec = builtin(name).build()
        m = Machine(spec)
        s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_send_push_reg(req=R0)",
                  "prefill_push_write(req=R0)", "nixl_write_land(req=R0)", "nixl_write_complete(req=R0)",
                  "decode_finished_recving(req=R0)")
        lay = spec.layout
        assert {s[lay.slot("src_owner", q)] for q in range(2)} == {1}  # both of R0's prefill blocks held
        assert s[lay.slot("read", 0)] == read, name


def test_an_uncapped_appended_token_gives_the_suffix_slot_the_prefix_in_pull():
    """V11 pull (#50558): the READ of 0.33.0 as shipped lands R0's prefix KV in decode's suffix
    slot; capped at ``remote_num_tokens`` (HYPOTHETICAL) it lands R0's suffix; without the
    appended token (the existing knobs alone, pull) it is end-trimmed as in push with #48758."""
    base = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)",
            "nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)", "decode_finished_recving(req=R0)"]
    for name, read in (("vllm-pull-appended-token-prefix-hit", READ_FOREIGN), ("vllm-pull-appended-token-capped",
                                                                               READ_OWN)):
        spec = builtin(name).build()
        s = Machine(spec).run(*base)
        assert s[spec.layout.slot("read", 0)] == read, name
    assert builtin("vllm-pull-appended-token-prefix-hit").config.engine.suffix_slot_gets_prefix
    assert not builtin("vllm-pull-appended-token-capped").config.engine.suffix_slot_gets_prefix


def test_new_knobs_are_written_to_stored_scenarios_only_when_set():
    """Existing traces and certificates embed the engine table: knobs added since stay out of
    it at their defaults, and round-trip when set."""
    from kvproof.spec.vllm.config import WRITTEN_WHEN_SET, config_data

    assert not set(WRITTEN_WHEN_SET) & set(config_data(builtin("vllm-pull-heartbeat").config)["engine"])
    table = config_data(builtin("vllm-pull-reject-before-41269").config)["engine"]
    assert table["reject_notifies_prefill"] is False and table["decode_rejects"] is True
    assert "async_scheduling" not in table


@pytest.mark.parametrize("engine,message", [
    ({"reject_notifies_prefill": False}, "reject_notifies_prefill: false describes a rejection"),
    ({"defer_block_free": False}, "defer_block_free: false matters only with async_scheduling = true"),
    ({"prefix_end_trim": False}, "prefix_end_trim: false matters only with decode_prefix_hit = true"),
    ({"failure_waits_for_siblings": False}, "failure_waits_for_siblings: false matters only with read_may_fail"),
    ({"mode": "push", "read_fan_in": 2}, "read_fan_in, read_may_fail and failure_waits_for_siblings are pull-mode"),
    ({"read_fan_in": 2, "client_aborts": True}, "per-rank READs are modelled without rejections, aborts"),
    ({"read_fan_in": 2, "mla_prefill_ranks": 2}, "per-rank READs are modelled without MLA ranks, hanging READs"),
    ({"read_may_fail": True, "turn2_read": True}, "per-rank READs are modelled without MLA ranks, hanging READs"),
    ({"read_fan_in": 4}, "[engine].read_fan_in: expected a whole number in 1..3, got 4"),
    ({"registration_generation_check": False}, "registration_generation_check: false matters only with prefill_rereg"),
    ({"mode": "push", "prefill_reregisters": True}, "prefill_reregisters: modelled in pull mode only"),
    ({"decode_appended_token": True}, "decode_appended_token: modelled in pull mode with decode_prefix_hit = true"),
    ({"mode": "push", "decode_prefix_hit": True, "decode_appended_token": True},
     "decode_appended_token: modelled in pull mode with decode_prefix_hit = true"),
    ({"remote_token_cap": True}, "remote_token_cap: matters only with decode_appended_token = true"),
])
def test_inconsistent_scheduler_knobs_are_one_line(tmp_path, capsys, engine, message):
    lines = [f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v).replace(chr(39), chr(34))}"
             for k, v in engine.items()]
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprotocol = "vllm"\n[sizes]\nprefill_blocks = 1\ndecode_blocks = 1\n'
                   '[[requests]]\ntenant = "A"\n[engine]\n' + "\n".join(lines) + "\n")
    code = main(["check", str(bad), "--no-traces"])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and message in err


def test_a_push_rejection_notifies_nobody_even_with_41269():
    """V12 in push mode (0.33.0 as shipped): the push scheduler seeds the empty recv, but the
    push worker sends nothing, so the rejection leaves no notification for prefill."""
    spec = builtin("vllm-push-reject").build()
    m = Machine(spec)
    assert spec.cfg.engine.reject_notifies_prefill and not spec.pull
    s = m.run("prefill_request_finished(req=R0)", "decode_reject_request(req=R0)")
    assert s[spec.layout.slot("notif", 0)] == 0 and s[spec.layout.slot("p_phase", 0)] == P_HELD
    got = {c.claim: c.verdict for c in checked("vllm-push-reject-lease").claims}  # with the lease: freed by it only
    assert got["sometimes_rejection_frees_prefill"] == "unreachable" and got["held_pages_are_released"] == "verified"


# -- V13 (#54714 -> #56640): a full local prefix hit ------------------------------------------------------
def test_v13_a_full_hit_notifies_prefill_without_a_read_and_runs_on_its_local_kv_with_56640():
    """The full hit's block holds its own KV from the start, no READ is ever posted, prefill frees
    q0 on the notify-only notification; with #56640 the load is reported and R0 is served on its
    own KV, before it R0 stays in WAITING_FOR_REMOTE_KVS holding p0 with nothing left to do."""
    for name, reported in (("vllm-pull-full-hit-56640", True), ("vllm-pull-full-hit-before-56640", False)):
        spec = builtin(name).build()
        m, lay = Machine(spec), spec.layout
        ids = {m.label(a): a for a in range(len(m.instances))}
        s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)")
        assert s[lay.slot("content", s[lay.slot("dest", 0)])] == 1  # R0's KV, from decode's prefix cache
        assert m.step(s, ids["decode_start_load_kv(req=R0)"]) is None
        s = m.run("decode_read_blocks_notify_only(req=R0)", "prefill_get_new_notifs(req=R0)", state=s)
        assert s[lay.slot("p_phase", 0)] == P_SENT and s[lay.slot("src_owner", 0)] == 0  # q0 freed, no READ
        assert s[lay.slot("rd", 0)] == (RD_DONE if reported else 0) and s[lay.slot("d_phase", 0)] == D_READING
        done = m.step(s, ids["decode_finished_recving(req=R0)"])
        assert (done is not None) == reported
        if reported:
            assert done[lay.slot("read", 0)] == READ_OWN and done[lay.slot("outcome", 0)] == OUT_SUCCESS


@pytest.mark.parametrize("requests,engine,message", [
    ('tenant = "A"\ncached = true', 'mode = "push"', "requests[0].cached: a full local prefix hit is modelled in pull mode"),
    ('tenant = "A"', "report_notify_only_recv = false", "report_notify_only_recv: false matters only with a cached request"),
    ('tenant = "A"\ncached = 1', "", "requests[0].cached"),
])
def test_v13_bad_knobs_are_one_line(tmp_path, capsys, requests, engine, message):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprotocol = "vllm"\n[sizes]\nprefill_blocks = 1\ndecode_blocks = 1\n'
                   f'[[requests]]\n{requests}\n[engine]\n{engine}\n')
    code = main(["check", str(bad), "--no-traces"])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and message in err, err


# -- V16 (#36958): MLA's notify-only notification to the unread prefill rank -----------------------------
def test_v16_prefill_frees_only_once_both_ranks_reported():
    """Rank 0 reports on the READ's notification, rank 1 on the notify-only one (in either order);
    the block is freed on the second.  Before #36958 rank 1 drops it (unrecognized) and the block
    stays held with R0 served."""
    for name, fixed in (("vllm-pull-mla-notif-36958", True), ("vllm-pull-mla-notif-before-36958", False)):
        spec = builtin(name).build()
        m, lay = Machine(spec), spec.layout
        s = m.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)",
                  "prefill_get_new_notifs_mla_rank(req=R0)")
        assert s[lay.slot("p_phase", 0)] == P_HELD and s[lay.slot("r1_sent", 0)] == int(fixed)
        assert s[lay.slot("late", 0)] == int(not fixed)  # before: num_notifications_after_expiry, lease running
        s = m.run("nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)", "prefill_get_new_notifs(req=R0)",
                  state=s)
        assert s[lay.slot("p_phase", 0)] == (P_SENT if fixed else P_HELD)
        assert s[lay.slot("src_owner", 0)] == (0 if fixed else 1)


# -- V2 (#58222): the reaper that stops at the first live lease ------------------------------------------
def test_v2_pair_differs_only_in_the_reaper_and_only_the_fix_reaps_behind_a_live_head():
    """V2: the two scenarios differ in one knob; in both an expired lease sits behind a live,
    heartbeated one (the witness keeps the fixed side's pass from being vacuous), and only the
    reaper before #58222 leaves it unreaped forever."""
    a, b = builtin("vllm-pull-reaper-before-58222"), builtin("vllm-pull-reaper-58222")
    da, db = a.config.engine.__dict__, b.config.engine.__dict__
    assert [k for k in da if da[k] != db[k]] == ["reaper_scans_every_lease"]
    got_a = {c.claim: c.verdict for c in checked(a.name).claims}
    got_b = {c.claim: c.verdict for c in checked(b.name).claims}
    for got in (got_a, got_b):
        assert got["sometimes_expired_lease_behind_live_head"] == got["sometimes_read_hangs"] == "reached"
        assert got["sometimes_lease_expires"] == "reached"
    assert (got_a["expired_leases_are_reaped"], got_b["expired_leases_are_reaped"]) == ("violated", "verified")


def _v2_state(m, **fields):
    """The initial state of ``m`` with ``fields`` (name -> {index: value}) set."""
    st = bytearray(m.init)
    for name, values in fields.items():
        for idx, v in values.items():
            st[m.spec.layout.slot(name, *(idx if isinstance(idx, tuple) else (idx,)))] = v
    return bytes(st)


def test_v2_the_old_reaper_stops_at_a_live_head_and_reaps_an_expired_prefix():
    """Before #58222 one pass reaps nothing behind a live head (a step that changes no state) and
    every expired entry before the first live one; 0.33.0's scan reaps R1 behind the live R0."""
    before = Machine(builtin("vllm-pull-reaper-before-58222").build())
    after = Machine(builtin("vllm-pull-reaper-58222").build())
    held = {"p_phase": {0: P_HELD, 1: P_HELD}, "src": {0: 0, 1: 1}, "src_owner": {0: 1, 1: 2}}
    live_head = _v2_state(before, **held, lease={0: 2, 1: 0})
    step = _aid(before, "prefill_reap_expired_send_leases_in_order()")
    assert before.step(live_head, step) == live_head  # stops at R0: R1 stays held
    assert before.step(live_head, _aid(before, "prefill_reap_expired_lease(req=R1)")) is None  # 0.27.1: no scan
    both = before.step(_v2_state(before, **held, lease={0: 0, 1: 0}), step)
    lay = before.spec.layout
    assert [both[lay.slot("src_owner", q)] for q in (0, 1)] == [0, 0]  # both expired: both reaped, in one pass
    fixed = after.step(_v2_state(after, **held, lease={0: 2, 1: 0}), _aid(after, "prefill_reap_expired_lease(req=R1)"))
    assert fixed[after.spec.layout.slot("src_owner", 1)] == 0 and fixed[after.spec.layout.slot("src_owner", 0)] == 1
    assert after.step(live_head, step) is None  # 0.33.0 has no in-order pass


class ReapsOnlyTheHead(VllmPd):
    """0.33.0's per-request reaper, but it reaps a request only when no earlier one is held with a
    live lease (the order #58222 assumed): the fix undone."""

    def prefill_reap_expired_lease(self, s, n, r):
        o = s.ops
        for x in range(r):
            s.require(o.not_(o.and_(o.eq(s.p_phase[x], P_HELD), o.gt(s.lease[x], 0))))
        return VllmPd.prefill_reap_expired_lease(self, s, n, r)


def test_v2_a_reaper_that_stops_at_the_live_head_is_caught():
    from kvproof.checker.explicit.liveness import build_graph, find_lasso

    sc = builtin("vllm-pull-reaper-58222")
    m = Machine(ReapsOnlyTheHead(sc.config))
    lasso = find_lasso(m, build_graph(m), "expired_leases_are_reaped")
    assert lasso is not None and lasso.obligation == "R1 expired, not reaped"
    m = Machine(sc.build())
    assert find_lasso(m, build_graph(m), "expired_leases_are_reaped") is None


@pytest.mark.parametrize("engine,message", [
    ('mode = "push"\nread_may_hang = true', "read_may_hang: a hanging READ is a pull-mode knob"),
    ("kv_lease_expires = false\nreaper_scans_every_lease = false",
     "reaper_scans_every_lease: false matters only with kv_lease_expires = true"),
])
def test_v2_inconsistent_knobs_are_one_line(tmp_path, capsys, engine, message):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprotocol = "vllm"\n[sizes]\nprefill_blocks = 1\ndecode_blocks = 1\n'
                   '[[requests]]\ntenant = "A"\n[engine]\n' + engine + "\n")
    code = main(["check", str(bad), "--no-traces"])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and message in err


# -- V14 (#47021): the turn-2 readback ---------------------------------------------------------------------
def test_v14_each_variant_differs_from_the_fix_in_one_knob_and_only_the_fix_is_safe():
    """V14: before #47021, a READ slower than the 5 s margin and a clock offset a tick off each
    differ from ``vllm-pull-turn2-47021`` in one knob; only the fix with both inside the margin
    verifies, and its pass is not vacuous (a READ is declined, the TTL runs out, q0 is reused)."""
    fixed = builtin("vllm-pull-turn2-47021").config.engine.__dict__
    diffs = {"vllm-pull-turn2-before-47021": ["turn2_declines_near_expiry"],
             "vllm-pull-turn2-slow-read-47021": ["read_latency_bound"],
             "vllm-pull-turn2-clock-offset-47021": ["turn2_clock_offset_error"]}
    for name, knobs in diffs.items():
        other = builtin(name).config.engine.__dict__
        assert [k for k in fixed if fixed[k] != other[k]] == knobs
    got = {c.claim: c.verdict for c in checked("vllm-pull-turn2-47021").claims}
    assert got["sometimes_turn2_read_declined"] == got["sometimes_lease_expires"] == "reached"
    assert got["sometimes_source_block_reused"] == "reached"


def test_v14_the_check_declines_a_passed_deadline_and_a_tick_late_offset_only_a_tick_past_it():
    """An exact offset declines the READ of a lease at 0 and lets one with a tick left through;
    an offset a tick late lets a just-passed deadline through and declines one a tick past."""
    m = Machine(builtin("vllm-pull-turn2-47021").build())
    waiting = {"p_phase": {0: P_HELD}, "d_phase": {0: 1}, "src": {0: 0}, "src_owner": {0: 1}, "dest": {0: 0},
               "owner": {0: 1}}
    post, decline = _aid(m, "decode_start_load_kv(req=R0)"), _aid(m, "decode_decline_turn2_read(req=R0)")
    at_zero = _v2_state(m, **waiting, lease={0: 0})
    assert m.step(at_zero, post) is None and m.step(at_zero, decline) is not None
    one_left = _v2_state(m, **waiting, lease={0: 1})
    assert m.step(one_left, post) is not None and m.step(one_left, decline) is None
    late = Machine(builtin("vllm-pull-turn2-clock-offset-47021").build())
    post, decline = _aid(late, "decode_start_load_kv(req=R0)"), _aid(late, "decode_decline_turn2_read(req=R0)")
    just_passed = _v2_state(late, **waiting, lease={0: 0}, overdue={0: 0})
    assert late.step(just_passed, post) is not None and late.step(just_passed, decline) is None
    tick_past = _v2_state(late, **waiting, lease={0: 0}, overdue={0: 1})
    assert late.step(tick_past, post) is None and late.step(tick_past, decline) is not None


@pytest.mark.parametrize("engine,message", [
    ('turn2_read = true', "turn2_read: the turn-2 readback is a pull READ"),
    ('mode = "push"\nheartbeat_interval = "none"\nturn2_read = true', "turn2_read: the turn-2 readback is a pull READ"),
    ("turn2_declines_near_expiry = false", "turn2_declines_near_expiry: turn2_declines_near_expiry and "
                                           "turn2_clock_offset_error matter only with turn2_read = true"),
    ("turn2_clock_offset_error = 1", "matter only with turn2_read = true"),
    ('heartbeat_interval = "none"\nturn2_read = true\nturn2_clock_offset_error = 3', "a whole number in 0..2"),
])
def test_v14_inconsistent_knobs_are_one_line(tmp_path, capsys, engine, message):
    test_v2_inconsistent_knobs_are_one_line(tmp_path, capsys, engine, message)


def test_show_tells_the_stranded_lease_and_the_declined_turn2_read(capsys):
    assert main(["show", str(TRACES / "vllm-pull-reaper-before-58222__expired_leases_are_reaped.itf.json")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "the reaper stops at R0, whose lease is live (heartbeated): R1 expired behind it, not reaped" in out
    assert "decode holds the aborted R1 until a finished_recving that never comes" in out
    assert main(["show", str(TRACES / "vllm-pull-turn2-slow-read-47021__no_cross_tenant_read.itf.json")]) == 0
    assert "takes q0, which R0 no longer holds" in " ".join(capsys.readouterr().out.split())
_V8_HEAD = ["prefill_request_finished(req=R0)", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R0)",
            "decode_read_blocks_for_req(req=R0)", "nixl_read_fails_part(req=R0, wrank=w0)"]


def test_v8_a_failed_read_is_reported_after_its_sibling_stopped_only_with_56104():
    """Hetero TP: R0's two READs are posted together; w0's fails.  With #56104 (0.33.0) decode
    cannot report R0 while w1's READ is posted: only once it completed, and then R0 ends in
    FINISHED_ERROR, its block freed with nothing writing it; w0's prefill rank got no
    notification, so prefill's block waits for the lease, w1's rank is notified.  Before #56104
    the report is enabled at once and frees the block under w1's READ."""
    spec = builtin("vllm-pull-sibling-read-56104").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run(*_V8_HEAD)
    assert [s[g("wr", 0, w)] for w in range(2)] == [RD_FAILED, RD_POSTED] and s[g("d_phase", 0)] == D_READING
    assert m.step(s, _aid(m, "decode_pop_done_transfers(req=R0)")) is None  # w1 still in progress
    s = m.run("nixl_read_take_data_part(req=R0, wrank=w1)", "nixl_read_complete_part(req=R0, wrank=w1)",
              "decode_pop_done_transfers(req=R0)", state=s)
    assert s[g("outcome", 0)] == OUT_ERROR and s[g("owner", 0)] == 0 and s[g("d_phase", 0)] == D_ENDED
    assert [s[g("wnotif", 0, w)] for w in range(2)] == [0, 1] and s[g("p_phase", 0)] == P_HELD
    s = m.run("prefill_get_new_notifs_part(req=R0, wrank=w1)", state=s)
    assert s[g("p_phase", 0)] == P_HELD and s[g("src_owner", 0)] == 1  # rank w0 still holds it (lease)
    before = builtin("vllm-pull-sibling-read-before-56104").build()
    m = Machine(before)
    s = m.run(*_V8_HEAD, "decode_pop_done_transfers(req=R0)")
    assert s[g("owner", 0)] == 0 and s[g("wr", 0, 1)] == RD_POSTED  # freed under w1's READ


def test_v8_both_reads_done_serve_both_halves_and_free_prefill_on_the_last_notification():
    spec = builtin("vllm-pull-sibling-read-56104").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run(*_V8_HEAD[:4], *[f"nixl_read_{x}_part(req=R0, wrank=w{w})" for w in (0, 1)
                                for x in ("take_data", "complete")], "decode_pop_done_transfers(req=R0)")
    assert s[g("outcome", 0)] == OUT_SUCCESS and s[g("read", 0)] == READ_OWN
    s = m.run("prefill_get_new_notifs_part(req=R0, wrank=w0)", state=s)
    assert s[g("p_phase", 0)] == P_HELD and s[g("src_owner", 0)] == 1  # one of two ranks reported
    s = m.run("prefill_get_new_notifs_part(req=R0, wrank=w1)", state=s)
    assert s[g("p_phase", 0)] == P_SENT and s[g("src_owner", 0)] == 0


def test_show_tells_the_sibling_read(capsys):
    assert main(["show", str(TRACES / "vllm-pull-sibling-read-before-56104__no_cross_tenant_read.itf.json")]) == 0
    out = capsys.readouterr().out
    assert "with sibling READ(s) of rank(s) w1 still in" in out and "lands in p0, which decode freed and gave to R1" in out


def test_v17_a_request_after_the_reregistration_makes_decode_handshake_again_only_with_the_check():
    """R0 is READ and served through the first registration; prefill, holding nothing,
    re-registers; R1 carries the new generation.  With 0.33.0's check decode loads the new
    registration before R1's READ and serves R1 its own KV; without it R1's READ goes through
    the old descriptors and decode serves released memory."""
    head = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_read_blocks_for_req(req=R0)",
            "nixl_read_take_data_part(req=R0, wrank=w0)", "nixl_read_complete_part(req=R0, wrank=w0)",
            "prefill_get_new_notifs_part(req=R0, wrank=w0)", "decode_pop_done_transfers(req=R0)",
            "prefill_reregister_kv_caches()", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R1)",
            "decode_read_blocks_for_req(req=R1)", "nixl_read_take_data_part(req=R1, wrank=w0)",
            "nixl_read_complete_part(req=R1, wrank=w0)", "decode_pop_done_transfers(req=R1)"]
    for name, d_gen, read in (("vllm-pull-reregistered-generation-check", 2, READ_OWN),
                              ("vllm-pull-reregistered-no-generation-check", 1, READ_FOREIGN)):
        spec = builtin(name).build()
        m, g = Machine(spec), spec.layout.slot
        s = m.run(*head)
        assert s[g("gen", 0)] == 0 and s[g("gen", 1)] == 1 and s[g("p_gen")] == 1, name
        assert s[g("d_gen")] == d_gen and s[g("read", 1)] == read and s[g("read", 0)] == READ_OWN, name
    m = Machine(builtin("vllm-pull-reregistered-generation-check").build())
    s = m.run(*head[:2])
    assert m.step(s, _aid(m, "prefill_reregister_kv_caches()")) is None  # prefill holds R0


def test_v8_a_failed_post_stops_the_later_siblings_only_with_56104():
    """0.33.0: a failed post of rank w0's READ leaves rank w1's unposted and R0's failure is
    reported at once (no handle remains); before #56104 w1's READ is posted all the same and
    writes into the block the failure freed.  A failed post of w1 keeps w0's READ, and the
    failure waits for it."""
    head = ["prefill_request_finished(req=R0)", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R0)"]
    for name, w1 in (("vllm-pull-sibling-post-fails-56104", 0), ("vllm-pull-sibling-post-fails-before-56104", 1)):
        spec = builtin(name).build()
        m, g = Machine(spec), spec.layout.slot
        s = m.run(*head, "decode_read_blocks_post_fails(req=R0, wrank=w0)", "decode_pop_done_transfers(req=R0)")
        assert s[g("wr", 0, 0)] == RD_FAILED and s[g("wr", 0, 1)] == w1 and s[g("owner", 0)] == 0, name
    spec = builtin("vllm-pull-sibling-post-fails-56104").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run(*head, "decode_read_blocks_post_fails(req=R0, wrank=w1)")
    assert s[g("wr", 0, 0)] == RD_POSTED and m.step(s, _aid(m, "decode_pop_done_transfers(req=R0)")) is None


def test_v8_a_handle_whose_release_failed_holds_the_failure_until_released():
    """0.33.0: R0's READ reports an error and its release fails (the DMA goes on): decode keeps
    the handle, cannot report R0 until a later release succeeds, and the DMA may land in R0's own
    block meanwhile; the HYPOTHETICAL worker that drops the handle reports at once and frees the
    block under the DMA, which no retry can stop (the handle is gone)."""
    head = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_read_blocks_for_req(req=R0)",
            "decode_try_release_xfer_handle_fails(req=R0, wrank=w0)"]
    spec = builtin("vllm-pull-release-fails-retain-handle").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run(*head)
    assert s[g("wr", 0, 0)] == RD_RETAINED and m.step(s, _aid(m, "decode_pop_done_transfers(req=R0)")) is None
    s = m.run(*head, "nixl_read_lands_after_error_part(req=R0, wrank=w0)", "decode_retry_release_xfer_handle(req=R0, wrank=w0)",
              "decode_pop_done_transfers(req=R0)")
    assert s[g("wr", 0, 0)] == RD_FAILED and s[g("outcome", 0)] == OUT_ERROR and s[g("owner", 0)] == 0
    assert m.step(s, _aid(m, "nixl_read_lands_after_error_part(req=R0, wrank=w0)")) is None  # the DMA stopped
    spec = builtin("vllm-pull-release-fails-drop-handle").build()
    m, g = Machine(spec), spec.layout.slot
    s = m.run(*head, "decode_pop_done_transfers(req=R0)")
    assert s[g("outcome", 0)] == OUT_ERROR and s[g("owner", 0)] == 0 and s[g("wr", 0, 0)] == RD_RETAINED
    assert m.step(s, _aid(m, "decode_retry_release_xfer_handle(req=R0, wrank=w0)")) is None
    assert m.step(s, _aid(m, "nixl_read_lands_after_error_part(req=R0, wrank=w0)")) is not None


# -- request ids the scenario chooses --------------------------------------------------------------------
_TWO = '[[requests]]\ntenant = "A"\n{0}\n[[requests]]\ntenant = "B"\n{1}\n'


@pytest.mark.parametrize("first,second,message", [
    ('id = "chatcmpl-a1"', "", "requests[1].id: set an id on every request or on none"),
    ('id = "a b"', 'id = "b"', "requests[0].id: expected a request id"),
    ('suffixes = ["3f9c2a1b", "7e01d4c2"]', 'id = "b"', "requests[0].suffixes: needs an id"),
    ('id = "a"\nsuffixes = ["3f9c2a1b"]', 'id = "b"', "requests[0].suffixes: expected [prefill's, decode's]"),
    ('id = "a"\nsuffixes = ["3F9C2A1B", "7e01d4c2"]', 'id = "b"', "requests[0].suffixes: expected"),
    ('id = "a"', 'id = "a"', "requests[1].suffixes: prefill's internal id 'a' is requests[0]'s too"),
    ('id = "a"\nsuffixes = ["3f9c2a1b", "7e01d4c2"]', 'id = "a"\nsuffixes = ["90b6e5d3", "7e01d4c2"]',
     "requests[1].suffixes: decode's internal id 'a-7e01d4c2' is requests[0]'s too"),
])
def test_bad_request_ids_are_one_line(tmp_path, capsys, first, second, message):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprotocol = "vllm"\n[sizes]\nprefill_blocks = 1\ndecode_blocks = 2\n'
                   + _TWO.format(first, second))
    code = main(["check", str(bad), "--no-traces"])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and message in err, err


def test_request_ids_are_stored_only_when_chosen_and_change_no_state():
    """A retried external id (one id, two suffixes on each side) is expressible; the ids are
    written to stored scenarios only when set (every older trace and certificate is unchanged),
    round-trip, and leave the model's state space alone (the model names requests by slot)."""
    from kvproof.spec.vllm.config import config_data

    retried = parse_scenario({**GOOD, "requests": [
        {"tenant": "A", "id": "chatcmpl-x", "suffixes": ["00000001", "00000002"]},
        {"tenant": "A", "id": "chatcmpl-x", "suffixes": ["00000003", "00000004"]}]}, "x.toml")
    assert retried.config.request_ids() == (("chatcmpl-x-00000001", "chatcmpl-x-00000002"),
                                            ("chatcmpl-x-00000003", "chatcmpl-x-00000004"))
    bare = parse_scenario({**GOOD, "requests": [{"tenant": "A", "id": "x"}]}, "x.toml")
    assert bare.config.request_ids() == (("x", "x"),)  # VLLM_DISABLE_REQUEST_ID_RANDOMIZATION
    assert all("id" not in r and "suffixes" not in r for r in config_data(builtin("vllm-pull-ttl-expiry").config)["requests"])
    chosen = builtin("vllm-pull-chosen-ids")
    assert parse_scenario(chosen.to_data(), "x.toml").config == chosen.config
    for ids, slots in (("vllm-pull-chosen-ids", "vllm-pull-ttl-expiry"), ("vllm-push-chosen-ids", "vllm-push-lease-expiry-stall")):
        a, b = checked(ids), checked(slots)
        assert (a.stats.states, a.stats.transitions) == (b.stats.states, b.stats.transitions)
        assert [(c.claim, c.verdict) for c in a.claims] == [(c.claim, c.verdict) for c in b.claims]
