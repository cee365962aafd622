"""The link between the spec and the all-sizes model, proved at one size (checker/allsizes/link.py's
``check_link`` on the lifted model, checker/allsizes/sorted_link.py): a spec whose guard is weaker
than the model's, a lifted update that writes something else, a lifted claim that says less and a
lifted Init that starts elsewhere are refuted with the offending action, claim or slot named;
hypotheses are assumed only where needed and named (and refused when vacuous); the
lift of v0.5.22's engine at several prefill and decode ranks links (ranks kept at the instance's
size) and refutes the unsafe rank rules (tp2-first-ack's, tp2x2-ready-any's, tp2x2-hold-min's);
grounding expands quantifiers over a bounded universe; and the exit codes of ``prove --all-sizes
--link``'s report.

The lift's own mutants (a dropped update, a strengthened guard, a flipped quantifier, a dropped
case, the sentinel guard removed) and the unmutated lift's link at three sizes per protocol are
tests/test_lift_sorted.py's."""

from __future__ import annotations

import dataclasses

import pytest
import z3

from kvproof.checker.allsizes.link import check_link, ground
from kvproof.checker.allsizes.quantified import Action, Candidate, Step
from kvproof.checker.allsizes.sorted_link import check_lifted_link, link_map
from kvproof.model.framework import action
from kvproof.model.scenario import builtin
from kvproof.model.sorted_lift import lift_spec
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import POLL_NONE, P_SENDING, WR_FLIGHT, WR_NOT_ISSUED, PdProtocol

TARGETS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
           "no_source_free_while_read", "exclusive_ownership")


def small(cls=PdProtocol, requests=(("A", 1), ("B", 2)), decode_pages=2, prefill_pages=2, prefill_ranks=1,
          decode_ranks=1):
    """v0.5.22's engine on a small instance (a one-page and a two-page request of two tenants)."""
    cfg = builtin("v0.5.22").config
    return cls(dataclasses.replace(cfg, requests=tuple(Request(t, p) for t, p in requests),
                                   decode_pages=decode_pages, prefill_pages=prefill_pages, context_limit=2,
                                   prefill_ranks=prefill_ranks, decode_ranks=decode_ranks))


@pytest.fixture(scope="module")
def lifted():
    """The model lifted from v0.5.22's own scenario (one prefill and one decode rank)."""
    return lift_spec(builtin("v0.5.22").build())


def verdicts(report):
    return {(r.kind, r.name): r.verdict for r in report.results}


def code(system, label: str):
    """The enumeration constant of the lifted ``system`` named ``label`` (``flag_yes``)."""
    sort = next(s for s, names in system.enums.items() if label in names)
    return system.sorts[sort].constructor(system.enums[sort].index(label))()


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
        s.require(self.chunk_in_order(s, r, w, c))
        s.require(self.prefill_alive(s))
        n.wr[r, w, c] = WR_FLIGHT


def test_a_spec_action_with_a_weakened_guard_is_refuted(lifted):
    """The weakened ``kv_transfer_write`` takes steps the lifted model (of the unchanged engine)
    does not: refuted, the instance named, the model action shown disabled there; the other
    action of the query is proved."""
    rep = check_lifted_link(lifted, small(WeakGuard), claims=False, only=["kv_transfer_write", "prefill_forward"])
    v = verdicts(rep)
    assert v[("step", "kv_transfer_write")] == "refuted" and v[("step", "prefill_forward")] == "proved"
    bad = next(r for r in rep.results if r.name == "kv_transfer_write")
    assert bad.offending.startswith("kv_transfer_write(req=")
    assert any("disabled" in line for line in bad.detail), bad.detail
    assert check_lifted_link(lifted, small(), claims=False, only=["kv_transfer_write"]).proved


def _changed(system, name: str, field: str, value):
    """``system`` with action ``name``'s update of ``field`` replaced: ``value(st, params)`` is the
    new update (a function of the field's arguments), ``None`` drops it."""
    def wrap(a):
        def step(st, params, choices, inner=a.step):
            out = inner(st, params, choices)
            updates = dict(out.updates)
            if value is None:
                updates.pop(field)
            else:
                updates[field] = value(st, params)
            return Step(out.guard, updates)
        return Action(a.name, a.params, a.choices, step, a.doc)
    system.actions = tuple(wrap(a) if a.name == name else a for a in system.actions)
    return system


@pytest.mark.parametrize("name,field,how", [("decode_send_metadata", "meta", "unpublished"),
                                            ("prefill_drain", "src_owner", "dropped")])
def test_a_changed_lifted_update_is_refuted(name, field, how):
    """A lifted action that writes something other than the spec (``decode_send_metadata``
    publishing ``flag_no``) or no longer writes what the spec writes (``prefill_drain`` freeing
    no source page): that action refuted with the successor's difference at the field, the
    others of the query proved."""
    m = lift_spec(builtin("v0.5.22").build())
    no = code(m, "flag_no")
    _changed(m, name, field, (lambda st, p: lambda r: no) if how == "unpublished" else None)
    rep = check_lifted_link(m, small(), claims=False, only=[name, "decode_abort"])
    assert verdicts(rep) == {("init", "Init"): "proved", ("step", name): "refuted", ("step", "decode_abort"): "proved"}
    bad = next(r for r in rep.results if r.name == name)
    assert any("successor differs" in line and f"{field}[" in line for line in bad.detail), bad.detail


def test_a_changed_claim_and_a_changed_init_are_refuted():
    """A lifted claim that says less than the spec's (exclusive ownership of held requests only,
    not of reserved, waiting or verified ones), and a lifted Init whose hold timers start at 1,
    are refuted; the other claims are proved."""
    m = lift_spec(builtin("v0.5.22").build())
    held = code(m, "d_phase_held")

    def weaker(st, r):
        c = z3.Const("c", m.sorts["Chunk"])
        return z3.Implies(z3.And(r != st.rnone(), st.d_phase(r) == held),
                          m.forall([c], z3.Implies(st.pages(r, c), st.owner(st.dest(r, c)) == r)))
    claims = [Candidate("exclusive_ownership", (("r", "Req"),), weaker, True) if c.name == "exclusive_ownership"
              else c for c in m.claims()]
    m.claims = lambda: claims
    h0, h1 = code(m, "hold_0"), code(m, "hold_1")
    real_init = m.init
    m.init = lambda st: real_init(st.with_updates({"hold": lambda r: z3.If(st.hold(r) == h1, h0, h1)}))
    spec = small()
    rep = check_link(spec, link_map(m, spec), steps=False)
    v = verdicts(rep)
    assert v.pop(("claim", "exclusive_ownership")) == "refuted"
    init = next(r for r in rep.results if r.kind == "init")
    assert v.pop(("init", "Init")) == "refuted" and "not the spec's initial state" in init.offending
    assert any("hold" in line for line in init.detail), init.detail
    assert v == {("claim", n): "proved" for n in TARGETS if n != "exclusive_ownership"}


def test_hypotheses_are_assumed_only_where_needed_and_named(monkeypatch):
    """The link's hypotheses (facts of the related model state, e.g. a certificate's conjuncts):
    a lift that writes the NONE page's row (the sentinel guard removed) is refuted at
    ``kv_write_lands`` with none; offered "an in-flight write has a page" and an irrelevant
    fact, every instance is proved, each counted as needing a hypothesis and the unsat cores
    naming only the one that rules the NONE page out, while ``clock_tick`` needs none;
    hypotheses no related state satisfies are refused (every obligation would be vacuous)."""
    from kvproof.model.sorted_lift import _Run
    monkeypatch.setattr(_Run, "_sentinel_guard", lambda self, name: (lambda xs: []))
    m = lift_spec(builtin("v0.5.22").build())
    spec = small()
    lm = link_map(m, spec)
    rep = check_link(spec, lm, claims=False, only=["kv_write_lands"])
    assert verdicts(rep)[("step", "kv_write_lands")] == "refuted" and rep.hypotheses == 0
    flight = [code(m, "write_in_flight_0"), code(m, "write_in_flight_1")]
    reqs, chunks = lm.universe["Req"][1:], lm.universe["Chunk"]  # element 0 of Req is rnone

    def hypotheses(X):
        has_page = z3.And([z3.Implies(z3.Or([X.wr(r, c) == f for f in flight]), X.dest(r, c) != X.pnone())
                           for r in reqs for c in chunks])
        flag = z3.And([z3.Or(X.meta(r) == code(m, "flag_yes"), X.meta(r) == code(m, "flag_no")) for r in reqs])
        return [("an in-flight write has a page", has_page), ("meta is a flag", flag)]
    rep = check_link(spec, dataclasses.replace(lm, hypothesis=hypotheses), claims=False,
                     only=["kv_write_lands", "clock_tick"])
    assert rep.proved and rep.hypotheses == 2 and rep.used == {"an in-flight write has a page"}
    by = {r.name: r for r in rep.results}
    assert by["kv_write_lands"].needed == by["kv_write_lands"].instances == 3
    assert by["clock_tick"].needed == 0 and by["clock_tick"].used == set()
    rep = check_link(spec, dataclasses.replace(lm, hypothesis=lambda X: [("false", z3.BoolVal(False))]), claims=False)
    assert verdicts(rep) == {("init", "hypotheses"): "refuted"} and "vacuous" in rep.results[0].offending


def test_grounding_expands_quantifiers_over_the_elements(lifted):
    """``ground`` reads ``∀``/``∃`` over a bounded universe: a ∀ over two requests is their
    conjunction (with ``rnone``, three), with no quantifier left."""
    universe, _ = lifted.bounded({"Req": 3, "Page": 1, "PPage": 1, "Chunk": 1, "Tenant": 1})
    assert len(universe["Req"]) == 3
    st = lifted.state()
    yes = code(lifted, "flag_yes")
    r = z3.Const("r", lifted.sorts["Req"])
    term = ground(z3.ForAll([r], st.meta(r) == yes), universe)
    s = z3.Solver()
    s.add(term, st.meta(universe["Req"][2]) != yes)
    assert s.check() == z3.unsat
    assert not z3.is_quantifier(term) and not any(z3.is_quantifier(a) for a in term.children())
    some = ground(z3.Exists([r], st.meta(r) == yes), universe)
    s = z3.Solver()
    s.add(some, *[st.meta(e) != yes for e in universe["Req"][1:]])
    assert s.check() == z3.sat and z3.is_true(s.model().eval(st.meta(universe["Req"][0]) == yes))


@pytest.mark.parametrize("ranks,instances", [((2, 1), 53), ((1, 2), 39), ((2, 2), 55)], ids=["2x1", "1x2", "2x2"])
def test_the_lift_at_several_ranks_links(ranks, instances):
    """The lift keeps ranks at the instance's size (an enumeration sort per rank domain): lifted
    from an instance at several prefill and decode ranks, Init, every action instance (16 more
    per prefill rank, 2 more per decode rank than at one rank) and the five claims are proved at
    that instance with no hypothesis."""
    spec = small(prefill_ranks=ranks[0], decode_ranks=ranks[1])
    m = lift_spec(spec)
    rep = check_lifted_link(m, spec)
    assert rep.proved, {k: x for k, x in verdicts(rep).items() if x != "proved"}
    assert sum(r.instances for r in rep.results if r.kind == "step") == instances
    assert {n for k, n in verdicts(rep) if k == "claim"} == set(TARGETS)
    # no hypothesis offered, none needed: no instance is counted as resting on an invariant
    assert rep.hypotheses == 0 and rep.used == set() and not [r.name for r in rep.results if r.needed]


class FirstAck(PdProtocol):
    """A mutant: decode releases a held request on the first prefill rank's drain ack
    (``required_acks = first_ack`` within v0.5.22's engine, the tp2-first-ack hazard)."""

    def release_safe(self, s, r):
        """One drain ack, from any rank, is enough."""
        return s.ops.any_(s.acked[r, pr] == 1 for pr in self.prs)


class ReadyAny(PdProtocol):
    """A mutant: the decode ranks' readiness combined by MAX (tp2x2-ready-any's rule within
    v0.5.22's engine): released once one decode rank has its prefill ranks' acks."""

    def combine(self, o, per_rank, how):
        """Readiness by ``max`` (hold decisions as before)."""
        return super().combine(o, per_rank, "max")


class HoldMin(PdProtocol):
    """A mutant: the decode ranks' hold decisions combined by MIN (tp2x2-hold-min's rule):
    released at once unless every decode rank published."""

    def hold_decision(self, s, r, deferrable):
        """Hold only if every decode rank would."""
        return s.ops.all_(deferrable & (s.meta[r, d] == 1) for d in range(self.k.DR))


@pytest.mark.parametrize("cls,ranks,name", [(FirstAck, (2, 1), "decode_release_deferred"),
                                            (ReadyAny, (2, 2), "decode_release_deferred"),
                                            (HoldMin, (1, 2), "decode_abort")])
def test_a_rank_rule_of_an_unsafe_engine_is_refuted(cls, ranks, name):
    """At several ranks, a spec that releases on one prefill rank's drain ack, on one decode
    rank's readiness, or at once unless every decode rank published, takes a step the lift of
    the safe engine at those ranks does not: refuted at that action; at one rank of each, where
    the rules coincide, the same query is proved."""
    m = lift_spec(small(prefill_ranks=ranks[0], decode_ranks=ranks[1]))
    rep = check_lifted_link(m, small(cls, prefill_ranks=ranks[0], decode_ranks=ranks[1]), claims=False, only=[name])
    assert verdicts(rep)[("step", name)] == "refuted"
    bad = next(r for r in rep.results if r.name == name)
    assert bad.offending.startswith(f"{name}(req=")
    assert any("disabled" in line or "successor differs" in line for line in bad.detail), bad.detail
    rep = check_lifted_link(lift_spec(small()), small(cls), claims=False, only=[name])
    assert verdicts(rep)[("step", name)] == "proved"


def test_a_counter_counting_down_is_linked():
    """vLLM's lease counting down (the spec's add(lease, -1) has a one-hot key -1 that no model
    value stands for) is a step of the lifted clock_tick at the scenario's own size: the link's
    relation gives such a key no counterpart (it once indexed the values from the end and
    refuted clock_tick)."""
    spec = builtin("vllm-pull-abort-32255").build()
    rep = check_lifted_link(lift_spec(spec), spec, claims=False, only=["clock_tick"], seconds=120)
    assert [(r.name, r.verdict) for r in rep.results if r.kind == "step"] == [("clock_tick", "proved")]


def test_the_exit_codes_of_a_linked_report():
    """0 when every claim holds; 1 when the link is refuted or a claim the scenario expects
    violated holds; 2 when a claim is inconclusive or there is no verdict at all."""
    from kvproof.checker.allsizes.prove import LinkedReport
    from kvproof.checker.allsizes.link import LinkReport, LinkResult
    sc = builtin("v0.5.22")
    holds = {n: "holds" for n in TARGETS}
    proved = LinkReport([LinkResult("step", "clock_tick", 1)], {})
    assert LinkedReport(sc, dict(holds), proved).exit_code == 0
    assert LinkedReport(sc, dict(holds), proved, mismatch=["x: holds, expected violated"]).exit_code == 1
    refuted = LinkReport([LinkResult("step", "clock_tick", 1, "refuted", "clock_tick()")], {})
    assert LinkedReport(sc, {n: "inconclusive" for n in TARGETS}, refuted).exit_code == 1
    assert LinkedReport(sc, {**holds, "exclusive_ownership": "inconclusive"}, proved).exit_code == 2
    assert LinkedReport(sc).exit_code == 2


def _push_ranked():
    """vllm-push-write-post-fails at one request: two prefill ranks, per-rank WRITEs, decode
    counting their notifications (``counted``, codes 0..2)."""
    spec = builtin("vllm-push-write-post-fails").build()
    return next(s for s in spec.link_instances() if s.size_label().startswith("1 request"))


def test_a_spec_step_out_of_its_fields_codes_is_no_step_to_match(monkeypatch):
    """decode_get_new_notifs adds one to ``counted`` unguarded: from an unreachable typed state
    (``counted`` at its last code, the request still held) the spec's successor lies outside
    the field's codes, a step no typed run takes and no model state can be related to.  The
    link proves the action (it once refuted it there); with the typed-successor condition
    removed it is refuted at that state; and a lift mutant whose enumeration ``add`` does not
    count (the successor keeps ``counted``) is refuted at an in-range step, so the condition does
    not make the step obligation vacuous."""
    import kvproof.checker.allsizes.link as link_mod
    from kvproof.model.sorted_lift import SortedOps

    spec = _push_ranked()
    only = ["decode_get_new_notifs"]
    rep = check_lifted_link(lift_spec(spec), spec, claims=False, only=only)
    assert verdicts(rep) == {("init", "Init"): "proved", ("step", "decode_get_new_notifs"): "proved"}

    with monkeypatch.context() as m:
        m.setattr(link_mod, "_in_codes", lambda ts, xs: [])
        bad = check_lifted_link(lift_spec(spec), spec, claims=False, only=only)
    res = next(r for r in bad.results if r.kind == "step")
    assert res.verdict == "refuted" and res.offending.startswith("decode_get_new_notifs(")
    assert any("counted" in line and "successor differs" in line for line in res.detail), res.detail

    add = SortedOps.add

    def no_count(self, a, b):
        return add(self, a, 0) if isinstance(b, int) and b > 0 else add(self, a, b)

    monkeypatch.setattr(SortedOps, "add", no_count)
    mutant = check_lifted_link(lift_spec(spec), spec, claims=False, only=only)
    res = next(r for r in mutant.results if r.kind == "step")
    assert res.verdict == "refuted" and res.offending.startswith("decode_get_new_notifs(")
