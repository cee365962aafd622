"""Ctrl-C during a Z3 call: inside interrupts_reach_python() a KeyboardInterrupt, promptly;
outside it Z3 swallows the signal and answers unknown (what prove used to report as a result)."""

import os
import signal
import threading
import time

import pytest
import z3

from kvproof.checker.symbolic.interrupts import interrupts_reach_python


def _pigeonhole(n: int = 14):
    """n + 1 pigeons in n holes: unsat, and far beyond a SAT solver's reach in seconds."""
    x = [[z3.Bool(f"ph{i}_{j}") for j in range(n)] for i in range(n + 1)]
    s = z3.SolverFor("QF_FD")
    s.set("timeout", 60_000)  # if the interrupt were lost, fail after a minute rather than hang
    for i in range(n + 1):
        s.add(z3.Or(*x[i]))
    for j in range(n):
        for i in range(n + 1):
            for k in range(i + 1, n + 1):
                s.add(z3.Not(z3.And(x[i][j], x[k][j])))
    return s


@pytest.fixture
def python_handles_sigint():
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _sigint_after(seconds: float) -> threading.Timer:
    t = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t


def test_sigint_inside_a_z3_call_raises_keyboard_interrupt_promptly(python_handles_sigint):
    s = _pigeonhole()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        with interrupts_reach_python():
            _sigint_after(0.5)
            s.check()
    assert time.perf_counter() - start < 10
    assert z3.get_param("ctrl_c") == "true"  # restored
    assert signal.set_wakeup_fd(-1) == -1  # restored


def test_without_it_z3_turns_sigint_into_unknown(python_handles_sigint):
    s = _pigeonhole()
    _sigint_after(0.5)
    assert s.check() == z3.unknown
    assert "interrupted" in s.reason_unknown() or "canceled" in s.reason_unknown()
