"""Generate SGLang's flag table from SGLang's own parser: ``python -m kvproof.spec.sglang.gen_flags``
(with ``sglang==0.5.23`` installed) writes ``spec/sglang/flags/0.5.23.json``.

The table is what ``kvproof audit sglang==0.5.23`` reads a launch line with when SGLang is not
installed (:mod:`.launch`); it is generated, never edited by hand: the parser is the one
``prepare_server_args`` builds (``argparse.ArgumentParser(prog="sglang serve")`` and
``ServerArgs.add_cli_args``), described by :func:`kvproof.checker.audit.flagtable.describe`.
``tests/test_audit_lines.py`` compares the table with the installed parser when SGLang is
installed, so a stale table fails the suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["engine_table", "main", "TABLE_DIR"]

TABLE_DIR = Path(__file__).with_name("flags")
"""Where the committed tables are (one per SGLang version)."""


def engine_table() -> dict:
    """The installed SGLang's parser as a table (SGLang must be importable)."""
    import importlib.metadata

    from kvproof.checker.audit.flagtable import describe
    from kvproof.spec.sglang.launch import engine_parser

    version = importlib.metadata.version("sglang")
    return describe(engine_parser(), engine="sglang", version=version,
                    source="sglang.srt.server_args: argparse.ArgumentParser(prog='sglang serve') + "
                           "ServerArgs.add_cli_args, as prepare_server_args builds it")


def main(argv: list[str] | None = None) -> int:
    """Write the installed SGLang's table to ``flags/VERSION.json``; print its path."""
    from kvproof.checker.audit.flagtable import write_table

    table = engine_table()
    path = TABLE_DIR / f"{table['version']}.json"
    write_table(table, path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
