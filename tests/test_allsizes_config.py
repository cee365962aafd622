"""Candidates conditioned on per-element configuration (``ClauseLifter.conditioned``,
``add_conditioned`` in ``checker/allsizes/prove.py``).

A request's over-long flag is rigid configuration (a ``per_element`` condition of the spec, not
a state slot), so a fact that only an over-long request shows in the small instances ("its poll
is never success") lifts, unconditioned, to a formula that a one-page request breaks.  The
conditioned form ``over_long(r) → ¬(poll(r) = success)`` is what ``pr-36988`` needs: it holds on
every reachable state of both of that engine's small instances, where the unconditioned one does
not; a lifter without the configuration column (the mutant) mines nothing of the kind.  An engine
whose small instances never show a condition both ways (``v0.5.22``: no over-long request is
mined) gets no conditioned candidate, so its mining is unchanged."""

from __future__ import annotations

import z3

from kvproof.checker.allsizes.link import related
from kvproof.checker.allsizes.prove import add_conditioned, all_sizes_model
from kvproof.checker.allsizes.quantified import Candidate
from kvproof.checker.symbolic.lemmas import explore_all
from kvproof.checker.symbolic.lift import field_slots
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin


def hook_of(name: str):
    """The lifted all-sizes model of scenario ``name``."""
    hook, why = all_sizes_model(builtin(name).build())
    assert hook is not None, why
    return hook


def holds_everywhere(lifter, cand: Candidate) -> bool:
    """Whether ``cand`` is true in every reachable state of the lifter's small instance (read
    through the link: the state's slots as the model's symbols, the rigid symbols as the
    instance has them, on the bounded universe of its elements); stops at the first it breaks."""
    link = lifter.link
    system = lifter.system
    states, _ = explore_all(Machine(lifter.small))
    st = system.state()
    s = z3.Solver()
    s.add(link.axioms, *link.rigid(st), z3.Not(system.formula(cand, st, link.universe)))
    return not any(s.check(*related(link, [{int(v): True} for v in row], st)) == z3.sat for row in states)


def poll_success(lifter, r: int) -> tuple:
    """The one-literal clause "request ``r`` polled success" of the lifter's small instance."""
    small = lifter.small
    slot = field_slots(small.layout).index(("poll", (r, 0)))
    code = small.layout.by_name["poll"].values.labels.index("success")
    return ((slot, code),)


def test_an_over_long_requests_fact_is_mined_conditioned_on_its_flag():
    hook = hook_of("pr-36988")
    one_page, mixed = hook.lift, hook.more[0][1]
    assert mixed.small.over_long(0) and not mixed.small.over_long(1)
    assert mixed.informative == {"over_long"} == one_page.informative
    signature, cand = mixed.conditioned(poll_success(mixed, 0))
    assert signature == (True,)
    assert cand.name == ("(forall ((r0 Req)) (let ((a!1 (not (and (= (poll r0) poll_success))))) "
                         "(=> (and (distinct r0 rnone) (over_long r0)) a!1)))")
    base = mixed(poll_success(mixed, 0))
    assert "over_long" not in base.name
    # the conditioned form holds on every reachable state of the mixed instance; the
    # unconditioned one is broken there where its one-page request polls success
    assert holds_everywhere(mixed, cand)
    assert not holds_everywhere(mixed, base)
    # the one-page request of the mixed instance is pinned the other way
    assert mixed.conditioned(poll_success(mixed, 1))[0] == (False,)


def test_a_lifter_without_the_configuration_column_mines_no_such_candidate():
    """The mutant: the over-long flag not a column (``informative`` empty), so the fact has
    only its unconditioned lift, which a one-page request breaks (Houdini drops it)."""
    mixed = hook_of("pr-36988").more[0][1]
    mixed.informative = set()
    assert mixed.conditioned(poll_success(mixed, 0)) is None
    assert "over_long" not in mixed(poll_success(mixed, 0)).name


def test_only_facts_seen_under_some_configurations_get_a_conditioned_form():
    """A candidate mined for an over-long and a one-page request alike needs no condition; one
    mined for one of them only is added conditioned on that configuration."""
    def cand(name):
        return Candidate(name, (), lambda st: z3.BoolVal(True))
    cands = {"both": cand("both"), "once": cand("once")}
    variants = {"both": {(True,): cand("both|T"), (False,): cand("both|F")}, "once": {(True,): cand("once|T")}}
    assert add_conditioned(cands, variants) == 1
    assert set(cands) == {"both", "once", "once|T"}
    assert add_conditioned(cands, variants) == 0  # already there


def test_an_engine_whose_instances_never_vary_a_condition_gets_none():
    """``v0.5.22`` rejects over-long prompts at the door: its one small instance has none, so the
    flag is no column and its candidates (and committed certificate) are as before."""
    hook = hook_of("v0.5.22")
    assert hook.lift.informative == set()
    assert hook.lift.conditioned(poll_success(hook.lift, 0)) is None
