"""Symmetry reduction: declarations are checked before use, verdicts and counterexample lengths
match the unreduced search, and reduced counterexamples replay as concrete traces."""

from dataclasses import replace

import pytest

from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.explicit.symmetry import concrete_path, reduction_for
from kvproof.model.machine import Machine
from kvproof.model.replay import replay, run_actions
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.model.symmetry import Sort, Symmetry
from kvproof.model.scenario import builtin

from .symmetric import machine, unordered


def test_ordered_arrivals_declare_nothing_and_nothing_is_reduced():
    m = Machine(builtin("v0.5.22").build())
    red = reduction_for(m)
    assert not red.active and red.note.startswith("off")


def test_a_sound_declaration_is_accepted():
    red = reduction_for(machine("abort-race", "AAB"))
    assert red.active and red.note == "R0~R1 (2 permutations)"


class AcrossTenants(PdProtocol):
    """Mutant: declares requests of different tenants interchangeable."""

    def symmetry(self):
        sym = super().symmetry()
        return Symmetry(Sort(self.k.req, (tuple(range(self.k.R)),)), sym.refs)


class Ordered(PdProtocol):
    """Mutant: keeps FIFO doors but declares the requests interchangeable anyway."""

    def symmetry(self):
        return Symmetry(Sort(self.k.req, ((0, 1),)), {self.k.owner.name: (None, (0, 0), (1, 0), (2, 0)),
                                                       self.k.content.name: (None, (0, 0), (1, 0), (2, 0), None, None)})


def test_a_declaration_that_breaks_a_claim_or_the_transitions_is_refused():
    cfg = unordered("abort-race", "AAB").config
    red = reduction_for(Machine(AcrossTenants(cfg)))
    assert not red.active and red.note.startswith("refused:")
    assert "swapping" in red.note
    ordered = cfg.__class__(**{**cfg.__dict__, "engine": cfg.engine.__class__(
        **{**cfg.engine.__dict__, "ordered_arrivals": True})})
    red = reduction_for(Machine(Ordered(ordered)))
    assert red.note == "refused: the transitions do not commute with swapping R0 and R1"


@pytest.mark.parametrize("name", ["abort-race", pytest.param("receipt-ack", marks=pytest.mark.slow),
                                  pytest.param("v0.5.22", marks=pytest.mark.slow)])
def test_reduced_verdicts_and_counterexample_lengths_equal_the_full_search(name, tmp_path):
    sc = unordered(name, "AAB")
    full = check_scenario(sc)
    red = check_scenario(sc, symmetry=True, traces_dir=tmp_path)
    assert red.stats.states < full.stats.states
    assert red.stats.represented == full.stats.states
    assert [(c.claim, c.verdict, c.depth) for c in red.claims] == [(c.claim, c.verdict, c.depth) for c in full.claims]
    m = Machine(sc.build())
    for c in red.claims:
        trace = getattr(c.result, "trace", None)
        if trace is not None:  # a concrete trace: it replays and its claim hits at the end
            assert replay(m, trace.actions, trace.states) is None
            assert m.claim_hits(c.claim, trace.states[-1])


def test_a_canonical_path_maps_back_to_concrete_states_in_the_same_orbits():
    m = machine("abort-race", "AAB")
    canon = reduction_for(m).canonicaliser
    from kvproof.checker.explicit.search import explore

    ex = explore(m, canonicaliser=canon)
    i = [c.name for c in m.claims].index("no_cross_tenant_read")
    canonical = ex.path(ex.hit_at[i])
    concrete = concrete_path(m, canon, canonical)
    reps = [m.init]
    for aid in canonical:
        reps.append(canon.canon(m.step(reps[-1], aid)))
    assert [canon.canon(s) for s in run_actions(m, concrete)] == reps


def test_page_symmetry_under_any_free_allocation_keeps_verdicts_and_concrete_traces(tmp_path):
    sc = unordered("abort-race", "AB")
    cfg = sc.config
    sc = replace(sc, config=replace(cfg, decode_pages=2, engine=replace(cfg.engine, any_free_pages=True,
                                                                       ordered_arrivals=True)))
    red = reduction_for(Machine(sc.build()))
    assert red.note == "p0~p1 (2 permutations)"
    full = check_scenario(sc)
    reduced = check_scenario(sc, symmetry=True, traces_dir=tmp_path)
    assert reduced.stats.states < full.stats.states == reduced.stats.represented
    assert [(c.claim, c.verdict, c.depth) for c in reduced.claims] == [(c.claim, c.verdict, c.depth) for c in full.claims]
    m = Machine(sc.build())
    traces = [c.result.trace for c in reduced.claims if getattr(c.result, "trace", None) is not None]
    assert traces
    for t in traces:
        assert replay(m, t.actions, t.states) is None and m.claim_hits(t.claim, t.states[-1])
