"""Counterexamples to induction on the ring, whose answers are known: read as a state, an action
and the conjunct it breaks."""

import pytest

from kvproof.checker.symbolic.cti import from_block, from_k_induction, render_failure
from kvproof.checker.symbolic.kinduction import k_induction
from kvproof.checker.symbolic.lemmas import BlockTimeout, Reachable, block, explore_all
from kvproof.checker.report.render import to_text
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.machine import Machine

from .ring import Ring


@pytest.fixture(scope="module")
def ring():
    spec = Ring()
    machine = Machine(spec)
    return TransitionSystem(spec), machine, explore_all(machine)[0]


def test_k_induction_that_stops_at_3_tells_the_step_from_5_to_7(ring):
    ts, machine, states = ring
    out = k_induction(ts, ["x_never_7"], max_k=3)  # x_never_7 is 4-inductive, not 3-
    assert out.status == "inconclusive" and [s[0] for s in out.cti.states] == [1, 3, 5, 7]
    failure = from_k_induction(machine, out.cti, Reachable(ts, states).generalise)
    assert failure.breaks == ["x_never_7"] and failure.action == "advance()"
    assert failure.changes == [("x", 5, 7)] and failure.state["x"] == 5
    assert failure.path == ["advance()", "advance()"] and failure.unreachable == ["x = 5"]
    text = to_text(render_failure("ring", failure), width=80)
    assert text.splitlines()[:3] == [
        "ring: k-induction: counterexample to induction",
        "  after 2 step(s) that keep the invariants: advance(), advance()",
        "  advance() from this state breaks x_never_7",
    ]
    assert "    x  5" in text and "  the step changes: x 5 → 7" in text
    assert "  no reachable state has: x = 5" in text


def test_a_proved_invariant_has_no_counterexample(ring):
    ts, _, _ = ring
    assert k_induction(ts, ["x_never_7"], max_k=4).cti is None


def test_the_lemma_loop_out_of_budget_hands_back_the_state_it_was_blocking(ring):
    ts, machine, states = ring
    with pytest.raises(BlockTimeout) as stop:
        block(ts, states, [], ts.safe("x_never_7", ts.pre), max_rounds=1)
    cti = stop.value.cti
    assert cti.state[0] == 7 and cti.action is None  # round 1 asks for a state breaking the claim
    failure = from_block(machine, cti, ["x_never_7"], None, Reachable(ts, states).generalise)
    text = to_text(render_failure("ring", failure), width=60)
    assert "ring: inductive invariant: counterexample to induction" in text
    assert "  this state breaks x_never_7" in text and "no reachable state has: x = 7" in text
