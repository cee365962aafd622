"""The ``kvproof`` command line: :mod:`.commands` (the parser, the explicit commands and exit codes)
and :mod:`.symbolic` (``prove``, ``certify``, ``check --engine bmc|both``).  :func:`build_parser`
is the parser of every command (the docs' CLI reference is generated from it)."""

from kvproof.checker.cli.commands import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MISMATCH, EXIT_OK, EXIT_UNEXPLAINED,
                                          build_parser, entry, main)

__all__ = ["main", "entry", "build_parser", "EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT",
           "EXIT_UNEXPLAINED"]
