"""Read an SGLang launch line as SGLang reads it.

The launchers (:func:`split`): ``python -m sglang.launch_server ARGS``, ``sglang serve [MODEL]
ARGS`` (``serve``'s own ``--model-type`` taken out, a first positional word is
``--model-path``, as ``sglang/cli/serve.py`` does) and Dynamo's ``python -m dynamo.sglang ARGS``
(SGLang's arguments passed through; what SGLang's parser does not take is Dynamo's own and listed
as such).

The reading (:func:`read`): with ``sglang==VERSION`` installed, the parser ``prepare_server_args``
builds (``argparse.ArgumentParser(prog="sglang serve")`` with ``ServerArgs.add_cli_args``), its
``ConfigArgumentMerger`` for ``--config FILE.yaml``, and ``ServerArgs.from_cli_args``
(:func:`engine_reading`); otherwise the table generated from that parser
(``flags/VERSION.json``, by :mod:`.gen_flags`) rebuilt by :func:`kvproof.checker.audit.flagtable.build`,
with the config merge done as SGLang's merger does it (:func:`table_reading`).  A line the parser
refuses raises :class:`~kvproof.checker.audit.flagtable.ParserRefused` with the parser's own message.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any

from kvproof.checker.audit.common import Reading
from kvproof.checker.audit.flagtable import ParserRefused, build, read_table, refusal

__all__ = ["LAUNCHERS", "split", "engine_parser", "engine_installed", "engine_reading", "table_reading", "read",
           "table_path", "ParserRefused"]

LAUNCHERS = ("python -m sglang.launch_server", "sglang serve", "python -m dynamo.sglang")
"""The launch commands read (any ``python``/``python3`` path; ``sglang`` may be a path)."""

_TABLES = Path(__file__).with_name("flags")


def split(words: list[str]) -> tuple[str, list[str]] | None:
    """(launcher, SGLang's arguments) of a launch command after its environment prefix, or
    ``None`` when it is none of :data:`LAUNCHERS`.  ``sglang serve``'s own normalisation is applied
    (``--model-type`` removed, a positional model becomes ``--model-path``)."""
    for i, w in enumerate(words):
        if w == "-m" and i + 1 < len(words) and words[i - 1:i] and "python" in words[i - 1].rsplit("/", 1)[-1]:
            if words[i + 1] == "sglang.launch_server":
                return LAUNCHERS[0], words[i + 2:]
            if words[i + 1] == "dynamo.sglang":
                return LAUNCHERS[2], words[i + 2:]
        if (w == "sglang" or w.endswith("/sglang")) and i + 1 < len(words) and words[i + 1] == "serve":
            rest: list[str] = []
            args = words[i + 2:]
            j = 0
            while j < len(args):  # sglang/cli/serve.py: _extract_model_type_override
                if args[j] == "--model-type" and j + 1 < len(args):
                    j += 2
                    continue
                if args[j].startswith("--model-type="):
                    j += 1
                    continue
                rest.append(args[j])
                j += 1
            if rest and not rest[0].startswith("-"):  # _normalize_positional_model_path
                rest = ["--model-path", *rest]
            return LAUNCHERS[1], rest
    return None


def engine_installed(version: str) -> bool:
    """``sglang==version`` is installed here."""
    try:
        return importlib.metadata.version("sglang") == version
    except importlib.metadata.PackageNotFoundError:
        return False


def _server_args():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("sglang.srt.server_args")


def engine_parser() -> argparse.ArgumentParser:
    """The parser ``prepare_server_args`` builds (SGLang must be importable)."""
    parser = argparse.ArgumentParser(prog="sglang serve")
    _server_args().ServerArgs.add_cli_args(parser)
    return parser


def _values(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The parsed values that differ from the parser's defaults."""
    defaults = {a.dest: a.default for a in parser._actions}
    return {k: v for k, v in sorted(vars(ns).items()) if k in defaults and v != defaults[k]}


def _options(parser: argparse.ArgumentParser) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in parser._actions:
        if a.option_strings and a.dest not in out:
            out[a.dest] = next((o for o in a.option_strings if o.startswith("--")), a.option_strings[0])
    return out


def _config_path(argv: list[str]) -> str | None:
    return argv[argv.index("--config") + 1] if "--config" in argv and argv.index("--config") + 1 < len(argv) else None


def _unread_config(argv: list[str], values: dict[str, Any]) -> list[str]:
    """``--config`` given in a form SGLang's merger does not see (it merges only ``--config
    FILE`` as two words): the file is stored, never read."""
    if "config" in values and "--config" not in argv:
        return [f"--config={values['config']} (SGLang merges a config file only as `--config FILE`: this one is "
                f"not read by SGLang, nor by kvproof)"]
    return []


def engine_reading(argv: list[str], dynamo: bool = False) -> Reading:
    """The installed SGLang's reading of ``argv``: ``ConfigArgumentMerger`` when ``--config`` is
    a word of it, the parser, ``ServerArgs.from_cli_args`` (``dynamo``: the words the parser does
    not take are Dynamo's own)."""
    sa = _server_args()
    parser = engine_parser()
    config = _config_path(argv)
    with refusal():
        try:
            if "--config" in argv:
                merger = importlib.import_module("sglang.srt.utils.server_args_config_parser")
                argv = merger.ConfigArgumentMerger(parser).merge_config_with_args(list(argv))
        except (ValueError, OSError) as e:
            raise ParserRefused(f"--config: {e}") from None
        except Exception as e:  # yaml's own errors
            raise ParserRefused(f"--config {config}: {type(e).__name__}: {e}") from None
        ns, rest = parser.parse_known_args(argv) if dynamo else (parser.parse_args(argv), [])
    sa.ServerArgs.from_cli_args(ns)  # the record SGLang builds from the namespace (raises if it cannot)
    values = _values(ns, parser)
    return Reading(values, rest, [config] if config else [], _unread_config(argv, values),
                   f"sglang {importlib.metadata.version('sglang')}'s own parser (installed)", options=_options(parser))


def table_path(version: str) -> Path:
    """The committed table of ``sglang==version``."""
    return _TABLES / f"{version}.json"


def _merge_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``--config FILE`` merged as SGLang 0.5.23's ``ConfigArgumentMerger`` does (config values
    first, the command line's after them so they win; ``store_true`` keys as a bare flag when
    true; lists as several words; dicts as JSON).  A test compares it with SGLang's own."""
    import yaml

    if argv.count("--config") > 1:
        raise ParserRefused("--config: Multiple config files specified! Only one allowed.")
    i = argv.index("--config")
    if i == len(argv) - 1:
        raise ParserRefused("--config: No config file specified after --config flag!")
    path = Path(argv[i + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ParserRefused(f"--config: Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ParserRefused(f"--config: Config file not found: {argv[i + 1]}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ParserRefused(f"--config {argv[i + 1]}: {type(e).__name__}: {e}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ParserRefused("--config: Config file must contain a dictionary at root level")

    def keys(a: argparse.Action) -> set[str]:
        return {a.dest} | {o[2:].replace("-", "_") for o in a.option_strings if o.startswith("--")}

    store_true = {k for a in parser._actions if isinstance(a, argparse._StoreTrueAction) for k in keys(a)}
    supported = [a for a in parser._actions
                 if isinstance(a, argparse._StoreTrueAction) or isinstance(a, argparse._StoreAction) or a.nargs is None]
    supported_keys = {k for a in supported for k in keys(a)}
    unsupported = {k: a for a in parser._actions if a.option_strings and a not in supported
                   and "--config" not in a.option_strings and "--help" not in a.option_strings
                   and "-h" not in a.option_strings for k in keys(a) if k not in supported_keys}
    out: list[str] = []
    for key, value in data.items():
        norm = str(key).replace("-", "_")
        if norm in unsupported:
            raise ParserRefused(f"--config: Unsupported config option '{norm}' with action "
                                f"'{type(unsupported[norm]).__name__}'")
        if isinstance(value, bool):
            if norm in store_true:
                out += [f"--{key}"] if value else []
            else:
                out += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            out += [f"--{key}", *(str(x) for x in value)] if value else []
        elif isinstance(value, dict):
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    return out + argv[:i] + argv[i + 2:]


def table_reading(argv: list[str], version: str, dynamo: bool = False) -> Reading:
    """The reading of ``argv`` by the table generated from ``sglang==version``'s parser."""
    path = table_path(version)
    table = read_table(path)
    parser = build(table)
    config = _config_path(argv)
    with refusal():
        if "--config" in argv:
            try:
                import yaml  # noqa: F401
            except ImportError:
                return Reading({}, [], [], [f"--config {config}: PyYAML is not installed, the file is not read"],
                               f"the flag table generated from sglang {version}'s parser ({path.name})")
            argv = _merge_config(parser, list(argv))
        ns, rest = parser.parse_known_args(argv) if dynamo else (parser.parse_args(argv), [])
    values = _values(ns, parser)
    return Reading(values, rest, [config] if config else [], _unread_config(argv, values),
                   f"the flag table generated from sglang {version}'s parser ({path.name})", options=_options(parser))


def read(argv: list[str], version: str, dynamo: bool = False, reader: str = "auto") -> Reading:
    """The reading of ``argv`` by ``reader``: ``engine`` (the installed SGLang, which must be
    ``version``), ``table`` (the generated table), ``auto`` (the engine when it is installed at
    ``version``, else the table of ``version``, else the newest table)."""
    if reader == "engine" or (reader == "auto" and engine_installed(version)):
        return engine_reading(argv, dynamo)
    tables = sorted((p.stem for p in _TABLES.glob("*.json")), key=lambda v: tuple(int(x) for x in v.split(".")))
    use = version if version in tables else tables[-1]
    reading = table_reading(argv, use, dynamo)
    if use != version:
        reading.notes.append(f"no flag table of sglang {version}: read with {use}'s (flags may differ)")
    return reading
