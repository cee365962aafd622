"""Bounded model checking: shortest violations, replayed before they are believed."""

import pytest

from kvproof.checker.symbolic.bmc import EngineError, bmc, confirmed_path
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.machine import Machine

from .conftest import machine_of
from .ring import Ring


def test_known_answers_on_the_ring():
    spec = Ring()
    run = bmc(TransitionSystem(spec), spec.claims, 10)
    assert {k: len(v[0]) for k, v in run.hits.items()} == {"x_never_6": 3, "sometimes_flag": 3}
    actions, states = run.hits["x_never_6"]
    assert [s[0] for s in states] == [0, 2, 4, 6]
    assert run.depth == 10 and "depth limit" in run.stopped


def test_stops_once_every_claim_hit():
    spec = Ring()
    run = bmc(TransitionSystem(spec), [spec.claim("x_never_6")], 50)
    assert run.depth == 3 and run.stopped == "every claim asked for hit"


def test_shortest_lengths_match_the_committed_explicit_traces():
    m = machine_of("abort-race")
    ts = TransitionSystem(m.spec)
    run = bmc(ts, [m.spec.claim("no_write_after_release")], 8)
    actions, states = run.hits["no_write_after_release"]
    assert len(actions) == 6  # traces/abort-race__no_write_after_release.itf.json has 6 steps
    confirmed_path(m, "no_write_after_release", actions, states)


def test_a_path_that_does_not_replay_is_an_engine_error():
    m = machine_of("abort-race")
    run = bmc(TransitionSystem(m.spec), [m.spec.claim("no_write_after_release")], 8)
    actions, states = run.hits["no_write_after_release"]
    with pytest.raises(EngineError, match="does not replay"):
        confirmed_path(m, "no_write_after_release", list(reversed(actions)), states)
    wrong = list(states)
    wrong[2] = bytes(len(wrong[2]))
    with pytest.raises(EngineError, match="state 2 differs"):
        confirmed_path(m, "no_write_after_release", actions, wrong)
    with pytest.raises(EngineError, match="does not hit"):
        confirmed_path(m, "no_write_after_release", actions[:-1], states[:-1])


def test_a_z3_call_canceled_past_the_deadline_ends_the_search_as_out_of_time(monkeypatch):
    # past the deadline the watchdog keeps interrupting Z3, and reading a model then fails with
    # "canceled" (seen in CI on a loaded machine): that is the budget running out, not a crash
    import time

    import z3

    spec = Ring()
    ts = TransitionSystem(spec)
    deadline = time.perf_counter() + 3

    def canceled(model, k):
        while time.perf_counter() <= deadline:  # the budget runs out while the model is read
            time.sleep(0.05)
        raise z3.Z3Exception(b"canceled")

    monkeypatch.setattr(ts, "decode_path", canceled)
    run = bmc(ts, spec.claims, 10, max_seconds=3, deadline=deadline)
    assert run.hits == {}
    assert run.depth == 2 and run.stopped == "time limit 3 s reached at depth 3"


def test_a_z3_error_before_the_deadline_is_not_taken_for_the_budget(monkeypatch):
    import z3

    spec = Ring()
    ts = TransitionSystem(spec)

    def broken(model, k):
        raise z3.Z3Exception(b"some other failure")

    monkeypatch.setattr(ts, "decode_path", broken)
    with pytest.raises(z3.Z3Exception):
        bmc(ts, spec.claims, 10, max_seconds=600)
