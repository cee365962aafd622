"""The compiled successor and claim functions equal the plain interpreter on every state."""

import pytest

from kvproof.model.compiler import CodegenOps, _Emitter, compile_steps, compile_successors, compile_successors_of
from kvproof.model.machine import reference_claim, reference_successors

from .conftest import machine_of, reachable

SCENARIOS = ["incident", "abort-race", "timeout-equals-latency", "source-reuse", "checksum-supported",
             "lost-drain-ack-timeout", "pr-41404", "tp2x2", "room-reuse-legacy-ack", "aux-freed-early",
             "hold-forever-heartbeat", "layerwise-drain-ack", "checksum-late-write", "prefill-abort-unpropagated"]


def _sample(name, most):
    """Every reachable state of small scenarios; an even sample of at most ``most`` of larger ones."""
    states = reachable(name)
    return states[:: max(1, len(states) // most)]


@pytest.mark.parametrize("name", SCENARIOS)
def test_compiled_successors_equal_the_reference_on_reachable_states(name):
    m = machine_of(name)
    for state in _sample(name, 500):
        ref = sorted((a, bytes(t)) for a, t in reference_successors(m.spec, state))
        assert sorted(m.successors(state)) == ref
        assert m.spec.layout.type_errors(state) == []


@pytest.mark.parametrize("name", ["abort-race", "tp2x2", "aux-freed-early", "vllm-pull-heartbeat-stall"])
def test_single_instance_steps_and_restricted_successors_equal_the_reference(name):
    """``compile_steps`` (one step function per instance) and ``compile_successors_of`` (successors
    over some instances), which ``kvproof validate`` runs, give the reference's successors."""
    m = machine_of(name)
    aids = [i.aid for i in m.spec.instances]
    odd = aids[1::2]
    steps, some = compile_steps(m.spec, aids), compile_successors_of(m.spec, odd)
    for state in _sample(name, 200):
        ref = {a: bytes(t) for a, t in reference_successors(m.spec, state)}
        assert {a: t for a in aids if (t := steps[a](state)) is not None} == ref
        assert sorted(some(state)) == sorted((a, t) for a, t in ref.items() if a in set(odd))


@pytest.mark.parametrize("name", SCENARIOS)
def test_compiled_claims_equal_the_reference(name):
    m = machine_of(name)
    for state in _sample(name, 500):
        h = m.hits(state)
        for i, c in enumerate(m.claims):
            if c.at != "always":
                continue
            truth = reference_claim(m.spec, c.name, state)
            assert bool(h >> i & 1) == ((not truth) if c.kind == "invariant" else truth), c.name


def test_constants_fold_and_flags_cost_nothing():
    em = _Emitter({})
    o = CodegenOps(em)
    assert o.and_(True, o.eq(1, 1)).const is True
    assert o.or_(False, o.lt(2, 1)).const is False
    assert o.ite(True, o.read(3), o.read(4)).src == "s[3]"
    assert o.add(0, o.read(2)).src == "s[2]"
    o.require(False)
    assert o.dead


def test_statically_disabled_actions_emit_no_code():
    m = machine_of("abort-race")  # no request streams, no timeout policy, no failures
    _, src = compile_successors(m.spec)
    assert "client_send" not in src and "clock_tick" not in src and "prefill_transfer_failed" not in src
    assert "decode_abort" in src


@pytest.mark.parametrize("name", ["incident", "abort-race", "source-reuse", "lost-drain-ack-timeout"])
def test_claims_checked_after_an_action_are_those_it_can_change(name):
    m = machine_of(name)
    changed = 0
    for state in reachable(name)[::2]:
        before = m.hits(state)
        for aid, t in m.successors(state):
            # the restricted check agrees on every claim that did not already hit before the step
            assert m.hits_after[aid](t) & ~before == m.hits(t) & ~before, m.label(aid)
            changed += bool(m.hits(t) & ~before)
    assert changed  # steps that make a claim hit are among those checked
    enabled = {a for s in reachable(name) for a, _ in m.successors(s)}
    assert all(m.hits_after[a] is not None for a in enabled)
    assert len({id(m.hits_after[a]) for a in enabled}) > 1  # and actions get different, smaller checks
