"""The recorder loaded the way the engines load plugins: through an installed distribution's entry
point, by vLLM 0.33.0's ``load_general_plugins()`` and SGLang 0.5.23's ``load_plugins()`` (the
functions each engine calls in every process it starts), then the conformance harness driving the
engines' real classes, and ``kvproof validate`` on the log the plugin wrote.

The distribution is a tiny one written into a temporary directory on ``sys.path`` (a
``.dist-info`` with ``entry_points.txt``), naming the same functions kvproof's own
``pyproject.toml`` registers; the engine's allow-list (``VLLM_PLUGINS``, ``SGLANG_PLUGINS``)
names it alone.  Slow tier: importing the engines takes 10-60 s.
"""

from __future__ import annotations

import importlib
import os
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PROBE = "kvproof-record-probe"
"""The entry point's name in the temporary distribution (and the engines' allow-list)."""


def _distribution(where: Path, group: str, target: str) -> None:
    """Write an installed distribution ``kvproof-record-probe`` whose entry point ``PROBE`` in
    ``group`` is ``target`` into ``where`` (a ``sys.path`` entry)."""
    info = where / "kvproof_record_probe-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kvproof-record-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{PROBE} = {target}\n")
    importlib.invalidate_caches()


def test_kvproof_registers_both_plugins_and_they_resolve():
    """The stanza a deployment gets by installing kvproof names the functions the tests load."""
    import kvproof.record as record

    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps["vllm.general_plugins"] == {"kvproof-record": "kvproof.record:vllm_plugin"}
    assert eps["sglang.srt.plugins"] == {"kvproof-record": "kvproof.record:sglang_plugin"}
    assert callable(record.vllm_plugin) and callable(record.sglang_plugin)


def test_the_plugins_do_nothing_without_the_variable_or_for_the_other_engine(monkeypatch):
    import kvproof.record as record

    monkeypatch.delenv("KVPROOF_RECORD", raising=False)
    record.vllm_plugin(), record.sglang_plugin()
    assert record._active is None
    monkeypatch.setenv("KVPROOF_RECORD", "/nonexistent/dir/x.jsonl")  # would be exit 3 if installed
    monkeypatch.setenv("KVPROOF_RECORD_SCENARIO", "vllm-pull-heartbeat")
    record.sglang_plugin()  # an SGLang process of a vLLM scenario: nothing
    monkeypatch.setenv("KVPROOF_RECORD_SCENARIO", "sglang-0.5.23-mooncake")
    record.vllm_plugin()
    assert record._active is None
    monkeypatch.setenv("KVPROOF_RECORD_SCENARIO", "no-such-scenario")
    with pytest.raises(SystemExit) as exit_:
        record.vllm_plugin()
    assert exit_.value.code == 3


# -- vLLM --------------------------------------------------------------------------------------------------
def _vllm_run(tmp_path, monkeypatch, name, labels):
    """Load the recorder through vLLM's plugin loader, drive the harness along ``labels`` of
    scenario ``name``; (log path, recorded events)."""
    import json

    from kvproof.spec.vllm.conform import engine_problem

    if engine_problem() is not None:
        pytest.skip(f"needs the vllm extra: {engine_problem()}")
    import kvproof.record as record
    import vllm.plugins as vp
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import builtin
    from kvproof.spec.vllm.conform import load_vllm
    from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

    sc = builtin(name)
    machine = Machine(sc.build())
    ids = {machine.label(a): a for a in range(len(machine.instances))}
    site = tmp_path / "site"
    _distribution(site, "vllm.general_plugins", "kvproof.record:vllm_plugin")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("KVPROOF_RECORD", str(tmp_path / "vllm-{pid}.jsonl"))
    monkeypatch.setenv("KVPROOF_RECORD_SCENARIO", name)
    monkeypatch.setenv("VLLM_PLUGINS", PROBE)
    worker = load_vllm()["pull_worker"].NixlPullConnectorWorker
    before = worker.__dict__["_get_new_notifs"]
    monkeypatch.setattr(vp, "plugins_loaded", False)
    assert record._active is None
    vp.load_general_plugins()  # what every vLLM process runs at start
    rec = record._active
    assert rec is not None and worker.__dict__["_get_new_notifs"] is not before
    harness = harness_for(sc, machine.spec)
    harness.on_read_posted.append(rec.read_posted)  # decode's worker is the harness: it posts the READ
    try:
        result = run_on_code(machine, harness, [ids[x] for x in labels])
    finally:
        record.uninstall()
        harness.close()
    assert worker.__dict__["_get_new_notifs"] is before
    assert result.agrees, result.reason
    log = tmp_path / f"vllm-{os.getpid()}.jsonl"
    return log, [json.loads(x) for x in log.read_text().splitlines()[1:]]


def test_vllm_plugin_records_a_clean_run_that_validates(tmp_path, monkeypatch, capsys):
    from kvproof.checker.cli import main

    labels = ["prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)", "clock_tick()",
              "decode_send_heartbeats()", "clock_tick()", "decode_send_heartbeats()", "clock_tick()",
              "decode_start_load_kv(req=R0)", "nixl_read_take_data(req=R0)", "nixl_read_complete(req=R0)",
              "prefill_get_new_notifs(req=R0)", "decode_finished_recving(req=R0)"]
    log, events = _vllm_run(tmp_path, monkeypatch, "vllm-pull-heartbeat", labels)
    assert [e["event"] for e in events] == [
        "prefill_request_finished", "decode_on_new_request", "decode_send_heartbeats", "decode_send_heartbeats",
        "decode_start_load_kv", "prefill_get_new_notifs", "decode_finished_recving"]
    code = main(["validate", str(log), "--no-traces"])
    out = capsys.readouterr().out
    assert code == 0 and ": explained:" in out.splitlines()[0], out


def test_vllm_plugin_records_a_lease_expiry_flagged_at_the_read(tmp_path, monkeypatch, capsys):
    from kvproof.checker.cli import main
    from tests.test_vllm_record import HAZARD

    log, events = _vllm_run(tmp_path, monkeypatch, "vllm-pull-heartbeat-stall", HAZARD)
    read = next(i for i, e in enumerate(events) if e["event"] == "decode_start_load_kv")
    code = main(["validate", str(log), "--no-traces"])
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 1
    assert first.startswith(f"{log}:{read + 2}: violation: decode_start_load_kv")
    assert first.endswith("breaks no_source_free_while_read")


# -- SGLang ------------------------------------------------------------------------------------------------
def test_sglang_plugin_records_a_counterexample_flagged_at_its_breaking_event(tmp_path, monkeypatch, capsys):
    """The stored mooncake counterexample replayed on SGLang's real classes, recorded by the
    plugin SGLang's ``load_plugins()`` ran, is flagged where the model breaks the claim; the same
    run recorded by ``kvproof.record.install()`` directly is the same log, event for event."""
    import json

    from kvproof.spec.sglang.conform import engine_problem

    if engine_problem() is not None:
        pytest.skip(f"needs the sglang extra: {engine_problem()}")
    import kvproof.record as record
    import sglang.srt.plugins as sp
    from kvproof.checker.cli import main
    from kvproof.checker.traces import read_trace
    from kvproof.spec.sglang.conform.replay import harness_for, run_on_code
    from kvproof.spec.sglang.conform.wiring import ROOM_BASE
    from tests.test_record import TRACES, _breaking_step, _line_of, _record

    trace = read_trace(TRACES / "sglang-0.5.23-mooncake__no_write_after_release.itf.json")
    site = tmp_path / "site"
    _distribution(site, "sglang.srt.plugins", "kvproof.record:sglang_plugin")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("KVPROOF_RECORD", str(tmp_path / "sglang-{pid}.jsonl"))
    monkeypatch.setenv("KVPROOF_RECORD_SCENARIO", trace.scenario.name)
    monkeypatch.setenv("KVPROOF_RECORD_ROOM_BASE", str(ROOM_BASE))
    monkeypatch.setenv("SGLANG_PLUGINS", PROBE)
    monkeypatch.setattr(sp, "_plugins_loaded", False)
    harness = harness_for(trace.scenario, trace.machine.spec)  # loads SGLang as the harness does (CPU stubs)
    try:
        assert record._active is None
        sp.load_plugins()  # what SGLang's launcher and each scheduler process run at start
        assert record._active is not None
        result = run_on_code(trace.machine, harness, trace.actions)
    finally:
        record.uninstall()
        harness.close()
    assert result.agrees, result.reason
    log = tmp_path / f"sglang-{os.getpid()}.jsonl"
    events = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    direct = tmp_path / "direct.jsonl"
    assert _record(trace.scenario, trace.machine, trace.actions, direct).agrees
    strip = lambda es: [{k: v for k, v in e.items() if k != "t"} for e in es]  # noqa: E731
    assert strip(events) == strip(json.loads(x) for x in direct.read_text().splitlines()[1:])
    event, room, nth, claims = _breaking_step(trace.machine, trace.actions, every_invariant=True)
    line = _line_of(events, event, room, nth)
    code = main(["validate", str(log), "--no-traces"])
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 1
    assert first.startswith(f"{log}:{line}: violation: {event}") and any(c in first for c in claims)
