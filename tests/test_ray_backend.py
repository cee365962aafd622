"""The Ray backend on a local two-worker cluster gives the one-process verdicts and counts.

Skipped where Ray (the ``ray`` extra) is not installed, except under ``KVPROOF_REQUIRE_RAY=1``,
which ``.ci/run`` sets after installing the extra, so CI cannot skip it silently.
"""

import os

import pytest

from kvproof.checker.explicit.backends import RayBackend
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.machine import Machine
from kvproof.model.replay import replay
from kvproof.model.scenario import builtin

from .symmetric import unordered

if os.environ.get("KVPROOF_REQUIRE_RAY") != "1":
    pytest.importorskip("ray")


pytestmark = pytest.mark.slow  # a local cluster starts in about 5 s


@pytest.fixture(scope="module")
def cluster():
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             object_store_memory=256 * 1024**2)
    yield ray
    ray.shutdown()


def _summary(report):
    s = report.stats
    return (s.states, s.transitions, s.depth, s.quiescent, s.represented, report.complete,
            [(c.claim, c.verdict, c.depth) for c in report.claims])


@pytest.mark.parametrize("scenario,symmetry", [(builtin("abort-race"), False),
                                               pytest.param(builtin("v0.5.22"), False, marks=pytest.mark.thorough),
                                               (unordered("receipt-ack", "AAB"), True)])
def test_two_ray_workers_equal_one_process(cluster, scenario, symmetry):
    one = check_scenario(scenario, symmetry=symmetry)
    two = check_scenario(scenario, symmetry=symmetry, backend=RayBackend(2), visited="fingerprint")
    assert _summary(two) == _summary(one)
    assert two.stats.workers == 2 and two.stats.bytes_per_state < 40
    m = Machine(scenario.build())
    for c in two.claims:
        trace = getattr(c.result, "trace", None)
        if trace is not None:
            assert replay(m, trace.actions, trace.states) is None and m.claim_hits(c.claim, trace.states[-1])
