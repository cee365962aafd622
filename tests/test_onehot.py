"""The one-hot interpretation agrees with the concrete interpreter, action by action."""

import random

import pytest

from kvproof.checker.symbolic.onehot import OneHotOps, conj, disj, neg
from kvproof.model.machine import reference_claim, reference_successors

from .conftest import machine_of, reachable


def _const_state(state):
    return [{v: True} for v in state]


def _value(x):
    """A fully folded one-hot value: a Python bool, or a value set with one certain value."""
    if isinstance(x, bool):
        return x
    (v, c), = [(v, c) for v, c in x.items() if c is not False]
    assert c is True
    return v


@pytest.mark.parametrize("name", ["incident", "abort-race", "lost-drain-ack-timeout", "source-reuse"])
def test_actions_fold_to_the_concrete_successors_on_reachable_states(name):
    spec = machine_of(name).spec
    rng = random.Random(3)
    states = reachable(name)
    for state in rng.sample(states, min(40, len(states))):
        concrete = dict(reference_successors(spec, state))
        for inst in spec.instances:
            ops = OneHotOps(_const_state(state))
            ruled_in = spec.run_action(inst, ops)  # False: a guard folded to a plain False
            enabled = ruled_in and conj(ops.guard)
            assert enabled in (True, False)
            assert enabled == (inst.aid in concrete), inst
            if enabled:
                assert tuple(_value(v) for v in ops.next) == concrete[inst.aid]


def test_claims_fold_to_the_concrete_truth_values():
    spec = machine_of("receipt-ack").spec
    for state in reachable("receipt-ack")[::30]:
        for c in spec.claims:
            if c.kind == "liveness":  # a list of obligations, not a truth value
                continue
            got = spec.eval_claim(c.name, OneHotOps(_const_state(state)))
            assert got == reference_claim(spec, c.name, state), c.name


def test_boolean_folding():
    assert conj([]) is True and disj([]) is False
    assert conj([True, False]) is False and disj([False, True]) is True
    assert neg(True) is False
    ops = OneHotOps([{0: True}])
    assert ops.add({1: True, 2: True}, {3: True}) == {4: True, 5: True}
    assert ops.lt({1: True}, {0: True, 2: True}) is True
    assert ops.eq({1: True}, {2: True}) is False
