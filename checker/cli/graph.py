"""``kvproof graph SCENARIO``: a small scenario's reachable state graph as DOT or GraphML."""

from __future__ import annotations

import argparse
import sys

from kvproof.checker.cli.common import EXIT_OK, BadInputError, resolve
from kvproof.checker.cli.options import TRUST

__all__ = ["NAME", "OUTPUTS", "add_parser", "run"]

NAME = "graph"
OUTPUTS = (("output", "-o", False, None),)
"""The files ``graph`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""


def add_parser(sub) -> None:
    """Register ``graph`` on the main parser's subcommands."""
    gr = sub.add_parser("graph", help="write a small scenario's state graph (DOT or GraphML)")
    gr.add_argument("scenario", metavar="SCENARIO", help="built-in name or scenario .toml file (at most 10,000 states)")
    gr.add_argument("--format", choices=("dot", "graphml"), default="dot", help="dot (default) or graphml")
    gr.add_argument("-o", "--output", metavar="FILE", help="where (default: standard output)")
    gr.add_argument("--variant", action="append", metavar="FILE.py", help=TRUST)
    gr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write a small scenario's reachable state graph as DOT or GraphML (through networkx)."""
    from kvproof.checker.explicit.coverage import GRAPH_LIMIT, GraphTooBig, state_graph, write_graph
    from kvproof.model.machine import Machine

    sc = resolve(args.scenario)
    machine = Machine(sc.build())
    try:
        g = state_graph(machine, GRAPH_LIMIT)
    except ImportError:
        raise BadInputError("graph needs networkx: pip install 'kvproof[graph]' (or pip install networkx)") from None
    except GraphTooBig:
        raise BadInputError(f"graph: {sc.name} has more than {GRAPH_LIMIT:,} states, the limit for a graph export; "
                       "kvproof check --coverage counts its transitions by action instead") from None
    text = write_graph(g, args.output, args.format)
    if text is not None:
        sys.stdout.write(text)
    else:
        print(f"wrote {args.output}: {g.number_of_nodes():,} states, {g.number_of_edges():,} transitions",
              file=sys.stderr)
    return EXIT_OK
