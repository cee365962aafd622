"""``prove --all-sizes`` for vLLM: the parametric model of one fixed pull-mode engine
(spec/vllm/allsizes.py, ``vllm-pull-abort-32255``'s) against the spec, its committed certificate,
its pre-fix twin, and mutants that must not be proved."""

from __future__ import annotations

import dataclasses
import random

import pytest
import z3

from kvproof.checker.allsizes.prove import prove_all_sizes
from kvproof.checker.allsizes.quantified import Action, Step
from kvproof.checker.symbolic.lemmas import explore_all
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.vllm.allsizes import (TARGET_CLAIMS, Correspondence, Pinned, VllmAllSizes, model_for, small_config,
                                        supported)
from kvproof.spec.vllm.config import Request
from kvproof.spec.vllm.protocol import VllmPd


FIXED = "vllm-pull-abort-32255"
BEFORE = "vllm-pull-abort-before-32255"


def spec_of(requests=("A", "B", "A"), decode_blocks=1, prefill_blocks=2):
    """The fixed engine on an instance of these tenants and pool sizes."""
    cfg = builtin(FIXED).config
    return VllmPd(dataclasses.replace(cfg, requests=tuple(Request(t) for t in requests), decode_blocks=decode_blocks,
                                      prefill_blocks=prefill_blocks))


@pytest.fixture(scope="module")
def sampled():
    """Three requests of two tenants on one decode and two prefill blocks (more requests than
    blocks in both pools: reuse and abort races), every reachable state (60,073), its pinned
    reading."""
    spec = spec_of()
    machine = Machine(spec)
    states, _ = explore_all(machine)
    assert len(states) == 60_073
    return spec, machine, states, Pinned(VllmAllSizes(2, 0, 1), spec)


def test_only_the_fixed_engine_has_a_model():
    """The base protocol with the fixed engine has the model; its pre-fix twin, another engine,
    push mode and a subclass of the protocol have none."""
    hook = builtin(FIXED).build().all_sizes()
    assert hook is not None and hook.targets == TARGET_CLAIMS
    assert hook.filter_sizes == {"Req": 4, "Block": 3, "PBlock": 3, "Tenant": 2}
    for other in (BEFORE, "vllm-pull-reject-41269", "vllm-push-heartbeat", "vllm-pull-lease-outlasts-read",
                  "vllm-pull-ttl-expiry"):
        assert builtin(other).build().all_sizes() is None, other
    assert "delay_free_aborted_load" in supported(builtin(BEFORE).config)
    assert "client_aborts" in supported(builtin("vllm-pull-lease-outlasts-read").config)
    assert model_for(builtin(BEFORE).build(), VllmPd) is None

    class Variant(VllmPd):
        """A variant protocol (it could override any action)."""

    assert Variant(builtin(FIXED).config).all_sizes() is None


def test_every_spec_step_is_a_step_of_the_model(sampled):
    """The over-approximation: sampled steps of every action kind of the spec at 3 requests on
    1 + 2 blocks are steps of the parametric transition relation at those elements, by the action
    of the same name."""
    spec, machine, states, pin = sampled
    rng = random.Random(1)
    by_action: dict[str, list] = {}
    for row in rng.sample(list(states), 400):
        s = bytes(row)
        for a, inst in enumerate(machine.instances):
            t = machine.step(s, a)
            if t is not None and t != s:
                by_action.setdefault(inst.action.name, []).append((s, a, t))
    assert set(by_action) == {"prefill_request_finished", "prefill_get_new_notifs", "prefill_reap_expired_lease",
                              "decode_on_new_request", "decode_start_load_kv", "decode_finished_recving",
                              "decode_abort", "nixl_read_take_data", "nixl_read_complete", "clock_tick"}
    for name, group in sorted(by_action.items()):
        for s, a, t in rng.sample(group, min(3, len(group))):
            assert pin.allows(s, t, only=name) == [name], machine.label(a)


def test_a_non_step_is_not_allowed(sampled):
    """The relation is not everything: a block changing owner out of nothing, a READ landing
    another request's KV, or a tick past a READ at its latency bound is no step of the model."""
    spec, machine, states, pin = sampled
    lay = spec.layout
    s0 = machine.init
    bad = bytearray(s0)
    bad[lay.slot("owner", 0)] = 1  # p0 owned by R0 while R0 is new
    assert pin.allows(s0, bytes(bad)) == []
    s = machine.run("prefill_request_finished(req=R0)", "decode_on_new_request(req=R0)",
                    "decode_start_load_kv(req=R0)")
    good = machine.run("nixl_read_take_data(req=R0)", state=s)
    assert pin.allows(s, good) == ["nixl_read_take_data"]
    wrong = bytearray(good)
    wrong[lay.slot("content", 0)] = 2  # R1's KV lands in R0's block
    assert pin.allows(s, bytes(wrong)) == []
    ticked = machine.run("clock_tick()", state=s)  # the READ's age reaches its bound (1 tick)
    late = bytearray(ticked)
    late[lay.slot("lease", 0)] -= 1  # a second tick with the READ still posted
    assert pin.allows(ticked, bytes(late), only="clock_tick") == []


def test_the_claims_agree_on_any_typed_state(sampled):
    """The model's claims and the spec's agree on scrambled typed states (not only reachable
    ones), both where they hold and where they break."""
    spec, machine, states, pin = sampled
    lay = spec.layout
    rng = random.Random(2)
    both = {n: set() for n in TARGET_CLAIMS}
    names = ("read", "rd", "owner", "src_owner", "d_phase", "p_phase", "dest", "src")
    for _ in range(60):
        s = bytearray(states[rng.randrange(len(states))])
        for _ in range(rng.randint(1, 3)):
            f = lay.by_name[rng.choice(names)]
            s[lay.slot(f.name, rng.randrange(f.dims[0].size))] = rng.randrange(f.values.size)
        s = bytes(s)
        for n in TARGET_CLAIMS:
            spec_breaks = machine.claim_hits(n, s)
            assert pin.breaks(n, s) == spec_breaks, (n, list(s))
            both[n].add(spec_breaks)
    assert all(v == {True, False} for v in both.values()), both


def test_lifting_and_joins_say_what_the_small_instance_shows():
    """A ground fact lifts to a ∀ over distinct elements; the joined rows through ``dest`` find
    the fact the read claims need (a reading request whose READ completed holds its own KV)."""
    spec = VllmPd(small_config(builtin(FIXED).config))
    system = VllmAllSizes(2, 0, 1)
    corr = Correspondence(system, spec)
    lay = spec.layout
    cand = corr.lift(((lay.slot("dest", 0), 0), (lay.slot("owner", 0), 2)))  # dest[R0] = p0, owner[p0] = R1
    assert [s for _, s in cand.vars] == ["Req", "Req", "Block"]
    assert "distinct" in cand.name and "dest" in cand.name
    assert corr.lift(((lay.slot("owner", 2), 0),)) is None  # the sentinel row
    states, _ = explore_all(Machine(spec))
    joins = {j.name: j for j in corr.joins(states)}
    assert set(joins) == {"dest", "src"}
    from kvproof.checker.allsizes.prove import mine_joined
    dest = joins["dest"]
    cols = dest.columns
    facts = mine_joined(dest)
    want = ((cols.index("d_phase"), 2), (cols.index("rd"), 3), (cols.index("content"), 2))
    assert any(set(f) <= set(want) for f in facts)  # reading, READ complete, another's KV: never


def test_the_pre_fix_twin_is_refuted_at_its_own_size():
    """vllm-pull-abort-before-32255 (before #32255) is never proved: the explicit engine at its
    size finds the shortest counterexamples (`kvproof check`'s lengths), exit 1."""
    r = prove_all_sizes(builtin(BEFORE), 300, traces_dir=None)
    assert r.exit_code == 1
    assert {n for n, v in r.verdicts.items() if v == "violated"} == {
        "decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release"}
    assert len(r.traces["no_write_after_release"].trace) == 4
    assert len(r.traces["decode_reads_only_own_pages"].trace) == 11
    assert r.houdini is None and r.certificate is None


def test_a_counter_counting_down_is_linked():
    """A lease counting down (the spec's add(lease, -1) has a one-hot key -1 that no model value
    stands for) is a step of the model's clock_tick: the link's relation gives such a key no
    counterpart (it once indexed the values from the end and refuted clock_tick)."""
    from kvproof.checker.allsizes.link import check_link
    from kvproof.spec.vllm.allsizes import link_map
    spec = builtin(FIXED).build()
    rep = check_link(spec, link_map(spec), claims=False, only=["clock_tick"], seconds=120)
    assert [(r.name, r.verdict) for r in rep.results if r.kind == "step"] == [("clock_tick", "proved")]
