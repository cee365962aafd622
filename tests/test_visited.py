"""The visited set: first occurrences in order, across merged runs, in both modes."""

import random

import numpy as np
import pytest

from kvproof.checker.visited import VisitedSet, collision_probability


@pytest.mark.parametrize("mode", ["exact", "fingerprint"])
def test_fresh_finds_first_occurrences_of_unseen_states_like_a_python_set(mode):
    rng = random.Random(7)
    store, seen = VisitedSet(mode, 3), set()
    for _ in range(40):  # many levels, so runs merge
        batch = [bytes(rng.randrange(4) for _ in range(3)) for _ in range(rng.randrange(0, 30))]
        keys = store.keys(batch)
        fresh = store.fresh(keys).tolist()
        expected, local = [], set()
        for i, s in enumerate(batch):
            if s not in seen and s not in local:
                local.add(s)
                expected.append(i)
        assert fresh == expected
        store.add(keys[np.array(fresh, dtype=np.int64)])
        seen |= local
        assert len(store) == len(seen)
    assert len(store.runs) <= 8  # merged, not one run per level


def test_exact_keys_keep_states_that_differ_only_in_trailing_zeros_apart():
    store = VisitedSet("exact", 3)
    keys = store.keys([b"\x01\x00\x00", b"\x01\x00\x01", b"\x00\x00\x00", b"\x01\x00\x00"])
    assert store.fresh(keys).tolist() == [0, 1, 2]


def test_exact_mode_rejects_a_state_of_another_width():
    with pytest.raises(ValueError, match="3 slots"):
        VisitedSet("exact", 3).keys([b"\x00\x00"])


def test_sizes_and_the_collision_bound():
    store = VisitedSet("fingerprint", 50)
    store.add(store.keys([bytes([i]) * 50 for i in range(10)]))
    assert store.nbytes == 80  # 8 bytes a state, whatever the state's size
    assert collision_probability(1) == 0.0
    assert collision_probability(2) == 2.0**-64
    assert 5e-9 < collision_probability(443_416) < 6e-9
    with pytest.raises(ValueError, match="expected one of"):
        VisitedSet("bloom", 3)
