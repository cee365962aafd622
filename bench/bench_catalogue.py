"""The catalogue's CPU seconds against the target of 5 s: ``kvproof check --no-traces --quiet``, measured and broken down.

    python bench/bench_catalogue.py                  # the median of 3 runs, then where the CPU goes
    python bench/bench_catalogue.py --runs 5 --against 1576691   # that commit and this tree, alternately

The figure is the CPU time (user + system, ``getrusage`` of the child) of the whole command as a
user runs it (``python -m kvproof check --no-traces --quiet`` in this tree, the compiled-code
and native caches warm after a first run that is not counted), the median of ``--runs`` runs;
it is compared with :data:`TARGET` (met, or missed by how much).  The breakdown then checks the
catalogue again in this process with each phase's functions wrapped by a CPU clock: imports,
building each scenario's compiled machine (Python code generation and ``compile``), the
breadth-first searches (the one keeping the graph, and the backends' safety searches: the
Python probe and the native backend), within them the graph's edge bookkeeping and the claims
of each level, the liveness check (pending masks, strongly connected components, the lasso),
the counterexamples' replay, and the scenarios that take longest.  ``--against REV`` runs the
command alternately from a copy of commit ``REV`` (``git archive``) and from this tree, so both
see the same load.  CPU seconds are less disturbed by other processes than wall-clock seconds,
but a loaded machine still slows both (shared caches): the load average is printed before and
after.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_startup import _cpu_of  # (bench/ is this script's folder, first on sys.path)

ROOT = Path(__file__).resolve().parents[1]
TARGET = 5.0
"""CPU seconds the whole catalogue's check should take at most."""
ARGS = ["check", "--no-traces", "--quiet"]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # what users have


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(runs: int, tree: Path = ROOT) -> list[float]:
    """CPU seconds of ``runs`` runs of the catalogue's check from ``tree`` (after one warm-up)."""
    cmd = [sys.executable, "-m", "kvproof", *ARGS]
    _cpu_of(cmd, _env(), tree)  # warm-up: bytecode, the compiled-code cache, the native cache
    return [_cpu_of(cmd, _env(), tree)[0] for _ in range(runs)]


def verdict(cpu: float) -> str:
    """``met`` or ``missed`` against :data:`TARGET`, by how much."""
    gap = cpu - TARGET
    return f"met ({-gap:.2f} s under)" if gap <= 0 else f"missed by {gap:.2f} s ({cpu / TARGET:.1f}x the target)"


class Clock:
    """CPU seconds per phase: :meth:`wrap` replaces a function by one that adds its CPU time to
    its phase.  The top phases exclude each other (a call inside another top phase's counts
    there only); a sub-phase (its name indented) counts inside whichever phase it runs."""

    def __init__(self):
        self.spent: dict[str, float] = {}
        self.busy: set[str] = set()

    def wrap(self, owner, name: str, phase: str) -> None:
        """Time ``owner.name`` (a module's function or a class's method) as ``phase``."""
        f = getattr(owner, name)
        key = phase if phase.startswith("  ") else "top"
        spent, busy = self.spent, self.busy

        def timed(*a, **k):
            if key in busy:
                return f(*a, **k)
            busy.add(key)
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.process_time() - t
                busy.discard(key)

        setattr(owner, name, timed)


def breakdown(top: int = 8) -> None:
    """Check the catalogue in this process with its phases timed, and print where the CPU went."""
    t0 = time.process_time()
    from kvproof.checker.cli import commands  # noqa: F401 - what the command imports first
    from kvproof.checker.explicit import run, search
    from kvproof.checker.explicit.backends import base as backends_base
    from kvproof.model.scenario import builtins

    imports = time.process_time() - t0
    clock = Clock()
    live = importlib.import_module("kvproof.checker.explicit.liveness")
    clock.wrap(backends_base.Backend, "machine", "compile the machine (code generation, compile)")
    auto = importlib.import_module("kvproof.checker.explicit.backends.auto")
    for cls in (backends_base.Backend, auto.AutoBackend):  # the Python engine's, or the probe then native
        clock.wrap(cls, "run_graph", "search keeping the graph (liveness scenarios)")
    clock.wrap(search, "_add_edges", "  of which: the graph's edges")
    clock.wrap(search.ClaimBook, "level", "  of which: claims of levels where one hits")
    for backend in ("python", "auto"):
        mod = importlib.import_module(f"kvproof.checker.explicit.backends.{backend}")
        cls = getattr(mod, f"{backend.capitalize()}Backend")
        clock.wrap(cls, "run" if backend == "auto" else "explore", "safety search (probe, native)")
    clock.wrap(run, "_liveness_result", "liveness check (pending masks, components, lasso)")
    clock.wrap(live, "strong_components", "  of which: strongly connected components")
    clock.wrap(run, "trace_of", "counterexamples replayed")
    clock.wrap(run, "_vacuous_witnesses", "vacuity notes (the base spec's search)")
    per: list[tuple[float, str, int]] = []
    scenarios = builtins()
    t1 = time.process_time()
    for sc in scenarios:
        t = time.process_time()
        report = run.check_scenario(sc)
        per.append((time.process_time() - t, sc.name, report.stats.states))
    total = time.process_time() - t1
    print(f"breakdown (this process, {len(scenarios)} scenarios): imports {imports:.2f} s, checks {total:.2f} s")
    order = ["compile the machine (code generation, compile)", "safety search (probe, native)",
             "search keeping the graph (liveness scenarios)", "  of which: the graph's edges",
             "  of which: claims of levels where one hits", "liveness check (pending masks, components, lasso)",
             "  of which: strongly connected components", "counterexamples replayed",
             "vacuity notes (the base spec's search)"]
    for phase in order + [p for p in clock.spent if p not in order]:
        if phase in clock.spent:
            print(f"  {clock.spent[phase]:6.2f} s  {phase}")
    named = sum(s for p, s in clock.spent.items() if not p.startswith("  "))
    print(f"  {total - named:6.2f} s  the rest (specs built, expectations, reports)")
    per.sort(reverse=True)
    print(f"  longest scenarios: " + ", ".join(f"{n} {s:.2f} s ({k:,} states)" for s, n, k in per[:top]))
    small = [s for s, _, k in per if k < 20_000]
    print(f"  {len(small)} scenarios under 20,000 states: {sum(small):.2f} s in all, "
          f"{statistics.median(small) * 1000:.0f} ms median")


def against(rev: str, runs: int) -> None:
    """The catalogue's check from commit ``rev`` and from this tree, alternately."""
    with tempfile.TemporaryDirectory() as d:
        old = Path(d)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", d], input=archive, check=True)
        cmd = [sys.executable, "-m", "kvproof", *ARGS]
        for tree in (old, ROOT):
            _cpu_of(cmd, _env(), tree)  # warm-up
        cpus: dict[Path, list[float]] = {old: [], ROOT: []}
        for _ in range(runs):
            for tree in (old, ROOT):
                cpus[tree].append(_cpu_of(cmd, _env(), tree)[0])
        for name, tree in ((rev, old), ("this tree", ROOT)):
            c = cpus[tree]
            print(f"{name:>12}: {statistics.median(c):.2f} s CPU (median of {runs}; {min(c):.2f} to {max(c):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of the command (default 3; the median counts)")
    ap.add_argument("--against", metavar="REV", help="also time commit REV's check, alternately with this tree's")
    ap.add_argument("--no-breakdown", action="store_true", help="only the command's CPU seconds")
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average before: {_load()}")
    if args.against:
        against(args.against, args.runs)
    cpus = measure(args.runs)
    cpu = statistics.median(cpus)
    print(f"kvproof {' '.join(ARGS)}: {cpu:.2f} s CPU (median of {args.runs}: "
          f"{', '.join(f'{c:.2f}' for c in cpus)}); target {TARGET:g} s: {verdict(cpu)}")
    if not args.no_breakdown:
        breakdown()
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
