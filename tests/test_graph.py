"""The reachable-graph service (``explore`` with ``rows`` and ``edges``) against a naive BFS.

The naive search below is the plainest one-state-at-a-time breadth-first search: it numbers
states as it finds them, keeps every edge to a state in the graph, and leaves a successor out
when a limit forbids a new state (its parent is then not *expanded*).  The service must give
the same states, numbering, edges, parent tree, depths, expanded flags and first claim hits,
on hand-built graphs and on catalogue scenarios; and ``check_scenario`` must search once when
it is asked for a liveness claim.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import kvproof.checker.explicit.backends.base as backends_base
import kvproof.checker.explicit.backends.python as python_backend
import kvproof.checker.explicit.liveness as liveness
import kvproof.checker.explicit.run as run
from kvproof.checker.explicit.search import Limits, explore
from kvproof.checker.explicit.liveness import build_graph
from kvproof.model.scenario import builtin

from .conftest import machine_of
from .test_explicit import DIAMOND, Graph


def naive(m, max_states=None, max_depth=None):
    """States, per-state edges ``[(aid, target)]``, parent, via, depth, expanded flags and the
    first state where each claim hits (quiescent claims only where nothing is enabled)."""
    index, states = {m.init: 0}, [m.init]
    parent, via, depth, out, expanded = [-1], [-1], [0], [], []
    i = 0
    while i < len(states):
        edges, full = [], True
        for a, t in m.successors(states[i]):
            j = index.get(t)
            if j is None:
                if (max_depth is not None and depth[i] + 1 > max_depth) or \
                        (max_states is not None and len(states) >= max_states):
                    full = False
                    continue
                j = index[t] = len(states)
                states.append(t)
                parent.append(i)
                via.append(a)
                depth.append(depth[i] + 1)
            edges.append((a, j))
        out.append(edges)
        expanded.append(full)
        i += 1
    hit = {}
    for sid, s in enumerate(states):
        mask = m.hits(s) | (m.quiescent_hits(s) if not out[sid] else 0)
        for c in range(len(m.claims)):
            if mask >> c & 1:
                hit.setdefault(c, sid)
    return states, out, parent, via, depth, expanded, hit


def agree(m, limits=Limits()):
    """The service's graph, rows and (on a complete search) hits equal the naive search's."""
    states, out, parent, via, depth, expanded, hit = naive(m, limits.max_states, limits.max_depth)
    ex = explore(m, limits, rows=True, edges=True)
    g = ex.graph
    assert ex.rows == states and g.states == states
    assert [g.out(u) for u in range(len(states))] == out
    assert list(g.parent) == parent and list(g.via) == via and list(g.depth) == depth
    assert [g.is_expanded(u) for u in range(len(states))] == expanded
    assert g.complete == all(expanded)
    assert g.stats.states == len(states) and g.stats.transitions == sum(map(len, out))
    assert g.stats.quiescent == sum(1 for u, e in enumerate(out) if not e and expanded[u])
    if g.complete:
        assert ex.complete and ex.hit_at == hit
        for c, sid in hit.items():  # a shortest path: as long as the state's depth
            assert len(ex.path(sid)) == depth[sid]
    plain = explore(m, limits)  # keeping rows and edges changes nothing of the search's own outcome
    assert (plain.complete, plain.reason, plain.hit_at) == (ex.complete, ex.reason, ex.hit_at)
    assert (plain.stats.states, plain.stats.transitions, plain.stats.depth, plain.stats.quiescent) == \
        (ex.stats.states, ex.stats.transitions, ex.stats.depth, ex.stats.quiescent)
    assert [plain.path(s) for s in plain.hit_at.values()] == [ex.path(s) for s in ex.hit_at.values()]
    return ex


# a level where two states share a successor, a self-loop, a dead end, and a cycle back to the start
SHARED = {0: [1, 2, 3], 1: [4, 1], 2: [4, 5], 3: [5, 0], 4: [6], 5: [6, 2], 6: []}


@pytest.mark.parametrize("edges", [DIAMOND, SHARED, {i: [i + 1] for i in range(30)}])
@pytest.mark.parametrize("limits", [Limits(), Limits(max_states=3), Limits(max_states=5), Limits(max_depth=1),
                                    Limits(max_depth=2), Limits(max_states=4, max_depth=2)])
def test_the_service_agrees_with_a_naive_bfs_on_hand_built_graphs(edges, limits):
    agree(Graph(edges, bad={4}, witness={6}, bad_rest={4, 6}), limits)


def test_a_state_limit_still_expands_the_last_states_found():
    # 0 -> 1, 2; 1 -> 3; 2 -> 1: with 3 states, 1 and 2 are expanded after the limit; 2's edge
    # to 1 is kept (2 is expanded), 1's successor 3 is left out (1 is not)
    g = explore(Graph({0: [1, 2], 1: [3], 2: [1]}), Limits(max_states=3), edges=True).graph
    assert [g.out(u) for u in range(3)] == [[(1, 1), (2, 2)], [], [(1, 1)]]
    assert [g.is_expanded(u) for u in range(3)] == [True, False, True]
    assert not g.complete and g.reason == "state limit 3 reached"


def test_a_search_stopped_once_every_claim_hit_still_builds_the_whole_graph():
    # 4 hits first in level 2 (found from 1); the search ends once 1's successors are in, before
    # 5 (found from 2): 5 states, as a one-at-a-time search would have found by then
    m = Graph(SHARED, bad={4})
    ex = explore(m, claims=[0], stop_when_all_hit=True, edges=True)
    stopped = explore(m, claims=[0], stop_when_all_hit=True)
    assert not ex.complete and ex.reason == stopped.reason == "stopped once every claim asked for had hit"
    assert ex.stats.states == stopped.stats.states == 5 and ex.hit_at == stopped.hit_at == {0: 4}
    assert ex.stats.transitions == stopped.stats.transitions
    assert ex.graph.complete and ex.graph.stats.states == 7
    assert ex.graph.states == naive(m)[0]


@pytest.mark.parametrize("name, states, edges, quiescent", [
    ("abort-race", 2958, 6875, 103),
    ("hold-forever-no-heartbeat", 327, 722, 21),
])
def test_the_service_agrees_with_a_naive_bfs_on_catalogue_scenarios(name, states, edges, quiescent):
    m = machine_of(name)
    ex = agree(m)
    assert (ex.graph.stats.states, ex.graph.stats.transitions, ex.graph.stats.quiescent) == (states, edges, quiescent)
    assert ex.hit_at  # the claims hit somewhere: the first hits were compared
    for limits in (Limits(max_states=states // 3), Limits(max_depth=4)):
        assert not agree(m, limits).graph.complete


def test_the_graph_is_kept_only_by_an_exact_unreduced_search():
    with pytest.raises(ValueError, match="exact search without symmetry"):
        explore(Graph(DIAMOND), visited="fingerprint", edges=True)
    with pytest.raises(ValueError, match="exact search without symmetry"):
        explore(Graph(DIAMOND), canonicaliser=SimpleNamespace(canon=lambda s: s, orbit=len), edges=True)


def _counting(monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs.get("edges", False))
        return explore(*args, **kwargs)

    monkeypatch.setattr(run, "explore", counted)
    monkeypatch.setattr(python_backend, "explore", counted)
    monkeypatch.setattr(liveness, "explore", counted)
    monkeypatch.setattr(backends_base, "explore", counted)
    return calls


def test_check_scenario_searches_once_for_safety_and_liveness_claims(monkeypatch):
    calls = _counting(monkeypatch)
    rep = run.check_scenario(builtin("hold-forever-no-heartbeat"))
    kinds = {c.kind for c in rep.claims}
    assert "liveness" in kinds and kinds - {"liveness"}
    assert calls == [True]  # one search, keeping the edges
    verdicts = {c.claim: c.verdict for c in rep.claims}
    assert verdicts["held_pages_are_released"] == "violated" and rep.complete
    assert rep.stats.states == build_graph(machine_of("hold-forever-no-heartbeat")).stats.states == 327


def test_a_fingerprinted_search_is_followed_by_its_own_graph_search(monkeypatch):
    calls = _counting(monkeypatch)
    one = run.check_scenario(builtin("hold-forever-no-heartbeat"))
    calls.clear()
    two = run.check_scenario(builtin("hold-forever-no-heartbeat"), visited="fingerprint")
    assert sorted(calls) == [False, True]  # the fingerprinted safety search, then the graph
    assert [(c.claim, c.verdict) for c in one.claims] == [(c.claim, c.verdict) for c in two.claims]
