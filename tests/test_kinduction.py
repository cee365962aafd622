"""k-induction with a simple-path constraint, on a spec whose answers are known."""

import z3

from kvproof.checker.symbolic.kinduction import k_induction
from kvproof.checker.symbolic.transition import TransitionSystem

from .ring import Ring


def test_proves_a_4_inductive_invariant_at_exactly_k_4():
    out = k_induction(TransitionSystem(Ring()), ["x_never_7"], max_k=10)
    assert (out.status, out.k) == ("proved", 4)


def test_refutes_a_violated_invariant_at_its_depth():
    out = k_induction(TransitionSystem(Ring()), ["x_never_6"], max_k=10)
    assert (out.status, out.k) == ("refuted", 3)


def test_a_too_small_bound_is_unknown_never_proved():
    out = k_induction(TransitionSystem(Ring()), ["x_never_7"], max_k=3)
    assert out.status == "inconclusive" and "up to 3" in out.reason


def test_a_proved_strengthening_shortens_k():
    ts = TransitionSystem(Ring())
    odd = z3.And(*[z3.Not(ts.pre[0][v]) for v in (1, 3, 5)])  # inductive with x != 7
    out = k_induction(ts, ["x_never_7"], max_k=10, assume=odd)
    assert (out.status, out.k) == ("proved", 1)

