"""Symmetry reduction, made safe: check a declaration before using it, and map reduced
counterexamples back to concrete traces.

:func:`reduction_for` compiles the spec's declaration (:mod:`kvproof.model.symmetry`) and tests
it on sampled states - a breadth-first prefix, seeded random walks, and seeded random
well-typed states (a sound declaration commutes with the spec everywhere, reachable or not, and
random states reach corners a prefix does not) - for every generating swap ``g``: ``g(init) = init``; every claim gives the same answer in ``s`` and
``g(s)``; and the successors of ``g(s)`` are exactly the images of the successors of ``s``.  Any
failure refuses the reduction with the first reason found (the search then runs unreduced).

A path found under reduction applies its actions to canonical states; :func:`concrete_path`
re-derives a concrete path with the same representatives: from each concrete state it takes the
first enabled action whose successor has the next canonical state as its representative (one
exists, since the canonical form is exact), so a counterexample replays as an ordinary trace.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from kvproof.model.canon import Canonicaliser, SymmetryUnsupported
from kvproof.checker.explicit.search import Limits, explore

__all__ = ["Reduction", "reduction_for", "check_declaration", "concrete_path"]

_PREFIX = 5000  # breadth-first states sampled
_WALKS, _WALK_LEN = 100, 100  # seeded random walks sampled
_RANDOM = 3000  # seeded random well-typed states sampled


@dataclass
class Reduction:
    """What symmetry reduction does for one machine: ``canonicaliser`` is ``None`` when it does
    not reduce, and ``note`` says why (or which elements it permutes)."""

    canonicaliser: Canonicaliser | None
    note: str

    @property
    def active(self) -> bool:
        """The search runs on canonical representatives."""
        return self.canonicaliser is not None


def reduction_for(machine: Any, seed: int = 0) -> Reduction:
    """Compile and check the machine's declared symmetry."""
    sym = machine.spec.symmetry()
    if sym is None or not sym.sort.nontrivial:
        return Reduction(None, "off: the scenario declares no interchangeable elements")
    try:
        canon = Canonicaliser(machine.spec, sym)
    except SymmetryUnsupported as e:
        return Reduction(None, f"refused: {e}")
    problem = check_declaration(machine, canon, seed)
    if problem is not None:
        return Reduction(None, f"refused: {problem}")
    return Reduction(canon, f"{sym.describe()} ({sym.order} permutations)")


def _samples(machine: Any, seed: int) -> list[bytes]:
    order = explore(machine, Limits(max_states=_PREFIX), claims=[], rows=True).rows
    seen = dict.fromkeys(order)
    rng = random.Random(seed)
    for _ in range(_WALKS):
        s = machine.init
        for _ in range(_WALK_LEN):
            succ = machine.successors(s)
            if not succ:
                break
            s = rng.choice(succ)[1]
            if s not in seen:
                seen[s] = None
                order.append(s)
    layout = machine.spec.layout
    for _ in range(_RANDOM):
        t = list(machine.init)
        for f in layout.fields:
            base = layout.base[f.name]
            for k in range(f.width - (1 if f.sentinel else 0)):
                t[base + k] = rng.randrange(f.values.size)
        order.append(bytes(t))
    return order


def check_declaration(machine: Any, canon: Canonicaliser, seed: int = 0) -> str | None:
    """``None`` when every generating swap commutes with the initial state, the claims and the
    transitions on the sampled states; otherwise the first failure, in words."""
    gens = canon.generators()
    for text, g in gens:
        if g(machine.init) != machine.init:
            return f"swapping {text} changes the initial state"
    for s in _samples(machine, seed):
        succ = {t for _, t in machine.successors(s)}
        for text, g in gens:
            gs = g(s)
            h, gh = machine.hits(s), machine.hits(gs)
            q, gq = machine.quiescent_hits(s), machine.quiescent_hits(gs)
            if h != gh or (not succ and q != gq):
                bit = (h ^ gh) or (q ^ gq)
                claim = machine.claims[bit.bit_length() - 1].name
                return f"claim {claim} is not invariant under swapping {text}"
            if {g(t) for t in succ} != {t for _, t in machine.successors(gs)}:
                return f"the transitions do not commute with swapping {text}"
    return None


def concrete_path(machine: Any, canon: Canonicaliser, actions: Sequence[int]) -> list[int]:
    """Concrete actions from ``machine.init`` visiting the orbits of the canonical path
    ``actions`` (actions applied to canonical states, as the reduced search recorded them)."""
    rep = machine.init
    state = machine.init
    out = []
    for k, aid in enumerate(actions, start=1):
        nxt = machine.step(rep, aid)
        if nxt is None:
            raise ValueError(f"step {k}: the canonical path does not replay")
        rep = canon.canon(nxt)
        for a, t in machine.successors(state):
            if canon.canon(t) == rep:
                out.append(a)
                state = t
                break
        else:  # pragma: no cover - impossible for an exact canonical form
            raise ValueError(f"step {k}: no concrete successor in the orbit of the canonical state")
    return out
