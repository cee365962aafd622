"""An engine's command-line parser as data, and back: the flag tables ``kvproof audit`` reads a
launch line with when the engine itself is not installed.

:func:`describe` turns an :class:`argparse.ArgumentParser` (the engine's own, built by the
engine's code) into a JSON-able table: the parser's ``prog`` and ``allow_abbrev`` (argparse's
prefix matching), and for every action its option strings, ``dest``, kind (``store``,
``store_true``, ``boolean_optional``, ...), ``nargs``, ``const``, ``default``, ``choices``, the
name of its ``type`` and whether the engine marks it deprecated.  :func:`build` turns such a table
back into an ``argparse`` parser with the same options, kinds, arities and choices, so that the
standard library's own parsing (prefix matching, ``--flag=value``, errors such as "invalid choice"
and "unrecognized arguments") is the same on both paths.  Types other than ``int``, ``float`` and
``str`` are engine code: the rebuilt parser keeps their values as the text given and records
their names (:data:`PLAIN_TYPES`).

This module knows no engine; each protocol's ``gen_flags`` script calls :func:`describe` on its
engine's parser and commits the table, and its launch reader calls :func:`build`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any, Callable

__all__ = ["TABLE_VERSION", "PLAIN_TYPES", "describe", "build", "write_table", "read_table", "refusal",
           "ParserRefused"]

TABLE_VERSION = 1
"""The table format's version (``"format"`` in every table)."""

PLAIN_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str}
"""Types a rebuilt parser applies; any other type name keeps the text given."""

_KINDS = (  # most specific first: engines subclass these
    (argparse.BooleanOptionalAction, "boolean_optional"),
    (argparse._HelpAction, "help"),
    (argparse._VersionAction, "version"),
    (argparse._StoreTrueAction, "store_true"),
    (argparse._StoreFalseAction, "store_false"),
    (argparse._StoreConstAction, "store_const"),
    (argparse._AppendConstAction, "append_const"),
    (argparse._AppendAction, "append"),
    (argparse._CountAction, "count"),
    (argparse._StoreAction, "store"),
)


class _Switch(argparse.Action):
    """A boolean option with spellings that set it false (``BooleanOptionalAction`` and engines'
    variants of it, rebuilt from the table's ``negative`` list)."""

    def __init__(self, option_strings, dest, negative=(), **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.negative = set(negative)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string not in self.negative)


class ParserRefused(Exception):
    """The parser refused the line; the message is the parser's own error line (without the
    usage text)."""


def _kind(action: argparse.Action) -> str:
    for cls, name in _KINDS:
        if isinstance(action, cls):
            return name
    return "custom"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, (set, frozenset, tuple)):
            return _jsonable(sorted(value, key=str) if isinstance(value, (set, frozenset)) else list(value))
        return repr(value)


def _type_name(t: Any) -> str | None:
    if t is None:
        return None
    for name, fn in PLAIN_TYPES.items():
        if t is fn:
            return name
    return getattr(t, "__name__", None) or type(t).__name__


def describe(parser: argparse.ArgumentParser, deprecated: set[str] = frozenset(), **extra: Any) -> dict[str, Any]:
    """The table of ``parser`` (``deprecated``: the dests the engine marks deprecated beyond
    Python's own ``deprecated=``; ``extra``: engine facts recorded with it, e.g. where it came from)."""
    actions = []
    for a in parser._actions:
        kind = _kind(a)
        entry: dict[str, Any] = {"options": list(a.option_strings), "dest": a.dest, "kind": kind}
        if kind == "custom":
            entry["class"] = type(a).__name__
        if kind == "boolean_optional":  # the spellings that set False (--no-x; an engine's --disable-x)
            negative = getattr(a, "negative_option_strings", None)
            entry["negative"] = sorted(negative if negative is not None else
                                       (o for o in a.option_strings if o.startswith("--no-")))
        if a.nargs is not None:
            entry["nargs"] = a.nargs
        if a.const is not None:
            entry["const"] = _jsonable(a.const)
        if a.default is not None and a.default is not argparse.SUPPRESS:
            entry["default"] = _jsonable(a.default)
        elif a.default is argparse.SUPPRESS:
            entry["suppress_default"] = True
        if a.choices is not None:
            # sorted: an engine may build its choices from a set, whose order changes from one
            # process to the next (hash seeds); whether a value is a choice does not depend on it
            entry["choices"] = sorted(_jsonable(list(a.choices)), key=repr)
        if a.type is not None:
            entry["type"] = _type_name(a.type)
        if a.required:
            entry["required"] = True
        if getattr(a, "deprecated", False) or a.dest in deprecated or type(a).__name__.startswith("Deprecated"):
            entry["deprecated"] = True
        actions.append(entry)
    return {"format": TABLE_VERSION, "prog": parser.prog, "allow_abbrev": parser.allow_abbrev,
            "prefix_chars": parser.prefix_chars, **extra, "actions": actions}


def build(table: dict[str, Any], parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
          **kwargs: Any) -> argparse.ArgumentParser:
    """An ``argparse`` parser with the options of ``table`` (help and version options are kept as
    options that take no value and do nothing)."""
    parser = parser_class(prog=table["prog"], allow_abbrev=table["allow_abbrev"],
                          prefix_chars=table["prefix_chars"], add_help=False, exit_on_error=False, **kwargs)
    for e in table["actions"]:
        kw: dict[str, Any] = {"dest": e["dest"]}
        kind = e["kind"]
        if "suppress_default" in e:
            kw["default"] = argparse.SUPPRESS
        elif "default" in e:
            kw["default"] = e["default"]
        if kind in ("help", "version"):
            kw.update(action="store_true", default=argparse.SUPPRESS)
        elif kind == "boolean_optional":
            kw.update(action=_Switch, negative=e.get("negative", []))
        elif kind in ("store_true", "store_false", "count"):
            kw["action"] = kind
        elif kind in ("store_const", "append_const"):
            kw.update(action=kind, const=e.get("const"))
        else:  # store, append, custom: values as their nargs say
            kw["action"] = "append" if kind == "append" else "store"
            if "nargs" in e:
                kw["nargs"] = e["nargs"]
            if kind == "custom" and e.get("nargs") == 0:
                kw.update(action="store_const", const=e.get("const", True))
                kw.pop("nargs")
            if "choices" in e:
                kw["choices"] = e["choices"]
            if e.get("type") in PLAIN_TYPES:
                kw["type"] = PLAIN_TYPES[e["type"]]
        if not e["options"]:
            kw.pop("dest")
            parser.add_argument(e["dest"], **kw)
        else:
            parser.add_argument(*e["options"], **kw)
    return parser


def write_table(table: dict[str, Any], path: Path) -> None:
    """Write ``table`` as sorted, indented JSON (a temporary file renamed into place: never half
    written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_table(path: Path) -> dict[str, Any]:
    """A committed table (``ValueError`` if it is not one of this format)."""
    table = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(table, dict) or table.get("format") != TABLE_VERSION:
        raise ValueError(f"{path}: not a flag table of format {TABLE_VERSION}")
    return table


@contextlib.contextmanager
def refusal():
    """Run a parse; an ``argparse`` error (its ``SystemExit`` after printing the usage, or its
    ``ArgumentError`` with ``exit_on_error=False``) becomes :class:`ParserRefused` with the
    parser's own error line; nothing is printed."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            yield
    except SystemExit as e:
        lines = [x for x in err.getvalue().splitlines() if x.strip()]
        errors = [i for i, x in enumerate(lines) if ": error: " in x]
        text = "\n".join(lines[errors[-1]:]) if errors else (lines[-1] if lines else f"exit {e.code}")
        raise ParserRefused(text.partition(": error: ")[2] or text) from None
    except argparse.ArgumentError as e:
        raise ParserRefused(str(e)) from None
