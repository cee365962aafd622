"""How specs are written: discovery of actions and claims, overrides, Pre/Post."""

import pytest

from kvproof.model.machine import Machine, reference_successors
from kvproof.model.framework import ConfiguredSpec, Spec, action, invariant, witness
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


# -- widening a guard through super() --------------------------------------------------------------
ROW = Domain("row", 2)
PTR = Domain("ptr", 3)  # 2 is NONE


class Guarded(Spec):
    """A pointer into a two-entry row and a counter: ``step`` needs ``p`` to point at a 0 entry
    (reading the row only where ``p`` is not NONE), then sets that entry and counts."""

    def build_fields(self):
        return [Field("p", (), PTR, 2), Field("row", (ROW,), VAL), Field("k", (), VAL)]

    def domain(self, name):  # pragma: no cover - no parameters
        raise KeyError(name)

    @action("a")
    def step(self, s, n):
        """Set the entry p points at; count."""
        s.require(s.p != 2)
        s.require(s.row[s.p] == 0)
        s.require(s.k < 2)
        n.row[s.p] = 1
        n.k = s.k + 1


class Widened(Guarded):
    """Also steps where entry 0 is already 1 and p points at it (p must still point somewhere)."""

    def step(self, s, n):
        s.require(s.p != 2)  # outside the block: still narrows
        with s.widen((s.row[0] == 1) & (s.p == 0) & (s.k < 2)):
            super().step(s, n)


def _every_state(spec):
    from itertools import product

    return [tuple(t) for t in product(range(3), range(3), range(3), range(3))]


def test_widen_enables_the_action_where_the_extra_condition_holds_with_the_same_effect():
    base, wide = Guarded(), Widened()
    # p = 0, row = (1, 0), k = 1: the base needs row[p] == 0; the widened one steps anyway
    assert reference_successors(base, (0, 1, 0, 1)) == []
    assert reference_successors(wide, (0, 1, 0, 1)) == [(0, (0, 1, 0, 2))]
    assert Machine(wide).successors(bytes((0, 1, 0, 1))) == [(0, bytes((0, 1, 0, 2)))]
    # where neither holds, neither steps; where the base steps, the widened one steps alike
    assert reference_successors(wide, (1, 1, 1, 0)) == []
    assert reference_successors(wide, (1, 1, 0, 0)) == reference_successors(base, (1, 1, 0, 0)) != []


def test_widen_keeps_the_guards_required_outside_the_block_and_static_disabling():
    wide = Widened()
    assert reference_successors(wide, (2, 1, 0, 0)) == []  # p is NONE: the outer require holds it back

    class Off(Guarded):
        def step(self, s, n):
            with s.widen(True):
                s.require(False)  # a flag that is off rules the instance out, widened or not
                super().step(s, n)

    assert Off().instances and not Machine(Off()).successors(bytes((0, 0, 0, 0)))
    assert reference_successors(Off(), (0, 0, 0, 0)) == []


def test_every_interpretation_agrees_on_a_widened_guard_in_every_state():
    from .agree import Interpretations

    for spec in (Guarded(), Widened()):
        both = Interpretations(spec)
        for state in _every_state(spec):
            assert not both.disagreements(state), (type(spec).__name__, state)


def test_where_the_extra_condition_is_false_the_reference_stops_at_the_first_false_guard():
    # p = NONE: the row read s.row[s.p] would be outside the row; the base never reads it, and
    # neither does the widened action where its extra condition is false
    class Late(Guarded):
        def step(self, s, n):
            with s.widen(s.k == 2):
                super().step(s, n)

    assert reference_successors(Late(), (2, 0, 0, 0)) == []
    m = Machine(Late())
    assert m.successors(bytes((2, 0, 0, 0))) == []


def test_widen_takes_a_condition():
    from kvproof.model.expr import SpecError

    class Bad(Guarded):
        def step(self, s, n):
            with s.widen(s.k):
                super().step(s, n)

    with pytest.raises(SpecError, match=r"test_framework\.py:\d+: widen: expected a condition, got a number"):
        Machine(Bad())


# -- ConfiguredSpec: a spec built from one configuration object -------------------------------------
class _Cfg:
    def __init__(self, n, problems=(), engine="flags"):
        self.n, self._problems, self.engine = n, list(problems), engine

    def problems(self):
        return list(self._problems)


class _Codes:
    def __init__(self, cfg):
        self.idx = Domain("i", cfg.n)


def _fields(k):
    return [Field("x", (k.idx,), VAL)]


class Configured(ConfiguredSpec):
    """A counter per index; a configuration of more than 3 indices is refused by the class."""

    codes = _Codes
    fields_of = staticmethod(_fields)

    def config_problems(self, cfg):
        return [f"n: {cfg.n} > 3"] if cfg.n > 3 else []

    def domain(self, name):
        return self.k.idx

    @action("counter", "i")
    def bump(self, s, n, i):
        """Increase counter i below 2."""
        s.require(s.ops.lt(s.x[i], 2))
        n.x[i] = s.ops.add(s.x[i], 1)


def test_a_configured_spec_keeps_cfg_engine_and_codes_and_builds_its_fields_from_the_codes():
    cfg = _Cfg(3)
    spec = Configured(cfg)
    assert (spec.cfg, spec.e, spec.k.idx.size) == (cfg, "flags", 3)
    assert [f.name for f in spec.build_fields()] == ["x"] and len(spec.instances) == 3
    assert len(reference_successors(spec, Machine(spec).init)) == 3


def test_a_configured_spec_refuses_the_configurations_first_problem_then_the_classes():
    with pytest.raises(ValueError, match=r"^a: bad$"):
        Configured(_Cfg(5, ["a: bad", "b: worse"]))
    with pytest.raises(ValueError, match=r"^n: 5 > 3$"):
        Configured(_Cfg(5))
