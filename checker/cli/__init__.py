"""The ``kvproof`` command line, one module per command (``list_``, ``check``, ``prove``,
``certify``, ``report``, ``show``, ``graph``, ``diff``, ``replay``, ``simulate``, ``conform``,
``audit``, ``validate``, ``completion``: each its ``add_parser(sub)`` and its ``run(args)``),
what they share (:mod:`.common`, :mod:`.options`, :mod:`.outputs`, :mod:`.scenarios`), and
:mod:`.commands`, which builds the parser from them and runs one (:func:`main`, :func:`entry`).  :func:`build_parser` is the parser of
every command (the docs' CLI reference is generated from it)."""

from kvproof.checker.cli.commands import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MISMATCH, EXIT_OK, EXIT_UNEXPLAINED,
                                          build_parser, entry, main)

__all__ = ["main", "entry", "build_parser", "EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT",
           "EXIT_UNEXPLAINED"]
