"""The explicit engine on tiny hand-built graphs whose answers are known."""

from kvproof.checker.explicit.search import Limits, explore
from kvproof.model.framework import Claim

CLAIMS = [
    Claim("safe", "invariant", "always", ""),
    Claim("reach", "witness", "always", ""),
    Claim("rests_well", "invariant", "quiescent", ""),
]


class Graph:
    """States are one byte; action id = target state; claims hit on listed states."""

    claims = CLAIMS

    def __init__(self, edges, bad=(), witness=(), bad_rest=()):
        self.edges, self.bad, self.witness, self.bad_rest = edges, set(bad), set(witness), set(bad_rest)
        self.init = bytes([0])

    def successors(self, s):
        return [(t, bytes([t])) for t in self.edges.get(s[0], [])]

    def hits(self, s):
        return (s[0] in self.bad) | (s[0] in self.witness) << 1

    def quiescent_hits(self, s):
        return (s[0] in self.bad_rest) << 2


# 0 -> 1 -> 2 -> 3 -> 4 (bad) ; 0 -> 5 -> 4 ; 5 -> 6 ; cycle 6 -> 5
DIAMOND = {0: [1, 5], 1: [2], 2: [3], 3: [4], 5: [4, 6], 6: [5]}


def test_counts_states_transitions_depth_and_quiescent_states():
    ex = explore(Graph(DIAMOND))
    assert ex.complete
    assert ex.stats.states == 7
    assert ex.stats.transitions == 8
    assert ex.stats.depth == 3  # 3 is the deepest (0-1-2-3); 4 is reached via 5 at depth 2
    assert ex.stats.quiescent == 1  # only state 4


def test_the_counterexample_is_a_shortest_path():
    g = Graph(DIAMOND, bad={4})
    ex = explore(g)
    assert ex.path(ex.hit_at[0]) == [5, 4]  # not 1, 2, 3, 4


def test_witness_and_quiescent_claims():
    ex = explore(Graph(DIAMOND, witness={6}, bad_rest={4}))
    assert ex.path(ex.hit_at[1]) == [5, 6]
    assert ex.path(ex.hit_at[2]) == [5, 4]
    ex2 = explore(Graph(DIAMOND, witness={9}))
    assert 1 not in ex2.hit_at and ex2.complete


def test_a_violated_initial_state_has_an_empty_counterexample():
    ex = explore(Graph(DIAMOND, bad={0}))
    assert ex.path(ex.hit_at[0]) == []


def test_limits_end_incomplete_with_the_reason():
    chain = {i: [i + 1] for i in range(50)}
    ex = explore(Graph(chain), Limits(max_states=10))
    assert not ex.complete and "state limit 10" in ex.reason and ex.stats.states == 10
    ex = explore(Graph(chain), Limits(max_depth=5))
    assert not ex.complete and "depth limit 5" in ex.reason and ex.stats.states == 6
    ex = explore(Graph(chain), Limits(max_depth=50))
    assert ex.complete  # the whole chain fits: a limit that is not hit does not truncate


def test_a_violation_found_before_a_limit_is_still_reported():
    chain = {i: [i + 1] for i in range(50)}
    ex = explore(Graph(chain, bad={3}), Limits(max_states=10))
    assert not ex.complete and ex.path(ex.hit_at[0]) == [1, 2, 3]


def test_stop_when_all_hit_ends_early():
    chain = {i: [i + 1] for i in range(50)}
    ex = explore(Graph(chain, bad={3}), claims=[0], stop_when_all_hit=True)
    assert ex.stats.states < 10 and 0 in ex.hit_at


def test_a_time_limit_ends_incomplete():
    class Long(Graph):
        def successors(self, s):
            n = int.from_bytes(s, "big") + 1
            return [] if n >= 60_000 else [(0, n.to_bytes(2, "big"))]

    g = Long({})
    g.init = bytes(2)
    ex = explore(g, Limits(max_seconds=1e-6))
    assert not ex.complete and "time limit" in ex.reason and ex.stats.states < 60_000


def test_a_started_budget_is_shared_and_counts_from_its_start():
    import time

    t0 = time.perf_counter()
    assert Limits(max_seconds=2.0).deadline(t0) == t0 + 2.0  # no budget started: from the phase's start
    shared = Limits(max_seconds=2.0).shared()
    assert shared.started is not None and shared.shared() is shared
    assert shared.deadline(t0 + 100) == shared.started + 2.0  # a started budget ignores the phase's start
    spent = Limits(max_seconds=1.0, started=t0 - 5)
    assert spent.expired() and not Limits(max_seconds=1.0).expired() and spent.time_reason == "time limit 1 s reached"
    ex = explore(Graph({i: [i + 1] for i in range(5000)}), spent)
    assert not ex.complete and ex.reason == "time limit 1 s reached"


def test_a_quiescent_claim_keeps_its_first_hit_in_a_level():
    """Two dead ends at the same depth: the claim's hit is the first found (the one a search
    tracking only it, or stopping once it hit, reports), not the last of the level."""
    g = Graph({0: [1, 2], 1: [3], 2: [4]}, bad_rest={3, 4})
    for claims, stop in ((None, False), ([2], False), ([2], True)):
        ex = explore(g, claims=claims, stop_when_all_hit=stop)
        assert ex.path(ex.hit_at[2]) == [1, 3], (claims, stop)


def test_a_search_that_outgrows_the_python_set_finds_what_one_that_stays_in_it_finds(monkeypatch):
    """The visited set starts as a Python set (no numpy for a small check) and becomes the numpy
    one past ``SMALL_STATES`` states: with the threshold lowered, the same search moves over
    after a few levels and must find the same states, numbers, parents, actions and hits
    (exact, fingerprints, symmetry reduction, a state limit, a stop once every claim hit)."""
    from kvproof.checker.explicit import visited_small
    from kvproof.checker.explicit.symmetry import reduction_for
    from kvproof.checker.explicit.visited import VisitedSet

    from .conftest import machine_of
    from .symmetric import machine

    def outcome(m, **kw):
        ex = explore(m, rows=True, **kw)
        s = ex.stats
        return ((s.states, s.transitions, s.depth, s.quiescent, s.represented), ex.complete, ex.reason, ex.hit_at,
                list(ex._parent), list(ex._via), ex.rows)

    grown = []
    real = VisitedSet.holding
    monkeypatch.setattr(VisitedSet, "holding", lambda small: grown.append(1) or real(small))
    race, sym = machine_of("abort-race"), machine("abort-race", "AA")
    canon = reduction_for(sym).canonicaliser
    runs = [(race, {}), (race, dict(visited="fingerprint")), (race, dict(limits=Limits(max_states=1000))),
            (race, dict(claims=[0, 1], stop_when_all_hit=True)),
            (sym, dict(canonicaliser=canon, visited="fingerprint"))]
    small = [outcome(m, **kw) for m, kw in runs]
    assert not grown
    monkeypatch.setattr(visited_small, "SMALL_STATES", 40)
    for (m, kw), want in zip(runs, small):
        assert outcome(m, **kw) == want, kw
    assert len(grown) == len(runs)
    assert small[0][0][0] == 2_958 and small[3][2] == "stopped once every claim asked for had hit"


def test_a_levels_edges_appended_with_numpy_are_the_python_loops(monkeypatch):
    """The graph search appends a large level's edges with numpy (``_add_edges_numpy``): with the
    threshold lowered to every level and raised above all, the graph of a scenario (complete, and
    cut by a state limit, which leaves edges out and states not expanded) is the same array for
    array, and so is its search's outcome."""
    from kvproof.checker.explicit import search

    from .conftest import machine_of

    def graph(m, limits):
        ex = explore(m, limits, edges=True)
        g = ex.graph
        return (ex.stats.states, ex.stats.transitions, ex.complete, ex.hit_at, g.complete, g.reason,
                bytes(g.offsets), bytes(g.targets), bytes(g.aids), bytes(g.expanded), list(g.depth), list(g.parent))

    race = machine_of("abort-race")
    got = {}
    for threshold in (0, 10**9):
        monkeypatch.setattr(search, "_NUMPY_EDGES", threshold)
        got[threshold] = [graph(race, limits) for limits in (Limits(), Limits(max_states=700), Limits(max_depth=6))]
    assert got[0] == got[10**9]
    full, cut, _ = got[0]
    assert full[0] == 2_958 and full[4] and not cut[4] and cut[5] == "state limit 700 reached"
    assert 0 in cut[9]  # the cut left a state not expanded


def test_the_graph_search_numbers_states_as_they_are_first_looked_up():
    """``_numbering``: states given are numbered in order, a new one gets the next number when it
    is looked up, a known one keeps its number, and the order of the keys is the numbering."""
    from kvproof.checker.explicit.search import _numbering

    index = _numbering([b"a", b"b"])
    assert list(map(index.__getitem__, [b"b", b"c", b"a", b"d", b"c"])) == [1, 2, 0, 3, 2]
    assert list(index) == [b"a", b"b", b"c", b"d"] and len(index) == 4


def test_a_claim_check_that_raises_is_raised_for_the_state_the_level_reaches_first():
    """``_level_masks`` computes a level's claim bits at once; when a check raises it gives up and
    the states are checked one by one, so a search that stops once every claim hit, at a state
    before the one whose check raises, ends as it did without the bulk masks."""
    from kvproof.checker.explicit.search import _level_masks

    def boom(s):
        raise ValueError("range check")

    assert _level_masks([lambda s: 3, lambda s: 1], [b"x", b"y"], 2) == [2, 0]
    assert _level_masks([boom], [b"x"], 0) == []
    assert _level_masks([lambda s: 1, boom], [b"x", b"y"], 1) is None

    class Raising(Graph):
        def hits(self, s):  # state 1 hits every claim; state 5 (the same level, after it) raises
            if s[0] == 5:
                raise ValueError("range check")
            return 0b11 if s[0] == 1 else 0

    ex = explore(Raising(DIAMOND), claims=[0, 1], stop_when_all_hit=True)
    assert ex.hit_at == {0: 1, 1: 1} and ex.reason == "stopped once every claim asked for had hit"
