"""What the all-sizes pipeline mines for an SGLang engine that queues an over-long prompt (no
rejection at the prefill door: it sends a one-chunk placeholder while decode reserves the whole
prompt, as ``pr-41404``'s engine does): a second small instance in which a request's sent
chunks and reserved pages differ, each joined pointer bounded by the count that bounds it there
(``dest`` by the reserved pages, ``src`` by the sent chunks), and a target claim that small
instance breaks reported violated at its size, not handed to Houdini.  ``v0.5.22`` (rejects at
the door) keeps its one small instance."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kvproof.checker.allsizes.prove import all_sizes_model, prove_all_sizes
from kvproof.checker.allsizes.sorted_allsizes import PINNED
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


def _stubbed(monkeypatch):
    """``prove``'s Houdini replaced by a stub that records the claims it is handed and keeps
    every candidate (the verdicts around Houdini are what is checked, not Z3)."""
    import kvproof.checker.allsizes.prove as prove
    from kvproof.checker.allsizes.quantified import HoudiniResult

    handed = []

    def stub(system, cands, seconds, say=None, sizes=None):
        handed.append({c.name for c in cands if c.claim})
        return HoudiniResult(kept=list(cands))

    monkeypatch.setattr(prove, "houdini", stub)
    return handed


@pytest.mark.thorough  # 109 s at load 5-6 (the link at three sizes, twice)
def test_a_claim_broken_only_outside_the_scenarios_configuration_is_proved_within_it(monkeypatch):
    """``pr-41404`` holds at its own size, where no request is over-long, but its placeholder
    instance (an over-long request) reads a reserved page no write filled (H1 is not fixed in
    this engine).  The run fixes ``over_long`` false for every element, as every request of the
    scenario has it, mines and links again within that configuration, and hands all five claims
    to Houdini; what the placeholder instance broke is kept as ``outside`` (its size and run)."""
    handed = _stubbed(monkeypatch)
    report = prove_all_sizes(builtin("pr-41404"), minimise_invariant=False)
    assert report.pinned == {"over_long": False}
    size, steps = report.outside["decode_reads_only_own_pages"]
    assert size == hook_of("pr-41404").more[0][0].size_label() and steps > 0
    assert set(report.outside) == {"decode_reads_only_own_pages"} and report.violated_at == {}
    assert report.small_states == len(explore_all(Machine(hook_of("pr-41404").small))[0])  # one instance mined again
    assert any(line.startswith(PINNED) and "over_long false" in line for line in report.fixed)
    assert not any("over_long(" in line for line in report.fixed)
    assert report.verdicts == {n: "proved" for n in hook_of("pr-41404").targets} and report.exit_code == 0
    assert handed and all("decode_reads_only_own_pages" in h and "exclusive_ownership" in h for h in handed)
    assert not any("over-long" in line or "two-page" in line for line in report.linked)
    assert report.linked and all("1+1" in line or "1 page" in line for line in report.linked)


@pytest.mark.thorough  # 33 s at load 5-6
def test_a_claim_a_small_instance_breaks_within_the_scenarios_configuration_is_violated(monkeypatch, tmp_path):
    """The same engine with an over-long request at the scenario's own size (two pages against
    one prefill page; decode's one page cannot reserve it, so the size is safe): the scenario
    has requests of both configurations, so no condition can be fixed, and the placeholder
    instance's break is reported violated at that size (exit 1), not handed to Houdini."""
    from kvproof.model.scenario import load_scenario

    import kvproof.spec.sglang as sglang

    text = ((Path(sglang.__file__).parent / "scenarios" / "11-pr-41404.toml").read_text().replace('name = "pr-41404"', 'name = "over-long-own"')
            .replace("prefill_pages = 2", "prefill_pages = 1").replace('tenant = "A"\npages = 1', 'tenant = "A"\npages = 2'))
    (tmp_path / "s.toml").write_text(text)
    sc = load_scenario(tmp_path / "s.toml")
    spec = sc.build()
    assert [spec.over_long(r) for r in range(2)] == [True, False]
    handed = _stubbed(monkeypatch)
    report = prove_all_sizes(sc, minimise_invariant=False)
    assert report.pinned == {} and report.outside == {}
    assert set(report.violated_at) == {"decode_reads_only_own_pages"}
    assert report.verdicts["decode_reads_only_own_pages"] == "violated"
    assert [v for n, v in report.verdicts.items() if n != "decode_reads_only_own_pages"] == ["proved"] * 4
    assert handed and all("decode_reads_only_own_pages" not in h for h in handed)
    assert report.exit_code == 1 and report.reason.startswith("decode_reads_only_own_pages is violated at")
    assert report.traces == {}  # not at the scenario's own size


def test_the_pinned_lift_has_no_over_long_symbol_and_mines_and_links_only_within_the_pin():
    """``pr-41404``'s lift with ``over_long`` fixed false: no rigid symbol and no case split on it
    (15 lifted actions where the free lift has 23), no placeholder instance mined, none linked
    (the placeholder instance is not among its link instances), a ``fixed:`` line that
    :func:`pins_from` reads back; and a certificate of the pinned model is not the free model's
    (``certify`` re-lifts with the pin its header states)."""
    from kvproof.checker.allsizes.prove import _pins_for, model_problems
    from kvproof.checker.allsizes.quantified import certificate_text
    from kvproof.checker.allsizes.sorted_allsizes import pins_from
    from kvproof.checker.certs.reader import ALL_SIZES, parse_certificate
    from kvproof.checker.allsizes.prove import certificate_header

    spec = builtin("pr-41404").build()
    free = hook_of("pr-41404")
    assert _pins_for(free, spec, {1}) == {"over_long": False}  # the placeholder instance lies outside
    assert _pins_for(free, spec, {0}) == {}  # the one-page instance does not: nothing to fix
    v = builtin("v0.5.22").build()
    assert _pins_for(hook_of("v0.5.22"), v, {0}) == {}  # the scenario has an over-long request: nothing to fix
    pinned, why = all_sizes_model(spec, {"over_long": False})
    assert pinned is not None, why
    assert "over_long" not in pinned.system.rigid_info and "over_long" in free.system.rigid_info
    assert not any(".over_long" in a.name for a in pinned.system.actions)
    assert (len(pinned.system.actions), len(free.system.actions)) == (15, 23)
    assert pinned.more == () and len(free.more) == 1
    assert pins_from(pinned.fixed) == {"over_long": False} and pins_from(free.fixed) == {}
    claims = [c for c in pinned.system.claims()]
    header = certificate_header("pr-41404", [c.name for c in claims], pinned)
    cert = parse_certificate(certificate_text(pinned.system, claims, header), "pinned", ALL_SIZES)
    assert model_problems(cert, pinned, "pr-41404") == []
    assert model_problems(cert, free, "pr-41404")  # not the free model's certificate


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


@pytest.mark.thorough  # 12 s: the link at the scenario's size
def test_link_rests_on_the_committed_certificate_of_the_fixed_configuration(monkeypatch):
    """``prove --all-sizes pr-41404 --link`` finds the committed certificate (its lift fixed
    ``over_long`` false, as its header says) and the five claims hold at the scenario's size;
    a reader that ignores the header's fixed condition (the mutant) finds no certificate of the
    model and proves nothing."""
    import kvproof.checker.allsizes.prove as prove

    r = prove.prove_by_link(builtin("pr-41404"), solve=False)
    assert r.certificate is not None and r.certificate.name == "pr-41404.allsizes.smt2"
    assert set(r.verdicts.values()) == {"holds"} and r.exit_code == 0
    monkeypatch.setattr(prove, "_pins_of", lambda cert: {})
    r = prove.prove_by_link(builtin("pr-41404"), solve=False)
    assert r.certificate is None and r.exit_code == 2
