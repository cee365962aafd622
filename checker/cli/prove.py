"""``kvproof prove``: every invariant of each scenario proved for all depths (an inductive
invariant, and k-induction with Houdini lemmas), or refuted with a shortest trace; with
``--theorems`` the protocol's parametric theorems; with ``--lift-from SMALL`` a scenario too large
to enumerate, from lemmas mined on a smaller one; with ``--all-sizes`` for every size
(:mod:`.prove_allsizes`).  Ctrl-C, also inside a Z3 call, is an interrupt (exit 130), never a
result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kvproof.checker.cli import prove_allsizes
from kvproof.checker.cli.common import (EXIT_OK, BadInputError, Progress, Summary, Tally, add_output_arguments,
                                        claim_counts, console, finish, output_console, plural, protocol_command,
                                        resolve)
from kvproof.checker.certs.limits import DEFAULT_RLIMIT
from kvproof.checker.cli.options import RLIMIT, positive_float, positive_int, units
from kvproof.model.scenario import builtins

__all__ = ["NAME", "OUTPUTS", "VARIANT_SCENARIOS", "add_parser", "run"]

NAME = "prove"
OUTPUTS = (("traces", "--traces", True, "no_traces"), ("certificates", "--certificates", True, "no_certificates"))
"""The files ``prove`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""
VARIANT_SCENARIOS = True
"""A ``--variant`` file's own ``SCENARIO`` joins the scenarios named."""


def add_parser(sub) -> None:
    """Register ``prove`` on the main parser's subcommands."""
    pv = sub.add_parser("prove", help="prove every invariant for all depths (inductive invariant and k-induction), or refute it",
                        description="Prove every invariant of each scenario for all depths (an inductive invariant, "
                                    "and k-induction with Houdini lemmas), or refute it with a shortest trace. "
                                    "Without SCENARIO it runs the whole catalogue, one scenario after another: "
                                    "tens of minutes (46 of the scenarios took 28 minutes on a 2-core machine: "
                                    "the docs' Z3 engine page). Exit 0 when every invariant is proved or refuted as "
                                    "expected, 1 when one is not (or an engine error), 2 when one is "
                                    "inconclusive, 3 on bad input.")
    pv.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                    help="built-in name or scenario .toml file (default: the whole catalogue, tens of minutes)")
    pv.add_argument("--theorems", action="store_true", help="prove the parametric theorems instead")
    pv.add_argument("--refute-depth", type=positive_int, default=24, metavar="K",
                    help="search violations up to K steps first (default 24)")
    pv.add_argument("--lemma-seconds", type=positive_float, default=None, metavar="S",
                    help="budget per scenario for finding the inductive invariant (default 600; with --all-sizes, "
                         "none while --rlimit bounds every query)")
    pv.add_argument("--rlimit", type=units, default=DEFAULT_RLIMIT, metavar="UNITS",
                    help="with --all-sizes: " + RLIMIT.format(default=DEFAULT_RLIMIT))
    pv.add_argument("--induction-seconds", type=positive_float, default=300.0, metavar="S",
                    help="k-induction's budget per scenario, its Houdini lemmas included (default 300)")
    pv.add_argument("--template-arity", type=int, choices=(1, 2, 3), default=3, metavar="N",
                    help="k-induction's lemma template: facts of at most N slot values (1-3, default 3)")
    pv.add_argument("--spacer-seconds", type=positive_float, default=60.0, metavar="S",
                    help="Spacer's budget for --theorems (default 60)")
    pv.add_argument("--max-k", type=positive_int, default=40, metavar="K", help="largest k tried (default 40)")
    pv.add_argument("--max-states", type=positive_int, default=2_000_000, metavar="N",
                    help="enumerate at most N reachable states, the lemmas' source; past it the scenario's "
                         "invariants are inconclusive (default 2000000)")
    pv.add_argument("--lift-from", metavar="SMALL",
                    help="prove SCENARIO (a configuration too large to enumerate) without enumerating it: "
                         "lemmas mined on the smaller instance SMALL (same protocol and engine), renamed into "
                         "SCENARIO and kept by Houdini (Z3); --lemma-seconds bounds that Houdini")
    pv.add_argument("--all-sizes", action="store_true",
                    help="prove SCENARIO's safety claims for every number of requests, decode pages and prefill "
                         "pages (quantified invariant found by Houdini over lemmas lifted from a small instance); "
                         "a claim broken at the scenario's own size is shown with its shortest trace (exit 1)")
    pv.add_argument("--no-minimise", action="store_true",
                    help="with --all-sizes: keep Houdini's whole invariant (default: shrink it to the claims and the "
                         "lemmas their unsat cores need, checked from scratch; a smaller certificate)")
    pv.add_argument("--irredundant", action="store_true",
                    help="with --all-sizes: after minimising, try leaving out each lemma in turn (the rest re-checked "
                         "by every action) until none can go: an irredundant invariant (slower; not always the smallest)")
    pv.add_argument("--invariant-from", metavar="FILE",
                    help="with --all-sizes: skip mining and Houdini; minimise the invariant stated by the all-sizes "
                         "certificate FILE and prove what the kept set, checked from scratch, makes inductive")
    pv.add_argument("--link", action="store_true",
                    help="with --all-sizes: the claims at SCENARIO's own size with no enumeration, from the all-sizes "
                         "certificate of its model (--certificate, or found under --certificates) and the link "
                         "between the spec and the model, proved at that size with Z3")
    pv.add_argument("--certificate", metavar="FILE",
                    help="with --link: the all-sizes certificate to rest on (default: the first *.allsizes.smt2 "
                         "under --certificates that is the model's)")
    pv.add_argument("--solve-certificate", action=argparse.BooleanOptionalAction, default=True,
                    help="with --link: re-solve the certificate's obligations with z3 and cvc5 (the default: seconds "
                         "for a minimised one); --no-solve-certificate rests on the line-for-line "
                         "comparison with today's model alone")
    pv.add_argument("--certificates", default="traces/proofs", metavar="DIR",
                    help="where certificates go (default traces/proofs); with --link, where to look")
    pv.add_argument("--no-certificates", action="store_true", help="write no certificate")
    pv.add_argument("--traces", default="traces", metavar="DIR", help="where counterexamples go")
    pv.add_argument("--no-traces", action="store_true", help="write no trace files")
    pv.add_argument("--show-invariant", action="store_true", help="print the inductive invariant, lemma by lemma")
    add_output_arguments(pv)
    pv.add_argument("--variant", action="append", metavar="FILE.py",
                    help="trust an engine variant (code) and prove its SCENARIO if it has one (repeatable)")
    pv.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Prove every invariant of each scenario by an inductive invariant and by k-induction, or
    refute it.  Ctrl-C, also inside a Z3 call, is an interrupt (exit 130), never a result."""
    from kvproof.checker.symbolic.interrupts import interrupts_reach_python

    with interrupts_reach_python():
        return _prove(args)


def _prove(args: argparse.Namespace) -> int:
    from rich.text import Text

    from kvproof.checker.symbolic.cti import render_failure
    from kvproof.checker.symbolic.proofs import ProofBudget, prove_scenario

    if (args.no_minimise or args.invariant_from is not None or args.irredundant) and not args.all_sizes:
        raise BadInputError("--no-minimise, --invariant-from and --irredundant go with --all-sizes only")
    if args.no_minimise and args.irredundant:
        raise BadInputError("--irredundant shrinks the minimised invariant further: drop --no-minimise")
    if args.no_minimise and args.invariant_from is not None:
        raise BadInputError("--invariant-from minimises the stored invariant: drop --no-minimise")
    if args.theorems:
        with Progress(not args.quiet and not args.json, None, "") as progress:
            progress.note("proving the parametric theorems (Z3)")
            results = protocol_command("theorems")(args.spacer_seconds)
        out = output_console(args)
        refuted = sum(th.verdict == "refuted" for th in results)
        proved = sum(bool(th.holds) for th in results)
        code = Tally(proved, refuted, len(results) - proved - refuted).exit_code
        summary = Summary("prove", f"{plural(len(results), 'parametric theorem')}", proved, refuted,
                          len(results) - proved - refuted, code,
                          "every theorem is proved" if code == EXIT_OK else "")
        for th in results:
            style = "green" if th.holds else "bold red"
            out.print(Text(f"{th.verdict:<8} {th.name}", style=style))
            out.print(f"         {th.statement}")
            for line in th.details:
                out.print(f"         {line}")
        return finish(args, summary, out, {"theorems": [
            {"name": th.name, "statement": th.statement, "verdict": th.verdict, "details": list(th.details)}
            for th in results]})
    if args.link and not args.all_sizes:
        raise BadInputError("--link goes with --all-sizes (prove --all-sizes SCENARIO --link)")
    if args.all_sizes and args.link:
        return prove_allsizes.prove_linked(args)
    if args.all_sizes:
        return prove_allsizes.prove_all_sizes(args)
    if args.lift_from is not None:
        return _prove_lifted(args)
    names = args.scenarios or [s.name for s in builtins()]
    scenarios = [resolve(n) for n in names]
    for sc in scenarios:
        sc.build()
    budget = ProofBudget(refute_depth=args.refute_depth, lemma_seconds=_lemma_seconds(args),
                         induction_seconds=args.induction_seconds, max_k=args.max_k,
                         template_arity=args.template_arity, max_states=args.max_states)
    certs = None if args.no_certificates else Path(args.certificates)
    traces = None if args.no_traces else Path(args.traces)
    reports = []
    with Progress(not args.quiet and not args.json, len(scenarios)) as progress:
        for sc in scenarios:
            progress.start(sc.name)
            reports.append(prove_scenario(sc, budget, certs, traces, progress.note))
    rows = [row for r in reports for row in r.rows]
    errors = sum(len(r.errors) for r in reports)
    matched, mismatched, inconclusive = claim_counts(rows)
    code = Tally(matched, mismatched + errors, inconclusive).exit_code  # an engine error fails the run
    meaning = ("every invariant is proved or refuted as expected" if code == EXIT_OK
               else f"an engine error ({plural(errors, 'error')})" if errors and not mismatched else "")
    summary = Summary("prove", f"{plural(len(reports), 'scenario')}, {plural(len(rows), 'invariant')} "
                               "(inductive invariant and k-induction)", matched, mismatched, inconclusive, code, meaning)
    out = console()
    if args.json:
        return finish(args, summary, out, _json(reports))
    elif not args.quiet:
        out.print(_table(reports), crop=False)
        for r in reports:
            if r.certificate is not None:
                out.print(f"{r.scenario.name}: inductive invariant of {r.lemma_count} lemmas "
                          f"({r.lemma_rounds} Z3 rounds), certificate {r.certificate}", soft_wrap=True)  # a path is not wrapped
                if args.show_invariant:
                    for line in r.invariant_text:
                        out.print(f"    {line}", overflow="fold")
            for why, text in (("inductive invariant", r.lemma_reason), ("k-induction", r.induction_reason)):
                if text:
                    out.print(Text(f"{r.scenario.name}: {why}: {text}", style="yellow"))
            for failure in r.failures:
                out.print(render_failure(r.scenario.name, failure))
            for e in r.errors:
                out.print(Text(f"{r.scenario.name}: engine error: {e}", style="bold red"))
        summary.print(out)
    return summary.exit_code


def _lemma_seconds(args: argparse.Namespace) -> float:
    """``--lemma-seconds`` outside ``--all-sizes``: as given, else 600."""
    return 600.0 if args.lemma_seconds is None else args.lemma_seconds


def _prove_lifted(args: argparse.Namespace) -> int:
    """``prove SCENARIO --lift-from SMALL``: the invariants of SCENARIO proved with lemmas
    mined on SMALL and lifted by renaming (:mod:`~kvproof.checker.symbolic.lift`); SCENARIO is never
    enumerated.  Exit 0 when every invariant expected verified is proved, 1 when one expected
    violated is proved, 2 otherwise (inconclusive: this method never refutes), 3 on bad input."""
    from rich.text import Text

    from kvproof.checker.symbolic.cti import render_failure
    from kvproof.checker.symbolic.lift import LiftBudget, LiftError, prove_lifted

    if len(args.scenarios) != 1:
        raise BadInputError("prove --lift-from takes exactly one SCENARIO (the larger instance)")
    large, small = resolve(args.scenarios[0]), resolve(args.lift_from)
    budget = LiftBudget(max_states=args.max_states, template_arity=args.template_arity,
                        small_seconds=args.induction_seconds, large_seconds=_lemma_seconds(args),
                        claim_seconds=args.induction_seconds, max_k=args.max_k)
    # a certificate of a scenario outside the catalogue goes only where --certificates says
    explicit = "--certificates" in sys.argv or any(a.startswith("--certificates=") for a in sys.argv)
    catalogue = large.name in {s.name for s in builtins()}
    certs = None if args.no_certificates or not (explicit or catalogue) else Path(args.certificates)
    out = console()
    with Progress(not args.quiet and not args.json, 1) as progress:
        progress.start(large.name)
        try:
            r = prove_lifted(large, small, budget, certs, progress.note)
        except LiftError as e:
            raise BadInputError(f"{large.name} from {small.name}: {e}") from None
    total = sum(r.seconds.values())
    proved = [row for row in r.rows if row.verdict == "proved"]
    wrong = [row for row in proved if row.expected != "verified"]
    matched = sum(row.matches for row in r.rows)
    code = Tally(matched, len(wrong), len(r.rows) - matched - len(wrong)).exit_code
    summary = Summary("prove", f"{large.name}, {plural(len(r.rows), 'invariant')} (lemmas lifted from "
                               f"{small.name}, no enumeration)", matched, len(wrong),
                      len(r.rows) - matched - len(wrong), code,
                      "every invariant is proved without enumeration" if code == EXIT_OK else "")
    if args.json:
        doc = {"scenario": large.name, "lifted_from": small.name, "small_states": r.small_states,
               "small_candidates": r.small_candidates, "small_kept": r.small_kept, "lifted": r.lifted,
               "sampled_states": r.sampled, "after_sampling": r.after_sampling, "kept": r.kept,
               "houdini_rounds": r.houdini_rounds, "claim_rounds": r.claim_rounds,
               "by_k_induction": r.by_induction, "k": r.induction_k,
               "seconds": {k: round(v, 3) for k, v in r.seconds.items()}, "reason": r.reason,
               "certificate": str(r.certificate) if r.certificate else None,
               "counterexamples_to_induction": [f.to_json() for f in r.failures],
               "results": [{"invariant": row.invariant, "expected": row.expected, "verdict": row.verdict}
                           for row in r.rows]}
        return finish(args, summary, out, doc)
    if args.quiet:
        return code
    for row in r.rows:
        style = "green" if row.matches else "bold red" if row in wrong else "yellow"
        out.print(Text(f"{row.verdict:<13} {row.invariant} (expected {row.expected})", style=style))
    out.print(f"{small.name}: {r.small_states:,} states enumerated, Houdini kept {r.small_kept:,} of "
              f"{r.small_candidates:,} template facts; lifted to {large.name}: {r.lifted:,} renamed facts, "
              f"{r.after_sampling:,} after {r.sampled:,} sampled states, Houdini (Z3) kept {r.kept:,} "
              f"in {r.houdini_rounds} rounds; {total:.1f} s")
    if proved:
        out.print(Text(f"{large.name}: proved without enumeration: {', '.join(row.invariant for row in proved)} "
                       f"(Init => Inv, Inv and Next => Inv', Inv => Safe: unsat"
                       + (f"; by k-induction at k = {r.induction_k}, its step assuming the lifted lemmas: "
                          f"{', '.join(r.by_induction)}" if r.by_induction else "") + ")", style="green"))
    if r.certificate is not None:
        out.print(f"{large.name}: certificate {r.certificate}")
    if r.reason:
        out.print(Text(f"{large.name}: INCONCLUSIVE: {r.reason}", style="yellow"))
    for failure in r.failures[-3:]:
        out.print(render_failure(large.name, failure))
    summary.print(out)
    return code


def _table(reports):
    """The verdict table: a row per invariant, plain aligned columns, every cell in full."""
    from rich.text import Text

    from kvproof.checker.report.columns import AlignedTable

    t = AlignedTable(("scenario", "invariant", "expected", "verdict", "inductive inv.", "k-induction", "trace"),
                     ("left",) * 6 + ("right",))
    for r in reports:
        for n, row in enumerate(r.rows):
            style = "green" if row.matches else ("yellow" if row.verdict == "inconclusive" else "bold red")
            trace = f"{len(row.trace)} steps" if row.trace is not None else ""
            t.add_row(r.scenario.name if n == 0 else "", row.invariant, row.expected,
                      Text(row.verdict, style=style), row.lemmas, row.induction, trace)
    return t


def _json(reports) -> dict[str, Any]:
    return {"scenarios": [{
        "name": r.scenario.name,
        "certificate": str(r.certificate) if r.certificate else None,
        "states": r.states,
        "explore_seconds": round(r.explore_seconds, 3),
        "lemma_seconds": round(r.lemma_seconds, 3),
        "lemma_count": r.lemma_count,
        "lemma_rounds": r.lemma_rounds,
        "houdini_seconds": round(r.houdini_seconds, 3),
        "houdini_candidates": r.houdini_candidates,
        "houdini_kept": r.houdini_kept,
        "induction_seconds": round(r.induction_seconds, 3),
        "induction_k": r.induction_k,
        "refute_seconds": round(r.refute_seconds, 3),
        "invariant": r.invariant_text,
        "errors": r.errors,
        "counterexamples_to_induction": [f.to_json() for f in r.failures],
        "results": [{"invariant": row.invariant, "expected": row.expected, "verdict": row.verdict,
                     "inductive_invariant": row.lemmas, "k_induction": row.induction,
                     "trace": str(row.trace_path) if row.trace_path else None,
                     "length": len(row.trace) if row.trace else None} for row in r.rows],
    } for r in reports]}
