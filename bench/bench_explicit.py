"""Benchmark of the explicit engine: distinct states, seconds, states per second.

One standard scenario (the catalogue's ``v0.5.22``: every fix, client aborts and transfer
failures on) at three sizes, by the number of requests.  Run it with::

    python bench/bench_explicit.py [--sizes 2,3,4]

Figures vary with the machine and its load: compare ratios within one run (CPU seconds are
less disturbed by other processes than wall-clock seconds).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import replace

from kvproof.checker.explicit import explore
from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.model.scenario import builtin

SHAPES = [Request("A", 1), Request("B", 2), Request("B", 1), Request("A", 1), Request("C", 1)]


def config(n: int):
    """v0.5.22 with the first ``n`` request shapes (R1 is the over-long prompt)."""
    base = builtin("v0.5.22").config
    return replace(base, requests=tuple(SHAPES[:n]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="2,3,4", help="request counts, comma-separated")
    args = p.parse_args()
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
