"""``python -m kvproof``: the command line."""

from kvproof.checker.cli import entry

entry()
