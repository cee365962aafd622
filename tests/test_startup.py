"""The command line starts fast: ``kvproof --help`` and ``kvproof list`` load neither Z3, numpy
nor scipy (the engines are imported by the command that uses them), and a small ``kvproof
check`` loads the explicit engine but none of them."""

import subprocess
import sys

import pytest

HEAVY = ("z3", "numpy", "scipy", "networkx", "cvc5", "itf_py")

PROBE = """
import contextlib, io, sys
from kvproof.checker.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main({argv!r})
print(code, [m for m in {heavy!r} if m in sys.modules])
"""


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["list", "--claims"]], ids=" ".join)
def test_help_and_list_import_no_engine(argv):
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.split("\n")[-2] == "0 []", done.stdout + done.stderr


def test_the_parser_offers_the_visited_sets_the_engine_has():
    from kvproof.checker.cli.check import VISITED_MODES
    from kvproof.checker.explicit.visited import MODES

    assert VISITED_MODES == tuple(MODES)


def test_a_small_check_runs_the_engine_without_numpy():
    # the probe above would pass on a command that imports nothing: this one searches (the
    # engine is loaded) with the visited set a Python set (numpy is not)
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=["check", "incident", "--no-traces", "--quiet"],
                                                              heavy=HEAVY + ("kvproof.checker.explicit.search",))],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split("\n")[-2] == "0 ['kvproof.checker.explicit.search']", done.stdout + done.stderr
