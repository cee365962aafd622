"""Action coverage and state-graph export, from the reachable graph (a pass of its own).

TLC reports how often each action fired and which never did: an action that never fires in a
scenario is either switched off by its settings or a modelling bug (a guard that can never
hold).  :func:`action_coverage` counts the transitions of the reachable graph by action, and
:func:`state_graph` / :func:`write_graph` export the graph of a small scenario (DOT or GraphML,
through networkx) for other tools.

Both build the graph with :func:`~kvproof.checker.explicit.liveness.build_graph` (every edge kept), so
the plain ``check`` pays nothing for them: only ``check --coverage`` and ``kvproof graph`` do.
The counts are over the unreduced graph (no symmetry reduction), so the transitions add up to
the state and transition counts of a plain explicit ``check`` of the same scenario.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kvproof.checker.explicit.search import Limits
from kvproof.checker.explicit.liveness import StateGraph, build_graph

__all__ = ["Coverage", "action_coverage", "coverage_of_graph", "state_graph", "write_graph", "GRAPH_LIMIT",
           "GraphTooBig"]

GRAPH_LIMIT = 10_000
"""The most states ``kvproof graph`` exports (a DOT file of more is no longer readable)."""


@dataclass
class Coverage:
    """How often each action fired over a reachable graph."""

    states: int
    transitions: int
    complete: bool
    reason: str
    fired: dict[str, int]
    """Transitions per action name, in the spec's order of actions (0: it never fired)."""

    @property
    def never_fired(self) -> list[str]:
        """The actions with no transition anywhere in the graph."""
        return [name for name, n in self.fired.items() if n == 0]

    def to_json(self) -> dict[str, Any]:
        """The ``coverage`` object of ``check --coverage --json``."""
        return {"states": self.states, "transitions": self.transitions, "complete": self.complete,
                "reason": self.reason, "actions": dict(self.fired), "never_fired": self.never_fired}


def coverage_of_graph(machine: Any, graph: StateGraph) -> Coverage:
    """The per-action transition counts of ``graph`` (a graph of ``machine``)."""
    per_instance = np.bincount(np.asarray(graph.aids, dtype=np.int64), minlength=len(machine.instances))
    fired = {a.name: 0 for a in machine.spec.actions}
    for inst in machine.instances:
        fired[inst.name] = fired.get(inst.name, 0) + int(per_instance[inst.aid])
    return Coverage(graph.stats.states, graph.stats.transitions, graph.complete, graph.reason, fired)


def action_coverage(machine: Any, limits: Limits = Limits()) -> Coverage:
    """Build ``machine``'s reachable graph (within ``limits``) and count its transitions by action."""
    return coverage_of_graph(machine, build_graph(machine, limits))


class GraphTooBig(Exception):
    """The scenario has more states than the export limit."""


def state_graph(machine: Any, limit: int = GRAPH_LIMIT) -> Any:
    """The reachable graph as a networkx ``MultiDiGraph``: a node per state (``depth``, and
    ``initial`` on state 0), an edge per transition (its ``action`` label; two actions between
    the same states are two edges).  Raises :class:`GraphTooBig` past ``limit`` states and
    ``ImportError`` without networkx."""
    import networkx as nx

    graph = build_graph(machine, Limits(max_states=limit))
    if not graph.complete:
        raise GraphTooBig(f"more than {limit:,} states")
    g = nx.MultiDiGraph()
    for u in range(graph.stats.states):
        g.add_node(u, depth=int(graph.depth[u]), initial=(u == 0))
    labels: dict[int, str] = {}
    for u in range(graph.stats.states):
        for aid, v in graph.out(u):
            label = labels.get(aid) or labels.setdefault(aid, machine.label(aid))
            g.add_edge(u, v, action=label)
    return g


def write_graph(g: Any, path: str | Path | None, fmt: str) -> str | None:
    """Write ``g`` as ``fmt`` (``dot`` or ``graphml``) to ``path``; without a path, return the text."""
    import io

    import networkx as nx

    if fmt == "graphml":
        buf = io.BytesIO()
        nx.write_graphml(g, buf)
        text = buf.getvalue().decode("utf-8")
    else:
        text = _dot(g)
    if path is None:
        return text
    Path(path).write_text(text, encoding="utf-8")
    return None


def _dot(g: Any) -> str:
    """Graphviz DOT of a state graph (networkx writes DOT only through pydot or pygraphviz)."""

    def quote(s: Any) -> str:
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph states {", "  node [shape=circle];"]
    for u, data in g.nodes(data=True):
        extra = ", shape=doublecircle" if data.get("initial") else ""
        lines.append(f"  {u} [depth={data['depth']}{extra}];")
    for u, v, data in g.edges(data=True):
        lines.append(f"  {u} -> {v} [label={quote(data['action'])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
