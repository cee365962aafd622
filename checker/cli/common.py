"""What the commands of the command line share: exit codes, one-line bad input, the console,
how a scenario is named, the JSON of a check, and the commands a protocol offers."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from kvproof.model.registry import protocols
from kvproof.model.scenario import Scenario, builtin, load_scenario

__all__ = ["EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT", "EXIT_OUT_OF_MEMORY",
           "EXIT_INTERRUPTED", "BadInput", "console", "resolve", "json_reports", "protocol_command"]

EXIT_OK, EXIT_MISMATCH, EXIT_INCONCLUSIVE, EXIT_BAD_INPUT = 0, 1, 2, 3
EXIT_OUT_OF_MEMORY = 4  # the search ran out of memory: one line with the advice (fingerprints, symmetry, workers)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report it
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of the output left (`kvproof show … | head`)


class BadInput(Exception):
    """Input the command cannot use; its message is printed as one line, exit code 3."""


def console(stream=None):
    """Rich console on stdout; a pipe or CI log gets 120 columns and no colour codes.  When the
    reader of the pipe leaves (``kvproof show … | head``), printing raises ``BrokenPipeError``
    for ``main`` to end quietly with exit 141 (rich's own handling exits 1, kvproof's code for
    a verdict that does not match)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")

    stream = stream or sys.stdout
    width = None if stream.isatty() else 120
    return _Console(file=stream, highlight=False, width=width)


def resolve(name: str | Scenario) -> Scenario:
    """A built-in scenario by name, or a scenario file by path (a ``--variant`` file's own
    scenario is passed as it is: ``main`` adds those to the scenarios named)."""
    if isinstance(name, Scenario):
        return name
    if name.endswith(".toml") or os.sep in name or Path(name).is_file():
        return load_scenario(name)
    return builtin(name)


def json_reports(reports) -> dict[str, Any]:
    """The JSON document of ``check --json`` for these scenario reports."""
    return {
        "scenarios": [
            {
                "name": r.scenario.name,
                "complete": r.complete,
                "reason": r.reason,
                "stats": {
                    "states": r.stats.states,
                    "transitions": r.stats.transitions,
                    "depth": r.stats.depth,
                    "quiescent_states": r.stats.quiescent,
                    "seconds": round(r.stats.seconds, 4),
                    "states_per_second": round(r.stats.states_per_second),
                    "visited": r.stats.visited,
                    "bytes_per_state": round(r.stats.bytes_per_state, 1),
                    "collision_probability": r.stats.collision_probability,
                    "symmetry": r.symmetry,
                    "represented_states": r.stats.represented,
                    "reduction": round(r.stats.reduction, 3),
                    "workers": r.stats.workers,
                    "worker_cpu_seconds": list(r.stats.worker_cpu),
                },
                "results": [
                    {
                        "invariant": c.claim,
                        "kind": c.kind,
                        "expected": c.expected,
                        "verdict": c.verdict,
                        "states": r.stats.states,
                        "depth": c.depth if c.depth is not None else r.stats.depth,
                        "seconds": round(r.stats.seconds, 4),
                        "trace": str(c.trace_path) if c.trace_path else None,
                    }
                    for c in r.claims
                ],
            }
            for r in reports
        ]
    }


def protocol_command(name: str):
    """The callable that implements command ``name``, from the one registered protocol that
    offers it (:attr:`~kvproof.model.protocol.Protocol.commands`)."""
    found = [p for p in protocols() if name in p.commands]
    if len(found) != 1:
        offered = ", ".join(p.name for p in found) or "none"
        raise BadInput(f"{name}: expected one protocol to offer it, found {offered}")
    return found[0].command(name)


