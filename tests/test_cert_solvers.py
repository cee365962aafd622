"""A certificate's parsed terms, checked by fresh z3 and cvc5 processes: both discharge a good
one, both find the obligation a weak one breaks, both refuse an invariant that reaches beyond
the pre-state, and an answer counts only after its own obligation's marker: a solver that
crashes, errs, runs out of time or prints anything unexpected leaves the obligations not
checked."""

import sys

import pytest

from kvproof.checker.certs import solvers as cert_solvers
from kvproof.checker.certs.reader import read_certificate
from kvproof.checker.certs.solvers import fixed_script, invariant_scope_problems, read_answers, run_solvers, z3_command

from .certs import committed, tag_exploit, tampered

UNSAT = {"init_implies_inv": "unsat", "inv_is_inductive": "unsat", "inv_implies_safe": "unsat"}


def test_both_solvers_discharge_a_committed_certificate():
    z3_run, cvc5_run = run_solvers(read_certificate(committed()))
    assert (z3_run.solver, cvc5_run.solver) == ("z3", "cvc5")
    assert z3_run.answers == cvc5_run.answers == UNSAT
    assert z3_run.problems == cvc5_run.problems == []
    assert z3_run.how.startswith("z3 binary ") and cvc5_run.how.startswith("cvc5 ")


def test_the_script_scopes_each_definition():
    text = fixed_script(read_certificate(committed())).text
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
    marks = [i for i, ln in enumerate(lines) if ln.startswith("(echo ")]
    assert [lines[i] for i in marks] == [f'(echo "kvproof obligation {k}")' for k in range(3)]
    assert all(lines[i + 1] == "(check-sat)" for i in marks)  # each marker right before its check-sat


def test_an_invariant_over_the_action_tag_is_an_error_in_both_solvers(tmp_path):
    cert = read_certificate(tag_exploit(tmp_path))
    assert invariant_scope_problems(cert) == ["inv mentions action@pre: an invariant may mention the pre-state bits only"]
    z3_run, cvc5_run = run_solvers(cert)
    assert set(z3_run.answers.values()) == set(cvc5_run.answers.values()) == {"error"}
    assert "unknown constant action@pre" in z3_run.problems[1] and z3_run.problems[1].startswith("z3: (error")
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


NOT_CHECKED = "; 2 other obligations not checked either"


@pytest.mark.parametrize("script, problem", [
    ("import sys; sys.exit(3)", "cvc5: obligation init_implies_inv: not checked: exit status 3" + NOT_CHECKED),
    ("print('unsat'); print('unsat'); print('unsat')",  # answers without markers are bound to nothing
     "cvc5: obligation init_implies_inv: not checked: printed 'unsat' where its marker was due" + NOT_CHECKED),
    ("print('kvproof obligation 0'); print('unsat'); print('kvproof obligation 1'); print('unsat')",
     "cvc5: obligation inv_implies_safe: not checked: no answer" + NOT_CHECKED),
    ("print('\"kvproof obligation 0\"'); print('unsat'); print('kvproof obligation 2'); print('unsat')",
     "cvc5: obligation inv_is_inductive: not checked: printed 'kvproof obligation 2' where its marker was due"
     + NOT_CHECKED),
    ("import os, signal\nfor k in range(3): print(f'kvproof obligation {k}'); print('unsat')\n"
     "import sys; sys.stdout.flush(); os.kill(os.getpid(), signal.SIGSEGV)",  # every answer, then a crash
     "cvc5: obligation init_implies_inv: not checked: killed by SIGSEGV" + NOT_CHECKED),
    ("for k in range(3): print(f'kvproof obligation {k}'); print('unsat')\nprint('sat')",
     "cvc5: obligation init_implies_inv: not checked: printed 'sat' after the last answer" + NOT_CHECKED),
    ("print('kvproof obligation 0'); print('unsat'); print('(error \"boom\")')", 'cvc5: (error "boom")'),
    ("import time; time.sleep(30)", "cvc5: obligation init_implies_inv: not checked: no answer within the time limit"
     + NOT_CHECKED),
])
def test_a_solver_that_fails_leaves_every_obligation_not_checked(monkeypatch, script, problem):
    monkeypatch.setattr(cert_solvers, "cvc5_command", lambda: ([sys.executable, "-c", script], "fake cvc5"))
    z3_run, cvc5_run = run_solvers(read_certificate(committed()), seconds=2)
    assert cvc5_run.problems[0] == problem
    assert set(cvc5_run.answers.values()) <= {"not checked", "error"}  # none of its answers counts
    assert z3_run.problems == []


def test_answers_are_bound_to_markers_in_order():
    names = ["a", "b"]
    assert read_answers("z3", names, "kvproof obligation 0\nunsat\nkvproof obligation 1\nsat\n", 0) == (
        {"a": "unsat", "b": "sat"}, ["z3: b: sat (expected unsat)"])
    assert read_answers("cvc5", names, '"kvproof obligation 0"\nunsat\n"kvproof obligation 1"\nunsat\n', 0) == (
        {"a": "unsat", "b": "unsat"}, [])
    # a swapped order, a missing marker, a second answer: nothing counts
    for out in ("kvproof obligation 1\nunsat\nkvproof obligation 0\nunsat\n",
                "kvproof obligation 0\nunsat\nunsat\n",
                "kvproof obligation 0\nunsat\nunsat\nkvproof obligation 1\nunsat\n"):
        answers, problems = read_answers("z3", names, out, 0)
        assert answers == {"a": "not checked", "b": "not checked"} and "not checked" in problems[0]
