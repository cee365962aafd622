"""Everyday use of the command line (issue 18): the closing line every run ends with, progress
only on a terminal, ``--variant`` wherever a scenario is taken, the README and ``--help`` in
agreement, ``simulate``'s exit codes, the licence."""

import re
import tomllib
from pathlib import Path

from tests import user_docs

ROOT = Path(__file__).resolve().parent.parent


def test_the_licence_is_apache_2_in_full_and_declared_in_pyproject():
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text) > 11_000  # the full text, not a notice
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_the_mermaid_variable_is_documented_where_the_docs_list_the_test_tiers():
    tiers = user_docs.page("how-to/run-the-tests.md")  # where the README's "Running the tests" moved
    assert "KVPROOF_MERMAID_JS" in tiers and "mermaid.min.js" in tiers and "`.ci/run`" in tiers
    assert re.search(r'^export KVPROOF_MERMAID_JS=', (ROOT / ".ci" / "run").read_text(), re.M)
    test = (ROOT / "tests" / "test_mermaid.py").read_text()
    assert 'os.environ.get("KVPROOF_MERMAID_JS")' in test  # the variable the README names is the one read


# -- the closing line (item 1) -------------------------------------------------------------------
import io  # noqa: E402
import json  # noqa: E402

import pytest  # noqa: E402

from kvproof.checker.cli.commands import build_parser, main  # noqa: E402

TRACE = ROOT / "traces" / "incident__no_cross_tenant_read.itf.json"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_ends_with_the_closing_line_and_its_json_has_the_summary(capsys, monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")  # a pipe gets no colour whatever the terminal type
    code, out, _ = run(capsys, "check", "incident", "--no-traces")
    assert code == 0 and "\x1b[" not in out
    assert out.splitlines()[-1] == ("kvproof check: 1 scenario, 13 claims (explicit search): 13 matched, "
                                    "0 mismatched, 0 inconclusive; exit 0: every verdict matches its expectation")
    code, out, _ = run(capsys, "check", "incident", "--no-traces", "--json")
    assert code == 0 and json.loads(out)["summary"] == {
        "command": "check", "ran": "1 scenario, 13 claims (explicit search)", "matched": 13, "mismatched": 0,
        "inconclusive": 0, "exit_code": 0, "meaning": "every verdict matches its expectation"}
    code, out, _ = run(capsys, "check", "incident", "--no-traces", "--quiet")
    assert code == 0 and out == ""  # --quiet prints nothing, the closing line included


def test_the_closing_line_counts_mismatches_and_inconclusive_claims(capsys, tmp_path):
    scen = tmp_path / "wrong.toml"  # the immediate release breaks claims this file expects verified
    scen.write_text('name = "wrong"\n[sizes]\ndecode_pages = 1\nprefill_pages = 2\ncontext_limit = 1\n'
                    '[[requests]]\ntenant = "A"\npages = 1\n[[requests]]\ntenant = "B"\npages = 1\n'
                    '[engine]\nrelease_policy = "immediate"\n[expect]\ndefault = "verified"\n')
    code, out, _ = run(capsys, "check", str(scen), "--no-traces", "--json")
    doc = json.loads(out)
    rows = doc["scenarios"][0]["results"]
    wrong = sum(r["verdict"] != r["expected"] for r in rows)
    assert code == 1 and wrong > 0 and doc["summary"]["mismatched"] == wrong
    assert doc["summary"]["matched"] == len(rows) - wrong and doc["summary"]["exit_code"] == 1
    assert doc["summary"]["meaning"] == "a verdict does not match its expectation"
    code, out, _ = run(capsys, "check", "v0.5.22", "--max-states", "100", "--no-traces")
    assert code == 2 and out.splitlines()[-1] == (
        "kvproof check: 1 scenario, 15 claims (explicit search): 0 matched, 0 mismatched, 15 inconclusive; "
        "exit 2: a result is inconclusive (a limit cut the work short)")


def test_the_z3_engines_close_with_the_line(capsys):
    code, out, _ = run(capsys, "check", "abort-race", "--engine", "bmc", "--depth", "3", "--no-traces", "--json")
    assert code == 2 and json.loads(out)["summary"]["ran"] == "1 scenario, 14 claims (bounded model checking to depth 3)"
    code, out, _ = run(capsys, "check", "pr-41404", "--engine", "both", "--depth", "3", "--no-traces")
    assert code == 2 and out.splitlines()[-1].startswith("kvproof check: 1 scenario, 13 claims (explicit search "
                                                         "and Z3 compared: 0 disagreements, ")
    assert out.splitlines()[-1].endswith("; exit 2: agreement not established")
    # prove's summary when it proves: tests/test_cli.py::test_prove_refutes_with_a_trace_and_proves_the_rest


def test_report_replay_and_diff_close_with_the_line(capsys, tmp_path):
    code, out, _ = run(capsys, "report", "incident", "-o", str(tmp_path / "r.html"))
    assert code == 0 and out.splitlines()[-1].startswith("kvproof report: 1 scenario, 13 claims (explicit search): 13 ")
    code, out, _ = run(capsys, "replay", str(TRACE))
    assert code == 0 and out.splitlines()[-1] == (
        "kvproof replay: 1 trace of 18 steps (incident, no_cross_tenant_read): 1 matched, 0 mismatched, "
        "0 inconclusive; exit 0: the trace reproduces")
    other = ROOT / "traces" / "abort-race__no_cross_tenant_read.itf.json"
    code, out, _ = run(capsys, "diff", str(TRACE), str(other))
    assert code == 1 and out.splitlines()[-1] == (
        "kvproof diff: 2 traces compared: 0 matched, 1 mismatched, 0 inconclusive; exit 1: the traces differ")


def test_prove_with_a_state_limit_is_inconclusive(capsys):
    code, out, _ = run(capsys, "prove", "placeholder-fresh-pages", "--max-states", "5", "--no-certificates",
                       "--no-traces", "--json")
    assert code == 2 and json.loads(out)["summary"]["inconclusive"] == 11


def test_certify_closes_with_how_many_certificates_check(capsys):
    code, out, _ = run(capsys, "certify", str(ROOT / "traces" / "proofs" / "prefill-dies-unanswered.smt2"))
    assert code == 0 and out.splitlines()[-1] == (
        "kvproof certify: 1 certificate (z3 and cvc5): 1 matched, 0 mismatched, 0 inconclusive; "
        "exit 0: every certificate checks")


def test_conform_closes_with_how_many_traces_reproduce(capsys, monkeypatch):
    """The real engine is a 2.5 GB extra: its loader and replayer are stood in for here, so that
    what is counted and said is checked without it (tests/test_conform.py runs the real thing)."""
    from kvproof.spec.sglang.conform import command, report

    monkeypatch.setattr(command, "load_sglang", lambda: None)
    fake = {"incident__no_cross_tenant_read.itf.json": report.Reproduced(TRACE, "c", 18, "as the model"),
            "incident__decode_reads_only_own_pages.itf.json": report.Diverged(TRACE, "c", 3, "differs")}
    monkeypatch.setattr(report, "replay_trace", lambda path: fake[Path(path).name])
    traces = [str(ROOT / "traces" / name) for name in fake]
    code, out, _ = run(capsys, "conform", *traces)
    assert code == 1 and out.splitlines()[-1] == (
        "kvproof conform: 2 traces replayed on sglang==0.5.23: 1 matched, 1 mismatched, 0 inconclusive; "
        "exit 1: a trace diverges on sglang==0.5.23")
    code, out, _ = run(capsys, "conform", traces[0])
    assert code == 0 and out.splitlines()[-1].endswith("exit 0: every trace reproduces on sglang==0.5.23")


def test_the_closing_line_is_coloured_on_a_terminal_unless_no_color(monkeypatch):
    from kvproof.checker.cli.common import Summary, console

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    line = Summary("check", "1 scenario, 1 claim (explicit search)", 0, 1, 0, 1)
    tty = Tty()
    assert line.print(console(tty)) == 1
    assert "\x1b[1;31m" in tty.getvalue() and line.line() in tty.getvalue()  # bold red: a mismatch
    monkeypatch.setenv("NO_COLOR", "1")
    tty = Tty()
    line.print(console(tty))
    assert "31m" not in tty.getvalue() and line.line() in tty.getvalue()  # no colour (bold is not colour)


# -- progress (item 2) ---------------------------------------------------------------------------
def test_progress_only_when_stdout_and_stderr_are_terminals(monkeypatch):
    from kvproof.checker.cli import common

    class Tty(io.StringIO):
        def isatty(self):
            return True

    def bar_after(stdout, stderr) -> bool:
        monkeypatch.setattr("sys.stdout", stdout)
        monkeypatch.setattr("sys.stderr", stderr)
        p = common.Progress(True, total=3)
        p.started -= 10  # as if the run had gone on for ten seconds
        p.start("x")
        p.note("x: method 1")
        shown = p.bar is not None
        p.stop()
        return shown

    assert bar_after(Tty(), Tty())  # the check can fail: on a terminal the bar is drawn
    assert not bar_after(io.StringIO(), Tty())  # stdout piped (kvproof check | less, > file)
    assert not bar_after(Tty(), io.StringIO())


def test_a_long_silent_phase_gets_its_bar_after_the_grace(monkeypatch):
    """``prove --theorems`` or a proof's method 1 says what it does once and then runs for
    minutes: the bar must appear without another call."""
    import time

    from kvproof.checker.cli import common

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdout", Tty())
    monkeypatch.setattr("sys.stderr", Tty())
    p = common.Progress(True, None, "")
    p.GRACE = 0.05
    p.note("method 1 (inductive invariant)")
    assert p.bar is None  # within the grace: nothing yet
    deadline = time.perf_counter() + 5
    while p.bar is None and time.perf_counter() < deadline:
        time.sleep(0.01)
    assert p.bar is not None
    p.stop()
    assert p.bar is None and p._timer is None


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_no_progress_reaches_a_pipe_from_the_long_commands(capsys, tmp_path, monkeypatch):
    """stdout piped, stderr a terminal (``kvproof check | less``): no bar on either."""
    from kvproof.checker.cli import common

    monkeypatch.setattr(common.Progress, "__init__", _slow_start(common.Progress.__init__))
    monkeypatch.setenv("TERM", "xterm-256color")
    terminal = _Tty()
    monkeypatch.setattr("sys.stderr", terminal)
    for argv in (["check", "pr-41404", "--engine", "both", "--depth", "3", "--no-traces"],
                 ["simulate", "incident", "--requests", "50", "--pages", "4", "--slots", "2", "--no-traces"],
                 ["prove", "placeholder-fresh-pages", "--max-states", "5", "--no-certificates", "--no-traces"],
                 ["certify", str(ROOT / "traces" / "proofs" / "prefill-dies-unanswered.smt2")]):
        main(argv)
        out, _ = capsys.readouterr()
        assert terminal.getvalue() == "" and "\r" not in out and "\x1b[" not in out, argv
    monkeypatch.setattr("sys.stdout", _Tty())  # the control: with stdout a terminal too, the bar is drawn
    main(["certify", str(ROOT / "traces" / "proofs" / "prefill-dies-unanswered.smt2")])
    assert "certificates" in terminal.getvalue() and "\x1b[" in terminal.getvalue()
    drawn = len(terminal.getvalue())
    for argv in (["check", "incident", "--no-traces", "--json"], ["check", "incident", "--no-traces", "--quiet"],
                 ["prove", "placeholder-fresh-pages", "--max-states", "5", "--no-certificates", "--no-traces",
                  "--json"]):
        main(argv)  # on a terminal too, --json and --quiet draw no bar
        assert len(terminal.getvalue()) == drawn, argv


def _slow_start(init):
    def __init__(self, *a, **k):
        init(self, *a, **k)
        self.started -= 10  # past the one-second grace: only the terminal test keeps the bar away
    return __init__


def test_prove_help_says_the_whole_catalogue_takes_tens_of_minutes(capsys):
    code, out, _ = run(capsys, "prove", "--help")
    text = " ".join(out.split())
    assert code == 0 and "Without SCENARIO it runs the whole catalogue" in text and "tens of minutes" in text
    assert "28 minutes in all" in user_docs.page("explanation/z3-engine.md")  # the figure --help cites


# -- names and flags (item 3) --------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["check"], ["prove"], ["report"], ["simulate"], ["conform"],
                                  ["certify", str(ROOT / "traces" / "proofs" / "incident.smt2"), "--scenario"]])
def test_a_py_file_named_as_a_scenario_says_it_needs_variant(capsys, argv):
    variant = "examples/variant/in_order_completion.py"
    code, out, err = run(capsys, *argv, variant)
    assert code == 3 and out == "" and err == (
        f"kvproof: error: {variant}: a .py file is an engine variant (code), not a scenario: "
        f"pass it with --variant {variant}\n")


def test_every_command_that_takes_a_scenario_takes_variant():
    sub = _subcommands(build_parser())
    for name in ("check", "prove", "report", "simulate", "conform", "certify"):
        assert "--variant" in sub[name]._option_string_actions, name


def test_certify_checks_against_a_variant_scenario_passed_with_variant(capsys):
    v = ROOT / "examples" / "variant"
    cert = str(ROOT / "traces" / "proofs" / "prefill-dies-unanswered.smt2")  # a small one: not of early-release
    code, _, err = run(capsys, "certify", cert, "--scenario", str(v / "early_release.toml"))
    assert code == 3 and "pass the file with --variant early_release.py" in err
    code, out, _ = run(capsys, "certify", cert, "--scenario", str(v / "early_release.toml"),
                       "--variant", str(v / "early_release.py"))
    assert code == 1 and "the certificate is of scenario prefill-dies-unanswered, not of early-release" in out


def test_a_misspelt_claim_gets_a_suggestion(capsys):
    code, _, err = run(capsys, "check", "incident", "--invariant", "no_cross_tenant_reed")
    assert code == 3 and err == ("kvproof: error: unknown invariant or witness 'no_cross_tenant_reed'; did you mean "
                                 "no_cross_tenant_read? (kvproof list --claims names them)\n")


def _subcommands(parser):
    import argparse

    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def readme_commands(text: str) -> list[tuple[str, str, str]]:
    """(command, flag, line) for every ``kvproof COMMAND ... --flag`` in the README's code blocks
    and inline code (``kvproof --version`` has command ``""``)."""
    import re

    lines = [ln for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S) for ln in block.splitlines()]
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    lines += re.findall(r"`(kvproof [^`\n]+)`", prose)
    found = []
    for line in lines:
        line = re.split(r"\s#", line)[0]  # a shell comment
        # where a command starts: the line's start, after a prompt, a path, a pipe, && or ; (not
        # "kvproof" inside printed output, as in "nothing kvproof tried removes it")
        for m in re.finditer(r"(?:^\s*|(?<=\$ )|(?<=/)|(?<=&& )|(?<=\| )|(?<=; )|(?<=\())kvproof((?:\s+[^\s|;&>]+)*)",
                             line):
            words = m.group(1).split()
            if words and words[0].endswith(":"):  # what a command prints ("kvproof check: 1 scenario, ...")
                continue
            cmd = "" if not words or words[0].startswith("-") else words[0]
            for w in words[1 if cmd else 0:]:
                if w == "--":  # what follows is another program's command line (kvproof audit ... -- COMMAND)
                    break
                if w.startswith("-") and w != "-":
                    found.append((cmd, w.split("=")[0], line.strip()))
            found.append((cmd, "", line.strip()))
    return found


def _missing(text: str) -> list[str]:
    parser = build_parser()
    sub = _subcommands(parser)
    bad = []
    for cmd, flag, line in readme_commands(text):
        p = sub.get(cmd) if cmd else parser
        if p is None:
            bad.append(f"no command {cmd!r}: {line}")
        elif flag and flag not in p._option_string_actions:
            bad.append(f"kvproof {cmd} has no {flag}: {line}")
    return bad


def test_every_command_and_flag_the_readme_and_the_docs_show_exists():
    docs = user_docs.pages()
    seen = {(c, f) for text in docs.values() for c, f, _ in readme_commands(text)}
    assert {("check", "--variant"), ("prove", "--theorems"), ("report", "-o"), ("", "--version"),
            ("simulate", "--seed"), ("conform", "--random")} <= seen  # the scan finds what is there
    assert {("check", "--junit"), ("audit", "--arrival-bound"), ("show", "--step")} <= {
        (c, f) for c, f, _ in readme_commands(docs["README.md"])}  # the README's own tour
    assert {path: _missing(text) for path, text in docs.items() if _missing(text)} == {}
    assert _missing("```sh\nkvproof prove --no-such-flag\nkvproof chek\n```\n") == [
        "kvproof prove has no --no-such-flag: kvproof prove --no-such-flag", "no command 'chek': kvproof chek"]


# -- simulate (item 4) ---------------------------------------------------------------------------
def test_simulate_exits_1_on_an_exposure_unless_report_only(capsys, tmp_path):
    code, out, _ = run(capsys, "simulate", "incident", "--requests", "50", "--pages", "4", "--slots", "2", "--traces", str(tmp_path))
    assert code == 1 and out.splitlines()[-1] == (
        "kvproof simulate: 50 requests on incident (seed 0), 1 claim (no response reads another request's KV): "
        "0 matched, 1 mismatched, 0 inconclusive; exit 1: an exposure: a response read another request's KV")
    code, out, _ = run(capsys, "simulate", "incident", "--requests", "50", "--pages", "4", "--slots", "2", "--no-traces", "--report-only")
    assert code == 0 and out.splitlines()[-1].endswith(
        "exit 0: an exposure was found and only reported (--report-only)")
    code, out, _ = run(capsys, "simulate", "v0.5.22", "--requests", "50", "--pages", "4", "--slots", "2", "--no-traces")
    assert code == 0 and " 0 responses read another request's KV" in out
    assert out.splitlines()[-1].endswith("1 matched, 0 mismatched, 0 inconclusive; exit 0: no response read "
                                         "another request's KV")


def test_every_option_of_simulate_has_help_text():
    sim = _subcommands(build_parser())["simulate"]
    for action in sim._actions:
        assert action.help, action.dest
    assert "Exit 0 when none did, 1 when one did" in sim.description and "--report-only" in sim.description
