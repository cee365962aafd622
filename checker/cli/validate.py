"""``kvproof validate LOG``: search for a behaviour of the spec that explains an engine's event
log (:mod:`kvproof.checker.logs`); the exit code of its answer
(:func:`kvproof.checker.logs.validate_output.exit_of`)."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import BadInputError, add_output_arguments, output_console
from kvproof.checker.cli.options import positive_int

__all__ = ["NAME", "OUTPUTS", "add_parser", "run"]

NAME = "validate"
OUTPUTS = (("traces", "--traces", True, "no_traces"), ("merge", "--merge", False, None))
"""The files ``validate`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""

def add_parser(sub) -> None:
    """Register ``validate`` on the main parser's subcommands."""
    va = sub.add_parser("validate", help="does a behaviour of the spec explain an engine's event log (JSONL)?",
                        description="Search for a behaviour of the spec that explains an engine's event log. "
                                    "Exit 0: explained; 1: a violation (every explanation up to an event breaks "
                                    "an invariant) or a possible violation (some explanation does; 0 with "
                                    "--certain-only); 5: unexplained, a line no behaviour produces (an event "
                                    "lost, duplicated or reordered) with no violation before it - a violation "
                                    "before an unexplained line wins, exit 1; 2: cannot decide (--max-states); "
                                    "3: bad input, wherever it is in the log.")
    va.add_argument("log", metavar="LOG", nargs="+",
                    help="an event log: JSONL, a header line, then one event a line (schema 1); a directory: its "
                         "*.jsonl logs, one verdict each and one summary; with --follow, one LOG, - reading "
                         "standard input")
    va.add_argument("--max-states", type=positive_int, default=100_000, metavar="N",
                    help="cannot decide (exit 2) past N possible states at one event (default 100000)")
    va.add_argument("--traces", metavar="DIR", help="where a violation's trace goes (default: the log's directory)")
    va.add_argument("--no-traces", action="store_true", help="write no trace file")
    va.add_argument("--certain-only", action="store_true",
                    help="exit 0 for a log every event of which is explained by a behaviour that breaks no "
                         "invariant, even where another behaviour consistent with it breaks one (a possible "
                         "violation, exit 1 by default)")
    va.add_argument("--backend", choices=("auto", "native", "python", "factored", "ray"), default="auto",
                    help="the search: the factored frontier where the spec suits it, else its steps in C where a "
                         "C compiler is found (auto, the default); always in C (native); the reference in Python "
                         "(python); the factored frontier (factored); the same answer; ray: the logs spread over "
                         "a Ray cluster (kvproof[ray]), each searched as auto")
    va.add_argument("--workers", type=positive_int, default=2, metavar="N",
                    help="with --backend ray and no cluster to join: the CPUs of the local cluster (default 2)")
    va.add_argument("--ray-address", metavar="ADDR",
                    help="with --backend ray: join the Ray cluster at ADDR (default: RAY_ADDRESS, else start one)")
    va.add_argument("--merge", metavar="OUT",
                    help="the LOGs (files, or a directory's *.jsonl) are one run's processes' logs (a prefill "
                         "server's and a decode server's): write them to OUT as one log ordered by time (each "
                         "header's t0 plus each event's t; each event's file:line in its origin key) and check that "
                         "one log; their headers must agree")
    va.add_argument("--follow", action="store_true",
                    help="LOG is still being written (a file, or - for standard input): report each finding as "
                         "soon as the line that shows it is read, and go on; a renamed-and-recreated or truncated "
                         "file, or a new header line, starts a new log; ends when the input ends (a pipe) or on "
                         "Ctrl-C, with the summary; no trace is written")
    add_output_arguments(va, "print JSON Lines instead of the report: one object per finding (\"finding\": violation, "
                             "possible_violation, unexplained, undecided), one per log (\"log\", \"verdict\"), then "
                             "the closing object (the command, its verdict and exit code, the summary); the exit "
                             "code is the same")
    va.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Search for a behaviour of the spec that explains an engine's event log (the protocol the
    log's header names supplies the ``validate`` command); the exit code of its answer
    (:func:`~kvproof.checker.logs.validate_output.exit_of`)."""
    from kvproof.checker.logs.validate_command import validate_log
    from kvproof.checker.logs.validate_output import JsonPrinter, TextPrinter, summary_of

    import os

    from kvproof.checker.logs.fleet import log_files, validate_many

    printer = JsonPrinter() if args.json else TextPrinter(output_console(args))
    if args.follow:
        if len(args.log) != 1 or os.path.isdir(args.log[0]):
            raise BadInputError("--follow: one log, a file or - (standard input)")
        if args.backend == "ray":
            raise BadInputError("--follow: a live log is searched here, not on Ray (--backend ray)")
        if getattr(args, "merge", None):
            raise BadInputError("--follow: one live log, not merged ones (--merge)")
        args.log = args.log[0]
        return _follow(args, printer)
    if getattr(args, "merge", None):
        if args.backend == "ray":
            raise BadInputError("--merge: the merged log is searched here, not on Ray (--backend ray)")
        from kvproof.checker.logs.merge import merge_logs
        from kvproof.checker.logs.validate import LogError

        try:
            logs, events = merge_logs(log_files(args.log), args.merge)
        except (ValueError, LogError) as e:
            raise BadInputError(str(e)) from None
        printer.say(f"{args.merge}: {events:,} events of {logs} logs, merged by time", False)
        args.log = [args.merge]
    if len(args.log) == 1 and not os.path.isdir(args.log[0]) and args.backend != "ray":
        result = validate_log(args, args.log[0], printer, BadInputError)
        printer.finding(result.verdict())
        return printer.summary(summary_of([result.answer], result.count))
    from kvproof.checker.explicit.ray_backend import RayUnavailable

    try:
        paths = log_files(args.log)
        results = validate_many(args, paths, printer, args.workers, args.ray_address)
    except (ValueError, RayUnavailable) as e:
        raise BadInputError(str(e)) from None
    return printer.summary(summary_of([r.answer for r in results], sum(r.count for r in results)))


def _follow(args: argparse.Namespace, printer) -> int:
    """``validate --follow``: the log's lines as they come, checked live; the summary at the end
    of the input or on Ctrl-C (or SIGTERM)."""
    import signal
    import sys

    from kvproof.checker.logs.follow import pipe_lines, tail_lines
    from kvproof.checker.logs.validate_command import follow_log
    from kvproof.checker.logs.validate_output import summary_of

    def notes(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def stop(signum, frame):
        raise KeyboardInterrupt

    if args.log == "-":
        lines = pipe_lines(sys.stdin.buffer)
    else:
        try:
            open(args.log, "rb").close()
        except OSError as e:
            raise BadInputError(f"{args.log}: cannot read: {e.strerror or e}") from None
        lines = tail_lines(args.log)
    previous = signal.signal(signal.SIGTERM, stop) if hasattr(signal, "SIGTERM") else None
    results: list = []
    try:
        follow_log(args, printer, notes, lines, args.log, results)
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return printer.summary(summary_of([r.answer for r in results], sum(r.count for r in results)))
