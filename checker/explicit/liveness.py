"""Fair liveness on the state graph: lassos where an obligation stays pending forever.

A liveness claim (``@liveness`` in the spec) lists obligations, each a state predicate that must
not stay true forever: "page p0 is held", "R1 has not ended".  An obligation is violated by a
*fair lasso*: a path to a cycle on which it is pending in every state, and on which every fair
action (``fair=True``: the actions the real engine runs eventually) that is enabled in every
state of the cycle is also taken on it (weak fairness).  A state with no successor at all is a
lasso whose loop is that state repeated.

The reachable graph (edges as flat arrays) comes from the explicit engine's search keeping its
edges (:func:`~kvproof.checker.explicit.search.explore`; :func:`build_graph` runs it alone); for each
obligation the search takes the subgraph of states where it is pending and its strongly connected
components (``scipy.sparse.csgraph``, C speed; Tarjan's algorithm in Python for a small
graph; states no cycle passes through dropped first, at numpy speed).  A component has a fair cycle exactly when every
fair action enabled throughout it is taken inside it: a cycle through all its edges is then
fair, and if it is not, no cycle inside it is fair either.  The lasso written is a shorter
cycle of that component that, for every fair action enabled somewhere in the component, either
takes it or passes through a state where it is disabled (so none stays enabled untaken).

A graph cut short by a limit is judged only on its *expanded* states, those whose every
successor is in the graph: their enabled sets are complete, so a lasso looping through them is
genuine, and a violation found there stands.  A limit never lets a claim be verified.  With a
time limit, every phase checks the deadline and raises :class:`OutOfTime` when it passes.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from kvproof.model.compiler import compile_pending
from kvproof.model.machine import Machine, reference_claim, reference_successors
from kvproof.checker.explicit.search import Limits, StateGraph, explore

__all__ = ["StateGraph", "Lasso", "OutOfTime", "build_graph", "find_lasso", "lasso_is_fair", "pending_throughout"]

_TICK = 1024  # units of work (states, queue pops) between deadline checks


class OutOfTime(Exception):
    """The time limit passed before the liveness check could decide; the message says which."""


@dataclass
class Lasso:
    """A fair lasso: ``states`` (ids) from the initial state, ``actions`` between them, and
    ``loop``, the index the last state returns to (the last state equals ``states[loop]``)."""

    obligation: str
    states: list[int]
    actions: list[int]
    loop: int
    notes: list[str] = field(default_factory=list)


def _check(deadline: float | None, limits_reason: str) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise OutOfTime(limits_reason)


def build_graph(machine: Machine, limits: Limits = Limits()) -> StateGraph:
    """The reachable graph, every edge kept (liveness needs the graph, not only the states):
    :func:`~kvproof.checker.explicit.search.explore` with ``edges``, tracking no claim.

    ``max_depth`` keeps states at most that many steps deep and ``max_states`` that many
    states; a state with a successor left out is not *expanded*.  The time limit stops the
    search; states not yet expanded then are not expanded either."""
    return explore(machine, limits, claims=[], edges=True).graph


def _fair_aids(machine: Machine) -> set[int]:
    return {inst.aid for inst in machine.instances if inst.action.fair}


def find_lasso(machine: Machine, graph: StateGraph, claim: str, deadline: float | None = None,
               why: str = "time limit reached") -> Lasso | None:
    """The shortest-prefix fair lasso violating some obligation of liveness claim ``claim``, or
    ``None`` when no obligation has one on the graph given (on an incomplete graph: none that
    loops through expanded states).  Past ``deadline`` (a ``time.perf_counter()`` reading) it
    raises :class:`OutOfTime` with the message ``why``."""
    spec = machine.spec
    fair = _fair_aids(machine)
    _check(deadline, why)
    native = graph.pending(claim) if graph.pending is not None else None
    if native is not None:  # the native search's code computed them (the same masks: tests/test_native.py)
        masks, labels = native
        bits = masks.astype(np.int64) if len(labels) <= 62 else np.array(masks.tolist(), dtype=object)
    else:
        pending, labels = compile_pending(spec, spec.claim(claim))
        masks = []
        for k in range(0, len(graph.states), 8 * _TICK):
            _check(deadline, why)
            masks.extend(map(pending, graph.states[k:k + 8 * _TICK]))
        bits = np.array(masks, dtype=object if len(labels) > 62 else np.int64)
    best: tuple[int, int, str, Any] | None = None  # (entry depth, entry, label, component)
    for i, label in enumerate(labels):
        _check(deadline, why)
        member = ((bits >> i) & 1).astype(bool)
        found = _fair_entry(graph, member, fair, deadline, why)
        if found is not None:
            entry, comp = found
            if best is None or graph.depth[entry] < best[0]:
                best = (graph.depth[entry], entry, label, comp)
    if best is None:
        return None
    _, entry, label, comp = best
    return _lasso_at(graph, entry, comp, fair, label, deadline, why)


def _lasso_for(graph: StateGraph, nodes: list[int], fair: set[int], label: str,
               deadline: float | None = None, why: str = "time limit reached") -> Lasso | None:
    """The fair lasso with the shortest prefix inside ``nodes`` (the states where one
    obligation is pending), or ``None``."""
    member = np.zeros(len(graph.states), bool)
    member[np.asarray(nodes, dtype=np.int64)] = True
    found = _fair_entry(graph, member, fair, deadline, why)
    if found is None:
        return None
    return _lasso_at(graph, found[0], found[1], fair, label, deadline, why)


_SMALL_GRAPH = 20_000
"""States (of a subgraph's cyclic core) under which :func:`strong_components` runs Tarjan's
algorithm in Python rather than loading scipy (whose import costs more than such a graph's
components); once scipy is loaded, every core goes to it."""


def strong_components(n: int, src: np.ndarray, dst: np.ndarray, method: str | None = None) -> np.ndarray:
    """A component number (``0 .. n - 1``) per state of the directed graph of ``n`` states and
    edges ``src[k] -> dst[k]``: equal exactly for states in the same strongly connected component.

    A state no cycle can pass through (no edge in, or none out, once such states' edges are
    dropped, a few rounds at numpy speed: :func:`_cyclic_core`) is a component of its own,
    numbered by itself; the rest, renumbered compactly, go to ``scipy.sparse.csgraph`` (C
    speed), or under :data:`_SMALL_GRAPH` states while scipy is not loaded yet to Tarjan's
    algorithm in Python (:func:`_tarjan`); each of their components is numbered by its smallest
    state.  ``method`` (``scipy`` or ``tarjan``) makes the choice instead (the tests compare them);
    ``tests/test_liveness.py`` holds the partition to networkx's on random graphs."""
    comp = np.arange(n, dtype=np.int64)
    core, s, d = _cyclic_core(n, src, dst)
    m = core.size
    if not m:
        return comp
    if method is None:
        method = "scipy" if m >= _SMALL_GRAPH or "scipy.sparse.csgraph" in sys.modules else "tarjan"
    if method == "scipy":
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        _, label = connected_components(csr_matrix((np.ones(s.size, np.int8), (s, d)), shape=(m, m)),
                                        directed=True, connection="strong")
        label = label.astype(np.int64)
    else:
        label = _tarjan(m, s, d)
    least = np.full(m, n, np.int64)
    np.minimum.at(least, label, core)
    comp[core] = least[label]
    return comp


def _cyclic_core(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The states that may lie on a cycle (ascending) and the edges among them, renumbered
    ``0 .. len - 1`` in that order: edges from a state with no edge in or to one with no edge out
    dropped, round after round while a round drops a sixteenth of the edges left (any round's
    states still hold every cycle: stopping early keeps a few more states, never fewer)."""
    keep = np.ones(src.size, bool)
    while True:
        s, d = src[keep], dst[keep]
        ok = (np.bincount(d, minlength=n) > 0)[s] & (np.bincount(s, minlength=n) > 0)[d]
        dropped = ok.size - int(np.count_nonzero(ok))
        if dropped:
            keep[np.flatnonzero(keep)[~ok]] = False
        if dropped * 16 <= ok.size:
            break
    s, d = src[keep], dst[keep]
    on = np.zeros(n, bool)
    on[s] = True
    on[d] = True
    core = np.flatnonzero(on)
    number = np.zeros(n, np.int64)
    number[core] = np.arange(core.size)
    return core, number[s], number[d]


def _tarjan(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Tarjan's algorithm, iterative, in Python: a component number (``0 ..``) per state of the
    graph of ``n`` states and edges ``src[k] -> dst[k]``."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src.tolist(), dst.tolist()):
        adj[u].append(v)
    index, low, on, comp = [-1] * n, [0] * n, [False] * n, [-1] * n
    stack: list[int] = []
    count = c = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = count
        count += 1
        stack.append(root)
        on[root] = True
        work = [(root, 0)]
        while work:
            v, k = work[-1]
            if k < len(adj[v]):
                work[-1] = (v, k + 1)
                w = adj[v][k]
                if index[w] < 0:
                    index[w] = low[w] = count
                    count += 1
                    stack.append(w)
                    on[w] = True
                    work.append((w, 0))
                elif on[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp[w] = c
                    if w == v:
                        break
                c += 1
    return np.array(comp, np.int64)


def _fair_entry(graph: StateGraph, member: np.ndarray, fair: set[int], deadline: float | None,
                why: str) -> tuple[int, set[int] | None] | None:
    """Where the shortest-prefix fair lasso inside ``member`` starts: ``(entry, component)``,
    the component ``None`` for a dead end; ``None`` when there is no fair lasso."""
    src, dst, aid, expanded, depth = graph.arrays()
    n = len(graph.states)
    member = member & expanded  # a state expanded only in part has an incomplete enabled set
    if not member.any():
        return None
    width = int(max(int(aid.max(initial=-1)), max(fair, default=-1))) + 1
    fair_aid = np.zeros(width, bool)
    fair_aid[sorted(fair)] = True
    outdeg = np.diff(np.asarray(graph.offsets, dtype=np.int64))
    dead = member & (outdeg == 0)
    keep = member[src] & member[dst]
    ks, kd, ka = src[keep], dst[keep], aid[keep]
    _check(deadline, why)
    comp = strong_components(n, ks, kd)
    _check(deadline, why)
    size = np.bincount(comp[member], minlength=n)
    inside = comp[ks] == comp[kd]
    cyclic = size > 1
    cyclic[comp[ks[inside & (ks == kd)]]] = True  # a single state with a self-loop
    # the fair actions enabled at every state of a component must be taken inside it
    fe = member[src] & fair_aid[aid]
    pairs = _distinct(src[fe] * width + aid[fe])  # (state, fair action enabled there)
    comp_aid, count = _distinct(comp[pairs // width] * width + pairs % width, counts=True)
    always = comp_aid[count == size[comp_aid // width]]
    ia = ka[inside]
    taken = _distinct(comp[ks[inside]][fair_aid[ia]] * width + ia[fair_aid[ia]])
    unfair = always[~np.isin(always, taken, kind="sort")] // width
    fair_comp = cyclic
    fair_comp[unfair] = False
    candidates = np.flatnonzero(dead | (member & fair_comp[comp]))
    if candidates.size == 0:
        return None
    entry = int(candidates[np.lexsort((candidates, depth[candidates]))[0]])
    if dead[entry]:
        return entry, None
    return entry, set(np.flatnonzero(comp == comp[entry]).tolist())


def _distinct(a: np.ndarray, counts: bool = False):
    """The sorted distinct values of ``a`` (and how often each occurs), by one sort (numpy's
    ``unique`` hashes, several times slower on these arrays)."""
    a = np.sort(a)
    first = np.ones(a.size, bool)
    first[1:] = a[1:] != a[:-1]
    values = a[first]
    if not counts:
        return values
    return values, np.diff(np.append(np.flatnonzero(first), a.size))


def _lasso_at(graph: StateGraph, entry: int, comp: set[int] | None, fair: set[int], label: str,
              deadline: float | None, why: str) -> Lasso:
    prefix = graph.path_to(entry)
    prefix_aids = [graph.via[sid] for sid in prefix[1:]]
    if comp is None:  # a dead end: the loop is the last state repeated
        return Lasso(label, prefix, prefix_aids, len(prefix) - 1)
    cycle, aids = _fair_cycle(graph, comp, entry, fair, deadline, why)
    return Lasso(label, prefix + cycle[1:], prefix_aids + aids, len(prefix) - 1)


def _fair_cycle(graph: StateGraph, comp: set[int], entry: int, fair: set[int], deadline: float | None = None,
                why: str = "time limit reached") -> tuple[list[int], list[int]]:
    """A fair cycle in ``comp`` (a component with a fair cycle) from ``entry`` back to
    ``entry``: for every fair action enabled somewhere in the component, the cycle takes it or
    passes through a state where it is disabled (each goal reached by a shortest path inside
    the component), so no fair action stays enabled on the cycle without being taken."""
    enabled_at: dict[int, frozenset[int]] = {}

    def enabled(u: int) -> frozenset[int]:
        e = enabled_at.get(u)
        if e is None:
            e = enabled_at[u] = frozenset(a for a, _ in graph.out(u) if a in fair)
        return e

    goals: set[int] = set()
    for k, u in enumerate(comp):
        if k % _TICK == 0:
            _check(deadline, why)
        goals |= enabled(u)
    states, aids = [entry], []
    taken: set[int] = set()
    disabled = goals - enabled(entry)

    def visit(a: int, v: int) -> None:
        states.append(v)
        aids.append(a)
        taken.add(a)
        disabled.update(goals - enabled(v))

    for b in sorted(goals):
        if b in taken or b in disabled:
            continue

        def takes_or_lacks(u: int, b: int = b) -> bool:
            return b not in enabled(u) or any(a == b and v in comp for a, v in graph.out(u))

        for a, v in _bfs(graph, comp, states[-1], takes_or_lacks, deadline=deadline, why=why):
            visit(a, v)
        u = states[-1]
        if b not in disabled:  # reached a state that takes b inside the component: take it
            visit(b, next(v for a, v in graph.out(u) if a == b and v in comp))
    for a, v in _bfs(graph, comp, states[-1], lambda u: u == entry, at_least_one=not aids, deadline=deadline,
                     why=why):
        visit(a, v)
    return states, aids


def _bfs(graph: StateGraph, comp: set[int], src: int, goal: Callable[[int], bool], at_least_one: bool = False,
         deadline: float | None = None, why: str = "time limit reached") -> list[tuple[int, int]]:
    """Shortest ``(aid, state)`` steps inside ``comp`` from ``src`` to a state satisfying
    ``goal`` (at least one step when ``at_least_one``, so ``src`` may be its own goal)."""
    if not at_least_one and goal(src):
        return []
    prev: dict[int, tuple[int, int]] = {}
    queue = deque([src])
    seen = set() if at_least_one else {src}
    pops = 0
    while queue:
        u = queue.popleft()
        pops += 1
        if pops % _TICK == 0:
            _check(deadline, why)
        for a, v in graph.out(u):
            if v not in comp or v in seen:
                continue
            seen.add(v)
            prev[v] = (u, a)
            if goal(v):
                out, x = [], v
                while True:
                    pu, pa = prev[x]
                    out.append((pa, x))
                    x = pu
                    if x == src:
                        return out[::-1]
            queue.append(v)
    raise AssertionError("a strongly connected component is missing a path")  # pragma: no cover


def pending_throughout(machine: Machine, claim: str, states: list[bytes]) -> list[str]:
    """Labels of the obligations of ``claim`` pending in every one of ``states``."""
    pending, labels = compile_pending(machine.spec, machine.spec.claim(claim))
    mask = -1
    for s in states:
        mask &= pending(s)
    return [label for i, label in enumerate(labels) if mask >> i & 1]


def lasso_is_fair(machine: Machine, claim: str, states: list[bytes], actions: list[int], loop: int) -> str | None:
    """Why a stored lasso does not violate ``claim`` (``None`` when it does): the loop must
    close, one obligation must be pending on every loop state, and every fair action enabled
    on all loop states must be taken inside the loop.  It is a second opinion: enabled actions
    and obligations come from the reference interpreter, not the compiled engine."""
    if not 0 <= loop < len(states):
        return f"loop index {loop} outside the trace"
    spec = machine.spec

    def pending(s: bytes) -> int:
        return sum(1 << i for i, (_, v) in enumerate(reference_claim(spec, claim, s)) if v)

    def enabled(s: bytes) -> set[int]:
        return {aid for aid, _ in reference_successors(spec, s)}

    loop_states = states[loop:]
    if len(loop_states) > 1 and states[-1] != states[loop]:
        return "the last state does not return to the loop state"
    if len(loop_states) == 1 and enabled(states[-1]):
        return "the loop is a single state, but actions are enabled there"
    mask = -1
    for s in loop_states:
        mask &= pending(s)
    if not mask:
        return "no obligation stays pending around the loop"
    fair = _fair_aids(machine)
    always: set[int] | None = None
    for s in loop_states[:-1] if len(loop_states) > 1 else loop_states:
        on = enabled(s) & fair
        always = on if always is None else always & on
    taken = set(actions[loop:])
    missing = sorted((always or set()) - taken)
    if missing:
        return f"unfair loop: {machine.label(missing[0])} stays enabled and is never taken"
    return None
