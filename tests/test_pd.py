"""The PD protocol's actions: type invariant under random runs, and specific behaviours."""

from dataclasses import replace

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvproof.model.machine import Machine, reference_successors
from kvproof.spec.sglang.config import RELEASE_POLICIES, Config, Engine, Request
from kvproof.spec.sglang.protocol import PdProtocol, exceeds_input_limit
from kvproof.model.ops import ConcreteOps
from kvproof.spec.sglang.state import D_HELD, FREE, P_SENDING, WR_FLIGHT

from .conftest import machine_of, states_of

engines = st.builds(
    Engine,
    reject_at_prefill_door=st.booleans(), reject_at_decode_door=st.booleans(),
    retire_pending_error_prefill=st.booleans(), release_policy=st.sampled_from(RELEASE_POLICIES),
    defer_on_every_failure=st.booleans(), receipt_ack_taken_as_drain=st.booleans(),
    lossy_drain_acks=st.booleans(), hold_source_until_drained=st.booleans(), checksum=st.booleans(),
    model_supports_checksum=st.booleans(), client_aborts=st.booleans(), transfer_failures=st.booleans(),
    timeout=st.integers(1, 3), write_latency_bound=st.one_of(st.none(), st.integers(0, 3)),
)


@pytest.mark.slow  # about 11 s
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine=engines, streams=st.booleans(), picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=60))
def test_random_runs_keep_the_type_invariant_and_match_the_reference(engine, streams, picks):
    if streams:
        engine = replace(engine, request_streams=True, ordered_arrivals=False)
    cfg = Config((Request("A", 2), Request("B", 3), Request("B", 1)), 3, 2, 3, engine)
    m = Machine(PdProtocol(cfg))
    state = m.init
    for pick in picks:
        succ = sorted(m.successors(state))
        assert succ == sorted((a, bytes(t)) for a, t in reference_successors(m.spec, state))
        if not succ:
            break
        state = succ[pick % len(succ)][1]
        assert m.spec.layout.type_errors(state) == []


def test_allocation_takes_the_lowest_free_pages_and_release_keeps_content():
    m = machine_of("incident")
    lay = m.spec.layout
    s = m.run("prefill_bootstrap_add(req=R0)", "decode_prealloc(req=R0)", "decode_send_metadata(req=R0)",
             "prefill_forward(req=R0)", "kv_transfer_write(req=R0, chunk=0)", "kv_transfer_write(req=R0, chunk=1)",
             "kv_write_lands(req=R0, chunk=0)", "kv_write_lands(req=R0, chunk=1)", "prefill_transfer_done(req=R0)",
             "decode_commit(req=R0)")
    named = lay.decode(s)
    assert named["owner"] == ["free", "free", "free"]
    assert named["content"] == [["R0", "R0", "unwritten"]]  # stale KV stays in released pages
    s = m.run("prefill_bootstrap_add(req=R0)", "prefill_bootstrap_add(req=R1)", "decode_prealloc(req=R0)")
    assert lay.decode(s)["dest"][0] == ["p0", "p1", "none"]


def test_a_placeholder_sends_one_chunk_only():
    m = machine_of("incident")
    spec = m.spec
    assert spec.pending_error(1) and spec.send_len(1) == 1 and spec.pages(1) == 3
    assert not any(i.name == "kv_transfer_write" and i.args == (1, 0, 2) and
                   m.step(bytes(_forced_sending(spec, 1)), i.aid) for i in m.instances)
    assert not any(i.name == "kv_transfer_write" and i.args == (1, 0, 1) and
                   m.step(bytes(_forced_sending(spec, 1)), i.aid) for i in m.instances)


def _forced_sending(spec, r):
    lay = spec.layout
    s = list(spec.init_state())
    s[lay.slot("p_phase", r)] = P_SENDING
    s[lay.slot("meta", r, 0)] = 1
    s[lay.slot("wr", r, 0, 0)] = 1
    return s


def test_time_cannot_pass_while_a_write_is_due_or_an_abort_is_undelivered():
    m = machine_of("timeout-bounded-latency")  # latency bound 1, timeout 2
    spec, lay = m.spec, m.spec.layout
    tick = next(i.aid for i in m.instances if i.name == "clock_tick")
    s = list(spec.init_state())
    s[lay.slot("wr", 0, 0, 0)] = WR_FLIGHT  # age 0: may age
    assert m.step(bytes(s), tick) is not None
    s[lay.slot("wr", 0, 0, 0)] = WR_FLIGHT + 1  # at the bound: must land first
    assert m.step(bytes(s), tick) is None
    s[lay.slot("wr", 0, 0, 0)] = 0
    s[lay.slot("d_phase", 0)] = D_HELD
    assert m.step(bytes(s), tick) is not None
    s[lay.slot("abort_tx", 0, 0)] = 1  # ABORT sent, not yet handled by prefill
    assert m.step(bytes(s), tick) is None


def test_a_new_request_in_a_slot_turns_old_kv_into_old_tenant_content():
    engine = Engine(request_streams=True, ordered_arrivals=False, client_aborts=False)
    m = Machine(PdProtocol(Config((Request("A", 1),), 1, 1, 1, engine)))
    s = m.run("prefill_bootstrap_add(req=R0)", "decode_prealloc(req=R0)", "decode_send_metadata(req=R0)",
             "prefill_forward(req=R0)", "kv_transfer_write(req=R0, chunk=0)", "kv_write_lands(req=R0, chunk=0)",
             "prefill_transfer_done(req=R0)", "decode_commit(req=R0)")
    send = next(i.aid for i in m.instances if i.name == "client_send")
    named = m.spec.layout.decode(m.step(s, send))
    assert named["content"] == [["old:A"]] and named["src_content"] == ["old:A"]
    assert named["gen"] == [1]
    assert named["d_phase"] == ["new"] and named["outcome"] == ["none"] and named["owner"] == ["free"]


def test_the_input_limit_is_the_smaller_of_context_and_pool():
    o = ConcreteOps(())
    assert exceeds_input_limit(o, 3, 4, 2) and not exceeds_input_limit(o, 2, 4, 2)
    assert exceeds_input_limit(o, 3, 2, 8) and not exceeds_input_limit(o, 2, 2, 8)


def test_deferred_abort_holds_pages_and_immediate_abort_frees_them():
    for policy, owner in (("drain_ack", "R0"), ("immediate", "free")):
        cfg = Config((Request("A", 1),), 1, 1, 1, Engine(release_policy=policy))
        m = Machine(PdProtocol(cfg))
        s = m.run("prefill_bootstrap_add(req=R0)", "decode_prealloc(req=R0)", "decode_send_metadata(req=R0)",
                 "decode_abort(req=R0)")
        assert m.spec.layout.decode(s)["owner"] == [owner], policy
    assert FREE == 0


def test_write_streams_cover_every_part_of_a_page_once():
    for pr_n, dr_n, layers in [(1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 2), (4, 2, 1)]:
        cfg = Config((Request("A", 1),), 1, 1, 1, prefill_ranks=pr_n, decode_ranks=dr_n, layers=layers)
        k = PdProtocol(cfg).k
        parts = sorted(u for w in range(k.S) for u in k.units_of_stream(w))
        assert parts == list(range(k.U)), (pr_n, dr_n, layers)
        assert all(k.rank_of_stream(w) == w // layers for w in range(k.S))


@pytest.mark.slow  # about 4.5 s
def test_any_free_pages_reserves_every_free_page_in_any_order_and_matches_the_reference():
    base = machine_of("abort-race").spec.cfg
    cfg = replace(base, decode_pages=3, requests=(Request("A", 2), Request("B", 1)),
                  engine=replace(base.engine, any_free_pages=True))
    m = Machine(PdProtocol(cfg))
    labels = sorted({m.label(a) for s in [m.init] for a, _ in m.successors(s)})
    assert [x for x in labels if x.startswith("decode_prealloc")] == [  # R0 takes 2 of 3 pages: 6 ordered picks
        f"decode_prealloc_pick(req=R0, pick={i})" for i in range(6)]
    for s in states_of(m, 4000):
        ref = sorted((a, bytes(t)) for a, t in reference_successors(m.spec, s))
        assert sorted(m.successors(s)) == ref
    plain = Machine(PdProtocol(replace(cfg, engine=replace(cfg.engine, any_free_pages=False))))
    assert not any(m.label(a).startswith("decode_prealloc_pick") for a, _ in plain.successors(plain.init))


def test_a_variant_overriding_a_helper_by_its_old_private_name_is_refused():
    # the base calls release_decode now: an override of _release_decode would silently never run
    from kvproof.model.expr import SpecError
    from kvproof.spec.sglang.protocol import PdProtocol

    with pytest.raises(SpecError, match=r"^Old\._release_decode: the helper is public now: override release_decode"):
        class Old(PdProtocol):
            def _release_decode(self, s, n, r, when=True):
                pass

    class New(PdProtocol):
        def release_decode(self, s, n, r, when=True):
            pass
    assert New.release_decode is not PdProtocol.release_decode
