"""``--max-seconds``: one budget for the whole command, from the process's start
(:mod:`kvproof.checker.budget`), and the backstop that stops what does not look at it
(:func:`kvproof.checker.symbolic.watchdog.backstop`).  The console command itself is timed in
``tests/test_cli.py``."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import kvproof
from kvproof.checker import budget as B
from kvproof.checker.symbolic.watchdog import BudgetSpent, backstop


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="the process start is read from /proc")
def test_the_budget_counts_from_the_process_start_not_from_kvproofs_import():
    probe = ("import time; t = time.perf_counter()\n"
             "from kvproof.checker.budget import process_started\n"
             "import kvproof\n"
             "p = process_started(); print(t - p, kvproof.STARTED - p)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    before_first_line, before_import = map(float, done.stdout.split())
    # the interpreter started before the script's first line ran (kvproof's import came after it)
    assert 0 <= before_first_line < 30, done.stdout
    assert before_import >= before_first_line


@pytest.mark.parametrize("age", [None, -5.0, 1e6], ids=["unreadable", "in-the-future", "implausibly-old"])
def test_without_a_plausible_process_start_the_budget_counts_from_kvproofs_import(monkeypatch, age):
    monkeypatch.setattr(B, "_proc_start_age", lambda: age)
    assert B.process_started() == kvproof.STARTED


def test_the_phases_keep_back_what_reporting_takes():
    b = B.Budget(3.0, 100.0)
    assert b.end == 103.0
    lim = b.limits(7, 9)
    assert (lim.max_states, lim.max_depth, lim.max_seconds) == (7, 9, 3.0)
    assert lim.deadline() == pytest.approx(103.0 - 0.25)  # a tenth of S, at most a quarter of a second
    assert lim.time_reason == "time limit 3 s reached"
    assert b.limits(keep=0.5).deadline() == pytest.approx(103.0 - 0.75)
    assert B.Budget(1.0, 100.0).limits().deadline() == pytest.approx(100.9)
    assert B.Budget(1.0, time.perf_counter() - 0.95).limits().expired()


def test_the_backstop_interrupts_a_blocking_call_at_its_deadline():
    old = signal.getsignal(signal.SIGALRM)
    t0 = time.perf_counter()
    with pytest.raises(BudgetSpent):
        with backstop(t0 + 0.2):
            time.sleep(30)  # a system call: interrupted, not waited out
    assert 0.15 < time.perf_counter() - t0 < 5
    assert signal.getsignal(signal.SIGALRM) is old


def test_the_backstop_interrupts_python_code_and_a_deadline_already_passed():
    old = signal.getsignal(signal.SIGALRM)
    t0 = time.perf_counter()
    for _ in range(20):  # the alarm may come while the block is being entered: it is raised once, inside
        with pytest.raises(BudgetSpent):
            with backstop(t0 - 1):  # spent before the block starts: at once
                while time.perf_counter() - t0 < 30:
                    pass
    assert time.perf_counter() - t0 < 10
    # and it left nothing behind: no watcher still interrupting Z3 calls, SIGALRM's handler restored
    assert not [t for t in threading.enumerate() if t.name == "kvproof-backstop"]
    assert signal.getsignal(signal.SIGALRM) is old


def test_an_alarm_that_lands_in_a_finaliser_still_stops_the_block(capsys):
    """Python ignores an exception raised in ``__del__`` (it reports it as unraisable): an alarm
    that comes while a finaliser runs is raised at a later one instead, so the block still
    stops.  Half of the time goes to finalisers here, five times over: a backstop that raised
    once, wherever the alarm landed, would let the block run on in most of these runs."""
    class Slow:
        def __del__(self):
            t = time.perf_counter()
            while time.perf_counter() - t < 0.01:
                pass

    for _ in range(5):
        t0 = time.perf_counter()
        with pytest.raises(BudgetSpent):
            with backstop(t0 + 0.05):
                while time.perf_counter() - t0 < 10:
                    Slow()
                    t = time.perf_counter()
                    while time.perf_counter() - t < 0.01:
                        pass
        assert time.perf_counter() - t0 < 3
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_block_that_ends_in_time_is_not_stopped():
    old = signal.getsignal(signal.SIGALRM)
    with backstop(time.perf_counter() + 0.3):
        pass
    time.sleep(0.5)  # past the deadline: the watcher is gone, nothing is raised
    assert signal.getsignal(signal.SIGALRM) is old


def test_the_backstop_does_nothing_outside_the_main_thread():
    seen = []

    def work():
        try:
            with backstop(time.perf_counter() - 1):
                time.sleep(0.3)
            seen.append("finished")
        except BaseException as e:  # pragma: no cover - what the test forbids
            seen.append(type(e).__name__)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == ["finished"]


def test_the_backstop_never_cuts_a_write_to_stdout_and_says_one_was_made(monkeypatch):
    """A write to standard output that outlasts the deadline (a slow pipe reader) runs whole;
    the budget is spent after it, and BudgetSpent says the command had written (so a second JSON
    document is never appended to the first: CI once read a document cut at 64 KiB followed by
    the budget's own summary)."""
    written = []

    class Slow:
        def write(self, text):
            time.sleep(0.4)  # the deadline (0.1 s) passes inside this write
            written.append(text)
            return len(text)

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Slow())
    t0 = time.perf_counter()
    with pytest.raises(BudgetSpent) as spent:
        with backstop(t0 + 0.1):
            sys.stdout.write("{whole document}")
            while True:
                time.sleep(0.01)
    assert written == ["{whole document}"] and spent.value.after_output
    with pytest.raises(BudgetSpent) as spent:
        with backstop(time.perf_counter() + 0.05):
            while True:
                time.sleep(0.01)
    assert not spent.value.after_output
    assert isinstance(sys.stdout, Slow)  # the real stdout is put back


def test_the_backstop_interrupts_a_z3_call():
    import z3

    n = 12  # n + 1 pigeons in n holes: unsat, and far beyond a SAT solver's reach in seconds
    x = [[z3.Bool(f"bp{i}_{j}") for j in range(n)] for i in range(n + 1)]
    s = z3.SolverFor("QF_FD")
    s.set("timeout", 60_000)  # if the interrupt were lost, fail after a minute rather than hang
    for i in range(n + 1):
        s.add(z3.Or(*x[i]))
    for j in range(n):
        for i in range(n + 1):
            for k in range(i + 1, n + 1):
                s.add(z3.Not(z3.And(x[i][j], x[k][j])))
    t0 = time.perf_counter()
    with pytest.raises(BudgetSpent):
        with backstop(t0 + 0.3):
            s.check()
    assert time.perf_counter() - t0 < 10


def test_a_command_the_backstop_stopped_says_so_in_its_json(tmp_path):
    """``python -m kvproof`` is the console command too: the budget is enforced, and with
    ``--json`` the closing line is the document's ``summary``."""
    done = subprocess.run([sys.executable, "-m", "kvproof", "check", "--json", "--no-traces", "--max-seconds", "0.05"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(kvproof.__file__).parents[1])})
    assert done.returncode == 2, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    summary = doc["summary"]
    assert summary["exit_code"] == 2 and summary["command"] == "check"
    assert "inconclusive" in summary["meaning"]
    # Which of the two ways the budget ends the command depends on how fast the process got to
    # its first search: the phases stop before the deadline (every claim inconclusive, the
    # verdicts reported), or the backstop stopped it before it reported (the summary alone).
    if "scenarios" in doc:
        rows = [r for sc in doc["scenarios"] for r in sc["results"]]
        assert rows and all(r["verdict"] == "inconclusive" for r in rows)
        assert summary["inconclusive"] == len(rows) and summary["matched"] == 0
        assert all(sc["reason"] == "time limit 0.05 s reached" for sc in doc["scenarios"])
    else:
        assert "time limit 0.05 s reached" in summary["ran"] and summary["inconclusive"] == 0


def _held(seconds: float) -> int:
    """A call into C that holds the interpreter for ``seconds`` or more: no signal handler runs
    until it returns (what loading torch's extension does to an engine's import)."""
    import re

    return len(re.findall(r"(a*)*b", "a" * int(24 + seconds * 2)))  # catastrophic backtracking, all in C


def test_a_call_held_in_c_is_stopped_at_the_deadline_in_its_child_process():
    """``Budget.call`` runs the call in a forked child: a call the backstop cannot interrupt
    (here, a regular expression held in C for many seconds) ends at the phases' deadline with
    BudgetSpent, and the child is gone; the same call here would run on past it."""
    t0 = time.perf_counter()
    budget = B.Budget(0.5, t0)
    children = _children()
    with pytest.raises(BudgetSpent):
        budget.call(_held, 60)
    wall = time.perf_counter() - t0
    assert 0.3 < wall < 1.5, wall
    assert _children() == children  # killed and reaped: no zombie left


def _children() -> set[int]:
    """This process's child processes (zombies included), from /proc."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == me:
                found.add(int(entry.name))
    return found


def test_a_call_in_time_returns_its_value_and_raises_its_exception():
    budget = B.Budget(60, time.perf_counter())
    pid = os.getpid()
    assert budget.call(lambda: (os.getpid() != pid, {"tp": 2, "mode": "decode"})) == (True, {"tp": 2, "mode": "decode"})
    with pytest.raises(ValueError, match="refuses this line"):
        budget.call(lambda: (_ for _ in ()).throw(ValueError("sglang 0.5.23 refuses this line")))
    assert B.call_within(None, os.getpid) == pid  # no budget: here, not in a child


def test_a_child_the_kernel_killed_is_out_of_memory_and_one_that_exits_is_an_error():
    budget = B.Budget(60, time.perf_counter())
    with pytest.raises(MemoryError, match="killed"):
        budget.call(lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(RuntimeError, match="exited \\(code 3\\)"):
        budget.call(os._exit, 3)


def test_a_z3_call_canceled_past_the_deadline_is_the_budget_spent():
    # a Z3 call that is not a check (reading a model) fails with "canceled" once the watchdog
    # interrupts: the command's budget ran out, which the command reports as such (exit 2)
    import z3

    from kvproof.checker.symbolic.watchdog import z3_deadline

    with pytest.raises(BudgetSpent):
        with z3_deadline(time.perf_counter() - 1):
            raise z3.Z3Exception(b"canceled")
    with pytest.raises(z3.Z3Exception):  # before the deadline, an error of Z3 is an error
        with z3_deadline(time.perf_counter() + 600):
            raise z3.Z3Exception(b"canceled")


def test_the_backstop_takes_a_z3_call_canceled_past_the_deadline_for_the_budget():
    import z3

    # the alarm is held back, so only the Z3 error can end the block: as the budget, once late
    old = signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    try:
        with pytest.raises(BudgetSpent):
            with backstop(time.perf_counter() - 1):
                raise z3.Z3Exception(b"canceled")
        with pytest.raises(z3.Z3Exception):
            with backstop(time.perf_counter() + 600):
                raise z3.Z3Exception(b"canceled")
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})  # a pending alarm is ignored
        signal.signal(signal.SIGALRM, old)
