"""Conformance with SGLang 0.5.23's own code (skipped when the ``sglang`` extra is absent).

The stored counterexamples of the ``sglang-0.5.23-*`` family must reproduce on the real code;
a counterexample of an older engine must diverge where 0.5.23 behaves differently; a harness
configured unlike the trace's engine must be caught; the rank, generation and metadata-slot
mechanisms must be the real ones at work; random sequences must agree.
"""

from pathlib import Path
from unittest import mock

import pytest

from kvproof.spec.sglang.conform import engine_problem

from .conftest import tier

pytestmark = [  # slow: importing SGLang alone takes 10-25 s
    pytest.mark.skipif(engine_problem() is not None, reason=f"conformance needs the sglang extra: {engine_problem()}"),
    pytest.mark.slow,
]

TRACES = Path(__file__).resolve().parent.parent / "traces"
FAMILY = ["sglang-0.5.23-mooncake", "sglang-0.5.23-failed-send", "sglang-0.5.23-deferral-off",
          "sglang-0.5.23-admission", "sglang-0.5.23-tp2", "sglang-0.5.23-tp2x2", "sglang-0.5.23-room-reuse",
          "sglang-0.5.23-aux", "sglang-0.5.23-shared-room", "sglang-0.5.23-shared-room-2p",
          "sglang-0.5.23-shared-room-2p-guard", "sglang-0.5.23-shared-room-abort"]


def family_traces():
    return sorted(p for p in TRACES.glob("sglang-0.5.23-*__*.itf.json"))


def _path_to(machine, hit):
    """A shortest action sequence from the initial state to a state where ``hit`` holds."""
    parent = {machine.init: None}
    order = [machine.init]
    for s in order:
        if hit(s):
            path = []
            while parent[s] is not None:
                s, aid = parent[s]
                path.append(aid)
            return path[::-1]
        for aid, t in machine.successors(s):
            if t not in parent:
                parent[t] = (s, aid)
                order.append(t)
    raise AssertionError("no such state")


def _drive(name, hit):
    """A harness for built-in scenario ``name`` driven along the model's shortest path to a
    state where ``hit(state)`` holds; returns (machine, state, harness, result)."""
    from kvproof.spec.sglang.conform.replay import harness_for, run_on_code
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import builtin

    sc = builtin(name)
    m = Machine(sc.build())
    path = _path_to(m, lambda s: hit(m, s))
    h = harness_for(sc, m.spec)
    result = run_on_code(m, h, path)
    state = m.init
    for aid in path:
        state = m.step(state, aid)
    return m, state, h, result


def test_the_family_has_stored_counterexamples():
    assert {p.name.split("__")[0] for p in family_traces()} >= {
        "sglang-0.5.23-mooncake", "sglang-0.5.23-failed-send", "sglang-0.5.23-deferral-off",
        "sglang-0.5.23-admission", "sglang-0.5.23-tp2", "sglang-0.5.23-aux"}


@pytest.mark.parametrize("path", family_traces(), ids=lambda p: p.name.removesuffix(".itf.json"))
def test_every_stored_counterexample_reproduces_on_the_real_code(path):
    from kvproof.spec.sglang.conform.report import replay_trace

    verdict = replay_trace(path)
    assert verdict.verdict == "reproduced", getattr(verdict, "reason", "")


def test_the_guard_scenario_runs_prefill_complete_on_the_real_code():
    """The -2p-guard traces run with --disaggregation-decode-allocation-policy prefill_complete:
    the real managers defer decode's allocation and prefill has a DeferredBootstrap."""
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import builtin
    from kvproof.spec.sglang.conform.replay import harness_for

    sc = builtin("sglang-0.5.23-shared-room-2p-guard")
    h = harness_for(sc, Machine(sc.build()).spec)
    try:
        assert h.m["runtime_context"].get_disagg().disaggregation_decode_allocation_policy == "prefill_complete"
        assert h.dranks[0].mgr.defer_decode_allocation and h.dranks[0].mgr.deferred_bootstrap is None
        assert all(p.mgr.deferred_bootstrap is not None for p in h.pranks)
    finally:
        h.close()


def test_prefill_complete_reserves_after_prefill_and_the_guard_fails_the_room():
    """With prefill_complete decode's receiver sends BOOTSTRAP and reserves nothing: a
    reservation before prefill's forward is refused by the real code (the model once reserved
    at admission, and its traces diverged there).  After mark_prefill_complete the readiness
    message lets pop_preallocated reserve; a second receiver of the room is refused
    ("Duplicate decode bootstrap room") and marks the room Failed, so R0 fails too, and R0's
    clear sends ABORT to its prefill instance."""
    from kvproof.spec.sglang.conform.harness import Divergent, Harness, Options, Shape

    opts = Options(True, 2, allocation_policy="prefill_complete")
    h = Harness(Shape(((0, 1, False), (1, 1, False)), 2, 2, rooms=(0, 0), instances=(0, 1)), opts)
    try:
        KVPoll = h.m["base"].KVPoll
        h.prefill_bootstrap_add(0)
        h.decode_prealloc(0)
        assert h.observe().owner == (0, 0)  # nothing reserved at admission
        with pytest.raises(Divergent, match="WaitingForInput"):
            h.decode_reserve(0)
        h.prefill_forward(0)  # optimistic prefill while Bootstrapping, then the readiness message
        assert h.dranks[0].mgr.request_status[h.room(0)] == KVPoll.WaitingForInput
        h.decode_reserve(0)
        assert h.observe().owner == (1, 0)
        h.decode_duplicate_room(1)
        assert h.dranks[0].mgr.request_status[h.room(0)] == KVPoll.Failed
        assert h.observe().outcome[1] == "error"
        h.decode_poll_failed(0)
        obs = h.observe()
        assert obs.held == frozenset({0}) and obs.aborts == ((0, 0, True),)
    finally:
        h.close()
    h = Harness(Shape(((0, 1, False), (1, 1, False)), 2, 2, rooms=(0, 0), instances=(0, 1)), opts)
    try:
        h.prefill_bootstrap_add(0)
        h.decode_prealloc(0)
        h.decode_duplicate_room(1)
        h.decode_poll_failed(0)  # still waiting for prefill: no pages, the clear's ABORT unarmed
        assert h.observe().aborts == ((0, 0, False),)
        assert h.room(0) not in h.dranks[0].mgr.request_status
    finally:
        h.close()


def test_two_requests_of_one_room_on_the_real_code():
    """On one prefill instance, R1's sender polls the ROOM's WaitingForInput (R0 published), its
    chunk goes where transfer_infos[room] points (R0's page) and its Success concludes the room on
    decode, so R0 commits reading tenant B's KV; a receiver that joins the room after R0's
    commit popped request_status[room] makes pop_transferred raise KeyError."""
    from kvproof.spec.sglang.conform.harness import Harness, Options, Shape

    h = Harness(Shape(((0, 1, False), (1, 1, False)), 2, 2, rooms=(0, 0)), Options(True, 2))
    try:
        h.prefill_bootstrap_add(0)
        h.prefill_bootstrap_add(1)
        h.decode_prealloc(0)
        h.decode_send_metadata(0, 0)
        h.prefill_forward(1)
        h.kv_transfer_write(1, 0, 0)
        h.kv_write_lands(1, 0, 0)
        h.prefill_transfer_done(1, 0)
        h.decode_commit(0)
        obs = h.observe()
        assert obs.read[0] == "cross_tenant" and obs.content[0] == 2  # p0 holds R1's KV
    finally:
        h.close()
    h = Harness(Shape(((0, 1, False), (1, 1, False)), 2, 2, rooms=(0, 0)), Options(True, 2))
    try:
        h.prefill_bootstrap_add(0)
        h.decode_prealloc(0)
        h.decode_prealloc(1)  # R1's receiver joins room 0 while R0's entry is live
        h.decode_send_metadata(0, 0)
        h.prefill_forward(0)
        h.kv_transfer_write(0, 0, 0)
        h.kv_write_lands(0, 0, 0)
        h.prefill_transfer_done(0, 0)
        h.decode_commit(0)  # R0's clear pops request_status[room]
        h.decode_send_metadata(1, 0)  # R1 enters the transfer queue with nothing cached
        assert h.room(1) not in h.dranks[0].mgr.request_status
        with pytest.raises(KeyError):
            h.dranks[0].tq.pop_transferred()
    finally:
        h.close()


def test_a_held_request_is_released_on_the_ack_of_another_request_of_its_room():
    """_deferred_abort_ack_tracker is keyed by the room: R0 (instance 0) is aborted and held with
    its write in flight, R1 (instance 1, same room) fails on the room's Failed status and arms a
    new generation, R1's prefill acks it at once, and resolve_deferred_releases frees R0's page on
    is_abort_release_safe(room, 1) while R0's write still lands there."""
    from kvproof.spec.sglang.conform.harness import Harness, Options, Shape

    h = Harness(Shape(((0, 1, False), (1, 1, False)), 2, 2, rooms=(0, 0), instances=(0, 1)), Options(True, 2))
    try:
        h.prefill_bootstrap_add(0)
        h.decode_prealloc(0)
        h.decode_prealloc(1)
        h.decode_send_metadata(0, 0)
        h.prefill_forward(0)
        h.decode_send_metadata(1, 0)
        h.kv_transfer_write(0, 0, 0)
        h.decode_abort(0)
        first = h.dranks[0].mgr._deferred_abort_ack_tracker[h.room(0)].generation
        h.decode_poll_failed(1)  # R1's receiver cached the room's Failed in R0's pop_transferred
        tracker = h.dranks[0].mgr._deferred_abort_ack_tracker[h.room(0)]
        assert tracker.generation != first and h.observe().held == frozenset({0, 1})
        h.prefill_handle_abort(1, 0)
        h.prefill_drain_ack(1, 0)
        h.decode_handle_abort_ack(1, 0)
        assert h.observe().held == frozenset({0, 1}) and not h.write_after_release
        h.decode_release_deferred(0)
        obs = h.observe()
        assert 0 not in obs.held and obs.owner[0] == 0 and obs.write_after_release
        assert h.room(0) not in h.dranks[0].mgr._deferred_abort_ack_tracker  # R1's generation went too
    finally:
        h.close()


def test_the_incident_diverges_at_the_prefill_door():
    """0.5.23 retires the pending-error placeholder at PrefillBootstrapQueue.add; the
    incident-era model queues it, so the real code's client view differs right there."""
    from kvproof.spec.sglang.conform.report import replay_trace

    verdict = replay_trace(TRACES / "incident__no_cross_tenant_read.itf.json")
    assert verdict.verdict == "diverged"
    assert "outcome" in verdict.reason and "prefill_bootstrap_add" in verdict.reason


def test_a_harness_configured_unlike_the_trace_is_caught():
    """The mooncake trace holds R0's pages after the abort; SGLang with deferral off releases
    them at once, and the comparison must name that step and field."""
    from kvproof.spec.sglang.conform.harness import Harness, Options, Shape
    from kvproof.spec.sglang.conform.replay import run_on_code
    from kvproof.checker.traces import read_trace

    trace = read_trace(TRACES / "sglang-0.5.23-mooncake__no_write_after_release.itf.json")
    spec = trace.machine.spec
    reqs = tuple((spec.k.tenant[r], spec.pages(r), spec.over_long(r)) for r in range(spec.k.R))
    h = Harness(Shape(reqs, spec.cfg.decode_pages, spec.cfg.prefill_pages), Options(deferred_release=False))
    try:
        result = run_on_code(trace.machine, h, trace.actions)
    finally:
        h.close()
    assert not result.agrees
    step = trace.labels()[result.diverged_at - 1]
    assert step.startswith("decode_abort") and "held: model {R0}, SGLang {}" in result.reason


def test_the_abort_arms_a_generation_before_it_is_sent():
    from kvproof.spec.sglang.conform.replay import harness_for
    from kvproof.checker.traces import read_trace

    trace = read_trace(TRACES / "sglang-0.5.23-mooncake__no_write_after_release.itf.json")
    h = harness_for(trace.scenario, trace.machine.spec)
    try:
        for aid in trace.actions:
            inst = trace.machine.instances[aid]
            getattr(h, inst.name)(*inst.args)
        assert h.abort_log and all(g is not None for *_, g in h.abort_log)
        assert h.anomalies() == []
    finally:
        h.close()


def test_two_prefill_ranks_two_acks_required():
    """With prefill TP 2 into decode TP 1 the real receiver talks to both prefill ranks, and
    _defer_release snapshots required_acks = len(bootstrap_infos) = 2; after one rank's ack the
    real is_abort_release_safe is still false."""
    def one_acked(m, s):
        lay = m.spec.layout
        return (s[lay.slot("acked", 0, 0)] + s[lay.slot("acked", 0, 1)] == 1
                and m.spec.layout.decode(s)["d_phase"][0] == "held")

    m, state, h, result = _drive("sglang-0.5.23-tp2", one_acked)
    try:
        assert result.agrees, result.reason
        (entry,) = h.dranks[0].tq._deferred_releases
        decode_req, *_, required = entry
        assert required == 2 == len(decode_req.kv_receiver.bootstrap_infos)
        mgr = h.dranks[0].mgr
        assert len(mgr._deferred_abort_ack_tracker[h.room(0)].prefill_ranks) == 1
        assert not mgr.is_abort_release_safe(h.room(0), required)
    finally:
        h.close()


def test_decode_ranks_that_disagree_are_combined_by_the_real_collective():
    """tp2x2: decode rank D0 has its prefill rank's ack, D1 does not.  Each rank's own
    readiness differs; the MIN all-reduce keeps both holding, and the model agrees at every
    step.  With a collective that does not combine, D0 would release alone."""
    def d0_ready_only(m, s):
        lay = m.spec.layout
        return (m.spec.layout.decode(s)["d_phase"][0] == "held"
                and s[lay.slot("acked", 0, 0)] == 1 and s[lay.slot("acked", 0, 1)] == 0)

    m, state, h, result = _drive("sglang-0.5.23-tp2x2", d0_ready_only)
    try:
        assert result.agrees, result.reason
        ready = [dr.mgr.is_abort_release_safe(h.room(0), 1) for dr in h.dranks]
        assert ready == [True, False]
        h.decode_release_deferred(0)  # the model does not enable it; the real MIN refuses it too
        assert all(len(dr.tq._deferred_releases) == 1 for dr in h.dranks)
        assert h.anomalies() == []
        with mock.patch.object(h.m["utils"].dist, "all_reduce", lambda *a, **kw: None):  # no combining
            h.decode_release_deferred(0)
        assert [len(dr.tq._deferred_releases) for dr in h.dranks] == [0, 1]
        h.observe()
        assert any("decode ranks hold different requests" in p for p in h.anomalies())
    finally:
        h.close()


def test_a_late_ack_of_the_previous_request_does_not_count():
    """room-reuse: the room's previous request was held and armed, its drain ack is still on
    its way when the next request is held with a new generation; the real note_abort_ack
    ignores the late ack, and the model agrees at every step."""
    from kvproof.spec.sglang.conform.replay import harness_for, run_on_code
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import builtin

    sc = builtin("sglang-0.5.23-room-reuse")
    m = Machine(sc.build())
    admit = ["prefill_bootstrap_add(req=R0)", "decode_prealloc(req=R0)", "decode_send_metadata(req=R0)",
             "decode_abort(req=R0)"]
    labels = admit + ["prefill_handle_abort(req=R0)", "prefill_drain_ack(req=R0)", "clock_tick()", "clock_tick()",
                      "decode_release_timeout(req=R0)", "client_send(req=R0)"] + admit
    by_label = {m.label(i.aid): i.aid for i in m.instances}
    h = harness_for(sc, m.spec)
    try:
        result = run_on_code(m, h, [by_label[x] for x in labels + ["decode_handle_abort_ack(req=R0)"]])
        assert result.agrees, result.reason
        (old, new) = [g for (i, d), g in sorted(h.armed.items())]
        assert old < new
        state = h.dranks[0].mgr._deferred_abort_ack_tracker[h.room(0)]
        assert state.generation == new and state.prefill_ranks == set()  # the late ack did not count
        assert h.dranks[0].tq._deferred_releases  # the new request is still held
    finally:
        h.close()


def test_the_worker_sends_the_metadata_after_the_abort():
    """aux: the stored counterexample's last chunk lands after the ABORT reached prefill; the
    real transfer_worker then issues send_aux, whose write is in flight when the deadline frees
    the slot."""
    from kvproof.spec.sglang.conform.replay import harness_for
    from kvproof.checker.traces import read_trace

    trace = read_trace(TRACES / "sglang-0.5.23-aux__no_write_after_release.itf.json")
    labels = trace.labels()
    h = harness_for(trace.scenario, trace.machine.spec)
    try:
        for label, aid in zip(labels, trace.actions):
            inst = trace.machine.instances[aid]
            getattr(h, inst.name)(*inst.args)
            if label.startswith("kv_write_lands"):
                assert h.pranks[0].mgr.request_status[h.room(0)] == h.m["base"].KVPoll.Failed  # aborted
                assert [w.aux_slot for w in h.wire.in_flight] == [0]  # ...and the metadata goes out
        assert h.observe().write_after_release and h.aux_holder[0][0] == 0
    finally:
        h.close()


def test_a_scenario_the_harness_cannot_run_is_one_line():
    from kvproof.spec.sglang.conform import ConformError
    from kvproof.spec.sglang.conform.report import replay_trace

    with pytest.raises(ConformError, match="required_acks = first_ack: SGLang 0.5.23 waits for len"):
        replay_trace(TRACES / "tp2-first-ack__no_write_after_release.itf.json")


@pytest.mark.parametrize("name", FAMILY)  # 6-12 s a scenario
def test_random_sequences_agree_with_the_real_code(name):
    from kvproof.spec.sglang.conform.fuzz import fuzz_scenario
    from kvproof.model.scenario import builtin

    report = fuzz_scenario(builtin(name), sequences=tier(50, 150))  # 150 with --thorough; `kvproof conform NAME --random 1000` for more
    assert report.agrees, (report.disagreement, report.result and report.result.reason)
    assert report.sequences >= tier(50, 150)


def test_cli_conform_replays_a_trace(capsys):
    from kvproof.checker.cli.commands import main

    path = TRACES / "sglang-0.5.23-deferral-off__no_cross_tenant_read.itf.json"
    code = main(["conform", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("reproduced") and "no_cross_tenant_read fails in the code" in out


def test_cli_conform_exits_1_on_a_divergence(capsys):
    from kvproof.checker.cli.commands import main

    code = main(["conform", str(TRACES / "incident__rejected_never_succeeds.itf.json")])
    assert code == 1 and "diverged" in capsys.readouterr().out
