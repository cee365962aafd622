"""The SGLang 0.5.23 protocol subclass: its three overrides, checked on reachable states."""

from kvproof.spec.pd_state import POLL_FAILED, WR_FLIGHT
from kvproof.spec.scenario import builtin

from .conftest import machine_of, reachable


def _running_calls(m, s):
    lay, spec = m.spec.layout, m.spec
    return [
        (r, c)
        for r in range(spec.k.R)
        for c in range(spec.send_len(r))
        if s[lay.slot("wr", r, c)] >= WR_FLIGHT and s[lay.slot("poll", r)] != POLL_FAILED
    ]


def test_the_family_uses_the_subclass():
    spec = builtin("sglang-0.5.23-mooncake").build()
    assert type(spec).__name__ == "Sglang0523"


def test_one_transfer_call_runs_at_a_time():
    m = machine_of("sglang-0.5.23-mooncake")
    states = reachable("sglang-0.5.23-mooncake")
    assert all(len(_running_calls(m, s)) <= 1 for s in states)
    # and the base protocol does let two run at once in the same configuration
    from kvproof.model.machine import Machine
    from kvproof.spec.pd import PdProtocol

    base = Machine(PdProtocol(builtin("sglang-0.5.23-mooncake").config))
    seen, todo = {base.init}, [base.init]
    while todo:
        s = todo.pop()
        if len(_running_calls(base, s)) > 1:
            break
        for _, t in base.successors(s):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    else:
        raise AssertionError("the base protocol never runs two transfer calls at once")


def test_a_failed_send_never_gets_its_drain_ack():
    m = machine_of("sglang-0.5.23-failed-send")
    ack = [i.aid for i in m.instances if i.name == "prefill_drain_ack"]
    lay = m.spec.layout
    failed_somewhere = False
    for s in reachable("sglang-0.5.23-failed-send"):
        enabled = {a for a, _ in m.successors(s)}
        for aid in ack:
            r = m.instances[aid].args[0]
            if s[lay.slot("poll", r)] == POLL_FAILED:
                failed_somewhere = True
                assert aid not in enabled
    assert failed_somewhere


def test_a_prefill_failure_needs_a_write_in_flight():
    m = machine_of("sglang-0.5.23-failed-send")
    lay = m.spec.layout
    fail = {i.aid: i.args[0] for i in m.instances if i.name == "prefill_transfer_failed"}
    for s in reachable("sglang-0.5.23-failed-send"):
        for aid, _ in m.successors(s):
            if aid in fail:
                r = fail[aid]
                assert any(s[lay.slot("wr", r, c)] >= WR_FLIGHT for c in range(m.spec.send_len(r)))
