"""What the commands' parsers share: the types of their number options (a bad value is bad
input, exit 3, through the parser) and the help texts several commands give one option."""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "positive_float", "units", "TRUST", "MAX_SECONDS", "RLIMIT"]

TRUST = "trust this engine variant file (it is code) for the protocol the input names (repeatable)"
"""The help of ``--variant`` on the commands that read a file naming a protocol."""

MAX_SECONDS = ("one wall-clock budget of S seconds for the whole command, from process start (start-up included) "
               "to exit, shared by every scenario and phase: the command ends within S + 0.5 s, what it did not "
               "decide inconclusive (exit 2)")
"""The help of ``--max-seconds`` (:mod:`kvproof.checker.budget`)."""

RLIMIT = ("bound every Z3 query by UNITS of Z3's own resource count instead of by wall-clock seconds: the same answer "
          "on an idle and on a loaded machine (default {default:,}; 0: no resource limit, wall-clock budgets only)")
"""The help of ``--rlimit`` (:class:`kvproof.checker.budget.ResourceLimit`), formatted with its default."""


def positive_int(text: str) -> int:
    """A whole number >= 1 (an argparse ``type``)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {v}")
    return v


def positive_float(text: str) -> float:
    """A number > 0 (an argparse ``type``)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {v}")
    return v


def units(text: str) -> int:
    """A whole number >= 0 of a solver's resource units; ``_`` and ``,`` may group digits (an argparse ``type``)."""
    try:
        v = int(text.replace(",", "_"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of resource units, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {v}")
    return v
