"""The docs site's reference pages are generated from the code (``docs/hooks/reference.py``):
each part names everything its source holds, a part that cannot be made fails the build, and
the site builds with warnings as errors."""

import argparse
import importlib.util
import os
import subprocess
import sys
import tomllib

import pytest

from kvproof.checker import outcome
from kvproof.checker.certs import reader
from kvproof.checker.cli import build_parser
from kvproof.model.registry import protocols
from kvproof.model.scenario import builtins
from tests import user_docs

ROOT = user_docs.ROOT


@pytest.fixture(scope="module")
def ref():
    spec = importlib.util.spec_from_file_location("kvproof_docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _subparsers(parser):
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def test_the_cli_reference_has_every_command_and_every_option(ref):
    text = ref.cli()
    for name, sub in _subparsers(build_parser()).items():
        assert f"## `kvproof {name}`" in text, name
        section = text.split(f"## `kvproof {name}`", 1)[1].split("\n## `kvproof ", 1)[0]
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in section, (name, option)
    assert "| `--arrival-bound S` | vLLM:" in text  # a protocol's own option on a general command


def test_the_claims_reference_has_every_claim_of_every_scenario_with_its_docstring(ref):
    text = ref.claims()
    parts = {}
    for part in ("\n" + text).split("\n## ")[1:]:
        title = part.splitlines()[0]
        parts[title[title.rfind("(`") + 2:-2]] = part
    assert set(parts) == {p.name for p in protocols()}
    claims = {(sc.family, c.name): c for sc in builtins() for c in sc.build().claims}
    assert len(claims) > 40
    for (family, name), c in claims.items():  # each protocol's own docstring, under that protocol
        section = parts[family].split(f"### `{name}` {{ #{family}-{name} }}\n", 1)[1].split("\n### ", 1)[0]
        first = ref.markdown_of_docstring(c.doc).split()[:8]
        assert " ".join(first) in " ".join(section.split()), (family, name)
    assert "| [`held_pages_are_released`](#sglang-held_pages_are_released) | liveness, on every fair path |" in text
    assert "| [`quiescent_holds_nothing`](#sglang-quiescent_holds_nothing) | invariant, at quiescence |" in text


def test_the_scenario_reference_pins_every_scenario_with_its_expected_states(ref):
    text = ref.scenarios()
    expected = tomllib.loads((ROOT / "traces" / "expected.toml").read_text())
    for sc in builtins():
        e = expected[sc.name]
        [row] = [line for line in text.splitlines() if line.startswith(f"| `{sc.name}` |")]
        assert f"| {e['states']:,} | {e['transitions']:,} | {e['depth']} |" in row, sc.name
        for claim, verdict in e["verdicts"].items():
            assert (f"`{claim}`" in row) == (verdict in ("violated", "unreachable")), (sc.name, claim)


def test_a_scenario_missing_from_the_expected_table_fails_the_build(ref, monkeypatch):
    table = ref._expected()
    table.pop("incident")
    monkeypatch.setattr(ref, "_expected", lambda: table)
    with pytest.raises(ValueError, match="traces/expected.toml has no entry for incident"):
        ref.scenarios()


def test_the_exit_codes_are_every_code_outcome_defines(ref):
    text = ref.exit_codes()
    codes = {n: getattr(outcome, n) for n in outcome.__all__ if n.startswith("EXIT_") and n != "EXIT_MEANINGS"}
    assert len(codes) == 8
    for name, code in codes.items():
        [row] = [line for line in text.splitlines() if f"| `{name}` |" in line]
        assert row.startswith(f"| {code} |")
        assert outcome.EXIT_MEANINGS.get(code, "(a comment)") in row or code not in outcome.EXIT_MEANINGS
    assert "| 4 | `EXIT_OUT_OF_MEMORY` | the search ran out of memory" in text  # its defining comment


def test_the_formats_name_what_each_reader_reads(ref):
    text = ref.formats()
    for section in ("## Traces (ITF JSON)", "## Certificates (SMT-LIB)", "## Event logs (JSONL)",
                    "## Scenario files (TOML)"):
        assert section in text
    for name in reader.FIXED_OBLIGATIONS:
        assert f"| `{name}` | `{reader.STANDARD_ASSERTS[name]}` |" in text
    for p in protocols():
        module = p.command("validate")
        if module is None:  # a protocol without event logs (dynamo)
            continue
        for event in module.FIELDS:
            assert f"| `{event}` |" in text, (p.name, event)
    assert "| `release_policy` | `\"immediate\"` | Decode release on abort:" in text  # a flag, its docstring
    assert "| `write_latency_bound` | (unset) |" in text


def test_an_unknown_marker_fails_the_build_and_a_known_one_is_filled(ref):
    with pytest.raises(KeyError, match="unknown generated part 'nope'"):
        ref.generate("# A page\n\n<!-- generated: nope -->\n")
    page = ref.on_page_markdown("# Exit codes\n\n<!-- generated: exit-codes -->\n\nmore\n")
    assert "<!-- generated" not in page and "| 130 | `EXIT_INTERRUPTED` |" in page and page.endswith("more\n")


def test_docstrings_become_markdown(ref):
    doc = """A line with ``code`` and :data:`~.mod.NAME`, :class:`Thing`.

    An example::

        [sizes]
        decode_pages = 3

    After."""
    assert ref.markdown_of_docstring(doc) == (
        "A line with `code` and `NAME`, `Thing`.\n\nAn example:\n\n```\n[sizes]\ndecode_pages = 3\n```\n\nAfter.")
    assert ref._cell("a|b <c>") == "a\\|b &lt;c&gt;"


def test_every_reference_page_asks_for_a_part_the_hook_makes(ref):
    pages = {p: user_docs.page(f"reference/{p}") for p in ("cli.md", "claims.md", "scenarios.md", "exit-codes.md",
                                                           "formats.md")}
    asked = {m for text in pages.values() for m in ref.MARKER.findall(text)}
    assert asked == set(ref.GENERATORS)


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra is not installed (pip install -e '.[docs]')")
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "WARNING" not in run.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "kvproof validate" in cli and "--certain-only" in cli
    assert not (tmp_path / "site" / "hooks").exists()  # the hook is not published
