"""The all-sizes model is the one lifted from the spec (checker/allsizes/prove.py's
``all_sizes_model``): the committed certificates are, term for term, the lifted model's; ``certify``
compares with it (a changed guard fails, a file naming another scenario fails, the solvers are
not run on a file that is not the model's); ``--invariant-from`` proves nothing it cannot check;
``prove --all-sizes --link`` rests on a lifted certificate and the link at the scenario's size;
and the model does not depend on what else the process lifted before it (the enumeration sorts'
names are a function of the domain)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvproof.checker.allsizes.prove import (all_sizes_model, certificate_header, model_certificate, model_problems,
                                            prove_by_link, recheck_all_sizes)
from kvproof.checker.allsizes.quantified import candidates_from, certificate_from, certificate_text
from kvproof.checker.certs.reader import ALL_SIZES, read_certificate
from kvproof.model.scenario import builtin

from .certs import invariant_of

PROOFS = Path(__file__).resolve().parent.parent / "traces" / "proofs"
SGLANG, VLLM = "v0.5.22", "vllm-pull-abort-32255"
SGLANG_CLAIMS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
                 "no_source_free_while_read", "exclusive_ownership")
VLLM_CLAIMS = SGLANG_CLAIMS + ("pages_conserved",)


def stored(name: str) -> Path:
    """The committed all-sizes certificate of scenario ``name``."""
    return PROOFS / f"{name}.allsizes.smt2"


def hook_of(name: str):
    """The lifted all-sizes model of scenario ``name``."""
    hook, why = all_sizes_model(builtin(name).build())
    assert hook is not None, why
    return hook


def changed_guard(text: str) -> str:
    """vLLM's certificate with ``decode_abort``'s guard changed (a request reading may no longer
    be aborted): still a file the solvers may accept, not the model's."""
    lines = text.splitlines()
    k = lines.index("; obligation step decode_abort")
    guard = next(i for i in range(k, len(lines))
                 if lines[i].startswith("(assert (and (distinct decode_abort!req") and "d_phase_reading" in lines[i])
    lines[guard] = lines[guard].replace("d_phase_reading", "d_phase_held", 1)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name,claims,conjuncts,read_as_claims", [(SGLANG, SGLANG_CLAIMS, 98, 5), (VLLM, VLLM_CLAIMS, 80, 5)])
def test_the_stored_certificate_is_the_lifted_models(name, claims, conjuncts, read_as_claims):
    """Each committed all-sizes certificate is, line for line, what the model lifted from its
    scenario's spec gives for the invariant it states (the cheap half of ``certify``), it
    states every target the lift has, and reading its invariant back and writing it again gives
    the same file, byte for byte."""
    text = stored(name).read_text()
    inv, proves = invariant_of(text)
    hook = hook_of(name)
    assert hook.targets == claims and sorted(proves) == sorted(claims)
    header = certificate_header(name, proves, hook)
    assert certificate_from(hook.system, inv, proves, header) == text
    cands = candidates_from(hook.system, inv)
    assert (len(cands), sum(c.claim for c in cands)) == (conjuncts, read_as_claims)
    if read_as_claims == len(claims):
        assert certificate_text(hook.system, cands, header) == text
    else:  # known defect: vLLM's pages_conserved (a conjunction) is read back as its parts, not as the claim
        assert "pages_conserved" not in {c.name for c in cands if c.claim}
    r = recheck_all_sizes(stored(name), solve=False)
    assert r.ok and r.scenario == name, r.problems
    # its abstraction lines name the spec's functions, never a line number an unrelated edit moves
    abstractions = [line for line in text.splitlines() if line.startswith("; abstraction: ")]
    assert abstractions and not [line for line in abstractions if re.search(r"\.py:\d", line)], abstractions
    assert any(re.search(r"\[spec/\w+/protocol\.py:\w+\.\w+\]$", line) for line in abstractions), abstractions


def test_the_lifted_model_does_not_depend_on_what_was_lifted_before():
    """SGLang and vLLM both have a ``p_phase`` domain, with other labels: lifted one after the
    other in either order, each certificate is still its model's (the enumeration sort is named
    after its labels, not after the order in which the process met them)."""
    for first, second in ((VLLM, SGLANG), (SGLANG, VLLM), (VLLM, SGLANG)):
        hook_of(first)
        cert = read_certificate(stored(second), ALL_SIZES)
        assert model_problems(cert, hook_of(second), second) == []


def test_certify_compares_with_the_lifted_model_and_runs_no_solver_on_a_foreign_file(tmp_path, monkeypatch, capsys):
    """``certify --all-sizes-model-only`` passes the committed certificate and runs no solver; a
    changed guard fails as not the lifted model's (exit 1), and then no solver is run even
    without the flag; a file that is not a certificate is bad input (exit 3)."""
    from kvproof.checker.allsizes import prove as allsizes
    from kvproof.checker.cli.commands import main

    def no_solver(*a, **k):
        raise AssertionError("a solver ran")
    monkeypatch.setattr(allsizes, "run_solvers", no_solver)
    good = tmp_path / f"{VLLM}.allsizes.smt2"
    good.write_text(stored(VLLM).read_text())
    assert main(["certify", str(good), "--all-sizes-model-only"]) == 0
    out = capsys.readouterr().out
    assert "compared with the lifted model only, not re-solved" in out
    changed = tmp_path / "changed" / f"{VLLM}.allsizes.smt2"
    changed.parent.mkdir()
    changed.write_text(changed_guard(good.read_text()))
    assert main(["certify", str(changed), "--all-sizes-model-only"]) == 1
    assert f"differs from the lifted model of {VLLM}" in capsys.readouterr().out
    r = recheck_all_sizes(changed)
    assert any("obligation step decode_abort" in p for p in r.problems)
    assert r.problems[-1] == "z3 and cvc5 not run: the file is not the lifted model's certificate"
    not_cert = tmp_path / "x.allsizes.smt2"
    not_cert.write_text("(check-sat)\n")
    assert main(["certify", str(not_cert)]) == 3


def test_certify_refuses_an_invariant_the_claims_do_not_follow_from(tmp_path):
    """The lifted model's own text with the invariant ``true`` and one claim: the file is the
    model's, and the solvers refuse the claim's obligation."""
    hook = hook_of(VLLM)
    weak = tmp_path / f"{VLLM}.allsizes.smt2"
    weak.write_text(certificate_from(hook.system, "true", ["no_write_after_release"],
                                     certificate_header(VLLM, ["no_write_after_release"], hook)))
    r = recheck_all_sizes(weak, seconds=120)
    assert not r.ok and any("claim no_write_after_release" in p for p in r.problems), r.problems


def test_prove_invariant_from_refuses_bad_input_and_proves_nothing_it_cannot_check(tmp_path, capsys):
    """``prove --all-sizes --invariant-from FILE``: a file that is not a certificate is bad input
    (exit 3); a certificate of the lifted model whose invariant is a claim alone (not inductive)
    proves nothing (exit 2) and writes no certificate."""
    from kvproof.checker.cli.commands import main
    not_cert = tmp_path / "x.smt2"
    not_cert.write_text("(check-sat)\n")
    out = tmp_path / "out"
    assert main(["prove", "--all-sizes", VLLM, "--invariant-from", str(not_cert), "--no-traces",
                 "--certificates", str(out)]) == 3
    capsys.readouterr()
    hook = hook_of(VLLM)
    claim = next(c for c in hook.system.claims() if c.name == "no_write_after_release")
    weak = tmp_path / "weak.smt2"
    weak.write_text(certificate_text(hook.system, [claim], certificate_header(VLLM, [claim.name], hook)))
    assert main(["prove", "--all-sizes", VLLM, "--invariant-from", str(weak), "--no-traces",
                 "--certificates", str(out), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert "minimised, did not check" in doc["reason"]
    assert set(doc["verdicts"].values()) == {"inconclusive"} and doc["minimised"]["found"] == 1
    assert not out.exists()


@pytest.mark.thorough  # about 17 s of CPU
def test_prove_link_rests_on_the_lifted_certificate(capsys):
    """``prove --all-sizes vllm-pull-abort-32255 --link``: the committed certificate is the lifted
    model's, its obligations are re-solved, the link of the lifted model is proved at the
    scenario's size, so the six claims hold there with no enumeration (exit 0)."""
    from kvproof.checker.cli.commands import main
    assert main(["prove", "--all-sizes", VLLM, "--link"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "proved link Init" in out and out.count("proved link claim ") == 6
    assert "the link proved now (" in out and "; no hypothesis)" in out
    assert f"ok certificate traces/proofs/{VLLM}.allsizes.smt2: the parametric model's, line for line" in out
    for name in VLLM_CLAIMS:
        assert f"holds {name} at " in out


def test_prove_link_refuses_a_foreign_or_missing_certificate_and_a_failing_one(tmp_path, capsys):
    """A certificate that is not the lifted model's (a guard changed), or none, is inconclusive
    (exit 2, nothing said to hold); one that is the model's but whose claim does not follow from
    its invariant is refused by the solvers before the link is run; bad input is exit 3."""
    from kvproof.checker.cli.commands import main
    assert main(["prove", "--all-sizes", VLLM, "--link", "--certificate", str(tmp_path / "none.smt2")]) == 3
    changed = tmp_path / f"{VLLM}.allsizes.smt2"
    changed.write_text(changed_guard(stored(VLLM).read_text()))
    hook = hook_of(VLLM)
    assert f"differs from the lifted model of {VLLM}" in model_certificate(hook, changed)
    capsys.readouterr()
    assert main(["prove", "--all-sizes", VLLM, "--link", "--certificate", str(changed)]) == 2
    assert "INCONCLUSIVE: no all-sizes certificate of this model" in capsys.readouterr().out
    assert main(["prove", "--all-sizes", VLLM, "--link", "--certificates", str(tmp_path / "empty")]) == 2
    weak = tmp_path / "weak" / f"{VLLM}.allsizes.smt2"
    weak.parent.mkdir()
    weak.write_text(certificate_from(hook.system, "true", ["no_write_after_release"],
                                     certificate_header(VLLM, ["no_write_after_release"], hook)))
    assert model_certificate(hook, weak) == ("true", ["no_write_after_release"])
    r = prove_by_link(builtin(VLLM), weak, solve=True, seconds=120)
    assert r.exit_code == 2 and r.link is None
    assert "claim no_write_after_release" in r.reason and set(r.verdicts.values()) == {"inconclusive"}


def test_a_certificates_abstraction_lines_do_not_depend_on_the_working_directory(monkeypatch, tmp_path):
    """The abstraction lines name the spec's functions relative to the project (where ``spec/``
    lives), so a proof run from another directory writes the certificate one run from the
    checkout writes (the committed one's lines); naming them relative to the
    working directory (the mutant) gives an absolute path and a certificate that fails."""
    import os

    import kvproof.model.expr as expr

    here = hook_of(SGLANG).abstractions
    monkeypatch.chdir(tmp_path)
    assert hook_of(SGLANG).abstractions == here
    assert any("[spec/sglang/protocol.py:" in line for line in here)
    assert all(f"; abstraction: {line}" in stored(SGLANG).read_text() for line in here)
    monkeypatch.setattr(expr, "_project_root", os.getcwd)  # the mutant: relative to the working directory
    moved = hook_of(SGLANG).abstractions
    assert moved != here and any(os.path.isabs(line.split("[", 1)[1].split(":", 1)[0]) for line in moved)
