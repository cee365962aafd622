"""Spacer finds inductive invariants nobody wrote, and refutes what does not hold."""

import z3

from kvproof.checker.horn import spacer_prove
from kvproof.checker.transition import TransitionSystem

from .conftest import machine_of
from .ring import Ring


def _inductive(ts, inv, names):
    xs, ys, tag = ts.pre, ts.state("post"), ts.tag("pre")
    post = z3.substitute(inv, *zip(ts.bits(xs), ts.bits(ys)))
    safe = z3.And(*[ts.safe(n, xs) for n in names])
    for ob in (z3.And(ts.init(xs), z3.Not(inv)),
               z3.And(inv, ts.typed(xs), ts.step(xs, ys, tag), ts.typed(ys), z3.Not(post)),
               z3.And(inv, ts.typed(xs), z3.Not(safe))):
        s = z3.Solver()
        s.add(ob)
        if s.check() != z3.unsat:
            return False
    return True


def test_proves_the_ring_and_the_invariant_is_inductive():
    ts = TransitionSystem(Ring())
    out = spacer_prove(ts, ["x_never_7", "flag_only_after_4"], 30)
    assert out.status == "proved"
    assert _inductive(ts, out.invariant, ["x_never_7", "flag_only_after_4"])


def test_refutes_a_violated_invariant():
    out = spacer_prove(TransitionSystem(Ring()), ["x_never_6"], 30)
    assert out.status == "refuted"


def test_proves_a_protocol_claim():
    m = machine_of("pr-35049-drain-ack")
    ts = TransitionSystem(m.spec)
    out = spacer_prove(ts, ["pages_conserved"], 60)
    assert out.status == "proved" and _inductive(ts, out.invariant, ["pages_conserved"])
