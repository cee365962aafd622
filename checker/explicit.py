"""The explicit-state engine: exhaustive breadth-first search with shortest counterexamples.

It drives anything shaped like :class:`~kvproof.model.machine.Machine` (``init``,
``successors``, ``hits``, ``quiescent_hits``, ``claims``), so the tests can run it on tiny
hand-built graphs with known answers.

States are ``bytes``.  The visited set is a dict from state to its number; states are kept in
discovery order, which *is* the BFS queue, with a parent number and the action that reached it,
so a counterexample is rebuilt by walking parents and needs no stored trace.  Because BFS
discovers every state at its shortest distance, the first state where a claim hits gives a
shortest path to it.  A search cut short by a limit ends ``complete = False`` with the reason:
claims that did not hit are then *inconclusive*, never verified.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Limits", "Stats", "Exploration", "explore"]

_CHECK_EVERY = 2048  # expansions between limit checks and progress reports


@dataclass(frozen=True)
class Limits:
    """Where a search stops early: distinct states, seconds, BFS depth (``None``: no limit)."""

    max_states: int | None = None
    max_seconds: float | None = None
    max_depth: int | None = None


@dataclass
class Stats:
    """What a search did."""

    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    quiescent: int = 0

    @property
    def states_per_second(self) -> float:
        """Distinct states found per second of search."""
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
) -> Exploration:
    """Search every state reachable from ``machine.init`` breadth-first.

    ``claims`` restricts which claim bits are tracked (default: all).  With
    ``stop_when_all_hit`` the search ends as soon as every tracked claim has hit (the state
    count is then what was explored so far).
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

    successors = machine.successors
    hits = machine.hits
    quiescent_hits = machine.quiescent_hits
    init = machine.init

    index: dict[bytes, int] = {init: 0}
    states: list[bytes] = [init]
    parent = array("q", [-1])
    via = array("q", [-1])
    hit_at: dict[int, int] = {}
    stats = Stats()
    max_states = limits.max_states
    max_depth = limits.max_depth
    deadline = None if limits.max_seconds is None else start + limits.max_seconds

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
    depth, level_end, i = 0, 1, 0
    while i < len(states):
        if stop_when_all_hit and not open_mask:
            complete, reason = False, "stopped once every claim asked for had hit"
            break
        if i == level_end:
            depth += 1
            level_end = len(states)
        s = states[i]
        succ = successors(s)
        stats.transitions += len(succ)
        if not succ:
            stats.quiescent += 1
            qh = quiescent_hits(s) & open_mask & quiescent_mask
            if qh:
                record(qh, i)
        at_depth_limit = max_depth is not None and depth >= max_depth
        for aid, t in succ:
            if t in index:
                continue
            if at_depth_limit:
                complete, reason = False, f"depth limit {max_depth} reached"
                break
            if max_states is not None and len(states) >= max_states:
                complete, reason = False, f"state limit {max_states} reached"
                break
            sid = len(states)
            index[t] = sid
            states.append(t)
            parent.append(i)
            via.append(aid)
            if always_open:
                h = hits(t) & always_open
                if h:
                    record(h, sid)
        if not complete:
            break
        i += 1
        if i % _CHECK_EVERY == 0:
            now = time.perf_counter()
            if deadline is not None and now > deadline:
                complete, reason = False, f"time limit {limits.max_seconds:g} s reached"
                break
            if progress is not None:
                stats.states, stats.depth, stats.seconds = len(states), depth, now - start
                progress(stats)

    stats.states = len(states)
    stats.depth = depth
    stats.seconds = time.perf_counter() - start
    return Exploration(stats, complete, reason, hit_at, parent, via)
