"""The explicit-state engine: exhaustive breadth-first search with shortest counterexamples.

It drives anything shaped like :class:`~kvproof.model.machine.Machine` (``init``,
``successors``, ``hits``, ``quiescent_hits``, ``claims``), so the tests can run it on tiny
hand-built graphs with known answers.

States are ``bytes``.  The search is level-synchronised: it expands one BFS level, collects
every successor, and deduplicates the whole level at once against the visited set
(:mod:`.visited`: sorted numpy runs of exact states or 64-bit fingerprints).  States are
numbered in discovery order (the order a one-at-a-time BFS would find them: first occurrence
in expansion order), and each keeps only a parent number and the action that reached it, so a
counterexample is rebuilt by walking parents and needs no stored trace.  Because BFS discovers
every state at its shortest distance, the first state where a claim hits gives a shortest path
to it.  A search cut short by a limit ends ``complete = False`` with the reason: claims that did
not hit are then *inconclusive*, never verified.

With a canonicaliser (symmetry reduction, :mod:`.symmetry`) every successor is replaced by its
orbit's representative before deduplication; the actions on a path then apply to canonical
states, and :func:`~kvproof.checker.symmetry.concrete_path` maps such a path back to concrete
states.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Callable

import numpy as np

from kvproof.checker.visited import VisitedSet, collision_probability

__all__ = ["Limits", "Stats", "Exploration", "explore", "claim_checks", "expander"]

_CHECK_EVERY = 2048  # expansions between limit checks and progress reports
_MAX_TEST_ACTIONS = 1 << 16  # action ids of a machine without ``instances`` (hand-built graphs)


@dataclass(frozen=True)
class Limits:
    """Where a search stops early: distinct states, seconds, BFS depth (``None``: no limit).

    ``max_seconds`` counts from ``started`` (a ``time.perf_counter()`` reading) when it is set:
    every phase and every scenario given these limits then shares one budget (the command line
    starts it when the process starts).  Unset, each search gets its own ``max_seconds``, and
    :func:`~kvproof.checker.run.check_scenario` starts one budget for all phases of a scenario.
    """

    max_states: int | None = None
    max_seconds: float | None = None
    max_depth: int | None = None
    started: float | None = None

    def deadline(self, start: float | None = None) -> float | None:
        """The ``time.perf_counter()`` reading at which time is up (``None``: no time limit);
        ``start`` is when the caller's own phase started, used when no budget was started."""
        if self.max_seconds is None:
            return None
        began = self.started if self.started is not None else (time.perf_counter() if start is None else start)
        return began + self.max_seconds

    def expired(self) -> bool:
        """The shared time budget is used up (always ``False`` without ``started``)."""
        return self.started is not None and self.max_seconds is not None and \
            time.perf_counter() > self.started + self.max_seconds

    def shared(self) -> "Limits":
        """These limits with the time budget started now, unless it already was."""
        if self.max_seconds is None or self.started is not None:
            return self
        return Limits(self.max_states, self.max_seconds, self.max_depth, time.perf_counter())

    @property
    def time_reason(self) -> str:
        """The reason a search stopped on the time limit."""
        return f"time limit {self.max_seconds or 0:g} s reached"


@dataclass
class Stats:
    """What a search did."""

    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    quiescent: int = 0
    visited: str = "exact"
    """How states were stored: ``exact`` or ``fingerprint`` (64-bit)."""
    bytes_per_state: float = 0.0
    """Bytes stored per distinct state: its key, parent number and action."""
    collision_probability: float = 0.0
    """With fingerprints: bound on the chance that a fingerprint collision hid a state."""
    represented: int = 0
    """With symmetry reduction: concrete states the explored representatives stand for (the sum
    of their orbit sizes); otherwise equal to ``states``."""
    workers: int = 1
    worker_cpu: tuple[float, ...] = ()
    """With several workers: CPU seconds each worker process spent (its share of the work)."""

    @property
    def reduction(self) -> float:
        """Concrete states per explored state (1.0 without symmetry reduction)."""
        return self.represented / self.states if self.states and self.represented else 1.0

    @property
    def states_per_second(self) -> float:
        """Distinct states found per second of search (0 when none were searched)."""
        if not self.states:
            return 0.0
        return self.states / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class Exploration:
    """The outcome of a search: statistics, completeness, and where each claim first hit."""

    stats: Stats
    complete: bool
    reason: str
    hit_at: dict[int, int] = field(default_factory=dict)
    _parent: Any = None
    _via: Any = None
    canonical: bool = False
    """Paths apply to canonical states (symmetry reduction): see ``concrete_path``."""

    def path(self, state_id: int) -> list[int]:
        """Action ids from the initial state to state ``state_id`` (shortest)."""
        out = []
        while self._parent[state_id] >= 0:
            out.append(self._via[state_id])
            state_id = self._parent[state_id]
        out.reverse()
        return out


def explore(
    machine: Any,
    limits: Limits = Limits(),
    claims: list[int] | None = None,
    stop_when_all_hit: bool = False,
    progress: Callable[[Stats], None] | None = None,
    visited: str = "exact",
    canon: Callable[[bytes], bytes] | None = None,
    orbit: Callable[[bytes], int] | None = None,
) -> Exploration:
    """Search every state reachable from ``machine.init`` breadth-first.

    ``claims`` restricts which claim bits are tracked (default: all).  With
    ``stop_when_all_hit`` the search ends as soon as every tracked claim has hit (the state
    count is then what a one-at-a-time BFS would have found by then).  ``visited`` is the
    visited-set mode (``exact`` or ``fingerprint``).  ``canon`` maps a state to its orbit's
    representative (symmetry reduction) and ``orbit`` gives a representative's orbit size.
    """
    start = time.perf_counter()
    n_claims = len(machine.claims)
    tracked = range(n_claims) if claims is None else claims
    open_mask = 0
    for i in tracked:
        open_mask |= 1 << i
    quiescent_mask = 0
    for i, c in enumerate(machine.claims):
        if c.at == "quiescent":
            quiescent_mask |= 1 << i
    always_open = open_mask & ~quiescent_mask

    expand = expander(machine)
    n_actions = len(machine.instances) if hasattr(machine, "instances") else _MAX_TEST_ACTIONS
    hits = machine.hits
    hits_after = getattr(machine, "hits_after", None)
    quiescent_hits = machine.quiescent_hits
    init = machine.init

    store = VisitedSet(visited, len(init))
    store.add(store.keys([init]), store.states(init))
    parent = array("i", [-1])
    via = array("i", [-1])
    hit_at: dict[int, int] = {}
    stats = Stats(visited=visited)
    max_states = limits.max_states
    max_depth = limits.max_depth
    deadline = limits.deadline(start)
    represented = orbit(init) if orbit is not None else 0

    def record(mask: int, sid: int) -> None:
        nonlocal open_mask, always_open
        for i in range(n_claims):
            if mask >> i & 1:
                hit_at[i] = sid
        open_mask &= ~mask
        always_open &= ~mask

    h = hits(init) & always_open
    if h:
        record(h, 0)

    complete, reason = True, ""
    frontier: list[bytes] = [init]
    lo, n_states, depth = 0, 1, 0
    while frontier:
        if stop_when_all_hit and not open_mask:
            complete, reason = False, "stopped once every claim asked for had hit"
            break
        # -- expand one level: every successor, its parent (position in the level) and action
        cand: list[bytes] = []
        codes = array("q")  # position in the level * n_actions + action id, per successor
        add_action, add_state = codes.append, cand.append
        quiet: list[tuple[int, int]] = []  # (position, claim bits) of quiescent hits
        timed_out = False
        for c0 in range(0, len(frontier), _CHECK_EVERY):
            for j in range(c0, min(c0 + _CHECK_EVERY, len(frontier))):
                if expand(frontier[j], j * n_actions, add_action, add_state) is None:
                    stats.quiescent += 1
                    if open_mask & quiescent_mask:
                        qh = quiescent_hits(frontier[j]) & open_mask & quiescent_mask
                        if qh:
                            quiet.append((j, qh))
            now = time.perf_counter()
            if deadline is not None and now > deadline:
                timed_out = True
                break
            if progress is not None and len(frontier) > _CHECK_EVERY:
                stats.states, stats.depth, stats.seconds = n_states, depth, now - start
                progress(stats)
        stats.transitions += len(cand)
        if timed_out:  # time is up part way through the level: end now, without deduplicating and
            cand, codes = [], array("q")  # checking its successors (the search is incomplete anyway)
        if canon is not None:
            cand = list(map(canon, cand))
        # -- deduplicate the level against everything seen
        keys = store.keys(cand)
        states = store.states(b"".join(cand))
        fresh = store.fresh(keys, states)
        if fresh.size and max_depth is not None and depth >= max_depth:
            complete, reason = False, f"depth limit {max_depth} reached"
            fresh = fresh[:0]
        if max_states is not None and n_states + fresh.size > max_states:
            complete, reason = False, f"state limit {max_states} reached"
            fresh = fresh[: max_states - n_states]
        code = np.frombuffer(codes, dtype=np.int64)[fresh] if cand else np.zeros(0, np.int64)
        par, aid = np.divmod(code, n_actions)
        # -- claims, in discovery order (quiescent hits interleaved by expansion position)
        if always_open or quiet:
            keep = fresh.size
            qi = 0
            new_states = _pick(cand, fresh)
            checks = claim_checks(hits, hits_after, aid)
            for n, t in enumerate(new_states):
                p = int(par[n])
                while qi < len(quiet) and quiet[qi][0] < p:
                    record(quiet[qi][1], lo + quiet[qi][0])
                    qi += 1
                if stop_when_all_hit and not open_mask and n and p != par[n - 1]:
                    keep = n
                    break
                if always_open:
                    h = checks[n](t) & always_open
                    if h:
                        record(h, n_states + n)
            else:
                while qi < len(quiet) and not (stop_when_all_hit and not open_mask):
                    record(quiet[qi][1], lo + quiet[qi][0])
                    qi += 1
            if keep < fresh.size:
                fresh, par, aid, new_states = fresh[:keep], par[:keep], aid[:keep], new_states[:keep]
                complete, reason = False, "stopped once every claim asked for had hit"
        else:
            new_states = _pick(cand, fresh)
        store.add(keys[fresh], None if states is None else states[fresh])
        parent.frombytes((par + lo).astype(np.int32).tobytes())
        via.frombytes(aid.astype(np.int32).tobytes())
        if orbit is not None:
            represented += sum(map(orbit, new_states))
        lo, n_states = n_states, n_states + len(new_states)
        if timed_out:
            complete, reason = False, limits.time_reason
        if not complete:
            break
        frontier = new_states
        if frontier:
            depth += 1

    stats.states = n_states
    stats.depth = depth
    stats.seconds = time.perf_counter() - start
    stats.bytes_per_state = (store.nbytes + parent.itemsize * len(parent) + via.itemsize * len(via)) / n_states
    if visited == "fingerprint":
        stats.collision_probability = collision_probability(n_states)
    stats.represented = represented if orbit is not None else n_states
    return Exploration(stats, complete, reason, hit_at, parent, via, canonical=canon is not None)


def claim_checks(hits: Callable, hits_after: list | None, aids: np.ndarray) -> list[Callable]:
    """The claim check of each new state: only the claims its action can change, when the
    machine says which (its parent hit none of the open claims, or they would be closed)."""
    if hits_after is None:
        return [hits] * aids.size
    return [hits_after[a] for a in aids.tolist()]


def _pick(items: list, positions: np.ndarray) -> list:
    """``[items[k] for k in positions]``, at C speed."""
    if positions.size == 0:
        return []
    if positions.size == 1:
        return [items[int(positions[0])]]
    return list(itemgetter(*positions.tolist())(items))


def expander(machine: Any) -> Callable:
    """``machine.expand`` (the compiled successor generator), or one built from
    ``machine.successors`` for the tests' hand-built graphs: ``expand(state, base, add_action,
    add_state)`` calls ``add_action(base + aid)`` and ``add_state(successor)`` per successor and
    returns the last successor (``None``: there is none)."""
    return getattr(machine, "expand", None) or _expand_of(machine.successors)


def _expand_of(successors: Callable[[bytes], list]) -> Callable:
    """``expand`` for a machine that has only ``successors`` (the tests' hand-built graphs)."""

    def expand(s: bytes, base: int, add_action: Callable, add_state: Callable) -> bytes | None:
        last = None
        for aid, last in successors(s):
            add_action(base + aid)
            add_state(last)
        return last

    return expand
