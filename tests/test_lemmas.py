"""Lemma mining and Houdini: known answers on the ring, and what Z3 confirms is inductive."""

import pytest
import z3

from kvproof.checker.symbolic.bmc import EngineError
from kvproof.checker.symbolic.lemmas import block, clause_term, explore_all, houdini, mine
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.machine import Machine

from .ring import Ring

X = 0  # the ring's slots: x, then y


@pytest.fixture(scope="module")
def ring():
    spec = Ring()
    ts = TransitionSystem(spec)
    states, hit = explore_all(Machine(spec))
    return ts, states, hit


def _unsat(*terms):
    s = z3.Solver()
    s.add(*terms)
    return s.check() == z3.unsat


def _inv(ts, clauses, xs=None):
    xs = ts.pre if xs is None else xs
    return z3.And(*[clause_term(xs, c) for c in clauses]) if clauses else z3.BoolVal(True)


def test_explore_all_finds_the_reachable_states_and_first_hits(ring):
    _, states, hit = ring
    assert sorted(map(tuple, states.tolist())) == [(0, 0), (0, 1), (2, 0), (2, 1), (4, 0), (4, 1), (6, 0), (6, 1)]
    assert hit == {"x_never_6": 3, "sometimes_flag": 3}


def test_mine_finds_the_odd_values_never_seen(ring):
    ts, states, _ = ring
    unary = sorted(c[0][1] for c in mine(ts, states) if len(c) == 1 and c[0][0] == X)
    assert unary == [1, 3, 5, 7]


def test_houdini_keeps_what_is_inductive_together_and_drops_the_rest(ring):
    ts, _, _ = ring
    odd = [((X, v),) for v in (1, 3, 5, 7)]
    kept, _ = houdini(ts, odd)
    assert sorted(kept) == sorted(odd)  # together inductive, though no single one is
    kept, _ = houdini(ts, [((X, 5),), ((X, 7),)])
    assert kept == []  # 3 -> 5 breaks the first, and then 5 -> 7 the second
    kept, _ = houdini(ts, odd + [((X, 6),)])  # false of a reachable state: 4 -> 6 drops it
    assert sorted(kept) == sorted(odd)


def test_block_returns_an_inductive_strengthening_that_implies_the_claim(ring):
    ts, states, _ = ring
    safe = ts.safe("x_never_7", ts.pre)
    clauses, rounds = block(ts, states, [], safe)
    assert clauses and rounds >= 1
    xs, ys = ts.pre, ts.state("post")
    inv, inv_next = _inv(ts, clauses), _inv(ts, clauses, ys)
    assert _unsat(ts.init(xs), ts.typed(xs), z3.Not(inv))
    assert _unsat(inv, ts.typed(xs), ts.step(xs, ys, ts.tag("pre")), ts.typed(ys), z3.Not(inv_next))
    assert _unsat(inv, ts.typed(xs), z3.Not(safe))
    # every clause is true of every reachable state
    for c in clauses:
        assert not any(all(row[i] == v for i, v in c) for row in states)


def test_block_refuses_a_claim_a_reachable_state_breaks(ring):
    ts, states, _ = ring
    with pytest.raises(EngineError):
        block(ts, states, [], ts.safe("x_never_6", ts.pre))


def test_a_tiny_budget_is_a_timeout_never_a_proof(ring):
    ts, states, _ = ring
    with pytest.raises(TimeoutError):
        block(ts, states, [], ts.safe("x_never_7", ts.pre), max_rounds=1)


def _parity_rows():
    """Three bits of even parity: every pair of values is seen, four triples never are."""
    import numpy as np
    return np.array([(a, b, a ^ b) for a in (0, 1) for b in (0, 1)], dtype=np.uint8)


def test_mine_finds_exactly_the_triples_no_pair_explains():
    from types import SimpleNamespace
    ts = SimpleNamespace(pre=[{0: None, 1: None}] * 3)  # three two-valued slots
    facts = mine(ts, _parity_rows(), slots=[0, 1, 2])
    odd = sorted(((0, a), (1, b), (2, 1 - (a ^ b))) for a in (0, 1) for b in (0, 1))
    assert sorted(facts) == odd  # no unary or pairwise fact: each value and pair is seen
    assert mine(ts, _parity_rows(), slots=[0, 1, 2], arity=2) == []


def test_mine_leaves_out_a_triple_a_pair_already_rules_out():
    from types import SimpleNamespace
    import numpy as np
    ts = SimpleNamespace(pre=[{0: None, 1: None}] * 3)
    rows = np.array([(0, 0, 0), (0, 1, 1), (1, 0, 1)], dtype=np.uint8)  # (1, 1, *) never
    facts = mine(ts, rows, slots=[0, 1, 2])
    assert ((0, 1), (1, 1)) in facts
    assert not any(len(c) == 3 and c[0] == (0, 1) and c[1] == (1, 1) for c in facts)
    assert all(not any(all(r[i] == v for i, v in c) for r in rows) for c in facts)


def test_mine_refuses_an_arity_it_has_no_template_for(ring):
    ts, states, _ = ring
    with pytest.raises(ValueError, match="arity"):
        mine(ts, states, arity=4)


def test_the_core_of_an_unreachable_state_is_what_no_reachable_state_shows(ring):
    from kvproof.checker.symbolic.lemmas import Reachable
    ts, states, _ = ring
    reach = Reachable(ts, states)
    assert reach.core(bytes([4, 1])) == ()  # reachable: nothing to show
    assert reach.core(bytes([3, 0])) == ((X, 3),)  # x is never odd


def test_the_triples_are_those_a_count_of_every_value_combination_finds():
    import itertools

    import numpy as np

    from kvproof.checker.symbolic.lemmas import _free_slots
    from kvproof.model.scenario import builtin
    spec = builtin("abort-race").build()
    ts = TransitionSystem(spec)
    states, _ = explore_all(Machine(spec))
    triples = {c for c in mine(ts, states) if len(c) == 3}
    pairs = {c for c in mine(ts, states, arity=2) if len(c) == 2}
    cols = states.astype(np.int64)
    varying = [i for i in _free_slots(ts) if len(np.unique(cols[:, i])) > 1]
    seen = {i: set(np.unique(cols[:, i]).tolist()) for i in varying}
    oracle = set()
    for i, j, k in itertools.combinations(varying, 3):  # every combination counted outright
        n = [int(cols[:, s].max()) + 1 for s in (i, j, k)]
        present = np.bincount((cols[:, i] * n[1] + cols[:, j]) * n[2] + cols[:, k], minlength=n[0] * n[1] * n[2])
        for code in np.flatnonzero(present == 0):
            va, vb, vc = int(code // (n[1] * n[2])), int(code // n[2] % n[1]), int(code % n[2])
            sub = {((i, va), (j, vb)), ((i, va), (k, vc)), ((j, vb), (k, vc))}
            unseen = [v for s, v in ((i, va), (j, vb), (k, vc)) if v not in seen[s]]
            if not sub & pairs and not unseen:
                oracle.add(((i, va), (j, vb), (k, vc)))
    assert triples == oracle and len(triples) == 559


def test_explore_all_gives_its_rows_in_breadth_first_order_in_every_process():
    """Rows in the order the search found them (they were in set order, which depends on the
    process's hash seed, so lemma mining and certificates could differ from run to run)."""
    from .conftest import machine_of, reachable

    rows, _ = explore_all(machine_of("abort-race"))
    assert [bytes(r) for r in rows] == reachable("abort-race")
