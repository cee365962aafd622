"""Benchmark of the explicit engine against a plain BFS, with reductions and workers.

The standard scaled scenario (``bench/standard.toml``: five requests, one decode and
one prefill page, arrivals unordered; about 8.2 million states without reduction) is explored by:

* ``baseline``: a plain breadth-first search calling the spec's compiled successor function
  directly, on tuples, with a Python ``set`` of tuples and no claims, parents or reductions;
* the engine (claims, parents, shortest counterexamples) with exact states and with 64-bit
  fingerprints, with symmetry reduction, and with 2 worker processes.

Run it with ``python bench/bench_engine.py [--tenants AAAAB] [--skip baseline,ray,...]``; a
smaller ``--tenants AAA`` runs in seconds (the Ray rows need ``kvproof[ray]``).  CPU seconds
(of every process: the driver and the workers) are shown next to wall-clock seconds, and
*busiest* is the CPU time of the busiest process: on a shared machine a worker does not always
get a core, so compare ratios within one run, and CPU times across runs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

from kvproof.checker.explicit.search import explore
from kvproof.checker.explicit.parallel import explore_parallel
from kvproof.checker.explicit.ray_backend import explore_ray
from kvproof.checker.explicit.symmetry import reduction_for
from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Request
from kvproof.model.scenario import load_scenario

STANDARD = Path(__file__).with_name("standard.toml")


def _burn(n: int = 5_000_000) -> int:
    x = 0
    for i in range(n):
        x += i
    return x


def cores_available() -> float:
    """How many cores' worth two CPU-bound processes get right now (2.0 on two idle cores):
    the ceiling for any speed-up with two workers in this run."""
    import multiprocessing as mp

    t0 = time.perf_counter()
    _burn()
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    with mp.get_context("fork").Pool(2) as pool:
        pool.map(_burn, [5_000_000] * 2)
    return 2 * one / (time.perf_counter() - t0)


def baseline(machine: Machine) -> tuple[int, float, float]:
    """Plain BFS: tuples in a set, the compiled successor function, nothing else."""
    src = machine.successors_source.replace("bytearray(s)", "list(s)").replace("bytes(t)", "tuple(t)")
    ns: dict = {}
    exec(src, ns)
    successors = ns["successors"]
    t0, c0 = time.perf_counter(), time.process_time()
    init = tuple(machine.init)
    seen = {init}
    frontier = [init]
    while frontier:
        nxt = []
        for s in frontier:
            for _, t in successors(s):
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    per_state = (sys.getsizeof(seen) + len(seen) * sys.getsizeof(init)) / len(seen)
    return len(seen), wall, cpu, per_state


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tenants", default=None,
                   help="one letter per one-page request, replacing the file's requests (default: "
                        "standard.toml's own, four one-page requests of A and an over-long one of B)")
    p.add_argument("--skip", default="", help="comma-separated rows to skip")
    args = p.parse_args()
    sc = load_scenario(str(STANDARD))
    if args.tenants:
        sc = replace(sc, config=replace(sc.config, requests=tuple(Request(t, 1) for t in args.tenants)))
    shape = args.tenants or " ".join(f"{r.tenant}{r.pages}" for r in sc.config.requests)
    machine = Machine(sc.build())
    skip = set(args.skip.split(","))
    print(f"# {sc.name} with requests {shape}; python {platform.python_version()} on "
          f"{platform.machine()}, {platform.processor() or 'cpu'}")
    print(f"# two CPU-bound processes got {cores_available():.2f} cores' worth just now (2.00 when idle)")
    print(f"{'run':<38} {'states':>10} {'wall s':>7} {'cpu s':>7} {'busiest':>7} {'states/s':>8} "
          f"{'st/cpu s':>8} {'bytes/st':>8} {'reduction':>9}")

    def row(name, states, wall, cpu, per_state, reduction=1.0, busiest=None):
        busiest = cpu if busiest is None else busiest
        print(f"{name:<38} {states:>10,} {wall:>7.1f} {cpu:>7.1f} {busiest:>7.1f} {states / wall:>8,.0f} "
              f"{states / cpu:>8,.0f} {per_state:>8.1f} {reduction:>9.2f}", flush=True)

    if "baseline" not in skip:
        row("baseline (tuples in a set)", *baseline(machine))
    red = reduction_for(machine)
    canon = red.canonicaliser
    runs = [
        ("engine, exact", lambda: explore(machine, visited="exact")),
        ("engine, fingerprint", lambda: explore(machine, visited="fingerprint")),
        ("engine, fingerprint, 2 workers", lambda: explore_parallel(machine, 2, visited="fingerprint")),
        ("symmetry, fingerprint", lambda: explore(machine, visited="fingerprint",
                                                  canonicaliser=canon)),
        ("symmetry, fingerprint, 2 workers", lambda: explore_parallel(machine, 2, visited="fingerprint",
                                                                      canonicaliser=canon)),
        ("engine, fingerprint, ray, 2 workers", lambda: explore_ray(sc, machine, 2, visited="fingerprint")),
        ("symmetry, fingerprint, ray, 2 workers", lambda: explore_ray(sc, machine, 2, visited="fingerprint",
                                                                      canonicaliser=canon)),
    ]
    ray_start = None
    for name, run in runs:
        if any(word in skip for word in name.replace(",", "").split()) or name in skip:
            continue
        if "ray" in name and ray_start is None:  # start the local cluster untimed, say how long it took
            ray_start = _start_ray()
        t0, c0 = time.perf_counter(), time.process_time()
        ex = run()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        workers = ex.stats.worker_cpu
        row(name, ex.stats.states, wall, cpu + sum(workers), ex.stats.bytes_per_state, ex.stats.reduction,
            max(workers) if workers else None)
    print(f"# symmetry: {red.note}")
    if ray_start is not None:
        print(f"# the local Ray cluster (2 CPUs) took {ray_start:.1f} s to start, not counted above")


def _start_ray() -> float:
    import os

    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             object_store_memory=2 * 1024**3)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
