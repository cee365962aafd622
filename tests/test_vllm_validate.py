"""``kvproof validate LOG`` on vLLM event logs: logs of the vLLM spec's own runs (clean, from a
stream of requests through reused slots), of stored counterexamples and of a lease-expiry hazard,
mutated logs, and bad input."""

import json
from functools import lru_cache

import pytest

from kvproof.checker.cli import main
from kvproof.checker.traces import read_trace
from kvproof.checker.logs.validate import Checked, explain
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.vllm import validate as vv

CLEAN = "examples/validate/vllm-clean.jsonl"
HAZARD = "examples/validate/vllm-lease-expiry.jsonl"


def run(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@lru_cache(maxsize=None)
def _stream(name="vllm-pull-heartbeat", requests=12, seed=0):
    base = builtin(name)
    sc = vv.stream_scenario(base, 2, 2, 2)
    machine = Machine(sc.build())
    return base, vv.to_events(machine, vv.random_run(machine, requests, seed))


def write(tmp_path, base, events, name="run.jsonl", **header):
    header = {"scenario": base.name, "slots": 2, "prefill_blocks": 2, "decode_blocks": 2, **header}
    path = tmp_path / name
    path.write_text(vv.log_text(base, events, **header))
    return path


def unexplained_at(capsys, path, line):
    code, out, _ = run(capsys, path, "--no-traces")
    assert code == 5 and out.startswith(f"{path}:{line}: unexplained:"), out
    return out


# -- the examples ---------------------------------------------------------------------------------
def test_the_clean_example_is_explained(capsys):
    code, out, _ = run(capsys, CLEAN)
    assert code == 0 and "explained: a behaviour of vllm-pull-heartbeat-stream produces every event" in out
    assert "249 of 249 events" in out


def test_the_lease_expiry_example_is_flagged_where_decode_reads_a_reused_block(tmp_path, capsys):
    """0.33.0 as shipped (heartbeats; decode stalls unseen): R0's lease runs out, its block q0 goes
    to R1 (tenant B), then decode posts R0's READ of q0: line 6."""
    code, out, _ = run(capsys, HAZARD, "--traces", tmp_path)
    first = out.splitlines()[0]
    assert code == 1 and first.startswith(f"{HAZARD}:6: violation: decode_start_load_kv")
    assert first.endswith("breaks no_source_free_while_read")
    (written,) = tmp_path.glob("vllm-lease-expiry__no_source_free_while_read.itf.json")
    trace = read_trace(written)
    assert trace.machine.claim_hits(trace.claim, trace.states[-1])
    assert "decode_stall" in [trace.machine.spec.instances[a].name for a in trace.actions]  # no heartbeat: a stall


def test_the_cross_tenant_read_alone_is_flagged_at_the_finished_recving():
    trace_events = [json.loads(x) for x in open(HAZARD).read().splitlines()[1:]]
    spec = builtin("vllm-pull-heartbeat-stall").build()
    only = Checked(spec, [spec.claim("no_cross_tenant_read")])
    obs = vv.observation(only)
    verdict = explain(only, obs, [obs.decode(i + 2, e) for i, e in enumerate(trace_events)])
    assert verdict.kind == "violation" and verdict.event.line == 7
    assert verdict.event.raw["event"] == "decode_finished_recving" and verdict.claims == ["no_cross_tenant_read"]


# -- logs of stored counterexamples ------------------------------------------------------------------
def _log_of(tmp_path, trace):
    path = tmp_path / "trace.jsonl"
    path.write_text(vv.log_text(trace.scenario, vv.to_events(trace.machine, trace.actions)))
    return path


def test_a_read_posted_after_the_abort_freed_its_block_is_flagged_at_the_post(tmp_path, capsys):
    """V3 before #25067: the READ is posted after prefill freed and reused the block: provable."""
    trace = read_trace("traces/vllm-pull-abort-finished-before-25067__no_cross_tenant_read.itf.json")
    path = _log_of(tmp_path, trace)
    events = vv.to_events(trace.machine, trace.actions)
    line = 2 + next(i for i, e in enumerate(events) if e["event"] == "decode_start_load_kv" and e["req"] == 0)
    code, out, _ = run(capsys, path, "--no-traces")
    assert code == 1 and out.startswith(f"{path}:{line}: violation: decode_start_load_kv")


@pytest.mark.parametrize("name,line", [("vllm-pull-heartbeat-stall__no_cross_tenant_read", 5),
                                       ("vllm-push-lease-expiry-stall__no_cross_tenant_read", 6)])
def test_a_read_posted_before_the_lease_ran_out_is_a_possible_violation_at_the_reap(tmp_path, capsys, name, line):
    """The stored counterexamples post the READ (push: the WRITE) before the lease runs out: the
    log cannot show when NIXL moved the data, so a behaviour that moved it before the reap
    explains every event cleanly - no proof.  But another behaviour consistent with the log
    still had it in flight when prefill freed the source block at the reap (line ``line``): a
    possible violation of no_source_free_while_read there, exit 1 with its trace (which replays
    to a state that breaks it); ``--certain-only`` makes the log exit 0, as before."""
    path = _log_of(tmp_path, read_trace(f"traces/{name}.itf.json"))
    events = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    assert events[line - 2]["event"] == "prefill_reap_expired_lease"
    code, out, _ = run(capsys, path, "--traces", tmp_path / "out")
    first = out.splitlines()[0]
    assert code == 1 and first.startswith(f"{path}:{line}: possible violation: prefill_reap_expired_lease - "), out
    assert "breaks no_source_free_while_read (after this event); the log cannot rule it out" in first
    (written,) = (tmp_path / "out").glob("trace__no_source_free_while_read.itf.json")
    trace = read_trace(written)
    assert trace.machine.claim_hits(trace.claim, trace.states[-1])
    assert not any(trace.machine.claim_hits(trace.claim, st) for st in trace.states[:-1])
    names = [trace.machine.spec.instances[a].name for a in trace.actions]
    assert names[-1] == "prefill_reap_expired_lease" and names.count("prefill_reap_expired_lease") == 1
    code, out, _ = run(capsys, path, "--no-traces", "--certain-only")
    assert code == 0 and "explained" in out.splitlines()[0]
    assert f"possible violation of no_source_free_while_read at {path}:{line}" in out


class _Hidden:
    """The vLLM observation with the actions ``names`` unlogged (internal): a log without them
    (for the tests of dirty states reached between events)."""

    def __init__(self, machine, names):
        self._obs = vv.observation(machine)
        spec = machine.spec
        self.internal = tuple(self._obs.internal) + tuple(i.aid for i in spec.instances if i.name in names)

    def __getattr__(self, name):
        return getattr(self._obs, name)


class _NoClosure:
    """Mutant: dirty states reached by internal steps between events are not noted."""

    @staticmethod
    def of(search_cls):
        class M(search_cls):
            def close(self, frontier, parents=None):
                b, self.breaks = self.breaks, None
                try:
                    return super().close(frontier, parents)
                finally:
                    self.breaks = b
        return M


def hidden_reap_log(name="vllm-push-lease-expiry-stall__no_cross_tenant_read"):
    """(machine, a fresh observation each call, decoded events) of a stored counterexample's log
    with its reap left out (an engine that does not log it): the reap is an internal step after
    the WRITE."""
    trace = read_trace(f"traces/{name}.itf.json")
    machine = Checked.invariants(trace.machine.spec)

    def obs():
        return _Hidden(machine, {"prefill_reap_expired_lease"})

    events = [obs().decode(i + 2, dict(e)) for i, e in enumerate(vv.to_events(trace.machine, trace.actions))
              if e["event"] != "prefill_reap_expired_lease"]
    return machine, obs, events


def test_a_possible_violation_between_events_is_the_last_event_read_before_it():
    """With the reap unlogged, the first dirty state is reached by internal steps after the
    WRITE (line 5), before the next event: the possible violation is line 5, also on the log
    cut after line 5 (the closure after the last event counts).  Mutants: one that ignores
    dirty states reached between events finds none; one without the closure after the last
    event finds none on the cut log."""
    from kvproof.checker.logs.validate import Search, rebuild

    machine, obs, events = hidden_reap_log()
    assert [e.raw["event"] for e in events][3] == "prefill_push_write" and events[3].line == 5
    for evs in (events, events[:4]):
        v = explain(machine, obs(), evs, 100_000, Search(machine, obs(), 100_000))
        assert v.kind == "explained" and (v.maybe.event.line, v.maybe.claims, v.maybe.before) == \
            (5, ["no_source_free_while_read"], False)
        actions, states = rebuild(machine, obs(), evs, v.maybe.event, v.maybe.bad, closed=True)
        assert states[-1] == v.maybe.bad and machine.hits(states[-1]) and not machine.hits(states[-2])
        assert machine.spec.instances[actions[-1]].name == "prefill_reap_expired_lease"
    mutant = _NoClosure.of(Search)
    assert explain(machine, obs(), events, 100_000, mutant(machine, obs(), 100_000)).maybe is None
    from kvproof.checker.logs import validate as vmod

    class NoTail(vmod._MaybeTracker):
        def pending(self):
            return False

    orig, vmod._MaybeTracker = vmod._MaybeTracker, NoTail
    try:
        assert explain(machine, obs(), events[:4], 100_000, Search(machine, obs(), 100_000)).maybe is None
    finally:
        vmod._MaybeTracker = orig
    # everything up to the reap unlogged: the dirty state is reached before the first event (line
    # 8, which no behaviour explains: a request it never saw); its trace reads no event
    hidden = {"prefill_request_finished", "prefill_reap_expired_lease", "decode_on_new_request",
              "decode_send_push_reg", "prefill_push_write"}
    trace = read_trace("traces/vllm-push-lease-expiry-stall__no_cross_tenant_read.itf.json")
    first = [_Hidden(machine, hidden).decode(i + 2, dict(e))
             for i, e in enumerate(vv.to_events(trace.machine, trace.actions)) if e["event"] not in hidden]
    v = explain(machine, _Hidden(machine, hidden), first)
    assert v.kind == "unexplained" and (v.maybe.event.line, v.maybe.claims, v.maybe.before) == \
        (8, ["no_source_free_while_read"], True)
    _, states = rebuild(machine, _Hidden(machine, hidden), first, None, v.maybe.bad, closed=True)
    assert states[0] == machine.init and states[-1] == v.maybe.bad


def test_every_run_that_breaks_an_invariant_is_at_least_a_possible_violation():
    """Soundness: the run itself explains its own log, so where it breaks an invariant after its
    k-th logged event, some possible violation is at or before that event (at the event, for
    these runs: the reap or the READ is logged); a run that breaks none may still be one (another
    explanation breaks it), and a certain violation is never before the possible one."""
    import random

    seen = set()
    for name in ("vllm-pull-ttl-expiry", "vllm-push-abort-unanswered", "vllm-push-lease-expiry-stall"):
        spec = builtin(name).build()
        gen, machine = Machine(spec), Checked.invariants(spec)
        for seed in range(6):
            rng, state, actions, broke = random.Random(seed), gen.init, [], None
            for _ in range(30):
                succ = gen.successors(state)
                if not succ:
                    break
                aid, state = rng.choice(succ)
                actions.append(aid)
                if broke is None and machine.hits(state):
                    broke = len(vv.to_events(gen, actions))  # events logged up to the breaking state
            events = vv.to_events(gen, actions)
            obs = vv.observation(machine)
            v = explain(machine, obs, [obs.decode(i + 2, e) for i, e in enumerate(events)])
            if broke is not None:
                assert v.maybe is not None and v.maybe.event.line == broke + 1, (name, seed)
            if v.kind == "violation":
                assert v.maybe.event.line <= v.event.line
            seen.add((broke is not None, v.kind, v.maybe is not None))
    assert {(True, "violation", True), (True, "explained", True), (False, "explained", True),
            (False, "explained", False)} <= seen, seen


# -- clean runs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,seed", [("vllm-pull-heartbeat", 0), ("vllm-push-heartbeat", 1),
                                       ("vllm-pull-abort-32255", 2)])
def test_random_stream_runs_validate_clean(tmp_path, capsys, name, seed):
    base, events = _stream(name, 12, seed)
    assert len(events) > 50 and max(e.get("gen", 0) for e in events) >= 3  # slots are reused
    code, out, _ = run(capsys, write(tmp_path, base, events))
    assert code == 0, out
    assert f"{len(events):,} of {len(events):,} events" in out


# -- mutated logs -------------------------------------------------------------------------------------
def _find(events, name, start=0):
    return next(i for i, e in enumerate(events) if i >= start and e["event"] == name)


def test_a_dropped_event_is_rejected_at_the_requests_next_event(tmp_path, capsys):
    base, events = _stream()
    i = _find(events, "decode_on_new_request", 3)
    req, gen = events[i]["req"], events[i]["gen"]
    j = next(k for k in range(i + 1, len(events)) if events[k].get("req") == req and events[k]["gen"] == gen
             and events[k]["actor"] == "decode")
    mutated = events[:i] + events[i + 1:]
    out = unexplained_at(capsys, write(tmp_path, base, mutated), j - 1 + 2)
    assert events[j]["event"] in out


def test_an_event_moved_before_its_cause_is_rejected_where_it_lands(tmp_path, capsys):
    base, events = _stream()
    i = _find(events, "decode_on_new_request", 3)
    j = next(k for k in range(i + 1, len(events)) if events[k]["event"] == "decode_start_load_kv"
             and events[k]["req"] == events[i]["req"])
    mutated = events[:i] + [events[j]] + events[i:j] + events[j + 1:]
    unexplained_at(capsys, write(tmp_path, base, mutated), i + 2)


def test_a_duplicated_event_is_rejected_at_the_copy(tmp_path, capsys):
    base, events = _stream()
    i = _find(events, "decode_finished_recving", 3)
    mutated = events[:i + 1] + [events[i]] + events[i + 1:]
    unexplained_at(capsys, write(tmp_path, base, mutated), i + 3)


def test_a_changed_block_is_rejected_at_its_line(tmp_path, capsys):
    base, events = _stream()
    i = _find(events, "decode_start_load_kv", 3)
    mutated = [dict(e) for e in events]
    mutated[i]["src"] = 1 - mutated[i]["src"]
    out = unexplained_at(capsys, write(tmp_path, base, mutated), i + 2)
    assert "no behaviour of the spec explains it" in out


@pytest.mark.parametrize("key,value,words", [("gen", 7, "is at generation"), ("rid", "someone-else", "is request")])
def test_a_wrong_generation_or_request_id_is_rejected(tmp_path, capsys, key, value, words):
    base, events = _stream()
    i = _find(events, "decode_start_load_kv", 3)
    mutated = [dict(e) for e in events]
    mutated[i][key] = value
    out = unexplained_at(capsys, write(tmp_path, base, mutated), i + 2)
    assert words in out


# -- bad input ----------------------------------------------------------------------------------------
GOOD = {"t": 0.0, "actor": "prefill", "event": "prefill_request_finished", "req": 0, "rid": "r0.0", "gen": 0,
        "block": 0}


@pytest.mark.parametrize("change,message", [
    ({"event": "nixl_read_take_data"}, "event 'nixl_read_take_data' is not logged (internal)"),
    ({"event": "prefill_request_finish"}, "unknown event 'prefill_request_finish'"),
    ({"actor": "decode"}, "actor: prefill_request_finished is logged by 'prefill'"),
    ({"block": 9}, "block: expected a whole number in 0..0, got 9"),  # one prefill block
    ({"req": 5}, "req: expected a whole number in 0..1"),
    ({"rid": ""}, "rid: expected the request's id"),
    ({"event": "decode_abort", "actor": "decode", "status": "gone"}, "status: expected one of held, freed"),
    ({"event": "decode_send_heartbeats", "actor": "decode", "reqs": [1, 0]}, "reqs: expected the request slots"),
])
def test_bad_lines_are_one_line_exit_3_naming_file_and_line(tmp_path, capsys, change, message):
    path = tmp_path / "bad.jsonl"
    head = {"v": 1, "log": "kvproof-events", "scenario": "vllm-pull-heartbeat"}
    path.write_text("\n".join(json.dumps(x) for x in (head, GOOD, {**GOOD, **change})) + "\n")
    code, out, err = run(capsys, path)
    assert code == 3 and out == "" and len(err.splitlines()) == 1
    assert f"{path}:3: {message}" in err


def test_a_bad_stream_header_is_exit_3(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"v": 1, "log": "kvproof-events", "scenario": "vllm-pull-heartbeat", "slots": 0}) + "\n")
    code, _, err = run(capsys, path)
    assert code == 3 and f"slots: expected a whole number in 1..{vv.MAX_SLOTS}, got 0" in err
    path.write_text(json.dumps({"v": 1, "log": "kvproof-events", "scenario": "vllm-pull-heartbeat",
                                "slots": vv.MAX_SLOTS + 1}) + "\n")
    code, _, err = run(capsys, path)
    assert code == 3 and f"slots: expected a whole number in 1..{vv.MAX_SLOTS}, got {vv.MAX_SLOTS + 1}" in err


def test_a_log_may_name_255_request_slots(tmp_path, capsys):
    """The clean example's events read as a stream of 255 slots (9,951 action instances;
    the reference search, whose steps compile fastest): explained, every event read."""
    lines = open("examples/validate/vllm-clean.jsonl").read().splitlines()
    path = tmp_path / "wide.jsonl"
    path.write_text("\n".join([json.dumps({**json.loads(lines[0]), "slots": 255})] + lines[1:]) + "\n")
    code, out, _ = run(capsys, path, "--backend", "python")
    assert code == 0 and "vllm-pull-heartbeat-stream" in out and "249 of 249 events" in out


def _shifted(path: str, slots: int, shift: int) -> list[dict]:
    """The example log at ``path`` as a stream of ``slots`` request slots, every slot moved up by
    ``shift`` (an even shift keeps each request's tenant: the stream's tenants alternate)."""
    lines = [json.loads(x) for x in open(path).read().splitlines()]
    out = [{**lines[0], "slots": slots}]
    for e in lines[1:]:
        e = dict(e)
        if "req" in e:
            e["req"] += shift
        if "reqs" in e:
            e["reqs"] = [r + shift for r in e["reqs"]]
        out.append(e)
    return out


@lru_cache(maxsize=1)
def _wide_stream():
    """The 256-slot stream of ``vllm-pull-heartbeat-stall`` over the clean example's pools (2
    blocks each): its machine and the search ``auto`` picks (compiled once: seconds)."""
    from kvproof.checker.logs.validate_native import make_search

    header = {"scenario": "vllm-pull-heartbeat-stall", "slots": 256, "prefill_blocks": 2, "decode_blocks": 2}
    spec = vv.log_scenario(builtin(header["scenario"]), header).build()
    machine = Checked.invariants(spec)
    return machine, make_search(machine, vv.observation(machine), 10_000, "auto")


def _wide_verdict(log: list[dict]):
    machine, search = _wide_stream()
    o = vv.observation(machine)
    return explain(machine, o, [o.decode(k + 2, e) for k, e in enumerate(log[1:])], 10_000, search)


def test_a_hazard_in_a_log_of_256_request_slots_is_flagged_at_its_line():
    """Past 255 slots an owner (a slot or none) has 257 codes: the layout is wide (states are
    tuples), the C steps and the factored search refuse it with one line, and ``auto`` runs the
    reference.  The lease-expiry hazard moved to slots 254 and 255 of a 256-slot stream is the
    violation at line 6 (R254's READ of the freed q0), as at 2 slots."""
    from kvproof.checker.explicit.native import NativeUnavailable
    from kvproof.checker.logs.validate import Search
    from kvproof.checker.logs.validate_factored import FactoredUnavailable
    from kvproof.checker.logs.validate_native import make_search

    machine, search = _wide_stream()
    assert len(machine.spec.k.cfg.requests) == 256 and machine.spec.layout.wide and type(search) is Search
    obs = vv.observation(machine)
    with pytest.raises(NativeUnavailable, match="field owner has 257 codes"):
        make_search(machine, obs, 10_000, "native")
    with pytest.raises(FactoredUnavailable, match="field owner has 257 codes"):
        make_search(machine, obs, 10_000, "factored")
    hazard = _shifted("examples/validate/vllm-lease-expiry.jsonl", 256, 254)
    v = _wide_verdict(hazard)
    assert v.kind == "violation" and v.event.line == 6 and v.event.raw["req"] == 254
    assert v.claims == ["no_source_free_while_read"]
    moved = _shifted("examples/validate/vllm-lease-expiry.jsonl", 256, 253)  # odd: R0 and R1 swap tenants
    assert _wide_verdict(moved).claims == ["no_source_free_while_read"]


@pytest.mark.thorough
def test_a_clean_log_of_256_request_slots_is_explained():
    """The clean example moved to slots 254 and 255 of the 256-slot stream is explained, every
    event read (the stall scenario's behaviours include the clean log's scenario's)."""
    clean = _shifted("examples/validate/vllm-clean.jsonl", 256, 254)
    assert max(e.get("req", 0) for e in clean[1:]) == 255
    v = _wide_verdict(clean)
    assert v.kind == "explained" and v.events == len(clean) - 1 == 249 and v.maybe is None


def test_the_stream_reuses_a_slot_only_when_nothing_of_its_request_is_in_flight():
    sc = vv.stream_scenario(builtin("vllm-pull-heartbeat"), 2, 2, 2)
    spec = sc.build()
    machine = Machine(spec)
    idx = {(i.name, i.args): i.aid for i in spec.instances}
    s = machine.init
    finish = idx[("prefill_request_finished", (0,))]
    for name in ["prefill_request_finished", "decode_on_new_request", "decode_start_load_kv",
                 "nixl_read_take_data", "nixl_read_complete"]:
        s = machine.step(s, idx[(name, (0,))])
        assert machine.step(s, finish) is None  # R0 still held by prefill or decode: no reuse
    s = machine.step(s, idx[("decode_finished_recving", (0,))])
    assert machine.step(s, finish) is None  # the READ's notification has not reached prefill yet
    s = machine.step(s, idx[("prefill_get_new_notifs", (0,))])
    again = machine.step(s, finish)
    assert again is not None and machine.step(again, finish) is None  # reused once: its next request
    assert spec.layout.decode(again)["d_phase"][0] == "new" and spec.layout.decode(again)["p_phase"][0] == "held"
