"""The ``kvproof`` command line: :mod:`.commands` (the parser, the explicit commands and exit codes)
and :mod:`.symbolic` (``prove``, ``certify``, ``check --engine bmc|both``)."""

from kvproof.checker.cli.commands import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MISMATCH, EXIT_OK, EXIT_UNEXPLAINED,
                                          entry, main)

__all__ = ["main", "entry", "EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT", "EXIT_UNEXPLAINED"]
