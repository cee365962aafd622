"""Several processes give the one-process engine's verdicts and state counts."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvproof.checker.explicit.backends import AutoBackend, WorkersBackend
from kvproof.checker.explicit.search import Limits
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.machine import Machine
from kvproof.model.replay import replay
from kvproof.model.scenario import builtin

from .symmetric import unordered
from .test_explicit import Graph


def _summary(report):
    s = report.stats
    return (s.states, s.transitions, s.depth, s.quiescent, s.represented, report.complete,
            [(c.claim, c.verdict, c.depth) for c in report.claims])


@pytest.mark.parametrize("name", ["incident", "abort-race", "lost-drain-ack",
                                  pytest.param("v0.5.22", marks=pytest.mark.slow)])
def test_two_workers_equal_one_process(name):
    sc = builtin(name)
    one = check_scenario(sc)
    two = check_scenario(sc, backend=AutoBackend(2))
    assert _summary(two) == _summary(one)
    assert two.stats.workers == 2
    m = Machine(sc.build())
    for c in two.claims:
        trace = getattr(c.result, "trace", None)
        if trace is not None:
            assert replay(m, trace.actions, trace.states) is None


@pytest.mark.slow  # about 6 s
def test_workers_with_symmetry_and_fingerprints_equal_one_process():
    sc = unordered("receipt-ack", "AAB")
    one = check_scenario(sc, symmetry=True)
    three = check_scenario(sc, symmetry=True, visited="fingerprint", backend=WorkersBackend(3))  # processes
    assert _summary(three) == _summary(one)
    assert three.stats.collision_probability > 0 and three.stats.bytes_per_state < 30


def test_limits_end_a_parallel_search_incomplete():
    rep = check_scenario(builtin("v0.5.22"), Limits(max_states=5000), backend=AutoBackend(2))
    assert not rep.complete and rep.stats.states == 5000 and "state limit" in rep.reason
    # release_justified's deadline release is found before the limit (a real violation); the rest stops short
    assert {c.verdict for c in rep.claims if c.kind != "witness" and c.claim != "release_justified"} == {"inconclusive"}
    assert {c.verdict for c in rep.claims if c.kind == "witness"} <= {"inconclusive", "reached"}
    rep = check_scenario(builtin("v0.5.22"), Limits(max_depth=4), backend=AutoBackend(2))
    assert not rep.complete and "depth limit 4" in rep.reason and rep.stats.depth == 4


# -- the partitioned loop (worker processes; Ray actors run the same coordinator) against the
# plainest BFS on random hand-built graphs, whose answers the naive search gives

class _Numbered(Graph):
    """A hand-built graph (:class:`~tests.test_explicit.Graph`) with the action table a
    partition worker sizes its codes by."""

    instances = tuple(range(256))


@st.composite
def _graphs(draw):
    n = draw(st.integers(2, 30))
    node = st.integers(0, n - 1)
    edges = {u: sorted(set(draw(st.lists(node, max_size=4)))) for u in range(n)}
    marks = st.sets(node, max_size=3)
    return _Numbered(edges, draw(marks), draw(marks), draw(marks))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=_graphs(), max_states=st.sampled_from([None, 5]))
def test_two_workers_search_random_graphs_as_the_naive_bfs_does(graph, max_states):
    """States, transitions, completeness, and for each claim whether it hit and how deep: the
    naive BFS's answer, for the one-process search and the partitioned one alike."""
    from kvproof.checker.explicit.parallel import explore_parallel
    from kvproof.checker.explicit.search import explore

    from .test_graph import naive

    states, out, parent, via, depth, expanded, hit = naive(graph, max_states=max_states)
    complete = all(expanded)
    want = (len(states), sum(len(e) for e in out) if complete else None, complete)
    # Every claim's shortest depth in the whole graph. A complete search reports exactly these; a
    # truncated one reports some of them (a frontier state left unexpanded has not been asked
    # whether it is quiescent), each at its shortest depth.
    _, _, _, _, full_depth, _, full_hit = naive(graph)
    shortest = {c: full_depth[sid] for c, sid in full_hit.items()}
    limits = Limits(max_states=max_states)
    for ex in (explore(graph, limits), explore_parallel(graph, 2, limits)):
        got = (ex.stats.states, ex.stats.transitions if ex.complete else None, ex.complete)
        assert got == want
        hits = {c: len(ex.path(sid)) for c, sid in ex.hit_at.items()}
        if complete:
            assert hits == shortest
        else:
            assert hits.items() <= shortest.items()


def _reference_bfs(spec, cap: int = 2_000):
    """The reachable states of ``spec`` by the reference interpreter, one state at a time, and
    each invariant's or witness's shortest hit depth; ``None`` past ``cap`` states."""
    from kvproof.model.machine import reference_hits, reference_successors

    init = bytes(spec.init_state())
    depth = {init: 0}
    todo, hits = [init], {}
    claims = [(i, c) for i, c in enumerate(spec.claims) if c.kind != "liveness"]
    while todo:
        nxt = []
        for s in todo:
            succ = [bytes(t) for _, t in reference_successors(spec, s)]
            for i, c in claims:
                if i not in hits and reference_hits(spec, c, s, enabled=bool(succ)):
                    hits[i] = depth[s]
            for t in succ:
                if t not in depth:
                    depth[t] = depth[s] + 1
                    nxt.append(t)
        if len(depth) > cap:
            return None
        todo = nxt
    return len(depth), hits


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_two_workers_search_random_specs_as_the_reference_interpreter_does(data):
    """The partitioned search on random specs (:mod:`.randspec`): the reachable states and each
    invariant's and witness's shortest hit, as a breadth-first search by the reference
    interpreter finds them (successors and claim values never compiled)."""
    from hypothesis import assume

    from kvproof.checker.explicit.parallel import explore_parallel

    from .randspec import build, specs

    spec = build(data.draw(specs(), label="spec"))
    want = _reference_bfs(spec)
    assume(want is not None)
    machine = Machine(spec)
    claims = [i for i, c in enumerate(machine.claims) if c.kind != "liveness"]
    ex = explore_parallel(machine, 2, Limits(), claims)
    assert ex.complete
    assert (ex.stats.states, {i: len(ex.path(sid)) for i, sid in ex.hit_at.items()}) == want
