"""``kvproof audit ENGINE==VERSION ... -- COMMAND...``: map an engine's launch line to the
model, check it, and print the hazards the deployment is exposed to (the protocol named by
ENGINE supplies the ``audit`` command; :mod:`kvproof.checker.audit`)."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import (BadInputError, add_output_arguments, add_protocol_arguments, output_console,
                                        protocol_command)
from kvproof.checker.cli.options import MAX_SECONDS, positive_float, positive_int

__all__ = ["NAME", "OUTPUTS", "add_parser", "prepare", "run"]

NAME = "audit"
OUTPUTS = (("traces", "--traces", True, "no_traces"),)
"""The files ``audit`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""


def add_parser(sub) -> None:
    """Register ``audit`` on the main parser's subcommands."""
    au = sub.add_parser("audit", help="is a deployment, as launched, exposed? ENGINE==VERSION ... -- COMMAND...")
    au.add_argument("engine", metavar="ENGINE==VERSION",
                    help="the engine and its release (an unknown one is answered with the known ones)")
    au.add_argument("--env", action="append", metavar="NAME=VALUE",
                    help="an environment variable of the deployment (repeatable; kvproof's own environment is not read)")
    au.add_argument("--env-file", action="append", metavar="FILE", help="NAME=VALUE lines (repeatable)")
    add_protocol_arguments(au, "audit")  # the options that only one protocol's engine has
    au.add_argument("--manifest", action="append", metavar="FILE",
                    help="audit the prefill/decode pair of a Kubernetes deployment (YAML, several documents; "
                         "repeatable) instead of one launch line")
    au.add_argument("--metrics", metavar="FILE",
                    help="a Prometheus scrape of the deployment saved to a file: the bounds the engine's model needs "
                         "are derived from the histograms the engine exports (each engine says which)")
    au.add_argument("--quantile", metavar="Q",
                    help="with --metrics, the quantile of each histogram taken as its bound (default 1: every "
                         "observation)")
    au.add_argument("--traces", default="traces", metavar="DIR", help="where the hazards' traces go (default: traces)")
    au.add_argument("--no-traces", action="store_true", help="write no trace files")
    add_output_arguments(au)
    au.add_argument("--reader", choices=("auto", "engine", "table"), default="auto",
                    help="read the launch line with the installed engine's own parser (engine), the flag table "
                         "generated from it (table), or the engine when the named version is installed (auto)")
    au.add_argument("--max-states", type=positive_int, metavar="N", help="stop each search after N distinct states")
    au.add_argument("--max-seconds", type=positive_float, metavar="S", help=MAX_SECONDS)
    au.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the launch command, after --")
    au.set_defaults(func=run, launch_parser=au)


def run(args: argparse.Namespace) -> int:
    """Map an engine's launch line to the model, check it, and print the hazards it is exposed to
    (kvproof's own options after ENGINE==VERSION were parsed by :func:`prepare`)."""
    run_audit = protocol_command("audit", args.engine.partition("==")[0].strip().lower())
    return run_audit(args, output_console(args), BadInputError)


def prepare(args: argparse.Namespace) -> None:
    """argparse hands everything after ENGINE==VERSION to ``launch``: kvproof's own options
    there (before ``--``) are parsed here, before the command starts (``--max-seconds`` among
    them), and what follows ``--`` is the launch command."""
    words = list(args.launch)
    if "--" in words:
        cut = words.index("--")
        before, args.launch = words[:cut], words[cut + 1:]
        if before:
            args.launch_parser.parse_args([*before, args.engine], namespace=args)
            if args.launch:
                raise BadInputError(f"audit: unexpected {' '.join(args.launch[:3])!r} before --")
            args.launch = words[cut + 1:]
    elif words and words[0].startswith("-"):
        args.launch_parser.parse_args([*words, args.engine], namespace=args)
        if args.launch or not args.manifest:
            raise BadInputError(f"audit: {words[0]}: put the launch command after --")
    if args.manifest and args.launch:
        raise BadInputError("audit: --manifest or a launch command after --, not both")
    if args.manifest and (args.env or args.env_file):
        raise BadInputError("audit: --env and --env-file are a launch line's; with --manifest each container's "
                       "environment is the manifest's")
