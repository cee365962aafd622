"""Read a vLLM launch line as vLLM reads it.

The launchers (:func:`split`): ``vllm serve [MODEL] ARGS`` (the ``vllm`` command's ``serve``
subcommand), ``python -m vllm.entrypoints.openai.api_server ARGS``, the gRPC server
``python -m vllm.entrypoints.launchers.grpc_server ARGS`` (and its deprecated alias
``vllm.entrypoints.grpc_server``), and Dynamo's ``python -m dynamo.vllm ARGS`` (vLLM's engine
arguments passed through; what vLLM's parser does not take is Dynamo's own, listed as such).

The reading (:func:`read`): with ``vllm==VERSION`` installed, the parser each launcher builds in
0.33.0 (:func:`engine_parser`: ``FlexibleArgumentParser`` with ``make_arg_parser`` for ``serve``
and the API server, ``AsyncEngineArgs.add_cli_args`` with ``--host``/``--port`` for gRPC and
Dynamo), whose ``parse_args`` takes underscore spellings, ``--config FILE.yaml``, the dotted JSON
forms (``--kv-transfer-config.kv_role kv_both``) and validates ``--kv-transfer-config`` as a
``KVTransferConfig``; then ``validate_parsed_serve_args`` for ``serve`` and the API server.
Otherwise the table generated from the ``serve`` parser (``flags/VERSION.json``, by
:mod:`.gen_flags`), with ``FlexibleArgumentParser``'s rewriting of the words done as it does it
(:func:`flexible_words`) and ``KVTransferConfig``'s fields and choices from the table.  A line the
parser refuses raises :class:`~kvproof.checker.audit.flagtable.ParserRefused` with the parser's message.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import re
from pathlib import Path
from typing import Any

from kvproof.checker.audit.common import Reading
from kvproof.checker.audit.flagtable import ParserRefused, build, read_table, refusal

__all__ = ["LAUNCHERS", "split", "engine_installed", "engine_parser", "engine_reading", "table_reading",
           "flexible_words", "read", "table_path", "ParserRefused"]

LAUNCHERS = ("vllm serve", "python -m vllm.entrypoints.openai.api_server",
             "python -m vllm.entrypoints.launchers.grpc_server", "python -m dynamo.vllm")
"""The launch commands read."""

_MODULES = {"vllm.entrypoints.openai.api_server": LAUNCHERS[1], "vllm.entrypoints.launchers.grpc_server": LAUNCHERS[2],
            "vllm.entrypoints.grpc_server": LAUNCHERS[2], "dynamo.vllm": LAUNCHERS[3]}
_TABLES = Path(__file__).with_name("flags")
_CONFIG_DESTS = ("kv_transfer_config",)  # JSON settings whose keys the audit reads


def split(words: list[str]) -> tuple[str, list[str]] | None:
    """(launcher, its arguments) of a launch command after its environment prefix, or ``None``."""
    for i, w in enumerate(words):
        if (w == "vllm" or w.endswith("/vllm")) and i + 1 < len(words) and words[i + 1] == "serve":
            return LAUNCHERS[0], words[i + 2:]
        if w == "-m" and i + 1 < len(words) and words[i + 1] in _MODULES and i > 0 \
                and "python" in words[i - 1].rsplit("/", 1)[-1]:
            return _MODULES[words[i + 1]], words[i + 2:]
    return None


def engine_installed(version: str) -> bool:
    """``vllm==version`` is installed here."""
    try:
        return importlib.metadata.version("vllm") == version
    except importlib.metadata.PackageNotFoundError:
        return False


def _vllm(name: str):
    import logging
    import warnings

    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "CRITICAL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(name)
    logging.getLogger("vllm").setLevel(logging.CRITICAL)
    return module


def engine_parser(launcher: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """(the parser to call, the parser holding the options) as ``launcher`` builds it in the
    installed vLLM: for ``vllm serve``, the ``vllm`` command's parser and its ``serve``
    subparser."""
    flex = _vllm("vllm.utils.argparse_utils").FlexibleArgumentParser
    if launcher in (LAUNCHERS[0], LAUNCHERS[1]):
        make_arg_parser = _vllm("vllm.entrypoints.common.cli_args").make_arg_parser
        if launcher == LAUNCHERS[1]:
            p = make_arg_parser(flex(description="vLLM OpenAI-Compatible RESTful API server."))
            return p, p
        # the `vllm` command with its `serve` subparser, as ServeSubcommand.subparser_init adds it
        # (vllm/entrypoints/cli/serve.py imports the HTTP server stack, watchfiles included, so
        # the two lines are repeated here rather than imported)
        top = flex(prog="vllm")
        subs = top.add_subparsers(required=False, dest="subparser")
        serve = make_arg_parser(subs.add_parser("serve", usage="vllm serve [model_tag] [options]"))
        return top, serve
    engine_args = _vllm("vllm.engine.arg_utils").AsyncEngineArgs
    p = flex(description="vLLM gRPC Server")
    p.add_argument("--host", type=str, default="0.0.0.0")
    p.add_argument("--port", type=int, default=50051)
    p = engine_args.add_cli_args(p)
    return p, p


def _observe(parser: argparse.ArgumentParser, seen: dict[str, str]) -> None:
    """Record the text each JSON setting of :data:`_CONFIG_DESTS` was given as (after the
    parser's own rewriting), so the keys written can be told from the defaults."""
    for a in parser._actions:
        if a.dest in _CONFIG_DESTS and a.type is not None:
            real = a.type

            def typed(text, real=real, dest=a.dest):
                seen[dest] = text
                return real(text)

            a.type = typed


def _values(ns: argparse.Namespace, holder: argparse.ArgumentParser, seen: dict[str, str]) -> dict[str, Any]:
    defaults = {a.dest: a.default for a in holder._actions}
    out = {k: v for k, v in sorted(vars(ns).items()) if k in defaults and v != defaults[k] and k != "model_tag"}
    if getattr(ns, "model_tag", None):
        out["model"] = ns.model_tag
    for dest in _CONFIG_DESTS:
        text = seen[dest] if dest in seen else out.get(dest)
        if not isinstance(text, str):
            continue
        try:
            out[dest] = json.loads(text)
        except json.JSONDecodeError as e:  # the engine's parser refuses it too: bad input, one line
            raise ParserRefused(f"argument --{dest.replace('_', '-')}: invalid JSON ({e.msg})") from None
    return out


def _options(parser: argparse.ArgumentParser) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in parser._actions:
        if a.option_strings and a.dest not in out:
            out[a.dest] = next((o for o in a.option_strings if o.startswith("--")), a.option_strings[0])
    return out


def _config(argv: list[str]) -> list[str]:
    return [argv[argv.index("--config") + 1]] if "--config" in argv[:-1] else []


def engine_reading(argv: list[str], launcher: str) -> Reading:
    """The installed vLLM's reading of ``argv`` by ``launcher``'s parser."""
    top, holder = engine_parser(launcher)
    seen: dict[str, str] = {}
    _observe(holder, seen)
    rest: list[str] = []
    words = ["serve", *argv] if launcher == LAUNCHERS[0] else list(argv)
    if launcher == LAUNCHERS[3]:  # Dynamo's own flags are left over, not refused
        base = type(top)

        class _Known(base):  # the engine's parser; the words it does not take are kept, not refused
            def parse_known_args(self, args=None, namespace=None):
                ns, extra = base.parse_known_args(self, args, namespace)
                rest.extend(extra)
                return ns, []

        top.__class__ = _Known
    with refusal():
        try:
            ns = top.parse_args(words)
            if launcher in (LAUNCHERS[0], LAUNCHERS[1]):
                _vllm("vllm.entrypoints.common.cli_args").validate_parsed_serve_args(ns)
        except (ValueError, TypeError, OSError, AssertionError) as e:
            raise ParserRefused(str(e) or type(e).__name__) from None
    return Reading(_values(ns, holder, seen), rest, _config(argv), [],
                   f"vllm {importlib.metadata.version('vllm')}'s own parser (installed)", options=_options(holder))


def table_path(version: str) -> Path:
    """The committed table of ``vllm==version``."""
    return _TABLES / f"{version}.json"


def flexible_words(words: list[str], has_option) -> list[str]:
    """The words as vLLM 0.33.0's ``FlexibleArgumentParser.parse_args`` rewrites them before
    argparse sees them: ``serve --model M`` moved to the model position, ``--config FILE.yaml``
    pulled in, underscores in a flag's name as dashes, ``-O3`` as ``--optimization-level 3``, and
    the dotted forms (``--kv-transfer-config.kv_role kv_both``, ``KEY+`` appending) gathered into
    one JSON value.  A test compares it with vLLM's own on the test table."""
    args = list(words)
    if args and args[0] == "serve":
        idx = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
        if idx is not None:
            tag, rest = (args[idx + 1], idx + 2) if args[idx] == "--model" else (args[idx][len("--model="):], idx + 1)
            args = ["serve", tag, *args[1:idx], *args[rest:]]
        if (len(args) > 1 and args[1].startswith("-") and not any(re.match(r"^--config(=.+|$)", a) for a in args)
                and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)):
            raise ParserRefused("`model` should be provided as the first positional argument when using `vllm serve`. "
                                "i.e. `vllm serve <model> --<arg> <value>`.")
    if "--config" in args:
        args = _pull_config(args, has_option)
    pattern = re.compile(r"(?<=--)[^\.]*")
    out: list[str] = []
    for i, a in enumerate(args):
        if a.startswith("--"):
            key, eq, value = a.partition("=")
            out.append(pattern.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + eq + value)
        elif a.startswith("-O") and a != "-O":
            out += ["--optimization-level", a[3:] if a[2] == "=" else a[2:]]
        elif a == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(a)
    dicts: dict[str, dict] = {}
    delete: set[int] = set()
    for i, a in enumerate(out):
        if i in delete or not (a.startswith("-") and "." in a):
            continue
        if "=" in a:
            a, value = a.split("=", 1)
            if "." not in a:
                continue
        else:
            if i + 1 >= len(out):
                raise ParserRefused(f"{a}: expected a value")
            value = out[i + 1]
            delete.add(i + 1)
        if a.endswith("+"):
            a, value = a[:-1], json.dumps(value.split(","))
        key, *keys = a.split(".")
        try:
            v: Any = json.loads(value)
        except ValueError:
            v = value
        for k in reversed(keys):
            v = {k: v}
        _update(dicts.setdefault(key, {}), v)
        delete.add(i)
    out = [a for i, a in enumerate(out) if i not in delete]
    for key, value in dicts.items():
        out += [key, json.dumps(value)]
    return out


def _update(original: dict, update: dict) -> None:
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _update(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


def _pull_config(args: list[str], has_option) -> list[str]:
    import yaml

    if args.count("--config") > 1:
        raise ParserRefused("More than one config file specified!")
    index = args.index("--config")
    if index == len(args) - 1:
        raise ParserRefused("No config file specified! Please check your command-line arguments.")
    path = args[index + 1]
    if path.split(".")[-1] not in ("yaml", "yml"):
        raise ParserRefused(f"Config file must be of a yaml/yml type. {path.split('.')[-1]} supplied")
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ParserRefused(f"--config {path}: {type(e).__name__}: {e}") from None
    if not isinstance(config, dict):
        raise ParserRefused(f"--config {path}: expected a mapping of options")
    extra: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                extra.append(f"--{key}")
            elif has_option(f"--no-{key}"):
                extra.append(f"--no-{key}")
        elif isinstance(value, list):
            extra += [f"--{key}", *(str(x) for x in value)] if value else []
        elif isinstance(value, dict):
            extra += [f"--{key}", json.dumps(value)]
        else:
            extra += [f"--{key}", str(value)]
    if args[0].startswith("-"):
        return extra + args[:index] + args[index + 2:]
    if args[0] == "serve":
        in_cli = len(args) > 1 and not args[1].startswith("-")
        if not in_cli and "--model" not in extra:
            raise ParserRefused("No model specified! Please specify model either as a positional argument or in a "
                                "config file.")
        if in_cli:
            return args[:2] + extra + args[2:index] + args[index + 2:]
        return args[:1] + extra + args[1:index] + args[index + 2:]
    return [args[0]] + extra + args[1:index] + args[index + 2:]


def _check_json(table: dict[str, Any], values: dict[str, Any]) -> None:
    """``KVTransferConfig``'s validation as the table records it: a JSON object, known fields,
    their choices, and ``kv_role`` with ``kv_connector``."""
    for dest, spec in table.get("json_configs", {}).items():
        if dest not in values:
            continue
        v = values[dest]
        option = "--" + dest.replace("_", "-")
        if not isinstance(v, dict):
            raise ParserRefused(f"argument {option}: expected a JSON object for {spec['class']}")
        for key, x in v.items():
            field = spec["fields"].get(key)
            if field is None:
                raise ParserRefused(f"argument {option}: 1 validation error for {spec['class']}\n{key}\n  "
                                    f"Unexpected keyword argument")
            if "choices" in field and x not in field["choices"] and not (x is None and field.get("optional")):
                raise ParserRefused(f"argument {option}: {key}: {x!r} is not one of {field['choices']}")
        for need, given in spec.get("requires", {}).items():
            if v.get(given) is not None and v.get(need) is None:
                raise ParserRefused(f"argument {option}: {spec['requires_message'][need]}")


def table_reading(argv: list[str], version: str, launcher: str) -> Reading:
    """The reading of ``argv`` by the table generated from ``vllm==version``'s ``serve`` parser."""
    path = table_path(version)
    table = read_table(path)
    parser = build(table)
    how = f"the flag table generated from vllm {version}'s parser ({path.name})"
    rest: list[str] = []
    words = ["serve", *argv] if launcher == LAUNCHERS[0] else list(argv)
    with refusal():
        if "--config" in words:
            try:
                import yaml  # noqa: F401
            except ImportError:
                return Reading({}, [], [], [f"--config: PyYAML is not installed, the file is not read"], how)
        words = flexible_words(words, lambda o: o in parser._option_string_actions)
        if words[:1] == ["serve"]:
            words = words[1:]
        if launcher == LAUNCHERS[3]:
            ns, rest = parser.parse_known_args(words)
        else:
            ns = parser.parse_args(words)
        values = _values(ns, parser, {})
        _check_json(table, values)
    return Reading(values, rest, _config(argv), [], how, options=_options(parser))


def read(argv: list[str], version: str, launcher: str, reader: str = "auto") -> Reading:
    """The reading of ``argv`` by ``reader``: ``engine`` (the installed vLLM), ``table`` (the
    generated table of ``version``) or ``auto`` (the engine when ``vllm==version`` is installed)."""
    if reader == "engine" or (reader == "auto" and engine_installed(version)):
        reading = engine_reading(argv, launcher)
    else:
        reading = table_reading(argv, version, launcher)
        if launcher in (LAUNCHERS[2], LAUNCHERS[3]):
            reading.notes.append("read with the `vllm serve` table: its server options are a superset of this "
                                 "launcher's")
    return reading
