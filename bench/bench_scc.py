"""Benchmark of the liveness check's component phase: networkx against scipy.sparse.csgraph.

For each obligation of a liveness claim, the liveness check takes the subgraph of the states
where it is pending and its strongly connected components.  This times that step, the same
subgraphs, with networkx (``DiGraph`` built edge by edge, then
``strongly_connected_components``: what kvproof used before) and with scipy (a CSR matrix built
from the edge arrays, then ``connected_components(connection="strong")``: what it uses now; the
labels stay an array, as kvproof uses them), and checks that both find the same components.  Run it with::

    pip install networkx   # only for this comparison; kvproof itself does not need it
    python bench/bench_scc.py [SCENARIO ...] [--claim held_pages_are_released]

Figures vary with the machine and its load: compare the ratio within one run (CPU seconds).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from kvproof.checker.explicit.liveness import build_graph
from kvproof.model.compiler import compile_pending
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin, load_scenario


def _scenario(name: str):
    return load_scenario(name) if name.endswith(".toml") else builtin(name)


def _networkx(nx, src: np.ndarray, dst: np.ndarray, nodes: np.ndarray) -> list[frozenset]:
    g = nx.DiGraph()
    g.add_nodes_from(nodes.tolist())
    for u, v in zip(src.tolist(), dst.tolist()):
        g.add_edge(u, v)
    return [frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1]


def _scipy(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    _, label = connected_components(csr_matrix((np.ones(src.size, np.int8), (src, dst)), shape=(n, n)),
                                    directed=True, connection="strong")
    return label


def _groups(label: np.ndarray, nodes: np.ndarray) -> list[frozenset]:
    out: dict[int, list[int]] = {}
    for u in nodes.tolist():
        out.setdefault(int(label[u]), []).append(u)
    return [frozenset(c) for c in out.values() if len(c) > 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenarios", nargs="*", default=["hold-forever-heartbeat", "sglang-0.5.23-tp2"])
    p.add_argument("--claim", default="held_pages_are_released")
    args = p.parse_args()
    import networkx as nx

    print(f"# python {platform.python_version()} on {platform.machine()}; networkx {nx.__version__}")
    print(f"{'scenario':<28} {'states':>9} {'edges':>9} {'obligations':>11} {'networkx s':>10} {'scipy s':>8} "
          f"{'ratio':>6}")
    for name in args.scenarios:
        m = Machine(_scenario(name).build())
        g = build_graph(m)
        src, dst, _, _, _ = g.arrays()
        pending, labels = compile_pending(m.spec, m.spec.claim(args.claim))
        masks = np.array([pending(s) for s in g.states], dtype=np.int64)
        t_nx = t_sp = 0.0
        for i in range(len(labels)):
            member = ((masks >> i) & 1).astype(bool)
            keep = member[src] & member[dst]
            nodes = np.flatnonzero(member)
            t0 = time.process_time()
            a = _networkx(nx, src[keep], dst[keep], nodes)
            t1 = time.process_time()
            label = _scipy(src[keep], dst[keep], len(g.states))
            t2 = time.process_time()
            b = _groups(label, nodes)
            assert sorted(map(sorted, a)) == sorted(map(sorted, b)), (name, labels[i])
            t_nx += t1 - t0
            t_sp += t2 - t1
        print(f"{name:<28} {len(g.states):>9,} {src.size:>9,} {len(labels):>11} {t_nx:>10.2f} {t_sp:>8.3f} "
              f"{t_nx / max(t_sp, 1e-9):>5.0f}x")


if __name__ == "__main__":
    main()
