"""Every command that decides something ends the same way: ``--json`` prints one document with
the same top-level keys (``command``, ``verdict``, ``exit_code``, then the command's own, then
``summary``), ``--quiet`` prints nothing, and the text ends with the closing line; both options
come from one helper (``add_output_arguments``)."""

import json
from pathlib import Path

import pytest

from kvproof.checker.cli import main
from kvproof.checker.cli.commands import build_parser
from kvproof.checker.cli.common import JSON_HELP, QUIET_HELP

from .minipd import EXAMPLE, registered

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
A, B = TRACES / "incident__no_cross_tenant_read.itf.json", TRACES / "abort-race__no_cross_tenant_read.itf.json"
EARLY = str(EXAMPLE / "kvproof_minipd" / "scenarios" / "minipd-early-free.toml")
AUDIT = ["audit", "vllm==0.33.0", "--reader", "table", "--no-traces"]  # a launch with no KV handoff: no search (test_audit checks one)

DECIDING = ("check", "report", "prove", "certify", "replay", "diff", "simulate", "conform", "audit", "validate")
HEAD = ["command", "verdict", "exit_code"]


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


def test_every_deciding_command_has_json_and_quiet_from_the_one_helper():
    commands = _subparsers()
    for name in DECIDING:
        options = {o: a for a in commands[name]._actions for o in a.option_strings}
        assert "--json" in options and "--quiet" in options, name
        assert options["--quiet"].help == QUIET_HELP, name
        assert name == "validate" or options["--json"].help == JSON_HELP, name
    deciding = {name for name, p in commands.items() if any("--json" in a.option_strings for a in p._actions)}
    assert deciding == set(DECIDING)  # a new command with --json is a deciding one: add it above


CASES = [  # argv, exit code, verdict, a key of the command's own with its value
    (["check", "incident", "--no-traces"], 0, "matched", ("scenarios", lambda v: len(v[0]["results"]) == 13)),
    (["replay", str(A)], 0, "matched", ("reproduced", lambda v: v is True)),
    (["diff", str(A), str(A)], 0, "matched", ("identical", lambda v: v is True)),
    (["diff", str(A), str(B)], 1, "mismatched", ("diverge", lambda v: v == 5)),
    (["simulate", "incident", "--requests", "200", "--no-traces"], 1, "mismatched", ("exposed", lambda v: v is True)),
    (["certify", str(TRACES / "proofs" / "abort-race.smt2")], 0, "matched",
     ("certificates", lambda v: [c["verdict"] for c in v] == ["verified"])),
    ([*AUDIT, "--", "vllm", "serve", "Qwen/Qwen3-0.6B"], 0, "not exposed", ("hazards", lambda v: v == [])),
]


@pytest.mark.parametrize("argv, code, verdict, own", CASES, ids=lambda c: c[0] if isinstance(c, list) else None)
def test_json_quiet_and_the_closing_line(capsys, tmp_path, argv, code, verdict, own):
    assert main([*argv[:1], *argv[1:], "--json"] if "--" not in argv else
                [*argv[:argv.index("--")], "--json", *argv[argv.index("--"):]]) == code
    doc = json.loads(capsys.readouterr().out)
    assert list(doc)[:3] == HEAD and list(doc)[-1] == "summary"
    assert (doc["command"], doc["verdict"], doc["exit_code"]) == (argv[0], verdict, code)
    assert doc["summary"]["exit_code"] == code and doc["summary"]["command"] == argv[0]
    key, holds = own
    assert holds(doc[key]), doc[key]
    quiet = [*argv[:argv.index("--")], "--quiet", *argv[argv.index("--"):]] if "--" in argv else [*argv, "--quiet"]
    assert main(quiet) == code
    assert capsys.readouterr().out == ""
    assert main(argv) == code
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"kvproof {argv[0]}: ") and f"; exit {code}: " in last


def test_report_json(capsys, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", "incident", "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc)[:3] == HEAD and doc["report"] == str(out) and out.is_file()
    assert main(["report", "incident", "-o", str(out), "--quiet"]) == 0 and capsys.readouterr().out == ""


def test_prove_json_and_quiet(capsys, tmp_path):
    with registered():
        args = ["prove", EARLY, "--no-certificates", "--traces", str(tmp_path)]
        assert main([*args, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert list(doc)[:3] == HEAD and (doc["command"], doc["verdict"], doc["exit_code"]) == ("prove", "matched", 0)
        assert doc["scenarios"][0]["name"] == "minipd-early-free"
        assert main([*args, "--quiet"]) == 0 and capsys.readouterr().out == ""


def test_validate_json_lines_end_with_the_same_keys(capsys):
    assert main(["validate", "examples/validate/incident.jsonl", "--no-traces", "--json"]) == 1
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert list(last) == [*HEAD, "summary"] and (last["verdict"], last["exit_code"]) == ("violation", 1)
    assert main(["validate", "examples/validate/incident.jsonl", "--no-traces", "--quiet"]) == 1
    assert capsys.readouterr().out == ""


def test_conform_json(capsys, monkeypatch):
    """The real engine stood in for (as in test_cli_everyday): what is counted and printed."""
    from kvproof.spec.sglang.conform import command, report

    monkeypatch.setattr(command, "load_sglang", lambda: None)
    fake = {A.name: report.Reproduced(A, "c", 18, "as the model"),
            "incident__decode_reads_only_own_pages.itf.json": report.Diverged(A, "c", 3, "differs")}
    monkeypatch.setattr(report, "replay_trace", lambda path: fake[Path(path).name])
    traces = [str(TRACES / name) for name in fake]
    assert main(["conform", *traces, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert list(doc)[:3] == HEAD and (doc["verdict"], doc["exit_code"]) == ("diverged", 1)
    assert [r["verdict"] for r in doc["results"]] == ["reproduced", "diverged"]
    assert main(["conform", *traces, "--quiet"]) == 1 and capsys.readouterr().out == ""


def test_bad_input_stays_one_line_with_json(capsys, tmp_path):
    bad = tmp_path / "x.smt2"
    bad.write_text("not a certificate\n")
    assert main(["certify", str(bad), "--json"]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1


def test_the_output_pages_example_is_what_replay_prints(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    page = (ROOT / "docs" / "reference" / "output.md").read_text()
    shown = page.split("```json\n", 1)[1].split("```", 1)[0]
    assert main(["replay", "traces/incident__no_cross_tenant_read.itf.json", "--json"]) == 0
    assert capsys.readouterr().out == shown
