"""The stored text of a certificate, checked by fresh z3 and cvc5 processes: both discharge a
good one, both find the obligation a weak one breaks, both refuse an invariant that reaches
beyond the pre-state, and a solver that crashes, errs or runs out of time is a failure."""

import sys

import pytest

from kvproof.checker import cert_solvers
from kvproof.checker.cert_solvers import invariant_scope_problems, run_solvers, solver_script, z3_command
from kvproof.checker.certificate import read_certificate

from .certs import committed, tag_exploit, tampered

UNSAT = {"init_implies_inv": "unsat", "inv_is_inductive": "unsat", "inv_implies_safe": "unsat"}


def test_both_solvers_discharge_a_committed_certificate():
    z3_run, cvc5_run = run_solvers(read_certificate(committed()))
    assert (z3_run.solver, cvc5_run.solver) == ("z3", "cvc5")
    assert z3_run.answers == cvc5_run.answers == UNSAT
    assert z3_run.problems == cvc5_run.problems == []
    assert z3_run.how.startswith("z3 binary ") and cvc5_run.how.startswith("cvc5 ")


def test_the_script_scopes_each_definition():
    text = solver_script(read_certificate(committed()))
    lines = text.splitlines()
    assert lines[0] == "(set-logic QF_LIA)"
    assert lines[1].startswith("(define-fun typed ((|") and lines[2].startswith("(define-fun inv ((|")
    first_decl = next(i for i, ln in enumerate(lines) if ln.startswith("(declare-const"))
    assert first_decl == 3  # inv and typed see nothing but their parameters
    tag = lines.index("(declare-const action@pre Int)")
    first_post = next(i for i, ln in enumerate(lines) if ln.startswith("(declare-const") and "@post|" in ln)
    init = next(i for i, ln in enumerate(lines) if ln.startswith("(define-fun init "))
    safe = next(i for i, ln in enumerate(lines) if ln.startswith("(define-fun safe "))
    trans = next(i for i, ln in enumerate(lines) if ln.startswith("(define-fun trans "))
    assert init < first_post and safe < first_post and trans > tag  # init, safe: pre-state only
    assert lines.count("(check-sat)") == 3 and "inv_next" not in text and "typed_next" not in text


def test_an_invariant_over_the_action_tag_is_an_error_in_both_solvers(tmp_path):
    cert = read_certificate(tag_exploit(tmp_path))
    assert invariant_scope_problems(cert) == ["inv mentions action@pre: an invariant may mention the pre-state bits only"]
    z3_run, cvc5_run = run_solvers(cert)
    assert set(z3_run.answers.values()) == set(cvc5_run.answers.values()) == {"error"}
    assert "unknown constant action@pre" in z3_run.problems[1]
    assert "action@pre" in cvc5_run.problems[0] and cvc5_run.problems[0].startswith("cvc5: (error")


def test_a_weak_invariant_is_sat_in_both_solvers(tmp_path):
    z3_run, cvc5_run = run_solvers(read_certificate(tampered(tmp_path, "weak invariant")))
    for run in (z3_run, cvc5_run):
        assert run.answers["inv_implies_safe"] == "sat"
        assert run.answers["init_implies_inv"] == run.answers["inv_is_inductive"] == "unsat"
        assert run.problems == [f"{run.solver}: inv_implies_safe: sat (expected unsat)"]


def test_without_a_z3_binary_z3_s_interpreter_runs_in_its_own_process(monkeypatch):
    monkeypatch.setattr(cert_solvers, "z3_binary", lambda: None)
    argv, how = z3_command()
    assert argv[:3] == [sys.executable, "-I", "-c"] and "SMT-LIB interpreter, own process" in how
    z3_run, _ = run_solvers(read_certificate(committed()))
    assert z3_run.answers == UNSAT and z3_run.problems == []


@pytest.mark.parametrize("script, problem", [
    ("import sys; sys.exit(3)", "cvc5: exit status 3, 0 answers for 3 obligations"),
    ("print('unsat'); print('unsat')", "cvc5: exit status 0, 2 answers for 3 obligations"),
    ("print('unsat'); print('(error \"boom\")')", 'cvc5: (error "boom")'),
    ("import time; time.sleep(30)", "cvc5: no answer within the time limit"),
])
def test_a_solver_that_fails_is_a_failure(monkeypatch, script, problem):
    monkeypatch.setattr(cert_solvers, "cvc5_command", lambda: ([sys.executable, "-c", script], "fake cvc5"))
    _, cvc5_run = run_solvers(read_certificate(committed()), seconds=1)
    assert cvc5_run.problems == [problem]
