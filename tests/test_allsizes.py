"""``prove --all-sizes``'s general machinery on the model lifted from the spec
(checker/allsizes/prove.py's ``all_sizes_model``): the quantified Houdini and its certificates
(checker/allsizes/quantified.py), the joined templates mined through a pointer, the minimiser and
the drop pass (on a toy system), and the rule that a pre-fix scenario is never reported proved
(SGLang's abort-race and tp2-first-ack, vLLM's pre-fix twin)."""

from __future__ import annotations

import dataclasses
import time

import pytest
import z3

from kvproof.checker.allsizes.prove import all_sizes_model, prove_all_sizes
from kvproof.checker.allsizes.quantified import (Action, Candidate, ParametricSystem, Step, Symbol,
                                                 houdini, inductive_problems)
from kvproof.checker.certs.reader import CertificateError
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.state import D_WAITING, P_SENDING, WR_LANDED

from .certs import headed, invariant_of, solve

TARGETS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
           "no_source_free_while_read", "exclusive_ownership")


@pytest.fixture(scope="module")
def hook():
    """The all-sizes model of v0.5.22 (lifted from its spec)."""
    model, why = all_sizes_model(builtin("v0.5.22").build())
    assert model is not None, why
    return model


def code(system, label: str):
    """The enumeration constant of ``system`` named ``label`` (``outcome_none``)."""
    sort = next(s for s, names in system.enums.items() if label in names)
    return system.sorts[sort].constructor(system.enums[sort].index(label))()


def read_none_fact(system) -> Candidate:
    """A fact no step breaks: ``read`` is none while ``outcome`` is none."""
    return Candidate("read none while no outcome", (("r", "Req"),), lambda st, r: z3.Implies(
        st.outcome(r) == code(system, "outcome_none"), st.read(r) == code(system, "read_none")))


def small_spec(requests=(("A", 1), ("B", 2), ("A", 3)), decode_pages=3, prefill_pages=2):
    """v0.5.22's engine on a small instance: by default a one-page and a two-page request of two
    tenants and an over-long one (rejected at both doors)."""
    cfg = builtin("v0.5.22").config
    return PdProtocol(dataclasses.replace(cfg, requests=tuple(Request(t, p) for t, p in requests),
                                          decode_pages=decode_pages, prefill_pages=prefill_pages,
                                          context_limit=max(p for _, p in requests)))


def test_houdini_drops_what_a_step_breaks_and_keeps_an_inductive_fact(hook):
    """Alone, no_write_after_release is not inductive (a write may be issued into a page the
    state says is someone else's), so Houdini drops it with a counterexample to induction at
    ``kv_transfer_write``; a trivially inductive fact (``read`` is never ``foreign`` or
    ``cross_tenant`` while ``outcome`` is none) survives."""
    system = hook.system
    claim = next(c for c in system.claims() if c.name == "no_write_after_release")
    res = houdini(system, [claim, read_none_fact(system)], 120)
    assert res.status == "done"
    assert [c.name for c in res.kept] == ["read none while no outcome"]
    assert "no_write_after_release" in res.counterexamples
    assert "kv_transfer_write" in res.counterexamples["no_write_after_release"]


def test_a_certificate_checks_and_a_tampered_one_fails(hook, tmp_path):
    """The certificate of a small inductive set passes stock z3 and cvc5 (every obligation
    unsat); the same file with a non-inductive conjunct added, or with an obligation's negation
    removed, fails."""
    system = hook.system
    fact = read_none_fact(system)
    good = tmp_path / "good.smt2"
    good.write_text(headed(system, [fact]))
    check = solve(good)
    assert check.problems == ["'; proves:' names no claim"]  # an invariant that states no claim proves nothing
    assert {a for answers in check.answers.values() for a in answers.values()} == {"unsat"}
    assert len(check.obligations) == 1 + len(system.actions)
    claim = next(c for c in system.claims() if c.name == "no_write_after_release")
    bad = tmp_path / "bad.smt2"
    bad.write_text(headed(system, [fact, claim]))
    check = solve(bad)
    assert not check.ok
    assert any("kv_transfer_write" in f for f in check.failures())
    text = good.read_text()
    tampered = tmp_path / "tampered.smt2"
    tampered.write_text(text.replace("(assert (not ", "(assert (", 1))  # Init => Inv turned into Init and Inv
    with pytest.raises(CertificateError, match="does not end with"):
        solve(tampered)


@pytest.mark.slow
def test_a_pre_fix_scenario_is_refuted_at_its_own_size(tmp_path):
    """abort-race (before the drain fix) is never proved: the explicit engine at its size finds the
    shortest counterexamples (the lengths `kvproof check` finds), exit 1."""
    r = prove_all_sizes(builtin("abort-race"), 300, traces_dir=None)
    assert r.exit_code == 1
    assert r.verdicts["decode_reads_only_own_pages"] == "violated"
    assert r.verdicts["no_write_after_release"] == "violated"
    assert len(r.traces["decode_reads_only_own_pages"].trace) == 15
    assert len(r.traces["no_write_after_release"].trace) == 6
    assert r.houdini is None and r.certificate is None


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


def test_vllms_pre_fix_twin_is_refuted_at_its_own_size():
    """vllm-pull-abort-before-32255 (before the fix) is never proved: the explicit engine at its
    size finds the shortest counterexamples (`kvproof check`'s lengths), exit 1."""
    r = prove_all_sizes(builtin("vllm-pull-abort-before-32255"), 300, traces_dir=None)
    assert r.exit_code == 1
    assert {n for n, v in r.verdicts.items() if v == "violated"} == {
        "decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release"}
    assert len(r.traces["no_write_after_release"].trace) == 4
    assert len(r.traces["decode_reads_only_own_pages"].trace) == 11
    assert r.houdini is None and r.certificate is None


@pytest.mark.thorough  # about 4 minutes of one core: the whole pipeline on SGLang's placeholder instance
def test_a_claim_a_mined_instance_breaks_is_violated_and_one_not_made_inductive_is_inconclusive():
    """pr-35049-drain-ack queues over-long prompts: the placeholder instance mined beside the
    scenario breaks decode_reads_only_own_pages (violated at that size, exit 1: H1 is not fixed
    by this engine, only out of reach at the scenario's own size), and no_cross_tenant_read is
    not made inductive by the candidates (inconclusive); neither is ever proved."""
    r = prove_all_sizes(builtin("pr-35049-drain-ack"), 300)
    assert r.exit_code == 1
    assert r.verdicts["decode_reads_only_own_pages"] == "violated"
    assert r.verdicts["no_cross_tenant_read"] == "inconclusive"
    assert "not for every size" in r.reason and "do not make no_cross_tenant_read inductive" in r.reason
    assert r.certificate is None


def test_one_element_triples_keep_only_facts_of_one_request():
    """``--template-arity 3`` adds the three-value facts whose slots all belong to one request
    (or one page): a triple over two requests is left out, one over one request kept."""
    from kvproof.checker.allsizes.prove import one_element_triples
    spec = small_spec((("A", 1), ("A", 1)), 2, 1)
    lay = spec.layout
    one = ((lay.slot("p_phase", 0), 2), (lay.slot("p_abort", 0, 0), 0), (lay.slot("d_phase", 0), 5))
    two = ((lay.slot("p_phase", 0), 2), (lay.slot("p_abort", 0, 0), 0), (lay.slot("d_phase", 1), 5))
    pair = ((lay.slot("p_phase", 0), 2), (lay.slot("d_phase", 0), 5))
    assert one_element_triples(spec, [one, two, pair]) == [one]


@pytest.fixture(scope="module")
def joined(hook):
    """The joined templates of the lifted model's small instance (two one-page requests on 2 + 1
    pages; 51,492 reachable states)."""
    from kvproof.checker.symbolic.lemmas import explore_all
    from kvproof.model.machine import Machine
    states, _ = explore_all(Machine(hook.small))
    assert len(states) == 51_492
    return hook, {j.name: j for j in hook.joins(states)}


def test_joined_templates_find_the_facts_through_a_pointer(joined):
    """Mining through ``dest`` and ``src`` finds the facts the read claims need and that no
    template over named slots gives: a waiting request's landed chunk's page never holds
    another request's KV (and a landed chunk's page is never unwritten); a sending request's
    source page is never another's.  Counts pinned (a wrong join, e.g. a page column read at the
    wrong page, moves them).  A request-valued column is coded relative to the row's request
    (0 NONE, 1 itself, 2 another)."""
    from kvproof.checker.allsizes.prove import mine_joined
    hook, js = joined
    assert set(js) == {"dest", "src"}
    dest, src = js["dest"], js["src"]
    assert dest.columns[-2:] == ("owner", "content") and src.columns[-2:] == ("src_owner", "src_content")
    assert dest.targets == frozenset({len(dest.columns) - 2, len(dest.columns) - 1})
    col = lambda j, name: j.columns.index(name)
    df = {frozenset(f) for f in mine_joined(dest, 3)}
    sf = {frozenset(f) for f in mine_joined(src, 3)}
    assert (len(mine_joined(dest, 2)), len(df), len(mine_joined(src, 2)), len(sf)) == (36, 119, 19, 36)
    assert frozenset({(col(dest, "d_phase"), D_WAITING), (col(dest, "wr"), WR_LANDED), (col(dest, "content"), 2)}) in df
    assert frozenset({(col(dest, "wr"), WR_LANDED), (col(dest, "content"), 0)}) in df  # landed: never unwritten
    assert frozenset({(col(src, "p_phase"), P_SENDING), (col(src, "src_owner"), 2)}) in sf
    # every fact names the page pointed to; the lifted formula is over (r, c) only, the page a term
    assert all(any(j in dest.targets for j, _ in f) for f in df)
    cand = dest.lift(next(iter(f for f in mine_joined(dest, 3) if len(f) == 3)))
    assert [s for _, s in cand.vars] == ["Req", "Chunk"] and "(dest r0 c1)" in cand.name


def test_a_joined_fact_lifts_to_what_it_says(joined):
    """The lifted "waiting ∧ landed → content(dest) is mine" is false in a bounded state where
    the page holds another request's KV, true where it holds the request's own."""
    hook, js = joined
    dest = js["dest"]
    sys_ = hook.system
    col = dest.columns.index
    fact = ((col("d_phase"), D_WAITING), (col("wr"), WR_LANDED), (col("content"), 2))
    cand = dest.lift(fact)
    universe, axioms = sys_.bounded({"Req": 3, "Page": 2, "PPage": 2, "Chunk": 1, "Tenant": 1})
    st = sys_.state()
    r, p = universe["Req"][1], universe["Page"][1]  # element 0 of each is its NONE
    c = universe["Chunk"][0]
    base = [axioms, st.pages(r, c), st.dest(r, c) == p, st.d_phase(r) == code(sys_, "d_phase_waiting"),
            st.wr(r, c) == code(sys_, "write_landed")]
    for holder, sat in ((universe["Req"][2], z3.unsat), (r, z3.sat)):
        s = z3.Solver()
        s.add(*base, st.content(p) == holder, sys_.formula(cand, st, universe))
        assert s.check() == sat


@pytest.mark.thorough
def test_v0522_is_proved_for_every_size(tmp_path):
    """The full run (about twenty minutes of CPU): every target claim of v0.5.22 proved for every
    number of requests, decode pages and prefill pages, and the invariant minimised."""
    r = prove_all_sizes(builtin("v0.5.22"), 3600, certificates_dir=tmp_path)
    assert r.exit_code == 0, (r.reason, r.verdicts)
    assert set(r.verdicts) == set(TARGETS)
    assert r.minimised.status == "done" and len(r.invariant) == len(r.minimised.kept) < len(r.houdini.kept)


class ToySystem(ParametricSystem):
    """A toy parametric system for the minimiser: per request four flags, all false at first;
    ``set_a`` sets ``a`` where ``c`` holds, ``set_b`` sets ``b`` where ``a`` holds, ``flip_d``
    flips ``d``.  The claim "never ``b``" needs "never ``a``", which needs "never ``c``"."""

    uninterpreted = ("Req",)

    def __init__(self):
        self.sorts = {"Req": z3.DeclareSort("Req")}
        self.enums = {}
        self.symbols = tuple(Symbol(f"toy_{x}", ("Req",), "Bool") for x in "abcd")
        self.rigid, self.constants = (), ()

        def setter(flag, guard):
            def step(st, p, ch):
                r, f = p["r"], getattr(st, f"toy_{flag}")
                return Step(getattr(st, f"toy_{guard}")(r), {f"toy_{flag}": lambda x: z3.Or(f(x), x == r)})
            return Action(f"set_{flag}", (("r", "Req"),), (), step)

        def flip(st, p, ch):
            r = p["r"]
            return Step(z3.BoolVal(True), {"toy_d": lambda x: z3.If(x == r, z3.Not(st.toy_d(x)), st.toy_d(x))})
        self.actions = (setter("a", "c"), setter("b", "a"), Action("flip_d", (("r", "Req"),), (), flip))

    def init(self, st):
        """Every flag false."""
        r = z3.Const("r", self.sorts["Req"])
        return z3.ForAll([r], z3.And([z3.Not(getattr(st, f"toy_{x}")(r)) for x in "abcd"]))

    def claims(self):
        """Never ``b``."""
        return [Candidate("toy_never_b", (("r", "Req"),), lambda st, r: z3.Not(st.toy_b(r)), claim=True)]


def _toy_invariant(system):
    never = lambda x: Candidate(f"never {x}", (("r", "Req"),), lambda st, r: z3.Not(getattr(st, f"toy_{x}")(r)))
    not_both = lambda x: Candidate(f"not {x} and d", (("r", "Req"),),
                                   lambda st, r: z3.Not(z3.And(getattr(st, f"toy_{x}")(r), st.toy_d(r))))
    return [never("a"), not_both("a"), never("c"), not_both("c"), *system.claims()]


def test_minimise_keeps_what_the_claim_needs():
    """On the toy: of an inductive invariant of five conjuncts the minimiser keeps the claim and
    the chain it needs (never a, never c), drops the two it does not, and its fresh check passes;
    the same invariant read back from its certificate's text (:func:`candidates_from`)
    minimises the same way."""
    from kvproof.checker.allsizes.quantified import candidates_from, minimise
    system = ToySystem()
    inv = _toy_invariant(system)
    assert not inductive_problems(system, inv)
    m = minimise(system, inv, 60)
    assert m.status == "done" and m.found == 5
    assert [c.name for c in m.kept] == ["never a", "never c", "toy_never_b"]
    text, _ = invariant_of(headed(system, inv))
    back = candidates_from(system, text)
    assert [c.claim for c in back] == [False] * 4 + [True]
    assert len(minimise(system, back, 60).kept) == 3


def test_a_minimiser_that_keeps_too_few_is_caught(tmp_path):
    """A mutant minimiser whose cores leave out a needed lemma (never c) keeps a set that is not
    inductive, and is never "done": the next pass over that set, or the fresh check of it,
    names the step that breaks it (set_a); the certificate of that set fails in z3 and cvc5.  A
    mutant that keeps the claim alone is caught by the fresh check (set_b breaks it)."""
    from kvproof.checker.allsizes.quantified import _cores, minimise
    system = ToySystem()
    inv = _toy_invariant(system)

    def drops_c(*args):
        need, why = _cores(*args)
        return need - {"never c"}, why
    m = minimise(system, inv, 60, cores=drops_c)
    assert m.status != "done" and "set_a" in m.status
    too_few = [c for c in inv if c.name in ("never a", "toy_never_b")]
    assert any("set_a" in p for p in inductive_problems(system, too_few))
    bad = tmp_path / "bad.smt2"
    bad.write_text(headed(system, too_few))
    check = solve(bad)
    assert not check.ok and any("set_a" in f for f in check.failures())

    def claims_only(system_, inv_, goals, *rest):  # takes the claims for inductive alone
        return set(goals), ""
    m = minimise(system, inv, 60, cores=claims_only)
    assert [c.name for c in m.kept] == ["toy_never_b"]
    assert m.status.startswith("the kept set is not inductive") and "set_b" in m.status


def test_the_drop_pass_leaves_an_irredundant_invariant():
    """On the toy's whole inductive invariant (five conjuncts, none removed by a closure) the
    greedy drop pass leaves the claim and its chain (never a, never c): each "not x and d" goes
    (the rest stay inductive), "never a" and "never c" stay (set_b, set_a break the rest), and
    the last pass removes nothing, so the result is irredundant and checked."""
    from kvproof.checker.allsizes.quantified import MinimiseResult, drop_redundant, preserved
    system = ToySystem()
    inv = _toy_invariant(system)
    m = drop_redundant(system, MinimiseResult(list(inv), len(inv)), 60)
    assert m.status == "done" and m.irredundant and not m.drop_note
    assert sorted(c.name for c in m.kept) == ["never a", "never c", "toy_never_b"] and m.dropped == 2
    assert m.drop_checks == 4 + 2  # first pass: four lemmas tried; second: the two left, none removed
    assert not inductive_problems(system, m.kept)
    assert preserved(system, m.kept, time.perf_counter() + 60) == ""
    assert preserved(system, [c for c in m.kept if c.name != "never c"], time.perf_counter() + 60).startswith("set_a: sat")


def test_a_drop_pass_that_drops_too_much_is_undone():
    """A mutant check that calls every set inductive would drop every lemma; the fresh check
    catches it (set_b), the closure's set is restored, and nothing is called irredundant."""
    from kvproof.checker.allsizes.quantified import MinimiseResult, drop_redundant
    system = ToySystem()
    inv = _toy_invariant(system)
    m = drop_redundant(system, MinimiseResult(list(inv), len(inv)), 60, check=lambda *a: "")
    assert m.status == "done" and not m.irredundant and m.dropped == 0
    assert m.drop_note.startswith("undone") and "set_b" in m.drop_note
    assert [c.name for c in m.kept] == [c.name for c in inv]




def test_a_join_reads_a_field_over_a_fixed_domain_one_column_per_value():
    """At two prefill ranks with per-rank WRITEs (vllm-push-write-post-fails) decode's block
    holds one part per rank (``content[w, block]``) and each rank has its WRITE and its
    notification (``wr[r, w]``, ``wnotif[r, w]``): the join through ``dest`` reads them as one
    column per rank (before, fields over a fixed domain were left out, and the join held no
    ``content`` at all: 20 facts).  Counts pinned; a fact on rank 1's part lifts to a formula on
    ``content`` at rank 1 of the pointed block, never at rank 0."""
    from kvproof.checker.allsizes.prove import all_sizes_model, mine_joined
    from kvproof.checker.symbolic.lemmas import explore_all
    from kvproof.model.machine import Machine
    hook, _ = all_sizes_model(builtin("vllm-push-write-post-fails").build())
    states, _ = explore_all(Machine(hook.small))
    assert len(states) == 23_055
    js = {j.name: j for j in hook.joins(states)}
    dest = js["dest"]
    assert {"wr[0]", "wr[1]", "wnotif[0]", "wnotif[1]"} <= set(dest.columns)
    assert dest.columns[-3:] == ("owner", "content[0]", "content[1]")
    facts = mine_joined(dest, 3)
    assert (len(facts), len(mine_joined(js["src"], 3))) == (154, 63)
    for w in (0, 1):
        col = dest.columns.index(f"content[{w}]")
        on = [f for f in facts if any(j == col for j, _ in f) and all(j == col or j not in dest.targets for j, _ in f)]
        assert on, w
        for f in on:
            name = dest.lift(f).name
            assert f"(content prefill_rank_w{w} (dest r0))" in name and f"(content prefill_rank_w{1 - w} " not in name, name
