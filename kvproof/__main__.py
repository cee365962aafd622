"""``python -m kvproof``: the command line."""

from kvproof.checker.cli.commands import entry

entry()
