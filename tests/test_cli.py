"""The command line: outputs, exit codes, bad input in one line, nothing half-written."""

import io
import json
import re
import subprocess
import sys
import time

import pytest

from kvproof.checker.cli.commands import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list(capsys):
    code, out, _ = run(capsys, "list", "--claims")
    assert code == 0 and "incident" in out and "v0.5.22" in out and "no_cross_tenant_read" in out
    # every protocol's claims, each under its own heading (only SGLang's were listed)
    sglang, vllm = out.split("claims of the sglang protocol (PdProtocol):\n")[1].split(
        "claims of the vllm protocol (VllmPd):\n")
    assert "sometimes_abort_mid_transfer  (witness)" in sglang and "sometimes_abort_mid_transfer" not in vllm
    assert "no_cross_tenant_read  (invariant)" in vllm


def test_conform_runs_one_protocols_targets_at_a_time(capsys):
    """Each protocol has its own harness (SGLang 0.5.23, vLLM 0.33.0): mixed targets are refused
    in one line, and a vLLM target is not run on SGLang's engine (both before any import)."""
    code, _, err = run(capsys, "conform", "vllm-pull-ttl-expiry", "sglang-0.5.23-mooncake")
    assert code == 3 and err.startswith("kvproof: error: conform: targets of 2 protocols (sglang, vllm)")
    code, _, err = run(capsys, "conform", "--engine", "sglang==0.5.23", "vllm-pull-ttl-expiry")
    assert code == 3 and err.startswith("kvproof: error: --engine sglang==0.5.23: only vllm==0.33.0 is supported")


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
                    '[engine]\nrelease_policy = "immediate"\n[expect]\ndefault = "verified"\n')
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
    (["conform", "--engine", "vllm==0.9"], "only vllm==0.33.0 is supported"),
    (["conform", "--engine", "sglang==0.4"], "only sglang==0.5.23 is supported"),
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
    assert code == 0 and "reads p0 holding R0@room0's KV (tenant A)" in out
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


@pytest.mark.slow  # about 6 s
def test_simulate_reports_exposures_and_writes_the_first_run(capsys, tmp_path):
    code, out, _ = run(capsys, "simulate", "incident", "--requests", "300", "--seed", "3", "--traces", str(tmp_path))
    assert code == 1 and "read another request's KV" in out and "written to" in out
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
                    '[[requests]]\ntenant = "A"\npages = 1\n[[requests]]\ntenant = "B"\npages = 1\n'
                    '[expect]\ndefault = "verified"\n')
    code, _, _ = run(capsys, "report", str(scen), "-o", str(out_file), "--quiet")
    assert code == 1


def test_check_writes_junit_sarif_and_html_together(capsys, tmp_path):
    code, _, _ = run(capsys, "check", "abort-race", "--no-traces", "--quiet", "--junit", str(tmp_path / "j.xml"),
                     "--sarif", str(tmp_path / "s.sarif"), "--html", str(tmp_path / "r.html"))
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.xml", "r.html", "s.sarif"]
    assert json.loads((tmp_path / "s.sarif").read_text())["runs"][0]["results"] == []
    assert 'tests="14"' in (tmp_path / "j.xml").read_text()  # abort-race: 11 invariants, 3 witnesses


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
    assert doc["steps"][0]["messages"][0]["text"] == "late write from R0@room0 lands on p0, now R1@room1's"
    code, out, _ = run(capsys, "show", trace, "--format", "mermaid")
    assert code == 0 and out.startswith("sequenceDiagram\n") and "pool->>decode: ✗ R1@room1 reads p0" in out
    code, out, _ = run(capsys, "show", trace, "--only", "p0", "R1")
    assert code == 0 and "Step 3  decode_prealloc(req=R0@room0)" in out and "Step 1 " not in out


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

    from kvproof.checker.cli.common import console as _console

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
    from kvproof.checker.cli.common import Progress as _Progress
    from kvproof.checker.results import Stats

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
release_justified = "violated"
default = "verified"
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


@pytest.mark.slow  # about 5 s
def test_check_engine_both_agrees(capsys):
    code, out, _ = run(capsys, "check", "pr-41404", "--engine", "both", "--no-traces")
    assert code == 0 and "agree on 1 scenario" in out
    assert "pr-41404: bounded model checking to depth 9; 11 claim(s) never hit, proved so for all depths" in out


def test_check_engine_both_too_shallow_is_inconclusive_in_json(capsys):
    code, out, _ = run(capsys, "check", "pr-41404", "--engine", "both", "--depth", "3", "--no-traces", "--json")
    [entry] = json.loads(out)["scenarios"]
    assert code == 2  # not established is not a disagreement
    assert entry["agreement"]["problems"] == [] and entry["agreement"]["bounded_depth"] == 3
    assert any("sometimes_request_succeeds" in g for g in entry["agreement"]["not_established"])


def test_prove_refutes_with_a_trace_and_proves_the_rest(capsys, tmp_path):
    # H1 on a fresh pool (11 states): decode reads a never-written page 8 steps in; the rest holds
    code, out, _ = run(capsys, "prove", "placeholder-fresh-pages", "--traces", str(tmp_path),
                       "--certificates", str(tmp_path), "--refute-depth", "8", "--json")
    doc = json.loads(out)
    rows = {r["invariant"]: r for r in doc["scenarios"][0]["results"]}
    assert rows["decode_reads_only_own_pages"]["verdict"] == "refuted"
    assert rows["decode_reads_only_own_pages"]["length"] == 8
    assert rows["rejected_never_reserves"]["verdict"] == "refuted" and rows["rejected_never_reserves"]["length"] == 1
    assert code == 0 and {r["verdict"] for r in rows.values()} == {"proved", "refuted"}
    assert rows["no_cross_tenant_read"]["verdict"] == "proved" and rows["no_write_after_release"]["verdict"] == "proved"
    assert doc["summary"] == {"command": "prove", "ran": "1 scenario, 11 invariants (inductive invariant and k-induction)",
                              "matched": 11, "mismatched": 0, "inconclusive": 0, "exit_code": 0,
                              "meaning": "every invariant is proved or refuted as expected"}  # the closing line's
    assert (tmp_path / "placeholder-fresh-pages.smt2").is_file()
    assert any(p.name.startswith("placeholder-fresh-pages") and "decode_reads_only_own_pages" in p.name
               for p in tmp_path.iterdir())


def test_certify_bad_input_is_one_line(capsys, tmp_path):
    f = tmp_path / "nope.smt2"
    f.write_text("hello\n")
    code, _, err = run(capsys, "certify", str(f))
    assert code == 3 and err.count("\n") == 1 and "not a kvproof certificate" in err


@pytest.mark.thorough  # about 14 s: the timeout theorem's 452 lemmas
def test_prove_theorems_prints_both_theorems_proved(capsys):
    code, out, _ = run(capsys, "prove", "--theorems", "--spacer-seconds", "5")
    assert code == 0
    verdicts = [line.split()[0] for line in out.splitlines()
                if line.split() and line.split()[0] in ("proved", "inconclusive", "refuted")]
    assert verdicts == ["proved", "proved"]
    *body, closing = out.splitlines()
    assert "if (T > W" in out and "inconclusive" not in "\n".join(body)
    assert closing == ("kvproof prove: 2 parametric theorems: 2 matched, 0 mismatched, 0 inconclusive; "
                       "exit 0: every theorem is proved")
    # timeout_if_by_lemmas' verdict: an inductive set of lemmas for every T ≥ W + 1 (only unsat answers)
    lemmas = re.search(r"proved \((\d+) lemmas over parametric atoms, inductive for every T ≥ W \+ 1, W ≥ 0\)",
                       " ".join(out.split()))
    assert lemmas and int(lemmas.group(1)) > 0


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
release_justified = "violated"
sometimes_timeout_release = "reached"
default = "verified"
"""


def _timed(*argv: str) -> tuple[int, float, str]:
    """Run ``python -m kvproof ARGV`` in a fresh process; exit code, wall seconds, stdout."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kvproof", *argv], capture_output=True, text=True, timeout=300)
    return done.returncode, time.perf_counter() - t0, done.stdout + done.stderr


def _start_up(*argv: str) -> float:
    """Wall seconds of the same command with a budget of 10 ms: the process's start-up and
    shut-down under the machine's load at the moment, which no budget can cut."""
    return _timed(*argv, "--max-seconds", "0.01")[1]


def test_max_seconds_bounds_the_whole_process(tmp_path):
    # before: the liveness graph and its components ignored the budget (7 s for --max-seconds 1);
    # a built-in scenario such as sglang-0.5.23-tp2 now finishes within the second
    large = tmp_path / "large.toml"
    large.write_text(LARGE)
    argv = ("check", str(large), "--no-traces", "--quiet")
    code, wall, out = _timed(*argv, "--max-seconds", "1")
    assert code == 2, out
    assert wall <= _start_up(*argv) + 1 * 1.1 + 0.5, wall


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
    argv = ("check", str(large), "--no-traces", *extra, "--json")
    code, wall, out = _timed(*argv, "--max-seconds", str(budget))
    assert code == 2, out
    assert wall <= _start_up(*argv) + budget * 1.1 + 0.5, wall
    doc = json.loads(out[:out.rindex("}") + 1])
    if "scenarios" not in doc:  # on a loaded machine a phase ran past the budget: the backstop stopped it
        assert doc["summary"]["exit_code"] == 2 and "time limit 3 s reached" in doc["summary"]["ran"], doc
        return
    rows = doc["scenarios"][0]["results"]
    assert all(r["verdict"] in ("inconclusive", "reached", "violated") for r in rows)
    assert any(r["verdict"] == "inconclusive" for r in rows)


def _interpreter_start_up() -> float:
    """The slowest of three ``python -c pass`` on the machine as loaded now: the start-up of the
    interpreter itself, which no budget of kvproof's can cut."""
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
        walls.append(time.perf_counter() - t0)
    return max(walls)


AUDIT_LINE = ["--", "python", "-m", "sglang.launch_server", "--model-path", "zai-org/GLM-4.6",
              "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "mooncake"]


@pytest.mark.parametrize("budget, argv", [
    # the whole catalogue (minutes without a budget): reading, building and searching 109
    # scenarios, then the verdict table
    (1.5, ["check", "--no-traces"]),
    # a scenario too large to finish: forked workers part way through a level, the liveness
    # graph, the HTML report and the SARIF file
    (1.5, ["check", "LARGE", "--workers", "2", "--no-traces", "--html", "OUT/r.html", "--sarif", "OUT/r.sarif"]),
    # an audit of a TP-2 decode line (4 to 7 s here: 150,842 states in one search), part of it
    # reading the line and building its scenarios before any search
    (0.75, ["audit", "--no-traces", "sglang==0.5.23", *AUDIT_LINE, "--tp-size", "2"]),
], ids=["catalogue", "large-workers-html", "audit"])
def test_max_seconds_is_one_budget_for_the_whole_console_command(tmp_path, budget, argv):
    """The console command itself (not ``python -m``, not ``main()``) with ``--max-seconds S``
    on work that takes at least four times S: it ends within S + 0.5 s, start-up included,
    allowing only the interpreter's own start-up on top (measured here, doubled: the machine is
    shared), exits 2 and says inconclusive.  Before, ``--max-seconds 3`` took 5.8 s under load:
    the budget counted from kvproof's import and the verdict table of a hundred scenarios the
    budget never reached took seconds to lay out."""
    import shutil
    from pathlib import Path

    kvproof = Path(sys.executable).with_name("kvproof")
    if not kvproof.is_file():
        found = shutil.which("kvproof")
        if found is None:
            pytest.skip("the kvproof console script is not installed beside this interpreter")
        kvproof = Path(found)
    large = tmp_path / "large.toml"
    large.write_text(LARGE)
    (tmp_path / "out").mkdir()
    argv = [str(large) if a == "LARGE" else a.replace("OUT", str(tmp_path / "out")) for a in argv]
    allowance = 2 * _interpreter_start_up()
    t0 = time.perf_counter()
    cut = argv.index("--") if "--" in argv else len(argv)  # audit: before the launch line
    argv[cut:cut] = ["--max-seconds", str(budget)]
    done = subprocess.run([str(kvproof), *argv], capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "inconclusive" in done.stdout.splitlines()[-1], out
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, out
    assert wall <= budget + 0.5 + allowance, (wall, allowance, out)
    assert not [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".tmp-")]  # nothing half-written


# -- issue 12: files are data; every bad input is one line, exit 3, before any search ----------------
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
VARIANTS = ROOT / "examples" / "variant"
RACE = ROOT / "traces" / "abort-race__no_cross_tenant_read.itf.json"


@pytest.fixture
def no_search(monkeypatch):
    """Fail the test if a search starts: bad input must be refused before."""
    def searched(*a, **k):
        raise AssertionError("a search started")

    monkeypatch.setattr("kvproof.checker.explicit.run.check_scenario", searched)


def _one_line_3(code, err, message):
    assert code == 3, err
    assert err.startswith("kvproof: error: ") and err.count("\n") == 1 and message in err, err


def _marked_engine(tmp_path):
    f = tmp_path / "engine.py"
    f.write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').close()\n"
                 "from kvproof.spec.sglang.protocol import PdProtocol\nclass E(PdProtocol):\n    pass\n")
    return f


@pytest.mark.parametrize("command", ["show", "replay"])
def test_show_and_replay_run_no_code_a_trace_names(capsys, tmp_path, command):
    # problem 5
    engine = _marked_engine(tmp_path)
    doc = json.loads(RACE.read_text())
    doc["#meta"]["scenario"]["protocol"] = f"{engine}:E"
    trace = tmp_path / "t.itf.json"
    trace.write_text(json.dumps(doc))
    code, _, err = run(capsys, command, str(trace))
    _one_line_3(code, err, "is an engine variant, and a variant file is code: nothing was run; "
                           "pass the file with --variant engine.py to trust it")
    assert not (tmp_path / "RAN").exists()
    code, out, err = run(capsys, command, str(trace), "--variant", str(engine))
    assert code == 0 and (tmp_path / "RAN").exists(), err


def test_certify_runs_no_code_a_certificate_names(capsys, tmp_path):
    # problem 5: certify imported the stored scenario's protocol
    engine = _marked_engine(tmp_path)
    text = (ROOT / "traces" / "proofs" / "abort-race.smt2").read_text().splitlines()
    meta = json.loads(text[1].split(": ", 1)[1])
    meta["protocol"] = f"{engine}:E"
    text[1] = f"; scenario: {json.dumps(meta)}"
    cert = tmp_path / "abort-race.smt2"
    cert.write_text("\n".join(text) + "\n")
    code, out, err = run(capsys, "certify", str(cert))
    # certify never builds the stored scenario: it is data, compared with the catalogue's
    differs = [line for line in out.splitlines() if "the stored scenario differs from the catalogue's abort-race in" in line]
    assert code == 1 and len(differs) == 1 and "protocol" in differs[0]
    assert not (tmp_path / "RAN").exists()


def test_a_scenario_file_naming_a_variant_needs_the_variant_passed(capsys, tmp_path, no_search):
    # problem 5: a scenario file ran the .py file it named
    engine = _marked_engine(tmp_path)
    (tmp_path / "mine.toml").write_text('name = "mine"\nprotocol = "engine.py:E"\n[sizes]\ndecode_pages = 1\n'
                                        'prefill_pages = 1\ncontext_limit = 1\n[[requests]]\ntenant = "A"\npages = 1\n')
    for command in ("check", "report", "prove", "simulate"):
        code, _, err = run(capsys, command, str(tmp_path / "mine.toml"))
        _one_line_3(code, err, "pass the file with --variant engine.py to trust it")
    assert not (tmp_path / "RAN").exists()


def test_the_readme_variant_commands_work_as_written(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    traces = tmp_path / "traces"
    variant = "examples/variant/in_order_completion.py"
    code, _, err = run(capsys, "check", "--variant", variant, "--traces", str(traces), "--quiet")
    assert code == 0, err
    trace = str(traces / "in-order-completion__no_cross_tenant_read.itf.json")
    code, out, _ = run(capsys, "show", "--variant", variant, trace)
    assert code == 0 and "in-order-completion · no_cross_tenant_read · counterexample, 21 steps" in out
    code, out, _ = run(capsys, "replay", "--variant", variant, trace)
    assert code == 0 and out.startswith("reproduced: 21 steps")
    code, _, err = run(capsys, "show", trace)
    _one_line_3(code, err, "pass the file with --variant in_order_completion.py to trust it")
    code, _, err = run(capsys, "check", "--variant", "examples/variant/early_release.py",
                       "examples/variant/early_release.toml", "--no-traces", "--quiet")
    assert code == 0, err
    code, _, err = run(capsys, "check", "examples/variant/early_release.toml", "--no-traces")
    _one_line_3(code, err, "pass the file with --variant early_release.py to trust it")
    code, _, err = run(capsys, "check", "--variant", "examples/variant/early_release.py")
    _one_line_3(code, err, "the file has no SCENARIO; name the scenario files that use it")


def _scenario_named(tmp_path, name):
    f = tmp_path / "named.toml"
    f.write_text(f'name = "{name}"\n[sizes]\ndecode_pages = 1\nprefill_pages = 1\ncontext_limit = 1\n'
                 '[[requests]]\ntenant = "A"\npages = 1\n')
    return str(f)


@pytest.mark.parametrize("argv,message", [
    (["check", "--variant", "{tmp}/notes.txt"], "notes.txt: expected a Python file (.py)"),
    (["check", "abort-race", "--traces", "{tmp}/afile/sub"], "--traces {tmp}/afile/sub: cannot write under {tmp}/afile: not a folder"),
    (["check", "abort-race", "--traces", "{tmp}/afile"], "--traces {tmp}/afile: is a file, expected a folder"),
    (["check", "abort-race", "--write-expected", "/proc/no/x.toml"], "--write-expected /proc/no/x.toml: cannot write under /proc"),
    (["check", "abort-race", "--write-expected", "{tmp}/afile/x.toml"], "cannot write under {tmp}/afile: not a folder"),
    (["check", "abort-race", "--junit", "{tmp}/" + "x" * 300 + ".xml"], "file name too long"),
    (["check", "abort-race", "--sarif", "{tmp}/a\x00b"], "a file name cannot contain a NUL byte"),
    (["report", "abort-race", "-o", "{tmp}"], "is a directory, expected a file name"),
    (["simulate", "incident", "--traces", "{tmp}/afile"], "--traces {tmp}/afile: is a file"),
    (["prove", "abort-race", "--certificates", "{tmp}/afile"], "--certificates {tmp}/afile: is a file"),
    (["check", "{named_nul}"], "name: expected 1..64 letters, digits"),
    (["check", "{named_long}"], "name: expected 1..64 letters, digits"),
])
def test_bad_input_is_refused_before_any_search(capsys, tmp_path, no_search, argv, message):
    # problem 6: output paths and scenario names were checked only after the whole search
    (tmp_path / "afile").write_text("")
    (tmp_path / "notes.txt").write_text("")
    subst = {"tmp": str(tmp_path), "named_nul": _scenario_named(tmp_path, "a\\u0000b") if "{named_nul}" in argv else "",
             "named_long": _scenario_named(tmp_path, "a" * 300) if "{named_long}" in argv else ""}
    code, _, err = run(capsys, *[a.format(**subst) for a in argv])
    _one_line_3(code, err, message.format(**subst))
    assert {p.name for p in tmp_path.iterdir()} <= {"afile", "named.toml", "notes.txt"}  # nothing written


def test_a_binary_certificate_is_bad_input(capsys, tmp_path):
    # problem 6: UnicodeDecodeError
    cert = tmp_path / "bin.smt2"
    cert.write_bytes(b"; kvproof certificate 1\n\xff\xfe\x00")
    code, _, err = run(capsys, "certify", str(cert))
    _one_line_3(code, err, "not UTF-8 text (byte 24): expected a kvproof certificate")


def test_a_run_time_error_in_a_variant_names_its_file_and_line(capsys, tmp_path):
    # problem 6: a 46-line traceback, exit 1
    f = tmp_path / "rt.py"
    f.write_text("from kvproof.spec.sglang.protocol import PdProtocol\n\n\nclass Rt(PdProtocol):\n"
                 "    def decode_release_deferred(self, s, n, r):\n        x = [1, 2][5]\n"
                 "        super().decode_release_deferred(s, n, r)\n\n\n"
                 'SCENARIO = {"name": "rt", "sizes": {"decode_pages": 1, "prefill_pages": 1, "context_limit": 1},\n'
                 '            "requests": [{"tenant": "A", "pages": 1}], "engine": {"release_policy": "drain_ack"},\n'
                 '            "expect": {"default": "verified"}}\n')
    code, _, err = run(capsys, "check", "--variant", str(f), "--no-traces")
    _one_line_3(code, err, f"{f}:6: IndexError in the engine variant: list index out of range")


def test_a_variant_that_returns_what_kvproof_cannot_use_is_named(capsys, tmp_path):
    # the variant's own frame has returned when kvproof fails on its value: name the variant
    f = tmp_path / "ret.py"
    f.write_text("from kvproof.spec.sglang.protocol import PdProtocol\n\n\nclass Ret(PdProtocol):\n"
                 "    def rank_writes_in_flight(self, s, r, pr):\n        return 'yes'\n\n\n"
                 'SCENARIO = {"name": "ret", "sizes": {"decode_pages": 1, "prefill_pages": 1, "context_limit": 1},\n'
                 '            "requests": [{"tenant": "A", "pages": 1}], "engine": {"release_policy": "drain_ack"},\n'
                 '            "expect": {"default": "verified"}}\n')
    code, _, err = run(capsys, "check", "--variant", str(f), "--no-traces")
    # the language refuses the value where the spec uses it, naming that line and the value
    _one_line_3(code, err, "spec/sglang/protocol.py:")
    assert "str 'yes' is not a value of the spec language" in err


def test_out_of_memory_is_one_line_with_the_advice_and_exit_4(capsys, monkeypatch):
    # problem 6: MemoryError was a traceback with exit 1
    def oom(*a, **k):
        raise MemoryError

    monkeypatch.setattr("kvproof.checker.explicit.run.check_scenario", oom)
    code, _, err = run(capsys, "check", "abort-race", "--no-traces")
    assert code == 4 and err.count("\n") == 1
    assert "out of memory" in err and "--visited fingerprint" in err and "--symmetry" in err and "--workers" in err


def test_a_worker_out_of_memory_is_exit_4(capsys, monkeypatch):
    from kvproof.checker.explicit.partition import Partition

    def oom(self, *a):
        raise MemoryError

    monkeypatch.setattr(Partition, "step", oom)  # inherited by the forked workers
    code, _, err = run(capsys, "check", "abort-race", "--no-traces", "--workers", "2")
    assert code == 4 and err.count("\n") == 1 and "out of memory" in err, err


def test_ctrl_c_is_exit_130_and_one_line(capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("kvproof.checker.explicit.run.check_scenario", interrupted)
    code, _, err = run(capsys, "check", "abort-race", "--no-traces")
    assert code == 130 and err == "kvproof: interrupted\n"


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


@pytest.mark.slow  # about 3 s: a fresh process, a search big enough to interrupt
@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/task"), reason="reads /proc to see the workers")
def test_ctrl_c_under_workers_is_one_line_and_exit_130():
    # problem 6: every forked worker printed its own KeyboardInterrupt traceback
    import os
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-m", "kvproof", "check", str(ROOT / "bench" / "standard.toml"),
                          "--workers", "2", "--no-traces"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, text=True)
    deadline = time.monotonic() + 60
    while len(_children(p.pid)) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)  # the workers are expanding a level
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err == "kvproof: interrupted\n", err


@pytest.mark.slow  # about 6 s: the search runs until the limit
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="sets a memory limit in the child")
def test_running_out_of_memory_under_a_limit_is_exit_4():
    # problem 6: MemoryError under a memory limit (ulimit -v) was a traceback, exit 1
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (400 * 2**20, 400 * 2**20))

    p = subprocess.run([sys.executable, "-m", "kvproof", "check", str(ROOT / "bench" / "standard.toml"), "--no-traces"],
                       capture_output=True, text=True, preexec_fn=limit, timeout=300)
    assert p.returncode == 4 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("kvproof: error: out of memory: ") and "--visited fingerprint" in p.stderr


def test_version(capsys):
    from importlib import metadata

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"kvproof {metadata.version('kvproof')}\n"


def test_a_reader_that_leaves_is_exit_141_and_silence(monkeypatch, capsys):
    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Gone())
    assert main(["list"]) == 141
    assert capsys.readouterr().err == ""


def test_kvproof_list_into_a_closed_pipe_prints_no_traceback():
    """``kvproof list | head -0``: the reader is gone before the first write."""
    p = subprocess.Popen([sys.executable, "-m", "kvproof", "list", "--claims"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and err == ""


def test_a_misspelt_command_or_scenario_gets_a_suggestion_and_the_prefix_once(capsys):
    code, _, err = run(capsys, "chek")
    assert code == 3 and err.startswith("kvproof: error: argument command: invalid choice: 'chek'")
    assert err.endswith("; did you mean check?\n") and "kvproof: error: kvproof:" not in err
    code, _, err = run(capsys, "check", "incidnt")
    assert code == 3 and err == ("kvproof: error: unknown scenario 'incidnt'; did you mean incident? "
                                 "(kvproof list shows the catalogue)\n")
    code, _, err = run(capsys, "check", "--max-states", "x")  # a subcommand's error names it
    assert code == 3 and err == "kvproof: error: kvproof check: argument --max-states: expected a whole number, got 'x'\n"
