"""The parametric model at any number of prefill and decode ranks (spec/sglang/allsizes_ranked.py):
sampled spec steps at several ranks are model steps and the claims agree, the ranks are told
apart, the link is proved at several ranks and refuted for the unsafe rank rules
(tp2-first-ack's, tp2x2-ready-any's, tp2x2-hold-min's), and a first-ack scenario is never
proved.  The model has no all-sizes certificate yet (``prove --all-sizes`` still rests on the
one-rank model of spec/sglang/allsizes.py)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kvproof.checker.allsizes.prove import prove_all_sizes
from kvproof.checker.allsizes.link import check_link
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.allsizes_ranked import TARGET_CLAIMS, Pinned, SglangAllSizes, link_map, supported
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import PdProtocol


def small_spec(requests=(("A", 1), ("B", 2), ("A", 3)), decode_pages=3, prefill_pages=2, prefill_ranks=1,
               decode_ranks=1):
    """v0.5.22's engine on a small instance: by default a one-page and a two-page request of two
    tenants and an over-long one (rejected at both doors), one prefill and one decode rank."""
    cfg = builtin("v0.5.22").config
    return PdProtocol(dataclasses.replace(cfg, requests=tuple(Request(t, p) for t, p in requests),
                                          decode_pages=decode_pages, prefill_pages=prefill_pages,
                                          context_limit=max(p for _, p in requests), prefill_ranks=prefill_ranks,
                                          decode_ranks=decode_ranks))


def reachable(machine, limit, seed=0, walks=20, depth=40, avoid=((),)):
    """Up to ``limit`` reachable states, breadth-first then by ``walks`` seeded random walks of
    ``depth`` steps (walk ``i`` taking no action named in ``avoid[i % len(avoid)]``, so that
    some get far), and steps (pre, action id, post) among them."""
    rng = random.Random(seed)
    seen, frontier, steps = {machine.init}, [machine.init], []
    while frontier and len(seen) < limit:
        nxt = []
        for s in frontier:
            for a in range(len(machine.instances)):
                t = machine.step(s, a)
                if t is not None:
                    steps.append((s, a, t))
                    if t not in seen:
                        seen.add(t)
                        nxt.append(t)
        frontier = nxt
    for i in range(walks):  # deeper states: random walks
        s = machine.init
        for _ in range(depth):
            succ = [(a, t) for a in range(len(machine.instances)) if (t := machine.step(s, a)) is not None
                    and machine.instances[a].action.name not in avoid[i % len(avoid)]]
            if not succ:
                break
            a, t = rng.choice(succ)
            steps.append((s, a, t))
            s = t
    return steps


@pytest.fixture(scope="module", params=[(2, 1), (3, 1), (2, 2), (1, 3)], ids=["2x1", "3x1", "2x2", "1x3"])
def pinned(request):
    """The small instance at 1 prefill and 1 decode rank (A·1, B·2, an over-long A·3 on 3 decode
    pages), at 2 x 1 and 2 x 2 (A·1, B·2 on 2 decode pages), at 3 x 1 and 1 x 3 (A·1, B·1 on 2
    decode pages: with 3 decode ranks, 3 shards all written by the one prefill rank), read as
    bounded instances of the model (one ``PRank``/``DRank`` element per rank)."""
    pr, dr = request.param
    spec = small_spec() if pr == dr == 1 else small_spec(
        (("A", 1), ("B", 2)) if pr == 2 else (("A", 1), ("B", 1)), 2, 2, prefill_ranks=pr, decode_ranks=dr)
    return spec, Pinned(SglangAllSizes(2, 1), spec)


@pytest.mark.slow
def test_every_spec_step_is_a_step_of_the_model(pinned):
    """The over-approximation: every step of the spec at a small size (sampled from the reachable
    graph: every action kind the sample shows) is allowed by the parametric transition relation
    at those elements, by an action of the same name; at several prefill ranks, every
    per-rank action's sample includes a rank other than the first."""
    spec, pin = pinned
    machine = Machine(spec)
    one = spec.k.PR == spec.k.DR == 1
    steps = reachable(machine, 400, walks=20, depth=40 if one else 80,
                      avoid=((),) if one else ((), ("decode_abort", "prefill_transfer_failed"),
                                               ("clock_tick", "decode_release_timeout")))
    by_action: dict[str, list] = {}
    for s, a, t in steps:
        by_action.setdefault(machine.instances[a].action.name, []).append((s, a, t))
    assert {"decode_commit", "decode_abort", "decode_release_timeout", "kv_write_lands", "clock_tick",
            "prefill_forward", "decode_prealloc"} <= set(by_action)
    if spec.k.PR > 1:
        assert {"prefill_handle_abort", "prefill_drain_ack", "decode_handle_abort_ack", "prefill_transfer_done",
                "decode_release_deferred"} <= set(by_action)
    rng = random.Random(1)
    for name, group in sorted(by_action.items()):
        sample = rng.sample(group, min(2, len(group)))
        if spec.k.PR > 1 or spec.k.DR > 1:  # and one step of a rank other than the first, where it has one
            sample += [x for x in group if any(v != 0 for k, v in machine.instances[x[1]].params().items()
                                               if k in ("prank", "stream", "drank"))][:1]
        for s, a, t in sample:
            assert pin.allows(s, t, only=name), machine.label(a)


@pytest.mark.slow
def test_a_non_step_is_not_allowed(pinned):
    """The relation is not everything: a page changing owner out of nothing, or a write landing
    with another request's KV in place of the source's, is no step of the model."""
    spec, pin = pinned
    machine = Machine(spec)
    s0 = machine.init
    layout = spec.layout
    bad = bytearray(s0)
    bad[layout.slot("owner", 0)] = 1  # p0 owned by R0 while R0 is new
    assert pin.allows(s0, bytes(bad)) == []
    s = machine.run("decode_prealloc(req=R0)")
    t = bytearray(s)
    t[layout.slot("dest", 0, 0)] = 1  # R0's destination moved to another page
    assert pin.allows(s, bytes(t)) == []


@pytest.mark.slow
def test_the_claims_agree_on_any_typed_state(pinned):
    """The model's claims and the spec's agree on random typed states (not only reachable ones),
    both where they hold and where they break."""
    spec, pin = pinned
    machine = Machine(spec)
    rng = random.Random(2)
    steps = reachable(machine, 200)
    both = {n: set() for n in TARGET_CLAIMS}
    layout = spec.layout
    for _ in range(30):
        s = bytearray(rng.choice(steps)[2])
        for _ in range(rng.randint(1, 4)):  # scramble a few fields of a reachable state
            f = rng.choice([f for f in layout.fields if f.name in ("read", "wr", "owner", "src_owner", "d_phase", "dest", "src")])
            slot = layout.slot(f.name, *[rng.randrange(d.size) for d in f.dims])
            s[slot] = rng.randrange(f.values.size - (1 if f.name == "owner" or f.name == "src_owner" else 0))
        s = bytes(s)
        for n in TARGET_CLAIMS:
            spec_breaks = machine.claim_hits(n, s)
            assert pin.breaks(n, s) == spec_breaks, (n, s)
            both[n].add(spec_breaks)
    assert all(v == {True, False} for n, v in both.items() if n != "no_cross_tenant_read"), both


@pytest.mark.slow
def test_a_step_of_one_rank_is_not_another_ranks():
    """At two prefill ranks the model tells the ranks apart: rank P1's drain ack taken as
    P0's (the successor with ``acked[r, P0]`` set where the spec set ``acked[r, P1]``) is no
    model step, while the spec's own step is."""
    spec = small_spec((("A", 1),), 1, 1, prefill_ranks=2)
    pin = Pinned(SglangAllSizes(2, 1), spec)
    machine = Machine(spec)
    s = machine.run("decode_prealloc(req=R0)", "decode_send_metadata(req=R0)", "decode_abort(req=R0)",
                    "prefill_handle_abort(req=R0, prank=P1)", "prefill_drain_ack(req=R0, prank=P1)")
    t = machine.run("decode_prealloc(req=R0)", "decode_send_metadata(req=R0)", "decode_abort(req=R0)",
                    "prefill_handle_abort(req=R0, prank=P1)", "prefill_drain_ack(req=R0, prank=P1)",
                    "decode_handle_abort_ack(req=R0, prank=P1)")
    lay = spec.layout
    assert t[lay.slot("acked", 0, 1)] == 1 and t[lay.slot("acked", 0, 0)] == 0
    assert pin.allows(s, t) == ["decode_handle_abort_ack"]
    swapped = bytearray(t)
    swapped[lay.slot("acked", 0, 1)], swapped[lay.slot("acked", 0, 0)] = 0, 1
    assert pin.allows(s, bytes(swapped)) == []


@pytest.mark.slow
def test_a_request_waits_only_once_every_decode_rank_published():
    """At two decode ranks: the first rank's ``decode_send_metadata`` leaves the request
    ``reserved`` (a model step), the second's makes it ``waiting``; the first one taken straight
    to ``waiting`` is no model step, and neither is an abort that releases at once after one
    rank published (``hold_combine`` max: the group holds)."""
    spec = small_spec((("A", 1),), 1, 1, decode_ranks=2)
    pin = Pinned(SglangAllSizes(2, 1), spec)
    machine = Machine(spec)
    lay = spec.layout
    s = machine.run("decode_prealloc(req=R0)")
    t = machine.run("decode_send_metadata(req=R0, drank=D1)", state=s)
    assert t[lay.slot("d_phase", 0)] == 1 and pin.allows(s, t) == ["decode_send_metadata"]
    u = machine.run("decode_send_metadata(req=R0, drank=D0)", state=t)
    assert u[lay.slot("d_phase", 0)] == 2 and pin.allows(t, u) == ["decode_send_metadata"]
    early = bytearray(t)
    early[lay.slot("d_phase", 0)] = 2
    assert pin.allows(s, bytes(early)) == []
    held = machine.run("decode_abort(req=R0)", state=t)
    assert held[lay.slot("d_phase", 0)] == 4 and pin.allows(t, held) == ["decode_abort"]
    released = bytearray(held)
    released[lay.slot("d_phase", 0)], released[lay.slot("owner", 0)] = 5, 0
    released[lay.slot("armed", 0)] = 0
    assert pin.allows(t, bytes(released)) == []


def test_tp2_first_ack_is_never_proved():
    """tp2-first-ack (two prefill ranks, decode releasing on the first drain ack) is refuted at
    its own size by the explicit engine, as every pre-fix scenario: exit 1, the three claims the
    partial ack breaks violated with their shortest traces, nothing mined, no certificate."""
    r = prove_all_sizes(builtin("tp2-first-ack"), 300, traces_dir=None)
    assert r.exit_code == 1
    assert {n for n, v in r.verdicts.items() if v == "violated"} == {
        "decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release"}
    assert r.houdini is None and r.certificate is None and r.mined == 0
    assert r.traces["no_write_after_release"].trace.labels()[-1].startswith("decode_release_deferred(")


def test_the_ranked_model_describes_any_number_of_ranks():
    """Any number of prefill and decode ranks; one layer; every prefill rank's ack required, hold
    decisions by max and readiness by min (the unsafe rules have no model)."""
    cfg = builtin("v0.5.22").config
    assert supported(dataclasses.replace(cfg, prefill_ranks=4)) is None
    assert supported(dataclasses.replace(cfg, prefill_ranks=2, decode_ranks=3)) is None
    assert "layers = 2" in supported(dataclasses.replace(cfg, layers=2))
    for key, value in (("required_acks", "first_ack"), ("ready_combine", "max"), ("hold_combine", "min")):
        other = dataclasses.replace(cfg, prefill_ranks=2, decode_ranks=2,
                                    engine=dataclasses.replace(cfg.engine, **{key: value}))
        assert f"engine.{key}" in supported(other)


def small(cls=PdProtocol, requests=(("A", 1), ("B", 2)), decode_pages=2, prefill_pages=2, prefill_ranks=1,
          decode_ranks=1):
    """v0.5.22's engine on a small instance (a one-page and a two-page request of two tenants)."""
    cfg = builtin("v0.5.22").config
    return cls(dataclasses.replace(cfg, requests=tuple(Request(t, p) for t, p in requests),
                                   decode_pages=decode_pages, prefill_pages=prefill_pages, context_limit=2,
                                   prefill_ranks=prefill_ranks, decode_ranks=decode_ranks))


def verdicts(report):
    return {(r.kind, r.name): r.verdict for r in report.results}


@pytest.mark.parametrize("ranks", [(2, 1), pytest.param((3, 1), marks=pytest.mark.slow), (2, 2), (1, 2),
                                   pytest.param((4, 2), marks=pytest.mark.slow)])
def test_at_several_ranks_the_same_holds(ranks):
    """At several prefill and decode ranks (each prefill rank writes its shards, acks for
    itself; each decode rank publishes its metadata; 1 x 2 has two shards both written by the
    one prefill rank, 4 x 2 links prefill ranks 0, 2 to decode rank 0 and 1, 3 to 1) the link
    is as at one rank: every action instance (53 at 2 x 1, 69 at 3 x 1: 16 more per prefill
    rank; 55 at 2 x 2, 39 at 1 x 2, 87 at 4 x 2: 2 more per decode rank) and claim proved
    without hypotheses, but ``kv_write_lands`` from a typed state whose write flies to no page."""
    pr, dr = ranks
    spec = small(prefill_ranks=pr, decode_ranks=dr)
    rep = check_link(spec, link_map(spec))
    v = verdicts(rep)
    assert v.pop(("step", "kv_write_lands")) == "refuted"
    assert set(v.values()) == {"proved"} and len([k for k, _ in v if k == "step"]) == 17
    assert sum(r.instances for r in rep.results if r.kind == "step") == {
        (2, 1): 53, (3, 1): 69, (2, 2): 55, (1, 2): 39, (4, 2): 87}[ranks]


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
    rank's readiness, or at once unless every decode rank published, takes a step the model does
    not (every prefill rank's ack; hold if any decode rank published): refuted at that action; at
    one rank of each, where the rules coincide, the same query is proved."""
    spec = small(cls, prefill_ranks=ranks[0], decode_ranks=ranks[1])
    rep = check_link(spec, link_map(spec), claims=False, only=[name])
    assert verdicts(rep)[("step", name)] == "refuted"
    bad = next(r for r in rep.results if r.name == name)
    assert any("disabled" in line or "successor differs" in line for line in bad.detail), bad.detail
    spec = small(cls)
    rep = check_link(spec, link_map(spec), claims=False, only=[name])
    assert verdicts(rep)[("step", name)] == "proved"


@pytest.mark.slow
def test_candidates_are_mined_from_both_instances():
    """The ranked model's candidates are found, not written: mined on the one-rank instance
    (51,492 states; the same 649 lifted candidates as the one-rank model's) and on one two-page
    request at 2 x 2 ranks (10,852 states, 69 more), the rank indices lifted to rank variables
    (a wr/content joined fact over ``∀ r, c, w``)."""
    from kvproof.checker.allsizes.prove import mine_joined, one_element_triples
    from kvproof.checker.symbolic.lemmas import explore_all, mine
    from kvproof.checker.symbolic.transition import TransitionSystem
    from kvproof.spec.sglang.allsizes_ranked import model_for
    hook = model_for(builtin("v0.5.22").build(), PdProtocol)
    assert len(hook.more) == 1 and (hook.more[0][0].k.PR, hook.more[0][0].k.DR) == (2, 2)
    cands, counts = {}, []
    for small, lift, joins in ((hook.small, hook.lift, hook.joins), *hook.more):
        states, _ = explore_all(Machine(small))
        ts = TransitionSystem(small)
        clauses = [*mine(ts, states, arity=2), *one_element_triples(small, mine(ts, states, arity=3))]
        before = len(cands)
        lifted = [lift(cl) for cl in clauses]
        for j in joins(states):
            lifted += [j.lift(f) for f in mine_joined(j, 3)]
        for c in lifted:
            if c is not None:
                cands.setdefault(c.name, c)
        counts.append((len(states), len(cands) - before))
    assert counts == [(51492, 649), (10852, 69)]
    assert any("(content w (dest r c))" in n and "(wr r c w)" in n for n in cands)
    assert any("PRank" in s for c in cands.values() for _, s in c.vars)
    assert any("DRank" in s for c in cands.values() for _, s in c.vars)
