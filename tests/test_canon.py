"""The compiled canonical form is exact: one representative per orbit, with the right orbit size."""

from dataclasses import replace
from itertools import permutations, product

import pytest

from kvproof.model.canon import Canonicaliser, SymmetryUnsupported
from kvproof.model.machine import Machine
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.model.symmetry import Sort, Symmetry

from .conftest import explore, states_of
from .symmetric import machine


def _group(canon):
    """Every allowed permutation, by brute force."""
    out = []
    for choice in product(*[permutations(c) for c in canon.classes]):
        p = list(canon.identity)
        for c, image in zip(canon.classes, choice):
            for e, old in zip(c, image):
                p[e] = old
        out.append(tuple(p))
    return out


@pytest.mark.parametrize("tenants", ["AAB", "AAA"])
def test_the_canonical_form_is_one_per_orbit_and_orbit_sizes_are_exact(tenants):
    m = machine("v0.5.22", tenants)
    canon = Canonicaliser(m.spec, m.spec.symmetry())
    group = _group(canon)
    assert len(group) == canon.order == (2 if tenants == "AAB" else 6)
    for s in states_of(m, 6000)[::7]:
        orbit = {canon.apply(g, s) for g in group}
        reps = {canon.canon(t) for t in orbit}
        assert len(reps) == 1 and reps <= orbit  # one representative, inside the orbit
        assert canon.orbit(s) == len(orbit)


def test_reduced_search_counts_representatives_and_the_states_they_stand_for():
    m = machine("v0.5.22", "AAB")
    full = explore(m)
    canon = Canonicaliser(m.spec, m.spec.symmetry())
    red = explore(m, canonicaliser=canon)
    assert full.stats.states == red.stats.represented == 38_629
    assert red.stats.states == 19_693
    assert red.stats.depth == full.stats.depth


def test_fields_that_cannot_be_permuted_are_refused():
    m = machine("v0.5.22", "AAB")
    k = m.spec.k
    bad = Symmetry(Sort(k.req, ((0, 1),)), {k.owner.name: (None,)})  # wrong number of codes
    with pytest.raises(SymmetryUnsupported, match="reference entries"):
        Canonicaliser(m.spec, bad)


@pytest.mark.slow  # about 6 s
def test_pages_are_searched_and_requests_sorted_exactly():
    cfg = machine("v0.5.22", "AAB").spec.cfg
    m = Machine(PdProtocol(replace(cfg, decode_pages=2, engine=replace(cfg.engine, any_free_pages=True))))
    canon = Canonicaliser(m.spec, m.spec.symmetry())
    assert canon.extra_order == 2 and m.spec.symmetry().order == 4
    group = [(r, p) for r in canon.main.every() for p in canon.extra[0].every()]
    for s in states_of(m, 6000)[::11]:
        orbit = {canon.extra[0].apply(p, canon.apply(r, s)) for r, p in group}
        reps = {canon.canon(t) for t in orbit}
        assert len(reps) == 1 and reps <= orbit
        assert canon.orbit(s) == len(orbit)
    full = explore(m)
    red = explore(m, canonicaliser=canon)
    assert red.stats.represented == full.stats.states == 393_985 and red.stats.states == 99_163
