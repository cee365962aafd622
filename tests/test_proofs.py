"""prove_scenario: fixed scenarios proved by both methods, buggy ones refuted with replayed traces,
and a certificate never covers an invariant that does not hold."""

from pathlib import Path

import pytest

from kvproof.checker.certify import recheck
from kvproof.checker.symbolic.proofs import ProofBudget, prove_scenario
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.machine import Machine
from kvproof.model.replay import run_actions
from kvproof.model.scenario import builtin


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixed")
    return prove_scenario(builtin("prefill-abort-propagated"), certificates_dir=d, traces_dir=d)


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    d = tmp_path_factory.mktemp("buggy")
    return prove_scenario(builtin("prefill-abort-unpropagated"), certificates_dir=d, traces_dir=d)


def test_a_fixed_scenario_is_proved_by_both_methods_with_a_certificate(fixed):
    assert all(r.verdict == "proved" and r.lemmas == "proved" and r.induction == "proved" for r in fixed.rows)
    assert all(r.matches for r in fixed.rows)
    rc = recheck(fixed.certificate)
    assert rc.ok and sorted(rc.invariants) == sorted(r.invariant for r in fixed.rows)
    assert fixed.lemma_count > 0 and fixed.houdini_kept > 0


def test_a_buggy_scenario_is_refuted_with_replaying_traces_and_certified_only_for_what_holds(buggy):
    refuted = [r for r in buggy.rows if r.verdict == "refuted"]
    assert refuted and all(r.matches for r in buggy.rows)
    for r in refuted:
        assert r.trace is not None and r.trace_path is not None and r.trace_path.exists()
        assert r.lemmas == "-" and r.induction == "-"
        states = run_actions(r.trace.machine, r.trace.actions)
        assert states == r.trace.states and r.trace.machine.claim_hits(r.invariant, states[-1])
    rc = recheck(buggy.certificate)
    assert rc.ok
    assert not set(rc.invariants) & {r.invariant for r in refuted}


def test_a_budget_too_small_leaves_invariants_inconclusive_never_proved():
    rep = prove_scenario(builtin("prefill-abort-propagated"), ProofBudget(lemma_seconds=0.001, max_k=1))
    assert all(r.verdict == "inconclusive" for r in rep.rows)
    assert rep.certificate is None and rep.lemma_reason


def test_a_failed_k_induction_names_the_state_the_action_and_the_invariant_it_breaks():
    sc = builtin("prefill-abort-propagated")
    rep = prove_scenario(sc, ProofBudget(max_k=1, template_arity=1))
    [failure] = [f for f in rep.failures if f.method == "k-induction"]
    spec = sc.build()
    assert failure.breaks and set(failure.breaks) <= {c.name for c in spec.claims}
    assert failure.action in {Machine(spec).label(i.aid) for i in spec.instances}
    assert failure.changes and failure.unreachable  # the step does something; the state is unreachable
    assert set(failure.state) >= {name for name, _, _ in failure.changes}
    assert all(r.induction == "inconclusive" for r in rep.rows)


@pytest.mark.slow  # about 5 s of Z3
def test_the_three_slot_template_mines_more_facts_and_proves_at_k1():
    # ack-before-register: with the pairwise Houdini lemmas the nine invariants it had were
    # 4-inductive; the three-slot facts made them 1-inductive.  Since release_justified joined
    # them, it strengthens the induction enough that the pairwise lemmas close all ten at k = 1
    # too (a known answer: k-induction assumes every invariant it proves at once)
    sc = builtin("ack-before-register")
    pairwise = prove_scenario(sc, ProofBudget(max_k=1, template_arity=2))
    triples = prove_scenario(sc, ProofBudget(max_k=1, template_arity=3))
    holds = [r.invariant for r in triples.rows if r.expected == "verified"]
    assert len(holds) == 10 and "release_justified" in holds
    assert {r.induction for r in pairwise.rows if r.invariant in holds} == {"proved"}
    assert {r.induction for r in triples.rows if r.invariant in holds} == {"proved"}
    assert {r.verdict for r in triples.rows if r.invariant in holds} == {"proved"}
    assert triples.houdini_candidates > pairwise.houdini_candidates


def test_the_invariant_reads_as_lemmas_over_fields(fixed):
    assert len(fixed.invariant_text) == fixed.lemma_count
    assert all("@pre" not in line and ("≠" in line or "⇒" in line or "∨" in line) for line in fixed.invariant_text)


def test_too_many_states_to_enumerate_is_inconclusive_with_the_reason():
    rep = prove_scenario(builtin("prefill-abort-propagated"), ProofBudget(max_states=5))
    assert all(r.verdict == "inconclusive" for r in rep.rows)
    assert "more than 5 reachable states" in rep.lemma_reason and rep.certificate is None


def test_prove_keeps_the_explicit_engine_s_trace_so_committed_traces_stay_as_they_are(tmp_path):
    # ack-target-cleared: bounded model checking's shortest path differs from the explicit
    # engine's at step 1; prove used to write its own and `check` flipped it back
    name = "ack-target-cleared__quiescent_holds_nothing.itf.json"
    committed = Path(__file__).resolve().parent.parent / "traces" / name
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / name).write_bytes(committed.read_bytes())
    rep = prove_scenario(builtin("ack-target-cleared"), ProofBudget(lemma_seconds=0.001, max_k=1, induction_seconds=1),
                         traces_dir=traces)
    [row] = [r for r in rep.rows if r.verdict == "refuted"]
    assert row.invariant == "quiescent_holds_nothing" and len(row.trace) == 8 and not rep.errors
    assert (traces / name).read_bytes() == committed.read_bytes()
    checked = tmp_path / "check"
    check_scenario(builtin("ack-target-cleared"), traces_dir=checked)
    assert (checked / name).read_bytes() == committed.read_bytes()
