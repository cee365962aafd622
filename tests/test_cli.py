"""The command line: outputs, exit codes, bad input in one line, nothing half-written."""

import io
import json
import subprocess
import sys
import time

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
    assert verdicts["sometimes_abort_mid_transfer"] == "reached"  # a witness is reached, not "verified"
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
    (["conform", "--engine", "vllm==0.9"], "only sglang==0.5.23 is supported"),
    (["conform", "/no/such/trace.itf.json"], "no such trace file"),
    (["conform", "no-such-family-*"], "no built-in scenario matches"),
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
    doc["states"][12]["content"] = [["R0"]]  # the late write did not land yet at step 12
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


# -- issue 5: reports, CI formats, trace tools, terminal manners --------------------------------
def test_report_writes_one_page_and_exits_like_check(capsys, tmp_path):
    out_file = tmp_path / "report.html"
    code, out, _ = run(capsys, "report", "incident", "-o", str(out_file))
    assert code == 0 and out.startswith(f"wrote {out_file}: 1 scenario, 5 counterexamples")
    assert out_file.read_text(encoding="utf-8").count('<section class="counterexample"') == 5
    scen = tmp_path / "wrong.toml"
    scen.write_text('name = "wrong"\n[sizes]\ndecode_pages = 1\nprefill_pages = 2\ncontext_limit = 1\n'
                    '[[requests]]\ntenant = "A"\npages = 1\n[[requests]]\ntenant = "B"\npages = 1\n')
    code, _, _ = run(capsys, "report", str(scen), "-o", str(out_file), "--quiet")
    assert code == 1


def test_check_writes_junit_sarif_and_html_together(capsys, tmp_path):
    code, _, _ = run(capsys, "check", "abort-race", "--no-traces", "--quiet", "--junit", str(tmp_path / "j.xml"),
                     "--sarif", str(tmp_path / "s.sarif"), "--html", str(tmp_path / "r.html"))
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.xml", "r.html", "s.sarif"]
    assert json.loads((tmp_path / "s.sarif").read_text())["runs"][0]["results"] == []
    assert 'tests="13"' in (tmp_path / "j.xml").read_text()  # abort-race: 10 invariants, 3 witnesses


@pytest.mark.parametrize("argv,message", [
    (["check", "abort-race", "--junit", "{tmp}"], "--junit {tmp}: is a directory"),
    (["report", "incident", "-o", "{tmp}"], "-o {tmp}: is a directory"),
    (["show", "traces/abort-race__no_cross_tenant_read.itf.json", "--only", "p9"], "--only p9: not a field"),
    (["show", "traces/abort-race__no_cross_tenant_read.itf.json", "--format", "mermaid", "--step", "3"],
     "--step applies to --format text and json"),
    (["show", "traces/abort-race__no_cross_tenant_read.itf.json", "--format", "svg"], "invalid choice: 'svg'"),
    (["diff", "traces/abort-race__no_cross_tenant_read.itf.json", "/no/such.json"], "cannot read"),
])
def test_bad_input_of_the_new_commands_is_one_line(capsys, tmp_path, monkeypatch, argv, message):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 3 and message.replace("{tmp}", str(tmp_path)) in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_two_scenarios_with_one_name_are_bad_input(capsys, tmp_path):
    body = ('name = "same"\n[sizes]\ndecode_pages = 1\nprefill_pages = 2\ncontext_limit = 1\n'
            '[[requests]]\ntenant = "A"\npages = 1\n')
    (tmp_path / "a.toml").write_text(body)
    (tmp_path / "b.toml").write_text(body)
    code, _, err = run(capsys, "check", str(tmp_path / "a.toml"), str(tmp_path / "b.toml"))
    assert code == 3 and "'same' is also the name of" in err


def test_show_formats_and_focus(capsys, tmp_path):
    run(capsys, "check", "abort-race", "--traces", str(tmp_path), "--quiet")
    trace = str(tmp_path / "abort-race__no_cross_tenant_read.itf.json")
    code, out, _ = run(capsys, "show", trace, "--format", "json", "--step", "13")
    doc = json.loads(out)
    assert code == 0 and [s["step"] for s in doc["steps"]] == [13]
    assert doc["steps"][0]["messages"][0]["text"] == "late write from R0 lands on p0, now R1's"
    code, out, _ = run(capsys, "show", trace, "--format", "mermaid")
    assert code == 0 and out.startswith("sequenceDiagram\n") and "pool->>decode: ✗ R1 reads p0" in out
    code, out, _ = run(capsys, "show", trace, "--only", "p0", "R1")
    assert code == 0 and "Step 3  decode_prealloc(req=R0)" in out and "Step 1 " not in out


def test_diff_exit_codes(capsys, tmp_path):
    run(capsys, "check", "abort-race", "pr-35049-timeout-unbounded", "--traces", str(tmp_path), "--quiet")
    a = str(tmp_path / "abort-race__no_cross_tenant_read.itf.json")
    b = str(tmp_path / "pr-35049-timeout-unbounded__no_cross_tenant_read.itf.json")
    code, out, _ = run(capsys, "diff", a, b)
    assert code == 1 and "first divergence at step 7:" in out
    code, out, _ = run(capsys, "diff", a, a)
    assert code == 0 and "identical" in out


def test_completion_script(capsys):
    code, out, _ = run(capsys, "completion", "bash")
    assert code == 0 and "kvproof" in out and "report" in out and "--sarif" in out


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    from rich.text import Text

    from kvproof.checker.cli import _console

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    tty = _Tty()
    _console(tty).print(Text("violated", style="red"))
    assert "\x1b[31m" in tty.getvalue()
    pipe = io.StringIO()
    _console(pipe).print(Text("violated", style="red"))
    assert pipe.getvalue() == "violated\n"
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    _console(tty).print(Text("violated", style="red"))
    assert "\x1b[31m" not in tty.getvalue() and "violated" in tty.getvalue()


def test_no_progress_display_off_a_terminal(capsys):
    from kvproof.checker.cli import _Progress
    from kvproof.checker.explicit import Stats

    p = _Progress(True, total=3)
    p.started -= 10  # as if the run had been going for ten seconds
    p.start("x")
    p(Stats(states=5000, depth=3, seconds=1.0))
    assert p.bar is None  # stderr is not a terminal under pytest
    p.stop()
    assert capsys.readouterr().err == ""


def test_check_with_symmetry_fingerprints_and_workers(capsys, tmp_path):
    toml = tmp_path / "sym.toml"
    toml.write_text(_SYMMETRIC)
    code, out, _ = run(capsys, "check", str(toml), "--symmetry", "--visited", "fingerprint", "--workers", "2",
                       "--json", "--traces", str(tmp_path))
    stats = json.loads(out)["scenarios"][0]["stats"]
    assert code == 0, out
    assert stats["symmetry"] == "R0~R1 (2 permutations)" and stats["workers"] == 2
    assert stats["represented_states"] > stats["states"] and stats["reduction"] > 1.5
    assert stats["bytes_per_state"] <= 100 and 0 < stats["collision_probability"] < 1e-9
    code, out, _ = run(capsys, "replay", str(next(tmp_path.glob("*.itf.json"))))
    assert code == 0 and "reproduced" in out
    code, _, err = run(capsys, "check", "abort-race", "--visited", "bloom")
    assert code == 3 and "invalid choice" in err
    code, _, err = run(capsys, "check", "abort-race", "--symmetry", "--write-expected", str(tmp_path / "e.toml"))
    assert code == 3 and "--symmetry" in err and not (tmp_path / "e.toml").exists()


_SYMMETRIC = """
name = "abort-race-sym"
[sizes]
decode_pages = 1
prefill_pages = 2
context_limit = 2
[[requests]]
tenant = "A"
pages = 1
[[requests]]
tenant = "A"
pages = 1
[[requests]]
tenant = "B"
pages = 1
[engine]
release_policy = "immediate"
ordered_arrivals = false
[expect]
decode_reads_only_own_pages = "violated"
no_cross_tenant_read = "violated"
no_write_after_release = "violated"
"""


def test_ray_backend_without_ray_is_bad_input_in_one_line(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as if the kvproof[ray] extra were not installed
    code, out, err = run(capsys, "check", "abort-race", "--backend", "ray", "--workers", "2", "--no-traces")
    assert code == 3 and out == ""
    assert err.strip() == "kvproof: error: --backend ray needs Ray: pip install 'kvproof[ray]'"


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
    assert "pr-41404: bounded model checking to depth 9; 10 claim(s) never hit, proved so for all depths" in out


def test_check_engine_both_too_shallow_is_inconclusive_in_json(capsys):
    code, out, _ = run(capsys, "check", "pr-41404", "--engine", "both", "--depth", "3", "--no-traces", "--json")
    [entry] = json.loads(out)["scenarios"]
    assert code == 2  # not established is not a disagreement
    assert entry["agreement"]["problems"] == [] and entry["agreement"]["bounded_depth"] == 3
    assert any("sometimes_request_succeeds" in g for g in entry["agreement"]["not_established"])


def test_prove_refutes_with_a_trace_and_proves_the_rest(capsys, tmp_path):
    code, out, _ = run(capsys, "prove", "source-reuse", "--traces", str(tmp_path), "--certificates", str(tmp_path),
                       "--refute-depth", "8", "--lemma-seconds", "120", "--induction-seconds", "120", "--json")
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


def test_prove_theorems_prints_both_theorems_proved(capsys):
    code, out, _ = run(capsys, "prove", "--theorems", "--spacer-seconds", "5")
    assert code == 0
    verdicts = [line.split()[0] for line in out.splitlines()
                if line.split() and line.split()[0] in ("proved", "unknown", "refuted")]
    assert verdicts == ["proved", "proved"]
    assert "if (T > W" in out and "unknown" not in out


# -- --max-seconds bounds the whole process ----------------------------------------------------
LARGE = """
name = "large-liveness"
title = "3 requests over 20 decode pages, hold-and-retry with heartbeats: too large to finish"
[sizes]
decode_pages = 20
prefill_pages = 2
context_limit = 2
[[requests]]
tenant = "A"
pages = 1
[[requests]]
tenant = "B"
pages = 1
[[requests]]
tenant = "A"
pages = 2
[engine]
release_policy = "drain_ack_or_timeout"
timeout_action = "hold_and_retry"
timeout = 2
write_latency_bound = 1
peer_death = true
heartbeat_detection = true
heartbeat_timeout = 2
[expect]
held_pages_are_released = "verified"
requests_end = "verified"
sometimes_timeout_release = "reached"
"""


def _timed(*argv: str) -> tuple[int, float, str]:
    """Run ``python -m kvproof ARGV`` in a fresh process; exit code, wall seconds, stdout."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kvproof", *argv], capture_output=True, text=True, timeout=300)
    return done.returncode, time.perf_counter() - t0, done.stdout + done.stderr


def test_max_seconds_bounds_the_whole_process():
    # before: the liveness graph and its components ignored the budget (7 s for --max-seconds 1)
    code, wall, out = _timed("check", "sglang-0.5.23-tp2", "--max-seconds", "1", "--no-traces", "--quiet")
    assert code == 2, out
    assert wall <= 1 * 1.1 + 1, wall


@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    [],                                                     # the breadth-first search runs out
    ["--invariant", "held_pages_are_released"],             # the liveness graph runs out
    ["--workers", "2"],                                     # worker processes, part way through a level
    ["--engine", "bmc"],                                    # Z3, unrolling step by step
    ["--engine", "both"],                                   # explicit, then Z3
], ids=["explicit", "liveness", "workers", "bmc", "both"])
def test_max_seconds_bounds_every_phase_on_a_large_scenario(tmp_path, extra):
    large = tmp_path / "large.toml"
    large.write_text(LARGE)
    budget = 3.0
    code, wall, out = _timed("check", str(large), "--max-seconds", str(budget), "--no-traces", *extra, "--json")
    assert code == 2, out
    assert wall <= budget * 1.1 + 1, wall
    doc = json.loads(out[:out.rindex("}") + 1])
    rows = doc["scenarios"][0]["results"]
    assert all(r["verdict"] in ("inconclusive", "reached", "violated") for r in rows)
    assert any(r["verdict"] == "inconclusive" for r in rows)
