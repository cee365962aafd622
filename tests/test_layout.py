"""State layout: flat slots, labels, encode/decode, sentinels and type errors."""

import pytest

from kvproof.model.layout import Domain, Field, Layout, LayoutError

REQ = Domain("req", 2, ("R0", "R1"))
CHUNK = Domain("chunk", 3)
PHASE = Domain("phase", 3, ("new", "busy", "done"))
PAGE = Domain("page", 2, ("p0", "p1"))


def layout():
    return Layout([
        Field("clock", (), Domain("clock", 4)),
        Field("phase", (REQ,), PHASE),
        Field("wr", (REQ, CHUNK), Domain("w", 3), 0),
        Field("owner", (PAGE,), Domain("owner", 3, ("free", "R0", "R1")), 0, sentinel=True),
    ])


def test_slots_are_laid_out_in_order_with_sentinels():
    lay = layout()
    assert lay.base == {"clock": 0, "phase": 1, "wr": 3, "owner": 9}
    assert lay.size == 12
    assert lay.slot("wr", 1, 2) == 3 + 1 * 3 + 2
    assert lay.sentinel_slots() == [(11, 0)]
    with pytest.raises(IndexError):
        lay.slot("phase", 2)


def test_decode_and_encode_round_trip_with_labels():
    lay = layout()
    state = (3, 1, 2, 0, 1, 2, 0, 0, 1, 1, 0, 0)
    named = lay.decode(state)
    assert named["phase"] == ["busy", "done"]
    assert named["wr"] == [[0, 1, 2], [0, 0, 1]]
    assert named["owner"] == ["R0", "free"]  # sentinel hidden
    assert lay.encode(named) == state


def test_encode_names_what_does_not_fit():
    lay = layout()
    named = lay.decode(lay.init_state())
    named["phase"] = ["new", "sleeping"]
    with pytest.raises(LayoutError, match="phase.*sleeping"):
        lay.encode(named)
    del named["phase"]
    with pytest.raises(LayoutError, match="missing field"):
        lay.encode(named)


def test_type_errors_catch_out_of_range_values_and_a_changed_sentinel():
    lay = layout()
    ok = list(lay.init_state())
    assert lay.type_errors(ok) == []
    bad = list(ok)
    bad[1] = 7
    bad[11] = 2
    errors = lay.type_errors(bad)
    assert any("phase" in e for e in errors) and any("sentinel" in e for e in errors)


def test_bad_declarations_are_refused():
    with pytest.raises(LayoutError):
        Domain("x", 2, ("a",))
    with pytest.raises(LayoutError):
        Layout([Field("a", (), PHASE), Field("a", (), PHASE)])
    with pytest.raises(LayoutError):
        Layout([Field("a", (), PHASE, sentinel=True)])


def test_sentinels_end_every_row_of_a_multi_dimensional_field():
    lay = Layout([Field("c", (REQ, CHUNK, PAGE), Domain("v", 4), 3, sentinel=True)])
    assert lay.size == 2 * 3 * 3
    assert lay.slot("c", 1, 2, 1) == (1 * 3 + 2) * 3 + 1
    assert lay.slot("c", 1, 2, 2) == (1 * 3 + 2) * 3 + 2  # the NONE index reads the row's sentinel
    assert lay.row_base("c", 1, 0) == 9
    assert len(lay.sentinel_slots()) == 6
    named = lay.decode(lay.init_state())
    assert named["c"] == [[[3, 3]] * 3] * 2
    assert lay.encode(named) == lay.init_state()


def test_a_field_of_more_than_256_codes_makes_the_layout_wide():
    from kvproof.model.layout import MAX_WIDE_CODES

    narrow = layout()
    assert not narrow.wide and narrow.too_wide() is None
    assert isinstance(narrow.pack(narrow.init_state()), bytes)
    wide = Layout([Field("clock", (), Domain("clock", 4)), Field("owner", (PAGE,), Domain("owner", 257), 256)])
    assert wide.wide and wide.pack(wide.init_state()) == (0, 256, 256)
    assert "owner has 257 codes" in wide.too_wide()
    assert wide.encode(wide.decode((3, 0, 256))) == (3, 0, 256)
    Domain("x", MAX_WIDE_CODES)  # the widest domain
    with pytest.raises(LayoutError, match="outside 1..65536"):
        Domain("x", MAX_WIDE_CODES + 1)


def test_a_wide_spec_runs_on_the_python_paths_and_the_byte_searches_refuse_it():
    """States of more than a byte a slot are tuples: the reference interpreter and the compiled
    Python steps agree on them (values past 255 included), and the explicit engine and the C
    code refuse the spec with one line naming the field."""
    from kvproof.checker.explicit.native import NativeUnavailable, native_code
    from kvproof.checker.explicit.search import explore
    from kvproof.model.compiler import compile_steps, compile_successors_of
    from kvproof.model.framework import Spec, action, invariant
    from kvproof.model.machine import Machine

    class Wide(Spec):
        """x counts 0, 100, ..., 500, 0 (a domain of 600 codes)."""

        def build_fields(self):
            return [Field("x", (), Domain("x", 600))]

        @action("wide")
        def advance(self, s, n):
            """x moves on by 100."""
            o = s.ops
            n.x = o.ite(o.lt(s.x, 500), o.add(s.x, 100), o.const(0))

        @invariant
        def x_never_300(self, s):
            """Fails after three steps (300 does not fit a byte)."""
            return s.ops.ne(s.x, 300)

    spec = Wide()
    machine = Machine(spec)
    assert machine.init == (0,)
    step = compile_steps(spec, [0])[0]
    succ = compile_successors_of(spec, [0])
    s, seen = machine.init, []
    for _ in range(7):
        (aid, t), = machine.successors(s)
        assert step(s) == t and succ(s) == [(0, t)] and isinstance(t, tuple)
        seen.append(t[0])
        s = t
    assert seen == [100, 200, 300, 400, 500, 0, 100]
    assert machine.hits((300,)) == 1 and machine.hits((400,)) == 0
    with pytest.raises(ValueError, match="one byte a state slot: field x has 600 codes"):
        explore(machine)
    with pytest.raises(NativeUnavailable, match="one byte a state slot: field x has 600 codes"):
        native_code(machine)
