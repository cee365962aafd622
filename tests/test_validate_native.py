"""The native search of ``kvproof validate`` (``checker/logs/validate_native.py``) against the reference
(``checker/logs/validate.py``'s :class:`Search`): on random logs of the vLLM and SGLang specs, clean and
mutated (an event dropped, two swapped, one duplicated, a block changed), and on hazard logs, the
set of possible states with their claim masks is the same after every event, and so is the
verdict (kind, line, claims, peak)."""

import random

import pytest

from kvproof.checker.explicit.native import c_compiler
from kvproof.checker.logs.validate import Checked, Search, explain
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.sglang import validate as sv
from kvproof.spec.vllm import validate as vv

pytestmark = [pytest.mark.skipif(c_compiler() is None, reason="no C compiler"),
              pytest.mark.slow]  # 1-5 s each on two shared cores (compiling the spec to C once per scenario)


def _mutate(events, rng):
    """``events`` with one random change (or none)."""
    out = [dict(e) for e in events]
    kind = rng.choice(["none", "drop", "swap", "dup", "block"])
    i = rng.randrange(len(out))
    if kind == "drop":
        del out[i]
    elif kind == "swap" and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], out[i]
    elif kind == "dup":
        out.insert(i, dict(out[i]))
    elif kind == "block":
        for key in ("block", "src", "dest", "page"):
            if key in out[i]:
                out[i][key] = max(0, out[i][key] + rng.choice((-1, 1)))
                break
    return out


def _same_search(machine, obs_of, events, monkeypatch, batch):
    """Both searches event by event: the same closed and advanced frontiers; the verdicts."""
    from kvproof.checker.logs import validate_native
    from kvproof.checker.logs.validate_native import native_search

    monkeypatch.setattr(validate_native, "BATCH", batch)
    obs = obs_of(machine)
    decoded = []
    for i, e in enumerate(events):
        try:
            decoded.append(obs.decode(i + 2, dict(e)))
        except ValueError:  # a change that is bad input (exit 3), not the search's
            break
    py, c = Search(machine, obs_of(machine), 1_000_000), native_search(machine, obs_of(machine), 1_000_000)
    fp = fc = {machine.init: machine.hits(machine.init)}
    for ev in decoded:
        cp, cc = py.close(fp), c.close(fc)
        assert cp == cc
        fp, fc = py.advance(cp, ev), c.advance(cc, ev)
        assert fp == fc
        if not fp:
            break
    a = explain(machine, obs_of(machine), decoded, 1_000_000, Search(machine, obs_of(machine), 1_000_000))
    b = explain(machine, obs_of(machine), decoded, 1_000_000, native_search(machine, obs_of(machine), 1_000_000))
    assert (a.kind, a.events, a.event and a.event.line, a.claims, a.peak, a.explored, a.bad) == \
           (b.kind, b.events, b.event and b.event.line, b.claims, b.peak, b.explored, b.bad)
    assert _maybe(a) == _maybe(b)
    return a.kind if a.kind != "explained" or a.maybe is None else "possible"


def _maybe(v):
    """What a verdict says of the first possible violation (line, claims, before, the state)."""
    m = v.maybe
    return m and (m.event.line, m.claims, m.before, m.bad)


@pytest.mark.parametrize("name,slots", [("vllm-pull-heartbeat", 3), ("vllm-pull-heartbeat-stall", 2),
                                        ("vllm-push-heartbeat", 2), ("vllm-pull-abort-32255", 3)])
def test_vllm_random_and_mutated_logs(monkeypatch, name, slots):
    sc = vv.stream_scenario(builtin(name), slots, slots, slots)
    spec = sc.build()
    gen, machine = Machine(spec), Checked.invariants(spec)
    kinds = set()
    for seed in range(4):
        rng = random.Random(seed)
        events = vv.to_events(gen, vv.random_run(gen, 6, seed, fault_weight=0.2))
        for batch in (1, 64):
            kinds.add(_same_search(machine, vv.observation, _mutate(events, rng) if seed else events, monkeypatch,
                                   batch))
    assert {"explained", "unexplained"} <= kinds, kinds


@pytest.mark.parametrize("name", ["vllm-pull-ttl-expiry", "vllm-pull-lease-equals-read"])
def test_vllm_hazard_runs(monkeypatch, name):
    """Random runs of the as-shipped scenarios (not streams): several are violations."""
    spec = builtin(name).build()
    gen, machine = Machine(spec), Checked.invariants(spec)
    kinds = []
    for seed in range(5):
        rng = random.Random(seed)
        state, run = gen.init, []
        for _ in range(30):
            succ = gen.successors(state)
            if not succ:
                break
            aid, state = rng.choice(succ)
            run.append(aid)
        kinds.append(_same_search(machine, vv.observation, vv.to_events(gen, run), monkeypatch, 1))
    assert "violation" in kinds and "possible" in kinds, kinds


@pytest.mark.parametrize("batch", [1, 64])
def test_a_possible_violation_between_events_is_found_in_c_too(batch, monkeypatch):
    """The reap unlogged (``tests/test_vllm_validate.py``): the dirty state is reached by the
    closure after line 5, in C as in Python; a C search that ignores the closure's dirty states
    is caught."""
    from tests.test_vllm_validate import _NoClosure, hidden_reap_log

    from kvproof.checker.logs import validate_native
    from kvproof.checker.logs.validate_native import NativeSearch, native_search

    monkeypatch.setattr(validate_native, "BATCH", batch)
    machine, obs, events = hidden_reap_log()
    a = explain(machine, obs(), events, 100_000, Search(machine, obs(), 100_000))
    b = explain(machine, obs(), events, 100_000, native_search(machine, obs(), 100_000))
    assert _maybe(a) == _maybe(b) and _maybe(a)[:2] == (5, ["no_source_free_while_read"])
    c = native_search(machine, obs(), 100_000)
    c.__class__ = _NoClosure.of(NativeSearch)
    assert explain(machine, obs(), events, 100_000, c).maybe is None


@pytest.mark.parametrize("name", ["pr-38935", "v0.5.22"])
def test_sglang_random_and_mutated_logs(monkeypatch, name):
    from kvproof.spec.sglang.simulate import simulation_scenario

    sc = simulation_scenario(builtin(name), 6, 2)
    spec = sc.build()
    gen, machine = Machine(spec), Checked.invariants(spec)
    kinds = set()
    for seed in range(3):
        rng = random.Random(seed)
        events = sv.to_events(gen, sv.random_run(gen, 4, seed))
        kinds.add(_same_search(machine, sv.observation, _mutate(events, rng) if seed else events, monkeypatch, 1))
    assert "explained" in kinds


def test_the_command_gives_the_same_answer_and_refuses_native_without_a_compiler(monkeypatch, capsys):
    """``kvproof validate --backend``: native and python print the same verdict; ``native`` with no
    C compiler is one line, exit 3; ``auto`` then runs the reference."""
    from kvproof.checker.cli import main

    log = "examples/validate/vllm-lease-expiry.jsonl"
    firsts = []
    for backend in ("native", "python"):
        assert main(["validate", log, "--no-traces", "--backend", backend]) == 1
        firsts.append(capsys.readouterr().out.splitlines()[:4])
    assert firsts[0] == firsts[1] and firsts[0][0].startswith(f"{log}:6: violation: decode_start_load_kv")
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert main(["validate", log, "--no-traces", "--backend", "native"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend native: no C compiler found" in err[0]
    assert main(["validate", log, "--no-traces"]) == 1
    assert capsys.readouterr().out.splitlines()[:4] == firsts[0]
