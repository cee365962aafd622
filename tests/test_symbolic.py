"""The same spec evaluated with Z3 terms agrees with the concrete interpreter."""

import random

import pytest
import z3

from kvproof.checker.symbolic.z3ops import claim_term, state_vars, step_terms
from kvproof.model.machine import reference_claim, reference_successors

from .conftest import machine_of, reachable


def _value(term, subst):
    v = z3.simplify(z3.substitute(term, *subst))
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    return v.as_long()


@pytest.mark.parametrize("name", ["abort-race", pytest.param("incident", marks=pytest.mark.slow),
                                  "lost-drain-ack-timeout"])
def test_guards_and_effects_with_z3_terms_match_concrete_evaluation(name):
    m = machine_of(name)
    spec = m.spec
    pre = state_vars(spec, "0")
    encoded = [step_terms(spec, inst, pre) for inst in spec.instances]
    rng = random.Random(7)
    sample = rng.sample(reachable(name), min(25, len(reachable(name))))
    for state in sample:
        subst = [(v, z3.IntVal(x)) for v, x in zip(pre, state)]
        concrete = dict(reference_successors(spec, state))
        for inst, (guard, nxt) in zip(spec.instances, encoded):
            enabled = _value(guard, subst)
            assert enabled == (inst.aid in concrete), (inst.name, inst.args)
            if enabled:
                assert tuple(_value(t, subst) for t in nxt) == concrete[inst.aid]


def test_claims_with_z3_terms_match_concrete_evaluation():
    m = machine_of("receipt-ack")
    pre = state_vars(m.spec, "0")
    terms = {c.name: claim_term(m.spec, c.name, pre) for c in m.claims if c.kind != "liveness"}
    for state in reachable("receipt-ack")[::40]:
        subst = [(v, z3.IntVal(x)) for v, x in zip(pre, state)]
        for name, term in terms.items():
            assert _value(term, subst) == reference_claim(m.spec, name, state), name


def test_a_guard_is_satisfiable_only_where_it_should_be():
    """Z3 finds a pre-state enabling decode_commit, and none enabling it without Success."""
    m = machine_of("abort-race")
    spec = m.spec
    pre = state_vars(spec, "0")
    inst = next(i for i in spec.instances if i.name == "decode_commit" and i.args == (1,))
    guard, _ = step_terms(spec, inst, pre)
    poll = pre[spec.layout.slot("poll", 1, 0)]
    assert z3.Solver().check(guard) == z3.sat
    s = z3.Solver()
    s.add(guard, poll != 1)
    assert s.check() == z3.unsat
