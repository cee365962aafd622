"""One semantics: the compiled engine and both Z3 encodings agree with the reference interpreter.

Random specs (:mod:`.randspec`: layouts, guards, conditional writes, two writes to one slot,
restoring writes, writes that read back the next state, overrides around ``super()``, every
kind of claim) are compared on random well-typed states: the successor sets (action and next
state) and every claim's value.  The test command's tier draws 200 specs; the thorough tier
(``pytest --thorough``) 300 more and 2,000 besides.  The catalogue: every reachable state of
every scenario at once (the reference semantics batched over whole columns, :mod:`.batch`, which
the random tier holds to the reference interpreter itself), a fixed sample of 12,000 states of
a larger scenario in the test command's tier.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.model.framework import Spec, action, invariant
from kvproof.model.layout import Domain, Field
from kvproof.model.scenario import builtin, builtin_names

from .agree import Interpretations, all_states_disagreements
from .conftest import a_third, sampled, tier
from .randspec import build, specs, states

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _agree_on_random_specs(data, states_per_spec: int = 3) -> None:
    plan = data.draw(specs(), label="spec")
    spec = build(plan)
    both = Interpretations(spec)
    init = spec.init_state()
    for state in [init] + [data.draw(states(plan, spec), label="state") for _ in range(states_per_spec)]:
        problems = both.disagreements(state)
        assert not problems, f"state {state}: " + "; ".join(problems[:5])


@pytest.mark.slow  # inner loop: over 2.5 s (the README's test command runs it)
@settings(max_examples=tier(100, 200), **_SETTINGS)
@given(data=st.data())
def test_every_interpretation_agrees_with_the_reference_on_random_specs(data):
    _agree_on_random_specs(data)


@pytest.mark.thorough
@settings(max_examples=300, **_SETTINGS)
@given(data=st.data())
def test_every_interpretation_agrees_with_the_reference_on_hundreds_more_random_specs(data):
    _agree_on_random_specs(data, states_per_spec=3)


@pytest.mark.thorough
@settings(max_examples=2000, **_SETTINGS)
@given(data=st.data())
def test_every_interpretation_agrees_with_the_reference_on_thousands_of_random_specs(data):
    _agree_on_random_specs(data, states_per_spec=3)


# -- the differential test notices what it must: known disagreements ------------------------------
V3 = Domain("v", 3)


class Restoring(Spec):
    """The compiled engine's dropped write (issue 12): an override writes a slot back to its
    pre-state value after the base action changed it."""

    def build_fields(self):
        return [Field("x", (), V3), Field("y", (), V3)]

    def domain(self, name):  # pragma: no cover - no parameters
        raise KeyError(name)

    @action("a")
    def step(self, s, n):
        """Sets x to 2 and y to 1."""
        n.x = 2
        n.y = 1

    @invariant
    def x_not_2(self, s):
        """x never becomes 2."""
        return s.x != 2


class Undo(Restoring):
    """Undoes the base class's write to x."""

    def step(self, s, n):
        super().step(s, n)
        n.x = s.x


def test_a_restoring_write_is_kept_by_every_interpretation():
    spec = Undo()
    both = Interpretations(spec)
    assert both.disagreements(spec.init_state()) == []
    m = Machine(spec)
    assert m.successors(m.init) == [(0, bytes([0, 1]))]  # x stays 0: the restore is not dropped
    assert not m.claim_hits("x_not_2", m.successors(m.init)[0][1])


def test_the_comparison_reports_a_compiled_engine_that_differs(monkeypatch):
    spec = Undo()
    both = Interpretations(spec, symbolic=False)
    wrong = lambda s: [(0, bytes([2, 1]))]  # what the compiler produced before the fix
    monkeypatch.setattr(both.machine, "successors", wrong)
    problems = both.disagreements(spec.init_state())
    assert problems and problems[0].startswith("compiled successors")


def test_a_bug_in_the_shared_derived_operations_is_caught(monkeypatch):
    """``any_`` dropping its last operand (tried by the auditor): the reference interpreter
    does not share the derivation, so the comparison sees the difference."""
    from kvproof.model.ops import Ops

    monkeypatch.setattr(Ops, "any_", lambda self, xs: self.or_(*list(xs)[:-1]))

    class AnyOf(Spec):
        def build_fields(self):
            return [Field("x", (), V3)]

        def domain(self, name):  # pragma: no cover
            raise KeyError(name)

        @action("a")
        def step(self, s, n):
            """Enabled where x is 0 or 1."""
            o = s.ops
            s.require(o.any_([s.x == 0, s.x == 1]))
            n.x = 2

    spec = AnyOf()
    both = Interpretations(spec)
    assert any("successors" in p for p in both.disagreements((1,)))


# -- the catalogue ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", a_third(builtin_names(), keep=("v0.5.22", "incident")))
def test_every_interpretation_agrees_with_the_reference_on_every_reachable_state(name):
    """Every reachable state of every scenario, all at once (:mod:`.batch`): the compiled
    engine's successors and claim hits, and both Z3 encodings' guards, next states and claims,
    against the reference semantics evaluated over whole columns.  In the test command's tier a
    scenario of more than 12,000 states is compared on a fixed sample of 12,000 of them
    (:func:`~.conftest.sampled`); ``--thorough`` compares every state of every scenario."""
    problems = all_states_disagreements(builtin(name).build(), sampled(name, tier(12_000, 10**9)))
    assert not problems, f"{name}: " + "; ".join(problems)


def test_the_catalogue_comparison_catches_a_compiled_engine_that_differs(monkeypatch):
    from kvproof.model import compiler

    def dropping(self, slot, value):  # the compiler before the fix: drops every restoring write
        value = compiler._c(value)
        if value.src != f"s[{slot}]":
            self.writes.append((str(slot), value))
            self.written.add(slot)

    monkeypatch.setattr(compiler.CodegenOps, "write", dropping)
    spec = Undo()
    states = [bytes(spec.init_state()), bytes([1, 1]), bytes([2, 0])]
    problems = all_states_disagreements(spec, states)
    assert any(p.startswith("compiled step()") for p in problems)


# -- the auditor's two variants (issue 12, problems 1 and 2) ------------------------------------------
def test_an_override_that_undoes_its_base_write_gets_the_reference_verdicts():
    """``super().decode_abort(s, n, r); n.outcome[r] = s.outcome[r]`` gave a violation at depth 1
    in the compiled engine that neither the reference nor Z3 had."""
    from kvproof.checker.explicit.search import explore
    from kvproof.spec.sglang.protocol import PdProtocol

    class KeepOutcome(PdProtocol):
        def decode_abort(self, s, n, r):
            super().decode_abort(s, n, r)
            n.outcome[r] = s.outcome[r]

    spec = KeepOutcome(builtin("abort-race").config)
    m = Machine(spec)
    ex = explore(m)
    assert ex.complete
    for c, sid in ex.hit_at.items():
        if m.claims[c].kind == "invariant":
            assert len(ex.path(sid)) > 1, m.claims[c].name  # no violation at depth 1
    seen, states = {m.init}, [m.init]
    for s in states:
        for _a, t in m.successors(s):
            if t not in seen:
                seen.add(t)
                states.append(t)
    assert not all_states_disagreements(spec, states, symbolic=True)  # the old compiler: 604 states differ


def test_python_control_flow_in_a_variant_is_refused_when_it_loads():
    """``if s.wr[r, pr, c] == WR_FLIGHT:`` was always false, ``if s.wr[...]:`` always true: the
    run exited 0 with another protocol's verdicts."""
    from kvproof.model.expr import SpecError
    from kvproof.spec.sglang.protocol import PdProtocol
    from kvproof.spec.sglang.state import WR_FLIGHT

    class Branchy(PdProtocol):
        def rank_writes_in_flight(self, s, r, pr):
            for c in range(self.send_len(r)):
                if s.wr[r, pr, c] == WR_FLIGHT:
                    return True
            return False

    class Ordered(PdProtocol):
        def rank_writes_in_flight(self, s, r, pr):  # `<` on a state value: an expression now
            return s.ops.any_(WR_FLIGHT - 1 < s.wr[r, w, c] for w in self.k.streams_of(pr)
                              for c in range(self.send_len(r)))

    cfg = builtin("pr-35049-drain-ack").config
    with pytest.raises(SpecError, match=r"test_differential\.py:\d+: Python control flow on a state value"):
        Machine(Branchy(cfg))
    assert explore(Machine(Ordered(cfg))).stats.states == explore(Machine(builtin("pr-35049-drain-ack").build())).stats.states
