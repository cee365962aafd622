"""``kvproof validate --json`` (JSON Lines: the findings, one verdict per log, the summary) and
the summary line of the text report; violation and unexplained keep their exit codes."""

import json

import pytest

from kvproof.checker.cli import main
from kvproof.checker.logs.validate_output import exit_of, summary_of

CLEAN = "examples/validate/v0.5.22-clean.jsonl"
INCIDENT = "examples/validate/incident.jsonl"
PUSH = "examples/validate/vllm-push-window.jsonl"


def run(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def objects(out):
    return [json.loads(line) for line in out.splitlines()]


def test_json_of_a_violation_names_line_claim_trace_then_verdict_and_summary(tmp_path, capsys):
    code, out, _ = run(capsys, INCIDENT, "--json", "--traces", tmp_path)
    assert code == 1
    finding, verdict, summary = objects(out)
    assert finding["finding"] == "violation" and finding["line"] == 13 and finding["event"] == "decode_prealloc"
    assert finding["claims"] == ["rejected_never_reserves"] and finding["raw"]["pages"] == [0, 1, 2]
    assert finding["trace"] == str(tmp_path / "incident__rejected_never_reserves.itf.json")
    assert (tmp_path / "incident__rejected_never_reserves.itf.json").is_file()
    assert verdict == {**verdict, "log": INCIDENT, "verdict": "violation", "events": 12, "read": 18}
    assert summary["summary"] == {**summary["summary"], "command": "validate", "ran": "1 log, 18 events",
                                  "matched": 0, "mismatched": 1, "exit_code": 1}


def test_json_of_a_clean_log_is_its_verdict_and_summary(capsys):
    code, out, _ = run(capsys, CLEAN, "--json")
    assert code == 0
    verdict, summary = objects(out)
    assert verdict["verdict"] == "explained" and verdict["events"] == verdict["read"] == 284
    assert summary["summary"]["matched"] == 1 and summary["summary"]["exit_code"] == 0


def test_json_of_a_possible_violation_and_certain_only(tmp_path, capsys):
    code, out, _ = run(capsys, PUSH, "--json", "--no-traces")
    assert code == 1
    finding, verdict, _ = objects(out)
    assert (finding["finding"], finding["line"], finding["counted"]) == ("possible_violation", 6, True)
    assert finding["claims"] == ["no_source_free_while_read"] and verdict["verdict"] == "violation"
    code, out, _ = run(capsys, PUSH, "--json", "--certain-only")
    finding, verdict, _ = objects(out)
    assert code == 0 and finding["counted"] is False and verdict["verdict"] == "explained"


def test_json_keeps_unexplained_apart_from_violation(tmp_path, capsys):
    """A clean log with its second line duplicated: unexplained at line 3, exit 5 in JSON too."""
    lines = open(CLEAN).read().splitlines(keepends=True)
    log = tmp_path / "dup.jsonl"
    log.write_text("".join(lines[:2] + lines[1:]))
    code, out, _ = run(capsys, log, "--json")
    finding, verdict, summary = objects(out)
    assert code == 5 and summary["summary"]["exit_code"] == 5
    assert (finding["finding"], finding["line"], verdict["verdict"]) == ("unexplained", 3, "unexplained")
    assert finding["possible_states"] >= 1 and finding["about"]


def test_the_text_report_ends_with_the_summary_line(capsys):
    code, out, _ = run(capsys, INCIDENT, "--no-traces")
    assert code == 1
    assert out.splitlines()[-1] == ("kvproof validate: 1 log, 18 events: 0 matched, 1 mismatched, 0 inconclusive; "
                                    "exit 1: a log shows a violation (or a possible one) of an invariant")
    code, out, _ = run(capsys, CLEAN)
    assert code == 0 and out.splitlines()[-1].startswith("kvproof validate: 1 log, 284 events: 1 matched, 0 mis")


def test_bad_input_stays_one_line_exit_3_with_json(tmp_path, capsys):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"v": 1, "log": "kvproof-events", "scenario": "v0.5.22"}\n{"event": \n')
    code, out, err = run(capsys, log, "--json")
    assert code == 3 and out == "" and err.count("\n") == 1 and f"{log}:2: not JSON" in err


@pytest.mark.parametrize("answers, code", [
    (["explained", "violation", "unexplained"], 1), (["unexplained", "explained", "undecided"], 5),
    (["bad input", "undecided"], 3), (["explained", "undecided"], 2), (["explained"], 0), ([], 0)])
def test_over_many_logs_a_violation_wins_then_unexplained(answers, code):
    assert exit_of(answers) == code
    s = summary_of(answers, 10)
    assert s.exit_code == code and s.matched == answers.count("explained")
    assert s.mismatched == answers.count("violation") + answers.count("unexplained")
