"""The link between the spec and the parametric model, proved at one size (checker/allsizes/link.py,
spec/sglang/allsizes.py's ``link_map``), and ``prove --all-sizes SCENARIO --link``: proved on
v0.5.22's own size; mutants of the spec and of the model (a weakened guard, a changed update, a
changed claim or Init) refuted with the offending action named."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import z3

from kvproof.checker.allsizes.prove import model_certificate, prove_by_link
from kvproof.checker.allsizes.link import check_link, ground
from kvproof.checker.allsizes.quantified import Candidate
from kvproof.model.framework import action
from kvproof.model.scenario import builtin, load_scenario
from kvproof.spec.sglang.allsizes import TARGET_CLAIMS, SglangAllSizes, link_map
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import POLL_NONE, P_SENDING, WR_FLIGHT, WR_NOT_ISSUED, PdProtocol

ROOT = Path(__file__).resolve().parent.parent
STORED = ROOT / "traces" / "proofs" / "v0.5.22.allsizes.smt2"
LARGE = ROOT / "examples" / "allsizes" / "v0.5.22-5req-8pages.toml"


def small(cls=PdProtocol, requests=(("A", 1), ("B", 2)), decode_pages=2, prefill_pages=2):
    """v0.5.22's engine on a small instance (a one-page and a two-page request of two tenants)."""
    cfg = builtin("v0.5.22").config
    return cls(dataclasses.replace(cfg, requests=tuple(Request(t, p) for t, p in requests),
                                   decode_pages=decode_pages, prefill_pages=prefill_pages, context_limit=2))


def verdicts(report):
    return {(r.kind, r.name): r.verdict for r in report.results}


def test_without_hypotheses_every_step_but_a_write_into_no_page_is_a_model_step():
    """With no hypothesis, Init, every claim and every spec action but one are proved for every
    typed state; ``kv_write_lands`` is refuted: from an unreachable typed state whose write
    flies to no page, the spec drops the write (the sentinel page stays unwritten) while the
    model writes ``content(pnone)``.  The reported counterexample names the instance and the
    slot where the successors differ."""
    spec = small()
    rep = check_link(spec, link_map(spec))
    v = verdicts(rep)
    assert v.pop(("step", "kv_write_lands")) == "refuted"
    assert set(v.values()) == {"proved"}
    assert {n for k, n in v if k == "claim"} == set(TARGET_CLAIMS)
    assert len([k for k, _ in v if k == "step"]) == 17
    bad = next(r for r in rep.results if r.name == "kv_write_lands")
    assert bad.offending.startswith("kv_write_lands(req=")
    assert any("content" in line and "model" in line for line in bad.detail), bad.detail


class WeakGuard(PdProtocol):
    """A mutant: a write is issued even after the ABORT reached prefill (the ``p_abort`` guard
    of ``kv_transfer_write`` dropped)."""

    @action("transfer", "req", "stream", "chunk")
    def kv_transfer_write(self, s, n, r, w, c):
        """``kv_transfer_write`` without ``p_abort[r, pr] == PAB_NONE``."""
        pr = self.k.rank_of_stream(w)
        s.require(c < self.send_len(r))
        s.require(s.p_phase[r] == P_SENDING)
        s.require(s.poll[r, pr] == POLL_NONE)
        s.require(s.wr[r, w, c] == WR_NOT_ISSUED)
        if c > 0:
            s.require(s.wr[r, w, c - 1] != WR_NOT_ISSUED)
        n.wr[r, w, c] = WR_FLIGHT


def test_a_spec_action_with_a_weakened_guard_is_refuted():
    """The weakened ``kv_transfer_write`` takes steps the model does not: refuted, the instance
    named; the model action is shown disabled there."""
    spec = small(WeakGuard)
    rep = check_link(spec, link_map(spec), claims=False, only=["kv_transfer_write", "prefill_forward"])
    v = verdicts(rep)
    assert v[("step", "kv_transfer_write")] == "refuted" and v[("step", "prefill_forward")] == "proved"
    bad = next(r for r in rep.results if r.name == "kv_transfer_write")
    assert bad.offending.startswith("kv_transfer_write(req=")
    assert any("disabled" in line for line in bad.detail), bad.detail


def mutated(change: str) -> SglangAllSizes:
    """v0.5.22's parametric model with one action changed: ``meta`` (decode_send_metadata no
    longer publishes), ``src`` (prefill_drain frees no source page)."""
    m = SglangAllSizes(2, 1)
    name, drop = {"meta": ("decode_send_metadata", "meta"), "src": ("prefill_drain", "src_owner")}[change]
    orig = next(a for a in m.actions if a.name == name)

    def step(st, params, choices):
        out = orig.step(st, params, choices)
        out.updates.pop(drop)
        return out
    m.actions = tuple(dataclasses.replace(a, step=step) if a is orig else a for a in m.actions)
    return m


@pytest.mark.parametrize("change,name", [("meta", "decode_send_metadata"), ("src", "prefill_drain")])
def test_a_changed_model_update_is_refuted(change, name):
    """A model action that no longer writes what the spec's writes: that action refuted, the
    others of the query proved."""
    spec = small()
    rep = check_link(spec, link_map(spec, system=mutated(change)), claims=False, only=[name, "decode_abort"])
    v = verdicts(rep)
    assert v == {("init", "Init"): "proved", ("step", name): "refuted", ("step", "decode_abort"): "proved"}
    bad = next(r for r in rep.results if r.name == name)
    assert any("successor differs" in line for line in bad.detail), bad.detail


def test_a_changed_claim_and_a_changed_init_are_refuted():
    """A model claim that says less than the spec's (exclusive ownership without the live
    phases), and a model Init whose hold timers start at 1, are refuted."""

    class Mutant(SglangAllSizes):
        def claims(self):
            out = super().claims()
            c_ = self.code
            wrong = Candidate("exclusive_ownership", (("r", "Req"), ("c", "Chunk")), lambda st, r, c: z3.Implies(
                z3.And(r != st.rnone(), st.ch(r, c), st.d_phase(r) == c_("DPhase", "held")),
                st.owner(st.dest(r, c)) == r), True)
            return [wrong if c.name == "exclusive_ownership" else c for c in out]

        def init(self, st):  # every hold timer starts at 1 (Init read through a shifted hold)
            h0, h1 = self.E["Hold"][0], self.E["Hold"][1]
            return super().init(st.with_updates({"hold": lambda r: z3.If(st.hold(r) == h1, h0, h1)}))
    spec = small()
    rep = check_link(spec, link_map(spec, system=Mutant(2, 1)), steps=False)
    v = verdicts(rep)
    assert v[("claim", "exclusive_ownership")] == "refuted"
    assert v[("claim", "no_write_after_release")] == "proved"
    init = next(r for r in rep.results if r.kind == "init")
    assert init.verdict == "refuted" and "not the spec's initial state" in init.offending
    assert any("hold" in line for line in init.detail), init.detail


def test_grounding_expands_quantifiers_over_the_elements():
    """``ground`` reads ``∀``/``∃`` over a bounded universe: a ∀ over two elements is their
    conjunction."""
    system = SglangAllSizes(2, 1)
    universe, _ = system.bounded({"Req": 2, "Page": 1, "PPage": 1, "Chunk": 1, "Tenant": 1})
    st = system.state()
    r = z3.Const("r", system.sorts["Req"])
    term = ground(z3.ForAll([r], st.meta(r)), universe)
    s = z3.Solver()
    s.add(term, z3.Not(st.meta(universe["Req"][1])))
    assert s.check() == z3.unsat
    assert not any(z3.is_quantifier(a) for a in term.children())


@pytest.mark.slow
def test_prove_link_on_v0522_and_the_command(capsys):
    """``prove --all-sizes v0.5.22 --link``: with the stored certificate's invariant (every
    conjunct holds in every reachable model state) as hypotheses the link is proved, and the
    certificate is the model's, so the five claims hold at v0.5.22's size with no enumeration
    (exit 0).  One line per obligation and per claim, and what the result rests on; only
    ``kv_write_lands`` needs the hypotheses (its unsat cores name a few conjuncts)."""
    import re

    from kvproof.checker.cli.commands import main
    assert main(["prove", "--all-sizes", "v0.5.22", "--link"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("proved link step ") == 18 and out.count("proved link claim ") == 5
    assert "proved link Init" in out
    needs = re.findall(r"link step (\w+): (?:each of its \d+ instances|its instance) is a model step \(\d+ from states", out)
    assert needs == ["kv_write_lands"]
    for name in TARGET_CLAIMS:
        assert f"holds {name} at 3 requests, 2 decode pages, 1 prefill page, no enumeration" in out
    used = re.search(r"(\d+) of the certificate's \d+ invariant conjuncts assumed where needed", out)
    assert used and 1 <= int(used.group(1)) <= 10
    assert "ok certificate traces/proofs/v0.5.22.allsizes.smt2: the parametric model's, line for line" in out
    assert "its obligations re-solved now: z3 and cvc5 answered unsat" in out  # the default


def test_prove_link_bad_input_and_missing_or_foreign_certificates(tmp_path, capsys):
    """Bad input is one line, exit 3; a certificate that is not the model's (a guard changed),
    or none at all, is inconclusive (exit 2) and nothing is said to hold; an engine without a
    model is inconclusive too."""
    from kvproof.checker.cli.commands import main
    assert main(["prove", "v0.5.22", "--link"]) == 3
    assert main(["prove", "--all-sizes", "v0.5.22", "--link", "--certificate", str(tmp_path / "none.smt2")]) == 3
    capsys.readouterr()
    text = STORED.read_text()
    guard = next(ln for ln in text.splitlines() if "pab_none" in ln and ln.startswith("(assert (and (distinct"))
    changed = tmp_path / "v0.5.22.allsizes.smt2"
    changed.write_text(text.replace(guard, guard.replace("pab_none", "pab_received", 1)))
    hook = builtin("v0.5.22").build().all_sizes()
    assert "differs from today's parametric model" in model_certificate(hook, changed)
    assert main(["prove", "--all-sizes", "v0.5.22", "--link", "--certificate", str(changed)]) == 2
    assert "INCONCLUSIVE: no all-sizes certificate of this model" in capsys.readouterr().out
    assert main(["prove", "--all-sizes", "v0.5.22", "--link", "--certificates", str(tmp_path / "empty")]) == 2
    assert main(["prove", "--all-sizes", "abort-race", "--link"]) == 2


@pytest.mark.thorough
def test_the_large_example_holds_without_enumeration():
    """examples/allsizes/v0.5.22-5req-8pages.toml (5 requests, 8 decode pages: beyond the
    explicit engine): the link proved at that size, the five claims hold (about 12 s of CPU)."""
    sc = load_scenario(LARGE)
    r = prove_by_link(sc)
    assert r.exit_code == 0, r.reason
    assert r.verdicts == {n: "holds" for n in TARGET_CLAIMS}
    steps = [x for x in r.link.results if x.kind == "step"]
    assert len(steps) == 18 and sum(x.instances for x in steps) == 92


def test_a_certificate_whose_obligations_fail_is_not_rested_on(tmp_path):
    """With ``solve``, the certificate's obligations are re-solved first: a certificate of the
    model (line for line) whose invariant the claims do not follow from is refused by the
    solvers, and nothing is said to hold (exit 2, the failing obligation named); the link is not
    even run."""
    from kvproof.checker.allsizes.prove import certificate_header
    from kvproof.checker.allsizes.quantified import certificate_from
    hook = builtin("v0.5.22").build().all_sizes()
    weak = tmp_path / "v0.5.22.allsizes.smt2"
    weak.write_text(certificate_from(hook.system, "true", ["no_write_after_release"],
                                     certificate_header("v0.5.22", ["no_write_after_release"], hook)))
    assert model_certificate(hook, weak) == ("true", ["no_write_after_release"])
    r = prove_by_link(builtin("v0.5.22"), weak, solve=True, seconds=120)
    assert r.exit_code == 2 and r.link is None
    assert "claim no_write_after_release" in r.reason and set(r.verdicts.values()) == {"inconclusive"}


def test_the_exit_codes_of_a_linked_report():
    """0 when every claim holds; 1 when the link is refuted or a claim the scenario expects
    violated holds; 2 when a claim is inconclusive or there is no verdict at all."""
    from kvproof.checker.allsizes.prove import LinkedReport
    from kvproof.checker.allsizes.link import LinkReport, LinkResult
    sc = builtin("v0.5.22")
    holds = {n: "holds" for n in TARGET_CLAIMS}
    proved = LinkReport([LinkResult("step", "clock_tick", 1)], {})
    assert LinkedReport(sc, dict(holds), proved).exit_code == 0
    assert LinkedReport(sc, dict(holds), proved, mismatch=["x: holds, expected violated"]).exit_code == 1
    refuted = LinkReport([LinkResult("step", "clock_tick", 1, "refuted", "clock_tick()")], {})
    assert LinkedReport(sc, {n: "inconclusive" for n in TARGET_CLAIMS}, refuted).exit_code == 1
    assert LinkedReport(sc, {**holds, "exclusive_ownership": "inconclusive"}, proved).exit_code == 2
    assert LinkedReport(sc).exit_code == 2
