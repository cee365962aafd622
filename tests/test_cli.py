"""The command line: outputs, exit codes, bad input in one line, nothing half-written."""

import json

import pytest

from kvproof.checker.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list(capsys):
    code, out, _ = run(capsys, "list", "--claims")
    assert code == 0 and "incident" in out and "v0.5.22" in out and "no_cross_tenant_read" in out


def test_check_json_shape_and_exit_code(capsys, tmp_path):
    code, out, _ = run(capsys, "check", "abort-race", "pr-35049-drain-ack", "--json", "--traces", str(tmp_path))
    assert code == 0
    doc = json.loads(out)
    assert [s["name"] for s in doc["scenarios"]] == ["abort-race", "pr-35049-drain-ack"]
    row = doc["scenarios"][0]["results"][0]
    assert set(row) >= {"invariant", "expected", "verdict", "states", "depth", "seconds", "trace"}
    verdicts = {r["invariant"]: r["verdict"] for r in doc["scenarios"][0]["results"]}
    assert verdicts["no_write_after_release"] == "violated"
    assert doc["scenarios"][0]["results"][0]["trace"].endswith(".itf.json")


def test_a_verdict_that_differs_from_its_expectation_exits_1(capsys, tmp_path):
    scen = tmp_path / "wrong.toml"
    scen.write_text('name = "wrong"\n[sizes]\ndecode_pages = 1\nprefill_pages = 2\ncontext_limit = 1\n'
                    '[[requests]]\ntenant = "A"\npages = 1\n[[requests]]\ntenant = "B"\npages = 1\n'
                    '[engine]\nrelease_policy = "immediate"\n')
    code, out, _ = run(capsys, "check", str(scen), "--no-traces")
    assert code == 1 and "violated ✗" in out


def test_a_truncated_search_exits_2(capsys):
    code, out, _ = run(capsys, "check", "v0.5.22", "--max-states", "1000", "--no-traces")
    assert code == 2 and "inconclusive" in out and "state limit 1000" in out


@pytest.mark.parametrize("argv,message", [
    (["check", "nope"], "unknown scenario 'nope'"),
    (["check", "abort-race", "--invariant", "nope"], "unknown invariant or witness 'nope'"),
    (["check", "--max-states", "-3"], "expected a whole number >= 1"),
    (["frobnicate"], "invalid choice"),
    (["show", "/no/such/file.json"], "cannot read"),
    (["simulate", "incident", "--pages", "1000"], "at most 200 pages"),
    (["check", "abort-race", "--invariant", "no_cross_tenant_read", "--write-expected", "x.toml"], "cannot be combined"),
])
def test_bad_input_is_one_line_and_exit_3(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 3
    assert message in err and err.count("\n") == 1 and err.startswith("kvproof: error:")
    assert "Traceback" not in err


def test_a_malformed_scenario_writes_nothing(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[sizes]\ndecode_pages = 'many'\n")
    traces = tmp_path / "traces"
    code, _, err = run(capsys, "check", "abort-race", str(bad), "--traces", str(traces))
    assert code == 3 and "[sizes].decode_pages" in err
    assert not traces.exists()  # the good scenario was not checked either: input is checked first


def test_show_and_replay_a_written_trace(capsys, tmp_path):
    run(capsys, "check", "abort-race", "--traces", str(tmp_path), "--quiet")
    trace = tmp_path / "abort-race__no_cross_tenant_read.itf.json"
    code, out, _ = run(capsys, "show", str(trace))
    assert code == 0 and "reads p0 holding R0's KV (tenant A)" in out
    code, out, _ = run(capsys, "show", str(trace), "--step", "13")
    assert code == 0 and "late write from R0" in out and "Step 12" not in out
    code, _, err = run(capsys, "show", str(trace), "--step", "99")
    assert code == 3 and "steps 0..15" in err
    code, out, _ = run(capsys, "replay", str(trace))
    assert code == 0 and out.startswith("reproduced: 15 steps")


def test_replay_of_a_tampered_trace_names_the_step(capsys, tmp_path):
    run(capsys, "check", "abort-race", "--traces", str(tmp_path), "--quiet")
    trace = tmp_path / "abort-race__no_cross_tenant_read.itf.json"
    doc = json.loads(trace.read_text())
    doc["states"][12]["content"] = ["R0"]  # the late write did not land yet at step 12
    trace.write_text(json.dumps(doc))
    code, out, _ = run(capsys, "replay", str(trace))
    assert code == 1 and out.startswith("diverged at step 12")


def test_replay_of_a_trace_whose_violation_is_gone(capsys, tmp_path):
    run(capsys, "check", "abort-race", "--traces", str(tmp_path), "--quiet")
    trace = tmp_path / "abort-race__no_cross_tenant_read.itf.json"
    doc = json.loads(trace.read_text())
    doc["states"] = doc["states"][:-1]  # stop before the read
    trace.write_text(json.dumps(doc))
    code, out, _ = run(capsys, "replay", str(trace))
    assert code == 1 and "does not fail at the last state" in out


def test_simulate_reports_exposures_and_writes_the_first_run(capsys, tmp_path):
    code, out, _ = run(capsys, "simulate", "incident", "--requests", "300", "--seed", "3", "--traces", str(tmp_path))
    assert code == 0 and "read another request's KV" in out and "written to" in out
    written = list(tmp_path.iterdir())
    assert len(written) == 1
    code, out, _ = run(capsys, "replay", str(written[0]))
    assert code == 0


def test_check_engine_bmc_finds_the_shortest_violation_and_stays_inconclusive_otherwise(capsys, tmp_path):
    code, out, _ = run(capsys, "check", "abort-race", "--engine", "bmc", "--depth", "6", "--traces", str(tmp_path))
    assert code == 2  # verified claims cannot be decided by a bounded search
    assert "no_write_after_release" in out and "violated" in out and "inconclusive" in out
    assert (tmp_path / "abort-race__no_write_after_release.itf.json").exists()
    code, out, _ = run(capsys, "replay", str(tmp_path / "abort-race__no_write_after_release.itf.json"))
    assert code == 0 and "6 steps replay exactly" in out


def test_check_engine_both_agrees(capsys):
    code, out, _ = run(capsys, "check", "pr-41404", "--engine", "both", "--no-traces")
    assert code == 0 and "agree on 1 scenario" in out


def test_prove_refutes_with_a_trace_and_proves_the_rest(capsys, tmp_path):
    code, out, _ = run(capsys, "prove", "source-reuse", "--traces", str(tmp_path), "--certificates", str(tmp_path),
                       "--refute-depth", "8", "--spacer-seconds", "5", "--induction-seconds", "2", "--json")
    doc = json.loads(out)
    rows = {r["invariant"]: r for r in doc["scenarios"][0]["results"]}
    assert rows["no_source_free_while_read"]["verdict"] == "refuted"
    assert rows["no_source_free_while_read"]["length"] == 6
    assert code in (0, 2)  # 2 if a method ran out of budget: never a claimed proof
    if code == 0:
        assert all(r["verdict"] in ("proved", "refuted") for r in rows.values())


def test_certify_bad_input_is_one_line(capsys, tmp_path):
    f = tmp_path / "nope.smt2"
    f.write_text("hello\n")
    code, _, err = run(capsys, "certify", str(f))
    assert code == 3 and err.count("\n") == 1 and "not a kvproof certificate" in err
