"""The reference pages, generated from the code when the site is built (an MkDocs hook,
``hooks:`` in ``mkdocs.yml``).

A page asks for a generated part with a marker line, ``<!-- generated: NAME -->``; the hook
replaces the marker with the Markdown :data:`GENERATORS` makes for ``NAME``, read from kvproof
itself: the command line from its argument parser (:func:`kvproof.checker.cli.build_parser`),
every claim with its docstring from the protocols' registry, the catalogue with the expected
verdicts and state counts of ``traces/expected.toml``, the exit codes from
``checker/outcome.py``, and the file formats from the docstrings and tables of the modules that
read them.  Nothing here is a copy: a marker the hook does not know, or a part it cannot make
(a scenario missing from the expected table, say), fails the build.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import io
import json
import re
import textwrap
import tokenize
import tomllib
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["GENERATORS", "MARKER", "ROOT", "generate", "on_page_markdown", "cli", "claims", "scenarios",
           "exit_codes", "formats", "markdown_of_docstring"]

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


# -- docstrings to Markdown ----------------------------------------------------------------------
def markdown_of_docstring(doc: str | None) -> str:
    """A reStructuredText-flavoured docstring as Markdown: ````x```` and Sphinx roles
    (``:data:`~.mod.NAME```) become code, a paragraph ending in ``::`` introduces a code block."""
    if not doc:
        return ""
    text = inspect.cleandoc(doc)
    text = re.sub(r":[a-z]+:`~?\.?([^`]+)`", lambda m: f"`{m.group(1).split('.')[-1]}`", text)
    text = re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1] if not line.rstrip().endswith(" ::") else line.rstrip()[:-3])
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out).strip()


def _one_line(doc: str | None) -> str:
    """A docstring as one line of a table cell."""
    return _cell(" ".join(markdown_of_docstring(doc).split()))


def _cell(text: str) -> str:
    """Text made safe for a Markdown table cell (and for HTML)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Inline code, whatever backticks ``text`` holds."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# -- the command line ----------------------------------------------------------------------------
def _help(action: argparse.Action, prog: str) -> str:
    """An option's help text with argparse's ``%(default)s`` and friends filled in, as ``--help``
    prints it."""
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    try:
        return text % params
    except (KeyError, TypeError, ValueError):
        return text


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help, as ``kvproof --help`` lists it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _command(lines: list[str], name: str, parser: argparse.ArgumentParser, level: int) -> None:
    lines += [f"{'#' * level} `{parser.prog}`", ""]
    if parser.description:
        lines += [_cell(" ".join(parser.description.split())), ""]
    lines += ["```", parser.format_usage().strip(), "```", ""]
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.choices is not None and action.metavar is None:
            value = "{" + ",".join(map(str, action.choices)) + "}"
        else:
            value = str(action.metavar or (action.dest.upper() if action.option_strings else action.dest))
        if action.option_strings:
            what = ", ".join(_code(o + (f" {value}" if action.nargs != 0 else "")) for o in action.option_strings)
        else:
            what = _code(value)
        rows.append(f"| {what} | {_cell(' '.join(_help(action, parser.prog).split()))} |")
    if rows:
        lines += ["| argument | what it does |", "| --- | --- |", *rows, ""]
    for sub_name, sub in _subparsers(parser).items():
        _command(lines, sub_name, sub, level + 1)


def cli() -> str:
    """Every command of ``kvproof``, its description, usage and arguments, from the parser
    ``kvproof`` itself runs (protocols' own options included)."""
    import os

    from kvproof.checker.cli import build_parser

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # usage lines wrapped the same on every machine
    try:
        parser = build_parser()
        return _cli(parser)
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns


def _cli(parser: argparse.ArgumentParser) -> str:
    commands = _subparsers(parser)
    summaries = _summaries(parser)
    lines = ["| command | what it does |", "| --- | --- |"]
    lines += [f"| [`kvproof {n}`](#kvproof-{n}) | {_cell(summaries.get(n, ''))} |" for n in commands]
    lines.append("")
    for name, sub in commands.items():
        _command(lines, name, sub, 2)
    return "\n".join(lines)


# -- the claims ----------------------------------------------------------------------------------
_AT = {"always": "", "quiescent": ", at quiescence", "fair": ", on every fair path"}
"""Where a claim is judged (:class:`~kvproof.model.framework.Claim`'s ``at``)."""


def _catalogue() -> dict[str, list[Any]]:
    """The built-in scenarios by protocol, in catalogue order."""
    from kvproof.model.scenario import builtins

    out: dict[str, list[Any]] = {}
    for sc in builtins():
        out.setdefault(sc.family, []).append(sc)
    return out


def claims() -> str:
    """Every claim of every registered protocol, with its docstring, its kind and the spec
    classes and scenarios that check it."""
    from kvproof.model.registry import protocols

    titles = {p.name: p.title for p in protocols()}
    lines: list[str] = []
    for family, scs in _catalogue().items():
        seen: dict[str, dict[str, Any]] = {}
        for sc in scs:
            spec = sc.build()
            for c in spec.claims:
                entry = seen.setdefault(c.name, {"claim": c, "classes": [], "scenarios": 0})
                if type(spec).__name__ not in entry["classes"]:
                    entry["classes"].append(type(spec).__name__)
                entry["scenarios"] += 1
        lines += [f"## {titles.get(family, family)} (`{family}`)", "",
                  f"{len(seen)} claims over the protocol's {len(scs)} built-in scenarios.", "",
                  "| claim | kind | checked in |", "| --- | --- | --- |"]
        for name, e in seen.items():
            c = e["claim"]
            kind = c.kind + _AT.get(c.at, f", {c.at}")
            where = f"{e['scenarios']} scenarios ({', '.join(f'`{k}`' for k in e['classes'])})"
            lines.append(f"| [`{name}`](#{family}-{name}) | {kind} | {where} |")
        lines.append("")
        for name, e in seen.items():  # an anchor of its own: two protocols may name a claim alike
            lines += [f"### `{name}` {{ #{family}-{name} }}", "", markdown_of_docstring(e["claim"].doc), ""]
    return "\n".join(lines)


# -- the catalogue -------------------------------------------------------------------------------
def _expected() -> dict[str, Any]:
    return tomllib.loads((ROOT / "traces" / "expected.toml").read_text())


def scenarios() -> str:
    """The built-in scenarios by protocol: title, the claims expected violated, the witnesses
    expected unreachable, and the states, transitions and depth pinned in ``traces/expected.toml``."""
    expected = _expected()
    catalogue = _catalogue()
    missing = [sc.name for scs in catalogue.values() for sc in scs if sc.name not in expected]
    if missing:
        raise ValueError(f"traces/expected.toml has no entry for {', '.join(missing)}")
    total = sum(expected[sc.name]["states"] for scs in catalogue.values() for sc in scs)
    count = sum(len(scs) for scs in catalogue.values())
    claims_n = sum(len(expected[sc.name]["verdicts"]) for scs in catalogue.values() for sc in scs)
    lines = [f"{count} scenarios, {claims_n:,} claims, {total:,} states in all "
             "(`traces/expected.toml`, which `kvproof check` re-checks).", ""]
    for family, scs in catalogue.items():
        lines += [f"## `{family}`: {len(scs)} scenarios", "",
                  "| scenario | what it models | expected violated | states | transitions | depth |",
                  "| --- | --- | --- | ---: | ---: | ---: |"]
        for sc in scs:
            e = expected[sc.name]
            bad = [f"`{c}`" + (" (unreachable)" if v == "unreachable" else "")
                   for c, v in e["verdicts"].items() if v in ("violated", "unreachable")]
            lines.append(f"| `{sc.name}` | {_cell(sc.title)} | {', '.join(bad) or 'none'} | {e['states']:,} | "
                         f"{e['transitions']:,} | {e['depth']} |")
        lines.append("")
    return "\n".join(lines)


# -- exit codes ----------------------------------------------------------------------------------
def _comments(path: Path) -> dict[str, str]:
    """The trailing comment of each ``NAME = value`` line of a module (its source, tokenized)."""
    out: dict[str, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        m = re.match(r"^([A-Z_][A-Z0-9_]*)\s*=", tok.line)
        if tok.type == tokenize.COMMENT and tok.start[1] > 0 and m:
            out[m.group(1)] = tok.string.lstrip("# ").strip()
    return out


def exit_codes() -> str:
    """Every exit code ``checker/outcome.py`` defines, with the meaning it gives the closing line
    (or, where it gives none, the comment that defines it)."""
    from kvproof.checker import outcome

    notes = _comments(Path(inspect.getsourcefile(outcome)))
    rows = []
    for name in outcome.__all__:
        if name.startswith("EXIT_") and isinstance(getattr(outcome, name), int):
            code = getattr(outcome, name)
            meaning = outcome.EXIT_MEANINGS.get(code) or notes.get(name, "")
            rows.append((code, name, meaning))
    lines = ["| code | name | meaning |", "| ---: | --- | --- |"]
    lines += [f"| {code} | `{name}` | {_cell(meaning)} |" for code, name, meaning in sorted(rows)]
    return "\n".join(lines)


# -- file formats --------------------------------------------------------------------------------
def _module_doc(obj: Any) -> str:
    module = inspect.getmodule(obj)
    return markdown_of_docstring(module.__doc__ if module else "")


def _attribute_docs(cls: type) -> dict[str, str]:
    """A dataclass's attribute docstrings (the string literal after each field), from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    out: dict[str, str] = {}
    for node, after in zip(body, body[1:] + [None]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(after, ast.Expr) and isinstance(getattr(after, "value", None), ast.Constant) \
                    and isinstance(after.value.value, str):
                out[node.target.id] = after.value.value
    return out


def _fields_table(cls: type) -> list[str]:
    docs = _attribute_docs(cls)
    lines = ["| key | default | what it is |", "| --- | --- | --- |"]
    for f in fields(cls):
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        shown = ("(required)" if default is MISSING else "(unset)" if default is None
                 else "" if is_dataclass(default) else _code(json.dumps(default)))
        lines.append(f"| `{f.name}` | {_cell(shown)} | {_one_line(docs.get(f.name, ''))} |")
    return lines


def _scenario_format() -> list[str]:
    from kvproof.model import scenario
    from kvproof.model.registry import protocols

    lines = ["## Scenario files (TOML)", "", markdown_of_docstring(scenario.__doc__), ""]
    catalogue = _catalogue()
    for p in protocols():
        lines += [f"### The `{p.name}` protocol's keys", "", _module_doc(p.parse_config), ""]
        config = catalogue[p.name][0].config if p.name in catalogue else None
        if config is None:
            continue
        for f in fields(config):
            value = getattr(config, f.name)
            cls = type(value[0]) if isinstance(value, tuple) and value and is_dataclass(value[0]) else type(value)
            if is_dataclass(cls):
                lines += [f"`{f.name}`: {_one_line(cls.__doc__)}", "", *_fields_table(cls), ""]
    return lines


def _event_log_format() -> list[str]:
    from kvproof.checker.logs import validate as search
    from kvproof.model.registry import protocols

    lines = ["## Event logs (JSONL)", "",
             f"The first line of a log is its header (`\"log\": \"{search.LOG_FORMAT}\"`, "
             f"`\"v\": {search.SCHEMA_VERSION}`); each protocol says what else it holds and which "
             "events it logs.", ""]
    for p in protocols():
        module = p.command("validate")
        if module is None:
            continue
        lines += [f"### The `{p.name}` protocol's events", "", markdown_of_docstring(module.__doc__), "",
                  "| event (the spec action) | fields beyond the common ones |", "| --- | --- |"]
        lines += [f"| `{event}` | {', '.join(f'`{k}`' for k in extra) or 'none'} |"
                  for event, extra in module.FIELDS.items()]
        lines += ["", "Never logged (the search takes them between events): "
                  + ", ".join(f"`{a}`" for a in module.INTERNAL) + ".", ""]
    return lines


def formats() -> str:
    """The files kvproof reads and writes: ITF traces, certificates, event logs, scenario files."""
    from kvproof.checker import traces
    from kvproof.checker.certs import reader
    from kvproof.checker.explicit import checkpoint

    example = json.loads((ROOT / "traces" / "incident__rejected_never_reserves.itf.json").read_text())
    state = example["states"][1]
    lines = ["## Traces (ITF JSON)", "", markdown_of_docstring(traces.__doc__), "",
             f"A stored trace's `#meta` holds {', '.join(f'`{k}`' for k in example['#meta'])}; each state "
             f"holds the spec's fields ({', '.join(f'`{k}`' for k in example['vars'][:6])}, ...) and "
             f"{', '.join(f'`{k}`' for k in state if k.startswith('mbt::'))} "
             "(`traces/incident__rejected_never_reserves.itf.json`).", "",
             "## Certificates (SMT-LIB)", "", markdown_of_docstring(reader.__doc__), "",
             "The three obligations of a fixed-size certificate, each asserted alone:", "",
             "| obligation | assertion (must be unsat) |", "| --- | --- |"]
    lines += [f"| `{name}` | `{reader.STANDARD_ASSERTS[name]}` |" for name in reader.FIXED_OBLIGATIONS]
    lines.append("")
    lines += ["## Search checkpoints (`check --checkpoint`)", "", markdown_of_docstring(checkpoint.__doc__), ""]
    lines += _event_log_format()
    lines += _scenario_format()
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[], str]] = {"cli": cli, "claims": claims, "scenarios": scenarios,
                                            "exit-codes": exit_codes, "formats": formats}
"""What a marker ``<!-- generated: NAME -->`` is replaced with."""


def generate(markdown: str) -> str:
    """``markdown`` with every marker replaced by its generated part; ``KeyError`` naming an
    unknown marker."""
    def part(m: re.Match) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            raise KeyError(f"unknown generated part {name!r}; known: {', '.join(GENERATORS)}")
        return GENERATORS[name]()

    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    """MkDocs' hook: the page's Markdown with its generated parts filled in."""
    return generate(markdown)
