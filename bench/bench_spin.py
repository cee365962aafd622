"""kvproof side by side with SPIN on the KV-page model (bench/kvpages.pml, bench/kvpages.py).

The same model twice: ``bench/kvpages.pml`` (Promela) and ``bench/kvpages.py`` (kvproof's spec
language; the reachable states correspond one to one).  Every run is its own process, and the
runs are interleaved: each repetition runs SPIN's DFS, SPIN's BFS, kvproof's Python engine
(exact and fingerprint visited sets) and its native backend (``--backend native``: exact and
fingerprint), in that order, before the next repetition starts.  Per engine it prints medians
of ``--repeat`` runs:

* ``compile``: CPU seconds of turning the model into code (SPIN: ``spin -a`` and ``gcc -O2``;
  native: generating the C and the C compiler, from a cold cache; Python: compiling the spec to
  Python), apart from the search;
* ``search``: CPU seconds (user + system) of the search alone, and per stored state;
* ``end to end``: compile + search;
* ``max RSS`` of the process that searched (``wait4``'s ``ru_maxrss``; for kvproof the
  interpreter and its imports are included), and that over the states.

The state counts of every run must agree with each other and with the model's reference count
(``kvpages.REFERENCE``); the script stops with exit status 1 when they do not.  It installs
nothing: without ``spin`` on the path it says how to get it and runs kvproof's engines alone
(``--no-spin`` does that on purpose)::

    python bench/bench_spin.py                       # N=4 D=4: 1,549,016 states
    python bench/bench_spin.py --sizes 4x4,4x6        # and N=4 D=6: 6,192,120 states

After each size's table it prints each native engine's search CPU over SPIN DFS's and whether
the target (:data:`TARGET`) is met there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
PML = HERE / "kvpages.pml"
ENGINES = ["spin-dfs", "spin-bfs", "python-exact", "python-fingerprint", "native-exact", "native-fingerprint"]
SPIN_HINT = ("spin is not on the path: install it (Debian/Ubuntu: `apt-get install spin`; "
             "else https://spinroot.com) to measure SPIN too")


def _kvpages():
    """The benchmark model module (``bench/kvpages.py``)."""
    sys.path.insert(0, str(HERE))
    import kvpages  # noqa: E402

    return kvpages


def run(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[str, float, int]:
    """Run ``cmd`` to the end; its stdout, CPU seconds (user + system) and max RSS in bytes
    (``os.wait4``, so only this child is counted)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, etext = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {(etext or text).strip()[:400]}")
    return text, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def spin_once(variant_defs: str, n: int, d: int, bfs: bool, work: Path) -> dict:
    """One SPIN run: ``spin -a``, ``gcc -O2 -DSAFETY [-DBFS]`` (the compile), then ``./pan``
    as the model's header says (the search)."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(PML, work / "kvpages.pml")
    defs = [f"-DN={n}", f"-DD={d}", *variant_defs.split()]
    _, c1, _ = run(["spin", "-a", *defs, "kvpages.pml"], cwd=work)
    _, c2, _ = run(["gcc", "-O2", "-DSAFETY", *(["-DBFS"] if bfs else []), "-o", "pan", "pan.c"], cwd=work)
    out, cpu, rss = run(["./pan", "-m100000"], cwd=work)
    m = re.search(r"(\d+) states, stored", out)
    errors = re.search(r"errors: (\d+)", out)
    if not m or not errors:
        raise SystemExit(f"pan's output has no state count: {out[:400]}")
    if errors.group(1) != "0":
        raise SystemExit(f"pan found {errors.group(1)} errors on a model that holds: {out[:400]}")
    return {"states": int(m.group(1)), "compile": c1 + c2, "search": cpu, "rss": rss}


def kvproof_once(variant: str, n: int, d: int, backend: str, visited: str) -> dict:
    """One kvproof search, in a child process (``--child``)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="kvproof-bench-") as cache:
        env["KVPROOF_CACHE_DIR"] = cache  # a cold cache: the native compile is measured every time
        # this checkout's code, not an installed kvproof's (the child's path starts with bench/)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), env.get("PYTHONPATH")) if p)
        out, _, rss = run([sys.executable, __file__, "--child", variant, str(n), str(d), backend, visited], env=env)
    doc = json.loads(out.strip().splitlines()[-1])
    doc["rss"] = rss
    return doc


def child(variant: str, n: int, d: int, backend: str, visited: str) -> None:
    """The ``--child`` side: build the machine (the compile, CPU of this process and of the C
    compiler), search, and print one JSON line."""
    import resource

    from kvproof.checker.explicit.search import explore

    kv = _kvpages()
    spec = kv.KvPages(kv.variant(variant, N=n, D=d))
    c0 = time.process_time()
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if backend == "native":
        from kvproof.checker.explicit.native import NativeMachine

        machine = NativeMachine(spec)
    else:
        from kvproof.model.machine import Machine

        machine = Machine(spec)
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    compile_cpu = time.process_time() - c0 + (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    c1 = time.process_time()
    e = explore(machine, visited=visited)
    search = time.process_time() - c1
    if e.hit_at or not e.complete:
        raise SystemExit(f"{variant} N={n} D={d}: the search did not finish clean ({e.reason}, hits {e.hit_at})")
    print(json.dumps({"states": e.stats.states, "compile": compile_cpu, "search": search,
                      "engine_bytes_per_state": e.stats.bytes_per_state}))


TARGET = 0.3
"""The native backend's goal: its search CPU per state with fingerprints at most this share of
SPIN DFS's, at :data:`TARGET_STATES` states or more."""
TARGET_STATES = 6_000_000


def ratios(runs: dict[str, list[dict]]) -> dict[str, float]:
    """Each native engine's median search CPU over SPIN DFS's (the same states: per state too),
    of the engines that ran."""
    if not runs.get("spin-dfs"):
        return {}
    spin = statistics.median(r["search"] for r in runs["spin-dfs"])
    return {e: statistics.median(r["search"] for r in rs) / spin
            for e, rs in runs.items() if e.startswith("native") and rs}


def verdict(states: int, share: dict[str, float]) -> str:
    """The line saying whether :data:`TARGET` is met at ``states`` (the ratios ``share``)."""
    head = f"target: native fingerprints' search CPU per state at most {TARGET}x SPIN DFS's at {TARGET_STATES:,} states or more"
    if "native-fingerprint" not in share:
        return f"{head}: not measured (needs spin-dfs and native-fingerprint)"
    got = share["native-fingerprint"]
    if states < TARGET_STATES:
        return f"{head}: {got:.2f}x here, under {TARGET_STATES:,} states (not what the target is about)"
    if got <= TARGET:
        return f"{head}: MET, {got:.2f}x"
    return f"{head}: MISSED, {got:.2f}x ({got / TARGET - 1:.0%} over)"


SPIN_DEFS = {"fix_ack": "-DABORT=1", "bounded": "-DABORT=3 -DW=1 -DH=2", "adm_fix": "-DADM=0 -DABORT=1 -DOVER=1"}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4x4", help="NxD sizes, comma-separated (default 4x4)")
    ap.add_argument("--variant", default="fix_ack", choices=sorted(SPIN_DEFS), help="a variant that holds")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset of " + ",".join(ENGINES))
    ap.add_argument("--no-spin", action="store_true", help="leave SPIN out even when it is installed")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        v, n, d, backend, visited = args.child
        child(v, int(n), int(d), backend, visited)
        return 0
    engines = [e for e in args.engines.split(",") if e]
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        ap.error(f"unknown engine {bad[0]!r}: choose from {', '.join(ENGINES)}")
    if args.no_spin or shutil.which("spin") is None:
        if not args.no_spin:
            print(f"# {SPIN_HINT}")
        engines = [e for e in engines if not e.startswith("spin")]
    elif shutil.which("gcc") is None:
        print("# gcc is not on the path: SPIN's pan cannot be compiled; SPIN is left out")
        engines = [e for e in engines if not e.startswith("spin")]
    try:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
        if any(len(s) != 2 for s in sizes):
            raise ValueError
    except ValueError:
        ap.error(f"--sizes {args.sizes!r}: expected NxD[,NxD...], e.g. 4x4,4x6")
    kv = _kvpages()
    for n, d in sizes:
        try:
            kv.variant(args.variant, N=n, D=d)
        except ValueError as e:
            ap.error(str(e))
    if args.repeat < 1:
        ap.error("--repeat: at least 1")
    spin_version = ""
    if any(e.startswith("spin") for e in engines):
        spin_version = run(["spin", "-V"])[0].strip()
    print(f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"python {platform.python_version()}; {spin_version}")
    print(f"# variant {args.variant}; CPU seconds (user + system) and max RSS of each run, medians of "
          f"{args.repeat} interleaved repetitions")
    failed = False
    with tempfile.TemporaryDirectory(prefix="kvproof-bench-spin-") as tmp:
        for n, d in sizes:
            ref = kv.REFERENCE.get((args.variant, n, d))
            runs: dict[str, list[dict]] = {e: [] for e in engines}
            for rep in range(args.repeat):
                for eng in engines:
                    if eng.startswith("spin"):
                        r = spin_once(SPIN_DEFS[args.variant], n, d, eng == "spin-bfs", Path(tmp) / eng)
                    else:
                        backend, visited = eng.split("-")
                        r = kvproof_once(args.variant, n, d, backend, visited)
                    runs[eng].append(r)
                    print(f"#   N={n} D={d} rep {rep + 1}: {eng:<19} {r['states']:>10,} states  "
                          f"search {r['search']:7.2f} s  compile {r['compile']:5.2f} s  "
                          f"max RSS {r['rss'] / 2**20:7.0f} MiB", flush=True)
            counts = {e: {r["states"] for r in rs} for e, rs in runs.items()}
            every = set().union(*counts.values()) | ({ref} if ref else set())
            print(f"\nN={n} D={d}, {args.variant}: {', '.join(f'{c:,}' for c in sorted(every))} states"
                  + (f" (reference {ref:,})" if ref else ""))
            print("| engine | states | compile CPU | search CPU | CPU per state | end to end CPU | max RSS | bytes per state |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for eng, rs in runs.items():
                st = rs[0]["states"]
                comp = statistics.median(r["compile"] for r in rs)
                srch = statistics.median(r["search"] for r in rs)
                rss = statistics.median(r["rss"] for r in rs)
                print(f"| {eng} | {st:,} | {comp:.2f} s | {srch:.2f} s | {srch / st * 1e6:.2f} µs | "
                      f"{comp + srch:.2f} s | {rss / 2**20:,.0f} MiB | {rss / st:.0f} |")
            print(f"(load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; kvproof's "
                  "own count of its visited set, parents and actions, per state: "
                  + ", ".join(f"{e} {statistics.median(r['engine_bytes_per_state'] for r in rs):.0f} B"
                              for e, rs in runs.items() if "engine_bytes_per_state" in rs[0]) + ")")
            share = ratios(runs)
            if share:
                print("search CPU per state over SPIN DFS's: " + ", ".join(f"{e} {x:.2f}x" for e, x in share.items()))
            print(verdict(max(every), share))
            if len(every) != 1:
                print(f"\nTHE STATE COUNTS DISAGREE at N={n} D={d}: "
                      + "; ".join(f"{e}: {sorted(c)}" for e, c in counts.items())
                      + (f"; reference {ref:,}" if ref else ""), file=sys.stderr)
                failed = True
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
