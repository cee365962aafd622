"""``kvproof certify``: re-check proof certificates, fixed-size and all-sizes alike, with fresh
z3 and cvc5 processes and against today's catalogue (:mod:`kvproof.checker.certify`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kvproof.checker.cli.common import (Progress, Summary, Tally, add_output_arguments, finish, output_console, plural,
                                        resolve)
from kvproof.checker.certs.limits import DEFAULT_CVC5_RLIMIT, DEFAULT_RLIMIT, ResourceLimit
from kvproof.checker.cli.options import positive_float, units
from kvproof.checker.outcome import BadInput, Verified, Violated

__all__ = ["NAME", "add_parser", "run"]

NAME = "certify"


def add_parser(sub) -> None:
    """Register ``certify`` on the main parser's subcommands."""
    cf = sub.add_parser("certify", help="re-check proof certificates with fresh z3 and cvc5 processes and against the catalogue")
    cf.add_argument("files", nargs="*", metavar="FILE")
    cf.add_argument("--certificates", default="traces/proofs", metavar="DIR",
                    help="where to look when no FILE is given (default traces/proofs)")
    cf.add_argument("--scenario", metavar="SCENARIO",
                    help="check against this scenario (built-in name or .toml file) instead of the catalogue's of the same name")
    cf.add_argument("--seconds", type=positive_float, default=600.0, metavar="S",
                    help="time limit of each solver process (default 600)")
    cf.add_argument("--all-sizes-seconds", type=positive_float, default=None, metavar="S",
                    help="time limit of each solver process on an all-sizes certificate (*.allsizes.smt2; "
                         "default: none while --rlimit bounds each obligation, else 3600)")
    cf.add_argument("--rlimit", type=units, default=DEFAULT_RLIMIT, metavar="UNITS",
                    help="on an all-sizes certificate: each obligation within UNITS of z3's resource count, "
                         f"not wall-clock seconds, so the answer does not depend on the load (default {DEFAULT_RLIMIT:,}; "
                         "0: none)")
    cf.add_argument("--cvc5-rlimit", type=units, default=DEFAULT_CVC5_RLIMIT, metavar="UNITS",
                    help=f"the same for cvc5, in cvc5's own units (default {DEFAULT_CVC5_RLIMIT:,})")
    cf.add_argument("--all-sizes-model-only", action="store_true",
                    help="check an all-sizes certificate against the model lifted from its scenario's spec line for line, but "
                         "run no solver on it (for a large one, whose obligations take the solvers minutes); "
                         "said on its line")
    cf.add_argument("--complete", action="store_true",
                    help="also fail (exit 1) if a scenario of the catalogue has no certificate among them")
    cf.add_argument("--variant", action="append", metavar="FILE.py",
                    help="trust this engine variant file (it is code) for the scenario --scenario names (repeatable)")
    add_output_arguments(cf)
    cf.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Re-check certificates (default: every one under traces/proofs), fixed-size and all-sizes
    alike: each read by the one certificate reader, its obligations answered by fresh z3 and cvc5
    processes, one answer bound to each, and held against today's catalogue scenario
    (fixed-size) or the model lifted from the spec (all-sizes).  Exit 1 if one does not check, 3 if one cannot
    be read as a certificate (each named on stdout, the others still checked, and one line on
    stderr).  With ``--complete``, a scenario of the catalogue that no fixed-size certificate
    given names is listed as MISSING and fails the run too (exit 1)."""
    from rich.text import Text

    from kvproof.checker.certify import recheck
    from kvproof.checker.certs.reader import ALL_SIZES, CertificateError
    from kvproof.checker.certs.solvers import cvc5_command, z3_command

    files = [Path(f) for f in args.files] or sorted(Path(args.certificates).glob("*.smt2"))
    if not files:
        raise CertificateError(f"no certificates given and none under {args.certificates}")
    against = None
    if args.scenario:
        against = resolve(args.scenario)
    out = output_console(args)
    rows: list[dict] = []  # --json: one object per file
    bad = unreadable = 0
    model_only = False
    last: CertificateError | None = None
    _certified: set[str] = set()  # the scenarios the readable fixed-size certificates name
    with Progress(not args.quiet and not args.json, len(files), "certificates") as progress:  # removed however the loop ends
        for f in files:
            progress.start(f"{f.name}: z3 and cvc5")
            try:
                limit = ResourceLimit(args.rlimit, args.cvc5_rlimit)
                rc = recheck(f, against, args.seconds, limit.seconds(args.all_sizes_seconds, 3600.0),
                             solve_all_sizes=not args.all_sizes_model_only, limit=limit)
            except CertificateError as e:  # named here with the others; one line on stderr at the end
                unreadable += 1
                last = e
                rows.append({"file": str(f), "verdict": BadInput(str(e)).verdict, "problems": [str(e)]})
                if len(files) > 1:
                    with progress.paused():
                        out.print(Text(f"UNREADABLE {e}", style="bold red"), soft_wrap=True)
                continue
            bad += not rc.ok
            rows.append({"file": str(f), "verdict": (Verified() if rc.ok else Violated()).verdict, "kind": rc.kind,
                         "scenario": rc.scenario, "claims": list(rc.invariants), "problems": list(rc.problems),
                         "solved": not (rc.kind == ALL_SIZES and args.all_sizes_model_only)})
            if rc.kind == ALL_SIZES:
                model_only |= args.all_sizes_model_only
                how = ("; compared with the lifted model only, not re-solved: --all-sizes-model-only"
                       if args.all_sizes_model_only else "")
                what = f"{rc.scenario}, every size: {plural(len(rc.invariants), 'claim')}{how}"
            else:
                _certified.add(rc.scenario)
                what = f"{rc.scenario}: {plural(len(rc.invariants), 'invariant')}"
            with progress.paused():
                out.print(Text(f"{'ok' if rc.ok else 'FAILED':<6} {f}  ({what})",
                               style="green" if rc.ok else "bold red"), soft_wrap=True)
                for p in rc.problems:
                    out.print(f"       {p}", soft_wrap=True)  # one line per failure, however long
    missing: list[str] = []
    if args.complete:
        from kvproof.model.scenario import builtin_names

        missing = [n for n in builtin_names() if n not in _certified]
        for n in missing:
            out.print(Text(f"MISSING {n}: no certificate for this scenario of the catalogue", style="bold red"),
                      soft_wrap=True)
    checked = len(files) - unreadable
    if checked:
        out.print(f"{checked - bad} of {checked} certificates check" + (f", {unreadable} unreadable" if unreadable else "")
                  + (f", {len(missing)} scenarios of the catalogue without one" if missing else ""))
        out.print(f"  solvers: {z3_command()[1]}; {cvc5_command()[1]}", soft_wrap=True)
    code = Tally(checked - bad, bad + len(missing), bad_input=int(last is not None)).exit_code
    meaning = ("a file cannot be read as a kvproof certificate" if last is not None
               else "a certificate does not check" if bad else "a scenario of the catalogue has no certificate" if missing
               else "every certificate checks" + (" and every scenario of the catalogue has one" if args.complete else ""))
    ran = (plural(len(files), "certificate") + " (z3 and cvc5" + ("; all-sizes ones against the lifted model only"
                                                                  if model_only else "")
           + (", every scenario of the catalogue asked for)" if args.complete else ")"))
    if len(files) > 1 or last is None:
        finish(args, Summary("certify", ran, checked - bad, bad + len(missing), 0, code, meaning), out,
               {"certificates": rows, "missing": missing})
    if last is not None:  # exit 3, one line: the file's own error, or how many are named above
        if len(files) == 1:
            raise last
        raise CertificateError(f"{unreadable} of {len(files)} files cannot be read as kvproof certificates "
                               "(each is named above)")
    return code
