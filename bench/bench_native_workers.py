"""The native backend with one thread and with ``--workers N`` threads, side by side.

On the KV-page model of the SPIN comparison (``bench/kvpages.py``), each repetition searches it with 1
thread, then with each of ``--workers`` (interleaved, in this one process, the model compiled
once beforehand), and prints per run: states, wall-clock seconds, CPU seconds of the process,
the CPU of each thread slot (the work the threads share) and the *critical path*: the process
CPU outside the slots (work no thread shares: the level bookkeeping) plus the busiest slot.
On an idle machine with a core per thread the wall clock approaches the critical path; on a
loaded one it does not, so the script prints the load average next to every run, and the
ratio of critical paths (the speed-up the work allows) next to the ratio of wall clocks (what
this run got).  The state counts of every run must agree (exit status 1 when they do not)::

    python bench/bench_native_workers.py                      # N=4 D=4: 1,549,016 states
    python bench/bench_native_workers.py --size 4x6 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table; 1 when the state counts disagree."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="4x4", help="NxD of the model (default 4x4: 1,549,016 states)")
    ap.add_argument("--workers", default="2", help="thread counts to compare with 1, comma-separated (default 2)")
    ap.add_argument("--visited", default="exact", choices=("exact", "fingerprint"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    import kvpages as kv

    from kvproof.checker.explicit.native import NativeMachine, explore_native

    n, d = (int(x) for x in args.size.split("x"))
    machine = NativeMachine(kv.KvPages(kv.variant("fix_ack", N=n, D=d)), opt="-O2")
    counts = [1] + [int(w) for w in args.workers.split(",")]
    runs: dict[int, list[tuple[float, float]]] = {w: [] for w in counts}
    states = set()
    print(f"fix_ack N={n} D={d}, {args.visited}, {os.cpu_count()} cores")
    print(f"{'workers':>7} {'states':>10} {'wall s':>7} {'cpu s':>6} {'slot cpu s':>16} {'critical s':>10} {'load':>5}")
    for _ in range(args.repeat):
        for w in counts:
            c0, t0 = time.process_time(), time.perf_counter()
            e = explore_native(machine, visited=args.visited, workers=w)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            slots = e.stats.worker_cpu or (cpu,)
            critical = cpu - sum(slots) + max(slots)
            states.add(e.stats.states)
            runs[w].append((wall, critical))
            print(f"{w:>7} {e.stats.states:>10,} {wall:>7.2f} {cpu:>6.2f} {'/'.join(f'{s:.2f}' for s in slots):>16} "
                  f"{critical:>10.2f} {os.getloadavg()[0]:>5.2f}", flush=True)
    if len(states) != 1:
        print(f"state counts disagree: {sorted(states)}")
        return 1
    base_wall = statistics.median(r[0] for r in runs[1])
    base_crit = statistics.median(r[1] for r in runs[1])
    for w in counts[1:]:
        wall = statistics.median(r[0] for r in runs[w])
        crit = statistics.median(r[1] for r in runs[w])
        print(f"{w} workers vs 1 (medians of {args.repeat}): wall clock {base_wall / wall:.2f}x, "
              f"critical path {base_crit / crit:.2f}x")
    print(f"(load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
