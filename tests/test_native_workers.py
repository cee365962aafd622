"""Several workers of the native backend (threads running the C, :mod:`kvproof.checker.explicit.native_workers`)
number every state as one thread does: the same states, transitions, depth, quiescent states,
claim hits, parents and actions (so the same shortest paths), and that is the Python engine's
outcome, on catalogue scenarios under every limit, on random specs, and with symmetry reduction.

Every test here hands even the smallest level to the threads (``SMALL`` = 0), so the threads
and the sharded visited set run on these small searches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvproof.checker.explicit.search import Limits, explore
from kvproof.model.machine import Machine

from .randspec import build, specs
from .test_native import (_SETTINGS, CASES, _outcome, _reduced, cache, native, native_of,  # noqa: F401 - cache: fixture
                          overflow_spec)

workers_mod = pytest.importorskip("kvproof.checker.explicit.native_workers")


@pytest.fixture(autouse=True)
def threaded(monkeypatch):
    """Every level goes to the threads, however small."""
    monkeypatch.setattr(workers_mod, "SMALL", 0)


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("name", ["abort-race", "incident"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(c) or "default")
def test_workers_have_the_one_thread_outcome_which_is_the_python_engines(name, case, workers):
    nm = native_of(name)
    ref = explore(Machine(nm.spec), **case)
    one = native.explore_native(nm, **case)
    got = native.explore_native(nm, workers=workers, **case)
    assert _outcome(got) == _outcome(one) == _outcome(ref)
    assert got.rows == ref.rows
    assert got.stats.workers == workers and len(got.stats.worker_cpu) == workers


def test_every_thread_takes_a_share_of_a_search_whose_tables_grow():
    """tp2x2 (34,171 states) makes every shard's table and the store grow several times; each
    thread slot spends CPU on it."""
    nm = native_of("tp2x2")
    ref = explore(Machine(nm.spec))
    for visited in ("exact", "fingerprint"):
        got = native.explore_native(nm, visited=visited, workers=2)
        assert _outcome(got) == _outcome(explore(Machine(nm.spec), visited=visited)), visited
        assert got.stats.states == ref.stats.states == 34171
        assert all(c > 0 for c in got.stats.worker_cpu), got.stats.worker_cpu


def test_a_sharded_store_answers_as_the_one_table_store():
    """:class:`ShardedVisited` and :class:`NativeVisited` flag the same first occurrences, in
    batches with repeats inside a batch and across batches, and store the same packed states."""
    import numpy as np

    nm = native_of("abort-race")
    rows = np.frombuffer(b"".join(explore(Machine(nm.spec), rows=True).rows), np.uint8).reshape(-1, nm.native.width)
    rng = np.random.default_rng(7)
    crew = workers_mod.Crew(nm.native, 3)
    try:
        for mode in ("exact", "fingerprint"):
            one = native.NativeVisited(nm.native, mode, nm.native.width)
            many = workers_mod.ShardedVisited(nm.native, mode, nm.native.width, crew)
            for _ in range(6):
                batch = [rows[rng.integers(0, len(rows), size=int(rng.integers(1, 900)))] for _ in range(3)]
                a, b = one.add_all(batch), many.add_all(batch)
                assert a.tolist() == b.tolist() and a.size
            assert one.size == many.size
            if mode == "exact":
                assert (one.store[:one.size] == many.store[:many.size]).all()
    finally:
        crew.close()


def test_a_reduced_search_with_workers_has_the_python_engines_outcome():
    m, canon, code = _reduced("requests-and-pages")
    ref = explore(m, canonicaliser=canon)
    got = native.explore_native(m, code=code, canonicaliser=canon, workers=2)
    assert _outcome(got) == _outcome(ref) and got.canonical and ref.stats.represented > ref.stats.states


def test_a_failing_range_check_under_workers_raises_the_python_engines_error():
    from kvproof.model.compiler import RangeCheckFailed

    with pytest.raises(RangeCheckFailed) as ref:
        explore(Machine(overflow_spec(4)))
    with pytest.raises(RangeCheckFailed) as got:
        native.explore_native(native.NativeMachine(overflow_spec(4), opt="-O0"), workers=2)
    assert str(got.value) == str(ref.value)


@settings(max_examples=10, **_SETTINGS)
@given(data=st.data())
def test_workers_have_the_python_engines_outcome_on_random_specs(data):
    from kvproof.model.compiler import RangeCheckFailed

    spec = build(data.draw(specs(), label="spec"))
    m = native.NativeMachine(spec, opt="-O0")
    for visited in ("exact", "fingerprint"):
        runs = []
        for search in (lambda: explore(Machine(spec), Limits(max_states=3000), visited=visited),
                       lambda: native.explore_native(m, Limits(max_states=3000), visited=visited, workers=2)):
            try:
                runs.append(_outcome(search()))
            except RangeCheckFailed as e:
                runs.append(str(e))
        assert runs[0] == runs[1], visited


@pytest.mark.parametrize("visited", ["exact", "fingerprint"])
def test_levels_of_many_chunks_have_the_python_engines_outcome(visited, monkeypatch):
    """Chunks of 50 states: every level is expanded, deduplicated, gathered and joined in many
    pieces across the threads."""
    monkeypatch.setattr(native, "_CHUNK", 25)
    nm = native_of("abort-race")
    for case in (dict(), dict(claims=[0, 3], stop_when_all_hit=True), dict(limits=Limits(max_states=700))):
        ref = explore(Machine(nm.spec), visited=visited, **case)
        got = native.explore_native(nm, visited=visited, workers=2, **case)
        assert _outcome(got) == _outcome(ref), case
