"""``kvproof validate DIR`` (many logs: one verdict each, one summary) and ``--backend ray``
(the same findings, the logs checked on a Ray cluster)."""

import json
import os
import shutil

import pytest

from kvproof.checker.cli import main

EXAMPLES = ["incident.jsonl", "v0.5.22-clean.jsonl", "vllm-clean.jsonl", "vllm-lease-expiry.jsonl",
            "vllm-push-window.jsonl"]
ANSWERS = ["violation", "explained", "explained", "violation", "violation"]


def _fleet(tmp_path, bad=True):
    d = tmp_path / "logs"
    d.mkdir()
    for name in EXAMPLES:
        shutil.copy(f"examples/validate/{name}", d / name)
    if bad:
        (d / "zz-torn.jsonl").write_text('{"v": 1, "log": "kvproof-events", "scenario": "v0.5.22"}\n{"event": "cl')
    (d / "notes.txt").write_text("not a log\n")
    return d


def run(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _verdicts(out):
    objs = [json.loads(line) for line in out.splitlines()]
    return [o for o in objs if "log" in o and "verdict" in o], [o for o in objs if "finding" in o], objs[-1]["summary"]


def test_a_directory_gets_one_verdict_per_log_and_one_summary(tmp_path, capsys):
    d = _fleet(tmp_path)
    code, out, _ = run(capsys, d, "--json", "--traces", tmp_path / "traces")
    verdicts, findings, summary = _verdicts(out)
    assert code == 1  # a violation wins over the bad log
    assert [os.path.basename(v["log"]) for v in verdicts] == EXAMPLES + ["zz-torn.jsonl"]  # *.jsonl, sorted
    assert [v["verdict"] for v in verdicts] == ANSWERS + ["bad input"]
    assert [(os.path.basename(f["log"]), f["finding"], f.get("line")) for f in findings] == [
        ("incident.jsonl", "violation", 13), ("vllm-lease-expiry.jsonl", "violation", 6),
        ("vllm-push-window.jsonl", "possible_violation", 6), ("zz-torn.jsonl", "bad input", None)]
    assert "zz-torn.jsonl:2: not JSON" in findings[-1]["why"]
    assert (summary["ran"], summary["matched"], summary["mismatched"]) == ("6 logs, 569 events", 2, 3)
    assert len(list((tmp_path / "traces").glob("*.itf.json"))) == 3


def test_the_text_report_of_a_directory_and_its_exit_codes(tmp_path, capsys):
    d = _fleet(tmp_path, bad=False)
    code, out, _ = run(capsys, d, "--no-traces")
    assert code == 1 and out.splitlines()[-1].startswith("kvproof validate: 5 logs, 569 events: 2 matched, 3 mis")
    for name in ("incident", "vllm-lease-expiry", "vllm-push-window", "v0.5.22-clean"):
        os.remove(d / f"{name}.jsonl")
    code, out, _ = run(capsys, d, d / ".." / "logs" / "vllm-clean.jsonl")  # a directory and a file
    assert code == 0 and "2 logs, 498 events: 2 matched" in out
    (d / "torn.jsonl").write_text('{"v": 1, "log": "kvproof-events", "scenario": "v0.5.22"}\n{"event": "cl')
    code, out, _ = run(capsys, d)
    assert code == 3 and "torn.jsonl:2: not JSON" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, empty)
    assert (code, err) == (3, f"kvproof: error: {empty}: a directory with no event log (*.jsonl)\n")
    code, _, err = run(capsys, "--follow", d)
    assert (code, err) == (3, "kvproof: error: --follow: one log, a file or - (standard input)\n")


@pytest.mark.slow  # a local Ray cluster starts in about 5 s
def test_ray_gives_the_findings_of_the_local_run(tmp_path, capsys):
    pytest.importorskip("ray")
    d = _fleet(tmp_path)
    local = run(capsys, d, "--json", "--no-traces")
    spread = run(capsys, d, "--json", "--no-traces", "--backend", "ray", "--workers", "2")

    def strip(out):
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in out.splitlines()]

    assert spread[0] == local[0] == 1
    assert strip(spread[1]) == strip(local[1])
