"""``kvproof prove --all-sizes SCENARIO``: the safety claims for every number of requests and
pages (:mod:`kvproof.checker.allsizes`), and with ``--link`` the claims at SCENARIO's own size
with no enumeration, from the all-sizes certificate of its parametric model and the link between
the spec and the model.  A part of ``prove`` (:mod:`.prove`), kept apart for its length."""

from __future__ import annotations

import argparse
from pathlib import Path

from kvproof.checker.certs.limits import ResourceLimit
from kvproof.checker.cli.common import (EXIT_MISMATCH, EXIT_OK, BadInputError, Progress, Summary, finish,
                                        output_console, plural, resolve)

__all__ = ["prove_linked", "prove_all_sizes"]


def prove_linked(args: argparse.Namespace) -> int:
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
        raise BadInputError("prove --all-sizes --link takes exactly one SCENARIO (and no --lift-from)")
    sc = resolve(args.scenarios[0])
    spec = sc.build()
    if args.certificate is not None and not Path(args.certificate).is_file():
        raise BadInputError(f"--certificate {args.certificate}: no such file")
    out = output_console(args)
    with Progress(not args.quiet and not args.json, 1) as progress:
        progress.start(sc.name)
        limit = ResourceLimit(args.rlimit)
        with limit.applied():
            r = prove_by_link(sc, args.certificate, args.certificates, limit.seconds(args.lemma_seconds, 600.0),
                              args.solve_certificate, progress.note)
    code = r.exit_code
    size = spec.link_size()  # the protocol's words for the size
    link = r.link
    held = sum(v == "holds" for v in r.verdicts.values())
    meaning = ("every target claim holds at this size, no enumeration" if code == EXIT_OK
               else "the link is refuted" if code == EXIT_MISMATCH and link is not None and link.refuted
               else "a claim the scenario expects violated holds" if code == EXIT_MISMATCH
               else "inconclusive: not every claim is said to hold (the reason above)")
    summary = Summary("prove", f"{sc.name} at {size} through the link, {plural(len(r.verdicts), 'claim')}",
                      held - len(r.mismatch), len(r.mismatch) + (len(r.verdicts) - held if code == EXIT_MISMATCH else 0),
                      len(r.verdicts) - held if code != EXIT_MISMATCH else 0, code, meaning)
    if args.json:
        doc = {"scenario": sc.name, "size": size, "verdicts": r.verdicts, "reason": r.reason, "mismatch": r.mismatch,
               "certificate": str(r.certificate) if r.certificate else None, "certificate_claims": r.certificate_claims,
               "certificate_solved": r.solved, "seconds": {k_: round(v, 3) for k_, v in r.seconds.items()},
               "link": None if link is None else {
                   "hypotheses": link.hypotheses, "hypotheses_used": sorted(link.used),
                   "seconds": {k_: round(v, 3) for k_, v in link.seconds.items()},
                   "results": [{"kind": x.kind, "name": x.name, "instances": x.instances, "verdict": x.verdict,
                                "offending": x.offending, "detail": x.detail, "needed_hypotheses": x.needed,
                                "seconds": round(x.seconds, 3)} for x in link.results]}}
        return finish(args, summary, None, doc)
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
        offered = link.hypotheses if link is not None else 0
        assumed = (f"{len(link.used)} of the certificate's {offered} invariant conjuncts assumed where needed"
                   if offered else "no hypothesis")
        out.print(f"{sc.name}: {plural(len(r.verdicts), 'claim')} hold at {size} without enumerating it; they rest on "
                  f"the link proved now ({r.seconds.get('link', 0):.1f} s; {assumed}) and the certificate "
                  f"{r.certificate} ({'re-solved now' if r.solved is not None else 'solved by z3 and cvc5 when written, not now'}); "
                  f"{total:.1f} s")
    elif r.reason:
        out.print(Text(f"{sc.name}: {'REFUTED' if code == 1 else 'INCONCLUSIVE'}: {r.reason}",
                       style="bold red" if code == 1 else "yellow"))
    return summary.print(out)


def prove_all_sizes(args: argparse.Namespace) -> int:
    """``prove --all-sizes SCENARIO``: the safety claims for every number of requests and pages
    (:mod:`~kvproof.checker.allsizes.prove`).  Exit 0 when every target claim is proved, 1 when one is
    violated at the scenario's own size (its shortest trace shown) or at a small instance mined
    (its size and run length shown), 2 when one is inconclusive,
    3 on bad input."""
    from rich.text import Text

    from kvproof.checker.allsizes.prove import prove_all_sizes

    if len(args.scenarios) != 1 or args.lift_from is not None:
        raise BadInputError("prove --all-sizes takes exactly one SCENARIO (and no --lift-from)")
    sc = resolve(args.scenarios[0])
    sc.build()
    certs = None if args.no_certificates else Path(args.certificates)
    traces = None if args.no_traces else Path(args.traces)
    out = output_console(args)
    with Progress(not args.quiet and not args.json, 1) as progress:
        progress.start(sc.name)
        try:
            limit = ResourceLimit(args.rlimit)
            with limit.applied():
                r = prove_all_sizes(sc, limit.seconds(args.lemma_seconds, 600.0), args.template_arity, certs, traces,
                                    progress.note, minimise_invariant=not args.no_minimise,
                                    invariant_from=args.invariant_from, irredundant=args.irredundant)
        except ValueError as e:
            raise BadInputError(str(e)) from None
    code = r.exit_code
    m = r.minimised
    verdicts = list(r.verdicts.values())
    summary = Summary("prove", f"{sc.name}, {plural(len(verdicts), 'claim')} (every size)", verdicts.count("proved"),
                      verdicts.count("violated"), len(verdicts) - verdicts.count("proved") - verdicts.count("violated"),
                      code, ("every target claim is proved for every size" + (
                          " where every element has " + ", ".join(f"{n} {'true' if v else 'false'}" for n, v in sorted(r.pinned.items()))
                          + ", as every element of the scenario" if r.pinned else "")) if code == EXIT_OK else "")
    if args.json:
        h = r.houdini
        doc = {"scenario": sc.name, "verdicts": r.verdicts, "reason": r.reason, "fixed": list(r.fixed),
               "abstractions": list(r.abstractions), "linked": list(r.linked), "not_lifted": r.not_lifted, "small_states": r.small_states,
               "violated_at": {n: {"size": size, "steps": steps} for n, (size, steps) in r.violated_at.items()},
               "pinned": r.pinned, "outside": {n: {"size": size, "steps": steps} for n, (size, steps) in r.outside.items()}, "mined": r.mined, "joined": r.joined,
               "candidates": r.candidates, "conditioned": r.conditioned, "kept": None if h is None else len(h.kept),
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
        return finish(args, summary, None, doc)
    if args.quiet:
        return code
    for name, verdict in r.verdicts.items():
        style = "green" if verdict == "proved" else "bold red" if verdict == "violated" else "yellow"
        at = r.violated_at.get(name)
        scope = (" for every size" if verdict == "proved" else "" if verdict != "violated"
                 else f" at {at[0]}, a small instance mined (a run of {at[1]} steps; `kvproof check` at that size shows it)"
                 if at else " at the scenario's own size")
        out.print(Text(f"{verdict:<13} {name}{scope}", style=style))
        result = r.traces.get(name)
        if result is not None and getattr(result, "trace", None) is not None:
            for k, label in enumerate(result.trace.shown_labels(), 1):
                out.print(f"    {k:>2}. {label}")
    for line in r.fixed:
        out.print(f"fixed: {line}")
    for name, (size, steps) in r.outside.items():
        out.print(f"outside the fixed configuration: {name} is violated at {size}, a small instance mined "
                  f"(a run of {steps} steps), so it is proved only where every element has "
                  + ", ".join(f"{n} {'true' if v else 'false'}" for n, v in sorted(r.pinned.items())))
    for line in r.abstractions:
        out.print(f"over-approximated: {line}")
    for line in r.linked:
        out.print(f"linked: {line}")
    for name, why in r.not_lifted.items():
        out.print(f"not lifted: claim {name}: {why}")
    if r.houdini is not None:
        h = r.houdini
        out.print(f"{sc.name}: {r.small_states:,} states of the small instance, {r.mined:,} facts mined, "
                  f"{r.candidates:,} quantified candidates ({r.conditioned:,} conditioned on per-element configuration); Houdini (Z3) kept {len(h.kept):,} in {h.rounds} rounds; "
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
    return summary.print(out)
