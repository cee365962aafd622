"""What ``prove --all-sizes`` asks of Z3, in Z3's own resource units: for each scenario, the
number of solver queries and the largest and total units one query used (Z3's ``rlimit
count``, a deterministic measure of the work done: the same for the same query whatever the
machine's load); and with ``--certificates``, what ``certify`` asks of z3 and cvc5 for each
committed all-sizes certificate: the largest units one obligation used in each solver. The
defaults of ``prove --rlimit`` and ``certify --rlimit``/``--cvc5-rlimit`` are chosen from these
figures with a wide margin. Run it with::

    python bench/bench_rlimit.py [--scenarios a,b] [--certificates] [--json FILE]

Each scenario is proved in this process with no certificate or trace written. This is a
benchmark, not a test: nothing here asserts; ``tests/test_rlimit.py`` pins the behaviour of
the limit itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import z3

from kvproof.checker.allsizes.prove import prove_all_sizes
from kvproof.model.scenario import builtins

DEFAULT = ("vllm-pull-reject-41269", "vllm-push-reject", "vllm-pull-abort-32255")


class Meter:
    """Wraps ``z3.Solver.check`` to record each query's units (the context's ``rlimit count``
    after the query less the count after the previous one)."""

    def __init__(self) -> None:
        self.units: list[int] = []
        self.last = 0
        self.real = z3.Solver.check

    def __enter__(self) -> "Meter":
        meter = self
        probe = z3.Solver()  # the context's count so far (it is cumulative over the process)
        probe.check()
        self.last = int(probe.statistics().get_key_value("rlimit count")) if "rlimit count" in probe.statistics().keys() else 0

        def check(solver, *assumptions):
            r = meter.real(solver, *assumptions)
            count = int(solver.statistics().get_key_value("rlimit count")) \
                if "rlimit count" in solver.statistics().keys() else meter.last
            meter.units.append(max(0, count - meter.last))
            meter.last = max(meter.last, count)
            return r

        z3.Solver.check = check
        return self

    def __exit__(self, *exc) -> None:
        z3.Solver.check = self.real


def measure(name: str) -> dict:
    """One all-sizes proof of scenario ``name``: its verdicts, its queries and their units."""
    sc = next(s for s in builtins() if s.name == name)
    t0 = time.process_time()
    with Meter() as m:
        r = prove_all_sizes(sc, max_seconds=1e6)
    return {"scenario": name, "verdicts": r.verdicts, "queries": len(m.units),
            "max_units": max(m.units, default=0), "total_units": sum(m.units),
            "cpu_seconds": round(time.process_time() - t0, 1)}


def certificate_units(path: Path) -> dict:
    """The obligations of the all-sizes certificate ``path`` in z3 (the binary certify runs, its
    cumulative ``:rlimit-count`` read after each check-sat) and in cvc5 (in this process, its
    ``resource::resourceUnitsUsed`` after each): the largest units one obligation used in each."""
    import re

    import cvc5

    from kvproof.checker.certs.reader import read_certificate
    from kvproof.checker.certs.solvers import script_for, z3_command

    script = script_for(read_certificate(path)).text
    with tempfile.NamedTemporaryFile("w", suffix=".smt2", delete=False) as f:
        f.write(script.replace("(check-sat)", "(check-sat)\n(get-info :all-statistics)"))
    t0 = time.perf_counter()
    out = subprocess.run([*z3_command()[0], f.name], capture_output=True, text=True).stdout
    z3_seconds = time.perf_counter() - t0
    Path(f.name).unlink()
    counts = [int(c) for c in re.findall(r":rlimit-count\s+(\d+)", out)]
    z3_units = [b - a for a, b in zip([0, *counts], counts)]
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("full-saturate-quant", "true")
    sm = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, sm)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, script, "certificate")
    cvc5_units, last = [], 0
    t0 = time.perf_counter()
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        answer = cmd.invoke(solver, sm)
        if answer.strip() in ("sat", "unsat", "unknown"):
            used = solver.getStatistics()["resource::resourceUnitsUsed"]["value"]
            cvc5_units.append(used - last)
            last = used
    return {"certificate": path.name, "obligations": len(z3_units), "z3_max_units": max(z3_units, default=0),
            "cvc5_max_units": max(cvc5_units, default=0), "z3_seconds": round(z3_seconds, 1),
            "cvc5_seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=",".join(DEFAULT))
    ap.add_argument("--certificates", action="store_true",
                    help="measure the committed all-sizes certificates (traces/proofs) instead")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    rows = []
    if args.certificates:
        for path in sorted(Path("traces/proofs").glob("*.allsizes.smt2")):
            row = certificate_units(path)
            rows.append(row)
            print(f"{row['certificate']}: {row['obligations']} obligations, largest z3 {row['z3_max_units']:,} units "
                  f"({row['z3_seconds']} s), largest cvc5 {row['cvc5_max_units']:,} units ({row['cvc5_seconds']} s)",
                  flush=True)
        args.scenarios = ""
    for name in filter(None, args.scenarios.split(",")):
        row = measure(name)
        rows.append(row)
        proved = sum(v == "proved" for v in row["verdicts"].values())
        print(f"{name}: {proved}/{len(row['verdicts'])} proved, {row['queries']} queries, "
              f"largest {row['max_units']:,} units, total {row['total_units']:,}, {row['cpu_seconds']} s CPU", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
