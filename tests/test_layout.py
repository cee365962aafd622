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
