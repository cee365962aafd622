"""Where the explicit engine's time goes, on the standard scenario (or a smaller one).

Runs the engine once (CPU seconds), then times each of its parts alone over the same states:
successor generation (the compiled ``expand``), the claim checks (on every new state, only the
claims its action can change: ``hits_after``), canonicalisation (``canon`` on every successor, with ``--symmetry``) and fingerprinting;
the rest is the engine's own bookkeeping (level arrays, numpy deduplication, parents).

    python bench/profile_engine.py [--tenants AAAB] [--symmetry]
"""

from __future__ import annotations

import argparse
import time
from array import array
from dataclasses import replace
from pathlib import Path

import xxhash

from kvproof.checker.explicit.search import explore
from kvproof.checker.explicit.symmetry import reduction_for
from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Request
from kvproof.model.scenario import load_scenario

STANDARD = Path(__file__).with_name("standard.toml")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tenants", default="AAAB", help="one letter per one-page request (default AAAB)")
    p.add_argument("--symmetry", action="store_true")
    args = p.parse_args()
    sc = load_scenario(str(STANDARD))
    sc = replace(sc, config=replace(sc.config, requests=tuple(Request(t, 1) for t in args.tenants)))
    m = Machine(sc.build())
    canon = reduction_for(m).canonicaliser if args.symmetry else None
    kw = dict(canonicaliser=canon) if canon else {}
    c0 = time.process_time()
    ex = explore(m, visited="fingerprint", **kw)
    total = time.process_time() - c0
    # the reachable (representative) states, to time each part alone
    states = [m.init]
    via = [None]
    seen = {m.init}
    for s in states:
        for aid, t in m.successors(s):
            t = canon.canon(t) if canon else t
            if t not in seen:
                seen.add(t)
                states.append(t)
                via.append(aid)
    succ: list[bytes] = []
    codes = array("q")
    c0 = time.process_time()
    for j, s in enumerate(states):
        m.expand(s, j, codes.append, succ.append)
    t_expand = time.process_time() - c0
    checks = [m.hits] + [m.hits_after[a] for a in via[1:]]
    c0 = time.process_time()
    for check, s in zip(checks, states):
        check(s)
    t_hits = time.process_time() - c0
    t_canon = 0.0
    if canon:
        c0 = time.process_time()
        for t in succ:
            canon.canon(t)
        t_canon = time.process_time() - c0
        c0 = time.process_time()
        for s in states:
            canon.orbit(s)
        t_canon += time.process_time() - c0
    c0 = time.process_time()
    list(map(xxhash.xxh3_64_intdigest, succ))
    t_fp = time.process_time() - c0
    rest = total - t_expand - t_hits - t_canon - t_fp
    print(f"# {sc.name} with {args.tenants}{' and symmetry' if canon else ''}: {ex.stats.states:,} states, "
          f"{ex.stats.transitions:,} transitions, {total:.2f} CPU s")
    for name, t in [("successors (compiled expand)", t_expand), ("claims (compiled hits_after)", t_hits),
                    ("canonical form and orbit size", t_canon), ("fingerprints (xxh3)", t_fp),
                    ("engine bookkeeping (the rest)", rest)]:
        print(f"{name:<32} {t:>7.2f} s {100 * t / total:>5.1f} %  {1e6 * t / ex.stats.states:>6.2f} us/state")


if __name__ == "__main__":
    main()
