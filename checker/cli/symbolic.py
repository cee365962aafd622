"""The symbolic commands of the ``kvproof`` command line: ``prove``, ``certify`` and
``check --engine bmc|both``.

Kept apart from :mod:`.cli` so the explicit commands stay small; :func:`add_commands` registers
the subcommands and :func:`check_symbolic` is what ``check`` calls for the Z3 engines.  Exit codes
are the command line's: 0 every verdict matches, 1 one does not (or the engines disagree, or a
certificate fails), 2 something is inconclusive, 3 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


from kvproof.model.scenario import builtins

# The engines, the solvers and rich are imported by the command that uses them (kvproof --help
# loads none of them).
from kvproof.checker.cli.common import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MISMATCH, EXIT_OK, BadInput, Progress, Summary,
                                        claim_counts, plural, protocol_command, reports_summary)
from kvproof.checker.cli.common import json_reports as _json_reports
from kvproof.checker.cli.common import console as _console
from kvproof.checker.cli.common import resolve as _resolve

__all__ = ["add_commands", "check_symbolic", "cmd_prove", "cmd_certify"]

DEFAULT_DEPTH = 24


def check_symbolic(args: argparse.Namespace, scenarios: list, limits) -> int:
    """``check --engine bmc`` (bounded, shortest violations) or ``--engine both`` (the explicit
    verdicts, cross-checked by :func:`~kvproof.checker.symbolic.run.cross_check`).  ``--max-seconds`` is one
    budget for the command: every phase stops at ``limits``' deadline, Z3 calls included
    (:func:`~kvproof.checker.symbolic.watchdog.z3_deadline`)."""
    from kvproof.checker.symbolic.watchdog import z3_deadline

    with z3_deadline(limits.deadline()):
        return _check_symbolic(args, scenarios, limits)


def _check_symbolic(args: argparse.Namespace, scenarios: list, limits) -> int:
    from rich.text import Text

    from kvproof.checker.symbolic.cti import render_failure
    from kvproof.checker.report.render import render_reports
    from kvproof.checker.results import exit_code
    from kvproof.checker.explicit.run import check_scenario
    from kvproof.checker.symbolic.run import check_scenario_bmc, cross_check

    traces_dir = None if args.no_traces else Path(args.traces)
    out = _console()
    deadline = limits.deadline()
    show = not args.quiet and not args.json
    if args.engine == "bmc":
        depth = args.depth or DEFAULT_DEPTH
        reports = []
        with Progress(show, len(scenarios)) as progress:
            for sc in scenarios:
                progress.start(f"{sc.name}: bounded model checking to depth {depth} (Z3)")
                reports.append(check_scenario_bmc(sc, depth, args.invariant, traces_dir, args.max_seconds, deadline))
        summary = reports_summary("check", reports, exit_code(reports), f"bounded model checking to depth {depth}")
        if args.json:
            print(json.dumps({**_json_reports(reports), "summary": summary.to_json()}, indent=2))
        elif not args.quiet:
            out.print(render_reports(reports))
            summary.print(out)
        return summary.exit_code
    problems, gaps, reports, agreements = [], [], [], []
    with Progress(show, len(scenarios)) as progress:
        for sc in scenarios:
            progress.start(f"{sc.name}: explicit search")
            rep = check_scenario(sc, limits, args.invariant, traces_dir, progress)
            how = (f"bounded model checking to depth {args.depth}" if args.depth
                   else "bounded model checking and k-induction")
            progress.note(f"{sc.name}: {how} (Z3), {plural(len(rep.claims), 'claim')}")
            agreement = cross_check(rep, args.depth, args.invariant, args.max_seconds, deadline=deadline)
            problems += agreement.problems
            gaps += agreement.gaps
            reports.append(rep)
            agreements.append(agreement)
    code = EXIT_MISMATCH if problems else EXIT_INCONCLUSIVE if gaps else exit_code(reports)
    meaning = ("the engines disagree" if problems else "agreement not established" if gaps
               else "every verdict matches its expectation and the engines agree" if code == EXIT_OK else "")
    summary = reports_summary("check", reports, code,
                              f"explicit search and Z3 compared: {plural(len(problems), 'disagreement')}, "
                              f"{len(gaps):,} not established", meaning)
    if args.json:
        doc = _json_reports(reports)
        for entry, a in zip(doc["scenarios"], agreements):
            entry["agreement"] = {"bounded_depth": a.bounded.stats.depth, "proved_never_hit": a.proved,
                                  "problems": a.problems, "not_established": a.gaps,
                                  "counterexample_to_induction": a.failure.to_json() if a.failure else None}
        doc["summary"] = summary.to_json()
        print(json.dumps(doc, indent=2))
    elif not args.quiet:
        out.print(render_reports(reports))
        for a in agreements:
            how = f"bounded model checking to depth {a.bounded.stats.depth}"
            if a.proved:
                how += f"; {len(a.proved)} claim(s) never hit, proved so for all depths by k-induction"
            out.print(f"{a.bounded.scenario.name}: {how}")
            if a.failure is not None:
                out.print(render_failure(a.bounded.scenario.name, a.failure))
        if problems:
            out.print(Text("The engines disagree:", style="bold red"))
            for p in problems:
                out.print(f"  {p}")
        if gaps:
            out.print(Text("Agreement not established:", style="yellow"))
            for p in gaps:
                out.print(f"  {p}")
        if not problems and not gaps:
            out.print(f"explicit and symbolic engines agree on {len(reports)} scenario(s)")
        summary.print(out)
    return summary.exit_code


def cmd_prove(args: argparse.Namespace) -> int:
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
        raise BadInput("--no-minimise, --invariant-from and --irredundant go with --all-sizes only")
    if args.no_minimise and args.irredundant:
        raise BadInput("--irredundant shrinks the minimised invariant further: drop --no-minimise")
    if args.no_minimise and args.invariant_from is not None:
        raise BadInput("--invariant-from minimises the stored invariant: drop --no-minimise")
    if args.theorems:
        with Progress(not args.quiet, None, "") as progress:
            progress.note("proving the parametric theorems (Z3)")
            results = protocol_command("theorems")(args.spacer_seconds)
        out = _console()
        refuted = sum(th.verdict == "refuted" for th in results)
        proved = sum(bool(th.holds) for th in results)
        code = EXIT_MISMATCH if refuted else EXIT_OK if proved == len(results) else EXIT_INCONCLUSIVE
        summary = Summary("prove", f"{plural(len(results), 'parametric theorem')}", proved, refuted,
                          len(results) - proved - refuted, code,
                          "every theorem is proved" if code == EXIT_OK else "")
        if not args.quiet:
            for th in results:
                style = "green" if th.holds else "bold red"
                out.print(Text(f"{th.verdict:<8} {th.name}", style=style))
                out.print(f"         {th.statement}")
                for line in th.details:
                    out.print(f"         {line}")
            summary.print(out)
        return summary.exit_code
    if args.link and not args.all_sizes:
        raise BadInput("--link goes with --all-sizes (prove --all-sizes SCENARIO --link)")
    if args.lifted and not args.all_sizes:
        raise BadInput("--lifted goes with --all-sizes")
    if args.all_sizes and args.link:
        return _prove_linked(args)
    if args.all_sizes:
        return _prove_all_sizes(args)
    if args.lift_from is not None:
        return _prove_lifted(args)
    names = args.scenarios or [s.name for s in builtins()]
    scenarios = [_resolve(n) for n in names]
    for sc in scenarios:
        sc.build()
    budget = ProofBudget(refute_depth=args.refute_depth, lemma_seconds=args.lemma_seconds,
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
    if errors or mismatched:
        code = EXIT_MISMATCH
    else:
        code = EXIT_INCONCLUSIVE if inconclusive else EXIT_OK
    meaning = ("every invariant is proved or refuted as expected" if code == EXIT_OK
               else f"an engine error ({plural(errors, 'error')})" if errors and not mismatched else "")
    summary = Summary("prove", f"{plural(len(reports), 'scenario')}, {plural(len(rows), 'invariant')} "
                               "(inductive invariant and k-induction)", matched, mismatched, inconclusive, code, meaning)
    out = _console()
    if args.json:
        print(json.dumps({**_json(reports), "summary": summary.to_json()}, indent=2))
    elif not args.quiet:
        out.print(_table(reports))
        for r in reports:
            if r.certificate is not None:
                out.print(f"{r.scenario.name}: inductive invariant of {r.lemma_count} lemmas "
                          f"({r.lemma_rounds} Z3 rounds), certificate {r.certificate}")
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


def _prove_linked(args: argparse.Namespace) -> int:
    """``prove --all-sizes SCENARIO --link``: SCENARIO's target claims at its own size with no
    enumeration, from the all-sizes certificate of its parametric model and the link between
    the spec and the model, proved at that size (:func:`~kvproof.checker.allsizes.prove.prove_by_link`).
    One line per obligation of the link, one for the certificate, one per claim, one saying what
    the result rests on.  Exit 0 when every target claim holds, 1 when the link is refuted (the
    offending spec action is named) or a claim the scenario expects violated holds, 2 when a
    claim is inconclusive (no certificate of the model, a solver gave up), 3 on bad input."""
    from rich.text import Text

    from kvproof.checker.allsizes.prove import prove_by_link

    if len(args.scenarios) != 1 or args.lift_from is not None:
        raise BadInput("prove --all-sizes --link takes exactly one SCENARIO (and no --lift-from)")
    sc = _resolve(args.scenarios[0])
    spec = sc.build()
    if args.certificate is not None and not Path(args.certificate).is_file():
        raise BadInput(f"--certificate {args.certificate}: no such file")
    out = _console()
    with Progress(not args.quiet and not args.json, 1) as progress:
        progress.start(sc.name)
        r = prove_by_link(sc, args.certificate, args.certificates, args.lemma_seconds, args.solve_certificate,
                          progress.note)
    code = r.exit_code
    k = getattr(spec, "k", None)
    size = (f"{plural(k.R, 'request')}, {plural(k.D, 'decode page')}, {plural(k.P, 'prefill page')}"
            if k is not None and hasattr(k, "D") else "its size")
    link = r.link
    if args.json:
        doc = {"scenario": sc.name, "size": size, "verdicts": r.verdicts, "reason": r.reason, "mismatch": r.mismatch,
               "certificate": str(r.certificate) if r.certificate else None, "certificate_claims": r.certificate_claims,
               "certificate_solved": r.solved, "seconds": {k_: round(v, 3) for k_, v in r.seconds.items()},
               "link": None if link is None else {
                   "hypotheses": link.hypotheses, "hypotheses_used": sorted(link.used),
                   "seconds": {k_: round(v, 3) for k_, v in link.seconds.items()},
                   "results": [{"kind": x.kind, "name": x.name, "instances": x.instances, "verdict": x.verdict,
                                "offending": x.offending, "detail": x.detail, "needed_hypotheses": x.needed,
                                "seconds": round(x.seconds, 3)} for x in link.results]},
               "exit_code": code}
        print(json.dumps(doc, indent=2))
        return code
    if args.quiet:
        return code
    if link is not None:
        for x in link.results:
            style = "green" if x.verdict == "proved" else "bold red" if x.verdict == "refuted" else "yellow"
            if x.kind == "init":
                what = "Init: every model Init state is the spec's initial state" if x.name == "Init" else x.name
            elif x.kind == "step":
                what = (f"step {x.name}: " + (f"each of its {x.instances} instances" if x.instances != 1 else "its instance")
                        + " is a model step"
                        + (f" ({x.needed} from states whose model image satisfies the certified invariant)" if x.needed else ""))
            else:
                what = f"claim {x.name}: the model's and the spec's agree on every typed state"
            out.print(Text(f"{x.verdict:<9} link {what}" + (f": {x.offending}" if x.verdict != "proved" else ""),
                           style=style))
            if x.verdict != "proved":
                for line in x.detail:
                    out.print(f"          {line}", overflow="fold")
    if r.certificate is not None:
        how = ("its obligations re-solved now: z3 and cvc5 answered unsat" if r.solved is not None and not r.reason
               else "its obligations not re-solved now (--no-solve-certificate; kvproof certify FILE re-solves them)")
        out.print(f"{'ok':<9} certificate {r.certificate}: the parametric model's, line for line; "
                  f"proves {len(r.certificate_claims)} claims for every size; {how}")
    for name, verdict in r.verdicts.items():
        style = "green" if verdict == "holds" else "yellow"
        out.print(Text(f"{verdict:<13} {name} at {size}" + (", no enumeration" if verdict == "holds" else ""),
                       style=style))
    for line in r.mismatch:
        out.print(Text(f"MISMATCH {line}", style="bold red"))
    total = sum(r.seconds.values())
    if code == 0:
        used = len(link.used) if link is not None else 0
        out.print(f"{sc.name}: {plural(len(r.verdicts), 'claim')} hold at {size} without enumerating it; they rest on "
                  f"the link proved now ({r.seconds.get('link', 0):.1f} s; {used} of the certificate's "
                  f"{link.hypotheses if link else 0} invariant conjuncts assumed where needed) and the certificate "
                  f"{r.certificate} ({'re-solved now' if r.solved is not None else 'solved by z3 and cvc5 when written, not now'}); "
                  f"{total:.1f} s")
    elif r.reason:
        out.print(Text(f"{sc.name}: {'REFUTED' if code == 1 else 'INCONCLUSIVE'}: {r.reason}",
                       style="bold red" if code == 1 else "yellow"))
    held = sum(v == "holds" for v in r.verdicts.values())
    meaning = ("every target claim holds at this size, no enumeration" if code == EXIT_OK
               else "the link is refuted" if code == EXIT_MISMATCH and link is not None and link.refuted
               else "a claim the scenario expects violated holds" if code == EXIT_MISMATCH
               else "inconclusive: not every claim is said to hold (the reason above)")
    Summary("prove", f"{sc.name} at {size} through the link, {plural(len(r.verdicts), 'claim')}",
            held - len(r.mismatch), len(r.mismatch) + (len(r.verdicts) - held if code == EXIT_MISMATCH else 0),
            len(r.verdicts) - held if code != EXIT_MISMATCH else 0, code, meaning).print(out)
    return code


def _prove_all_sizes(args: argparse.Namespace) -> int:
    """``prove --all-sizes SCENARIO``: the safety claims for every number of requests and pages
    (:mod:`~kvproof.checker.allsizes.prove`).  Exit 0 when every target claim is proved, 1 when one is
    violated at the scenario's own size (its shortest trace shown), 2 when one is inconclusive,
    3 on bad input."""
    from rich.text import Text

    from kvproof.checker.allsizes.prove import prove_all_sizes
    from kvproof.checker.allsizes.sorted_allsizes import lifted_model

    if len(args.scenarios) != 1 or args.lift_from is not None:
        raise BadInput("prove --all-sizes takes exactly one SCENARIO (and no --lift-from)")
    sc = _resolve(args.scenarios[0])
    sc.build()
    certs = None if args.no_certificates else Path(args.certificates)
    traces = None if args.no_traces else Path(args.traces)
    out = _console()
    with Progress(not args.quiet and not args.json, 1) as progress:
        progress.start(sc.name)
        try:
            r = prove_all_sizes(sc, args.lemma_seconds, args.template_arity, certs, traces, progress.note,
                                minimise_invariant=not args.no_minimise, invariant_from=args.invariant_from,
                                irredundant=args.irredundant, model_of=lifted_model if args.lifted else None)
        except ValueError as e:
            raise BadInput(str(e)) from None
    code = r.exit_code
    m = r.minimised
    if args.json:
        h = r.houdini
        doc = {"scenario": sc.name, "verdicts": r.verdicts, "reason": r.reason, "fixed": list(r.fixed),
               "abstractions": list(r.abstractions), "linked": list(r.linked), "small_states": r.small_states, "mined": r.mined, "joined": r.joined,
               "candidates": r.candidates, "kept": None if h is None else len(h.kept),
               "houdini_rounds": None if h is None else h.rounds,
               "minimised": None if m is None else {"status": m.status, "found": m.found, "kept": len(m.kept),
                                                    "rounds": m.rounds, "passes": m.passes, "seconds": round(m.seconds, 3),
                                                    "check_seconds": round(m.checked_seconds, 3),
                                                    "dropped": m.dropped, "irredundant": m.irredundant,
                                                    "drop_checks": m.drop_checks, "drop_seconds": round(m.drop_seconds, 3),
                                                    "drop_note": m.drop_note},
               "invariant": len(r.invariant),
               "seconds": {k: round(v, 3) for k, v in r.seconds.items()},
               "certificate": str(r.certificate) if r.certificate else None,
               "traces": {n: t.trace.labels() for n, t in r.traces.items() if getattr(t, "trace", None)},
               "counterexamples_to_induction": {} if h is None else h.counterexamples}
        print(json.dumps(doc, indent=2))
        return code
    if args.quiet:
        return code
    for name, verdict in r.verdicts.items():
        style = "green" if verdict == "proved" else "bold red" if verdict == "violated" else "yellow"
        scope = " for every size" if verdict == "proved" else " at the scenario's own size" if verdict == "violated" else ""
        out.print(Text(f"{verdict:<13} {name}{scope}", style=style))
        result = r.traces.get(name)
        if result is not None and getattr(result, "trace", None) is not None:
            for k, label in enumerate(result.trace.shown_labels(), 1):
                out.print(f"    {k:>2}. {label}")
    for line in r.fixed:
        out.print(f"fixed: {line}")
    for line in r.abstractions:
        out.print(f"over-approximated: {line}")
    for line in r.linked:
        out.print(f"linked: {line}")
    if r.houdini is not None:
        h = r.houdini
        out.print(f"{sc.name}: {r.small_states:,} states of the small instance, {r.mined:,} facts mined, "
                  f"{r.candidates:,} quantified candidates; Houdini (Z3) kept {len(h.kept):,} in {h.rounds} rounds; "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in r.seconds.items()))
    if m is not None:
        out.print(f"{sc.name}: minimised the invariant: kept {len(m.kept) + m.dropped:,} of {m.found:,} conjuncts "
                  f"({m.passes} passes, {m.rounds} rounds, {m.seconds:.1f} s; checked from scratch in {m.checked_seconds:.1f} s)"
                  if m.status == "done" else f"{sc.name}: minimising the invariant failed ({m.status}); "
                  f"the certificate states all {len(r.invariant):,} conjuncts")
        if m.drop_checks:
            out.print(f"{sc.name}: the drop pass removed {m.dropped:,} more in {m.drop_checks:,} checks ({m.drop_seconds:.1f} s): "
                      + ("no single lemma of the rest can be removed (irredundant; not necessarily the smallest)"
                         if m.irredundant else f"stopped early, not irredundant ({m.drop_note})"))
    if r.certificate is not None:
        out.print(f"{sc.name}: certificate {r.certificate} (check with `z3 FILE` and cvc5: every answer unsat)")
    if r.reason:
        out.print(Text(f"{sc.name}: {'VIOLATED' if code == 1 else 'INCONCLUSIVE'}: {r.reason}",
                       style="bold red" if code == 1 else "yellow"))
    if r.houdini is not None:
        for name, text in list(r.houdini.counterexamples.items())[:2]:
            out.print(f"{name}: counterexample to induction (a state of the parametric model; the step after):\n{text}")
    return code


def _prove_lifted(args: argparse.Namespace) -> int:
    """``prove SCENARIO --lift-from SMALL``: the invariants of SCENARIO proved with lemmas
    mined on SMALL and lifted by renaming (:mod:`~kvproof.checker.symbolic.lift`); SCENARIO is never
    enumerated.  Exit 0 when every invariant expected verified is proved, 1 when one expected
    violated is proved, 2 otherwise (inconclusive: this method never refutes), 3 on bad input."""
    from rich.text import Text

    from kvproof.checker.cli.common import BadInput
    from kvproof.checker.symbolic.cti import render_failure
    from kvproof.checker.symbolic.lift import LiftBudget, LiftError, prove_lifted

    if len(args.scenarios) != 1:
        raise BadInput("prove --lift-from takes exactly one SCENARIO (the larger instance)")
    large, small = _resolve(args.scenarios[0]), _resolve(args.lift_from)
    budget = LiftBudget(max_states=args.max_states, template_arity=args.template_arity,
                        small_seconds=args.induction_seconds, large_seconds=args.lemma_seconds,
                        claim_seconds=args.induction_seconds, max_k=args.max_k)
    # a certificate of a scenario outside the catalogue goes only where --certificates says
    explicit = "--certificates" in sys.argv or any(a.startswith("--certificates=") for a in sys.argv)
    catalogue = large.name in {s.name for s in builtins()}
    certs = None if args.no_certificates or not (explicit or catalogue) else Path(args.certificates)
    out = _console()
    with Progress(not args.quiet and not args.json, 1) as progress:
        progress.start(large.name)
        try:
            r = prove_lifted(large, small, budget, certs, progress.note)
        except LiftError as e:
            raise BadInput(f"{large.name} from {small.name}: {e}") from None
    total = sum(r.seconds.values())
    proved = [row for row in r.rows if row.verdict == "proved"]
    wrong = [row for row in proved if row.expected != "verified"]
    matched = sum(row.matches for row in r.rows)
    code = EXIT_MISMATCH if wrong else EXIT_OK if matched == len(r.rows) else EXIT_INCONCLUSIVE
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
        print(json.dumps({**doc, "summary": summary.to_json()}, indent=2))
        return code
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
    from rich.table import Table
    from rich.text import Text

    t = Table(pad_edge=False)
    for col in ("scenario", "invariant", "expected", "verdict", "inductive inv.", "k-induction", "trace"):
        t.add_column(col, no_wrap=True)
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


def cmd_certify(args: argparse.Namespace) -> int:
    """Re-check certificates (default: every one under traces/proofs), fixed-size and all-sizes
    alike: each read by the one certificate reader, its obligations answered by fresh z3 and cvc5
    processes, one answer bound to each, and held against today's catalogue scenario
    (fixed-size) or parametric model (all-sizes).  Exit 1 if one does not check, 3 if one cannot
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
        against = _resolve(args.scenario)
    out = _console()
    bad = unreadable = 0
    model_only = False
    last: CertificateError | None = None
    _certified: set[str] = set()  # the scenarios the readable fixed-size certificates name
    with Progress(True, len(files), "certificates") as progress:  # removed however the loop ends
        for f in files:
            progress.start(f"{f.name}: z3 and cvc5")
            try:
                rc = recheck(f, against, args.seconds, args.all_sizes_seconds, solve_all_sizes=not args.all_sizes_model_only)
            except CertificateError as e:  # named here with the others; one line on stderr at the end
                unreadable += 1
                last = e
                if len(files) > 1:
                    with progress.paused():
                        out.print(Text(f"UNREADABLE {e}", style="bold red"), soft_wrap=True)
                continue
            bad += not rc.ok
            if rc.kind == ALL_SIZES:
                model_only |= args.all_sizes_model_only
                how = ("; compared with today's model only, not re-solved: --all-sizes-model-only"
                       if args.all_sizes_model_only else "")
                what = f"{rc.scenario}, every size: {len(rc.invariants)} claims{how}"
            else:
                _certified.add(rc.scenario)
                what = f"{rc.scenario}: {len(rc.invariants)} invariants"
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
    code = EXIT_BAD_INPUT if last is not None else EXIT_MISMATCH if bad or missing else EXIT_OK
    meaning = {EXIT_OK: "every certificate checks" + (" and every scenario of the catalogue has one" if args.complete else ""),
               EXIT_MISMATCH: ("a certificate does not check" if bad else "a scenario of the catalogue has no certificate"),
               EXIT_BAD_INPUT: "a file cannot be read as a kvproof certificate"}[code]
    ran = (plural(len(files), "certificate") + " (z3 and cvc5" + ("; all-sizes ones against today's model only"
                                                                  if model_only else "")
           + (", every scenario of the catalogue asked for)" if args.complete else ")"))
    if len(files) > 1 or last is None:
        Summary("certify", ran, checked - bad, bad + len(missing), 0, code, meaning).print(out)
    if last is not None:  # exit 3, one line: the file's own error, or how many are named above
        if len(files) == 1:
            raise last
        raise CertificateError(f"{unreadable} of {len(files)} files cannot be read as kvproof certificates "
                               "(each is named above)")
    return code


def add_commands(sub, positive_int, positive_float) -> None:
    """Register ``prove`` and ``certify`` on the main parser's subcommands."""
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
    pv.add_argument("--lemma-seconds", type=positive_float, default=600.0, metavar="S",
                    help="budget per scenario for finding the inductive invariant (default 600)")
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
    pv.add_argument("--lifted", action="store_true",
                    help="with --all-sizes: prove on the model lifted from the spec itself (its abstractions "
                         "printed) instead of the protocol's hand-written parametric model")
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
    pv.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    pv.add_argument("--quiet", action="store_true", help="print nothing; the exit code tells")
    pv.add_argument("--variant", action="append", metavar="FILE.py",
                    help="trust an engine variant (code) and prove its SCENARIO if it has one (repeatable)")
    pv.set_defaults(func=cmd_prove)

    cf = sub.add_parser("certify", help="re-check proof certificates with fresh z3 and cvc5 processes and against the catalogue")
    cf.add_argument("files", nargs="*", metavar="FILE")
    cf.add_argument("--certificates", default="traces/proofs", metavar="DIR",
                    help="where to look when no FILE is given (default traces/proofs)")
    cf.add_argument("--scenario", metavar="SCENARIO",
                    help="check against this scenario (built-in name or .toml file) instead of the catalogue's of the same name")
    cf.add_argument("--seconds", type=positive_float, default=600.0, metavar="S",
                    help="time limit of each solver process (default 600)")
    cf.add_argument("--all-sizes-seconds", type=positive_float, default=3600.0, metavar="S",
                    help="time limit of each solver process on an all-sizes certificate (*.allsizes.smt2; "
                         "default 3600: a minimised one takes z3 and cvc5 seconds, an unminimised one of 455 "
                         "conjuncts took them 13 and 19 minutes on a loaded 2-core machine)")
    cf.add_argument("--all-sizes-model-only", action="store_true",
                    help="check an all-sizes certificate against today's parametric model line for line, but "
                         "run no solver on it (for a large one, whose obligations take the solvers minutes); "
                         "said on its line")
    cf.add_argument("--complete", action="store_true",
                    help="also fail (exit 1) if a scenario of the catalogue has no certificate among them")
    cf.add_argument("--variant", action="append", metavar="FILE.py",
                    help="trust this engine variant file (it is code) for the scenario --scenario names (repeatable)")
    cf.set_defaults(func=cmd_certify)
