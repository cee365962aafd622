"""vLLM 0.33.0's MultiConnector of NIXL and LMCache on decode (the spec ``vllm-multi-connector``):
an aborted request's receive and send completions.  Pinned state counts and verdicts of its
scenarios, the shortest counterexamples step by step (vLLM issue #46240 in each completion
order), mutants its claims catch, the knobs it refuses and conform's refusal."""

import pytest

from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.vllm.config import Config, Engine, Request
from kvproof.spec.vllm.multi_connector import CONSUMED, FREE, GONE, OWN, WAITING, VllmMultiConnector
from kvproof.spec.vllm.protocol import VllmPd

from .conftest import checked

ASSERT, WRITE, SOURCE, QUIESCENT = ("no_engine_core_assert", "no_read_into_freed_block", "no_save_from_freed_block",
                                    "quiescent_releases_blocks")
BEFORE, SKIP, COUNTED = "vllm-multi-nixl-lmcache-46240", "vllm-multi-nixl-lmcache-skip-untracked", "vllm-multi-nixl-lmcache-counted"

# scenario: (distinct states, the invariants it violates)
CATALOGUE = {
    BEFORE: (26, {ASSERT, WRITE, SOURCE}),
    SKIP: (24, {WRITE, SOURCE}),
    COUNTED: (18, set()),
}

ABORT = "scheduler_finish_requests()"
RECV, SEND, UPDATE = "nixl_get_finished()", "lmcache_get_finished()", "scheduler_update_from_kv_xfer_finished()"


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_state_counts_and_verdicts_are_pinned(name):
    states, violated = CATALOGUE[name]
    rep = checked(name)
    assert builtin(name).protocol == "vllm-multi-connector"
    assert rep.complete and rep.stats.states == states
    assert {c.claim for c in rep.claims if c.kind == "invariant" and c.verdict == "violated"} == violated
    assert all(c.matches for c in rep.claims)
    # no claim is vacuous: an abort owes two completions, and an unaborted request is served
    reached = {c.claim for c in rep.claims if c.kind == "witness" and c.verdict == "reached"}
    assert reached == {"sometimes_abort_owes_two_completions", "sometimes_request_served"}


@pytest.mark.parametrize("after", [SKIP, COUNTED])
def test_each_fix_differs_in_one_knob(after):
    a, b = builtin(BEFORE).config.engine, builtin(after).config.engine
    assert {k for k in vars(a) if getattr(a, k) != getattr(b, k)} == {"completion_tracking"}


def _slot(spec, state, name):
    return state[spec.layout.slot(name)]


@pytest.mark.parametrize("order", [
    (RECV, SEND, UPDATE),            # one step's output holds both
    (RECV, UPDATE, SEND, UPDATE),    # NIXL's receive handled first, LMCache's send later
    (SEND, UPDATE, RECV, UPDATE),    # LMCache's send first, NIXL's receive later
], ids=["same-step", "recv-then-send", "send-then-recv"])
def test_46240_every_completion_order_kills_0_33_0_and_counted_frees_once(order):
    """Each order of vLLM issue #46240's table (and one step) asserts on 0.33.0; with the counted
    fix the same steps free the block once, at the last completion, and the engine lives."""
    spec = builtin(BEFORE).build()
    m = Machine(spec)
    mid = m.run(ABORT, *order[:2])
    if order[1] == UPDATE:  # the first completion handled alone: B freed, R gone, the engine alive
        assert _slot(spec, mid, "block") == FREE and _slot(spec, mid, "phase") == GONE
        assert not m.claim_hits(ASSERT, mid)
        assert m.claim_hits(WRITE if order[0] == SEND else SOURCE, mid)
    end = m.run(*order[2:], state=mid)
    assert m.claim_hits(ASSERT, end)
    fixed_spec = builtin(COUNTED).build()
    fixed = Machine(fixed_spec)
    mid = fixed.run(ABORT, *order[:2])
    if order[1] == UPDATE:
        assert _slot(fixed_spec, mid, "block") == OWN and _slot(fixed_spec, mid, "owed") == 1
    end = fixed.run(*order[2:], state=mid)
    assert _slot(fixed_spec, end, "block") == FREE and _slot(fixed_spec, end, "phase") == GONE
    assert not any(fixed.claim_hits(c, end) for c in (ASSERT, WRITE, SOURCE))


def test_the_skip_keeps_the_engine_alive_but_frees_under_the_read():
    spec = builtin(SKIP).build()
    m = Machine(spec)
    s = m.run(ABORT, SEND, UPDATE, "scheduler_allocate_slots()")
    assert m.claim_hits(WRITE, s)  # another request holds B while NIXL's READ still writes it
    end = m.run(RECV, UPDATE, state=s)
    assert not m.claim_hits(ASSERT, end)


def _verdict(spec, claim):
    m = Machine(spec)
    i = [c.name for c in m.claims].index(claim)
    ex = explore(m, claims=[i])
    assert ex.complete
    return i in ex.hit_at


class CountsOnlySaves(VllmMultiConnector):
    """The count of ``_extra_async_saves`` applied to the scheduler: one owed completion per
    saving connector, none for the pending receive (the first completion frees)."""

    def scheduler_finish_requests(self, s, n):
        super().scheduler_finish_requests(s, n)
        n.owed = 1


class LastCompletionKeeps(VllmMultiConnector):
    """The counted fix without its free: the last completion counts down and frees nothing."""

    def _free_blocks(self, s, n, phase, block, when):
        return phase, block


class SendBeforeAbortWaits(VllmMultiConnector):
    """``finish_requests`` that forgets LMCache's pending save (owes only the receive)."""

    def scheduler_finish_requests(self, s, n):
        o = s.ops
        super().scheduler_finish_requests(s, n)
        n.owed = o.ite(o.and_(o.eq(s.phase, WAITING), o.ne(s.recv, CONSUMED)), 1, 0)


MUTANTS = [
    ("only the saves counted", CountsOnlySaves, WRITE),
    ("the last completion frees nothing", LastCompletionKeeps, QUIESCENT),
    ("the save not counted", SendBeforeAbortWaits, SOURCE),
]


@pytest.mark.parametrize("what,mutant,claim", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_mutant_of_the_fix_is_caught(what, mutant, claim):
    sc = builtin(COUNTED)
    assert sc.expect[claim] == "verified"
    assert not _verdict(sc.build(), claim)
    assert _verdict(mutant(sc.config), claim), f"mutant '{what}' survived"


def test_the_knobs_are_refused_where_they_mean_nothing():
    one = (Request("A"),)
    with pytest.raises(ValueError, match="multi_connector"):
        VllmPd(Config(one, engine=Engine(multi_connector=True)))
    with pytest.raises(ValueError, match="multi_connector"):
        VllmMultiConnector(Config(one, engine=Engine()))
    with pytest.raises(ValueError, match="one request"):
        VllmMultiConnector(Config((Request("A"), Request("B")), engine=Engine(multi_connector=True)))
    assert any("MultiConnector knob" in p for p in Engine(completion_tracking="counted").problems())
    assert any("separate" in p for p in Engine(multi_connector=True, prefix_sharing=True).problems())


def test_conform_refuses_the_model_only_spec_in_one_line():
    from kvproof.spec.vllm.conform.replay import ConformError, harness_for

    sc = builtin(BEFORE)
    with pytest.raises(ConformError, match="model-only.*lmcache"):
        harness_for(sc, sc.build())
