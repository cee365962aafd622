"""The lift to sorts (model/sorted_lift.py) and its automatic link (checker/allsizes/sorted_link.py).

v0.5.22's engine is lifted from the spec itself: the actions, their case splits, the rigid
symbols, the abstractions the lift prints and the claims it states are pinned; the link proves,
with no hypothesis, that every spec step is a step of the lifted model (and Init and the five
claims agree) at three sizes other than the one lifted from; mutants of the lift (a dropped
update, a flipped quantifier, a dropped case, the sentinel guard removed) are refuted by the link
with the offending action or claim named; what cannot be lifted is refused with the spec's file
and line.  The same for vLLM's pull engine (vllm-pull-abort-32255) and for pr-41404 (over-long
prompts, a placeholder's first chunk, a derived count); and the pieces ``prove --all-sizes``
adds (clauses lifted, lines, the link first).  The scenario's own size and the
larger links are in the thorough tier."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import z3

from kvproof.checker.allsizes.sorted_link import check_lifted_link, link_map
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


def test_abstractions_are_derived_and_name_their_function(lifted):
    """The lift prints what it over-approximates, each with the helper or the spec's function that
    needed it (never a line number, which an unrelated edit moves): FIFO doors, lowest-numbered
    allocation (decode and prefill pools), in-order chunks; nothing else (the clock's "some timer
    moves" and the read classification are exact)."""
    lines = lifted.abstractions
    assert len(lines) == 4, lines
    assert lines[0] == "arrivals in any order (the spec: FIFO doors) [PdProtocol.in_order]"
    alloc = "takes any free entries (the spec: the lowest-numbered) [spec/sglang/protocol.py:PdProtocol.allocate]"
    assert f"allocation from owner {alloc}" in lines and f"allocation from src_owner {alloc}" in lines
    assert any(line.startswith("a request's chunks issued in any order") and "chunk_in_order" in line for line in lines)


@pytest.mark.parametrize("requests,decode_pages,prefill_pages", [
    ((("A", 1),), 1, 1),                       # one request
    ((("A", 1), ("B", 1)), 2, 1),              # two tenants, one source page
    ((("A", 2), ("A", 1)), 3, 2),              # one tenant, a two-page request
], ids=["1req", "2req-2tenants", "2req-1tenant-2pages"])
def test_the_link_is_proved_without_hypotheses(lifted, requests, decode_pages, prefill_pages):
    """At three sizes other than the scenario's (lifted from 3 requests on 2 pages): Init, every
    spec action instance (each a step of a lifted action of its name, any case) and the five
    claims, for every typed state (no invariant assumed)."""
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


class Fold(PdProtocol):
    """A variant whose claim folds a loop's list into ``o.or_`` (the one symbolic element would
    stand for every request: refused, ``o.any_`` says it)."""

    @invariant
    def some_request_started(self, s):
        o = s.ops
        return o.all_(o.or_(s.p_phase[x] != P_NEW, *[s.d_phase[r] != 0 for r in self.k.req]) for x in self.k.req)


def test_a_fold_into_or_is_refused():
    m = lift_spec(Fold(builtin("v0.5.22").config))
    why = m.refused["some_request_started"]
    assert why.startswith(f"tests/{HERE}:{_line_of(Fold, 'o.all_(o.or_(')}:") and "or_ joins a finished loop's element" in why


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


# -- the all-sizes pipeline's pieces for the lifted model ------------------------------------------

def test_a_mined_clause_lifts_to_a_quantified_candidate(lifted):
    """A ground clause of the small instance (slot values never seen together) becomes a
    candidate over variables: its request, chunk and page distinct and not NONE, the chunk one of
    the request's pages as in the small instance; a clause naming old KV has no counterpart."""
    from kvproof.checker.symbolic.lift import field_slots
    from kvproof.checker.allsizes.sorted_allsizes import ClauseLifter
    small = lifted.spec.small_instances()[0]
    lift = ClauseLifter(lifted, small)
    slots = field_slots(small.layout)
    wr = slots.index(("wr", (0, 0, 0)))
    dest = slots.index(("dest", (0, 0)))
    owner = slots.index(("owner", (1,)))
    content = slots.index(("content", (0, 0)))
    cand = lift(((wr, 2), (dest, 1)))  # R0's write in flight, R0's chunk 0 at page p1
    assert cand.vars == (("r0", "Req"), ("p1", "Page"), ("c2", "Chunk"))
    assert cand.name == ("(forall ((r0 Req) (p1 Page) (c2 Chunk)) (let ((a!1 (not (and (= (wr r0 c2) write_in_flight_0) "
                         "(= (dest r0 c2) p1))))) (=> (and (distinct r0 rnone) (distinct p1 pnone) (pages r0 c2)) a!1)))")
    assert "(= (owner p1) rnone)" in lift(((owner, 0), (dest, 1))).name
    assert lift(((content, 3),)) is None  # old:A, KV of a room's earlier request: not in the model
    f = lifted.formula(cand, lifted.state())
    assert z3.is_quantifier(f) and f.is_forall()


def test_the_lifted_all_sizes_model_states_the_lifts_lines():
    from kvproof.checker.allsizes.sorted_allsizes import lifted_model
    spec = builtin("v0.5.22").build()
    hook = lifted_model(spec)
    assert hook.targets == TARGETS
    assert any(line.startswith("configuration per element, any value: over_long(request), pages(request, chunk)")
               for line in hook.fixed)
    assert any("prefill_rank (1)" in line for line in hook.fixed)
    assert hook.abstractions == tuple(hook.system.abstractions) and len(hook.abstractions) == 4


def test_the_pipeline_certify_and_the_link_use_the_lifted_model():
    """``all_sizes_model`` is the one model of prove --all-sizes, certify and --link: the lift of
    the scenario's own spec; a spec without sorts has none, with the reason."""
    from kvproof.checker.allsizes.prove import all_sizes_model
    from kvproof.model.sorted_lift import LiftedSystem
    hook, why = all_sizes_model(builtin("v0.5.22").build())
    assert why == "" and isinstance(hook.system, LiftedSystem) and hook.targets == TARGETS
    spec = builtin("v0.5.22").build()
    spec.lift_sorts = lambda: None
    hook, why = all_sizes_model(spec)
    assert hook is None and why.endswith("declares no sorts to lift to or no small instance to mine")


def test_lifted_is_no_longer_an_option():
    """The lifted model is the default: ``--lifted`` is an unknown option (exit 3, one line)."""
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "kvproof", "prove", "--all-sizes", "v0.5.22", "--lifted"],
                         capture_output=True, text=True)
    assert run.returncode == 3 and "unrecognized argument: --lifted" in run.stderr


# -- vLLM: the pull-mode engine of vllm-pull-abort-32255 ---------------------------------------------

@pytest.fixture(scope="module")
def vllm_lifted():
    return lift_spec(builtin("vllm-pull-abort-32255").build())


def vllm_instance(tenants, decode_blocks, prefill_blocks):
    from kvproof.spec.vllm.config import Request as VRequest
    spec = builtin("vllm-pull-abort-32255").build()
    return type(spec)(dataclasses.replace(spec.cfg, requests=tuple(VRequest(t) for t in tenants),
                                          decode_blocks=decode_blocks, prefill_blocks=prefill_blocks))


def test_the_lifted_vllm_model(vllm_lifted):
    """Every enabled action of the pull engine, requests and both block pools as sorts, one block
    per request (nullary allocation choices), the tenant a rigid function; three abstractions
    (any free block in both pools, arrivals in any order), derived; the six safety claims lifted (``pages_conserved`` too: its loops go through
    the block domains and aggregate with ``o.any_``)."""
    m = vllm_lifted
    assert [a.name for a in m.actions] == [
        "prefill_request_finished", "prefill_get_new_notifs", "prefill_reap_expired_lease", "decode_on_new_request",
        "decode_start_load_kv", "decode_finished_recving", "decode_abort", "nixl_read_take_data",
        "nixl_read_complete", "clock_tick"]
    assert set(m.uninterpreted) == {"Req", "Block", "PBlock", "Tenant"}
    assert [s.name for s in m.rigid] == ["tenant"]
    lines = m.abstractions
    assert len(lines) == 3 and lines[0].startswith("requests reach prefill in any order")
    assert sum(line.startswith("allocation from") for line in lines) == 2
    assert [c.name for c in m.claims()] == [*TARGETS, "pages_conserved"]
    assert m.refused == {}


@pytest.mark.parametrize("tenants,decode_blocks,prefill_blocks", [
    (("A",), 1, 1), (("A", "A"), 2, 1), (("A", "B", "B"), 2, 3)], ids=["1req", "2req-1tenant", "3req-2tenants"])
def test_the_vllm_link_is_proved_without_hypotheses(vllm_lifted, tenants, decode_blocks, prefill_blocks):
    """At three sizes other than the scenario's (1 request on 1 + 1 blocks, 2 of one tenant on
    2 + 1, 3 of two tenants on 2 + 3): Init, the 10 actions and the six claims, no hypothesis."""
    rep = check_lifted_link(vllm_lifted, vllm_instance(tenants, decode_blocks, prefill_blocks))
    assert rep.proved, refuted(rep)
    assert len([r for r in rep.results if r.kind == "step"]) == 10
    assert {r.name for r in rep.results if r.kind == "claim"} == {*TARGETS, "pages_conserved"}


def test_vllm_mutant_dropped_update_is_refuted():
    """A lift of the pull engine that forgets to free the block when an aborted load finishes."""
    m = lift_spec(builtin("vllm-pull-abort-32255").build())
    m.actions = tuple(a if a.name != "decode_finished_recving" else Action(
        a.name, a.params, a.choices,
        lambda st, p, c, inner=a.step: Step(inner(st, p, c).guard,
                                            {k: v for k, v in inner(st, p, c).updates.items() if k != "owner"}), a.doc)
        for a in m.actions)
    rep = check_lifted_link(m, vllm_instance(("A", "B"), 1, 2), claims=False)
    assert set(refuted(rep)) == {("step", "decode_finished_recving")}


# -- pr-41404: over-long prompts with a one-chunk placeholder ------------------------------------------

def test_pr41404_lifts_with_the_placeholder_chunk_and_a_derived_count():
    """With pending errors (no rejection at prefill's door), an over-long request sends one
    chunk, chunk 0 (the sort's constant ``cfirst``); ``send_len`` of a loop's request is a rigid
    count defined by the spec's own body, case by case (over-long: the first chunk; otherwise its
    pages), and the five claims lift."""
    m = lift_spec(builtin("pr-41404").build())
    assert ("cfirst", "Chunk") in m.constants
    assert [s.name for s in m.rigid] == ["over_long", "pages", "tenant", "send_len"]
    assert "prefill_forward.over_long" in [a.name for a in m.actions]
    assert [c.name for c in m.claims()] == list(TARGETS)
    axioms = str(m.background(m.state()))
    assert "over_long(send_len!request0)" in axioms and "cfirst" in axioms and "pages(send_len!request0" in axioms


@pytest.mark.parametrize("requests,decode_pages,prefill_pages", [
    pytest.param((("A", 1),), 1, 2, marks=pytest.mark.thorough), ((("A", 2), ("B", 1)), 2, 1),
    pytest.param((("A", 1), ("A", 2), ("B", 1)), 2, 1, marks=pytest.mark.thorough)],
    ids=["1req", "over-long+short", "3req"])
def test_the_pr41404_link_is_proved(requests, decode_pages, prefill_pages):
    """At sizes with and without an over-long request (its placeholder path)."""
    spec = builtin("pr-41404").build()
    m = lift_spec(spec)
    inst = type(spec)(dataclasses.replace(spec.cfg, requests=tuple(Request(t, p) for t, p in requests),
                                          decode_pages=decode_pages, prefill_pages=prefill_pages, context_limit=2))
    rep = check_lifted_link(m, inst)
    assert rep.proved, refuted(rep)


# -- prove --all-sizes: the link first, then the pipeline -------------------------------------

def test_a_lifted_model_that_is_not_the_specs_is_not_used():
    """The pipeline proves the link first (the protocol's link instances, then the scenario's own
    size); a mutant of the lift is stopped at the first size that refutes it."""
    from kvproof.checker.allsizes.sorted_allsizes import link_at_sizes, lifted_model
    spec = builtin("v0.5.22").build()
    hook = lifted_model(spec)
    m = hook.system
    m.actions = tuple(a if a.name != "decode_release_deferred" else Action(
        a.name, a.params, a.choices,
        lambda st, p, c, inner=a.step: Step(inner(st, p, c).guard,
                                            {k: v for k, v in inner(st, p, c).updates.items() if k != "owner"}), a.doc)
        for a in m.actions)
    lines, problem = link_at_sizes(m, spec)
    assert lines == []
    assert problem.startswith("the lifted model is not linked to the spec at 1 request(s) of 1 page(s), "
                              "1 decode and 1 prefill page(s): step decode_release_deferred refuted (decode_release_deferred(req=R0))")


def test_prove_all_sizes_lifted_refuses_a_scenario_unsafe_at_its_own_size(tmp_path, capsys):
    """abort-race (before the fix) lifts, but the explicit engine breaks its claims at its own
    size first: exit 1, nothing proved."""
    from kvproof.checker.cli import main
    code = main(["prove", "--all-sizes", "abort-race", "--certificates", str(tmp_path / "c"),
                 "--traces", str(tmp_path / "t")])
    out = capsys.readouterr().out
    assert code == 1
    assert "violated" in out and "decode_reads_only_own_pages" in out


@pytest.mark.parametrize("name,why", [
    ("pr-35049-any-free-pages", r"spec/sglang/protocol\.py:\d+: TypeError: Expected int as r \(plain Python on a "
                                r"lifted value\) \(action decode_prealloc_pick\)$"),
    ("vllm-pull-full-hit-before-56640", r"the small instances to mine could not be built: engine\.report_notify_only_recv"),
])
def test_plain_python_on_a_lifted_value_is_refused_with_its_line(name, why):
    """A spec whose plain Python cannot take a lifted value (``range()`` of the symbolic page
    count) or whose small instances its own checks refuse is not liftable, said in one line
    naming the spec's line: never a traceback out of ``prove --all-sizes``."""
    from kvproof.checker.allsizes.prove import all_sizes_model
    from kvproof.model.scenario import builtin

    hook, reason = all_sizes_model(builtin(name).build())
    assert hook is None and re.search(why, reason) and "\n" not in reason, reason


def test_a_scalar_field_is_moved_to_the_post_state_and_a_fixed_domain_has_its_values():
    """Two shapes the first lifted vLLM heartbeat and push-rank scenarios met: a step that
    updates a scalar field (decode's heartbeat age, a symbol without arguments) moves a term to
    the post-state by substitution (``substitute_funs`` alone refused it: "function pairs
    expected"); and a bounded instance quantifies over a domain kept at the scenario's size
    (prefill ranks, an enumeration) by its values (it had no universe entry: a KeyError)."""
    from kvproof.checker.allsizes.prove import all_sizes_model
    from kvproof.checker.allsizes.quantified import updated
    from kvproof.model.scenario import builtin

    hook, why = all_sizes_model(builtin("vllm-pull-heartbeat").build())
    system = hook.system
    pre = system.state()
    beat = next(a for a in system.actions if a.name == "decode_send_heartbeats")
    params = {p: z3.Const(f"beat!{p}", system.sort(sort)) for p, sort in beat.params}
    step = beat.step(pre, params, {})
    assert "hb_age" in step.updates
    age = pre.hb_age()
    moved = updated(system, step)(age == age)
    assert not z3.eq(moved, age == age) and z3.eq(moved, step.updates["hb_age"]() == step.updates["hb_age"]())

    hook, why = all_sizes_model(builtin("vllm-push-write-post-fails").build())
    system = hook.system
    ranks = next(s for s in (system.sort(sym_arg) for sym in system.symbols for sym_arg in sym.args)
                 if isinstance(s, z3.DatatypeSortRef))
    system.universe = {}
    try:
        w = z3.Const("w", ranks)
        assert len(system.elements(ranks)) == ranks.num_constructors() == 2
        assert z3.is_and(system.forall([w], w == w)) and len(system.forall([w], w == w).children()) == 2
    finally:
        system.universe = None
