"""Solver budgets in resource units (``--rlimit``): a query past its units answers *unknown*,
never a wrong verdict, and the same units give the same answers whatever the load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import z3

from kvproof.checker.certs.limits import DEFAULT_RLIMIT, NO_WALL_CLOCK, ResourceLimit
from kvproof.checker.cli.options import units

ROOT = Path(__file__).resolve().parents[1]
CERT = ROOT / "traces/proofs/vllm-pull-mla-notif-before-36958.allsizes.smt2"


def kvproof(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvproof", *argv], capture_output=True, text=True, cwd=ROOT)


def _hard_query(s: z3.Solver) -> z3.CheckSatResult:
    x = [z3.Int(f"x{i}") for i in range(30)]
    s.add(z3.Sum(x) == 17, *[z3.And(v >= 0, v <= 3) for v in x], z3.Distinct(x[:4]))
    return s.check()


def test_the_limit_applies_to_every_solver_in_the_block_and_is_lifted_after_it():
    with ResourceLimit(1000).applied():
        s = z3.Solver()
        assert _hard_query(s) == z3.unknown
        assert "resource limit" in s.reason_unknown()
    assert _hard_query(z3.Solver()) == z3.sat  # lifted: the same query answers


def test_a_phase_has_no_wall_clock_budget_while_the_units_bound_it_unless_one_is_given():
    assert ResourceLimit().seconds(None, 600.0) == NO_WALL_CLOCK
    assert ResourceLimit().seconds(42.0, 600.0) == 42.0
    assert ResourceLimit(0).seconds(None, 600.0) == 600.0  # --rlimit 0: the wall-clock budgets as before
    assert NO_WALL_CLOCK * 1000 < 2**32  # Z3's timeout (milliseconds, unsigned 32 bits) takes it


def test_units_parse_grouped_digits_and_refuse_the_rest():
    import argparse
    assert units("200_000_000") == units("200,000,000") == 200_000_000
    for bad in ("-1", "lots", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            units(bad)


def test_prove_all_sizes_past_its_units_is_inconclusive_with_the_reason_never_refuted():
    r = kvproof("prove", "--all-sizes", "vllm-pull-mla-notif-before-36958", "--rlimit", "1",
                "--no-certificates", "--no-traces")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "resource limit exceeded" in r.stdout
    assert "refuted" not in r.stdout and "VIOLATED" not in r.stdout


def test_certify_bounded_by_units_fails_the_same_way_twice_and_passes_with_the_default():
    small = [kvproof("certify", str(CERT), "--rlimit", "1000", "--cvc5-rlimit", "1000") for _ in range(2)]
    assert [r.returncode for r in small] == [1, 1]
    lines = [[ln for ln in r.stdout.splitlines() if "unknown (expected unsat)" in ln] for r in small]
    assert lines[0] and lines[0] == lines[1]  # the same obligations unknown both times: units, not seconds
    ok = kvproof("certify", str(CERT))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert DEFAULT_RLIMIT > 3_299_438  # above the largest obligation bench/bench_rlimit.py measured
