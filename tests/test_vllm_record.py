"""``kvproof.record`` on vLLM 0.33.0: event logs recorded from its real scheduler and NIXL
connector classes (pull and push mode) as the conformance harness (``spec/vllm/conform``) drives them,
checked by ``kvproof validate``.  Skipped without the vllm extra, except under
``KVPROOF_REQUIRE_VLLM=1`` (CI); slow only because importing vLLM and building its first
configuration takes 10-60 s, every test after that is short.

Random event sequences of the 0.33.0 pull scenarios are recorded from the real code: the
recorded log is, event for event, the model's own log of the sequence (``to_events``), a run
that breaks no invariant validates, and a log is flagged at the event the model's own log is.
A lease-expiry hazard (decode stalls, the lease runs out, the block goes to the next request,
decode then posts the READ) is flagged at the READ.  A run whose lease is reaped while its READ
(push: its WRITE) may be in flight is a *possible* violation at the reap, with the line pinned
(:data:`MAYBE`, :data:`PUSH_MAYBE`): the push hazard runs the log cannot prove.  Recorded logs with an event dropped, two
swapped, one duplicated or a block changed are rejected at that line.
"""

import json
import os
import random
from functools import lru_cache
from pathlib import Path

import pytest

from kvproof.spec.vllm.conform import engine_problem

if os.environ.get("KVPROOF_REQUIRE_VLLM") != "1" and engine_problem() is not None:
    pytest.skip(f"recording needs the vllm extra: {engine_problem()}", allow_module_level=True)

pytestmark = pytest.mark.slow  # importing vLLM and its first configuration take 10-60 s

SHOWN = ("event", "actor", "req", "gen", "block", "src", "dest", "status", "reqs")
"""The keys the model's own log and the recorded one must agree on (``t``, ``rid`` and the real
block ids ``vllm_*`` are the engine's)."""


@lru_cache(maxsize=None)
def _model(name):
    """(scenario, machine) of built-in scenario ``name``."""
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import builtin

    sc = builtin(name)
    return sc, Machine(sc.build())


def _record(scenario, machine, actions, path):
    """Drive the harness along ``actions`` with the recorder installed; the conformance result
    and the recorded (header, events)."""
    from kvproof.spec.vllm.conform.replay import harness_for, run_on_code
    from kvproof.spec.vllm.record import install

    harness = harness_for(scenario, machine.spec)
    rec = install(path, scenario.name)
    harness.on_read_posted.append(rec.read_posted)  # decode's worker is the harness: it posts the READ
    try:
        result = run_on_code(machine, harness, actions)
    finally:
        rec.uninstall()
        rec.log.close()
        harness.close()
    lines = Path(path).read_text().splitlines()
    return result, json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def _verdict(scenario, events):
    from kvproof.checker.logs.validate import Checked, explain
    from kvproof.spec.vllm import validate as vv

    machine = Checked.invariants(scenario.build())
    obs = vv.observation(machine)
    return explain(machine, obs, [obs.decode(i + 2, dict(e)) for i, e in enumerate(events)])


def _shown(events):
    return [{k: e[k] for k in SHOWN if k in e} for e in events]


def _random_actions(machine, seed, steps=30):
    rng = random.Random(seed)
    state, out = machine.init, []
    for _ in range(steps):
        enabled = machine.successors(state)
        if not enabled:
            break
        aid, state = rng.choice(enabled)
        out.append(aid)
    return out


def _breaks(machine, actions):
    """Whether the model's run of ``actions`` reaches a state that breaks an always-invariant."""
    from kvproof.checker.logs.validate import Checked

    checked = Checked.invariants(machine.spec)
    state = machine.init
    for aid in actions:
        state = machine.step(state, aid)
        if checked.hits(state):
            return True
    return False


# -- random runs of the real code ---------------------------------------------------------------------
RUNS = [("vllm-pull-ttl-expiry", s) for s in (0, 3)] + [("vllm-pull-lease-outlasts-read", s) for s in (0, 1)] + [
    ("vllm-pull-lease-equals-read", s) for s in (0, 4)] + [("vllm-pull-heartbeat-stall", s) for s in (0, 1)] + [
    ("vllm-pull-heartbeat", s) for s in (0, 2)] + [("vllm-pull-abort-32255", s) for s in (0, 1)]
"""Random runs (30 steps) of the 0.33.0 pull scenarios: ttl-expiry's seed 0, lease-equals-read's
seed 0 and heartbeat-stall's seed 1 break an invariant and their logs prove it; ttl-expiry's
seed 3 breaks one, but the log cannot prove it (it does not show when NIXL moved the data)."""

REAP, READ, SFWR = "prefill_reap_expired_lease", "decode_start_load_kv", ["no_source_free_while_read"]
MAYBE = {("vllm-pull-ttl-expiry", 0): (5, READ, SFWR), ("vllm-pull-ttl-expiry", 3): (5, REAP, SFWR),
         ("vllm-pull-lease-equals-read", 0): (5, REAP, SFWR), ("vllm-pull-lease-equals-read", 4): (5, REAP, SFWR),
         ("vllm-pull-heartbeat-stall", 1): (7, READ, SFWR)}
"""The first possible violation of each run's log, where it has one (line, event, claims): the
READ posted on a freed block, or the lease reaped while a READ may be in flight.
lease-equals-read's seed 4 breaks nothing, but its lease runs out with the READ posted and not
known complete: a behaviour consistent with its log reads a freed block (the run entered the
window; the log cannot tell it did not)."""


def _maybe(verdict):
    """(line, event, claims) of a verdict's first possible violation, or ``None``."""
    m = verdict.maybe
    return m and (m.event.line, m.event.raw["event"], m.claims)


@pytest.mark.parametrize("name,seed", RUNS)
def test_recorded_random_runs_are_the_models_log_and_get_its_verdict(tmp_path, name, seed):
    from kvproof.spec.vllm import validate as vv

    sc, machine = _model(name)
    actions = _random_actions(machine, seed)
    result, header, events = _record(sc, machine, actions, tmp_path / "run.jsonl")
    assert result.agrees, result.reason
    assert isinstance(header.pop("t0"), float)  # the wall clock at t = 0 (for merging logs by time)
    assert header == {"v": 1, "log": "kvproof-events", "scenario": name}
    want = vv.to_events(machine, actions)
    assert _shown(events) == _shown(want)
    assert all(e["rid"] == f"R{e['req']}" for e in events if "req" in e)  # prefill's request id
    verdict, own = _verdict(sc, events), _verdict(sc, want)
    assert (verdict.kind, verdict.event and verdict.event.line) == (own.kind, own.event and own.event.line)
    assert _maybe(verdict) == _maybe(own) == MAYBE.get((name, seed))
    if not _breaks(machine, actions):
        assert verdict.kind == "explained", verdict.why
    else:
        assert verdict.kind in ("explained", "violation") and verdict.maybe is not None


def test_the_random_runs_include_clean_flagged_and_unprovable_ones():
    """The parametrization above covers every verdict (else it would test only one side)."""
    kinds = set()
    for name, seed in RUNS:
        sc, machine = _model(name)
        from kvproof.spec.vllm import validate as vv

        actions = _random_actions(machine, seed)
        verdict = _verdict(sc, vv.to_events(machine, actions))
        kinds.add((_breaks(machine, actions), verdict.kind, verdict.maybe is not None))
    assert kinds == {(False, "explained", False), (True, "violation", True), (True, "explained", True),
                     (False, "explained", True)}


def test_the_random_runs_exercise_every_recorded_event():
    """Every wrapper writes in the runs above: each event and status 0.33.0 pull can log (its
    ``decode_abort`` always holds a load, #32255, so ``freed`` does not occur)."""
    from kvproof.spec.vllm import validate as vv

    seen = set()
    for name, seed in RUNS:
        sc, machine = _model(name)
        seen |= {(e["event"], e.get("status")) for e in vv.to_events(machine, _random_actions(machine, seed))}
    want = {(n, s) for n in vv.FIELDS for s in vv.STATUS.get(n, (None,))}
    push_or_prefix = {"prefill_push_write", "prefill_get_transfer_results", "decode_send_push_reg",
                      "prefill_abort_finished"}
    assert want - seen == {(n, s) for n, s in want if n in push_or_prefix} | {("decode_abort", "freed")}


# -- the lease-expiry hazard ----------------------------------------------------------------------------
HAZARD = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "decode_stall()", "clock_tick()",
          "clock_tick()", "clock_tick()", "decode_resume()", "prefill_reap_expired_lease(req=R0)",
          "prefill_request_finished(req=R1)", "decode_start_load_kv(req=R0)", "nixl_read_take_data(req=R0)",
          "nixl_read_complete(req=R0)", "decode_finished_recving(req=R0)", "prefill_get_new_notifs(req=R0)"]
"""0.33.0 as shipped (``vllm-pull-heartbeat-stall``): decode stalls after taking R0, no heartbeat
goes out, R0's lease runs out and prefill frees its block, R1 (tenant B) is prefilled into it,
decode resumes and READs it for R0, computes on it, and prefill logs the late notification."""


def test_a_recorded_lease_expiry_is_flagged_at_the_read(tmp_path, capsys):
    from kvproof.checker.cli import main

    sc, machine = _model("vllm-pull-heartbeat-stall")
    ids = {machine.label(a): a for a in range(len(machine.instances))}
    log = tmp_path / "lease.jsonl"
    result, _, events = _record(sc, machine, [ids[x] for x in HAZARD], log)
    assert result.agrees, result.reason
    read = next(i for i, e in enumerate(events) if e["event"] == "decode_start_load_kv")
    assert events[read - 1]["event"] == "prefill_request_finished" and events[read - 1]["block"] == events[read]["src"]
    assert events[read - 1]["vllm_block"] == events[read]["vllm_src"]  # vLLM handed R0's block to R1
    assert [e.get("status") for e in events if e["event"] == "prefill_get_new_notifs"] == ["late"]
    code = main(["validate", str(log), "--traces", str(tmp_path / "out")])
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 1
    assert first.startswith(f"{log}:{read + 2}: violation: decode_start_load_kv")
    assert first.endswith("breaks no_source_free_while_read")
    assert list((tmp_path / "out").glob("lease__no_source_free_while_read.itf.json"))
    assert _maybe(_verdict(sc, events)) == (read + 2, READ, SFWR)  # no READ in flight at the reap: certain at once


def test_a_heartbeat_keeps_the_lease_and_the_log_validates(tmp_path, capsys):
    """The same start with heartbeats (``vllm-pull-heartbeat``): the real ``_handle_heartbeat``
    extends the lease, the READ completes in time, the log validates."""
    from kvproof.checker.cli import main

    sc, machine = _model("vllm-pull-heartbeat")
    ids = {machine.label(a): a for a in range(len(machine.instances))}
    labels = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "clock_tick()",
              "decode_send_heartbeats()", "clock_tick()", "decode_send_heartbeats()", "clock_tick()",
              "decode_start_load_kv(req=R0)", "nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)",
              "prefill_get_new_notifs(req=R0)", "decode_finished_recving(req=R0)"]
    assert all(x in ids for x in labels), [x for x in labels if x not in ids]
    log = tmp_path / "hb.jsonl"
    result, _, events = _record(sc, machine, [ids[x] for x in labels], log)
    assert result.agrees, result.reason
    assert [e["reqs"] for e in events if e["event"] == "decode_send_heartbeats"] == [[0], [0]]
    assert [e.get("status") for e in events if e["event"] == "prefill_get_new_notifs"] == ["finished_sending"]
    assert main(["validate", str(log), "--no-traces"]) == 0, capsys.readouterr().out


# -- mutated recorded logs -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def clean_log(tmp_path_factory):
    """A recorded clean run: two requests, each prefilled, taken by decode, READ, notified and
    loaded."""
    sc, machine = _model("vllm-pull-heartbeat")
    names = ["prefill_request_finished", "decode_on_new_request", "decode_start_load_kv", "nixl_read_take_data",
             "nixl_read_complete", "prefill_get_new_notifs", "decode_finished_recving"]
    actions = [next(i.aid for i in machine.instances if i.name == n and i.args == (r,)) for r in (0, 1)
               for n in names]
    path = tmp_path_factory.mktemp("clean") / "clean.jsonl"
    result, _, events = _record(sc, machine, actions, path)
    assert result.agrees, result.reason
    assert len(events) == 10 and _verdict(sc, events).kind == "explained"
    return sc, path, events


def _find(events, name, req):
    return next(i for i, e in enumerate(events) if e["event"] == name and e.get("req") == req)


def test_a_dropped_event_is_rejected_at_the_requests_next_event(clean_log):
    sc, _, events = clean_log
    i = _find(events, "decode_on_new_request", 1)
    v = _verdict(sc, events[:i] + events[i + 1:])
    assert v.kind == "unexplained" and v.event.line == i + 2 and v.event.raw["event"] == "decode_start_load_kv"


def test_a_notification_swapped_before_its_read_is_rejected(clean_log):
    sc, _, events = clean_log
    i, j = _find(events, "decode_start_load_kv", 0), _find(events, "prefill_get_new_notifs", 0)
    mutated = list(events)
    mutated[i], mutated[j] = mutated[j], mutated[i]
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == i + 2 and v.event.raw["event"] == "prefill_get_new_notifs"


def test_a_duplicated_event_is_rejected_at_the_copy(clean_log):
    sc, _, events = clean_log
    i = _find(events, "decode_finished_recving", 0)
    v = _verdict(sc, events[:i + 1] + [events[i]] + events[i + 1:])
    assert v.kind == "unexplained" and v.event.line == i + 3


@pytest.mark.parametrize("name,field", [("decode_on_new_request", "block"), ("decode_start_load_kv", "dest"),
                                        ("decode_finished_recving", "block")])
def test_a_changed_block_is_rejected_at_its_line(clean_log, name, field):
    sc, _, events = clean_log
    assert sc.config.decode_blocks == 2  # the other block exists: only the search can reject it
    i = _find(events, name, 1)
    mutated = list(events)
    mutated[i] = dict(events[i], **{field: 1 - events[i][field]})
    v = _verdict(sc, mutated)
    assert v.kind == "unexplained" and v.event.line == i + 2


@pytest.mark.parametrize("name,field", [("prefill_request_finished", "block"), ("decode_start_load_kv", "src")])
def test_a_prefill_block_outside_the_pool_is_bad_input_at_its_line(clean_log, tmp_path, capsys, name, field):
    """Prefill has one block here: any other number is outside the pool (exit 3, one line)."""
    from kvproof.checker.cli import main

    sc, path, events = clean_log
    assert sc.config.prefill_blocks == 1
    i = _find(events, name, 1)
    lines = Path(path).read_text().splitlines()
    lines[i + 1] = json.dumps(dict(events[i], **{field: 1}))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    assert main(["validate", str(bad), "--no-traces"]) == 3
    err = capsys.readouterr().err
    assert f"{bad}:{i + 2}: {field}: expected a whole number in 0..0, got 1" in err


def test_the_real_block_ids_are_not_compared(clean_log):
    """``vllm_block`` and friends are the engine's numbering, logged for the reader only."""
    sc, _, events = clean_log
    mutated = [dict(e, **{k: 99 for k in e if k.startswith("vllm_")}) for e in events]
    assert _verdict(sc, mutated).kind == "explained"


# -- opt-in ----------------------------------------------------------------------------------------------
def test_a_vllm_scenario_patches_vllm_and_nothing_without_the_variable(tmp_path):
    import kvproof.record as record
    from kvproof.spec.vllm.conform import load_vllm

    cls = load_vllm()["pull_worker"].NixlPullConnectorWorker
    before = cls.__dict__["_get_new_notifs"]
    assert record.install({"KVPROOF_RECORD_SCENARIO": "vllm-pull-heartbeat"}) is None
    assert cls.__dict__["_get_new_notifs"] is before
    log = tmp_path / "on.jsonl"
    rec = record.install({"KVPROOF_RECORD": str(log), "KVPROOF_RECORD_SCENARIO": "vllm-pull-heartbeat",
                          "KVPROOF_RECORD_SLOTS": "8"})
    try:
        assert cls.__dict__["_get_new_notifs"] is not before and len(rec.slots) == 8
        header = json.loads(log.read_text())
        assert isinstance(header.pop("t0"), float)  # the wall clock at t = 0 (for merging logs by time)
        assert header == {"v": 1, "log": "kvproof-events", "scenario": "vllm-pull-heartbeat", "slots": 8}
    finally:
        record.uninstall()
    assert cls.__dict__["_get_new_notifs"] is before


def test_a_bad_slot_count_is_one_line_exit_3(tmp_path, capsys):
    import kvproof.record as record

    with pytest.raises(SystemExit) as exit_:
        record.install({"KVPROOF_RECORD": str(tmp_path / "x.jsonl"), "KVPROOF_RECORD_SCENARIO": "vllm-pull-heartbeat",
                        "KVPROOF_RECORD_SLOTS": "0"})
    err = capsys.readouterr().err
    assert exit_.value.code == 3 and "KVPROOF_RECORD_SLOTS: expected a whole number in 1..1024, got '0'" in err
    assert not (tmp_path / "x.jsonl").exists()


# -- push mode --------------------------------------------------------------------------------------------
PUSH_RUNS = [(n, ("seed", s)) for n in ("vllm-push-heartbeat", "vllm-push-lease-expiry-stall",
                                        "vllm-push-abort-unanswered") for s in (0, 1)] + [
    ("vllm-push-lease-expiry-stall", ("trace", "no_cross_tenant_read")),
    ("vllm-push-abort-unanswered", ("trace", "no_source_free_while_read"))]
"""Random 30-step runs of the three 0.33.0 push scenarios, and two stored counterexamples
(V7: the lease runs out with the WRITE outstanding, the block goes to R1, decode loads R0 from
it; V5: an aborted load's WRITE outstanding when the lease runs out), replayed on the real push
connector."""

PUSH_MAYBE = {("vllm-push-lease-expiry-stall", ("seed", 0)): 7, ("vllm-push-abort-unanswered", ("seed", 0)): 7,
              ("vllm-push-abort-unanswered", ("seed", 1)): 7,
              ("vllm-push-lease-expiry-stall", ("trace", "no_cross_tenant_read")): 6,
              ("vllm-push-abort-unanswered", ("trace", "no_source_free_while_read")): 7}
"""The line of each push run's first possible violation: the reap of a lease whose WRITE may
still be in flight (no_source_free_while_read); the heartbeat runs and lease-expiry-stall's seed
1 have none."""


@pytest.mark.parametrize("name,run", PUSH_RUNS, ids=[f"{n}-{r[1]}" for n, r in PUSH_RUNS])
def test_recorded_push_runs_are_the_models_log_and_validate(tmp_path, capsys, name, run):
    """The push wrappers (``NixlPushConnectorScheduler.request_finished`` and
    ``update_state_after_alloc``, ``NixlPushConnectorWorker._do_send_reg_notif``,
    ``_do_start_push_kv`` and ``get_transfer_results``) write, event for event, the model's own
    log; each is explained, as the model's own log is: the hazard runs too, since no log shows
    when the WRITE moved its data (a behaviour that moved it before the lease ran out explains
    them; pinned in ``tests/test_vllm_validate.py``).  Those that reap a lease with the WRITE
    outstanding are a possible violation of no_source_free_while_read at the reap's line
    (:data:`PUSH_MAYBE`), in the recorded log as in the model's; both stored counterexamples are
    among them (they break an invariant: at least possible), and the command exits 1 there."""
    from kvproof.checker.traces import read_trace
    from kvproof.spec.vllm import validate as vv

    sc, machine = _model(name)
    kind, arg = run
    actions = _random_actions(machine, arg) if kind == "seed" else read_trace(f"traces/{name}__{arg}.itf.json").actions
    result, header, events = _record(sc, machine, actions, tmp_path / "push.jsonl")
    assert result.agrees, result.reason
    assert isinstance(header.pop("t0"), float)  # the wall clock at t = 0 (for merging logs by time)
    assert header == {"v": 1, "log": "kvproof-events", "scenario": name}
    want = vv.to_events(machine, actions)
    assert _shown(events) == _shown(want)
    push = {e["event"] for e in events} & {"decode_send_push_reg", "prefill_push_write", "prefill_get_transfer_results"}
    assert push, "no push event recorded"
    verdict = _verdict(sc, events)
    assert verdict.kind == _verdict(sc, want).kind == "explained"
    line = PUSH_MAYBE.get((name, run))
    assert _maybe(verdict) == _maybe(_verdict(sc, want)) == (line and (line, REAP, SFWR))
    if kind == "trace":
        assert _breaks(machine, actions)
        from kvproof.checker.cli import main

        log = tmp_path / "push.jsonl"
        capsys.readouterr()
        assert main(["validate", str(log), "--no-traces"]) == 1
        assert capsys.readouterr().out.startswith(f"{log}:{line}: possible violation: {REAP} - ")


def test_the_push_runs_exercise_every_push_event():
    """Every push wrapper writes in the runs above."""
    from kvproof.checker.traces import read_trace
    from kvproof.spec.vllm import validate as vv

    seen = set()
    for name, (kind, arg) in PUSH_RUNS:
        sc, machine = _model(name)
        actions = _random_actions(machine, arg) if kind == "seed" else \
            read_trace(f"traces/{name}__{arg}.itf.json").actions
        seen |= {e["event"] for e in vv.to_events(machine, actions)}
    assert {"decode_send_push_reg", "prefill_push_write", "prefill_get_transfer_results",
            "prefill_reap_expired_lease", "decode_finished_recving", "decode_abort"} <= seen


def test_a_mutated_push_log_is_rejected_at_its_line(tmp_path):
    """A recorded clean push run with the WRITE moved before its registration, or the WRITE's
    destination block changed, is unexplained at that line."""
    sc, machine = _model("vllm-push-heartbeat")
    names = ["prefill_request_finished", "decode_on_new_request", "decode_send_push_reg", "prefill_push_write",
             "nixl_write_land", "nixl_write_complete", "prefill_get_transfer_results", "decode_finished_recving"]
    actions = [next(i.aid for i in machine.instances if i.name == n and i.args == (r,)) for r in (0, 1)
               for n in names]
    result, _, events = _record(sc, machine, actions, tmp_path / "push.jsonl")
    assert result.agrees, result.reason
    assert [e["event"] for e in events][:6] == ["prefill_request_finished", "decode_on_new_request",
                                                "decode_send_push_reg", "prefill_push_write",
                                                "prefill_get_transfer_results", "decode_finished_recving"]
    assert _verdict(sc, events).kind == "explained"
    i, j = _find(events, "decode_send_push_reg", 1), _find(events, "prefill_push_write", 1)
    swapped = list(events)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    v = _verdict(sc, swapped)
    assert v.kind == "unexplained" and v.event.line == i + 2 and v.event.raw["event"] == "prefill_push_write"
    changed = [dict(e) for e in events]
    changed[j]["dest"] = 1 - changed[j]["dest"]
    v = _verdict(sc, changed)
    assert v.kind == "unexplained" and v.event.line == j + 2
