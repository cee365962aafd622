"""Benchmark of the Z3 engines: bounded model checking seconds per depth, proof seconds per scenario.

Run it with::

    python bench/bench_symbolic.py bmc [--scenario abort-race] [--depth 20]
    python bench/bench_symbolic.py prove [SCENARIO ...] [--lemma-seconds 600] [--induction-seconds 300]

``bmc`` prints, for each depth, the seconds of that depth's satisfiability checks (each
invariant and witness asked separately: is it hit at exactly this depth?) and the running
total.  ``prove`` prints, per scenario, the seconds of the refutation search, the inductive
invariant, Houdini and k-induction, and the verdicts.  Figures vary
with the machine and its load: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import platform
import time

import z3

from kvproof.checker.symbolic.bmc import Unrolling
from kvproof.checker.symbolic.proofs import ProofBudget, prove_scenario
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.scenario import builtin, builtin_names


def bench_bmc(name: str, depth: int) -> None:
    """Seconds per BMC depth on one scenario (every claim asked at every depth)."""
    spec = builtin(name).build()
    t0 = time.perf_counter()
    ts = TransitionSystem(spec)
    un = Unrolling(ts)
    print(f"# {name}: {len(ts.steps)} action instances, {len(ts.bits(ts.pre))} state bits, "
          f"encoded in {time.perf_counter() - t0:.2f} s")
    print(f"{'depth':>5} {'check s':>8} {'total s':>8}  claims hit")
    total = 0.0
    for k in range(depth + 1):
        xs = ts.state(k)
        hits = []
        t = time.perf_counter()
        for c in spec.claims:
            if c.kind not in ("invariant", "witness"):  # liveness: not a bounded question
                continue
            term = z3.Not(ts.never_hits(c.name, xs))
            if un.check(un.literal(term)) == z3.sat:
                hits.append(c.name)
        dt = time.perf_counter() - t
        total += dt
        print(f"{k:>5} {dt:>8.2f} {total:>8.2f}  {', '.join(hits)}", flush=True)
        if k < depth:
            un.extend()


def bench_prove(names: list[str], budget: ProofBudget) -> None:
    """Seconds per scenario of ``kvproof prove`` (no files written)."""
    print(f"{'scenario':<28} {'states':>7} {'refute s':>8} {'inv s':>7} {'lemmas':>6} {'Houdini s':>9} "
          f"{'k-ind s':>7} {'k':>3}  verdicts")
    for name in names:
        r = prove_scenario(builtin(name), budget)
        counts: dict[str, int] = {}
        for row in r.rows:
            counts[row.verdict] = counts.get(row.verdict, 0) + 1
        print(f"{name:<28} {r.states:>7} {r.refute_seconds:>8.1f} {r.lemma_seconds:>7.1f} {r.lemma_count:>6} "
              f"{r.houdini_seconds:>9.1f} {r.induction_seconds:>7.1f} {r.induction_k:>3}  {counts}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("bmc")
    b.add_argument("--scenario", default="abort-race")
    b.add_argument("--depth", type=int, default=20)
    pv = sub.add_parser("prove")
    pv.add_argument("scenarios", nargs="*")
    pv.add_argument("--lemma-seconds", type=float, default=600.0)
    pv.add_argument("--induction-seconds", type=float, default=300.0)
    pv.add_argument("--refute-depth", type=int, default=24)
    args = p.parse_args()
    print(f"# python {platform.python_version()}, z3 {z3.get_version_string()}, {platform.machine()}")
    if args.what == "bmc":
        bench_bmc(args.scenario, args.depth)
    else:
        bench_prove(args.scenarios or builtin_names(),
                    ProofBudget(refute_depth=args.refute_depth, lemma_seconds=args.lemma_seconds,
                                induction_seconds=args.induction_seconds))


if __name__ == "__main__":
    main()
