"""Conformance with vLLM 0.33.0's own code (the ``vllm`` extra and ``pip install --no-deps
vllm==0.33.0``).  Skipped where vLLM is not installed, except under ``KVPROOF_REQUIRE_VLLM=1``,
which ``.ci/run`` sets after installing it, so CI cannot skip these silently.

The stored counterexamples (pull and push mode) of the scenarios that describe 0.33.0 must
reproduce on the real code; those of a vLLM before a fix must diverge where 0.33.0's fix acts; a
wrong model step must be caught at that step; random sequences of every scenario that describes
0.33.0 must agree: 300 each with ``pytest --thorough``, 60 in the test command's tier
(``KVPROOF_VLLM_RANDOM=N`` runs N instead; ``kvproof conform --random 300
'vllm-pull-*' 'vllm-push-*'`` is the same from the command line, less the pre-fix scenarios it
refuses).
"""

import os
from pathlib import Path

import pytest

from .conftest import tier

from kvproof.spec.vllm.conform import engine_problem

if os.environ.get("KVPROOF_REQUIRE_VLLM") != "1" and engine_problem() is not None:
    pytest.skip(f"conformance needs the vllm extra: {engine_problem()}", allow_module_level=True)

pytestmark = pytest.mark.slow  # importing vLLM alone takes 10-60 s on two shared cores

TRACES = Path(__file__).resolve().parent.parent / "traces"
AS_SHIPPED = ["vllm-pull-ttl-expiry", "vllm-pull-lease-equals-read", "vllm-pull-heartbeat-stall",
              "vllm-push-lease-expiry-stall", "vllm-push-abort-unanswered", "vllm-push-reject",
              "vllm-push-write-post-fails", "vllm-pull-replayed-params", "vllm-push-deferred-write",
              "vllm-pull-turn2-slow-read-47021", "vllm-pull-turn2-clock-offset-47021",
              "vllm-pull-appended-token-prefix-hit"]
AGREEING = ["vllm-pull-ttl-expiry", "vllm-pull-lease-outlasts-read", "vllm-pull-lease-equals-read",
            "vllm-pull-heartbeat-stall", "vllm-pull-heartbeat", "vllm-pull-abort-32255",
            "vllm-push-lease-expiry-stall", "vllm-push-heartbeat", "vllm-push-abort-unanswered"]
# random sequences per scenario: 300 with --thorough, 60 in the test command's tier
# (KVPROOF_VLLM_RANDOM overrides both); Hypothesis draws them derandomized: the same in every run
RANDOM = int(os.environ.get("KVPROOF_VLLM_RANDOM", "0")) or tier(60, 300)
SCHEDULER_SIDE = ["vllm-pull-reject-41269", "vllm-pull-reject-lease-41269", "vllm-pull-async-45357",
                  "vllm-push-prefix-hit-48758", "vllm-push-reject", "vllm-push-reject-lease"]  # V12, V15, V11
# Scenarios of V6, V9 and #55470 (as shipped): RANDOM random sequences each.
AGREEING_LATER = ["vllm-push-write-post-fails", "vllm-pull-replayed-params", "vllm-push-deferred-write"]


def _traces(names):
    return sorted(p for n in names for p in TRACES.glob(f"{n}__*.itf.json"))


def _run(spec_cls, scenario, labels):
    """Run the model actions named ``labels`` on a machine of ``spec_cls`` and on vLLM."""
    from kvproof.model.machine import Machine
    from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

    machine = Machine(spec_cls(scenario.config))
    ids = {machine.label(a): a for a in range(len(machine.instances))}
    h = harness_for(scenario, machine.spec)
    try:
        return run_on_code(machine, h, [ids[x] for x in labels]), h
    finally:
        h.close()


def test_the_as_shipped_scenarios_have_stored_counterexamples():
    assert {p.name.split("__")[0] for p in _traces(AS_SHIPPED)} == set(AS_SHIPPED)


@pytest.mark.parametrize("path", _traces(AS_SHIPPED), ids=lambda p: p.name.removesuffix(".itf.json"))
def test_every_counterexample_of_0_33_reproduces_on_the_real_code(path):
    from kvproof.spec.vllm.conform.report import replay_trace

    v = replay_trace(path)
    assert v.verdict == "reproduced", getattr(v, "reason", "")
    assert "fails in the code" in v.how  # the claim fails in what vLLM did, not only in the model
    if "read" in v.claim and "source" not in v.claim:
        victim = "R2" if "replayed" in path.name else "R0"  # V9: the replay R2 carries R0's parameters
        if "appended-token" in path.name:  # V11 pull (#50558): R0's own prefix KV in its suffix slot
            assert f"{victim}: foreign" in v.how
        else:
            assert f"{victim}: cross_tenant" in v.how  # decode ran it on R1's (tenant B's) KV
    if v.claim in ("held_pages_are_released", "requests_end", "quiescent_holds_nothing"):
        if "reject" in path.name:
            assert "which decode rejected, and no notification is on its way" in v.how  # V12 in push mode
        elif "write-post-fails" in path.name:  # V6: the real count is short after a failed post
            assert "notification count short" in v.how
        else:
            assert "no WRITE will come" in v.how  # V5: the real writer dropped the aborted load's blocks


@pytest.mark.parametrize("name, step, what", [
    ("vllm-pull-abort-before-32255", "decode_abort(req=R0)", "decode: model [ended, new], vLLM [held, new]"),
    ("vllm-pull-abort-finished-before-25067", "prefill_abort_finished(req=R0)",
     "prefill: model [freed, new], vLLM [held, new]"),
    ("vllm-pull-reject-before-41269", "decode_reject_request(req=R0)", "prefill_notified: model [], vLLM [0]"),
    ("vllm-pull-async-before-45357", "decode_finished_recving(req=R0)", "decode_free: model 1, vLLM 0"),
    ("vllm-push-prefix-hit-before-48758", "nixl_write_land(req=R0)", "kv: model [3, -1], vLLM [1, -1]"),
    ("vllm-pull-full-hit-before-56640", "decode_read_blocks_notify_only(req=R0)",
     "notify_only_reported: model [], vLLM [0]"),
    ("vllm-pull-mla-notif-before-36958", "decode_start_load_kv(req=R0)", "mla_notified: model [], vLLM [0]"),
    ("vllm-pull-turn2-before-47021", "decode_start_load_kv(req=R0)", "vLLM's _is_turn2_read_expired declines the "
     "READ of d-R0 (deadline 1020.0, now 1020.0)"),
    ("vllm-pull-sibling-read-before-56104", "decode_pop_done_transfers(req=R0)",  # V8: #56104 retains the sibling
     "vLLM's decode worker reported finished_recving [], not d-R0 (handles still retained: {101: 'PROC'}, "
     "_recv_failures ['d-R0'])"),
    ("vllm-pull-reregistered-no-generation-check", "decode_read_blocks_for_req(req=R1)",  # V17: 0.33.0 handshakes again
     "stale_read: model [1], vLLM []"),
    ("vllm-pull-sibling-post-fails-before-56104", "decode_read_blocks_post_fails(req=R0, wrank=w0)",  # V8: no sibling
     "reads_posted: model [1, 0], vLLM [0, 0]"),
    ("vllm-pull-release-fails-drop-handle", "decode_pop_done_transfers(req=R0)",  # V8's third path: 0.33.0 retains
     "vLLM's decode worker reported finished_recving [], not d-R0 (handles still retained: {100: 'ERR'}, "
     "_recv_failures ['d-R0'])"),
])
def test_a_counterexample_of_a_vllm_before_the_fix_diverges_where_0_33_fixed_it(name, step, what):
    from kvproof.checker.traces import read_trace
    from kvproof.spec.vllm.conform.report import replay_trace

    for path in _traces([name]):
        v = replay_trace(path)
        assert v.verdict == "diverged"
        assert read_trace(path).labels()[v.step - 1] == step and what in v.reason


def test_a_wrong_model_step_is_caught_at_that_step():
    """A mutant whose lease expiry keeps prefill's block: vLLM's reaper reports the request in
    finished_sending and the scheduler frees the block, so the free-block count differs."""
    from kvproof.model.scenario import builtin
    from kvproof.model.framework import action
    from kvproof.spec.vllm.protocol import VllmPd

    class KeepsBlockOnExpiry(VllmPd):
        @action("prefill", "req", fair=True)
        def prefill_reap_expired_lease(self, s, n, r):
            s.require(s.ops.eq(s.p_phase[r], 1))
            s.require(s.ops.eq(s.lease[r], 0))
            n.p_phase[r] = 3

    sc = builtin("vllm-pull-ttl-expiry")
    path = ["prefill_request_finished(req=R0)", "clock_tick()", "prefill_reap_expired_lease(req=R0)"]
    result, _ = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    result, _ = _run(KeepsBlockOnExpiry, sc, path)
    assert result.diverged_at == 3 and "prefill_free: model 0, vLLM 1" in result.reason


def test_an_abort_before_the_read_is_posted_is_held_as_0_33_holds_it():
    """Found by random sequences: 0.33.0's finish_requests cannot tell whether the worker posted
    the READ (it got reqs_to_recv in the allocating step), so it holds the block until
    finished_recving (delay_free_blocks).  The model did free it at once; now both hold it, the
    worker posts the READ all the same, and finished_recving frees it.  The model as it was
    diverges at the abort."""
    from kvproof.model.framework import action
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd
    from kvproof.spec.vllm.state import D_ENDED, D_HELD, D_TRACKED, OUT_ABORTED, RD_POSTED, RD_TAKEN

    class FreesUnpostedAbortAtOnce(VllmPd):  # the model before the finding
        @action("decode", "req")
        def decode_abort(self, s, n, r):
            o = s.ops
            s.require(o.is_in(s.d_phase[r], D_TRACKED))
            s.require(self._running(s))
            hold = o.is_in(s.rd[r], (RD_POSTED, RD_TAKEN))
            n.outcome[r] = OUT_ABORTED
            n.d_phase[r] = o.ite(hold, D_HELD, D_ENDED)
            self._free(s, n, r, "owner", "dest", when=o.not_(hold))

    sc = builtin("vllm-pull-abort-32255")
    path = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_abort(req=R0)",
            "decode_start_load_kv(req=R0)", "nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)",
            "decode_finished_recving(req=R0)"]
    result, _ = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    result, _ = _run(FreesUnpostedAbortAtOnce, sc, path[:3])
    assert result.diverged_at == 3
    assert "decode: model [ended, new], vLLM [held, new]" in result.reason and "decode_free: model 1, vLLM 0" in result.reason


_PUSH_LOAD = ["decode_send_push_reg(req=R0)", "prefill_push_write(req=R0)", "nixl_write_land(req=R0)",
              "nixl_write_complete(req=R0)", "decode_finished_recving(req=R0)"]


def test_a_push_abort_before_push_reg_is_held_as_0_33_holds_it():
    """Found by replaying the push traces: 0.33.0 holds an aborted push load in
    WAITING_FOR_REMOTE_KVS until finished_recving whether or not its PUSH_REG went out (the
    worker got the registration in the allocating step and sends it all the same).  The model
    freed it at once; now both hold it, the real writer sends the registration, prefill's
    matches it and WRITEs, and the WRITE's notification frees the block.  The model as it was
    diverges at the abort."""
    from kvproof.model.framework import action
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd
    from kvproof.spec.vllm.state import D_ENDED, D_HELD, D_READING, D_TRACKED, OUT_ABORTED

    class FreesUnregisteredAbortAtOnce(VllmPd):  # the model before the finding
        @action("decode", "req")
        def decode_abort(self, s, n, r):
            o = s.ops
            s.require(o.is_in(s.d_phase[r], D_TRACKED))
            hold = o.and_(o.eq(s.d_phase[r], D_READING), o.eq(s.notif[r], 0))
            n.outcome[r] = OUT_ABORTED
            n.d_phase[r] = o.ite(hold, D_HELD, D_ENDED)
            self._free(s, n, r, "owner", "dest", when=o.not_(hold))

    sc = builtin("vllm-push-abort-unanswered")
    path = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_abort(req=R0)"] + _PUSH_LOAD
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert h.D.kv_cache_manager.block_pool.get_num_free_blocks() == 2 and not h.D.requests
    result, _ = _run(FreesUnregisteredAbortAtOnce, sc, path[:3])
    assert result.diverged_at == 3
    assert "decode: model [ended, new], vLLM [held, new]" in result.reason and "decode_free: model 2, vLLM 1" in result.reason


def test_a_push_write_done_after_the_lease_ran_out_is_reported_expired():
    """Found by random push sequences: the base worker's get_transfer_results reaps expired
    leases before the push part polls the WRITE handles, so a request whose lease ran out is
    counted in num_kv_expired_reqs even when its WRITE is done.  The model counted it as sent;
    now prefill_get_transfer_results needs a running lease and the reap takes the other case."""
    from kvproof.model.framework import action
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd
    from kvproof.spec.vllm.state import P_HELD, P_SENT, RD_DONE

    class SentAfterExpiry(VllmPd):  # the model before the finding
        @action("prefill", "req", fair=True)
        def prefill_get_transfer_results(self, s, n, r):
            o = s.ops
            s.require(o.eq(s.rd[r], RD_DONE))
            s.require(o.eq(s.p_phase[r], P_HELD))
            n.p_phase[r] = P_SENT
            n.lease[r] = 0
            self._free(s, n, r, "src_owner", "src")

    sc = builtin("vllm-push-heartbeat")
    head = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)"] + _PUSH_LOAD
    path = head + ["clock_tick()", "clock_tick()", "clock_tick()"]
    result, h = _run(VllmPd, sc, path + ["prefill_reap_expired_lease(req=R0)"])
    assert result.agrees, result.reason
    assert len(h.pw.xfer_stats.data["num_kv_expired_reqs"]) == 1 and h.slots[0].seen == "own"
    result, _ = _run(SentAfterExpiry, sc, path + ["prefill_get_transfer_results(req=R0)"])
    assert result.diverged_at == len(path) + 1 and "expired: model 0, vLLM 1" in result.reason


def test_push_registrations_match_by_base_id_in_the_real_writer():
    """Decode's PUSH_REG names decode's request id (R0-dddd0000); prefill's real writer matches
    it to the finished blocks of R0-aaaa0000 by base id and WRITEs with the code's notif_msg."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-push-heartbeat")
    path = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)"] + _PUSH_LOAD[:2]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert h.pid(0) == "R0-aaaa0000" and h.did(0) == "R0-dddd0000"
    assert not h.pw._pending_d_registrations and not h.pw._push_finished_blocks
    handle, src, dst, msg = h.writes[0]
    assert h.pw._sending_transfers == {"R0-aaaa0000": [handle]} and msg == b"R0-dddd0000:1"
    assert dst == h._blocks(h.D, "R0-dddd0000") and src == h._blocks(h.P, "R0-aaaa0000")


def test_heartbeats_are_the_real_schedulers_and_extend_the_real_lease():
    """Along a heartbeat-stall path: 0.33.0's decode scheduler tracks R0 for heartbeats, and
    prefill's _handle_heartbeat moves R0's deadline to now + 20 s (2/3 of the 30 s lease)."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-heartbeat-stall")
    path = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "clock_tick()",
            "decode_send_heartbeats()", "clock_tick()", "decode_send_heartbeats()"]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert h.pw._reqs_to_send["R0"] == h.clock.now + 20
    assert set(h.D.connector.connector_scheduler._heartbeat_req_engine) == {"d-R0"}


@pytest.mark.parametrize("name", AGREEING)
def test_random_sequences_agree(name):
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario

    rep = fuzz_scenario(builtin(name), RANDOM)
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    assert rep.sequences == RANDOM and rep.steps > RANDOM


def test_random_sequences_refuse_a_scenario_of_a_vllm_before_a_fix():
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario
    from kvproof.spec.vllm.conform.replay import ConformError

    with pytest.raises(ConformError, match="delay_free_aborted_load = false: the behaviour before #32255"):
        fuzz_scenario(builtin("vllm-pull-abort-before-32255"), 5)


def test_cli_replays_a_trace_and_runs_random_sequences(capsys):
    from kvproof.checker.cli.commands import main

    trace = str(TRACES / "vllm-pull-ttl-expiry__no_cross_tenant_read.itf.json")
    assert main(["conform", trace]) == 0
    out = capsys.readouterr().out
    assert "reproduced  vllm-pull-ttl-expiry__no_cross_tenant_read.itf.json" in out
    assert out.splitlines()[-1].endswith("exit 0: every trace reproduces on vllm==0.33.0")
    assert main(["conform", "--random", "3", "vllm-pull-ttl-expiry", "vllm-push-heartbeat"]) == 0
    out = capsys.readouterr().out
    assert "vllm-pull-ttl-expiry: 3 random sequences" in out and "vllm-push-heartbeat: 3 random sequences" in out
    assert "2 matched, 0 mismatched" in out and "not run" not in out
    before = str(TRACES / "vllm-pull-abort-before-32255__no_write_after_release.itf.json")
    assert main(["conform", before]) == 1
    out = capsys.readouterr().out  # both sides shown as they are (brackets are not console markup)
    assert ("diverged    vllm-pull-abort-before-32255__no_write_after_release.itf.json at step 4: decode_abort(req=R0): "
            "decode: model [ended, new], vLLM [held, new]") in out


def test_cli_replays_a_push_trace(capsys):
    from kvproof.checker.cli.commands import main

    assert main(["conform", str(TRACES / "vllm-push-lease-expiry-stall__no_cross_tenant_read.itf.json")]) == 0
    out = capsys.readouterr().out
    assert ("reproduced  vllm-push-lease-expiry-stall__no_cross_tenant_read.itf.json: 14 steps, no_cross_tenant_read "
            "fails in the code (decode read R0: cross_tenant, R1: none)") in out


def _scheduler_side_random(name, n):
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario

    rep = fuzz_scenario(builtin(name), n)
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    # vllm-pull-reject-41269 has 34 states: hypothesis runs out of distinct sequences early
    assert rep.sequences >= min(n, 10) and rep.steps > rep.sequences


@pytest.mark.slow
@pytest.mark.parametrize("name", SCHEDULER_SIDE)
def test_random_sequences_agree_on_the_scheduler_side_fixes(name):
    _scheduler_side_random(name, RANDOM)


def test_a_rejection_notifies_prefill_through_0_33s_own_request_finished():
    """V12 on the real code: the abort_immediately request's request_finished seeds an empty
    recv, decode's next step ships it in reqs_to_recv, and prefill's real _get_new_notifs frees
    R0's block on the notify-only notification, with no notification after expiry."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-reject-41269")
    path = ["prefill_request_finished(req=R0)", "decode_reject_request(req=R0)", "prefill_get_new_notifs(req=R0)",
            "prefill_request_finished(req=R1)", "decode_on_new_request(req=R1)"]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert h.slots[0].recv is not None and not any(h.slots[0].recv.local_block_ids)  # the seeded empty recv
    assert "d-R0" not in h.D.requests and "R0" not in h.P.requests and h.slots[0].outcome == "aborted"
    assert not h.pw.xfer_stats.data.get("num_notifications_after_expiry")


def test_async_scheduling_defers_the_free_in_0_33s_own_scheduler():
    """V15 on the real code: decode's AsyncScheduler (defer_block_free on a KV consumer with two
    batches in flight) schedules step N+1 with R0, finishes R0 on step N's stop token and keeps
    its block in deferred_frees until step N+1's output is processed."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-async-45357")
    path = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)",
            "nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)", "decode_finished_recving(req=R0)"]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert type(h.D).__name__ == "AsyncScheduler" and h.D.defer_block_free
    assert "d-R0" not in h.D.requests and len(h.D.deferred_frees) == 1
    assert h.D.kv_cache_manager.block_pool.get_num_free_blocks() == 0 and h.slots[0].seen == "own"
    result, h = _run(VllmPd, sc, path + ["decode_update_from_output(req=R0)"])
    assert result.agrees, result.reason
    assert not h.D.deferred_frees and h.D.kv_cache_manager.block_pool.get_num_free_blocks() == 1


def test_0_33s_apply_prefix_caching_end_trims_prefills_blocks():
    """V11: 0.33.0's _apply_prefix_caching, which push's _xfer_blocks calls since #48758, pairs
    decode's one uncached block with prefill's last block, not its first."""
    from kvproof.spec.vllm.conform.engine import worker_class

    w = object.__new__(worker_class("push"))
    w._has_mamba = False
    assert w._apply_prefix_caching([[9]], [[1, 2]], 1, 1) == ([[9]], [[2]])


def test_a_partial_prefix_hit_registers_the_suffix_and_the_write_end_trims_on_the_real_code():
    """V11 on the real code: decode's prefix cache (warmed by a local request) holds the shared
    first block, so 0.33.0's push scheduler registers only the uncached suffix block
    (get_unhashed_block_ids_all_groups); prefill exported both, and _apply_prefix_caching pairs
    decode's block with prefill's suffix: R0 computes on its own suffix KV."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-push-prefix-hit-48758")
    path = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)"] + _PUSH_LOAD
    result, h = _run(VllmPd, sc, path[:-1])
    assert result.agrees, result.reason
    _, src, dst, _ = h.writes[0]
    p_blocks, d_blocks = h._blocks(h.P, h.pid(0)), h._blocks(h.D, h.did(0))
    assert len(p_blocks) == 2 and d_blocks == [h.prefix_block] + dst and src == p_blocks[-1:]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees and h.slots[0].seen == "own", result.reason


def test_a_push_rejection_sends_prefill_nothing_on_the_real_code():
    """V12 in push mode on 0.33.0: the push scheduler's request_finished seeds the empty recv
    (its comment says the worker will notify prefill), decode's real push worker records it in
    _recving_metadata and sends nothing, even after more writer passes and a poll; prefill's
    real get_transfer_results reports nothing while the lease runs."""
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

    sc = builtin("vllm-push-reject")
    machine = Machine(sc.build())
    ids = {machine.label(a): a for a in range(len(machine.instances))}
    h = harness_for(sc, machine.spec)
    try:  # the checks run under the harness's clock (closing it restores real time, and the lease would expire)
        result = run_on_code(machine, h, [ids["prefill_request_finished(req=R0)"], ids["decode_reject_request(req=R0)"]])
        assert result.agrees, result.reason
        assert h.did(0) in h.dw._recving_metadata and not any(h.slots[0].recv.local_block_ids)
        for _ in range(3):
            h._writer_pass(h.dw)
            h.dw.get_transfer_results()
            h._writer_pass(h.pw)
        assert not h.agent.inbox and not h.agent.deliver
        assert not h.pw.get_transfer_results().finished_sending and h.pid(0) in h.P.requests
    finally:
        h.close()


_V6_HEAD = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_send_push_reg(req=R0)",
            "prefill_xfer_blocks(req=R0, wrank=w0)", "prefill_xfer_blocks_fails(req=R0, wrank=w1)",
            "nixl_write_land_part(req=R0, wrank=w0)", "nixl_write_complete_part(req=R0, wrank=w0)",
            "decode_get_new_notifs(req=R0, wrank=w0)"]


def test_v6_one_failed_post_leaves_the_real_count_short_and_heartbeats_hold_the_lease():
    """Two real prefill push workers (world_size 2): rank 0's WRITE goes through the real
    _xfer_blocks and lands, rank 1's post raises in the stand-in agent and 0.33.0's except-branch
    records it (_send_failures, num_failed_transfers) and sends nothing.  Decode's real
    _get_new_notifs counts 1 of pp_size * producers_per_consumer = 2 and reports nothing; the
    half-written block stays WAITING_FOR_REMOTE_KVS and heartbeats keep rank 1's lease alive.
    A model that finishes on one notification diverges at the count."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    from .test_vllm_protocol import CountsOneNotification

    sc = builtin("vllm-push-write-post-fails")
    path = _V6_HEAD + ["clock_tick()", "decode_send_heartbeats()"] * 4
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    did, pid = h.did(0), h.pid(0)
    assert h.dw.consumer_notification_counts_by_req[did] == 1 and h.D.requests[did].status.name == "WAITING_FOR_REMOTE_KVS"
    assert pid in h.pws[1]._send_failures and len(h.pws[1].xfer_stats.data["num_failed_transfers"]) == 1
    assert pid in h.pws[1]._reqs_to_send and h.pws[1]._reqs_to_send[pid] > h.clock.now  # extended by heartbeats
    assert h.d_tag[h._blocks(h.D, did)[0]] == (1, 0)  # rank 0's half is R0's KV, rank 1's never written
    assert h.writes == {} and h.part_writes[(0, 0)][3] == f"{did}:2".encode()  # notif_msg "{D_req}:{world_size}"
    result, _ = _run(CountsOneNotification, sc, _V6_HEAD)
    assert result.diverged_at == len(_V6_HEAD) and "decode: model [ended, new], vLLM [waiting_for_remote_kvs, new]" in result.reason


def test_v6_both_notifications_complete_the_real_count():
    """Both ranks' WRITEs land: decode's real count reaches 2 and R0 runs on both halves of its own KV."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-push-write-post-fails")
    path = (_V6_HEAD[:4] + ["prefill_xfer_blocks(req=R0, wrank=w1)", "nixl_write_land_part(req=R0, wrank=w1)",
                            "nixl_write_complete_part(req=R0, wrank=w1)"] + _V6_HEAD[5:]
            + ["decode_get_new_notifs(req=R0, wrank=w1)", "prefill_get_transfer_results(req=R0)"])
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert h.slots[0].seen == "own" and not h.D.requests and not h.P.requests and h.reported[0] == {0, 1}


def test_a_hypothetical_fix_refuses_to_run_on_0_33():
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario
    from kvproof.spec.vllm.conform.replay import ConformError

    with pytest.raises(ConformError, match="push_fail_notif = true: #50754's PUSH_FAIL"):
        fuzz_scenario(builtin("vllm-push-write-post-fails-50754"), 5)
    with pytest.raises(ConformError, match="decode_refuses_replayed_params = true: a fail-closed decode"):
        fuzz_scenario(builtin("vllm-pull-replayed-params-refused"), 5)


def test_v9_a_replay_on_the_real_schedulers_frees_its_references_block_and_drops_its_heartbeat():
    """R2 enters 0.33.0's decode scheduler with R0's kv_transfer_params: its READ's notification
    "R0:1" makes prefill's real _get_new_notifs report R0 finished_sending (its block is freed
    under R0's own posted READ), and R2's finished_recving makes the real _stop_heartbeat discard
    R0 from _heartbeat_by_engine although R0 is still tracked and loading."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-replayed-params")
    path = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_on_new_request(req=R2)",
            "decode_start_load_kv(req=R0)", "decode_start_load_kv(req=R2)", "nixl_read_take_data(req=R2)",
            "nixl_read_complete(req=R2)", "decode_finished_recving(req=R2)"]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    cs = h.D.connector.connector_scheduler
    assert h.slots[2].recv.remote.request_id == "R0" and h.slots[2].seen == "own"
    assert "d-R0" in cs._heartbeat_req_engine and not cs._heartbeat_by_engine  # R0 loads, no HB names it
    result, h = _run(VllmPd, sc, path + ["prefill_get_new_notifs(req=R2)"])
    assert result.agrees, result.reason
    assert "R0" not in h.P.requests and h.slots[0].read == "posted"  # freed under R0's own READ


@pytest.mark.slow
@pytest.mark.parametrize("name", AGREEING_LATER)
def test_random_sequences_agree_on_the_later_scenarios(name):
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario

    rep = fuzz_scenario(builtin(name), RANDOM)
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    assert rep.sequences == RANDOM and rep.steps > RANDOM


def test_v7_deferred_the_real_writer_posts_the_write_after_the_lease_was_reaped():
    """0.33.0's _do_start_push_kv defers the WRITE behind a pending handshake (its future's
    callback); after the real reaper freed R0 and R1 took the block, resolving the handshake makes
    the real writer post the WRITE of the same block ids, now holding R1's KV."""
    from kvproof.checker.traces import read_trace
    from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

    trace = read_trace(TRACES / "vllm-push-deferred-write__no_cross_tenant_read.itf.json")
    labels = trace.labels()
    cut = labels.index("prefill_deferred_push_write(req=R0)")
    h = harness_for(trace.scenario, trace.machine.spec)
    try:
        result = run_on_code(trace.machine, h, trace.actions[:cut])
        assert result.agrees and 0 in h.deferred and 0 not in h.writes
        assert "R0-aaaa0000" not in h.pw._reqs_to_send and h.p_tag[h._blocks(h.P, "R1-aaaa0001")[0]] == 2
        h.prefill_deferred_push_write(0)  # the next step, on the same engines
        _, src, _, msg = h.writes[0]
        assert src == h._blocks(h.P, "R1-aaaa0001") and msg == b"R0-dddd0000:1"  # R1's block, for R0's decode
    finally:
        h.close()


# -- V13 (#54714 -> #56640): a full local prefix hit's notify-only load ------------------------------------
V13_PATH = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)",
            "decode_read_blocks_notify_only(req=R0)", "prefill_get_new_notifs(req=R0)",
            "decode_finished_recving(req=R0)", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R1)",
            "decode_start_load_kv(req=R1)", "nixl_read_take_data(req=R1)", "nixl_read_complete(req=R1)",
            "decode_finished_recving(req=R1)", "prefill_get_new_notifs(req=R1)"]


def test_v13_0_33s_read_blocks_reports_a_parked_full_hit_and_not_an_unparked_one():
    """0.33.0's own _read_blocks, notify-only path: for the request the real decode scheduler
    parked (awaiting_kvs) it sends prefill "R0:1" (prefill's real _get_new_notifs frees q0) and
    records an empty transfer list, which the real _pop_done_transfers reports; R0 runs on its
    local KV, R1 is READ and served.  The same call with awaiting_kvs false (a full hit the
    scheduler did not park, or an abort's seeded recv) notifies and records nothing."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    result, h = _run(VllmPd, builtin("vllm-pull-full-hit-56640"), V13_PATH)
    assert result.agrees, result.reason
    assert [s.seen for s in h.slots] == ["own", "own"] and not h.notify_dw._recving_transfers
    assert not h.P.requests and not h.D.requests and not h.pw.xfer_stats.data.get("num_notifications_after_expiry")
    spec = h.m["tp_mapping"].ReadSpec(remote_rank=0, local_block_ids=[], remote_block_ids=[])
    assert h.notify_dw._read_blocks(read_spec=spec, dst_engine_id="P", request_id="d-X", remote_request_id="X",
                             local_xfer_side_handle=0, local_dram_handle=None, remote_xfer_side_handle=0,
                             expected_consumers=1, awaiting_kvs=False)
    assert "d-X" not in h.notify_dw._recving_transfers and h.agent.inbox[-1] == b"X:1"


def test_v13_a_model_whose_notify_only_path_tells_prefill_nothing_is_caught():
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    class NotifiesNobody(VllmPd):
        def decode_read_blocks_notify_only(self, s, n, r):
            super().decode_read_blocks_notify_only(s, n, r)
            n.notif[r] = 0

    result, _ = _run(NotifiesNobody, builtin("vllm-pull-full-hit-56640"), V13_PATH[:3])
    assert result.diverged_at == 3 and "prefill_notified: model [], vLLM [0]" in result.reason


def test_v13_random_sequences_agree():
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario

    rep = fuzz_scenario(builtin("vllm-pull-full-hit-56640"), RANDOM)
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    assert rep.sequences == RANDOM and rep.steps > RANDOM


# -- V16 (#36958): MLA's notify-only notification to the unread prefill rank ------------------------------
V16_PATH = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)",
            "nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)", "prefill_get_new_notifs(req=R0)",
            "prefill_get_new_notifs_mla_rank(req=R0)"]


def test_v16_0_33s_read_blocks_for_req_notifies_the_unread_rank_with_prefills_id():
    """0.33.0's own _read_blocks_for_req (MLA, tp_ratio -2) posts one READ from prefill's rank 0
    and sends rank 1 "R0:1" (meta.remote.request_id); rank 1's real _get_new_notifs counts it and
    prefill frees R0 only once both ranks reported.  Decode's own id ("d-R0:1", the notification
    before #36958) is dropped by the same real code as an unrecognized request."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-mla-notif-36958")
    result, h = _run(VllmPd, sc, V16_PATH[:6])
    assert result.agrees, result.reason
    assert h.mla_dw.reads == [(0, "R0")] and b"R0:1" in h.agent_mla.inbox
    assert "R0" in h.P.requests and h.rank_reported["R0"] == {0}  # rank 0 alone: still held
    result, h = _run(VllmPd, sc, V16_PATH)
    assert result.agrees, result.reason
    assert "R0" not in h.P.requests and not h.pw_mla._reqs_to_send
    result, h = _run(VllmPd, sc, V16_PATH[:1])
    h.agent_mla.deliver = [b"d-R0:1"]
    assert h.pw_mla._get_new_notifs() == set() and "R0" in h.pw_mla._reqs_to_send
    assert len(h.pw_mla.xfer_stats.data.get("num_notifications_after_expiry", ())) == 1


def test_v16_random_sequences_agree():
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario

    rep = fuzz_scenario(builtin("vllm-pull-mla-notif-36958"), RANDOM)  # 30 states: 140 distinct sequences exist
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    assert rep.sequences >= min(RANDOM, 100) and rep.steps > rep.sequences


# -- V2 (#58222): the reaper before the fix diverges where 0.33.0's scan reaps more ----------------------
REAPER_PAIR = ["vllm-pull-reaper-before-58222", "vllm-pull-reaper-58222"]


def _v2_replay(paths):
    from kvproof.checker.traces import read_trace
    from kvproof.spec.vllm.conform.report import replay_trace

    for path in paths:
        v = replay_trace(path)
        if path.name == "vllm-pull-reaper-before-58222__expired_leases_are_reaped.itf.json":
            assert v.verdict == "diverged"
            assert read_trace(path).labels()[v.step - 1] == "prefill_reap_expired_send_leases_in_order()"
            assert "reported ['R1']; the reaper before #58222 stops at the first live lease and reports []" in v.reason
        else:
            assert v.verdict == "reproduced", (path.name, getattr(v, "reason", ""))
            if v.claim != "no_source_free_while_read":
                assert "whose READ hung (no completion, no error)" in v.how


def test_v2_the_old_reapers_lasso_diverges_at_the_pass_0_33_fixed_and_the_hung_reads_reproduce():
    """V2: the lasso of the reaper before #58222 diverges at its reaper pass, where 0.33.0's real
    ``_reap_expired_send_leases`` reaps R1 behind the heartbeated R0; every other counterexample
    of the pair (hung READs hold their blocks forever; an aborted load's READ posted after its
    lease ran out) is what 0.33.0 does."""
    paths = _traces(REAPER_PAIR)
    assert len(paths) == 9
    _v2_replay(paths)


def test_v2_random_sequences_agree_with_0_33s_reaper():
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario
    from kvproof.spec.vllm.conform.replay import ConformError

    rep = fuzz_scenario(builtin("vllm-pull-reaper-58222"), RANDOM)
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    assert rep.sequences == RANDOM and rep.steps > RANDOM
    with pytest.raises(ConformError, match="reaper_scans_every_lease = false: the behaviour before #58222"):
        fuzz_scenario(builtin("vllm-pull-reaper-before-58222"), 5)


# -- V14 (#47021): the turn-2 readback's expiry check on the real code ---------------------------------
TURN2 = ["vllm-pull-turn2-47021", "vllm-pull-turn2-slow-read-47021", "vllm-pull-turn2-clock-offset-47021"]


@pytest.mark.parametrize("name", TURN2)
def test_v14_random_sequences_agree_with_0_33s_turn2_check(name):
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario

    rep = fuzz_scenario(builtin(name), RANDOM)
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    assert rep.sequences == RANDOM and rep.steps > RANDOM


def test_v14_the_real_check_declines_a_passed_deadline_and_the_real_scheduler_ends_the_request():
    """A turn-2 READ taken when the holder's exported deadline has just passed: 0.33.0's
    ``_is_turn2_read_expired`` declines it, the failed load ends the request (``FINISHED_ERROR``,
    its block freed) and the holder, not told, reaps its block at the TTL; a mutant model that
    posts the READ diverges at the post."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-turn2-47021")
    path = ["prefill_request_finished(req=R0)", "clock_tick()", "clock_tick()", "decode_on_new_request(req=R0)",
            "decode_decline_turn2_read(req=R0)", "prefill_reap_expired_lease(req=R0)"]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert h.slots[0].outcome == "error" and "d-R0" not in h.D.requests and "R0" not in h.P.requests
    assert h.slots[0].recv.remote.blocks_expiry_time == 1020.0  # parsed by the real metadata from the parameters

    class NeverDeclines(VllmPd):
        def _turn2_read_expired(self, s, r):
            return s.ops.const(False)

    result, _ = _run(NeverDeclines, sc, path[:4] + ["decode_start_load_kv(req=R0)"])
    assert result.diverged_at == 5 and "_is_turn2_read_expired declines the READ of d-R0" in result.reason
_V8_HEAD = ["prefill_request_finished(req=R0)", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R0)",
            "decode_read_blocks_for_req(req=R0)", "nixl_read_fails_part(req=R0, wrank=w0)"]


def test_v8_the_real_worker_reports_a_failed_read_once_its_sibling_stopped():
    """Decode's real _read_blocks_for_req posts one READ per prefill rank (notif_msg "R0:1");
    w0's READ fails (the stand-in agent reports ERR).  0.33.0's get_transfer_results keeps w1's
    handle and reports nothing while it is in progress (a model that reports the failure then,
    the mutant of test_vllm_protocol, diverges there); once w1 completed it reports R0 in
    finished_recving and failed_recving, the real scheduler ends R0 in FINISHED_ERROR and frees
    its block, and w1's prefill rank frees nothing until rank w0's lease expires."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    from .test_vllm_protocol import FailsBeforeSiblingsStop

    sc = builtin("vllm-pull-sibling-read-56104")
    path = _V8_HEAD + ["nixl_read_take_data_part(req=R0, wrank=w1)", "nixl_read_complete_part(req=R0, wrank=w1)",
                       "decode_pop_done_transfers(req=R0)", "prefill_get_new_notifs_part(req=R0, wrank=w1)"]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert sorted(m for _, _, _, m in h.dagent.posted.values()) == [b"R0:1", b"R0:1"]
    assert sorted(w for w, _, _, _ in h.dagent.posted.values()) == [0, 1]  # one READ per prefill rank
    assert len(h.dw.xfer_stats.data["num_failed_transfers"]) == 1 and h.dw._invalid_block_ids.qsize() == 1
    assert h.slots[0].outcome == "error" and "d-R0" not in h.D.requests and not h.dw._recving_transfers
    assert "R0" in h.P.requests and h.reported[0] == {1} and "R0" in h.pws[0]._reqs_to_send  # rank w0: the lease
    result, _ = _run(FailsBeforeSiblingsStop, sc, _V8_HEAD + ["decode_pop_done_transfers(req=R0)"])
    assert result.diverged_at == len(_V8_HEAD) + 1 and "handles still retained: {101: 'PROC'}" in result.reason


def test_v17_the_real_worker_drops_the_old_registration_and_handshakes_again():
    """R0 is READ through decode's first handshake; prefill's real scheduler publishes a
    re-registration (_registration_generation bumped) and R1's kv_transfer_params carry it:
    decode's real _read_blocks_for_req runs _cleanup_remote_engine and a second handshake before
    posting R1's READ through the new registration's descriptors, and R1 runs on its own KV.
    A model without the check diverges at that READ."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    from .test_vllm_protocol import ChecksOnlyOnFirstContact

    head = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_read_blocks_for_req(req=R0)",
            "nixl_read_take_data_part(req=R0, wrank=w0)", "nixl_read_complete_part(req=R0, wrank=w0)",
            "prefill_get_new_notifs_part(req=R0, wrank=w0)", "decode_pop_done_transfers(req=R0)",
            "prefill_reregister_kv_caches()", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R1)",
            "decode_read_blocks_for_req(req=R1)"]
    sc = builtin("vllm-pull-reregistered-generation-check")
    result, h = _run(VllmPd, sc, head + ["nixl_read_take_data_part(req=R1, wrank=w0)",
                                         "nixl_read_complete_part(req=R1, wrank=w0)", "decode_pop_done_transfers(req=R1)"])
    assert result.agrees, result.reason
    gen = h.P.connector.connector_scheduler._registration_generation
    assert h.slots[1].recv.remote.registration_generation == gen == 2  # first publication, then the wake-up's
    assert h.handshakes == 2 and h.dw._remote_registration_generations[h.p_engine] == gen
    assert h.dw.dst_xfer_side_handles[h.p_engine] == {0: 100} and h.slots[1].seen == "own"
    result, _ = _run(ChecksOnlyOnFirstContact, sc, head)
    assert result.diverged_at == len(head) and "stale_read: model [1], vLLM []" in result.reason


def _random(name, n):
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario

    rep = fuzz_scenario(builtin(name), n)
    assert rep.agrees, (rep.disagreement, rep.result.reason if rep.result else "")
    assert rep.sequences == n and rep.steps > n


V8_V17 = ["vllm-pull-sibling-read-56104", "vllm-pull-reregistered-generation-check", "vllm-pull-sibling-post-fails-56104",
          "vllm-pull-release-fails-retain-handle"]  # the last: V8's third path (a failed handle release)


@pytest.mark.parametrize("name", V8_V17)
def test_v8_v17_random_sequences_agree(name):
    _random(name, RANDOM)


def test_v8_a_failed_post_on_the_real_worker_stops_the_loop_and_waits_for_the_earlier_read():
    """The stand-in agent's make_prepped_xfer raises for prefill rank 1: 0.33.0's _read_blocks
    records the failure (_recv_failures) and _read_blocks_for_req posts nothing more; rank 0's
    READ goes on, and the failure is reported (FINISHED_ERROR, the block freed) once it is done."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-sibling-post-fails-56104")
    path = ["prefill_request_finished(req=R0)", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R0)",
            "decode_read_blocks_post_fails(req=R0, wrank=w1)", "nixl_read_take_data_part(req=R0, wrank=w0)",
            "nixl_read_complete_part(req=R0, wrank=w0)", "decode_pop_done_transfers(req=R0)"]
    result, h = _run(VllmPd, sc, path)
    assert result.agrees, result.reason
    assert [w % 100 for w, _, _, _ in h.dagent.posted.values()] == [0]  # rank 1's READ never posted
    assert h.slots[0].outcome == "error" and "d-R0" not in h.D.requests and not h.dw._recv_failures


# -- V11 pull (#50558): a proxy-appended token with a partial prefix hit ----------------------------
_PULL_LOAD = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_start_load_kv(req=R0)",
              "nixl_read_take_data(req=R0)"]


def test_v11_pull_0_33s_uncapped_count_takes_two_blocks_and_apply_prefix_caching_shifts_the_read():
    """0.33.0's decode scheduler counts the whole 65-token prompt (prefill's 64 plus the appended
    token) as remote tokens, not the 64 of ``remote_num_tokens``: past the cached prefix block it
    takes two uncached blocks, as many as prefill exported, so 0.33.0's own
    ``_apply_prefix_caching`` trims nothing and decode's suffix slot gets prefill's prefix block
    (its appended-token block gets prefill's suffix block)."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    result, h = _run(VllmPd, builtin("vllm-pull-appended-token-prefix-hit"), _PULL_LOAD)
    assert result.agrees, result.reason
    rm, params = h.slots[0].recv, h.slots[0].params
    p_blocks = h._blocks(h.P, h.pid(0))
    d_blocks = [b for b in h._blocks(h.D, h.did(0)) if b != h.prefix_block]
    assert params["remote_num_tokens"] == 64 and len(h.D.requests[h.did(0)].prompt_token_ids) == 65
    assert [list(g) for g in rm.remote.block_ids] == [p_blocks] and len(p_blocks) == 2
    assert [list(g) for g in rm.local_block_ids] == [d_blocks] and len(d_blocks) == 2
    assert [h.d_tag[b] for b in d_blocks] == [h.p_tag[p_blocks[0]], h.p_tag[p_blocks[1]]]
    assert h.p_tag[p_blocks[0]] == h.R + 1  # R0's prefix tag, in decode's suffix slot


def test_v11_pull_without_a_prefix_hit_0_33s_apply_prefix_caching_asserts():
    """No prefix hit: decode's three blocks against prefill's two fail the assertion in
    ``_apply_prefix_caching`` (base_worker.py:3791), which ``_read_blocks`` calls outside its
    try (pull_worker.py:485): read in the code, not a scenario."""
    from kvproof.spec.vllm.conform.engine import worker_class

    w = object.__new__(worker_class("pull"))
    w._has_mamba = False
    assert w._apply_prefix_caching([[5, 6]], [[1, 2]], 1, 1) == ([[5, 6]], [[1, 2]])  # equal counts: no trim
    with pytest.raises(AssertionError):
        w._apply_prefix_caching([[5, 6, 7]], [[1, 2]], 1, 1)


def test_v11_pull_a_model_that_caps_the_count_diverges_at_the_read():
    """A model whose READ end-trims although 0.33.0 does not cap decode's count (the engine
    property forced off) is caught at the READ's data movement."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.config import Engine
    from kvproof.spec.vllm.protocol import VllmPd

    sc = builtin("vllm-pull-appended-token-prefix-hit")
    mp = pytest.MonkeyPatch()
    mp.setattr(Engine, "suffix_slot_gets_prefix", property(lambda self: False))
    try:
        result, _ = _run(VllmPd, sc, _PULL_LOAD)
    finally:
        mp.undo()
    assert result.diverged_at == 4 and "kv: model [1, -1], vLLM [3, -1]" in result.reason, result.reason


def test_v11_pull_random_sequences_agree():
    _random("vllm-pull-appended-token-prefix-hit", RANDOM)
def test_v8_the_real_worker_retains_a_handle_whose_release_failed():
    """R0's READ reports ERR and the stand-in agent refuses to release its handle (NIXL's
    releaseXferReq on an active transfer): 0.33.0's _pop_done_transfers keeps the handle
    (_try_release_xfer_handle returns False), records the failure and reports nothing; once a
    later poll releases it, get_transfer_results reports R0 failed and the real scheduler ends it
    in FINISHED_ERROR with its block freed.  The HYPOTHETICAL model that drops the handle
    diverges at its report."""
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.protocol import VllmPd

    head = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_read_blocks_for_req(req=R0)",
            "decode_try_release_xfer_handle_fails(req=R0, wrank=w0)", "nixl_read_lands_after_error_part(req=R0, wrank=w0)"]
    sc = builtin("vllm-pull-release-fails-retain-handle")
    result, h = _run(VllmPd, sc, head + ["decode_retry_release_xfer_handle(req=R0, wrank=w0)",
                                         "decode_pop_done_transfers(req=R0)"])
    assert result.agrees, result.reason
    failures = h.dw.xfer_stats.data.get("num_failed_transfers", ())
    assert len(failures) == 2  # the first poll's ERR and the retry's: each goes through _handle_failed_transfer
    assert h.slots[0].outcome == "error" and "d-R0" not in h.D.requests and not h.dw._recving_transfers
    result, h = _run(VllmPd, builtin("vllm-pull-release-fails-drop-handle"), head + ["decode_pop_done_transfers(req=R0)"])
    assert result.diverged_at == len(head) + 1 and "handles still retained: {100: 'ERR'}" in result.reason


# -- request ids the scenario chooses (external id + each engine's input-processor suffix) -------------------
CHOSEN_IDS = ["vllm-pull-chosen-ids", "vllm-push-chosen-ids"]


def test_cli_replays_the_traces_of_scenario_chosen_request_ids(capsys):
    from kvproof.checker.cli.commands import main

    paths = _traces(CHOSEN_IDS)
    assert {p.name.split("__")[0] for p in paths} == set(CHOSEN_IDS)
    assert main(["conform", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("reproduced  ") and "fails in the code" in line for line in out.splitlines()) == len(paths)


@pytest.mark.parametrize("name", CHOSEN_IDS)
def test_the_real_engines_key_their_state_by_the_scenarios_request_ids(name):
    """The ids 0.33.0's own schedulers were given and returned are the scenario's internal ids
    (external id + that engine's suffix): prefill's ``request_finished`` names its own in
    ``kv_transfer_params`` (``remote_request_id``), decode's request carries decode's, and the
    notification that completes the load (pull: decode's READ notif to prefill; push: prefill's
    WRITE notif_msg to decode, after matching decode's PUSH_REG by base id) names the right one."""
    from kvproof.checker.traces import read_trace
    from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

    trace = read_trace(TRACES / f"{name}__no_cross_tenant_read.itf.json")
    want = trace.scenario.config.request_ids()
    assert want == (("chatcmpl-a1-3f9c2a1b", "chatcmpl-a1-7e01d4c2"), ("chatcmpl-b2-90b6e5d3", "chatcmpl-b2-c48f1a07"))
    h = harness_for(trace.scenario, trace.machine.spec)
    seen = {"P": [], "D": []}
    try:
        for side in seen:
            engine = getattr(h, side)
            real = engine.add_request
            engine.add_request = lambda req, real=real, side=side: (seen[side].append(req.request_id), real(req))[1]
        result = run_on_code(trace.machine, h, trace.actions)
        assert result.agrees, result.reason
        assert set(seen["P"]) == {p for p, _ in want} and set(seen["D"]) <= {d for _, d in want}
        assert "chatcmpl-a1-7e01d4c2" in seen["D"]  # the victim R0 reached decode under decode's id
        assert h.slots[0].params["remote_request_id"] == "chatcmpl-a1-3f9c2a1b"  # the real request_finished's
        if name.startswith("vllm-push"):
            assert any(msg == b"chatcmpl-a1-7e01d4c2:1" for _, _, _, msg in h.writes.values())
        else:
            assert h.slots[0].recv.remote.request_id == "chatcmpl-a1-3f9c2a1b"  # decode's reqs_to_recv entry
    finally:
        h.close()


def test_a_retried_external_id_makes_0_33s_push_writer_write_the_other_requests_kv():
    """Found by driving the real code with scenario-chosen ids (not in the model, which pairs a
    registration with its own slot's blocks): two live requests with one external id (the same
    X-Request-Id), each engine's suffix random as shipped.  Prefill holds the finished blocks of
    both; decode's PUSH_REG of R1 matches none exactly, and 0.33.0's ``_pop_matching_finished_blocks``
    (push_worker.py) falls back to the base id, where R0's blocks come first: the real writer
    WRITEs R0's block (tenant A's KV) into R1's (tenant B's) decode block, with R1's notif_msg."""
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import parse_scenario
    from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

    sc = parse_scenario({
        "name": "retried-id", "protocol": "vllm", "sizes": {"prefill_blocks": 2, "decode_blocks": 2},
        "requests": [{"tenant": "A", "id": "chatcmpl-x", "suffixes": ["3f9c2a1b", "7e01d4c2"]},
                     {"tenant": "B", "id": "chatcmpl-x", "suffixes": ["90b6e5d3", "c48f1a07"]}],
        "engine": {"mode": "push", "kv_lease_duration": 3, "heartbeat_interval": 1, "arrival_latency_bound": 0}},
        "retried-id.toml")
    m = Machine(sc.build())
    ids = {m.label(a): a for a in range(len(m.instances))}
    path = ["prefill_request_finished(req=R0)", "prefill_request_finished(req=R1)", "decode_on_new_request(req=R1)",
            "decode_send_push_reg(req=R1)", "prefill_push_write(req=R1)"]
    h = harness_for(sc, m.spec)
    try:
        result = run_on_code(m, h, [ids[x] for x in path])
        assert result.diverged_at == 5 and "posted no WRITE for chatcmpl-x-90b6e5d3" in result.reason
        (src_owner, (_, src, dst, msg)), = h.writes.items()
        assert src_owner == 0 and src == h._blocks(h.P, "chatcmpl-x-3f9c2a1b") and h.p_tag[src[0]] == 1  # R0's KV
        assert dst == h._blocks(h.D, "chatcmpl-x-c48f1a07") and msg == b"chatcmpl-x-c48f1a07:1"  # into R1's block
        assert list(h.pw._push_finished_blocks) == ["chatcmpl-x-90b6e5d3"]  # R1's own blocks wait for R0's PUSH_REG
    finally:
        h.close()


def test_without_id_randomization_a_second_live_request_of_one_id_trips_0_33s_scheduler():
    """With VLLM_DISABLE_REQUEST_ID_RANDOMIZATION both requests' internal id is the external one;
    prefill's scheduler still holds the first (finished, its blocks kept for decode) in
    ``requests``, and the real ``Scheduler.add_request`` asserts ``"duplicate request id"``
    on the second (the scenario parser refuses such ids: two live requests with one internal id)."""
    from kvproof.spec.vllm.conform.harness import Harness, Shape

    h = Harness(Shape(tenants=(0, 1), prefill_blocks=2, decode_blocks=2, lease_ticks=3, ids=(("x", "x"), ("x", "x"))))
    try:
        h.prefill_request_finished(0)
        assert h.slots[0].params["remote_request_id"] == "x" and "x" in h.P.requests
        with pytest.raises(AssertionError, match="duplicate request id"):
            h.prefill_request_finished(1)
    finally:
        h.close()
