"""Certificates: written atomically, re-checked by fresh solvers, stale or tampered ones fail."""

from pathlib import Path

import pytest

from kvproof.checker.certificate import CertificateError, recheck, write_certificate
from kvproof.checker.horn import spacer_prove
from kvproof.checker.transition import TransitionSystem
from kvproof.spec.scenario import builtin

PROOFS = Path(__file__).resolve().parent.parent / "traces" / "proofs"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    sc = builtin("abort-race")
    spec = sc.build()
    ts = TransitionSystem(spec)
    names = ["exclusive_ownership"]
    out = spacer_prove(ts, names, 120)
    assert out.status == "proved"
    return write_certificate(tmp_path_factory.mktemp("certs"), sc, ts, out.invariant, names), sc


def test_a_fresh_certificate_rechecks(certificate):
    path, _ = certificate
    rc = recheck(path)
    assert rc.ok and rc.invariants == ["exclusive_ownership"]
    assert set(rc.stored.values()) == {"unsat"} and set(rc.against_spec.values()) == {"unsat"}
    text = path.read_text()
    assert text.splitlines().count("(check-sat)") == 3 and "(define-fun inv " in text


def test_a_weakened_invariant_fails_the_obligation_it_breaks(certificate, tmp_path):
    path, _ = certificate
    lines = path.read_text().splitlines()
    bad = [("(define-fun inv () Bool true)" if ln.startswith("(define-fun inv ") else
            "(define-fun inv_next () Bool true)" if ln.startswith("(define-fun inv_next ") else ln) for ln in lines]
    tampered = tmp_path / "weak.smt2"
    tampered.write_text("\n".join(bad) + "\n")
    rc = recheck(tampered)
    assert not rc.ok
    assert rc.stored["inv_implies_safe"] == "sat" and rc.against_spec["inv_implies_safe"] == "sat"
    assert rc.stored["init_implies_inv"] == "unsat"


def test_the_invariant_is_checked_against_today_s_spec_not_only_the_file(certificate, tmp_path):
    path, _ = certificate
    text = path.read_text()
    # claim the same invariant proves a claim the spec violates (the abort race)
    swapped = text.replace("; proves: exclusive_ownership", "; proves: no_write_after_release")
    assert swapped != text
    stale = tmp_path / "stale.smt2"
    stale.write_text(swapped)
    rc = recheck(stale)
    assert all(v == "unsat" for v in rc.stored.values())  # the file is consistent with itself...
    assert not rc.ok and rc.against_spec["inv_implies_safe"] == "sat"  # ...not with the spec


def test_not_a_certificate(tmp_path):
    f = tmp_path / "x.smt2"
    f.write_text("(check-sat)\n")
    with pytest.raises(CertificateError, match="not a kvproof certificate"):
        recheck(f)


@pytest.mark.parametrize("path", sorted(PROOFS.glob("*.smt2")), ids=lambda p: p.name)
def test_every_committed_certificate_rechecks(path):
    rc = recheck(path)
    assert rc.ok, (rc.stored, rc.against_spec)
