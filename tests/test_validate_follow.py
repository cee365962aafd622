"""``kvproof validate --follow``: a live log (a pipe kept open, a file that is appended to, renamed
away and recreated, or truncated) is reported as it is read, and the search goes on."""

import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kvproof.checker.logs.follow import NEW_FILE, pipe_lines, tail_lines
from kvproof.checker.logs.validate import Checked, Maybe, explain, monitor, read_log
from kvproof.checker.logs.validate_command import follow_log
from kvproof.model.scenario import builtin

CLEAN = "examples/validate/v0.5.22-clean.jsonl"
INCIDENT = "examples/validate/incident.jsonl"
PUSH = "examples/validate/vllm-push-window.jsonl"
KVPROOF = str(Path(sys.executable).with_name("kvproof"))


def lines_of(path):
    return Path(path).read_bytes().splitlines(keepends=True)


def _events(path):
    from kvproof.checker.logs.validate_command import prepare

    p = prepare(path, "python", 100_000)
    return p, [p.obs.decode(no, raw) for no, raw in p.rows]


@pytest.mark.parametrize("log", [CLEAN, INCIDENT, PUSH, "examples/validate/vllm-lease-expiry.jsonl"])
def test_monitor_reports_what_explain_answers_first(log):
    """The live search's first certain violation and first possible violation are explain's."""
    p, events = _events(log)
    verdict = explain(p.machine, p.obs, events, 100_000, p.search.__class__(p.machine, p.obs, 100_000))
    p2, events2 = _events(log)
    found = list(monitor(p2.machine, p2.obs, events2))
    certain = [f for f in found if not isinstance(f, Maybe) and f.kind == "violation"]
    maybes = [f for f in found if isinstance(f, Maybe)]
    if verdict.kind == "violation":
        assert (certain[0].event.line, certain[0].claims) == (verdict.event.line, verdict.claims)
    else:
        assert verdict.kind == "explained" and not certain and not [f for f in found if not isinstance(f, Maybe)]
    assert [(m.event.line, m.claims) for m in maybes] == ([(verdict.maybe.event.line, verdict.maybe.claims)]
                                                          if verdict.maybe else [])


def test_monitor_goes_on_after_a_violation_and_skips_an_unexplained_line():
    """The incident: rejected_never_reserves at line 13, then the four claims the commit at line
    19 breaks (the claim already reported is not reported again); a duplicated line is
    unexplained and skipped, and the search still reaches line 13's violation."""
    p, events = _events(INCIDENT)
    found = [f for f in monitor(p.machine, p.obs, events) if not isinstance(f, Maybe)]
    assert [(f.kind, f.event.line) for f in found] == [("violation", 13), ("violation", 19)]
    assert found[0].claims == ["rejected_never_reserves"] and "rejected_never_reserves" not in found[1].claims
    assert "decode_reads_only_own_pages" in found[1].claims
    p, events = _events(INCIDENT)
    events = events[:2] + events[1:]  # line 3 logged twice
    found = [f for f in monitor(p.machine, p.obs, events) if not isinstance(f, Maybe)]
    assert [(f.kind, f.event.line) for f in found][:2] == [("unexplained", 3), ("violation", 13)]


def _readline(sel, stream, timeout):
    """One line of ``stream`` (a pipe) within ``timeout`` seconds, or None."""
    end = time.monotonic() + timeout
    buf = b""
    while time.monotonic() < end:
        if not sel.select(max(0.0, end - time.monotonic())):
            break
        ch = os.read(stream.fileno(), 1)
        if not ch:
            break
        buf += ch
        if ch == b"\n":
            return buf.decode()
    return None


def test_a_pipe_kept_open_gets_the_alert_within_one_second():
    """The incident written into a pipe the test keeps open: the violation at line 13 is printed
    within a second of writing that line, while the writer still holds the pipe; the rest of the
    log is still checked, and closing the pipe ends the run with the summary, exit 1."""
    lines = lines_of(INCIDENT)
    proc = subprocess.Popen([KVPROOF, "validate", "--follow", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    try:
        out, err = selectors.DefaultSelector(), selectors.DefaultSelector()
        out.register(proc.stdout, selectors.EVENT_READ)
        err.register(proc.stderr, selectors.EVENT_READ)
        proc.stdin.write(lines[0])
        proc.stdin.flush()
        assert (_readline(err, proc.stderr, 60) or "").startswith("following -: incident")  # ready
        proc.stdin.write(b"".join(lines[1:12]))  # lines 2..12: nothing to report
        proc.stdin.flush()
        assert _readline(out, proc.stdout, 0.3) is None
        t0 = time.monotonic()
        proc.stdin.write(lines[12])  # line 13: the reservation for a rejected prompt
        proc.stdin.flush()
        alert = _readline(out, proc.stdout, 1.0)
        took = time.monotonic() - t0
        assert alert is not None and alert.startswith("-:13: violation: decode_prealloc"), alert
        print(f"alert after {took:.3f} s")
        assert took < 1.0 and proc.poll() is None  # still running: the pipe is open
        proc.stdin.write(b"".join(lines[13:]))
        proc.stdin.close()
        rest = proc.stdout.read().decode()
        assert proc.wait(30) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "-:19: violation: decode_commit" in rest
    assert rest.splitlines()[-1].startswith("kvproof validate: 1 log, 18 events: 0 matched, 1 mismatched")


class _Collect:
    def __init__(self):
        self.findings = []

    def say(self, text, markup=True):
        pass

    def finding(self, obj):
        self.findings.append(obj)


def _wait(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_a_followed_file_is_read_across_rename_and_truncation(tmp_path):
    """A log appended to in two parts, then renamed away with the incident written to a new file
    at the path, then truncated with the incident written again: three logs, explained, then
    flagged at line 13 in each new file (line numbers count from each file's start)."""
    from argparse import Namespace

    path = tmp_path / "engine.jsonl"
    clean = lines_of(CLEAN)
    path.write_bytes(b"".join(clean[:100]))
    done = threading.Event()
    printer = _Collect()
    results = []
    args = Namespace(max_states=100_000, backend="auto", certain_only=False)
    worker = threading.Thread(target=follow_log, args=(args, printer, lambda text: None,
                                                       tail_lines(str(path), done.is_set), str(path), results))
    worker.start()
    try:
        with open(path, "ab") as f:
            f.write(b"".join(clean[100:]))
        assert _wait(lambda: results and results[0].count == len(clean) - 1)
        os.rename(path, tmp_path / "engine.jsonl.1")
        path.write_bytes(b"".join(lines_of(INCIDENT)[:13]))
        assert _wait(lambda: any(f.get("finding") == "violation" for f in printer.findings))
        with open(path, "r+b") as f:
            f.truncate(0)
        time.sleep(0.3)  # a truncation is seen when the file is found shorter than what was read (as tail -F)
        path.write_bytes(b"".join(lines_of(INCIDENT)))
        assert _wait(lambda: sum(f.get("finding") == "violation" and f["line"] == 13 for f in printer.findings) == 2)
    finally:
        done.set()
        worker.join(10)
    assert not worker.is_alive()
    assert [r.answer for r in results] == ["explained", "violation", "violation"]
    assert results[0].count == len(clean) - 1 and results[2].count == len(lines_of(INCIDENT)) - 1
    assert [f["line"] for f in printer.findings if f.get("finding") == "violation"] == [13, 13, 19]


def test_tail_lines_keeps_a_torn_line_until_its_newline(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b'{"a": 1}\n{"b"')
    stop = threading.Event()
    got = []
    t = threading.Thread(target=lambda: got.extend(tail_lines(str(path), stop.is_set)))
    t.start()
    time.sleep(0.2)
    with open(path, "ab") as f:
        f.write(b': 2}\n')
    time.sleep(0.2)
    stop.set()
    t.join(5)
    assert got == [(1, b'{"a": 1}\n'), (2, b'{"b": 2}\n')]
    assert list(pipe_lines(open(path, "rb"))) == got and NEW_FILE is None
