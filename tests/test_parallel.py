"""Several processes give the one-process engine's verdicts and state counts."""

import pytest

from kvproof.checker.explicit.backends import AutoBackend, WorkersBackend
from kvproof.checker.explicit.search import Limits
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.machine import Machine
from kvproof.model.replay import replay
from kvproof.model.scenario import builtin

from .symmetric import unordered


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
