"""``kvproof list``: the built-in scenarios (and, with ``--claims``, each protocol's claims).
(The module is ``list_``: a module named ``list`` would shadow the built-in in the package.)"""

from __future__ import annotations

import argparse
from typing import Any

from kvproof.checker.cli.common import EXIT_OK, console
from kvproof.model.scenario import builtins

__all__ = ["NAME", "add_parser", "run"]

NAME = "list"


def add_parser(sub) -> None:
    """Register ``list`` on the main parser's subcommands."""
    ls = sub.add_parser("list", help="list the built-in scenarios")
    ls.add_argument("--claims", action="store_true", help="also list every invariant and witness")
    ls.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List the built-in scenarios (and, with ``--claims``, the claims)."""
    out = console()
    scenarios = builtins()
    width = max(len(s.name) for s in scenarios)
    for sc in scenarios:
        out.print(f"{sc.name:<{width}}  {sc.title}", overflow="ignore", crop=False)
    if args.claims:  # each protocol's claims, from its first built-in scenario
        first: dict[str, Any] = {}
        for sc in scenarios:
            first.setdefault(sc.family, sc)
        for family, sc in first.items():
            out.print(f"\nclaims of the {family} protocol ({sc.build().__class__.__name__}):")
            for c in sc.build().claims:
                tag = c.kind if c.at == "always" else f"{c.kind}, at quiescence"
                out.print(f"{c.name}  ({tag})\n    {c.doc}")
    return EXIT_OK
