"""Benchmark of the explicit engine: distinct states, seconds, states per second.

One standard scenario (the catalogue's ``v0.5.22``: every fix, client aborts and transfer
failures on) at three sizes, by the number of requests.  Run it with::

    python bench/bench_explicit.py [--sizes 2,3,4]

Figures vary with the machine and its load: compare ratios within one run (CPU seconds are
less disturbed by other processes than wall-clock seconds).

``--against REV`` times this checkout's engine against the one at git revision ``REV`` on the
same machines, alternately, and prints medians of ``--repeat`` runs (CPU seconds): the plain
search (``explore``), the search keeping the graph (``explore(edges=True)`` against REV's
``liveness.build_graph``), and what ``check_scenario`` runs for a scenario with safety and
liveness claims (one search keeping the graph, against REV's search plus ``build_graph``)::

    python bench/bench_explicit.py --sizes 2,3 --against HEAD~1 --scenarios sglang-0.5.23-tp2

``--native`` times the Python engine against the native backend (``--backend native``: the
model compiled to C, :mod:`kvproof.checker.explicit.native`) on the same machines, alternately, medians
of ``--repeat`` runs of the whole search in CPU seconds per distinct state, for each visited-set
mode; the C compiler's time is reported apart (a cold cache in a temporary directory), and the
two engines' state and transition counts must agree::

    python bench/bench_explicit.py --native --sizes 3 --scenarios tp2x2-ready-any,sglang-0.5.23-tp2

``--symmetry`` does the same with both engines exploring one representative per orbit (the
scenario's declared symmetry, checked first; the native backend computes successors in C and
maps them to representatives with the same Python canonicaliser); a ``--scenarios`` entry may
be a scenario file::

    python bench/bench_explicit.py --native --symmetry --sizes "" --scenarios bench/standard.toml --visited fingerprint
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from dataclasses import replace

from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.model.scenario import builtin

SHAPES = [Request("A", 1), Request("B", 2), Request("B", 1), Request("A", 1), Request("C", 1)]


def config(n: int):
    """v0.5.22 with the first ``n`` request shapes (R1 is the over-long prompt)."""
    base = builtin("v0.5.22").config
    return replace(base, requests=tuple(SHAPES[:n]))


def engine_at(rev: str):
    """``(explore, build_graph)`` of the engine at git revision ``rev``, loaded from its sources
    (``checker/explicit/search.py`` and ``checker/explicit/liveness.py``; everything else from this checkout)."""
    root = Path(__file__).resolve().parent.parent
    mods = []
    for name in ("search", "liveness"):
        src = subprocess.run(["git", "show", f"{rev}:checker/explicit/{name}.py"], cwd=root, check=True,
                             capture_output=True, text=True).stdout
        src = src.replace("kvproof.checker.explicit.search import", "_bench_old_search import")
        spec = importlib.util.spec_from_loader(f"_bench_old_{name}", loader=None)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        exec(compile(src, f"{rev}:checker/explicit/{name}.py", "exec"), mod.__dict__)
        mods.append(mod)
    return mods[0].explore, mods[1].build_graph


def cpu(fn) -> tuple[float, object]:
    """CPU seconds of ``fn()`` and its result."""
    c0 = time.process_time()
    out = fn()
    return time.process_time() - c0, out


def against(rev: str, machines: list[tuple[str, Machine]], repeat: int) -> None:
    """Old against new, alternately on each machine; medians of ``repeat`` runs."""
    old_explore, old_graph = engine_at(rev)
    print(f"# against {rev}: CPU seconds, medians of {repeat} alternate runs; ratio = this checkout / {rev}")
    print(f"{'machine':>28} {'states':>9} {'edges':>9} {'what':>16} {rev:>9} {'now':>9} {'ratio':>6}")
    for name, m in machines:
        safety = [i for i, c in enumerate(m.claims) if c.kind != "liveness"]
        pairs = {
            "plain search": (lambda: old_explore(m), lambda: explore(m)),
            "graph kept": (lambda: old_graph(m), lambda: explore(m, claims=[], edges=True)),
            "check (both)": (lambda: (old_explore(m, claims=safety), old_graph(m)),
                             lambda: explore(m, claims=safety, edges=True)),
        }
        g = explore(m, claims=[], edges=True).graph
        for what, (old, new) in pairs.items():
            t_old, t_new = [], []
            for _ in range(repeat):
                t_old.append(cpu(old)[0])
                t_new.append(cpu(new)[0])
            a, b = statistics.median(t_old), statistics.median(t_new)
            print(f"{name:>28} {g.stats.states:>9,} {g.stats.transitions:>9,} {what:>16} {a:>9.3f} {b:>9.3f} "
                  f"{b / a:>6.2f}")
            sys.stdout.flush()


def native(machines: list[tuple[str, object]], repeat: int, modes: list[str], symmetry: bool = False) -> None:
    """The Python engine against the native backend, alternately on each machine; medians of
    ``repeat`` runs (with ``symmetry``: both reduced by the spec's declared symmetry).
    Compiling (cold cache) is timed apart."""
    import os
    import tempfile

    from kvproof.checker.explicit.native import NativeMachine

    os.environ["KVPROOF_CACHE_DIR"] = tempfile.mkdtemp(prefix="kvproof-bench-native-")
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
          f"CPU seconds, medians of {repeat} alternate runs; ratio = Python / native")
    print(f"{'machine':>24} {'visited':>11} {'states':>9} {'cc s':>6} {'py s':>7} {'native s':>8} "
          f"{'py us/st':>8} {'nat us/st':>9} {'ratio':>6} {'nat B/st':>8}")
    for name, spec in machines:
        py = Machine(spec)
        t0 = time.perf_counter()
        nm = NativeMachine(spec)
        build = time.perf_counter() - t0
        cc = nm.native.compile_seconds
        red = {}
        if symmetry:
            from kvproof.checker.explicit.symmetry import reduction_for

            r = reduction_for(py)
            if r.canonicaliser is None:
                raise SystemExit(f"{name}: no symmetry reduction: {r.note}")
            red = dict(canonicaliser=r.canonicaliser)
            print(f"{name:>24} symmetry {r.note}")
        for mode in modes:
            t_py, t_nat = [], []
            for _ in range(repeat):
                c, a = cpu(lambda: explore(py, visited=mode, **red))
                t_py.append(c)
                c, b = cpu(lambda: explore(nm, visited=mode, **red))
                t_nat.append(c)
                if (a.stats.states, a.stats.transitions, a.stats.represented) != \
                        (b.stats.states, b.stats.transitions, b.stats.represented):
                    raise SystemExit(f"{name}: the engines disagree: {a.stats.states} / {b.stats.states} states")
            p_, n_ = statistics.median(t_py), statistics.median(t_nat)
            st = b.stats.states
            print(f"{name:>24} {mode:>11} {st:>9,} {cc:>6.2f} {p_:>7.2f} {n_:>8.2f} {p_ / st * 1e6:>8.2f} "
                  f"{n_ / st * 1e6:>9.2f} {p_ / n_:>6.1f} {b.stats.bytes_per_state:>8.0f}")
            sys.stdout.flush()
        print(f"{'':>24} (generating the C and loading it, compiler included: {build:.2f} s wall)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="2,3,4", help="request counts, comma-separated")
    p.add_argument("--against", metavar="REV", help="time against the engine at this git revision instead")
    p.add_argument("--scenarios", default="", help="with --against or --native: built-in scenarios to time too, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="with --against or --native: runs of each, alternately (default 3)")
    p.add_argument("--native", action="store_true", help="time the Python engine against the native backend")
    p.add_argument("--visited", default="exact,fingerprint", help="with --native: visited-set modes, comma-separated")
    p.add_argument("--symmetry", action="store_true", help="with --native: both engines reduced by symmetry")
    args = p.parse_args()
    if args.native:
        from kvproof.model.scenario import load_scenario

        machines = [(f"v0.5.22, {n} requests", PdProtocol(config(int(n)))) for n in args.sizes.split(",") if n]
        machines += [(Path(n).stem if n.endswith(".toml") else n,
                      (load_scenario(n) if n.endswith(".toml") else builtin(n)).build())
                     for n in args.scenarios.split(",") if n]
        native(machines, args.repeat, args.visited.split(","), args.symmetry)
        return
    if args.against:
        machines = [(f"v0.5.22, {n} requests", Machine(PdProtocol(config(int(n))))) for n in args.sizes.split(",")]
        machines += [(n, Machine(builtin(n).build())) for n in args.scenarios.split(",") if n]
        against(args.against, machines, args.repeat)
        return
    print(f"# python {platform.python_version()} on {platform.machine()}, {platform.processor() or 'cpu'}")
    print(f"{'requests':>8} {'states':>12} {'transitions':>12} {'depth':>6} {'compile s':>9} {'search s':>9} "
          f"{'cpu s':>8} {'states/s':>10}")
    for n in [int(x) for x in args.sizes.split(",")]:
        t0 = time.perf_counter()
        machine = Machine(PdProtocol(config(n)))
        compile_s = time.perf_counter() - t0
        c0 = time.process_time()
        ex = explore(machine)
        cpu = time.process_time() - c0
        s = ex.stats
        print(f"{n:>8} {s.states:>12,} {s.transitions:>12,} {s.depth:>6} {compile_s:>9.2f} {s.seconds:>9.2f} "
              f"{cpu:>8.2f} {s.states_per_second:>10,.0f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
