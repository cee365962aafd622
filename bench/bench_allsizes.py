"""Survey of ``kvproof prove --all-sizes`` over the built-in catalogue: for each scenario, the
exit code, the wall and CPU seconds, and each claim's all-sizes verdict (proved for every size,
refuted with a small counterexample, inconclusive, or not lifted with the construct that blocks
it). Each scenario runs in its own ``kvproof`` process, so one that runs long is cut by
``--timeout`` without losing the rest. Run it with::

    python bench/bench_allsizes.py [--scenarios a,b] [--timeout 600] [--certificates DIR] [--json FILE]

Figures vary with the machine and its load: the CPU seconds (children's user + system) are less
disturbed by other processes than wall-clock seconds. This is a benchmark, not a test: nothing
here asserts; ``tests/test_allsizes_catalogue.py`` keeps the README's table to the committed
certificates.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvproof.model.scenario import builtins


def survey_one(name: str, timeout: float, certificates: Path) -> dict:
    """One ``prove --all-sizes`` run of scenario ``name``: its exit code, seconds and verdicts."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "kvproof", "prove", "--all-sizes", name, "--certificates", str(certificates),
           "--no-traces", "--json"]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        code, out, err = run.returncode, run.stdout, run.stderr
    except subprocess.TimeoutExpired:
        code, out, err = None, "", f"cut at {timeout:.0f} s"
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = {"scenario": name, "exit_code": code, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "claims": {}}
    try:
        doc = json.loads(out)
    except ValueError:
        row["error"] = (err.strip().splitlines() or ["no output"])[-1]
        return row
    row["claims"] = dict(doc.get("verdicts") or {})
    row["not_lifted"] = doc.get("not_lifted") or {}
    row["reason"] = doc.get("reason")
    row["seconds"] = doc.get("seconds")
    if not row["claims"]:
        row["error"] = doc.get("reason") or (err.strip().splitlines() or ["no verdicts"])[-1]
    return row


def main() -> None:
    """Survey the catalogue (or ``--scenarios``) and print one line per scenario."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="", help="comma-separated names (default: every built-in scenario)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per scenario (default 600)")
    ap.add_argument("--certificates", type=Path, default=None, help="where the proved certificates go (default: a temporary directory)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON to FILE")
    args = ap.parse_args()
    names = [n for n in args.scenarios.split(",") if n] or [sc.name for sc in builtins()]
    certificates = args.certificates or Path(tempfile.mkdtemp(prefix="kvproof-allsizes-"))
    print(f"# {len(names)} scenarios, timeout {args.timeout:.0f} s each, load {os.getloadavg()[0]:.1f}, "
          f"certificates in {certificates}", flush=True)
    rows = []
    for name in names:
        row = survey_one(name, args.timeout, certificates)
        rows.append(row)
        verdicts = ", ".join(f"{c} {v}" for c, v in row["claims"].items()) or row.get("error", "")
        print(f"{name:44} exit {row['exit_code']!s:4} {row['wall_s']:7.1f} s wall {row['cpu_s']:7.1f} s cpu  {verdicts}",
              flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"# load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
