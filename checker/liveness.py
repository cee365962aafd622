"""Fair liveness on the full state graph: lassos where an obligation stays pending forever.

A liveness claim (``@liveness`` in the spec) lists obligations, each a state predicate that must
not stay true forever: "page p0 is held", "R1 has not ended".  An obligation is violated by a
*fair lasso*: a path to a cycle on which it is pending in every state, and on which every fair
action (``fair=True``: the actions the real engine runs eventually) that is enabled in every
state of the cycle is also taken on it (weak fairness).  A state with no successor at all is a
lasso whose loop is that state repeated.

The search builds the whole reachable graph, then for each obligation takes the subgraph of
states where it is pending and its strongly connected components (``networkx``).  A component
is a fair lasso exactly when every fair action enabled throughout it is taken inside it (a
cycle through all its edges then exists); if it is not, no cycle inside it is fair either.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
import networkx as nx

from ..model.compiler import compile_pending
from ..model.machine import Machine
from .explicit import Limits, Stats

__all__ = ["StateGraph", "Lasso", "build_graph", "find_lasso", "lasso_is_fair", "pending_throughout"]


@dataclass
class StateGraph:
    """Every reachable state, its out-edges ``(aid, target)``, and a BFS parent tree."""

    states: list[bytes]
    edges: list[list[tuple[int, int]]]
    parent: list[int]
    via: list[int]
    depth: list[int]
    stats: Stats
    complete: bool
    reason: str = ""

    def path_to(self, sid: int) -> list[int]:
        """State ids from the initial state to ``sid`` along the BFS tree (shortest)."""
        out = [sid]
        while self.parent[out[-1]] >= 0:
            out.append(self.parent[out[-1]])
        out.reverse()
        return out


@dataclass
class Lasso:
    """A fair lasso: ``states`` (ids) from the initial state, ``actions`` between them, and
    ``loop``, the index the last state returns to (the last state equals ``states[loop]``)."""

    obligation: str
    states: list[int]
    actions: list[int]
    loop: int
    notes: list[str] = field(default_factory=list)


def build_graph(machine: Machine, limits: Limits = Limits()) -> StateGraph:
    """Explore breadth-first, keeping every edge (liveness needs the whole graph)."""
    start = time.perf_counter()
    index = {machine.init: 0}
    states, edges, parent, via = [machine.init], [], [-1], [-1]
    stats = Stats()
    complete, reason = True, ""
    deadline = None if limits.max_seconds is None else start + limits.max_seconds
    i = 0
    while i < len(states):
        out = []
        for aid, t in machine.successors(states[i]):
            j = index.get(t)
            if j is None:
                if limits.max_states is not None and len(states) >= limits.max_states:
                    complete, reason = False, f"state limit {limits.max_states} reached"
                    break
                j = index[t] = len(states)
                states.append(t)
                parent.append(i)
                via.append(aid)
            out.append((aid, j))
        edges.append(out)
        stats.transitions += len(out)
        if not complete:
            break
        i += 1
        if deadline is not None and i % 2048 == 0 and time.perf_counter() > deadline:
            complete, reason = False, f"time limit {limits.max_seconds:g} s reached"
            break
    while len(edges) < len(states):  # states found but not expanded when a limit hit
        edges.append([])
    stats.states = len(states)
    stats.quiescent = sum(1 for e in edges if not e)
    stats.seconds = time.perf_counter() - start
    depth = [0] * len(states)
    for sid in range(1, len(states)):
        depth[sid] = depth[parent[sid]] + 1
    stats.depth = max(depth)
    return StateGraph(states, edges, parent, via, depth, stats, complete, reason)


def _fair_aids(machine: Machine) -> set[int]:
    return {inst.aid for inst in machine.instances if inst.action.fair}


def find_lasso(machine: Machine, graph: StateGraph, claim: str) -> Lasso | None:
    """The shortest-prefix fair lasso violating some obligation of liveness claim ``claim``, or
    ``None`` when every obligation holds (on the graph given)."""
    spec = machine.spec
    pending, labels = compile_pending(spec, spec.claim(claim))
    fair = _fair_aids(machine)
    masks = [pending(s) for s in graph.states]
    best: Lasso | None = None
    for i, label in enumerate(labels):
        bit = 1 << i
        nodes = [sid for sid, m in enumerate(masks) if m & bit]
        if not nodes:
            continue
        lasso = _lasso_for(graph, nodes, fair, label)
        if lasso is not None and (best is None or lasso.loop < best.loop):
            best = lasso
    return best


def _lasso_for(graph: StateGraph, nodes: list[int], fair: set[int], label: str) -> Lasso | None:
    member = set(nodes)
    candidates: list[tuple[int, list[int], list[int], int]] = []  # (entry depth, cycle, cycle aids, entry)
    # a state with no successor at all: the system stops with the obligation pending
    for sid in nodes:
        if graph.complete and not graph.edges[sid]:
            candidates.append((graph.depth[sid], [sid], [], sid))
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    for u in nodes:
        for aid, v in graph.edges[u]:
            if v in member:
                g.add_edge(u, v)
    for comp in nx.strongly_connected_components(g):
        if len(comp) == 1:
            (u,) = comp
            if not any(v == u for _, v in graph.edges[u]):
                continue
        always = None
        for u in comp:
            enabled = {aid for aid, _ in graph.edges[u]} & fair
            always = enabled if always is None else always & enabled
        taken = {aid for u in comp for aid, v in graph.edges[u] if v in comp}
        if not (always or set()) <= taken:
            continue  # some fair action stays enabled and is never taken: no fair cycle here
        entry = min(comp, key=lambda sid: (graph.depth[sid], sid))
        cycle, aids = _fair_cycle(graph, comp, entry, sorted(always or set()))
        candidates.append((graph.depth[entry], cycle, aids, entry))
    if not candidates:
        return None
    _, cycle, aids, entry = min(candidates, key=lambda c: (c[0], len(c[2])))
    prefix = graph.path_to(entry)
    prefix_aids = [graph.via[sid] for sid in prefix[1:]]
    if not aids:  # a dead end: the loop is the last state repeated
        return Lasso(label, prefix, prefix_aids, len(prefix) - 1)
    return Lasso(label, prefix + cycle[1:], prefix_aids + aids, len(prefix) - 1)


def _fair_cycle(graph: StateGraph, comp: set[int], entry: int, required: list[int]) -> tuple[list[int], list[int]]:
    """A cycle in ``comp`` from ``entry`` back to ``entry`` that takes every ``required`` fair
    action at least once (each reached by a shortest path inside the component)."""
    states, aids = [entry], []
    for aid in required:
        if aid in aids:
            continue
        starts = {u for u in comp for a, v in graph.edges[u] if a == aid and v in comp}
        path = _bfs(graph, comp, states[-1], lambda u: u in starts)
        for a, v in path:
            states.append(v)
            aids.append(a)
        u = states[-1]
        v = next(v for a, v in graph.edges[u] if a == aid and v in comp)
        states.append(v)
        aids.append(aid)
    back = _bfs(graph, comp, states[-1], lambda u: u == entry, at_least_one=len(aids) == 0)
    for a, v in back:
        states.append(v)
        aids.append(a)
    return states, aids


def _bfs(graph: StateGraph, comp: set[int], src: int, goal, at_least_one: bool = False) -> list[tuple[int, int]]:
    """Shortest ``(aid, state)`` steps inside ``comp`` from ``src`` to a state satisfying
    ``goal`` (at least one step when ``at_least_one``, so ``src`` may be its own goal)."""
    if not at_least_one and goal(src):
        return []
    prev: dict[int, tuple[int, int]] = {}
    queue = deque([src])
    seen = set() if at_least_one else {src}
    while queue:
        u = queue.popleft()
        for a, v in graph.edges[u]:
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
    on all loop states must be taken inside the loop."""
    if not 0 <= loop < len(states):
        return f"loop index {loop} outside the trace"
    pending, labels = compile_pending(machine.spec, machine.spec.claim(claim))
    loop_states = states[loop:]
    if len(loop_states) > 1 and states[-1] != states[loop]:
        return "the last state does not return to the loop state"
    if len(loop_states) == 1 and machine.successors(states[-1]):
        return "the loop is a single state, but actions are enabled there"
    mask = -1
    for s in loop_states:
        mask &= pending(s)
    if not mask:
        return "no obligation stays pending around the loop"
    fair = _fair_aids(machine)
    always: set[int] | None = None
    for s in loop_states[:-1] if len(loop_states) > 1 else loop_states:
        enabled = {aid for aid, _ in machine.successors(s)} & fair
        always = enabled if always is None else always & enabled
    taken = set(actions[loop:])
    missing = sorted((always or set()) - taken)
    if missing:
        return f"unfair loop: {machine.label(missing[0])} stays enabled and is never taken"
    return None

