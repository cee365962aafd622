"""Each claim on hand-made states: it fails exactly where its hazard is."""

from kvproof.model.machine import reference_claim
from kvproof.spec.sglang.state import (
    D_ENDED, D_HELD, D_WAITING, OUT_SUCCESS, P_ENDED, P_STOPPED, PAB_ACKED, PAB_CLEARED, PAB_RECEIVED, POLL_FAILED,
    POLL_SUCCESS, READ_CROSS_TENANT, READ_FOREIGN, WR_FLIGHT,
)

from .conftest import machine_of


def _state(spec, **cells):
    s = list(spec.init_state())
    for key, value in cells.items():
        name, *idx = key.split("__")
        s[spec.layout.slot(name, *map(int, idx))] = value
    return s


def test_read_claims():
    spec = machine_of("abort-race").spec
    foreign = _state(spec, read__1=READ_FOREIGN)
    cross = _state(spec, read__1=READ_CROSS_TENANT)
    assert not reference_claim(spec, "decode_reads_only_own_pages", foreign)
    assert reference_claim(spec, "no_cross_tenant_read", foreign)
    assert not reference_claim(spec, "no_cross_tenant_read", cross)


def test_a_write_in_flight_to_a_page_its_request_no_longer_owns():
    spec = machine_of("abort-race").spec
    held = _state(spec, wr__0__0__0=WR_FLIGHT, dest__0__0=0, owner__0=1, d_phase__0=D_HELD)
    stolen = _state(spec, wr__0__0__0=WR_FLIGHT, dest__0__0=0, owner__0=2, d_phase__1=D_WAITING, dest__1__0=0)
    assert reference_claim(spec, "no_write_after_release", held)
    assert not reference_claim(spec, "no_write_after_release", stolen)


def test_source_freed_under_a_write():
    spec = machine_of("source-reuse").spec
    ok = _state(spec, wr__0__0__0=WR_FLIGHT, src__0__0=0, src_owner__0=1, p_phase__0=P_STOPPED)
    freed = _state(spec, wr__0__0__0=WR_FLIGHT, src__0__0=0, src_owner__0=0, p_phase__0=P_STOPPED)
    assert reference_claim(spec, "no_source_free_while_read", ok)
    assert not reference_claim(spec, "no_source_free_while_read", freed)


def test_a_release_needs_every_writer_s_drain_ack_once_a_write_may_target_the_page():
    spec = machine_of("pr-40645").spec  # one request, one page, one prefill rank

    def released(**cells):  # R0 ended on decode and p0 is free again
        return _state(spec, d_phase__0=D_ENDED, dest__0__0=0, meta__0__0=1, **cells)

    assert reference_claim(spec, "release_justified", released(src__0__0=0, p_abort__0__0=PAB_ACKED))
    assert not reference_claim(spec, "release_justified", released(src__0__0=0, p_abort__0__0=PAB_RECEIVED))
    assert not reference_claim(spec, "release_justified", released(src__0__0=0, p_abort__0__0=PAB_CLEARED))
    assert not reference_claim(spec, "release_justified", released(src__0__0=0, poll__0__0=POLL_FAILED))
    assert reference_claim(spec, "release_justified", released(src__0__0=0, poll__0__0=POLL_SUCCESS))
    # not forwarded: a write may still come while prefill may forward, none once it ended
    assert not reference_claim(spec, "release_justified", released())
    assert reference_claim(spec, "release_justified", released(p_phase__0=P_ENDED))
    # still owned: nothing was released
    assert reference_claim(spec, "release_justified", released(src__0__0=0, owner__0=1))


def test_page_accounting():
    spec = machine_of("pr-38935").spec
    leaked = _state(spec, owner__2=1)  # owned by R0, which never reserved
    assert not reference_claim(spec, "pages_conserved", leaked)
    shared = _state(spec, d_phase__0=D_WAITING, dest__0__0=0, dest__0__1=1, owner__0=1, owner__1=3,
                    d_phase__2=D_WAITING, dest__2__0=1, dest__2__1=2, owner__2=3)
    assert not reference_claim(spec, "exclusive_ownership", shared)


def test_admission_claims_only_judge_over_long_requests():
    spec = machine_of("incident").spec  # R1 is over-long
    assert not reference_claim(spec, "rejected_never_succeeds", _state(spec, outcome__1=OUT_SUCCESS))
    assert reference_claim(spec, "rejected_never_succeeds", _state(spec, outcome__0=OUT_SUCCESS))
    assert not reference_claim(spec, "rejected_never_reserves", _state(spec, owner__2=2))
    assert reference_claim(spec, "rejected_never_reserves", _state(spec, owner__2=1))


def test_success_needs_every_reserved_page_landed():
    spec = machine_of("incident").spec
    partial = _state(spec, outcome__0=OUT_SUCCESS, wr__0__0__0=1)
    full = _state(spec, outcome__0=OUT_SUCCESS, wr__0__0__0=1, wr__0__0__1=1)
    assert not reference_claim(spec, "success_implies_full_coverage", partial)
    assert reference_claim(spec, "success_implies_full_coverage", full)


def test_quiescence_requires_everything_ended_and_free():
    spec = machine_of("abort-race").spec
    done = _state(spec, p_phase__0=P_ENDED, p_phase__1=P_ENDED, d_phase__0=D_ENDED, d_phase__1=D_ENDED)
    assert reference_claim(spec, "quiescent_holds_nothing", done)
    assert not reference_claim(spec, "quiescent_holds_nothing", _state(spec, p_phase__0=P_ENDED, p_phase__1=P_ENDED,
                                                                       d_phase__0=D_HELD, d_phase__1=D_ENDED, owner__0=1))
