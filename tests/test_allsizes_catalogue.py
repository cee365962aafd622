"""The README's "For every size" table is what the committed all-sizes certificates prove
(checker/allsizes/catalogue.py, read from the files and the lift, never typed by hand); every
committed certificate is, term for term, its scenario's lifted model (the cheap half of
``certify``; CI's ``certify --complete`` re-solves them with z3 and cvc5)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kvproof.checker.allsizes.catalogue import _construct, rows, table, unliftable, unliftable_table
from kvproof.checker.allsizes.prove import recheck_all_sizes
from kvproof.model.scenario import builtins

ROOT = Path(__file__).resolve().parent.parent
PROOFS = ROOT / "traces" / "proofs"
START, END = "<!-- all-sizes table: generated from traces/proofs -->", "<!-- end of the all-sizes table -->"
CERTIFICATES = sorted(p.name for p in PROOFS.glob("*.allsizes.smt2"))


def readme_table(start: str = START, end: str = END) -> str:
    """The table between the README's markers."""
    text = (ROOT / "README.md").read_text()
    assert start in text and end in text, "the README has no table markers"
    return text.split(start, 1)[1].split(end, 1)[0].strip() + "\n"


def test_the_readme_table_is_the_committed_certificates():
    assert readme_table() == table(rows(PROOFS))


def test_the_readmes_lift_refusals_are_the_lifts():
    """The README's second table is what the lift refuses in today's catalogue, by construct;
    no scenario with a committed certificate is among them."""
    blocked = unliftable(builtins())
    assert readme_table("<!-- lift refusals: generated from the catalogue -->",
                        "<!-- end of the lift refusals -->") == unliftable_table(blocked)
    proved = {r.scenario for r in rows(PROOFS)}
    assert blocked and not proved & {n for names in blocked.values() for n in names}


@pytest.mark.parametrize("name", CERTIFICATES)
def test_each_committed_certificate_is_its_scenarios_lifted_model(name):
    r = recheck_all_sizes(PROOFS / name, solve=False)
    assert r.ok, r.problems
    assert name == f"{r.scenario}.allsizes.smt2" and r.proves


def test_a_certificate_added_or_a_claim_dropped_changes_the_table(tmp_path):
    """The table follows the files: a copy of the proofs with one claim dropped from a
    certificate's ``; proves:`` line shows one claim fewer for that scenario."""
    shutil.copytree(PROOFS, tmp_path / "proofs")
    cert = tmp_path / "proofs" / "vllm-pull-abort-32255.allsizes.smt2"
    text = cert.read_text()
    cert.write_text(text.replace(" pages_conserved\n", "\n", 1))
    before = {r.scenario: r for r in rows(PROOFS)}
    after = {r.scenario: r for r in rows(tmp_path / "proofs")}
    assert len(after["vllm-pull-abort-32255"].proved) == len(before["vllm-pull-abort-32255"].proved) - 1
    # a claim the scenario asks for, lifted but not proved, is shown inconclusive, not left out
    assert before["vllm-pull-abort-32255"].inconclusive == ()
    assert after["vllm-pull-abort-32255"].inconclusive == ("pages_conserved",)
    assert "`pages_conserved`: inconclusive" in table([after["vllm-pull-abort-32255"]])
    assert table(list(after.values())) != table(list(before.values()))
    (tmp_path / "proofs" / "v0.5.22.allsizes.smt2").unlink()
    assert "`v0.5.22`" not in table(rows(tmp_path / "proofs"))


def test_a_refusal_is_shown_by_its_construct_not_its_moving_line():
    assert _construct("spec/sglang/claims.py:96: a sorted element (request req!1) used as a set member or dict "
                      "key") == "a sorted element used as a set member or dict key"
    assert _construct("spec/sglang/claims.py:150: owner[...]: the fixed index 0 into the sorted domain page "
                      "(iterate the domain object, not range(...))") == \
        "owner[...]: the fixed index 0 into the sorted domain page"
    assert not re.search(r"\.py:\d", table(rows(PROOFS)))


UNSAFE = [sc.name for sc in builtins() if sc.family_protocol().all_sizes_claims
          and any(sc.expect.get(c) == "violated" for c in sc.family_protocol().all_sizes_claims)]


def test_every_scenario_unsafe_at_its_own_size_is_refused_for_every_size():
    """Each scenario of the catalogue that breaks an all-sizes claim at its own size (a
    before-the-fix scenario of a hazard pair) is refused by ``prove --all-sizes``: exit 1, each
    such claim *violated* with its small counterexample, none *proved*; lifted or not."""
    from kvproof.checker.allsizes.prove import prove_all_sizes
    from kvproof.model.scenario import builtin

    assert len(UNSAFE) >= 40
    for name in UNSAFE:
        sc = builtin(name)
        r = prove_all_sizes(sc)
        broken = {c for c in sc.family_protocol().all_sizes_claims if sc.expect.get(c) == "violated"}
        got = {c for c, v in r.verdicts.items() if v == "violated"}
        assert r.exit_code == 1 and got == broken & set(r.verdicts), (name, r.verdicts, r.reason)
        assert "proved" not in r.verdicts.values() and all(r.traces[c].trace is not None for c in got), name


def test_a_certificate_of_a_fixed_configuration_says_so_in_its_row(tmp_path):
    """A certificate whose lift fixed a per-element condition (a ``; fixed:`` line of
    :data:`~kvproof.checker.allsizes.sorted_allsizes.PINNED`) is shown with that restriction;
    one without the line is not (the row follows the file, not the scenario)."""
    from kvproof.checker.allsizes.catalogue import CatalogueRow
    from kvproof.checker.allsizes.sorted_allsizes import pins_from, PINNED

    free = CatalogueRow("s", ("exclusive_ownership",), (), "s.allsizes.smt2")
    pinned = CatalogueRow("s", ("exclusive_ownership",), (), "s.allsizes.smt2", (("over_long", False),))
    assert "only where" not in table([free])
    assert "only where every element has `over_long` false" in table([pinned])
    assert pins_from([PINNED + "over_long false, other true"]) == {"over_long": False, "other": True}
    assert pins_from(["configuration per element, any value: over_long(request)"]) == {}
