"""``kvproof validate LOG`` on vLLM event logs: logs of the vLLM spec's own runs (clean, from a
stream of requests through reused slots), of stored counterexamples and of a lease-expiry hazard,
mutated logs, and bad input."""

import json
from functools import lru_cache

import pytest

from kvproof.checker.cli import main
from kvproof.checker.traces import read_trace
from kvproof.checker.validate import Checked, explain
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
    assert code == 1 and out.startswith(f"{path}:{line}: unexplained:"), out
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


@pytest.mark.parametrize("name", ["vllm-pull-heartbeat-stall__no_cross_tenant_read",
                                  "vllm-push-lease-expiry-stall__no_cross_tenant_read"])
def test_a_read_posted_before_the_lease_ran_out_is_not_proof(tmp_path, capsys, name):
    """The stored counterexamples post the READ (push: the WRITE) before the lease runs out: the
    log cannot show when NIXL moved the data, and a behaviour that moved it before the reap
    explains every event cleanly, so the log is explained, not flagged."""
    code, out, _ = run(capsys, _log_of(tmp_path, read_trace(f"traces/{name}.itf.json")))
    assert code == 0 and "explained" in out


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
    assert code == 3 and "slots: expected a whole number in 1..64, got 0" in err


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
