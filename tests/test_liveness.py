"""Fair liveness: lassos on hand-built graphs with known answers, and on the spec."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvproof.checker.explicit.liveness import OutOfTime, StateGraph, _lasso_for, build_graph, find_lasso, lasso_is_fair
from kvproof.checker.explicit.search import Limits, explore
from kvproof.checker.results import Stats
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import builtin

from .conftest import machine_of


def graph(edges: dict[int, list[tuple[int, int]]], n: int, unexpanded: tuple[int, ...] = ()) -> StateGraph:
    """A hand-built graph: state ids 0..n-1, edges (action id, target); BFS tree from 0; the
    states in ``unexpanded`` have an incomplete edge list (a limit cut their expansion)."""
    parent, via, depth = [-1] * n, [-1] * n, [0] * n
    order, seen = [0], {0}
    for u in order:
        for a, v in edges.get(u, []):
            if v not in seen:
                seen.add(v)
                parent[v], via[v], depth[v] = u, a, depth[u] + 1
                order.append(v)
    expanded = [i not in unexpanded for i in range(n)]
    return StateGraph.from_edges([bytes([i]) for i in range(n)], [edges.get(i, []) for i in range(n)], parent, via,
                                 depth, Stats(states=n), not unexpanded, expanded=expanded)


def unfair_in_loop(g: StateGraph, lasso) -> set[int]:
    """Fair actions enabled at every state of the lasso's loop and never taken in it."""
    loop = lasso.states[lasso.loop:-1] or lasso.states[lasso.loop:]
    always = set.intersection(*({a for a, _ in g.out(u)} & FAIR for u in loop))
    return always - set(lasso.actions[lasso.loop:])


FAIR = {1, 2}  # action ids the "engine" runs eventually; 9 is an environment action


def test_an_unfair_cycle_is_not_a_lasso():
    # 0 -(9)-> 1 -(9)-> 0 ; at both states fair action 1 is enabled (1 -> 2 leaves), never taken
    g = graph({0: [(9, 1), (1, 2)], 1: [(9, 0), (1, 2)], 2: [(2, 2)]}, 3)
    assert _lasso_for(g, [0, 1], FAIR, "x") is None


def test_a_fair_cycle_is_a_lasso_with_the_shortest_prefix():
    # the cycle 1 <-> 2 takes fair action 1; fair action 2 is enabled only at 2 and taken there
    g = graph({0: [(9, 1)], 1: [(1, 2)], 2: [(2, 1)]}, 3)
    lasso = _lasso_for(g, [1, 2], FAIR, "x")
    assert lasso.states == [0, 1, 2, 1] and lasso.actions == [9, 1, 2] and lasso.loop == 1


def test_a_fair_cycle_must_take_every_always_enabled_fair_action():
    # 1 -> 2 -> 3 -> 1 (a triangle); fair action 2 is enabled everywhere but taken only on 3 -> 1
    g = graph({0: [(9, 1)], 1: [(9, 2), (2, 4)], 2: [(9, 3), (2, 4)], 3: [(2, 1)], 4: []}, 5)
    lasso = _lasso_for(g, [1, 2, 3], FAIR, "x")
    assert lasso is not None and 2 in lasso.actions[lasso.loop:]
    assert lasso.states[-1] == lasso.states[lasso.loop]


def test_a_dead_end_is_a_lasso_looping_on_itself():
    g = graph({0: [(1, 1)], 1: []}, 2)
    lasso = _lasso_for(g, [1], FAIR, "x")
    assert lasso.states == [0, 1] and lasso.loop == 1


def test_no_pending_states_no_lasso():
    g = graph({0: [(1, 1)], 1: []}, 2)
    assert _lasso_for(g, [], FAIR, "x") is None


def test_hold_forever_is_safe_but_not_live_without_heartbeats():
    rep = {c.claim: c for c in check_scenario(builtin("hold-forever-no-heartbeat")).claims}
    assert rep["no_write_after_release"].verdict == "verified"
    assert rep["quiescent_holds_nothing"].verdict == "verified"  # a livelock, not a deadlock
    lasso = rep["held_pages_are_released"].result.trace
    assert lasso.loop is not None and lasso.loop < len(lasso)  # a real cycle
    names = {lasso.machine.instances[a].name for a in lasso.actions[lasso.loop:]}
    assert "clock_tick" in names and "decode_retry_abort" in names
    assert lasso_is_fair(lasso.machine, lasso.claim, lasso.states, lasso.actions, lasso.loop) is None
    live = {c.claim: c.verdict for c in check_scenario(builtin("hold-forever-heartbeat")).claims}
    assert live["held_pages_are_released"] == "verified" and live["no_write_after_release"] == "verified"


def test_h13_and_its_fix():
    stuck = check_scenario(builtin("prefill-abort-unpropagated"), only=["held_pages_are_released"])
    assert stuck.claims[0].verdict == "violated"
    fixed = check_scenario(builtin("prefill-abort-propagated"), only=["held_pages_are_released", "requests_end"])
    assert [c.verdict for c in fixed.claims] == ["verified", "verified"]


def test_a_tampered_lasso_is_refused():
    rep = check_scenario(builtin("hold-forever-no-heartbeat"), only=["held_pages_are_released"])
    t = rep.claims[0].result.trace
    m = t.machine
    assert "does not return" in lasso_is_fair(m, t.claim, t.states[:-1], t.actions[:-1], t.loop)
    assert "outside" in lasso_is_fair(m, t.claim, t.states, t.actions, len(t.states) + 3)
    # drop the fair tick from the loop: a loop state with the tick enabled but never taken
    unfair = lasso_is_fair(m, t.claim, [t.states[t.loop]] * 2, [t.actions[-1]], 0)
    assert unfair is not None


def test_an_incomplete_graph_is_inconclusive():
    m = machine_of("lost-drain-ack")
    g = build_graph(m, Limits(max_states=50))
    assert not g.complete and "state limit 50" in g.reason
    rep = check_scenario(builtin("lost-drain-ack-timeout"), Limits(max_states=100), only=["held_pages_are_released"])
    assert rep.claims[0].verdict == "inconclusive"


@pytest.mark.parametrize("name", ["lost-drain-ack", "ack-before-register", "ack-target-cleared"])
def test_every_h4_variant_holds_pages_forever(name):
    lasso = find_lasso(machine_of(name), build_graph(machine_of(name)), "held_pages_are_released")
    assert lasso is not None and lasso.obligation == "p0 held"


def test_the_cycle_written_avoids_a_fair_action_it_would_leave_enabled():
    # the component {1, 2, 3} has a fair cycle: fair action 2 is disabled at 3.  But 1 -> 2 -> 1,
    # the shortest way back to 1, keeps action 2 (which leaves the component) enabled throughout
    # and never takes it; the cycle must pass through 3 instead.
    g = graph({0: [(9, 1)], 1: [(9, 2), (9, 3), (2, 4)], 2: [(9, 1), (2, 4)], 3: [(9, 1)], 4: []}, 5)
    lasso = _lasso_for(g, [1, 2, 3], FAIR, "x")
    assert lasso is not None and lasso.states[-1] == lasso.states[lasso.loop]
    assert unfair_in_loop(g, lasso) == set()
    assert 3 in lasso.states[lasso.loop:]


def test_the_cycle_takes_a_fair_action_enabled_throughout_and_avoids_the_others():
    # fair 1 is enabled everywhere in {1, 2, 3} and taken only on 3 -> 1; fair 2 is enabled at
    # 1 and 2 (leaving) and disabled at 3: the loop must take 1 and visit 3
    g = graph({0: [(9, 1)], 1: [(9, 2), (1, 4), (2, 4)], 2: [(9, 3), (1, 4), (2, 4)], 3: [(1, 1)], 4: []}, 5)
    lasso = _lasso_for(g, [1, 2, 3], FAIR, "x")
    assert lasso.states == [0, 1, 2, 3, 1] and unfair_in_loop(g, lasso) == set()


def test_a_partly_expanded_state_is_not_judged():
    # the cycle 1 <-> 2 looks fair, but 2's edge list is partial (the state limit hit while
    # expanding it): the fair action it may enable is unknown, so no lasso through it
    g = graph({0: [(9, 1)], 1: [(9, 2)], 2: [(9, 1)]}, 3, unexpanded=(2,))
    assert _lasso_for(g, [1, 2], FAIR, "x") is None
    dead = graph({0: [(9, 1)], 1: []}, 2, unexpanded=(1,))  # not a dead end: never expanded
    assert _lasso_for(dead, [1], FAIR, "x") is None
    full = graph({0: [(9, 1)], 1: [(9, 2)], 2: [(9, 1)]}, 3)
    assert _lasso_for(full, [1, 2], FAIR, "x") is not None


@pytest.mark.parametrize("n", [206, 367, 458])
def test_a_state_limit_never_makes_a_live_scenario_violated(n):
    rep = check_scenario(builtin("hold-forever-heartbeat"), Limits(max_states=n))
    rows = {c.claim: c for c in rep.claims}
    assert rows["held_pages_are_released"].verdict == "inconclusive"
    assert rows["requests_end"].verdict == "inconclusive"
    assert "state limit" in rows["requests_end"].result.reason


def test_a_violation_found_on_a_partial_graph_is_genuine():
    m = machine_of("hold-forever-no-heartbeat")
    assert build_graph(m).stats.states == 327
    seen = 0
    for n in range(60, 327, 11):
        g = build_graph(m, Limits(max_states=n))
        assert not g.complete
        lasso = find_lasso(m, g, "held_pages_are_released")
        if lasso is not None:
            states = [g.states[sid] for sid in lasso.states]
            assert lasso_is_fair(m, "held_pages_are_released", states, lasso.actions, lasso.loop) is None
            seen += 1
    assert seen >= 5  # most cut-off points already hold a genuine lasso
    rep = check_scenario(builtin("hold-forever-no-heartbeat"), Limits(max_states=250))
    assert {c.claim: c.verdict for c in rep.claims}["held_pages_are_released"] == "violated"


def test_the_depth_limit_applies_to_the_liveness_graph():
    m = machine_of("hold-forever-heartbeat")
    g = build_graph(m, Limits(max_depth=2))
    e = explore(m, Limits(max_depth=2))
    assert not g.complete and g.reason == "depth limit 2 reached"
    assert max(g.depth) == 2 and g.stats.states == e.stats.states
    rep = check_scenario(builtin("hold-forever-heartbeat"), Limits(max_depth=2))
    live = [c for c in rep.claims if c.kind == "liveness"]
    assert live and all(c.verdict == "inconclusive" for c in live)
    assert not rep.complete and rep.reason == "depth limit 2 reached"


def test_the_lasso_search_stops_at_its_deadline():
    m = machine_of("hold-forever-no-heartbeat")
    g = build_graph(m)
    with pytest.raises(OutOfTime, match="time limit 1 s reached"):
        find_lasso(m, g, "held_pages_are_released", time.perf_counter() - 1, "time limit 1 s reached")
    assert find_lasso(m, g, "held_pages_are_released", time.perf_counter() + 60) is not None


def test_small_graph_components_are_scipys():
    """Tarjan's algorithm in Python (small graphs) groups states exactly as scipy's strongly
    connected components do, on random graphs with self-loops, isolated states and cycles."""
    import numpy as np

    from kvproof.checker.explicit import liveness

    rng = np.random.default_rng(3)
    for trial in range(60):
        n = int(rng.integers(1, 80))
        m = int(rng.integers(0, 3 * n))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        small = liveness.strong_components(n, src, dst, method="tarjan")
        big = liveness.strong_components(n, src, dst, method="scipy")
        same_small = small[:, None] == small[None, :]
        assert (same_small == (big[:, None] == big[None, :])).all(), trial
        assert small.min(initial=0) >= 0 and small.max(initial=0) < n


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
    st.integers(0, 40))))
def test_components_are_networkxs_with_the_acyclic_states_pruned(case):
    """Both ways of computing components (and the default choice) partition the states exactly as
    networkx's strongly connected components do, on random graphs with a chain of up to 40 states
    leading into them and one leading out (what the cyclic-core pruning drops round by round, and
    stops dropping early on); a state no cycle passes through is numbered by itself."""
    import networkx as nx
    import numpy as np

    from kvproof.checker.explicit import liveness

    n, edges, chain = case
    total = n + 2 * chain
    edges = list(edges) + [(n + k, n + k + 1) for k in range(chain - 1)] + ([(n + chain - 1, 0)] if chain else [])
    edges += [(n - 1, n + chain)] + [(n + chain + k, n + chain + k + 1) for k in range(chain - 1)] if chain else []
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    g = nx.DiGraph()
    g.add_nodes_from(range(total))
    g.add_edges_from(edges)
    want = {frozenset(c) for c in nx.strongly_connected_components(g)}
    for method in ("tarjan", "scipy", None):
        comp = liveness.strong_components(total, src, dst, method)
        groups: dict[int, set[int]] = {}
        for u, c in enumerate(comp.tolist()):
            groups.setdefault(c, set()).add(u)
        assert {frozenset(c) for c in groups.values()} == want, method
        assert all(comp[u] == u for c in want if len(c) == 1 and not g.has_edge(*(2 * tuple(c))) for u in c)
        assert all(c == min(groups[c]) for c in groups)
