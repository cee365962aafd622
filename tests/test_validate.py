"""``kvproof validate LOG``: event logs of the spec's own runs, checked against the spec.

Logs come from stored counterexample traces (flagged at the step that breaks the claim), from
random runs of fixed engines (clean), from mutations of a clean log (rejected at the mutated
line, or explained where the mutation is another run the spec allows), and from bad input."""

import json
from functools import lru_cache

import pytest
from hypothesis import given, settings, strategies as st

from kvproof.checker.cli import main
from kvproof.checker.traces import read_trace
from kvproof.checker.logs.validate import Checked, Search, explain, read_log
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.sglang import validate as sv
from kvproof.spec.sglang.simulate import simulation_scenario


def _invariant_machine(spec):
    return Checked.invariants(spec)


def run(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, sc, events, name="run.jsonl", **header):
    path = tmp_path / name
    path.write_text(sv.log_text(sc, events, **header))
    return path


# -- logs of stored counterexamples ------------------------------------------------------------------
TRACES = [
    "incident__decode_reads_only_own_pages",
    "abort-race__no_write_after_release",
    "failure-source-reuse__no_source_free_while_read",
    "pr-35049-timeout-unbounded__no_write_after_release",
    "tp2-first-ack__no_write_after_release",
    "sglang-0.5.23-deferral-off__no_write_after_release",
    "receipt-ack__no_write_after_release",
    "sglang-0.5.23-aux-failed-send-unbounded__no_write_after_release",
]


def _first_bad_line(trace):
    """The log line of the first step whose state breaks an always-invariant, computed from
    the trace itself (the header is line 1, each visible step one line)."""
    machine = _invariant_machine(trace.machine.spec)
    visible = set(sv.observation(machine).observers)
    line = 1
    for aid, state in zip(trace.actions, trace.states[1:]):
        if aid in visible:
            line += 1
        if machine.hits(state):
            assert aid in visible, "the breaking step is internal: no event can show it"
            return line, [c.name for i, c in enumerate(machine.claims) if machine.hits(state) >> i & 1]
    raise AssertionError("the trace breaks no invariant")


@pytest.mark.parametrize("name", TRACES)
def test_counterexample_logs_are_flagged_at_the_breaking_event(tmp_path, capsys, name):
    trace = read_trace(f"traces/{name}.itf.json")
    log = write(tmp_path, trace.scenario, sv.to_events(trace.machine, trace.actions))
    line, claims = _first_bad_line(trace)
    code, out, _ = run(capsys, log, "--traces", tmp_path / "out")
    assert code == 1
    assert f"{log}:{line}: violation:" in out
    assert any(c in out.splitlines()[0] for c in claims)
    written = list((tmp_path / "out").glob("*.itf.json"))
    assert len(written) == 1 and "the explanation" in out
    assert "possible violation" not in out  # the breaking step is logged: possible first at the same line


def test_the_incidents_violation_trace_replays(tmp_path, capsys):
    trace = read_trace("traces/incident__decode_reads_only_own_pages.itf.json")
    log = write(tmp_path, trace.scenario, sv.to_events(trace.machine, trace.actions), name="incident.jsonl")
    assert run(capsys, log)[0] == 1
    (written,) = tmp_path.glob("incident__*.itf.json")
    replayed = read_trace(written)
    assert replayed.machine.claim_hits(replayed.claim, replayed.states[-1])
    assert not any(replayed.machine.claim_hits(replayed.claim, s) for s in replayed.states[:-1])
    code = main(["replay", str(written)])
    assert code == 0 and "reproduced" in capsys.readouterr().out


def test_a_foreign_read_is_a_violation_at_the_commit(tmp_path, capsys):
    """The incident's read of another request's pages, checked alone: the decode_commit (the
    log's last line) is where every explanation breaks decode_reads_only_own_pages."""
    trace = read_trace("traces/incident__decode_reads_only_own_pages.itf.json")
    events = sv.to_events(trace.machine, trace.actions)
    spec = trace.machine.spec
    read_only = Checked(spec, [spec.claim("decode_reads_only_own_pages")])
    verdict = explain(read_only, sv.observation(read_only),
                      [sv.observation(read_only).decode(i + 2, dict(e, v=1)) for i, e in enumerate(events)])
    assert verdict.kind == "violation" and verdict.event.raw["event"] == "decode_commit"
    assert verdict.event.line == len(events) + 1  # the last line: the commit that read R0's pages


# -- clean logs of fixed engines ------------------------------------------------------------------
@lru_cache(maxsize=None)
def _clean(name, seed, requests=30, slots=4, pages=8):
    sc = simulation_scenario(builtin(name), pages, slots)
    machine = Machine(sc.build())
    return sc, sv.to_events(machine, sv.random_run(machine, requests, seed))


@pytest.mark.parametrize("name,seed", [("pr-38935", 0), ("v0.5.22", 1), ("v0.5.22", 2)])
def test_random_runs_of_fixed_engines_validate_clean(tmp_path, capsys, name, seed):
    sc, events = _clean(name, seed)
    assert len(events) > 80 and len({e["room"] for e in events}) == 4
    code, out, _ = run(capsys, write(tmp_path, sc, events))
    assert code == 0, out
    assert f"{len(events):,} of {len(events):,} events" in out


def test_header_can_name_a_builtin_with_slots_and_pages(tmp_path, capsys):
    sc, events = _clean("v0.5.22", 1)
    log = write(tmp_path, sc, events, scenario="v0.5.22", slots=4, pages=8)
    assert run(capsys, log)[0] == 0
    log = write(tmp_path, sc, events, scenario="v0.5.22", slots=3, pages=8)  # room 3 does not exist
    code, _, err = run(capsys, log)
    assert code == 3 and "room: expected a whole number in 0..2" in err


def test_the_frontier_cap_is_cannot_decide(tmp_path, capsys):
    sc, events = _clean("v0.5.22", 1)
    code, out, _ = run(capsys, write(tmp_path, sc, events), "--max-states", 1)
    assert code == 2 and ": undecided: " in out and "--max-states" in out


def test_a_capped_closure_after_the_last_event_is_cannot_decide(tmp_path, capsys):
    """Every event's search fits the cap, the closure after the last event does not: a possible
    violation only it would reach cannot be ruled out, so the answer is cannot decide (exit 2),
    not explained; ``--certain-only`` (which counts no possible violation) still says explained.
    The prefix and the cap are pinned: with 82 events the closures and steps before the end hold
    at most 6 states, the closure after the last event 12."""
    sc, events = _clean("v0.5.22", 1)
    log = write(tmp_path, sc, events[:82])
    for backend in ("python", "native"):
        code, out, _ = run(capsys, log, "--max-states", 6, "--backend", backend)
        assert code == 2 and ": cannot decide: " in out and "follow the last event" in out, (backend, out)
        assert run(capsys, log, "--max-states", 6, "--backend", backend, "--certain-only")[0] == 0
        assert run(capsys, log, "--max-states", 12, "--backend", backend)[0] == 0
        code, out, _ = run(capsys, log, "--max-states", 5, "--backend", backend)  # an event's search passes it
        assert code == 2 and ": undecided: " in out


# -- mutated logs -------------------------------------------------------------------------------------
def _verdict(sc, events):
    machine = _invariant_machine(sc.build())
    obs = sv.observation(machine)
    return explain(machine, obs, [obs.decode(i + 2, dict(e, v=1)) for i, e in enumerate(events)])


def _find(events, pred, start=0):
    return next(i for i in range(start, len(events)) if pred(events[i]))


def test_a_dropped_forward_is_rejected_at_the_rooms_next_write(tmp_path, capsys):
    sc, events = _clean("v0.5.22", 1)
    i = _find(events, lambda e: e["event"] == "prefill_forward" and e["pages"])
    room = events[i]["room"]
    mutated = events[:i] + events[i + 1:]
    j = _find(mutated, lambda e: e["room"] == room, i)
    assert mutated[j]["event"] == "kv_transfer_write"  # the write needs the forward pass's source pages
    code, out, _ = run(capsys, write(tmp_path, sc, mutated))
    assert code == 5 and f"run.jsonl:{j + 2}: unexplained: kv_transfer_write" in out
    assert "possible state" in out and f"room {room}: p_phase=queued" in out


def test_a_write_landing_before_it_is_issued_is_rejected(tmp_path, capsys):
    sc, events = _clean("pr-38935", 0)
    i = _find(events, lambda e: e["event"] == "kv_transfer_write")
    key = {k: events[i][k] for k in ("room", "rank", "chunk", "gen")}
    j = _find(events, lambda e: e["event"] == "kv_write_lands" and all(e[k] == v for k, v in key.items()), i)
    mutated = list(events)
    mutated[i], mutated[j] = mutated[j], mutated[i]
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == i + 2 and v.event.raw["event"] == "kv_write_lands"


def test_a_duplicated_landing_is_rejected_at_the_copy(tmp_path, capsys):
    sc, events = _clean("pr-38935", 0)
    i = _find(events, lambda e: e["event"] == "kv_write_lands")
    mutated = events[:i + 1] + [events[i]] + events[i + 1:]
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == i + 3


def test_a_changed_page_is_rejected_at_its_line(tmp_path, capsys):
    sc, events = _clean("v0.5.22", 2)
    i = _find(events, lambda e: e["event"] == "kv_transfer_write")
    mutated = list(events)
    mutated[i] = dict(events[i], page=(events[i]["page"] + 1) % 8)
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == i + 2
    k = _find(events, lambda e: e["event"] == "decode_prealloc" and e["pages"])
    mutated = list(events)
    mutated[k] = dict(events[k], pages=list(reversed(events[k]["pages"])) if len(events[k]["pages"]) > 1
                      else [events[k]["pages"][0] + 1])
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == k + 2


def test_a_failed_writes_landing_may_be_unseen_only_where_the_header_says_so(tmp_path, capsys):
    """The failed-send counterexample's log (the write still in flight at the timeout release):
    flagged at the release as the spec logs it; with ``failed_writes_land_unseen`` (a recorded
    log, which cannot show when a failed send's bytes land) it is also the log of a run whose
    write landed unseen before the release, so only the deadline release's ``release_justified``
    is flagged.  A successful write's landing
    is never unseen: dropped from a clean log, the next event of its room is unexplained."""
    trace = read_trace("traces/sglang-0.5.23-failed-send__no_write_after_release.itf.json")
    events = sv.to_events(trace.machine, trace.actions)
    code, out, _ = run(capsys, write(tmp_path, trace.scenario, events), "--no-traces")
    assert code == 1 and f"run.jsonl:{len(events) + 1}: violation: decode_release_timeout" in out
    assert "no_write_after_release" in out.splitlines()[0]
    unseen = write(tmp_path, trace.scenario, events, name="unseen.jsonl", failed_writes_land_unseen=True)
    code, out, _ = run(capsys, unseen, "--no-traces")
    assert code == 1 and out.splitlines()[0].endswith("breaks release_justified")  # the deadline release, nothing else
    # ... and a possible violation of no_write_after_release on the same line (a behaviour
    # consistent with the log lands the write after the release), so no second line
    assert "possible violation" not in out
    spec = trace.machine.spec
    machine = Checked.invariants(spec)
    obs = sv.observation(machine, {sv.UNSEEN_KEY: True})
    v = explain(machine, obs, [obs.decode(k + 2, dict(e, v=1)) for k, e in enumerate(events)])
    assert (v.kind, v.claims) == ("violation", ["release_justified"])
    assert v.maybe.event.line == len(events) + 1 and "no_write_after_release" in v.maybe.claims
    only = Checked(spec, [spec.claim("no_write_after_release")])  # checked alone: explained, but possible
    obs = sv.observation(only, {sv.UNSEEN_KEY: True})
    v = explain(only, obs, [obs.decode(k + 2, dict(e, v=1)) for k, e in enumerate(events)])
    assert v.kind == "explained" and (v.maybe.event.line, v.maybe.claims) == (len(events) + 1, ["no_write_after_release"])
    sc, clean = _clean("v0.5.22", 1)  # with transfer failures
    assert any(e["event"] == "prefill_transfer_failed" for e in clean)
    i = _find(clean, lambda e: e["event"] == "kv_write_lands")
    mutated = clean[:i] + clean[i + 1:]
    machine = _invariant_machine(sc.build())
    obs = sv.observation(machine, {sv.UNSEEN_KEY: True})
    v = explain(machine, obs, [obs.decode(k + 2, dict(e, v=1)) for k, e in enumerate(mutated)])
    assert v.kind == "unexplained" and v.event.raw["room"] == clean[i]["room"]


def test_a_wrong_generation_or_request_id_is_rejected(tmp_path, capsys):
    sc, events = _clean("v0.5.22", 1)
    i = _find(events, lambda e: e["event"] == "decode_prealloc" and e["gen"] > 0)
    mutated = list(events)
    mutated[i] = dict(events[i], gen=events[i]["gen"] + 1)
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == i + 2 and "generation" in v.why
    mutated[i] = dict(events[i], rid="someone-else")
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == i + 2 and "someone-else" in v.why


def test_swapping_independent_events_of_two_rooms_is_still_explained():
    """Two adjacent events of different rooms that touch different pages commute: the swapped
    log is another interleaving the spec allows, so it must validate (a checker that demanded
    the original order would be wrong)."""
    sc, events = _clean("pr-38935", 0)
    movable = ("kv_transfer_write", "kv_write_lands", "prefill_bootstrap_add", "decode_send_metadata")
    i = next(k for k in range(len(events) - 1)
             if events[k]["event"] in movable and events[k + 1]["event"] in movable
             and events[k]["room"] != events[k + 1]["room"] and events[k].get("page") != events[k + 1].get("page", -1))
    mutated = list(events)
    mutated[i], mutated[i + 1] = mutated[i + 1], mutated[i]
    assert _verdict(sc, mutated).kind == "explained"


# -- bad input ------------------------------------------------------------------------------------------
def _lines(tmp_path, capsys, *lines, header=None):
    sc = builtin("v0.5.22")
    head = header if header is not None else json.dumps({"v": 1, "log": "kvproof-events", "scenario": "v0.5.22"})
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([head, *lines]) + "\n")
    del sc
    return run(capsys, path)


GOOD = {"v": 1, "t": 0.0, "actor": "prefill", "rank": 0, "event": "prefill_bootstrap_add", "room": 0,
        "rid": "a", "gen": 0}


@pytest.mark.parametrize("line,message", [
    ('{"v": 1, "t": 0.0, ', "bad.jsonl:3: not JSON"),
    ('[1, 2]', "bad.jsonl:3: expected a JSON object"),
    (json.dumps(dict(GOOD, v=2)), "bad.jsonl:3: unknown schema version 2"),
    (json.dumps(dict(GOOD, event="prefill_teleport")), "bad.jsonl:3: unknown event 'prefill_teleport'"),
    (json.dumps(dict(GOOD, event="clock_tick")), "bad.jsonl:3: event 'clock_tick' is not logged (internal)"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "room"}), "bad.jsonl:3: missing field 'room'"),
    (json.dumps(dict(GOOD, room=7)), "bad.jsonl:3: room: expected a whole number in 0..2"),
    (json.dumps(dict(GOOD, actor="decode")), "bad.jsonl:3: actor: prefill_bootstrap_add is logged by 'prefill'"),
    (json.dumps(dict(GOOD, event="decode_prealloc", actor="decode", pages="p0")), "bad.jsonl:3: pages: expected a list"),
    (json.dumps(dict(GOOD, t="noon")), "bad.jsonl:3: t: expected the time"),
])
def test_bad_lines_are_one_line_exit_3_naming_file_and_line(tmp_path, capsys, line, message):
    # line 2 is a good event: the search reaches the bad line
    code, out, err = _lines(tmp_path, capsys, json.dumps(GOOD), line)
    assert code == 3 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("header,message", [
    ("", "bad.jsonl:1: expected the header"),
    (json.dumps({"v": 9, "log": "kvproof-events", "scenario": "v0.5.22"}), "bad.jsonl:1: unknown schema version 9"),
    (json.dumps({"v": 1, "log": "kvproof-events", "scenario": "no-such"}), "unknown scenario 'no-such'"),
    (json.dumps({"v": 1, "log": "kvproof-events", "scenario": 5}), "bad.jsonl:header: scenario: expected"),
    (json.dumps({"v": 1, "log": "kvproof-events", "scenario": "v0.5.22", "slots": 0}), "slots: expected"),
    (json.dumps({"v": 1, "log": "kvproof-events", "scenario": "v0.5.22", "failed_writes_land_unseen": "yes"}),
     "bad.jsonl:header: failed_writes_land_unseen: expected true or false"),
])
def test_bad_headers_are_exit_3(tmp_path, capsys, header, message):
    code, _, err = _lines(tmp_path, capsys, json.dumps(GOOD), header=header or json.dumps(GOOD))
    assert code == 3 and message in err and len(err.strip().splitlines()) == 1


def test_a_missing_or_empty_log_is_exit_3(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path / "nope.jsonl")
    assert code == 3 and "cannot read" in err
    (tmp_path / "empty.jsonl").write_text("\n\n")
    code, _, err = run(capsys, tmp_path / "empty.jsonl")
    assert code == 3 and "empty" in err
    (tmp_path / "latin.jsonl").write_bytes(b'{"v":1,"log":"kvproof-events","scenario":"v0.5.22"}\n\n\xff\xfe\n')
    code, _, err = run(capsys, tmp_path / "latin.jsonl")
    assert code == 3 and "latin.jsonl:3: not UTF-8 text" in err


def test_bad_input_after_an_unexplained_event_is_still_exit_3(tmp_path, capsys):
    commit = dict(GOOD, event="decode_commit", actor="decode", pages=[0], status="success")
    code, out, err = _lines(tmp_path, capsys, json.dumps(commit), json.dumps(GOOD), "{oops")
    assert code == 3 and out == "" and "bad.jsonl:4: not JSON" in err


def test_an_unexplained_first_event_names_the_line(tmp_path, capsys):
    ev = dict(GOOD, event="decode_commit", actor="decode", pages=[0], status="success")
    code, out, _ = _lines(tmp_path, capsys, json.dumps(GOOD), json.dumps(ev))
    assert code == 5 and "bad.jsonl:3: unexplained: decode_commit" in out and "room 0: p_phase=queued" in out


def test_read_log_is_lazy_and_skips_blank_lines(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"v":1,"log":"kvproof-events","scenario":"v0.5.22"}\n\n{"event":"a"}\n')
    header, rows = read_log(p)
    assert header["scenario"] == "v0.5.22" and list(rows) == [(3, {"event": "a"})]


def test_search_counts_every_event_and_keeps_a_small_frontier():
    sc, events = _clean("v0.5.22", 2)
    machine = _invariant_machine(sc.build())
    obs = sv.observation(machine)
    v = explain(machine, obs, [obs.decode(i + 2, dict(e, v=1)) for i, e in enumerate(events)], 1000,
                Search(machine, obs, 1000))
    assert v.kind == "explained" and v.events == len(events) and 1 < v.peak < 1000


def test_the_readme_examples_give_their_documented_verdicts(tmp_path, capsys):
    code, out, _ = run(capsys, "examples/validate/v0.5.22-clean.jsonl")
    assert code == 0 and "284 of 284 events" in out and "breaks no invariant (10 checked)" in out
    code, out, _ = run(capsys, "examples/validate/incident.jsonl", "--traces", tmp_path)
    assert code == 1 and out.startswith("examples/validate/incident.jsonl:13: violation: decode_prealloc")
    assert (tmp_path / "incident__rejected_never_reserves.itf.json").is_file()


@lru_cache(maxsize=None)
def _obs():
    return sv.observation(Checked.invariants(builtin("tp2x2").build()))


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True),
                    st.text(max_size=6), st.lists(st.integers(-2, 9), max_size=4),
                    st.sampled_from(["decode", "prefill", "client", "success", "verified"]))
_KEYS = ["event", "t", "actor", "rank", "room", "rid", "gen", "layer", "chunk", "page", "pages", "slot", "status"]


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES),
       st.sampled_from(sorted(sv.FIELDS) + list(sv.INTERNAL) + ["nope"]))
def test_any_line_decodes_or_is_one_line_bad_input(raw, name):
    """Whatever a line holds, reading it gives an event or a ValueError (exit 3), never a crash."""
    raw = dict(raw, event=name) if "event" not in raw else raw
    try:
        ev = _obs().decode(2, raw)
    except ValueError as e:
        assert "\n" not in str(e)
    else:
        assert ev.raw is raw and all(isinstance(a, int) for a in ev.aids)


# -- exit codes: 0 explained, 1 a violation, 5 an unexplained line (and which wins) -------------------
CLEAN_LOG = "examples/validate/v0.5.22-clean.jsonl"
INCIDENT_LOG = "examples/validate/incident.jsonl"


def _log_lines(path):
    from pathlib import Path

    return Path(path).read_text().splitlines(keepends=True)


def _log(tmp_path, lines, name="mutated.jsonl"):
    path = tmp_path / name
    path.write_text("".join(lines))
    return path


def test_validate_has_one_exit_code_per_answer():
    from kvproof.checker.cli.commands import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MISMATCH, EXIT_OK,
                                              EXIT_OUT_OF_MEMORY, EXIT_UNEXPLAINED)
    from kvproof.checker.logs.validate_command import ANSWERS
    from kvproof.checker.logs.validate_output import exit_of

    assert {a: exit_of([a]) for a in ANSWERS} == {"explained": 0, "violation": 1, "undecided": 2, "unexplained": 5}
    assert EXIT_UNEXPLAINED == 5
    assert EXIT_UNEXPLAINED not in (EXIT_OK, EXIT_MISMATCH, EXIT_INCONCLUSIVE, EXIT_BAD_INPUT, EXIT_OUT_OF_MEMORY)


@pytest.mark.parametrize("log, code, first", [
    (CLEAN_LOG, 0, f"{CLEAN_LOG}: explained: "),
    ("examples/validate/vllm-clean.jsonl", 0, "examples/validate/vllm-clean.jsonl: explained: "),
    (INCIDENT_LOG, 1, f"{INCIDENT_LOG}:13: violation: decode_prealloc"),
    ("examples/validate/vllm-lease-expiry.jsonl", 1, "examples/validate/vllm-lease-expiry.jsonl:6: violation: "),
], ids=["sglang-clean", "vllm-clean", "incident", "vllm-lease-expiry"])
def test_clean_logs_exit_0_and_hazard_logs_exit_1(capsys, log, code, first):
    got, out, _ = run(capsys, log, "--no-traces")
    assert got == code and out.startswith(first), out


def _reordered(lines):
    """The first write's landing moved before the write itself; the line it lands on then."""
    i = next(k for k, line in enumerate(lines) if '"event":"kv_transfer_write"' in line)
    key = json.loads(lines[i])
    j = next(k for k in range(i + 1, len(lines)) if json.loads(lines[k])["event"] == "kv_write_lands"
             and all(json.loads(lines[k])[f] == key[f] for f in ("room", "rank", "chunk", "gen")))
    return lines[:i] + [lines[j]] + lines[i:j] + lines[j + 1:], i + 1


@pytest.mark.parametrize("how", ["dropped", "duplicated", "reordered"])
def test_a_clean_log_with_a_line_lost_duplicated_or_reordered_exits_5(tmp_path, capsys, how):
    """The clean example with one line dropped (room 2's bootstrap: its forward pass at line 24
    then has no request), one duplicated (a second bootstrap of room 5) or a write's landing
    moved before the write: unexplained, exit 5 - not 1, which says the engine broke a claim."""
    lines = _log_lines(CLEAN_LOG)
    if how == "dropped":
        mutated, line, event = lines[:2] + lines[3:], 24, "prefill_forward"
    elif how == "duplicated":
        mutated, line, event = lines[:2] + lines[1:], 3, "prefill_bootstrap_add"
    else:
        (mutated, line), event = _reordered(lines), "kv_write_lands"
    log = _log(tmp_path, mutated)
    code, out, _ = run(capsys, log, "--traces", tmp_path / "out")
    assert code == 5, out
    assert out.startswith(f"{log}:{line}: unexplained: {event} - no behaviour of the spec explains it"), out
    assert "violation" not in out and not (tmp_path / "out").exists()


def test_a_violation_before_an_unexplained_line_wins_exit_1(tmp_path, capsys):
    """The incident's log with its line 15 duplicated: read without any claim, line 16 is
    unexplained; read by validate, every explanation breaks a claim at line 13 first, and a
    violation is the stronger statement: exit 1, its trace written."""
    lines = _log_lines(INCIDENT_LOG)
    log = _log(tmp_path, lines[:15] + lines[14:])
    header, rows = read_log(str(log))
    bare = Checked(builtin(header["scenario"]).build(), [])  # no claim: nothing is a violation
    obs = sv.observation(bare)
    v = explain(bare, obs, [obs.decode(no, raw) for no, raw in rows])
    assert (v.kind, v.event.line) == ("unexplained", 16)
    code, out, _ = run(capsys, log, "--traces", tmp_path / "out")
    assert code == 1 and out.startswith(f"{log}:13: violation: decode_prealloc"), out
    assert (tmp_path / "out" / "mutated__rejected_never_reserves.itf.json").is_file()


def test_an_unexplained_line_before_the_violation_exits_5(tmp_path, capsys):
    """The same log with line 3 duplicated instead: no behaviour explains the log from line 4,
    so none reaches the violation at line 13 - the log is unexplained, exit 5."""
    lines = _log_lines(INCIDENT_LOG)
    log = _log(tmp_path, lines[:3] + lines[2:])
    code, out, _ = run(capsys, log, "--traces", tmp_path / "out")
    assert code == 5 and out.startswith(f"{log}:4: unexplained: prefill_bootstrap_add"), out
    assert "violation" not in out and not (tmp_path / "out").exists()


def test_a_possible_violation_before_an_unexplained_line_counts_unless_certain_only(tmp_path, capsys):
    """The push-window log (a possible violation at line 6, the reap) with its last line
    duplicated (unexplained at line 9): the possible violation counts, as on an explained log -
    exit 1, its trace written; with --certain-only it does not, and the log is unexplained: exit 5."""
    lines = _log_lines("examples/validate/vllm-push-window.jsonl")
    log = _log(tmp_path, lines + lines[-1:])
    code, out, _ = run(capsys, log, "--traces", tmp_path / "out")
    assert code == 1 and out.startswith(f"{log}:9: unexplained: decode_finished_recving"), out
    assert f"possible violation of no_source_free_while_read from {log}:6" in out and ": counted, it wins" in out
    assert (tmp_path / "out" / "mutated__no_source_free_while_read.itf.json").is_file()
    code, out, _ = run(capsys, log, "--traces", tmp_path / "certain", "--certain-only")
    assert code == 5 and out.startswith(f"{log}:9: unexplained: decode_finished_recving"), out
    assert ": not counted (--certain-only)" in out and not (tmp_path / "certain").exists()


def test_the_help_documents_every_exit_code_and_which_wins(capsys):
    assert main(["validate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in ("Exit 0: explained", "1: a violation", "5: unexplained", "2: cannot decide", "3: bad input",
                  "a violation before an unexplained line wins, exit 1"):
        assert words in text, words
