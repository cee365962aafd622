"""Replay: the stored states are reproduced, and the first step that differs is named."""

import pytest

from kvproof.model.replay import ReplayError, replay, run_actions

from .conftest import machine_of


def _path(m, n):
    """Some path of n steps: always the first enabled action."""
    states, actions = [m.init], []
    for _ in range(n):
        aid, nxt = m.successors(states[-1])[0]
        actions.append(aid)
        states.append(nxt)
    return actions, states


def test_replay_reproduces_a_path():
    m = machine_of("abort-race")
    actions, states = _path(m, 6)
    assert run_actions(m, actions) == states
    assert replay(m, actions, states) is None


def test_replay_names_the_first_state_that_differs():
    m = machine_of("abort-race")
    actions, states = _path(m, 6)
    bad = list(states)
    bad[4] = bytes([x ^ 0 for x in bad[4][:-1]]) + bytes([1])
    d = replay(m, actions, bad)
    assert d.step == 4 and "different state" in d.reason


def test_replay_names_a_disabled_action():
    m = machine_of("abort-race")
    actions, states = _path(m, 3)
    commit = [i.aid for i in m.instances if i.name == "decode_commit"][0]
    d = replay(m, actions + [commit], states + [states[-1]])
    assert d.step == 4 and "not enabled" in d.reason
    with pytest.raises(ReplayError, match="step 4"):
        run_actions(m, actions + [commit])
    with pytest.raises(ReplayError, match="no action instance"):
        run_actions(m, [10_000])


def test_replay_checks_the_initial_state_and_the_length():
    m = machine_of("abort-race")
    actions, states = _path(m, 2)
    assert replay(m, actions, states[:-1]).step == 0
    assert "initial state" in replay(m, actions, [states[1]] + states[1:]).reason


def test_replay_is_a_second_opinion_not_the_compiled_code(monkeypatch):
    """A compiled engine that goes wrong cannot confirm its own trace: replay re-executes with
    the reference interpreter (issue 12: replay "reproduced" the dropped write's trace)."""
    from kvproof.model.machine import Machine

    m = machine_of("abort-race")
    actions, states = _path(m, 4)
    wrong = list(states)
    wrong[2] = bytes([states[2][0] ^ 1]) + states[2][1:]
    broken = Machine(m.spec)
    real_successors, real_step = broken.successors, broken.step

    def lying(s):  # the compiled engine "produces" the wrong state at step 2
        return [(a, wrong[2] if t == states[2] else t) for a, t in real_successors(s)]

    def lying_step(s, aid):  # the same lie on the compiled single step (what run_actions takes)
        t = real_step(s, aid)
        return wrong[2] if t == states[2] else t

    monkeypatch.setattr(broken, "successors", lying)
    monkeypatch.setattr(broken, "step", lying_step)
    assert run_actions(broken, actions)[2] == wrong[2]  # the compiled path goes along
    d = replay(broken, actions, wrong)
    assert d is not None and d.step == 2 and "different state" in d.reason
    assert replay(broken, actions, states) is None
