"""How specs are written: discovery of actions and claims, overrides, Pre/Post."""

import pytest

from kvproof.model.machine import Machine, reference_successors
from kvproof.model.framework import Spec, action, invariant, witness
from kvproof.model.layout import Domain, Field

IDX = Domain("i", 2)
VAL = Domain("v", 3)


class Toy(Spec):
    """Two counters that saturate at 2, and a flag."""

    def build_fields(self):
        return [Field("x", (IDX,), VAL), Field("flag", (), VAL)]

    def domain(self, name):
        return IDX

    @action("counter", "i")
    def bump(self, s, n, i):
        """Increase counter i below 2."""
        o = s.ops
        s.require(o.lt(s.x[i], 2))
        n.x[i] = o.add(s.x[i], 1)

    @action("flagger")
    def raise_flag(self, s, n):
        """Raise the flag once both counters are at 2."""
        o = s.ops
        s.require(o.and_(o.eq(s.x[0], 2), o.eq(s.x[1], 2), o.eq(s.flag, 0)))
        n.flag = 1

    @invariant
    def counters_bounded(self, s):
        """Counters never pass 2."""
        o = s.ops
        return o.and_(o.le(s.x[0], 2), o.le(s.x[1], 2))

    @invariant(at="quiescent")
    def flag_raised_at_rest(self, s):
        """Where nothing moves, the flag is up."""
        return s.ops.eq(s.flag, 1)

    @witness
    def sometimes_flag(self, s):
        """The flag can go up."""
        return s.ops.eq(s.flag, 1)


class BumpTwice(Toy):
    def bump(self, s, n, i):  # an override without the decorator keeps the action
        o = s.ops
        s.require(o.eq(s.x[i], 0))
        n.x[i] = 2


def test_actions_and_claims_are_found_in_definition_order():
    toy = Toy()
    assert [a.name for a in toy.actions] == ["bump", "raise_flag"]
    assert [(i.name, i.args) for i in toy.instances] == [("bump", (0,)), ("bump", (1,)), ("raise_flag", ())]
    assert [(c.name, c.kind, c.at) for c in toy.claims] == [
        ("counters_bounded", "invariant", "always"),
        ("flag_raised_at_rest", "invariant", "quiescent"),
        ("sometimes_flag", "witness", "always"),
    ]
    assert toy.actions[0].doc == "Increase counter i below 2."


def test_an_override_keeps_the_action_and_its_position():
    variant = BumpTwice()
    assert [a.name for a in variant.actions] == ["bump", "raise_flag"]
    succ = reference_successors(variant, variant.init_state())
    assert sorted(s for _, s in succ) == [(0, 2, 0), (2, 0, 0)]


def test_effects_name_only_changed_fields_and_reads_see_the_pre_state():
    toy = Toy()
    succ = dict(reference_successors(toy, (1, 2, 0)))
    assert succ == {0: (2, 2, 0)}
    m = Machine(toy)
    assert sorted(m.successors(bytes((2, 2, 0)))) == [(2, bytes((2, 2, 1)))]


def test_unknown_fields_are_errors():
    from kvproof.model.expr import SpecError, SpecOps
    from kvproof.model.framework import Post, Pre
    from kvproof.model.ops import ConcreteOps

    lay = Toy().layout
    with pytest.raises(AttributeError):
        Pre(SpecOps(ConcreteOps((0, 0, 0))), lay).nope
    with pytest.raises(SpecError, match="not a scalar field"):
        Post(SpecOps(ConcreteOps((0, 0, 0))), lay).x = 1  # arrays are assigned by index


def test_invariant_rejects_an_unknown_position():
    with pytest.raises(ValueError):
        invariant(at="sometimes")
