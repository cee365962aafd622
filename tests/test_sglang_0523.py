"""The SGLang 0.5.23 protocol subclass: its overrides, checked on reachable states and on
hand-driven runs, each against the base protocol so that every test can fail."""

from functools import lru_cache

import pytest

from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Config, Engine, Request
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.state import D_ENDED, D_HELD, OUT_ERROR, POLL_FAILED, READ_NONE, UNWRITTEN, WR_FLIGHT, WR_NOT_ISSUED
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.v0523 import Sglang0523

from .conftest import machine_of, reachable, states_of

SHIPPED = Engine(reject_at_prefill_door=True, reject_at_decode_door=True, retire_pending_error_prefill=True,
                 release_policy="drain_ack_or_timeout", defer_on_every_failure=True, timeout=2, write_latency_bound=1)


@lru_cache(maxsize=None)
def _pair(prefill_ranks: int, decode_ranks: int, requests: int = 2, aux_slots: int = 0, decode_pages: int = 1,
          **engine):
    """The same small configuration under the 0.5.23 subclass and the base protocol."""
    cfg = Config(tuple(Request("AB"[r % 2], 1) for r in range(requests)), decode_pages, 2, 1,
                 Engine(**{**SHIPPED.__dict__, **engine}), prefill_ranks, decode_ranks, aux_slots)
    return Machine(Sglang0523(cfg)), Machine(PdProtocol(cfg))


def _running_calls(m, s, pr):
    """(request, chunk) writes of prefill rank ``pr`` whose transfer call has not returned."""
    lay, spec = m.spec.layout, m.spec
    return [(r, c) for r in range(spec.k.R) for c in range(spec.send_len(r))
            if s[lay.slot("wr", r, pr, c)] >= WR_FLIGHT and s[lay.slot("poll", r, pr)] != POLL_FAILED]


def test_the_family_uses_the_subclass():
    for name in ("sglang-0.5.23-mooncake", "sglang-0.5.23-tp2", "sglang-0.5.23-aux"):
        assert type(builtin(name).build()).__name__ == "Sglang0523"


def test_one_transfer_call_per_prefill_rank_at_a_time_and_ranks_side_by_side():
    sub, base = _pair(2, 1, decode_pages=2, client_aborts=False)
    sub_states = states_of(sub)
    assert all(len(_running_calls(sub, s, pr)) <= 1 for s in sub_states for pr in range(2))
    assert any(all(_running_calls(sub, s, pr) for pr in range(2)) for s in sub_states)  # two workers
    assert any(len(_running_calls(base, s, 0)) > 1 for s in states_of(base))  # the base protocol overlaps


def test_a_failed_send_never_gets_that_ranks_drain_ack():
    m = machine_of("sglang-0.5.23-failed-send")
    lay = m.spec.layout
    ack = {i.aid: i.args for i in m.instances if i.name == "prefill_drain_ack"}
    failed_somewhere = False
    for s in reachable("sglang-0.5.23-failed-send"):
        for aid, _ in m.successors(s):
            if aid in ack:
                r, pr = ack[aid]
                assert s[lay.slot("poll", r, pr)] != POLL_FAILED
        failed_somewhere |= any(s[lay.slot("poll", r, 0)] == POLL_FAILED for r in range(m.spec.k.R))
    assert failed_somewhere


def test_a_prefill_failure_is_a_send_of_that_rank_still_writing():
    sub, base = _pair(2, 1, requests=1, client_aborts=False, transfer_failures=True)

    def failing_without_write(m):
        lay = m.spec.layout
        fail = {i.aid: i.args for i in m.instances if i.name == "prefill_transfer_failed"}
        return [(s, fail[a]) for s in states_of(m) for a, _ in m.successors(s)
                if a in fail and s[lay.slot("wr", fail[a][0], fail[a][1], 0)] < WR_FLIGHT]

    assert failing_without_write(sub) == []
    assert failing_without_write(base)


def test_send_aux_follows_the_last_chunk_even_after_an_abort():
    sub, base = _pair(1, 1, requests=1, aux_slots=1)
    steps = ["prefill_bootstrap_add(req=R0)", "decode_prealloc(req=R0)", "decode_send_metadata(req=R0)",
             "prefill_forward(req=R0)", "kv_transfer_write(req=R0, chunk=0)", "decode_abort(req=R0)",
             "prefill_handle_abort(req=R0)", "kv_write_lands(req=R0, chunk=0)"]
    s = sub.run(*steps)
    assert s[sub.spec.layout.slot("aux_wr", 0)] == WR_FLIGHT  # issued in the landing step
    assert not any(i.name == "kv_transfer_aux" for i in sub.instances if sub.step(s, i.aid) is not None)
    t = base.run(*steps)
    assert t[base.spec.layout.slot("aux_wr", 0)] == WR_NOT_ISSUED  # the base protocol stops at the abort
    assert not any(i.name == "kv_transfer_aux" for i in base.instances if base.step(t, i.aid) is not None)


def test_an_abort_never_falls_between_two_decode_ranks_publications():
    sub, base = _pair(1, 2, requests=1)
    half = ["prefill_bootstrap_add(req=R0)", "decode_prealloc(req=R0)", "decode_send_metadata(req=R0, drank=D0)"]
    abort = next(i.aid for i in sub.instances if i.name == "decode_abort")
    assert sub.step(sub.run(*half), abort) is None
    assert base.step(base.run(*half), abort) is not None
    assert sub.step(sub.run(*half, "decode_send_metadata(req=R0, drank=D1)"), abort) is not None


def test_the_metadata_gate_and_room_check():
    sub, base = _pair(1, 1, requests=1, aux_slots=1)
    lay = sub.spec.layout
    done = sub.run("prefill_bootstrap_add(req=R0)", "decode_prealloc(req=R0)", "decode_send_metadata(req=R0)",
                "prefill_forward(req=R0)", "kv_transfer_write(req=R0, chunk=0)", "kv_write_lands(req=R0, chunk=0)",
                "kv_aux_lands(req=R0)", "prefill_transfer_done(req=R0)")
    commit = next(i.aid for i in sub.instances if i.name == "decode_commit")
    slot = lay.slot("aux_content", 0)
    blank = bytearray(done)
    blank[slot] = UNWRITTEN
    assert sub.step(bytes(blank), commit) is None  # _apply_metadata_gate: room 0 is not transferred
    assert base.step(bytes(blank), commit) is not None
    foreign = bytearray(done)
    foreign[slot] = 2  # another request's metadata
    after = sub.step(bytes(foreign), commit)
    assert after[lay.slot("outcome", 0)] == OUT_ERROR and after[lay.slot("read", 0)] == READ_NONE
    released = sub.step(done, commit)
    assert released[slot] == UNWRITTEN  # clear_slot on release


def test_the_held_metadata_slot_is_freed_at_the_deadline_under_its_write():
    m = machine_of("sglang-0.5.23-aux")
    lay = m.spec.layout
    hit = [s for s in reachable("sglang-0.5.23-aux")
           if s[lay.slot("aux_wr", 0)] >= WR_FLIGHT and s[lay.slot("aux_owner", 0)] != 1]
    assert hit  # the violation is the aux write, not only the pages
    assert all(s[lay.slot("d_phase", 0)] != D_HELD for s in hit)


# -- client rooms ------------------------------------------------------------------------------
def _shared(**engine):
    cfg = Config((Request("A", 1, room=0), Request("B", 1, room=0, prefill_instance=engine.pop("instance", 0))),
                 2, 2, 1, Engine(**{**SHIPPED.__dict__, "room_policy": "client", "client_aborts": False, **engine}))
    return Machine(Sglang0523(cfg))


def test_client_rooms_add_room_keyed_fields_only_when_asked():
    base, _ = _pair(1, 1)
    assert "d_status" not in base.spec.layout.by_name and "p_dst" not in base.spec.layout.by_name
    m = _shared()
    assert {"d_status", "p_status", "p_dst", "wr_dst", "p_md", "md", "wr_md", "d_concl"} <= set(m.spec.layout.by_name)
    with pytest.raises(ValueError, match="does not model client-chosen rooms"):
        PdProtocol(m.spec.cfg)


def test_one_prefill_instance_sends_a_requests_kv_into_the_other_requests_pages():
    """transfer_infos is keyed by the room: R1's prefill, never seen by decode, writes into R0's page,
    and R0 reads tenant B's KV."""
    m = _shared()
    lay = m.spec.layout
    bad = [s for s in states_of(m) if s[lay.slot("read", 0)] == 3]  # READ_CROSS_TENANT
    assert bad and any(s[lay.slot("d_phase", 1)] == 0 for s in bad)  # R1 need never reach decode


def test_two_instances_keep_the_pages_apart_and_the_guard_keeps_the_room_entry():
    """On two prefill instances transfer_infos are separate, so no read is foreign; decode's shared
    request_status can be popped under a waiting receiver (KeyError in the code) without the guard only."""
    for guard, popped in (("early", True), ("prefill_complete", False)):
        m = _shared(instance=1, decode_allocation_policy=guard)
        lay = m.spec.layout
        states = states_of(m)
        assert all(s[lay.slot("read", r)] <= 1 for s in states for r in (0, 1))
        found = any(m.claim_hits("sometimes_decode_polls_cleared_room", s) for s in states)
        assert found is popped


def test_prefill_complete_reserves_only_after_the_prefill_forward():
    """--disaggregation-decode-allocation-policy prefill_complete defers decode's reservation
    (``_pre_alloc`` waits for the readiness message after ``mark_prefill_complete``): no request
    holds a decode page before its prefill forward ran; with early one does.  A request failed
    by the guard while it waits for prefill sends an unarmed ABORT from its receiver's clear."""
    for policy, early_reservation in (("early", True), ("prefill_complete", False)):
        m = _shared(instance=1, decode_allocation_policy=policy)
        lay, k = m.spec.layout, m.spec.k
        states = states_of(m)
        before = any(s[lay.slot("dest", r, 0)] != k.D and s[lay.slot("src", r, 0)] == k.P
                     for s in states for r in (0, 1))
        assert before is early_reservation
    unarmed = [s for s in states if s[lay.slot("abort_tx", 0, 0)] != 0 and s[lay.slot("dest", 0, 0)] == k.D]
    assert unarmed and all(s[lay.slot("armed", 0)] == 0 for s in unarmed)


def test_client_aborts_key_the_ack_tracker_by_room():
    """With client aborts, register_deferred_abort_room replaces the room's generation and a held
    entry resolves by room: R0's page is freed on R1's ack while R0's write is in flight.  Keyed
    per request (the model before), no such state exists; the configuration refuses what is
    not modelled (two requests of a room on one instance, prefill_complete with aborts)."""
    class PerRequest(Sglang0523):
        room_acks = False  # the tracker keyed per request, as without client rooms

    def freed_under_write(m):
        lay = m.spec.layout
        states = states_of(m)
        return states, [s for s in states if s[lay.slot("wr", 0, 0, 0)] >= WR_FLIGHT and s[lay.slot("d_phase", 0)] == D_ENDED
                        and s[lay.slot("owner", s[lay.slot("dest", 0, 0)])] != 1]

    m = _shared(instance=1, client_aborts=True)
    lay = m.spec.layout
    states, hit = freed_under_write(m)
    assert hit and all(s[lay.slot("acked", 0, 0)] == 0 for s in hit)  # never R0's own ack
    assert not any(s[lay.slot("armed", 0)] == 1 and s[lay.slot("armed", 1)] == 1 for s in states)
    assert not freed_under_write(Machine(PerRequest(m.spec.cfg)))[1]
    with pytest.raises(ValueError, match="_deferred_ack_targets"):
        _shared(client_aborts=True)
    with pytest.raises(ValueError, match="early"):
        _shared(instance=1, client_aborts=True, decode_allocation_policy="prefill_complete")
