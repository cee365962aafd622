"""Generate vLLM's flag table from vLLM's own parser: ``python -m kvproof.spec.vllm.gen_flags``
(with ``vllm==0.33.0`` installed) writes ``spec/vllm/flags/0.33.0.json``.

The table is what ``kvproof audit vllm==0.33.0`` reads a launch line with when vLLM is not
installed (:mod:`.launch`); it is generated, never edited by hand: the ``vllm serve`` parser
(``FlexibleArgumentParser`` with ``make_arg_parser``) described by
:func:`kvproof.checker.audit.flagtable.describe`, and ``KVTransferConfig``'s fields with their literal
choices (the validation ``--kv-transfer-config`` gets).  ``tests/test_audit_lines.py`` compares
the table with the installed parser when vLLM is installed, so a stale table fails the suite.
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path

__all__ = ["engine_table", "main", "TABLE_DIR"]

TABLE_DIR = Path(__file__).with_name("flags")
"""Where the committed tables are (one per vLLM version)."""


def _choices(tp) -> tuple[list | None, bool]:
    """The literal values a field's type allows (``None``: any), and whether ``None`` is allowed."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Literal:
        return list(args), False
    if args and type(None) in args:
        inner, _ = _choices(typing.Union[tuple(a for a in args if a is not type(None))]) \
            if len(args) > 2 else _choices(next(a for a in args if a is not type(None)))
        return inner, True
    if args and all(typing.get_origin(a) is typing.Literal for a in args):
        return [x for a in args for x in typing.get_args(a)], False
    return None, False


def engine_table() -> dict:
    """The installed vLLM's ``serve`` parser as a table (vLLM must be importable)."""
    import dataclasses
    import importlib.metadata

    from kvproof.checker.audit.flagtable import describe
    from kvproof.spec.vllm.launch import LAUNCHERS, _vllm, engine_parser

    _, serve = engine_parser(LAUNCHERS[0])
    kv = _vllm("vllm.config.kv_transfer").KVTransferConfig
    hints = typing.get_type_hints(kv, include_extras=False)
    fields = {}
    for f in dataclasses.fields(kv):
        choices, optional = _choices(hints.get(f.name))
        fields[f.name] = {k: v for k, v in (("choices", choices), ("optional", optional or None)) if v is not None}
    return describe(serve, deprecated={a.dest for a in getattr(serve, "_deprecated", ())},
                    engine="vllm", version=importlib.metadata.version("vllm"),
                    source="vllm.entrypoints.cli.serve: the `vllm serve` subparser (FlexibleArgumentParser + "
                           "make_arg_parser); KVTransferConfig from vllm.config.kv_transfer",
                    json_configs={"kv_transfer_config": {
                        "class": "KVTransferConfig", "fields": fields, "requires": {"kv_role": "kv_connector"},
                        "requires_message": {"kv_role": "Please specify kv_role when kv_connector is set, supported "
                                                        "roles are ['kv_producer', 'kv_consumer', 'kv_both']"}}})


def main(argv: list[str] | None = None) -> int:
    """Write the installed vLLM's table to ``flags/VERSION.json``; print its path."""
    from kvproof.checker.audit.flagtable import write_table

    table = engine_table()
    path = TABLE_DIR / f"{table['version']}.json"
    write_table(table, path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
