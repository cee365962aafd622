"""The explicit-state engine: exhaustive breadth-first search with shortest counterexamples.

It drives anything shaped like :class:`~kvproof.model.machine.Machine` (``init``,
``successors``, ``hits``, ``quiescent_hits``, ``claims``), so the tests can run it on tiny
hand-built graphs with known answers.

States are ``bytes``.  The search is level-synchronised: it expands one BFS level, collects
every successor, and deduplicates the whole level at once against the visited set (a Python
set while the search is small, :mod:`.visited_small`, so a small check imports no numpy; then
:mod:`.visited`: sorted numpy runs of exact states or 64-bit fingerprints).  States are
numbered in discovery order (the order a one-at-a-time BFS would find them: first occurrence
in expansion order), and each keeps only a parent number and the action that reached it, so a
counterexample is rebuilt by walking parents and needs no stored trace.  Because BFS discovers
every state at its shortest distance, the first state where a claim hits gives a shortest path
to it.  A search cut short by a limit ends ``complete = False`` with the reason: claims that did
not hit are then *inconclusive*, never verified.

With a canonicaliser (symmetry reduction, :mod:`.symmetry`) every successor is replaced by its
orbit's representative before deduplication; the actions on a path then apply to canonical
states, and :func:`~kvproof.checker.explicit.symmetry.concrete_path` maps such a path back to concrete
states.

:func:`explore` is the one reachable-graph service: besides claim hits it keeps, when asked,
the states in discovery order (``rows``: lemma mining, the tests) or the whole
:class:`StateGraph` with every edge (``edges``: fair liveness, :mod:`.liveness`).  Keeping the
graph, a dict numbering the states stands in for the visited set, and one search serves both
the safety claims and liveness (:func:`~kvproof.checker.explicit.run.check_scenario`).  The
partitioned backends (:mod:`.parallel`, :mod:`.ray_backend`) run the same levels over workers.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import asdict, dataclass, field, replace
from collections import defaultdict
from itertools import accumulate, count, islice
from operator import call, itemgetter
from typing import Any, Callable

from kvproof.checker.explicit import visited_small
from kvproof.checker.explicit.visited_small import SmallVisitedSet, collision_probability
from kvproof.checker.results import Stats

__all__ = ["Limits", "StateGraph", "Exploration", "ClaimBook", "explore", "claim_checks", "expander", "graph_searchable"]

_CHECK_EVERY = 2048  # expansions between limit checks and progress reports
_AFTER_FROM = 20_000  # states found from which the per-action claim checks (``hits_after``) repay compiling them
_MAX_TEST_ACTIONS = 1 << 16  # action ids of a machine without ``instances`` (hand-built graphs)


@dataclass(frozen=True)
class Limits:
    """Where a search stops early: distinct states, seconds, BFS depth (``None``: no limit).

    ``max_seconds`` counts from ``started`` (a ``time.perf_counter()`` reading) when it is set:
    every phase and every scenario given these limits then shares one budget (the command line
    starts it when the process starts).  Unset, each search gets its own ``max_seconds``, and
    :func:`~kvproof.checker.explicit.run.check_scenario` starts one budget for all phases of a scenario.
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
class StateGraph:
    """The reachable states, their out-edges as flat arrays, and a BFS parent tree.

    State ``u``'s out-edges are ``(aids[k], targets[k])`` for ``k`` in ``offsets[u] ..
    offsets[u + 1] - 1``, in the order the machine lists its successors.  ``expanded[u]`` is 1
    when that list holds every successor of ``u`` (a state a limit left unexpanded, or expanded
    only in part, has 0); ``None``: all are.  ``stats``, ``complete`` and ``reason`` describe the
    graph: a limit that left a successor out makes it incomplete, a claim hitting never does."""

    states: list[bytes]
    offsets: Any
    targets: Any
    aids: Any
    parent: Any
    via: Any
    depth: Any
    stats: Stats
    complete: bool
    reason: str = ""
    expanded: Any = None
    _arrays: Any = field(default=None, repr=False)
    pending: Any = field(default=None, repr=False)
    """``pending(claim)``: per state, the bits of liveness claim ``claim``'s obligations pending
    there and their labels, computed by the native code that searched the graph (``None``, or
    ``None`` returned: the liveness check computes them in Python)."""

    @classmethod
    def from_edges(cls, states: list[bytes], edges: list[list[tuple[int, int]]], parent: list[int], via: list[int],
                   depth: list[int], stats: Stats, complete: bool, reason: str = "",
                   expanded: list[bool] | None = None) -> "StateGraph":
        """A graph from per-state edge lists ``[(aid, target), ...]`` (the tests' hand-built graphs)."""
        offsets, targets, aids = array("q", [0]), array("i"), array("i")
        for out in edges:
            for a, v in out:
                aids.append(a)
                targets.append(v)
            offsets.append(len(targets))
        flags = None if expanded is None else bytearray(1 if e else 0 for e in expanded)
        return cls(states, offsets, targets, aids, parent, via, depth, stats, complete, reason, flags)

    def out(self, sid: int) -> list[tuple[int, int]]:
        """The out-edges ``(aid, target)`` of state ``sid``."""
        lo, hi = self.offsets[sid], self.offsets[sid + 1]
        return list(zip(self.aids[lo:hi], self.targets[lo:hi]))

    def is_expanded(self, sid: int) -> bool:
        """Every successor of ``sid`` is in the graph, with its edge."""
        return self.expanded is None or bool(self.expanded[sid])

    def arrays(self) -> tuple:
        """``(src, dst, aid, expanded, depth)`` as numpy arrays (one entry per edge for the
        first three, per state for the last two), built once."""
        if self._arrays is None:
            import numpy as np

            n = len(self.states)
            offsets = np.asarray(self.offsets, dtype=np.int64)
            src = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
            dst = np.asarray(self.targets, dtype=np.int64)
            aid = np.asarray(self.aids, dtype=np.int64)
            expanded = (np.ones(n, bool) if self.expanded is None
                        else np.frombuffer(bytes(self.expanded), dtype=np.uint8).astype(bool))
            depth = np.asarray(self.depth, dtype=np.int64)
            self._arrays = (src, dst, aid, expanded, depth)
        return self._arrays

    def path_to(self, sid: int) -> list[int]:
        """State ids from the initial state to ``sid`` along the BFS tree (shortest)."""
        out = [sid]
        while self.parent[out[-1]] >= 0:
            out.append(self.parent[out[-1]])
        out.reverse()
        return out


@dataclass
class Exploration:
    """The outcome of a search: statistics, completeness, and where each claim first hit.

    With ``rows`` asked for, ``rows`` holds every state found, in discovery order (state ``i``
    is ``rows[i]``); with ``edges``, ``graph`` is the :class:`StateGraph` (its ``states`` are
    the rows)."""

    stats: Stats
    complete: bool
    reason: str
    hit_at: dict[int, int] = field(default_factory=dict)
    _parent: Any = None
    _via: Any = None
    canonical: bool = False
    """Paths apply to canonical states (symmetry reduction): see ``concrete_path``."""
    rows: list[bytes] | None = None
    graph: StateGraph | None = None

    def path(self, state_id: int) -> list[int]:
        """Action ids from the initial state to state ``state_id`` (shortest)."""
        out = []
        while self._parent[state_id] >= 0:
            out.append(self._via[state_id])
            state_id = self._parent[state_id]
        out.reverse()
        return out


class ClaimBook:
    """The claims a search tracks, shared by the Python engine and the native backend: the
    bits still open (``open``; ``always``: those of them checked in every state;
    ``quiescent``: every claim checked only where no action is enabled) and where each claim
    first hit (``hit_at``: claim index to state number)."""

    def __init__(self, claims: list, tracked: Any = None):
        self.n = len(claims)
        self.open = 0
        for i in range(self.n) if tracked is None else tracked:
            self.open |= 1 << i
        self.quiescent = 0
        for i, c in enumerate(claims):
            if c.at == "quiescent":
                self.quiescent |= 1 << i
        self.always = self.open & ~self.quiescent
        self.hit_at: dict[int, int] = {}

    def record(self, mask: int, sid: int) -> None:
        """Claims ``mask`` hit at state ``sid``: each open one keeps it as its first hit and closes
        (a level's quiescent hits are all collected while it is open)."""
        mask &= self.open
        for i in range(self.n):
            if mask >> i & 1:
                self.hit_at[i] = sid
        self.open &= ~mask
        self.always &= ~mask

    def close(self) -> None:
        """Track no claim any more (the graph of a search goes on without them)."""
        self.open = self.always = 0

    def level(self, par: list[int], quiet: list[tuple[int, int]], hit_of: Callable[[int], int], first: int,
              lo: int, stop: bool) -> int:
        """Record one level's hits in discovery order: new state ``n`` is number ``first + n``,
        found from the state at position ``par[n]`` of the expanded level (number ``lo`` plus
        it), and ``hit_of(n)`` gives its claim bits (asked only while an ``always`` claim is
        open); ``quiet`` holds ``(position, bits)`` of the expanded states with no successor,
        ascending, interleaved by position.  How many new states the search keeps: all of them,
        or with ``stop`` (the search ends once every tracked claim hit) those found before the
        first expanded state after the one where the last claim hit."""
        qi, nq = 0, len(quiet)
        for n in range(len(par)):
            p = par[n]
            while qi < nq and quiet[qi][0] < p:
                self.record(quiet[qi][1], lo + quiet[qi][0])
                qi += 1
            if stop and not self.open and n and p != par[n - 1]:
                return n
            if self.always:
                h = hit_of(n) & self.always
                if h:
                    self.record(h, first + n)
        while qi < nq and not (stop and not self.open):
            self.record(quiet[qi][1], lo + quiet[qi][0])
            qi += 1
        return len(par)


def explore(
    machine: Any,
    limits: Limits = Limits(),
    claims: list[int] | None = None,
    stop_when_all_hit: bool = False,
    progress: Callable[[Stats], None] | None = None,
    visited: str = "exact",
    canonicaliser: Any = None,
    rows: bool = False,
    edges: bool = False,
    checkpoint: Any = None,
) -> Exploration:
    """Search every state reachable from ``machine.init`` breadth-first.

    ``claims`` restricts which claim bits are tracked (default: all).  With
    ``stop_when_all_hit`` the search ends as soon as every tracked claim has hit (the state
    count is then what a one-at-a-time BFS would have found by then).  ``visited`` is the
    visited-set mode (``exact`` or ``fingerprint``).  ``canonicaliser`` is the symmetry reduction
    (a :class:`~kvproof.model.canon.Canonicaliser`: its ``canon`` maps a state to its orbit's
    representative, its ``orbit`` gives a representative's orbit size); every backend takes it
    under this name.

    ``rows`` keeps every state found (``Exploration.rows``).  ``edges`` keeps the state graph
    (``Exploration.graph``, for liveness; exact and without reduction only): a dict numbering
    the states then replaces the visited set, and the graph is finished as liveness needs it
    after the search itself ends.  A claim search stopped once every claim hit goes on to the
    whole graph; a state limit still expands the last states found, keeping their edges to
    states in the graph, and marks a state not expanded (``expanded[u] = 0``) when a limit
    left one of its successors out.  The search's own outcome (``stats``, ``complete``,
    ``reason``, ``hit_at``) is the same with or without ``rows`` and ``edges``.

    ``checkpoint`` (a :class:`~kvproof.checker.explicit.checkpoint.Checkpoint`; not with
    ``rows``, nor for a machine that searches itself) makes the search resume from the
    checkpoint's file when there is one, write its state there (with ``edges``, the graph so far
    too) every ``checkpoint.every`` seconds at a level boundary, remove the file when it ends,
    and keep the last level boundary's there when the time limit stops it; a resumed search
    ends exactly as one that was never interrupted (``seconds`` counts the earlier runs' time).

    A machine with a ``search`` method of these arguments (the native backend's
    :class:`~kvproof.checker.explicit.native.NativeMachine`) searches itself (``canonicaliser``
    passed on when given), with the same outcome; with ``edges`` too (its ``search_graph``)
    when no state or depth limit, stopping once all hit or checkpoint is asked for (this engine
    otherwise runs its Python functions).
    """
    if edges and (canonicaliser is not None or visited != "exact"):
        raise ValueError("the state graph is kept only by an exact search without symmetry reduction")
    too_wide = machine.spec.layout.too_wide() if hasattr(getattr(machine, "spec", None), "layout") else None
    if too_wide:
        raise ValueError(f"the explicit engine keeps one byte a state slot: {too_wide}")
    search = getattr(machine, "search", None)  # a machine with native code searches itself
    if checkpoint is not None and (rows or search is not None):
        raise ValueError("a checkpointed search is the Python engine's, keeping no rows")
    graph_search = getattr(machine, "search_graph", None)  # the native backend's, for what it can do
    if edges and graph_search is not None and graph_searchable(limits, stop_when_all_hit, checkpoint):
        return graph_search(limits, claims, progress, rows)
    if search is not None and not edges:
        if canonicaliser is None:
            return search(limits, claims, stop_when_all_hit, progress, visited, rows)
        return search(limits, claims, stop_when_all_hit, progress, visited, rows, canonicaliser=canonicaliser)
    canon = canonicaliser.canon if canonicaliser is not None else None
    orbit = canonicaliser.orbit if canonicaliser is not None else None
    start = time.perf_counter()
    book = ClaimBook(machine.claims, claims)
    record = book.record
    expand = expander(machine)
    n_actions = len(machine.instances) if hasattr(machine, "instances") else _MAX_TEST_ACTIONS
    hits = machine.hits
    hits_after: Any = False  # looked up (compiled, for a Machine) once the search is large enough to repay it
    quiescent_hits = machine.quiescent_hits
    init = machine.init

    if edges:  # the numbering is the visited set; the graph's arrays grow level by level
        index: dict[bytes, int] | None = _numbering([init])
        store = None
        depths, offsets, targets, aids = array("i", [0]), array("q", [0]), array("i"), array("i")
        expanded = bytearray()
        g_complete, g_reason = True, ""
    else:
        index = None
        store: Any = SmallVisitedSet(visited, len(init))  # a numpy VisitedSet once the search is large
        store.add_level(store.level([init])[1], [0])
    kept = [init] if rows or edges else None
    parent = array("i", [-1])
    via = array("i", [-1])
    stats = Stats(visited=visited)
    max_states = limits.max_states
    max_depth = limits.max_depth
    deadline = limits.deadline(start)
    represented = orbit(init) if orbit is not None else 0

    saved = checkpoint.load() if checkpoint is not None else None
    if saved is None:
        h = hits(init) & book.always
        if h:
            record(h, 0)

    complete, reason = True, ""
    ended: Stats | None = None  # with edges: the search's own statistics and outcome, once it ended
    outcome = (True, "")  # (complete, reason) of the search, fixed when it ended; the graph may go on
    frontier: list[bytes] = [init]
    lo, n_states, depth = 0, 1, 0
    per_successor = 0.0  # seconds the last level took per successor after its expansion
    clock = start  # when the search's time counts from (earlier than ``start`` for a resumed search)
    if saved is not None:  # resume: the state of the search at the level boundary the checkpoint holds
        frontier, parent, via, num = saved.frontier, saved.parent, saved.via, saved.numbers
        lo, n_states, depth = num["lo"], num["n_states"], num["depth"]
        if index is None:
            store = _visited_holding(visited, len(init), saved.visited)
        else:  # the numbering (with the numbers a limit left unused past the last state), the graph so far
            index = _numbering(saved.visited)
            kept = saved.visited[:n_states]
            depths, offsets, targets, aids, expanded = saved.graph
            g_complete, g_reason = num["g_complete"], num["g_reason"]
            complete, reason, outcome = num["complete"], num["reason"], tuple(num["outcome"])
            ended = None if num["ended"] is None else \
                Stats(**dict(num["ended"], worker_cpu=tuple(num["ended"]["worker_cpu"])))
        stats.transitions, stats.quiescent, represented = num["transitions"], num["quiescent"], num["represented"]
        book.open, book.always, book.hit_at = num["open"], num["always"], dict(num["hit_at"])
        per_successor, clock = num["per_successor"], start - num["seconds"]
    if checkpoint is not None:
        checkpoint.start(start)
    mark = None  # with a checkpoint: the numbers of the level boundary the search is at
    while frontier:
        if ended is None and stop_when_all_hit and not book.open:
            complete, reason = False, "stopped once every claim asked for had hit"
            if index is None:
                break
            ended, outcome = _ended(stats, n_states, depth, clock, represented, orbit), (complete, reason)
        if checkpoint is not None:
            now = time.perf_counter()
            mark = dict(lo=lo, n_states=n_states, depth=depth, transitions=stats.transitions,
                        quiescent=stats.quiescent, represented=represented, open=book.open, always=book.always,
                        hit_at=dict(book.hit_at), per_successor=per_successor, seconds=now - clock)
            if index is not None:
                mark.update(g_complete=g_complete, g_reason=g_reason, complete=complete, reason=reason,
                            outcome=list(outcome), ended=None if ended is None else asdict(ended))
            if checkpoint.due(now):
                checkpoint.save(_saved(frontier, store if index is None else index, parent, via, mark,
                                       None if index is None else (depths, offsets, targets, aids, expanded)))
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
                    if book.open & book.quiescent:
                        qh = quiescent_hits(frontier[j]) & book.open & book.quiescent
                        if qh:
                            quiet.append((j, qh))
            now = time.perf_counter()
            if deadline is not None and now > deadline:
                timed_out = True
                break
            if progress is not None and len(frontier) > _CHECK_EVERY:
                stats.states, stats.depth, stats.seconds = n_states, depth, now - clock
                progress(stats)
        stats.transitions += len(cand)
        expanded_at = time.perf_counter()
        if deadline is not None and expanded_at + len(cand) * per_successor > deadline:
            timed_out = True  # deduplicating and checking the level would end past the deadline, as the last one went
        if timed_out:  # time is up part way through the level: end now, without deduplicating and
            cand, codes = [], array("q")  # checking its successors (the search is incomplete anyway)
        if canon is not None:
            cand = list(map(canon, cand))
        # -- deduplicate the level against everything seen
        if index is None:
            if isinstance(store, SmallVisitedSet) and len(store) > visited_small.SMALL_STATES:
                from kvproof.checker.explicit.visited import VisitedSet  # numpy: only now

                store = VisitedSet.holding(store)
            fresh, keys = store.level(cand)
        else:  # number every successor: the next free number for a state not seen before
            ids = list(map(index.__getitem__, cand))  # a state not seen before is numbered as it is looked up
            fresh = _first_new(ids, n_states)
        cut = ""
        if len(fresh) and max_depth is not None and depth >= max_depth:
            cut = f"depth limit {max_depth} reached"
            fresh = fresh[:0]
        if max_states is not None and n_states + len(fresh) > max_states:
            cut = f"state limit {max_states} reached"
            fresh = fresh[: max_states - n_states]
        if cut:
            complete, reason = False, cut
        par, aid = _parents_actions(codes, fresh, n_actions)
        # -- claims, in discovery order (quiescent hits interleaved by expansion position)
        stop_at = None
        if book.always or quiet:
            new_states = _pick(cand, fresh)
            if hits_after is False and n_states + len(fresh) >= _AFTER_FROM and not (
                    max_states is not None and max_states <= _AFTER_FROM):  # (a probe: it never repays)
                hits_after = getattr(machine, "hits_after", None)
            checks = claim_checks(hits, hits_after or None, aid)
            masks = _level_masks(checks, new_states, book.always)
            if masks is None:  # a check raised: the states are checked one by one, as far as the level's claims go
                keep = book.level(par, quiet, lambda n: checks[n](new_states[n]), n_states, lo, stop_when_all_hit)
            elif quiet or any(masks):  # (a level where nothing hits leaves every claim as it was)
                keep = book.level(par, quiet, masks.__getitem__, n_states, lo, stop_when_all_hit)
            else:
                keep = len(par)
            if keep < len(fresh):
                complete, reason = False, "stopped once every claim asked for had hit"
                if index is None:
                    fresh, par, aid, new_states = fresh[:keep], par[:keep], aid[:keep], new_states[:keep]
                else:  # the graph takes the whole level; the search ends where it would have
                    stop_at = n_states + keep
        else:
            new_states = _pick(cand, fresh)
        if index is None:
            store.add_level(keys, fresh)
        elif not timed_out:
            if cut and g_complete:  # the numbers given past the cut stay unused: no state is new after it
                g_complete, g_reason = False, cut
            _add_edges(ids, codes, n_actions, n_states + len(fresh), len(frontier), offsets, targets, aids,
                       expanded)
            depths.extend([depth + 1] * len(fresh))
        parent.extend(map(lo.__add__, par))
        via.extend(aid)
        if kept is not None:
            kept.extend(new_states)
        if orbit is not None:
            represented += sum(map(orbit, new_states))
        lo, n_states = n_states, n_states + len(new_states)
        if timed_out:
            complete, reason = False, limits.time_reason
            if checkpoint is not None:  # the level's work is dropped: keep the boundary it started at
                checkpoint.save(_saved(frontier, store if index is None else index, parent, via, mark,
                                       None if index is None else (depths, offsets, targets, aids, expanded)))
                checkpoint = None
            if index is not None and g_complete:
                g_complete, g_reason = False, limits.time_reason
            break
        if not complete and ended is None:
            if index is None:
                break
            ended = _ended(stats, n_states if stop_at is None else stop_at, depth, clock, represented, orbit)
            outcome = complete, reason
            book.close()  # the graph goes on without the claims
        frontier = new_states
        if frontier:
            depth += 1
        if cand:
            per_successor = (time.perf_counter() - expanded_at) / len(cand)

    if checkpoint is not None:
        checkpoint.finish()
    if ended is None:
        ended, outcome = _ended(stats, n_states, depth, clock, represented, orbit), (complete, reason)
    graph = None
    if index is None:
        nbytes = store.nbytes
    else:
        missing = n_states + 1 - len(offsets)  # found but never expanded: time ran out first
        offsets.extend([len(targets)] * missing)
        expanded.extend(bytes(missing))
        nbytes = len(init) * n_states + depths.itemsize * len(depths) + offsets.itemsize * len(offsets) + \
            len(expanded) + targets.itemsize * len(targets) + aids.itemsize * len(aids)
        g_stats = Stats(states=n_states, transitions=len(targets), depth=max(depths),
                        quiescent=sum(1 for u in range(n_states) if expanded[u] and offsets[u] == offsets[u + 1]),
                        represented=n_states, seconds=time.perf_counter() - clock)
        graph = StateGraph(kept, offsets, targets, aids, parent, via, depths, g_stats, g_complete, g_reason, expanded)
    for s in (ended, graph and graph.stats):
        if s is not None:
            s.bytes_per_state = (nbytes + parent.itemsize * len(parent) + via.itemsize * len(via)) / n_states
    if visited == "fingerprint":
        ended.collision_probability = collision_probability(ended.states)
    return Exploration(ended, *outcome, book.hit_at, parent, via, canonical=canon is not None,
                       rows=kept if rows else None, graph=graph)


def graph_searchable(limits: Limits, stop_when_all_hit: bool = False, checkpoint: Any = None) -> bool:
    """Whether the native backend's search keeping the graph
    (:func:`~kvproof.checker.explicit.native.explore_native_graph`) can run with these
    arguments: no state or depth limit (which leave states part expanded), no stopping once the
    claims hit, no checkpoint (this engine's search keeping the graph does those); a time
    limit it keeps."""
    return limits.max_states is None and limits.max_depth is None and not stop_when_all_hit and checkpoint is None


def _saved(frontier: list[bytes], store: Any, parent: array, via: array, numbers: dict, graph: Any = None) -> Any:
    """The search's state at a level boundary, as a checkpoint writes it (the visited set's keys
    taken out of whichever set holds them; keeping the graph, ``store`` is the numbering dict
    and ``graph`` its arrays)."""
    from kvproof.checker.explicit.checkpoint import Saved

    if isinstance(store, dict):
        keys: Any = list(store)
    elif isinstance(store, SmallVisitedSet):
        keys = list(store.seen) if store.exact else array("Q", store.seen)
    elif store.exact:
        keys = (b"".join(s.tobytes() for _, s in store.runs), store.width)
    else:
        keys = array("Q")
        for k, _ in store.runs:
            keys.frombytes(k.tobytes())
    return Saved(frontier, keys, parent, via, numbers, graph)


def _visited_holding(mode: str, width: int, keys: Any) -> Any:
    """A visited set of mode ``mode`` holding ``keys`` (a checkpoint's: the states, or their
    fingerprints): the Python set while they are few, as the search itself would have it."""
    if len(keys) <= visited_small.SMALL_STATES:
        store = SmallVisitedSet(mode, width)
        store.seen = set(keys)
        return store
    import numpy as np

    from kvproof.checker.explicit.visited import VisitedSet

    big = VisitedSet(mode, width)
    if big.exact:
        big.add(big.keys(keys), big.states(b"".join(keys)))
    else:
        big.add(np.frombuffer(keys, dtype=np.uint64).copy())
    return big


def _ended(stats: Stats, n_states: int, depth: int, start: float, represented: int,
           orbit: Callable | None) -> Stats:
    """The search's statistics when it ended: a copy of the running ones, completed."""
    return replace(stats, states=n_states, depth=depth, seconds=time.perf_counter() - start,
                   represented=represented if orbit is not None else n_states)


def _parents_actions(codes: array, fresh: Any, n_actions: int) -> tuple[list[int], list[int]]:
    """For each successor at positions ``fresh`` (a list, or the numpy visited set's array) of
    a level's ``codes``: the position of the state it was expanded from, and its action."""
    if isinstance(fresh, list) or not len(fresh):
        return [codes[i] // n_actions for i in fresh], [codes[i] % n_actions for i in fresh]
    import numpy as np  # already imported: the numpy visited set made ``fresh``

    par, aid = np.divmod(np.frombuffer(codes, dtype=np.int64)[fresh], n_actions)
    return par.tolist(), aid.tolist()


def _first_new(ids: list[int], numbered: int) -> list[int]:
    """The positions of the first occurrence of every number from ``numbered`` on in ``ids``,
    ascending: the states a level numbered first (new numbers are given in order, so the
    first occurrence of each is where the next number appears)."""
    fresh, nxt = [], numbered
    for i, v in enumerate(ids):
        if v == nxt:
            fresh.append(i)
            nxt += 1
    return fresh


def _numbering(states: list[bytes]) -> dict[bytes, int]:
    """The graph search's visited set: ``states`` numbered in order, and a state looked up that
    is not there yet gets the next number (``len`` of the dict before it) as it is added: a whole
    level numbered by ``map`` of its ``__getitem__``, at C speed."""
    index = defaultdict(count(len(states)).__next__)
    index.update(zip(states, range(len(states))))
    return index


_NUMPY_EDGES = 4096  # successors in a level from which its edges are appended with numpy


def _add_edges(ids: list[int], codes: array, n_actions: int, numbered: int, level: int, offsets: array,
               targets: array, aids: array, expanded: bytearray) -> None:
    """Append a level's out-edges to the graph: every successor numbered below ``numbered``
    (the rest a limit left out; their parents are not expanded).  A large level's are computed
    with numpy (:func:`_add_edges_numpy`, the same arrays: ``tests/test_explicit.py`` holds the
    two to each other)."""
    if len(ids) >= _NUMPY_EDGES and (offsets.typecode, targets.typecode, aids.typecode) == ("q", "i", "i"):
        return _add_edges_numpy(ids, codes, n_actions, numbered, level, offsets, targets, aids, expanded)
    counts = [0] * level
    flags = bytearray(b"\x01") * level
    for v, code in zip(ids, codes):
        src, a = divmod(code, n_actions)
        if v < numbered:
            targets.append(v)
            aids.append(a)
            counts[src] += 1
        else:
            flags[src] = 0
    offsets.extend(islice(accumulate(counts, initial=offsets[-1]), 1, None))
    expanded.extend(flags)


def _add_edges_numpy(ids: list[int], codes: array, n_actions: int, numbered: int, level: int, offsets: array,
                     targets: array, aids: array, expanded: bytearray) -> None:
    """:func:`_add_edges` with numpy: the edges kept in level order (each state's in the order it
    listed its successors), per-state counts by ``bincount``, a state with an edge left out not
    expanded."""
    import numpy as np

    v = np.array(ids, dtype=np.int64)
    src, a = np.divmod(np.frombuffer(codes, dtype=np.int64), n_actions)
    ok = v < numbered
    i32 = np.dtype(f"i{targets.itemsize}")
    targets.frombytes(v[ok].astype(i32).tobytes())
    aids.frombytes(a[ok].astype(np.dtype(f"i{aids.itemsize}")).tobytes())
    ends = np.cumsum(np.bincount(src[ok], minlength=level), dtype=np.int64) + offsets[-1]
    offsets.frombytes(ends.astype(np.dtype(f"i{offsets.itemsize}")).tobytes())
    flags = np.ones(level, np.uint8)
    flags[src[~ok]] = 0
    expanded.extend(flags.tobytes())


def _level_masks(checks: list[Callable], states: list[bytes], always: int) -> list[int] | None:
    """The open ``always`` claims' bits of every new state of a level (``checks[n]`` its check),
    computed by one ``map`` (``[]`` when no ``always`` claim is open); ``None`` when a check
    raised (a claim's range check): the caller then checks the states in order, so the error is
    raised for the first state that :meth:`ClaimBook.level` asks about, as without this."""
    if not always:
        return []
    try:
        return [m & always for m in map(call, checks, states)]
    except Exception:
        return None


def claim_checks(hits: Callable, hits_after: list | None, aids: Any) -> list[Callable]:
    """The claim check of each new state: only the claims its action can change, when the
    machine says which (its parent hit none of the open claims, or they would be closed).
    ``aids``: the new states' action ids (a list, or a numpy array)."""
    aids = aids.tolist() if hasattr(aids, "tolist") else aids
    if hits_after is None:
        return [hits] * len(aids)
    return [hits_after[a] for a in aids]


def _pick(items: list, positions: Any) -> list:
    """``[items[k] for k in positions]`` (a list, or a numpy array), at C speed."""
    if not isinstance(positions, list):
        positions = positions.tolist()
    if not positions:
        return []
    if len(positions) == 1:
        return [items[positions[0]]]
    return list(itemgetter(*positions)(items))


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
