"""The tamper suite: every forged or tampered certificate of :mod:`tests.tamper` (more than 200,
of both kinds) is refused by what ``kvproof certify`` runs, with the reason it was built to
trigger; the few edits that leave the terms the same are accepted, and say why.

Each forgery goes through ``certify``'s own steps, stopping at the first that refuses it, so the
suite stays within the test budget: the one reader (bad input, exit 3), then for a fixed-size
certificate its own checks and today's catalogue encoding, then z3 and cvc5; for an all-sizes
certificate :func:`~kvproof.checker.allsizes.recheck_all_sizes` (today's model term for term,
then the solvers).  A sample goes through the command line end to end for the exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvproof.checker.allsizes.prove import recheck_all_sizes
from kvproof.checker.symbolic.cert_catalogue import match_catalogue
from kvproof.checker.certs.reader import ALL_SIZES, CertificateError, read_certificate
from kvproof.checker.certs.solvers import invariant_scope_problems, run_solvers
from kvproof.checker.cli.commands import main

from .tamper import Forgery, committed, forgeries

ALL = forgeries()
BY_NAME = {f.name: f for f in ALL}


def judge(path: Path) -> tuple[str, list[str]]:
    """``bad input`` with the reader's line, ``fails`` with the problem lines, or ``checks``."""
    try:
        cert = read_certificate(path)
    except CertificateError as e:
        return "bad input", [str(e)]
    if cert.kind == ALL_SIZES:
        r = recheck_all_sizes(path, seconds=300)
        return ("fails" if r.problems else "checks"), r.problems
    problems = cert.problems + invariant_scope_problems(cert) + match_catalogue(cert).problems
    if problems:
        return "fails", problems
    problems = [p for run in run_solvers(cert, 300) for p in run.problems]
    return ("fails" if problems else "checks"), problems


def save(tmp_path: Path, f: Forgery) -> Path:
    """The forgery saved under its name in a folder of its own."""
    path = tmp_path / f.filename
    path.write_bytes(f.data)
    return path


def test_the_suite_is_large_and_covers_both_kinds():
    kinds = {f.name.split(":")[0].split(" v0")[0].split(" vllm")[0] for f in ALL}
    assert len(ALL) >= 200 and kinds == {"fixed", "all sizes"}
    rejected = [f for f in ALL if f.outcome != "same"]
    assert len([f for f in rejected if f.name.startswith("all sizes")]) >= 100
    assert len([f for f in rejected if f.name.startswith("fixed")]) >= 100


@pytest.mark.parametrize("name", [f.name for f in ALL if not f.name.startswith("all sizes")])
def test_a_forged_certificate_is_refused_for_its_reason(tmp_path, name):
    f = BY_NAME[name]
    outcome, lines = judge(save(tmp_path, f))
    if f.outcome == "same":  # an edit that leaves every term as it was proves the same thing
        assert outcome == "checks", lines
        return
    assert outcome == f.outcome, (outcome, lines)
    assert any(f.expect in line for line in lines), lines
    if outcome == "bad input":
        assert len(lines) == 1 and "\n" not in lines[0] and lines[0].startswith(str(tmp_path))


def test_the_committed_certificates_the_forgeries_start_from_check(tmp_path):
    # (the all-sizes ones: tests/test_allsizes_lifted.py and tests/test_tamper_allsizes.py, and CI's certify)
    for scenario, suffix in (("ack-target-cleared", ".smt2"), ("abort-race", ".smt2")):
        path = tmp_path / f"{scenario}{suffix}"
        path.write_text(committed(scenario, suffix))
        assert judge(path) == ("checks", [])


@pytest.mark.parametrize("name, code", [
    ("all sizes vllm-pull-abort-32255: the invariant runs commands, exits, then nests", 3),
    ("all sizes v0.5.22: the invariant runs commands, exits", 3),
    ("fixed: (exit) closing a definition", 3),
    ("all sizes: (check-sat-using smt) inside Init", 3),
    ("fixed: trans false", 1),
    ("all sizes: a guard changed", 1),
])
def test_certify_exits_as_the_suite_says(tmp_path, capsys, name, code):
    path = save(tmp_path, BY_NAME[name])
    assert main(["certify", str(path)]) == code
    out, err = capsys.readouterr()
    if code == 3:
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    else:
        assert out.startswith("FAILED ")
