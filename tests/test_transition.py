"""The symbolic transition relation has exactly the compiled engine's successors."""

import random

import pytest
import z3

from kvproof.checker.symbolic.transition import TransitionSystem

from .conftest import machine_of, reachable
from .ring import Ring


def z3_successors(ts, state):
    """Every (action id, next state) the relation allows from ``state``, by blocking clauses."""
    xs, ys, tag = ts.state("a"), ts.state("b"), ts.tag("a")
    s = z3.SolverFor("QF_FD")
    s.add(ts.typed(xs), ts.typed(ys), ts.step(xs, ys, tag))
    for vals, v in zip(xs, state):
        for value, bit in vals.items():
            if not isinstance(bit, bool):
                s.add(bit if value == v else z3.Not(bit))
    out = set()
    while s.check() == z3.sat:
        m = s.model()
        aid = m.eval(tag, model_completion=True).as_long()
        nxt = ts.decode_state(m, ys)
        out.add((aid, nxt))
        s.add(z3.Or(tag != aid, z3.Not(ts.equal(ys, [{v: True} for v in nxt]))))
        assert len(out) < 500
    return out


@pytest.mark.parametrize("name", ["abort-race", "incident", "pr-41404", "lost-drain-ack-timeout"])
def test_successor_sets_agree_on_sampled_reachable_states(name):
    m = machine_of(name)
    ts = TransitionSystem(m.spec)
    rng = random.Random(11)
    states = reachable(name)
    for state in rng.sample(states, min(12, len(states))):
        assert z3_successors(ts, state) == set(m.successors(state))


@pytest.mark.slow  # inner loop: over 2.5 s (the README's test command runs it)
def test_claims_as_terms_agree_with_the_machine():
    m = machine_of("timeout-equals-latency")
    ts = TransitionSystem(m.spec)
    xs = ts.state("c")
    claims = [c for c in m.claims if c.kind != "liveness"]  # liveness: lasso obligations, not a state predicate
    assert {c.kind for c in claims} == {"invariant", "witness"}
    terms = {c.name: ts.safe(c.name, xs) if c.kind == "invariant" else ts.holds(c.name, xs) for c in claims}
    for state in reachable("timeout-equals-latency")[::50]:
        fix = [(bit, z3.BoolVal(value == v)) for vals, v in zip(xs, state)
               for value, bit in vals.items() if not isinstance(bit, bool)]
        for c in claims:
            got = z3.is_true(z3.simplify(z3.substitute(terms[c.name], *fix)))
            hit = m.claim_hits(c.name, state)
            expected = not hit if c.kind == "invariant" else hit
            assert got == expected, c.name


def test_the_type_invariant_allows_exactly_one_value_per_slot():
    ts = TransitionSystem(Ring())
    xs = ts.state("t")
    s = z3.Solver()
    s.add(ts.typed(xs), xs[0][3], xs[0][5])
    assert s.check() == z3.unsat
    s = z3.Solver()
    s.add(ts.typed(xs), z3.Not(z3.Or(*[xs[0][v] for v in range(8)])))
    assert s.check() == z3.unsat


def test_disabled_instances_are_left_out():
    m = machine_of("incident")  # client_aborts = false: decode_abort never enabled
    ts = TransitionSystem(m.spec)
    names = {m.instances[st.aid].name for st in ts.steps}
    assert "decode_abort" not in names and "decode_commit" in names


def test_rename_is_z3s_substitute_and_refuses_two_sorts():
    """The C-API renaming the transition system steps with builds, term for term, what
    ``z3.substitute`` builds (a mutant that pairs the constants in another order, or drops one,
    gives another term); a pair of two sorts is still an error."""
    from kvproof.checker.symbolic.transition import rename

    ts = TransitionSystem(machine_of("pr-41404").spec)
    for term in (ts.typed(ts.pre), ts.safe("no_write_after_release", ts.pre)):
        froms = ts.bits(ts.pre)
        tos = ts.bits(ts.state(7))
        got = rename(term, froms, tos)
        assert got.eq(z3.substitute(term, *zip(froms, tos)))
        assert not got.eq(z3.substitute(term, *zip(froms, tos[1:] + tos[:1])))
        assert not got.eq(term)
    with pytest.raises(z3.Z3Exception):
        rename(ts.safe("no_write_after_release", ts.pre), ts.bits(ts.pre)[:1], [z3.Int("n")])
