"""The largest KV-page model each engine completes within a memory and time budget (the SPIN comparison model, bench/kvpages.py).

Runs ``bench/kvpages`` (the model of ``bench/bench_spin.py``) at the sizes given, once each,
one engine after another, each in its own process with its address space capped
(``RLIMIT_AS``: ``--max-gib`` plus ``--slack-gib``, so a run that outgrows the budget fails
instead of taking the machine's memory from everyone else), and prints per run: the states, the
CPU seconds (compile + search), the wall-clock seconds, the max RSS, and whether it fits the
budget (max RSS at most ``--max-gib`` GiB and wall clock at most ``--max-minutes``)::

    python bench/bench_largest.py --sizes 4x8,4x10 --engines spin-dfs,native-fingerprint

SPIN runs as ``bench_spin.py`` runs it (``spin -a``, ``gcc -O2 -DSAFETY``, ``./pan -m100000``),
with ``-DMEMLIM`` set to the budget so that ``pan`` stops itself there, and ``-w`` when
``--spin-w`` is given (pan's default hash table is fixed; a larger one is SPIN's own remedy for
long hash chains).  A run that fails (out of memory, the depth bound, a killed process) is
printed as such; the state counts of the runs that finished at one size must agree.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_spin  # noqa: E402


def _capped(gib: float):
    """A ``preexec_fn`` that caps the child's address space at ``gib`` GiB."""
    limit = int(gib * 2**30)
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def one(engine: str, n: int, d: int, args, tmp: Path) -> dict:
    """One run of ``engine`` at N=n D=d: its figures, or ``{"failed": why}``."""
    cap = _capped(args.max_gib + args.slack_gib)
    started = time.perf_counter()
    real_run = bench_spin.run

    def run(cmd, cwd=None, env=None):  # bench_spin's runner, the child capped
        import subprocess

        if cmd[0] == "gcc":  # pan stops itself at the budget (MB)
            cmd = [cmd[0], f"-DMEMLIM={int(args.max_gib * 1024)}", *cmd[1:]]
        if cmd[0] == "./pan" and args.spin_w:
            cmd = [*cmd, f"-w{args.spin_w}"]  # pan's options: the header's, and -w
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, text=True,
                                    preexec_fn=cap if cmd[0] in ("./pan", sys.executable) else None)
            _, status, ru = os.wait4(proc.pid, 0)
            code = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            text, etext = out.read(), err.read()
        if code != 0:
            raise RuntimeError(f"exit {code}: {(etext or text).strip()[-300:]}")
        if cmd[0] == "./pan" and any(m in text for m in ("out of memory", "MEMLIM", "max search depth too small")):
            raise RuntimeError(text.strip()[-300:])
        return text, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024

    bench_spin.run = run
    try:
        if engine.startswith("spin"):
            r = bench_spin.spin_once(bench_spin.SPIN_DEFS[args.variant], n, d, engine == "spin-bfs", tmp / engine)
        else:
            backend, visited = engine.split("-")
            r = bench_spin.kvproof_once(args.variant, n, d, backend, visited)
    except (RuntimeError, SystemExit) as e:
        return {"failed": str(e).replace("\n", " ")[:300], "wall": time.perf_counter() - started}
    finally:
        bench_spin.run = real_run
    r["wall"] = time.perf_counter() - started
    return r


def main(argv: list[str] | None = None) -> int:
    """Run the sizes and print one line per run."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", required=True, help="NxD sizes, comma-separated, e.g. 4x8,4x10")
    ap.add_argument("--engines", default="spin-dfs,native-fingerprint",
                    help="comma-separated subset of " + ",".join(bench_spin.ENGINES))
    ap.add_argument("--variant", default="fix_ack", choices=sorted(bench_spin.SPIN_DEFS))
    ap.add_argument("--max-gib", type=float, default=8.0, help="the memory budget (default 8 GiB)")
    ap.add_argument("--max-minutes", type=float, default=10.0, help="the time budget (default 10 minutes)")
    ap.add_argument("--slack-gib", type=float, default=2.0, help="address space allowed past the budget")
    ap.add_argument("--spin-w", type=int, help="pan's -w (log2 of its hash table's slots)")
    args = ap.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    if any(e not in bench_spin.ENGINES for e in engines):
        ap.error(f"--engines: choose from {', '.join(bench_spin.ENGINES)}")
    if any(e.startswith("spin") for e in engines) and shutil.which("spin") is None:
        print(f"# {bench_spin.SPIN_HINT}")
        engines = [e for e in engines if not e.startswith("spin")]
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; budget {args.max_gib:g} GiB, "
          f"{args.max_minutes:g} min; variant {args.variant}", flush=True)
    disagree = False
    with tempfile.TemporaryDirectory(prefix="kvproof-bench-largest-") as tmp:
        for n, d in sizes:
            counts = set()
            for eng in engines:
                r = one(eng, n, d, args, Path(tmp))
                if "failed" in r:
                    print(f"N={n} D={d} {eng:<19} FAILED after {r['wall']:.0f} s wall: {r['failed']}", flush=True)
                    continue
                counts.add(r["states"])
                fits = r["rss"] <= args.max_gib * 2**30 and r["wall"] <= args.max_minutes * 60
                print(f"N={n} D={d} {eng:<19} {r['states']:>13,} states  CPU {r['compile'] + r['search']:8.1f} s "
                      f"(compile {r['compile']:.1f})  wall {r['wall']:7.1f} s  max RSS {r['rss'] / 2**30:6.2f} GiB  "
                      f"{r['rss'] / r['states']:5.0f} B/state  {'fits' if fits else 'OVER BUDGET'}", flush=True)
            if len(counts) > 1:
                print(f"THE STATE COUNTS DISAGREE at N={n} D={d}: {sorted(counts)}", file=sys.stderr)
                disagree = True
            print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
