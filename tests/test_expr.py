"""The language's values: operators build expressions, misuse is refused when the spec loads.

Known answers through the reference interpreter and the compiled engine, and one
:class:`SpecError` line (file, line, what to use instead) for every way a spec could otherwise
let Python decide on a state value and silently build a different model.
"""

import pytest

from kvproof.model.compiler import RangeCheckFailed
from kvproof.model.machine import Machine, reference_claim, reference_successors
from kvproof.model.expr import SpecError
from kvproof.model.framework import Spec, action, invariant
from kvproof.model.layout import Domain, Field

I2 = Domain("i", 2)
V = Domain("v", 4)


def _spec(body, fields=None, claim=None, sentinel=False):
    """A one-action spec over ``x`` (a scalar), ``a`` (an array over I2) and ``b`` (two
    dimensions) whose action runs ``body(s, n)``."""

    class One(Spec):
        def build_fields(self):
            return fields or [Field("x", (), V), Field("a", (I2,), V, sentinel=sentinel), Field("m", (I2, I2), V)]

        def domain(self, name):  # pragma: no cover - no parameters
            raise KeyError(name)

        @action("t")
        def step(self, s, n):
            """The body under test."""
            body(s, n)

        @invariant
        def claim(self, s):
            """The claim under test (true by default)."""
            return True if claim is None else claim(s)

    return One()


def _next(spec, state):
    """The one successor by the reference interpreter, checked against the compiled engine."""
    ref = reference_successors(spec, state)
    m = Machine(spec)
    assert sorted(m.successors(bytes(state))) == sorted((a, bytes(t)) for a, t in ref)
    return ref[0][1] if ref else None


STATE = (1, 2, 3, 0, 1, 2, 3)  # x = 1, a = [2, 3], m = [[0, 1], [2, 3]]


# -- operators mean what the facade means ------------------------------------------------------
@pytest.mark.parametrize("expr, want", [
    (lambda s: s.x == 1, True), (lambda s: s.x != 1, False), (lambda s: s.x < 2, True),
    (lambda s: s.x <= 0, False), (lambda s: s.x > 0, True), (lambda s: s.x >= 2, False),
    (lambda s: s.a[0] + s.a[1] == 5, True), (lambda s: s.a[1] - 1 == 2, True),
    (lambda s: (s.x == 1) & (s.a[0] == 2), True), (lambda s: (s.x == 0) | (s.a[0] == 2), True),
    (lambda s: ~(s.x == 1), False), (lambda s: 1 + s.x == 2, True), (lambda s: (s.x == 1) == (s.a[0] == 2), True),
    (lambda s: s.m[1, s.x] == 3, True), (lambda s: s.a[s.x] == 3, True),
])
def test_operators_build_the_expression_the_facade_builds(expr, want):
    spec = _spec(lambda s, n: None, claim=expr)
    assert reference_claim(spec, "claim", STATE) is want
    m = Machine(spec)
    assert m.claim_hits("claim", bytes(STATE)) is (not want)


def test_an_effect_reads_back_what_the_action_wrote():
    def body(s, n):
        n.x = 3
        n.a[0] = n.x  # 3, not the pre-state's 1
        n.a[1] = n.a[0] + 0 if False else s.ops.ite(n.a[0] == 3, 0, 1)

    assert _next(_spec(body), STATE)[:3] == (3, 3, 0)


def test_a_dynamic_write_is_read_back_at_every_index():
    def body(s, n):
        n.a[s.x] = 0  # a[1] := 0
        n.x = s.ops.ite(n.a[1] == 0, 2, 3)
        n.m[0, 0] = n.a[s.x]

    assert _next(_spec(body), STATE)[:4] == (2, 2, 0, 0)


def test_an_override_can_undo_its_base_write():
    class Base(Spec):
        def build_fields(self):
            return [Field("x", (), V)]

        def domain(self, name):  # pragma: no cover
            raise KeyError(name)

        @action("t")
        def step(self, s, n):
            """Sets x to 3."""
            n.x = 3

    class Undo(Base):
        def step(self, s, n):
            super().step(s, n)
            n.x = s.x

    assert _next(Base(), (1,)) == (3,)
    assert _next(Undo(), (1,)) == (1,)


def test_a_condition_written_into_a_field_is_one_or_zero():
    def body(s, n):
        n.x = s.a[0] == 2

    assert _next(_spec(body), STATE)[0] == 1


# -- misuse is one SpecError line, raised when the spec is compiled --------------------------------
MISUSE = [
    (lambda s, n: s.require(1 if s.x == 1 else 0), "Python control flow on a state value"),
    (lambda s, n: s.require(s.x == 1 and s.a[0] == 2), "Python control flow on a state value"),
    (lambda s, n: s.require(not (s.x == 1)), "Python control flow on a state value"),
    (lambda s, n: s.require(s.x in (1, 2)), "Python control flow on a state value"),
    (lambda s, n: s.require(any([s.x == 1])), "Python control flow on a state value"),
    (lambda s, n: setattr(n, "x", max(s.x, s.a[0])), "Python control flow on a state value"),
    (lambda s, n: setattr(n, "x", (3, 2, 1, 0)[s.x]), "used as a Python index or number"),
    (lambda s, n: setattr(n, "x", int(s.x)), "used as a Python index or number"),
    (lambda s, n: {s.x}, "set member or dict key"),
    (lambda s, n: setattr(n, "x", s.x * 2), "multiplication"),
    (lambda s, n: setattr(n, "x", 3 - s.x), "a number minus a state value"),
    (lambda s, n: s.require(s.x), "require: expected a condition"),
    (lambda s, n: s.require((s.x == 1) < (s.a[0] == 2)), "expected a number, got a condition"),
    (lambda s, n: s.require(s.ops.eq(s.x == 1, 1)), "a condition and a number"),
    (lambda s, n: s.require(s.x & (s.a[0] == 1)), "expected a condition, got a number"),
    (lambda s, n: setattr(n, "x", 4), "writes 4, outside the field's values 0..3"),
    (lambda s, n: n.a.__setitem__(2, 0), "index 2 outside"),
    (lambda s, n: n.m.__setitem__((s.x, 0), 1), "only the last index may be a state value"),
    (lambda s, n: s.a.__setitem__(0, 1), "the pre-state is read-only"),
    (lambda s, n: setattr(s, "x", 1), "the pre-state is read-only"),
    (lambda s, n: s.require(s.ops.lookup((1, 2), 5) == 1), "outside a table of 2"),
]


@pytest.mark.parametrize("body, message", MISUSE, ids=[m for _, m in MISUSE])
def test_misuse_is_refused_with_the_file_the_line_and_what_to_use(body, message):
    with pytest.raises(SpecError) as e:
        Machine(_spec(body))
    text = str(e.value)
    assert "\n" not in text and message in text
    assert text.startswith("tests/test_expr.py:") or "test_expr.py:" in text.split(": ")[0]


def test_the_reference_interpreter_refuses_misuse_too():
    body = MISUSE[0][0]
    with pytest.raises(SpecError, match="Python control flow"):
        reference_successors(_spec(body), STATE)


def test_only_the_last_index_may_be_a_state_value():
    def body(s, n):
        n.m[s.x, 0] = 1

    with pytest.raises(SpecError, match=r"test_expr\.py:\d+: m\[\.\.\., 0\]: only the last index may be a state value"):
        Machine(_spec(body))


def test_a_write_outside_the_field_that_no_static_range_rules_out_fails_at_run_time():
    def body(s, n):
        n.x = s.x + 1  # from x = 3 this writes 4

    spec = _spec(body)
    m = Machine(spec)
    assert m.successors(bytes((2,) + STATE[1:]))[0][1][0] == 3
    with pytest.raises(RangeCheckFailed, match=r"step\(\): x: the value 4 lies outside"):
        m.successors(bytes((3,) + STATE[1:]))
    with pytest.raises(SpecError, match="writes 4, outside the field's values 0..3"):
        reference_successors(spec, (3,) + STATE[1:])


def test_a_write_whose_range_fits_needs_no_run_time_check():
    from kvproof.model.compiler import compile_successors

    def body(s, n):
        n.x = s.ops.ite(s.x < 3, s.x + 1, s.x)  # the range analysis cannot see the guard: 0..4
        n.a[0] = s.ops.min_(s.a[0] + 1, 3)  # 0..3 fits

    _, src = compile_successors(_spec(body))
    assert src.count("RangeCheckFailed(") == 1


def test_the_command_line_names_the_variant_line_and_exits_3(tmp_path, capsys):
    from kvproof.checker.cli.commands import main

    variant = tmp_path / "branchy.py"
    variant.write_text(
        "from kvproof.spec.sglang.protocol import PdProtocol\n"
        "from kvproof.spec.sglang.state import WR_FLIGHT\n\n"
        "class Branchy(PdProtocol):\n"
        "    def rank_writes_in_flight(self, s, r, pr):\n"
        "        if s.wr[r, pr, 0] == WR_FLIGHT:\n"
        "            return True\n"
        "        return False\n\n"
        "SCENARIO = {'name': 'branchy', 'sizes': {'decode_pages': 1, 'prefill_pages': 2, 'context_limit': 2},\n"
        "            'requests': [{'tenant': 'A', 'pages': 1}], 'engine': {'release_policy': 'drain_ack'},\n"
            "            'expect': {'default': 'verified'}}\n")
    code = main(["check", "--variant", str(variant), "--no-traces"])
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("\n") == 1 and "branchy.py:6: Python control flow on a state value" in err
