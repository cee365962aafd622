"""The symbolic commands of the command line: `prove` interrupted inside a Z3 call is exit 130
and one line, never a result. (`certify` is tested with the certificates, test_certificate.py.)"""

import signal
import subprocess
import sys
import time

# `kvproof prove` with method 1's loop replaced by one SAT question no solver finishes (a
# pigeonhole problem): Ctrl-C arrives while Z3 is solving.
CHILD = r'''
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever started us
import z3
from kvproof.checker.symbolic import proofs
from kvproof.checker.cli.commands import main

def hard_block(*args, **kwargs):
    n = 14
    x = [[z3.Bool(f"x{i}_{j}") for j in range(n)] for i in range(n + 1)]
    s = z3.SolverFor("QF_FD")
    s.set("timeout", 60000)
    for i in range(n + 1):
        s.add(z3.Or(*x[i]))
    for j in range(n):
        for i in range(n + 1):
            for k in range(i + 1, n + 1):
                s.add(z3.Not(z3.And(x[i][j], x[k][j])))
    print("solving", flush=True)
    if s.check() == z3.unknown:
        raise TimeoutError(f"solver gave up ({s.reason_unknown()})")
    raise AssertionError("the pigeonhole problem was answered")

proofs.block = hard_block
sys.exit(main(["prove", "prefill-abort-propagated", "--no-certificates", "--no-traces"]))
'''


def test_ctrl_c_inside_a_z3_call_during_prove_is_exit_130_and_one_line():
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "solving"
        time.sleep(1.0)  # well inside the check
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, (out, err)
    assert err == "kvproof: interrupted\n" and "solver gave up" not in out
