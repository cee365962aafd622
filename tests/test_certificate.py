"""Certificates: the writer reproduces the committed ones, the reader is strict, and a certificate
checks only when fresh z3 and cvc5 processes discharge its stored obligations and its stored
definitions are today's encoding of the catalogue scenario it names.  Every tampering that the
re-check of earlier versions accepted is rejected, naming what failed."""

import subprocess

import pytest
import z3

from kvproof.checker.certify import recheck
from kvproof.checker.symbolic.certificate import write_certificate
from kvproof.checker.certs.reader import CertificateError, read_certificate
from kvproof.checker.certs.sexpr import Command, Comment, SexprError, free_symbols, parse_script, render
from kvproof.checker.certs.solvers import z3_binary
from kvproof.checker.cli.commands import main
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.scenario import builtin

from .conftest import tier
from .certs import PROOFS, SMALL, TAG_CLAIM, committed, copy_as, fresh_copy, renamed, tag_exploit, tampered


def test_the_writer_reproduces_a_committed_certificate_byte_for_byte(tmp_path):
    cert = read_certificate(committed())
    sc = builtin(SMALL)
    ts = TransitionSystem(sc.build())
    decls = "\n".join(f"(declare-const {b} Bool)" for b in cert.pre)
    inv = z3.parse_smt2_string(f"{decls}\n(define-fun inv () Bool {cert.text_of('inv')})\n(assert inv)")[0]
    path = write_certificate(tmp_path, sc, ts, inv, cert.proves, method=cert.method)
    assert path.name == f"{SMALL}.smt2"
    assert path.read_bytes() == committed().read_bytes()


def test_a_committed_certificate_checks_in_both_solvers_and_against_the_catalogue(tmp_path):
    rc = recheck(fresh_copy(tmp_path))
    assert rc.ok, rc.problems
    assert rc.scenario == SMALL and len(rc.invariants) == 10
    assert rc.solvers == {s: {"init_implies_inv": "unsat", "inv_is_inductive": "unsat", "inv_implies_safe": "unsat"}
                          for s in ("z3", "cvc5")}
    assert rc.equivalence == {"init": "unsat", "typed": "unsat", "trans": "unsat", "safe": "unsat"}


def test_the_reader_takes_text_only():
    cert = read_certificate(committed())
    assert cert.name == SMALL and cert.method == "lemmas" and cert.problems == []
    assert len(cert.pre) == len(cert.post) == 64 and cert.pre[0].endswith("@pre|")
    assert set(cert.defs) == {"init", "typed", "typed_next", "trans", "safe", "inv", "inv_next"}
    assert isinstance(cert.scenario, dict) and cert.scenario["name"] == SMALL  # data, never built


# Each was accepted by the re-check of earlier versions (ok, exit 0); the line it fails with now.
REJECTED = {
    "trans false": "trans is not today's encoding of ack-target-cleared",
    "safe true": "safe is not today's encoding of ack-target-cleared",
    "assert false": "obligation inv_is_inductive is not the standard one: (assert false)",
    "empty proves": "'; proves:' names no invariant",
    "title changed": "the stored scenario differs from the catalogue's ack-target-cleared in title",
}


@pytest.mark.parametrize("how", sorted(REJECTED))
def test_a_tampered_certificate_is_rejected_naming_what_failed(tmp_path, capsys, how):
    assert main(["certify", str(tampered(tmp_path, how))]) == 1
    out, _ = capsys.readouterr()
    assert any(line.startswith("       ") and REJECTED[how] in line for line in out.splitlines()), out


def test_a_stray_command_is_bad_input_in_one_line(tmp_path, capsys):
    # z3 FILE would answer unsat three times with this line in front of the obligations
    lines = committed().read_text().splitlines()
    k = lines.index("; obligation: init_implies_inv")
    lines[k:k] = ["(assert false)", "(check-sat)"]
    path = copy_as(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(CertificateError, match=f"line {k + 1}: \\(assert false\\) before the obligations: "
                                               "kvproof writes no assert command there"):
        read_certificate(path)
    assert main(["certify", str(path)]) == 3
    assert capsys.readouterr().err.count("\n") == 1


def test_a_definition_that_closes_itself_and_smuggles_commands_is_bad_input(tmp_path, capsys):
    path = tampered(tmp_path, "smuggled command")
    with pytest.raises(CertificateError, match="kvproof writes no assert command there"):
        read_certificate(path)
    assert main(["certify", str(path)]) == 3


def test_an_empty_proves_line_fails_coverage_too(tmp_path):
    rc = recheck(tampered(tmp_path, "empty proves"))
    assert any(p.startswith("does not prove decode_reads_only_own_pages") and "expects verified" in p
               for p in rc.problems), rc.problems


def test_a_changed_engine_flag_is_named(tmp_path):
    rc = recheck(tampered(tmp_path, "engine changed"))
    assert "the stored scenario differs from the catalogue's ack-target-cleared in engine.timeout" in rc.problems


def test_one_scenario_s_certificate_under_another_s_name_is_rejected(tmp_path, capsys):
    assert main(["certify", str(renamed(tmp_path))]) == 1
    lines = capsys.readouterr()[0].splitlines()
    assert lines[0].startswith("FAILED ") and lines[0].endswith("(abort-race: 7 invariants)")
    assert lines[1] == ("       the file is named ack-target-cleared.smt2, but the certificate is of scenario "
                        "abort-race (expected abort-race.smt2)")
    assert lines[2] == "0 of 1 certificates check"


def test_an_invariant_over_the_action_tag_is_rejected_though_stock_z3_discharges_it(tmp_path):
    path = tag_exploit(tmp_path)
    assert builtin(SMALL).expect[TAG_CLAIM] == "violated"
    if z3_binary():  # the exploit is real: the file as it stands is three unsat answers
        out = subprocess.run([z3_binary(), str(path)], capture_output=True, text=True, timeout=120).stdout
        assert out.split() == ["unsat"] * 3
    assert main(["certify", str(path)]) == 1
    rc = recheck(path)
    assert "inv mentions action@pre: an invariant may mention the pre-state bits only" in rc.problems
    assert any(p.startswith("z3: (error") and "action@pre" in p for p in rc.problems), rc.problems
    assert any(p.startswith("cvc5: (error") and "action@pre" in p for p in rc.problems), rc.problems
    assert f"proves {TAG_CLAIM}, which {SMALL} expects violated" in rc.problems


def test_an_invariant_over_post_state_bits_is_rejected(tmp_path):
    rc = recheck(tampered(tmp_path, "post bit in inv"))
    assert any(p.startswith("inv mentions |") and "@post|" in p for p in rc.problems), rc.problems
    assert {rc.solvers["z3"]["init_implies_inv"], rc.solvers["cvc5"]["init_implies_inv"]} == {"error"}


def test_a_weakened_invariant_fails_the_obligation_it_breaks_in_both_solvers(tmp_path):
    rc = recheck(tampered(tmp_path, "weak invariant"))
    assert rc.solvers["z3"]["inv_implies_safe"] == rc.solvers["cvc5"]["inv_implies_safe"] == "sat"
    assert rc.solvers["z3"]["init_implies_inv"] == "unsat"
    assert "z3: inv_implies_safe: sat (expected unsat)" in rc.problems
    assert "cvc5: inv_implies_safe: sat (expected unsat)" in rc.problems


def test_a_claim_the_scenario_violates_is_not_certified(tmp_path):
    text = committed("abort-race").read_text()
    swapped = text.replace("; proves: no_source_free_while_read", "; proves: no_write_after_release no_source_free_while_read")
    assert swapped != text
    rc = recheck(copy_as(tmp_path, swapped, "abort-race"))
    assert rc.problems == ["proves no_write_after_release, which abort-race expects violated",
                           "safe is not today's encoding of abort-race (a state where they differ exists)"]


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe\x00binary", "not UTF-8 text"),
    (b"; kvproof certificate 1\n\x00\x01\n", "a binary file"),
    (b"(check-sat)\n", "not a kvproof certificate (its first line is not"),
    (b"; kvproof certificate 1\n; proves: a\n(set-logic ALL)\n", "no '; scenario:' line"),
    (b"; kvproof certificate 1\n; scenario: {nope\n; proves: a\n", "the scenario line is not JSON"),
    (b"; kvproof certificate 1\n; scenario: " + b"[" * 100000 + b"\n; proves: a\n", "the scenario line is not JSON"),
    (b'; kvproof certificate 1\n; scenario: {"title": "x"}\n; proves: a\n', "not a scenario with a name"),
])
def test_an_unreadable_certificate_is_one_line_with_exit_3(tmp_path, capsys, content, message):
    f = tmp_path / "x.smt2"
    f.write_bytes(content)
    with pytest.raises(CertificateError, match="x.smt2: ") as e:
        read_certificate(f)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert main(["certify", str(f)]) == 3
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and message in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize("drop, message", [
    ("(define-fun inv ", "a part is missing: no definition of inv"),
    ("(assert (and inv typed (not safe)))", "a part is missing: no obligation inv_implies_safe"),
])
def test_a_certificate_missing_a_part_is_unreadable(tmp_path, drop, message):
    text = committed().read_text()
    lines = text.splitlines()
    if drop.startswith("(assert"):
        k = lines.index(drop)
        del lines[k - 2:k + 3]  # the whole obligation block
    else:
        lines = [ln for ln in lines if not ln.startswith(drop)]
    with pytest.raises(CertificateError, match=message):
        read_certificate(copy_as(tmp_path, "\n".join(lines) + "\n"))


def test_certify_exits_1_naming_each_failure_on_its_own_line(tmp_path, capsys):
    code = main(["certify", str(tampered(tmp_path, "trans false")), str(fresh_copy(tmp_path))])
    out, _ = capsys.readouterr()
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("FAILED ") and lines[0].endswith("(ack-target-cleared: 10 invariants)")
    assert lines[1] == "       trans is not today's encoding of ack-target-cleared (a state where they differ exists)"
    assert lines[2].startswith("ok ")
    assert lines[3] == "1 of 2 certificates check"
    assert lines[4].startswith("  solvers: z3 ") and "cvc5 " in lines[4]


def test_certify_reports_an_unreadable_one_and_still_checks_the_rest(tmp_path, capsys):
    bad = tmp_path / "bad.smt2"
    bad.write_bytes(b"\x80")
    code = main(["certify", str(bad), str(fresh_copy(tmp_path))])
    out, err = capsys.readouterr()
    assert code == 3 and err == "kvproof: error: 1 of 2 files cannot be read as kvproof certificates (each is named above)\n"
    assert "UNREADABLE " in out and "bad.smt2" in out
    assert "1 of 1 certificates check, 1 unreadable" in out


def test_the_parser_reads_terms_and_refuses_the_rest():
    items = parse_script("; c\n(define-fun inv () Bool (and |a@pre| (not |b)@pre|)))\n(check-sat)\n")
    assert items == [Comment("c", 1), Command(("define-fun", "inv", (), "Bool", ("and", "|a@pre|", ("not", "|b)@pre|"))), 2),
                     Command(("check-sat",), 3)]
    assert render(items[1].term) == "(define-fun inv () Bool (and |a@pre| (not |b)@pre|)))"
    for text, message in [
        ("(assert true) (assert false", "line 1, column 15: an unbalanced '('"),
        ("(assert true))", "line 1, column 14: an unbalanced ')'"),
        ("(assert (and a ; b\n c))", "a comment inside a command"),
        ("(check-sat) ; after", "a comment after a command on the same line"),
        ('(echo "x")', "a string literal"),
        ("(assert (! a :named n))", "a keyword"),
        ("(assert (= x #x1f))", "a hexadecimal or binary literal"),
        ("(assert (= x 1.5))", "the token '1.5'"),
        ("(assert |a\nb|)", "an unterminated or multi-line |quoted symbol|"),
        ("true", "'true' outside any command"),
        ("(" * 257 + ")" * 257, "line 1, column 257: a term nested more than 256 deep"),
        ("(" * 300000 + ")" * 300000, "a term nested more than 256 deep"),
    ]:
        with pytest.raises(SexprError, match=message.replace("(", "\\(").replace(")", "\\)").replace("|", "\\|")):
            parse_script(text)
    with pytest.raises(SexprError, match="more than 10 symbols and lists"):
        parse_script("(and " + "a " * 10 + ")", max_nodes=10)
    assert len(parse_script("(" * 256 + ")" * 256)) == 1


def test_free_symbols_leave_out_what_binders_bind():
    term = parse_script("(assert (forall ((r Req)) (let ((a!1 (f r)) (b x)) (and a!1 b (g r y)))))")[0].term[1]
    assert free_symbols(term) == {"forall", "let", "f", "x", "and", "g", "y"} - {"forall", "let"} | {"and"}


_FIXED_SIZE = sorted(p for p in PROOFS.glob("*.smt2") if not p.name.endswith(".allsizes.smt2"))


# every committed certificate with --thorough (and `kvproof certify --complete`, which .ci/run
# runs); every 6th by name in the test command's tier. An all-sizes certificate: tests/test_allsizes.py
@pytest.mark.slow
@pytest.mark.parametrize("path", _FIXED_SIZE[::tier(6, 1)], ids=lambda p: p.name)
def test_committed_certificates_recheck(path):
    rc = recheck(path)
    assert rc.ok, rc.problems


def test_certify_complete_names_each_scenario_of_the_catalogue_without_a_certificate(tmp_path, capsys):
    code = main(["certify", "--complete", str(fresh_copy(tmp_path))])  # one certificate: the rest missing
    out, _ = capsys.readouterr()
    missing = [ln.split()[1].rstrip(":") for ln in out.splitlines() if ln.startswith("MISSING ")]
    from kvproof.model.scenario import builtin_names

    assert code == 1 and len(missing) == len(builtin_names()) - 1 and "ack-target-cleared" not in missing
    assert f"1 of 1 certificates check, {len(missing)} scenarios of the catalogue without one" in out
    assert main(["certify", str(fresh_copy(tmp_path))]) == 0  # without --complete the one file is all
