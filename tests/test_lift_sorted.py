"""The lift to sorts (model/sorted_lift.py) and its automatic link (checker/sorted_link.py).

v0.5.22's engine is lifted from the spec itself: the actions, their case splits, the rigid
symbols, the abstractions the lift prints and the claims it states are pinned; the link proves,
with no hypothesis, that every spec step is a step of the lifted model (and Init and the five
claims agree) at three sizes other than the one lifted from; mutants of the lift (a dropped
update, a flipped quantifier, a dropped case, the sentinel guard removed) are refuted by the link
with the offending action or claim named; what cannot be lifted is refused with the spec's file
and line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import z3

from kvproof.checker.sorted_link import check_lifted_link, link_map
from kvproof.model.framework import action, invariant
from kvproof.model.lifting import LiftRefused, indices
from kvproof.model.parametric import Action, Step
from kvproof.model.scenario import builtin
from kvproof.model.sorted_lift import _Run, lift_spec
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import P_NEW, P_QUEUED, PdProtocol

TARGETS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
           "no_source_free_while_read", "exclusive_ownership")
HERE = Path(__file__).name


def instance(cls=PdProtocol, requests=(("A", 1), ("B", 1)), decode_pages=2, prefill_pages=1, context_limit=None):
    """v0.5.22's engine at another size."""
    cfg = builtin("v0.5.22").config
    return cls(dataclasses.replace(cfg, requests=tuple(Request(t, p) for t, p in requests), decode_pages=decode_pages,
                                   prefill_pages=prefill_pages, context_limit=context_limit or cfg.context_limit))


@pytest.fixture(scope="module")
def lifted():
    return lift_spec(builtin("v0.5.22").build())


def refuted(report) -> dict[tuple[str, str], str]:
    return {(r.kind, r.name): r.offending for r in report.results if r.verdict != "proved"}


def test_the_lifted_model_of_v0522(lifted):
    """Every action of the spec that the engine enables, once per case of its split on the
    request's over-long flag; sorts for requests, pages, prefill pages, chunks and tenants; the
    rigid symbols the spec's per-element configuration became; the five target claims lifted and
    the claims that iterate ``range(k.R)`` or count refused with their line."""
    assert [a.name for a in lifted.actions] == [
        "prefill_bootstrap_add.over_long", "prefill_bootstrap_add.not_over_long", "prefill_forward",
        "decode_prealloc.over_long", "decode_prealloc.not_over_long", "decode_send_metadata", "kv_transfer_write",
        "kv_write_lands", "prefill_transfer_done", "prefill_transfer_failed", "decode_commit", "decode_poll_failed",
        "decode_abort", "prefill_handle_abort", "prefill_drain", "prefill_drain_ack", "decode_handle_abort_ack",
        "decode_release_deferred", "decode_release_timeout", "clock_tick"]
    assert set(lifted.uninterpreted) == {"Req", "Page", "PPage", "Chunk", "Tenant"}
    assert [(s.name, s.args, s.result) for s in lifted.rigid] == [
        ("over_long", ("Req",), "Bool"), ("pages", ("Req", "Chunk"), "Bool"), ("tenant", ("Req",), "Tenant")]
    by = {a.name: a for a in lifted.actions}
    assert [c.name for c in by["decode_prealloc.not_over_long"].choices] == ["pick1", "taken2"]
    assert [c.name for c in by["decode_commit"].choices] == ["owner_at1"]
    assert by["kv_write_lands"].params == (("req", "Req"), ("chunk", "Chunk"))
    assert [c.name for c in lifted.claims()] == list(TARGETS)
    assert "range" in lifted.refused["success_implies_full_coverage"] or "fixed index" in lifted.refused[
        "success_implies_full_coverage"]
    assert lifted.refused["pages_conserved"].startswith("spec/sglang/claims.py:")
    sym = {s.name: s for s in lifted.symbols}
    assert (sym["owner"].args, sym["owner"].result) == (("Page",), "Req")
    assert sym["wr"].args == ("Req", "Chunk")  # one write stream: the dimension is dropped
    assert lifted.enums[sym["hold"].result] == ("hold_0", "hold_1", "hold_2")


def test_abstractions_are_derived_and_name_their_line(lifted):
    """The lift prints what it over-approximates, each with the helper or line that needed it:
    FIFO doors, lowest-numbered allocation (decode and prefill pools), in-order chunks; nothing
    else (the clock's "some timer moves" and the read classification are exact)."""
    lines = lifted.abstractions
    assert len(lines) == 4, lines
    assert lines[0].startswith("arrivals in any order (the spec: FIFO doors) [PdProtocol.in_order, spec/sglang/protocol.py:")
    assert any(line.startswith("allocation from owner takes any free entries") for line in lines)
    assert any(line.startswith("allocation from src_owner takes any free entries") for line in lines)
    assert any(line.startswith("a request's chunks issued in any order") and "chunk_in_order" in line for line in lines)


@pytest.mark.parametrize("requests,decode_pages,prefill_pages", [
    ((("A", 1),), 1, 1),                       # one request
    ((("A", 1), ("B", 1)), 2, 1),              # two tenants, one source page
    ((("A", 2), ("A", 1)), 3, 2),              # one tenant, a two-page request
], ids=["1req", "2req-2tenants", "2req-1tenant-2pages"])
def test_the_link_is_proved_without_hypotheses(lifted, requests, decode_pages, prefill_pages):
    """At three sizes other than the scenario's (lifted from 3 requests on 2 pages): Init, every
    spec action instance (each a step of a lifted action of its name, any case) and the five
    claims, for every typed state (no invariant assumed, unlike the hand-written model's link)."""
    spec = instance(requests=requests, decode_pages=decode_pages, prefill_pages=prefill_pages, context_limit=2)
    rep = check_lifted_link(lifted, spec)
    assert rep.proved, refuted(rep)
    steps = [r for r in rep.results if r.kind == "step"]
    assert len(steps) == 18 and all(r.instances >= 1 for r in steps)
    assert {r.name for r in rep.results if r.kind == "claim"} == set(TARGETS)


@pytest.mark.thorough
def test_the_link_at_the_scenarios_own_size(lifted):
    """The scenario's own instance (an over-long request among three), 54 action instances."""
    rep = check_lifted_link(lifted, builtin("v0.5.22").build())
    assert rep.proved, refuted(rep)
    assert sum(r.instances for r in rep.results if r.kind == "step") == 54


# -- mutants of the lift: the link must refute each ---------------------------------------------

def _mutant(name: str, change) -> object:
    """v0.5.22's lifted model with action ``name``'s step changed by ``change(step)``."""
    m = lift_spec(builtin("v0.5.22").build())
    acts = []
    for a in m.actions:
        if a.name == name:
            inner = a.step
            a = Action(a.name, a.params, a.choices, lambda st, p, c, inner=inner: change(inner(st, p, c)), a.doc)
        acts.append(a)
    m.actions = tuple(acts)
    return m


def test_mutant_dropped_update_is_refuted():
    """A lift that forgets the owner update of a deferred release (pages never freed)."""
    m = _mutant("decode_release_deferred",
                lambda step: Step(step.guard, {k: v for k, v in step.updates.items() if k != "owner"}))
    rep = check_lifted_link(m, instance(), claims=False)
    assert set(refuted(rep)) == {("step", "decode_release_deferred")}
    assert refuted(rep)[("step", "decode_release_deferred")].startswith("decode_release_deferred(req=")


def test_mutant_strengthened_guard_is_refuted():
    """A lift whose write-lands guard gained a conjunct the spec does not have (here: false)."""
    m = _mutant("kv_write_lands", lambda step: Step(z3.And(step.guard, z3.BoolVal(False)), step.updates))
    rep = check_lifted_link(m, instance(), claims=False)
    assert set(refuted(rep)) == {("step", "kv_write_lands")}


@pytest.mark.parametrize("flip", ["exists_for_forall", "forall_for_exists"])
def test_mutant_flipped_quantifier_is_refuted(monkeypatch, flip):
    """A lift that binds ``all_`` existentially (the claims no longer agree with the spec's) or
    ``any_`` universally (the clock then needs every timer to move, and the read classification
    changes)."""
    real = _Run.bind

    def bind(self, t, universal):
        if (flip == "exists_for_forall") == universal:
            universal = not universal
        return real(self, t, universal)

    monkeypatch.setattr(_Run, "bind", bind)
    m = lift_spec(builtin("v0.5.22").build())
    rep = check_lifted_link(m, instance(requests=(("A", 2), ("A", 1)), decode_pages=3, prefill_pages=2,
                                        context_limit=2))
    bad = refuted(rep)
    if flip == "exists_for_forall":
        assert ("claim", "exclusive_ownership") in bad and ("claim", "no_write_after_release") in bad, bad
    else:
        assert ("step", "clock_tick") in bad, bad


def test_mutant_without_the_sentinel_guard_is_refuted(monkeypatch):
    """A lift that writes the NONE row of a field with a sentinel (which the spec keeps at its
    initial value): a write landing for a chunk with no destination page is refuted."""
    monkeypatch.setattr(_Run, "_sentinel_guard", lambda self, name: (lambda xs: []))
    m = lift_spec(builtin("v0.5.22").build())
    rep = check_lifted_link(m, instance(), claims=False, only=["kv_write_lands"])
    assert set(refuted(rep)) == {("step", "kv_write_lands")}


def test_mutant_dropped_case_is_refuted():
    """A lift that keeps only the not-over-long case of admission at prefill."""
    m = lift_spec(builtin("v0.5.22").build())
    m.actions = tuple(a for a in m.actions if a.name != "prefill_bootstrap_add.over_long")
    spec = instance(requests=(("A", 1), ("B", 2)), decode_pages=2, prefill_pages=1, context_limit=2)
    rep = check_lifted_link(m, spec, claims=False, only=["prefill_bootstrap_add"])
    assert set(refuted(rep)) == {("step", "prefill_bootstrap_add")}
    assert "req=R1" in refuted(rep)[("step", "prefill_bootstrap_add")]


# -- refusals -----------------------------------------------------------------------------------

class FixedIndex(PdProtocol):
    """A variant whose action reads a fixed request (request 0) next to its parameter."""

    @action("prefill", "req")
    def prefill_bootstrap_add(self, s, n, r):
        s.require(s.p_phase[0] != P_NEW)
        n.p_phase[r] = P_QUEUED


class IndexArithmetic(PdProtocol):
    """A variant that admits request ``r`` only after request ``r - 1`` (no helper to weaken)."""

    @action("prefill", "req")
    def prefill_bootstrap_add(self, s, n, r):
        s.require(s.p_phase[r - 1] != P_NEW)
        n.p_phase[r] = P_QUEUED


class Counting(PdProtocol):
    """A variant whose claim counts chunks."""

    @invariant
    def few_chunks_written(self, s):
        o = s.ops
        return o.all_(o.count(s.wr[r, 0, c] != 0 for c in indices(self.pages(r))) < 3 for r in self.k.req)


def _line_of(cls, text: str) -> int:
    import inspect
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("cls,text,why", [
    (FixedIndex, "s.p_phase[0]", "the fixed index 0 into the sorted domain request"),
    (IndexArithmetic, "s.p_phase[r - 1]", "index arithmetic on a sorted element"),
])
def test_an_action_that_cannot_be_lifted_is_refused_with_its_line(cls, text, why):
    spec = cls(builtin("v0.5.22").config)
    with pytest.raises(LiftRefused) as e:
        lift_spec(spec)
    msg = str(e.value)
    assert msg.startswith(f"tests/{HERE}:{_line_of(cls, text)}:") or f"{HERE}:{_line_of(cls, text)}:" in msg, msg
    assert why in msg and "(action prefill_bootstrap_add)" in msg


def test_a_claim_that_counts_over_a_sort_is_refused_and_the_rest_lifts():
    spec = Counting(builtin("v0.5.22").config)
    m = lift_spec(spec)
    assert f"{HERE}:{_line_of(Counting, 'o.count')}:" in m.refused["few_chunks_written"]
    assert "counting over a sort" in m.refused["few_chunks_written"]
    assert "few_chunks_written" not in [c.name for c in m.claims()]


def test_link_map_observes_every_slot_of_the_instance(lifted):
    """Every slot of the instance is observed (sentinel rows at the sort's NONE), and no value
    code of the instance's write, phase or owner domains lacks a counterpart but old KV."""
    spec = instance()
    lm = link_map(lifted, spec)
    slots = len(spec.init_state())
    obs = [lm.observe(i) for i in range(slots)]
    assert all(o is not None for o in obs)
    owner = [o for o in obs if o.symbol == "owner"]
    assert [str(a) for o in owner for a in o.args] == ["Page!e0", "Page!e1", "pnone"]
