"""The concrete interpretation of the facade: its primitives, and the derived operations it writes
out again itself (so that a bug in the derivations the other interpretations share shows)."""

import pytest

from kvproof.model.ops import ConcreteOps, Disabled


def test_primitives_and_derived_operations():
    o = ConcreteOps((5, 7, 9))
    assert o.read(1) == 7
    assert o.read_at(0, 3, 2) == 9
    assert o.ne(1, 2) and not o.ne(2, 2)
    assert o.le(2, 2) and not o.le(3, 2)
    assert o.gt(3, 2) and o.ge(2, 2) and not o.ge(1, 2)
    assert o.implies(False, False) and not o.implies(True, False)
    assert o.is_in(3, (1, 3)) and not o.is_in(2, (1, 3))
    assert o.min_(4, 2) == 2 and o.max_(4, 2) == 4
    assert o.count([True, False, True]) == 2
    assert o.lookup((10, 20, 30), 1) == 20
    assert o.all_([]) is True and o.any_([]) is False


def test_require_raises_disabled_and_writes_build_a_copy():
    o = ConcreteOps((0, 0))
    o.write(1, 4)
    o.write_at(0, 2, 0, 3)
    assert o.result() == (3, 4)
    assert o.state == (0, 0)
    with pytest.raises(Disabled):
        o.require(False)


def test_index_reads_and_writes_are_bounds_checked():
    o = ConcreteOps((1, 2, 3))
    with pytest.raises(IndexError):
        o.read_at(0, 2, 2)
    with pytest.raises(IndexError):
        o.write_at(0, 2, -1, 0)
    with pytest.raises(IndexError):
        o.lookup((1,), 1)
