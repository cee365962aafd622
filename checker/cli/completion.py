"""``kvproof completion SHELL``: a shell completion script (bash, zsh or tcsh), drawn by shtab
from the parser itself (the main parser hands itself to the command: ``args.parser``)."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import EXIT_OK, BadInputError

__all__ = ["NAME", "add_parser", "run"]

NAME = "completion"


def add_parser(sub) -> None:
    """Register ``completion`` on the main parser's subcommands."""
    co = sub.add_parser("completion", help="print a shell completion script (bash, zsh or tcsh)")
    co.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    co.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print a shell completion script (needs the ``completion`` extra: shtab)."""
    try:
        import shtab
    except ImportError:
        raise BadInputError("completion needs shtab: pip install 'kvproof[completion]'") from None
    print(shtab.complete(args.parser, shell=args.shell))
    return EXIT_OK
