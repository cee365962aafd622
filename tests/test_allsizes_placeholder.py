"""What the all-sizes pipeline mines for an SGLang engine that queues an over-long prompt (no
rejection at the prefill door: it sends a one-chunk placeholder while decode reserves the whole
prompt, as ``pr-41404``'s engine does): a second small instance in which a request's sent
chunks and reserved pages differ, each joined pointer bounded by the count that bounds it there
(``dest`` by the reserved pages, ``src`` by the sent chunks), and a target claim that small
instance breaks reported violated at its size, not handed to Houdini.  ``v0.5.22`` (rejects at
the door) keeps its one small instance."""

from __future__ import annotations

import dataclasses

import pytest

from kvproof.checker.allsizes.prove import all_sizes_model, prove_all_sizes
from kvproof.checker.symbolic.lemmas import explore_all
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin


def hook_of(name: str):
    """The lifted all-sizes model of scenario ``name``."""
    hook, why = all_sizes_model(builtin(name).build())
    assert hook is not None, why
    return hook


def instances(hook):
    """The small instances a hook mines, each with its joins."""
    return [(hook.small, hook.joins), *[(m[0], m[2]) for m in hook.more]]


def sends_fewer_than_it_reserves(spec) -> bool:
    """Some request of ``spec`` sends fewer chunks than decode reserves pages for it."""
    return any(spec.send_len(r) < spec.pages(r) for r in range(len(spec.cfg.requests)))


def test_an_engine_that_queues_over_long_prompts_mines_a_placeholder_instance():
    pr = hook_of("pr-41404")
    assert len(pr.more) == 1
    assert not sends_fewer_than_it_reserves(pr.small)
    mixed = pr.more[0][0]
    assert sends_fewer_than_it_reserves(mixed) and mixed.over_long(0) and not mixed.over_long(1)
    # its three-value facts are chosen over its own layout (two chunks), not the first instance's
    assert pr.more[0][3] is not pr.triples
    v = hook_of("v0.5.22")
    assert v.more == () and not sends_fewer_than_it_reserves(v.small)


def test_each_pointer_is_bounded_by_the_count_that_bounds_it_in_the_small_instance():
    """``dest`` is set for every reserved page, ``src`` only for the chunks sent: with a
    placeholder they differ, and each join's candidates carry its own count (a join keyed by the
    index domains alone gave both pointers the same one)."""
    hook = hook_of("pr-41404")
    small, joins = instances(hook)[1]
    states, _ = explore_all(Machine(small))
    counts = {j.name: j.lift.count for j in joins(states)}
    assert counts == {"dest": "pages", "src": "send_len"}
    dest = next(j for j in joins(states) if j.name == "dest")
    cand = dest.lift(next(iter(f for f in _facts(dest) if f)))
    assert "(pages " in cand.name and "(send_len " not in cand.name


def _facts(join):
    from kvproof.checker.allsizes.prove import mine_joined
    return mine_joined(join, 2)


@pytest.mark.thorough  # about 17 s of CPU
def test_a_claim_a_small_instance_breaks_is_violated_at_that_size_not_proved(monkeypatch):
    """``pr-41404`` holds at its own size, but its placeholder instance reads a reserved page
    no write filled (H1 is not fixed in this engine): ``decode_reads_only_own_pages`` is
    violated at that size, exit 1, and is not among the claims handed to Houdini (here a stub
    that records them and keeps every candidate: the verdicts before and after Houdini are
    what is checked, not Z3)."""
    import kvproof.checker.allsizes.prove as prove
    from kvproof.checker.allsizes.quantified import HoudiniResult

    handed = []

    def stub(system, cands, seconds, say=None, sizes=None):
        handed.append({c.name for c in cands if c.claim})
        return HoudiniResult(kept=list(cands))

    monkeypatch.setattr(prove, "houdini", stub)
    report = prove_all_sizes(builtin("pr-41404"), minimise_invariant=False)
    size, steps = report.violated_at["decode_reads_only_own_pages"]
    assert size == hook_of("pr-41404").more[0][0].size_label() and steps > 0
    assert set(report.violated_at) == {"decode_reads_only_own_pages"}
    assert report.verdicts["decode_reads_only_own_pages"] == "violated"
    assert list(report.verdicts) == list(hook_of("pr-41404").targets)  # the targets' order
    assert [v for n, v in report.verdicts.items() if n != "decode_reads_only_own_pages"] == ["proved"] * 4
    assert handed and all("decode_reads_only_own_pages" not in h and "exclusive_ownership" in h for h in handed)
    assert report.exit_code == 1 and report.reason.startswith("decode_reads_only_own_pages is violated at")
    assert report.traces == {}  # not at the scenario's own size


def test_the_engine_reads_another_tenants_kv_once_two_requests_ran_before_a_placeholder():
    """Why ``no_cross_tenant_read`` is not proved for ``pr-41404`` at every size: two one-page
    requests of tenant B, then an over-long two-page request of tenant A, on two decode pages and
    one prefill page: A's second reserved page still holds B's KV and decode reads it."""
    from kvproof.spec.sglang.config import Request

    spec = builtin("pr-41404").build()
    cfg = spec.cfg
    bigger = type(spec)(dataclasses.replace(cfg, requests=(Request("B", 1), Request("B", 1), Request("A", 2)),
                                            decode_pages=2, prefill_pages=1))
    _, hits = explore_all(Machine(bigger))
    assert {"decode_reads_only_own_pages", "no_cross_tenant_read"} <= set(hits)
    assert not {"no_write_after_release", "no_source_free_while_read", "exclusive_ownership"} & set(hits)
    _, own = explore_all(Machine(spec))
    assert not {"decode_reads_only_own_pages", "no_cross_tenant_read"} & set(own)
