"""The ``kvproof`` command line.

Commands are verbs: ``list``, ``check``, ``prove``, ``certify``, ``report``, ``show``, ``graph``,
``diff``, ``replay``, ``simulate``, ``conform``, ``audit``, ``validate``, ``completion``; each is
one module of this package (:data:`COMMANDS`) with its ``add_parser(sub)`` and its
``run(args)``, and this module builds the parser from them and runs one (:func:`main`,
:func:`entry`).  Exit codes:

* 0 - every verdict matches its expectation (``replay``: the violation reproduces);
* 1 - a verdict does not (an unexpected violation, or an expected one not found);
* 2 - a result is inconclusive (a limit cut the search short: ``--max-states``, ``--max-depth``,
  or ``--max-seconds``, one time budget for the whole command, from process start to exit:
  :mod:`kvproof.checker.budget`);
* 3 - bad input: an unknown scenario or claim, a malformed scenario file, a trace that does not
  fit the spec, an output path that cannot be written (checked before any search), an error in
  an engine variant's code (named by file and line).  One line on stderr names the problem;
  nothing is left half-written;
* 4 - out of memory (one line with the advice: fingerprints, symmetry, workers);
* 5 - ``validate`` only: a line of the log is unexplained (an event lost, duplicated or
  reordered) and no violation came before it (a violation wins: exit 1);
* 130 - interrupted (Ctrl-C), worker processes included.

``simulate`` exits 1 when a response read another request's KV (0 with ``--report-only``);
``replay``, ``conform`` and ``diff`` exit 1 when a trace does not reproduce or the traces differ.
Every run ends with one closing line (:class:`~.common.Summary`; the ``summary`` object of
``--json``): what ran, how many claims matched, did not, or are inconclusive, and what the exit
code means.

Files are data: a trace, certificate or scenario file that names a protocol other than a
built-in one is refused unless the variant file is passed explicitly with ``--variant FILE.py``
(the file is code: :mod:`kvproof.model.registry`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
from typing import Sequence

from kvproof.checker.cli import (audit, certify, check, completion, conform, diff, graph, list_, prove, replay,
                                 report, show, simulate, validate)
from kvproof.checker.cli.common import (EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED,
                                        EXIT_MISMATCH, EXIT_OK, EXIT_OUT_OF_MEMORY, EXIT_UNEXPLAINED, BadInput,
                                        Summary, Tally)
from kvproof.checker.cli.outputs import check_outputs
from kvproof.checker.symbolic.watchdog import BudgetSpent
from kvproof.model.registry import trust_variant, variant_error, variant_scope
from kvproof.model.scenario import load_variant

# The engines, renderers and solvers are imported by the command that uses them, so that
# ``kvproof --help`` and ``kvproof list`` load neither Z3 nor numpy.

__all__ = ["main", "entry", "build_parser", "COMMANDS", "EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE",
           "EXIT_BAD_INPUT", "EXIT_OUT_OF_MEMORY", "EXIT_UNEXPLAINED", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]

COMMANDS = {m.NAME: m for m in (list_, check, prove, certify, report, show, graph, diff, replay, simulate, conform,
                                audit, validate, completion)}
"""Every command's module by the command's name, in the order ``kvproof --help`` lists them.  A
module has ``NAME``, ``add_parser(sub)`` (its subparser, whose ``func`` default is its ``run``)
and ``run(args)`` (the exit code); it may have ``OUTPUTS`` (the files it writes, checked before
it starts), ``VARIANT_SCENARIOS`` (a ``--variant`` file's own ``SCENARIO`` joins the scenarios
named) and ``prepare(args)`` (called on the parsed arguments before the budget starts)."""


class _Parser(argparse.ArgumentParser):
    """argparse with kvproof's bad-input exit (3; argparse's own 2 means "inconclusive" here),
    the subcommand named once, and a suggestion for a misspelt choice (``kvproof chek``)."""

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's; a subcommand's parser refuses a mistyped option itself, naming the
        closest of its own options (``--max-staets``: ``did you mean --max-states?``), where
        argparse would leave it to the top parser, which knows none of them."""
        namespace, extras = super().parse_known_args(args, namespace)
        if self.prog != "kvproof":
            from kvproof.model.scenario import did_you_mean

            options = [o for a in self._actions for o in a.option_strings]
            for word in extras:
                if word.startswith("-"):
                    self.error(f"unrecognized argument: {word}{did_you_mean(word.partition('=')[0], options)}")
        return namespace, extras

    def error(self, message: str) -> None:
        import re

        from kvproof.model.scenario import did_you_mean

        if self.prog == "kvproof" and "arguments are required: command" in message:
            sys.stderr.write(self.format_usage())  # a bare ``kvproof``: its usage, then the one line
            message = "no command given (kvproof --help says what each does)"
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            message += did_you_mean(m.group(1), [c.strip(" '") for c in m.group(2).split(",")])
        where = "" if self.prog == "kvproof" else f"{self.prog}: "  # "kvproof: error: kvproof: ..." once
        raise BadInput(f"{where}{message}")


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a checkout without metadata)."""
    from importlib import metadata

    try:
        return metadata.version("kvproof")
    except metadata.PackageNotFoundError:
        return "unknown (no installed metadata)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command (:data:`COMMANDS`, each adding its own)."""
    p = _Parser(prog="kvproof", description="Model-check the PD-disaggregated KV page lifecycle.")
    p.add_argument("--version", action="version", version=f"kvproof {_version()}")
    p.set_defaults(parser=p)  # for ``completion``, which draws its script from the whole parser
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    """The parser, built once per process (16 ms; parsing does not change it)."""
    return build_parser()


def _trust_variants(args: argparse.Namespace) -> None:
    """Run the ``--variant`` files the user passed (they are code), so that scenarios, traces
    and certificates naming their classes can be read; on ``check``, ``report`` and ``prove``
    each file's own ``SCENARIO`` joins the scenarios named (and only those are checked)."""
    variants = getattr(args, "variant", None) or []
    own = []
    for v in variants:
        module = trust_variant(v)
        if getattr(module, "SCENARIO", None) is not None:
            own.append(load_variant(v))
    if getattr(COMMANDS[args.command], "VARIANT_SCENARIOS", False) and variants:
        args.scenarios = [*args.scenarios, *own]
        if not args.scenarios:
            raise BadInput(f"--variant {variants[0]}: the file has no SCENARIO; name the scenario files that use it")


_ONE_LINE = (("kvproof.checker.cli.common", "BadInput"), ("kvproof.model.scenario", "ScenarioError"),
             ("kvproof.model.registry", "ProtocolError"), ("kvproof.model.expr", "SpecError"),
             ("kvproof.checker.traces", "TraceError"), ("kvproof.checker.explicit.ray_backend", "RayUnavailable"),
             ("kvproof.checker.explicit.native", "NativeUnavailable"),
             ("kvproof.checker.certs.reader", "CertificateError"))


def _is_one_line(e: BaseException) -> bool:
    """``e`` is bad input reported in one line: an error of one of the :data:`_ONE_LINE` kinds
    (a module that was never imported cannot have raised its error, so none is imported here)."""
    for module, name in _ONE_LINE:
        m = sys.modules.get(module)
        if m is not None and isinstance(e, getattr(m, name)):
            return True
    return False


_OUT_OF_MEMORY = ("kvproof: error: out of memory: store states as fingerprints (--visited fingerprint, 8 bytes "
                  "a state), explore one state per orbit (--symmetry), or split the visited set over "
                  "processes or machines (--workers N, --backend ray)")


def main(argv: Sequence[str] | None = None, *, started: float | None = None, enforce: bool = False) -> int:
    """Run the command line; returns the exit code (0-5, 130 when interrupted, 141 when the reader
    of the output left).

    ``--max-seconds`` counts from ``started`` (a ``time.perf_counter()`` reading; default: this
    call); with ``enforce`` (the console command: :func:`entry`) a backstop also stops the call
    shortly after the budget's end, whatever runs then (:mod:`kvproof.checker.budget`), exit 2."""
    return _main(argv, started, enforce, [])


def _main(argv: Sequence[str] | None, started: float | None, enforce: bool, parsed: list) -> int:
    """:func:`main`; the parsed arguments are appended to ``parsed``."""
    called = time.perf_counter()
    parser = _parser()
    args = None
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help
            return e.code if isinstance(e.code, int) else Tally(bad_input=1).exit_code
        module = COMMANDS[args.command]
        if hasattr(module, "prepare"):
            module.prepare(args)
        args.budget = _budget(args, called if started is None else started)
        parsed.append(args)
        backstop = args.budget.backstop() if enforce and args.budget is not None else contextlib.nullcontext()
        with backstop, variant_scope():  # the variants trusted by this command only
            try:
                check_outputs(args, getattr(module, "OUTPUTS", ()))
                _trust_variants(args)
                return args.func(args)
            except Exception as e:  # an error in a user's engine variant is bad input: one line
                if _is_one_line(e) or isinstance(e, BrokenPipeError):
                    raise
                message = None if isinstance(e, MemoryError) else variant_error(e)
                if message is None:
                    raise
                raise BadInput(message) from None
    except MemoryError:
        print(_OUT_OF_MEMORY, file=sys.stderr)
        return EXIT_OUT_OF_MEMORY
    except BrokenPipeError:  # `kvproof show … | head`: the reader left; say nothing more
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as e:
        if not _is_one_line(e):
            if not isinstance(e, OSError):
                raise
            where = f"{e.filename}: " if e.filename else ""  # the disk filled up, a folder went away mid-run
            print(f"kvproof: error: {where}{e.strerror or _one_line(e)}", file=sys.stderr)
            return Tally(bad_input=1).exit_code
        print(f"kvproof: error: {_one_line(e)}", file=sys.stderr)
        return Tally(bad_input=1).exit_code
    except KeyboardInterrupt:
        print("kvproof: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BudgetSpent as e:
        return _out_of_budget(args, e.after_output)


def _budget(args: argparse.Namespace, started: float):
    """The command's ``--max-seconds`` budget from ``started`` (``None`` without the flag)."""
    seconds = getattr(args, "max_seconds", None)
    if seconds is None:
        return None
    from kvproof.checker.budget import Budget

    return Budget(seconds, started)


def _out_of_budget(args: argparse.Namespace, after_output: bool = False) -> int:
    """The backstop stopped the command: its closing line (the ``summary`` of ``--json``;
    nothing with ``--quiet``), exit 2.  With ``--json`` after the command had written its
    document (``after_output``), nothing is added to it: the line goes to stderr instead."""
    meaning = "inconclusive: the command was stopped before it reported its verdicts"
    summary = Summary(args.command, args.budget.line(), 0, 0, 0, Tally(inconclusive=1).exit_code, meaning)
    try:
        if getattr(args, "json", False) and after_output:
            print(f"kvproof {args.command}: {args.budget.line()}; exit {summary.exit_code}: {meaning}",
                  file=sys.stderr, flush=True)
        elif getattr(args, "json", False):
            print(json.dumps({"summary": summary.to_json()}, indent=2), flush=True)
        elif not getattr(args, "quiet", False):
            print(f"\nkvproof {args.command}: {args.budget.line()}; exit {summary.exit_code}: {meaning}", flush=True)
    except BrokenPipeError:
        _silence_stdout()
    return summary.exit_code


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush at exit does not
    fail again with a second BrokenPipeError."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _one_line(e: BaseException) -> str:
    """An error message on one line, at most 1,000 characters."""
    text = " ".join(str(e).split())
    return text if len(text) <= 1000 else text[:997] + "..."


def entry() -> None:
    """Console-script entry point (also ``python -m kvproof``): ``--max-seconds`` counts from the
    process's start, and is enforced (:func:`main`); with it, the process then exits without
    tearing the interpreter down (:func:`_exit_now`), which after a large search takes a tenth
    of a second or more that the budget would otherwise not cover."""
    from kvproof.checker.budget import process_started

    parsed: list = []
    code = _main(None, process_started(), True, parsed)
    if parsed and parsed[0].budget is not None:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """End the process with ``code`` now: the exit handlers run (``atexit``: temporary folders,
    multiprocessing's children) and the output is flushed, but the objects are not freed one by
    one, nor modules torn down."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said
            pass
    os._exit(code)
