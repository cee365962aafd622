"""The link between the spec and the parametric model, proved at one size (checker/allsizes/link.py,
spec/sglang/allsizes.py's ``link_map``), and ``prove --all-sizes SCENARIO --link``: proved on
v0.5.22's own size; mutants of the spec and of the model (a weakened guard, a changed update, a
changed claim or Init) refuted with the offending action named."""

from __future__ import annotations

import dataclasses

import pytest
import z3

from kvproof.checker.allsizes.link import check_link, ground
from kvproof.checker.allsizes.quantified import Candidate
from kvproof.model.framework import action
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.allsizes import TARGET_CLAIMS, SglangAllSizes, link_map
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import POLL_NONE, P_SENDING, WR_FLIGHT, WR_NOT_ISSUED, PdProtocol



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
