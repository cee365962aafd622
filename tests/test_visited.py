"""The visited set: first occurrences in order, across merged runs, exact even under collisions."""

import random

import pytest

from kvproof.checker.explicit.visited import VisitedSet, collision_probability
from kvproof.checker.explicit.visited_small import SmallVisitedSet


def _levels(seed, width=3, values=4):
    rng = random.Random(seed)
    return [[bytes(rng.randrange(values) for _ in range(width)) for _ in range(rng.randrange(0, 30))]
            for _ in range(40)]  # many levels, so runs merge


def _run(store, levels):
    """Feed levels through the set; the positions it calls fresh, level by level."""
    out = []
    for batch in levels:
        keys = store.keys(batch)
        states = store.states(b"".join(batch))
        fresh = store.fresh(keys, states)
        store.add(keys[fresh], None if states is None else states[fresh])
        out.append(fresh.tolist())
    return out


def _python_set(levels):
    seen, out = set(), []
    for batch in levels:
        fresh = []
        for i, s in enumerate(batch):
            if s not in seen:
                seen.add(s)
                fresh.append(i)
        out.append(fresh)
    return out


@pytest.mark.parametrize("mode", ["exact", "fingerprint"])
def test_fresh_finds_first_occurrences_of_unseen_states_like_a_python_set(mode):
    levels = _levels(7)
    store = VisitedSet(mode, 3)
    assert _run(store, levels) == _python_set(levels)
    assert len(store) == len({s for b in levels for s in b}) and len(store.runs) <= 8


def test_exact_mode_stays_exact_when_fingerprints_collide():
    levels = _levels(3)
    crude = lambda s: s[0]  # noqa: E731 - four fingerprints for 64 states: collisions everywhere
    assert _run(VisitedSet("exact", 3, fingerprint=crude), levels) == _python_set(levels)
    lossy = _run(VisitedSet("fingerprint", 3, fingerprint=crude), levels)
    assert sum(map(len, lossy)) == 4  # fingerprint mode merges colliding states: why its risk is reported


def test_states_that_differ_only_in_trailing_zeros_stay_apart():
    store = VisitedSet("exact", 3)
    batch = [b"\x01\x00\x00", b"\x01\x00\x01", b"\x00\x00\x00", b"\x01\x00\x00"]
    assert store.fresh(store.keys(batch), store.states(b"".join(batch))).tolist() == [0, 1, 2]


def test_exact_mode_rejects_a_state_of_another_width():
    with pytest.raises(ValueError, match="3 slots"):
        VisitedSet("exact", 3).states(b"\x00\x00")


def test_sizes_and_the_collision_bound():
    batch = [bytes([i]) * 50 for i in range(10)]
    for mode, per_state in (("fingerprint", 8), ("exact", 58)):
        store = VisitedSet(mode, 50)
        keys = store.keys(batch)
        states = store.states(b"".join(batch))
        store.add(keys, states)
        assert store.nbytes == 10 * per_state
    assert collision_probability(1) == 0.0
    assert collision_probability(2) == 2.0**-64
    assert 5e-9 < collision_probability(443_416) < 6e-9
    with pytest.raises(ValueError, match="expected one of"):
        VisitedSet("bloom", 3)


# -- the Python set of a small search answers as the numpy set does ----------------------------
def _run_small(store, levels):
    out = []
    for batch in levels:
        fresh, keys = store.level(batch)
        store.add_level(keys, fresh)
        out.append(list(map(int, fresh)))
    return out


@pytest.mark.parametrize("mode", ["exact", "fingerprint"])
def test_the_small_set_finds_what_the_numpy_set_finds_and_grows_into_one(mode):
    levels = _levels(11)
    crude = lambda s: s[0]  # noqa: E731 - collisions everywhere: fingerprint mode merges them alike
    for fingerprint in (None, crude):
        small = SmallVisitedSet(mode, 3, fingerprint)
        big = VisitedSet(mode, 3, **({} if fingerprint is None else {"fingerprint": fingerprint}))
        assert _run_small(small, levels[:20]) == _run(big, levels[:20])
        grown = VisitedSet.holding(small)  # the second half on the numpy set the small one became
        assert isinstance(grown, VisitedSet) and len(grown) == len(small) == len(big)
        assert _run_small(grown, levels[20:]) == _run(big, levels[20:])
    assert _run_small(SmallVisitedSet("exact", 3), levels) == _python_set(levels)
    with pytest.raises(ValueError, match="expected one of"):
        SmallVisitedSet("bloom", 3)
