"""The ``kvproof`` command line, one module per command (``list_``, ``check``, ``prove``,
``certify``, ``report``, ``show``, ``graph``, ``diff``, ``replay``, ``simulate``, ``conform``,
``audit``, ``validate``, ``completion``: each its ``add_parser(sub)`` and its ``run(args)``),
what they share (:mod:`.common`, :mod:`.options`, :mod:`.outputs`, :mod:`.scenarios`), and
:mod:`.commands`, which builds the parser from them and runs one (:func:`main`, :func:`entry`)."""

from kvproof.checker.cli.commands import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MISMATCH, EXIT_OK, EXIT_UNEXPLAINED,
                                          entry, main)

__all__ = ["main", "entry", "EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT", "EXIT_UNEXPLAINED"]
