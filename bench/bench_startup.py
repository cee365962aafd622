"""Start-up, wheel contents and suite time, measured (the README's start-up and suite figures).

    python bench/bench_startup.py            # start-up of three commands, the wheel's contents
    python bench/bench_startup.py --suite    # also the test suite: pytest -q and -m "not slow"
    python bench/bench_startup.py --against 2d798d4 --runs 7   # small checks, that commit vs this tree

Start-up: CPU seconds (user + system of the child) of ``kvproof --help``, ``kvproof list`` and a
tiny ``kvproof check``, the median of five runs each, and which heavy modules each imported
(``python -X importtime``).  The wheel: built into a temporary directory with ``pip wheel
--no-deps``; its top-level folders under ``kvproof/`` and its size.  The suite: wall clock
and CPU seconds of the README's test command and of the inner loop, one run each.
``--against REV``: the small checks of :data:`SMALL_CHECKS` run alternately from a copy of
commit ``REV`` (``git archive`` into a temporary folder, bytecode cached there after a warm-up
run) and from this tree, so both see the same load; the median CPU of each, and the load
average before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("z3", "numpy", "scipy", "networkx", "rich")
COMMANDS = {"kvproof --help": ["--help"], "kvproof list": ["list"],
            "kvproof check incident": ["check", "incident", "--no-traces", "--quiet"]}
SMALL_CHECKS = {"check pr-41404 (317 states)": ["check", "pr-41404", "--no-traces", "--quiet"],
                "check incident (68 states)": ["check", "incident", "--no-traces", "--quiet"]}


def _cpu_of(argv: list[str], env: dict | None = None, cwd: Path = ROOT) -> tuple[float, float, str]:
    """(CPU seconds of the child, wall seconds, its stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.stderr


def startup(runs: int = 5) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # what users have
    kvproof = [sys.executable, "-m", "kvproof"]
    print(f"{'command':<26} {'CPU s (median of ' + str(runs) + ')':>22}   heavy modules imported")
    for name, args in COMMANDS.items():
        cpus = [_cpu_of(kvproof + args, env)[0] for _ in range(runs)]
        _, _, trace = _cpu_of([sys.executable, "-X", "importtime", "-m", "kvproof", *args], env)
        loaded = sorted({line.split("|")[-1].strip().split(".")[0] for line in trace.splitlines()
                         if line.startswith("import time:")} & set(HEAVY))
        print(f"{name:<26} {statistics.median(cpus):>22.2f}   {', '.join(loaded) or 'none'}")


def wheel() -> None:
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", d, str(ROOT)],
                       check=True, capture_output=True)
        [whl] = Path(d).glob("*.whl")
        names = zipfile.ZipFile(whl).namelist()
        tops = sorted({n.split("/")[1] for n in names if n.startswith("kvproof/") and n.count("/") > 1})
        print(f"wheel {whl.name}: {whl.stat().st_size / 1e6:.2f} MB, {len(names)} files; "
              f"kvproof/ holds {', '.join(tops)}")
        strays = [n for n in names if n.split("/")[0] in ("tests", "traces") or "/tests/" in n or "/traces/" in n]
        print(f"  tests or traces in the wheel: {len(strays)} files")
    build = ROOT / "build"
    if build.is_dir():  # pip wheel leaves setuptools' build/ behind
        subprocess.run(["rm", "-rf", str(build)], check=False)


def suite() -> None:
    for name, args in {"pytest -q": ["-q"], 'pytest -q -m "not slow"': ["-q", "-m", "not slow"]}.items():
        cpu, wall, _ = _cpu_of([sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"])
        print(f"{name:<26} wall {wall:7.1f} s   CPU {cpu:7.1f} s")


def against(rev: str, runs: int) -> None:
    """The small checks from commit ``rev`` and from this tree, alternately (``python -m kvproof``
    in a folder runs that folder's code)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    kvproof = [sys.executable, "-m", "kvproof"]
    with tempfile.TemporaryDirectory() as d:
        old = Path(d)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", d], input=archive, check=True)
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {runs} runs each, "
              f"alternating; CPU = user + system of the child")
        print(f"{'command':<30} {rev + ' (median)':>18} {'this tree (median)':>20}")
        for name, args in SMALL_CHECKS.items():
            for tree in (old, ROOT):  # warm-up: bytecode written, the scenario's cache filled
                _cpu_of(kvproof + args, env, tree)
            cpus: dict[Path, list[float]] = {old: [], ROOT: []}
            for _ in range(runs):
                for tree in (old, ROOT):
                    cpus[tree].append(_cpu_of(kvproof + args, env, tree)[0])
            print(f"{name:<30} {statistics.median(cpus[old]):>16.3f} s {statistics.median(cpus[ROOT]):>18.3f} s"
                  f"   (this tree: {min(cpus[ROOT]):.3f} to {max(cpus[ROOT]):.3f} s)")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", action="store_true", help="also time the test suite")
    ap.add_argument("--against", metavar="REV", help="only the small checks: commit REV against this tree")
    ap.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    args = ap.parse_args()
    if args.against:
        against(args.against, args.runs)
        return
    startup()
    wheel()
    if args.suite:
        suite()


if __name__ == "__main__":
    main()
