"""The README and the docs site: the README fits on a few screens, every page is in the site's
navigation, the README's links into the docs resolve, and no user-facing text (README, docs pages,
the sources of the CLI's and the protocols' messages, ``--help``) names an internal issue number or
a reference a reader does not have."""

import argparse
import re

import pytest
import yaml

from kvproof.checker.cli.commands import build_parser
from tests import user_docs

ROOT = user_docs.ROOT

INTERNAL = re.compile(r"issue [0-9]|shared reference|\.\./shared|shared/reference")
"""What a reader cannot follow: an internal issue number, the project's own hazard digests."""


def internal_mentions(text: str) -> list[str]:
    """The lines of ``text`` that name an internal issue or the shared reference."""
    return [line.strip() for line in text.splitlines() if INTERNAL.search(line)]


def test_the_readme_is_at_most_400_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 400, len(lines)


def test_the_readme_names_what_kvproof_is_and_links_into_every_part_of_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert "can decode read a KV page that was not written for the request it serves?" in readme
    for part in ("tutorials", "how-to", "reference", "explanation"):
        assert f"](docs/{part}/" in readme, part


def test_every_link_the_readme_makes_into_the_docs_resolves():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) > 20
    assert [link for link in links if not (ROOT / link).is_file()] == []


def _nav_files(nav) -> list[str]:
    out = []
    for item in nav:
        for value in (item.values() if isinstance(item, dict) else [item]):
            out += _nav_files(value) if isinstance(value, list) else [value]
    return out


def test_every_docs_page_is_in_the_navigation_and_every_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_files(config["nav"])
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav))
    assert config["strict"] is True  # warnings are errors, as .ci/run builds it


def test_no_user_facing_text_names_an_internal_issue_or_the_shared_reference():
    found = {path: internal_mentions(text) for path, text in user_docs.pages().items()}
    for package in ("checker", "spec", "model"):  # where every message the CLI prints is written
        for f in sorted((ROOT / package).rglob("*")):
            if f.suffix in {".py", ".md", ".toml", ".json"}:
                found[str(f.relative_to(ROOT))] = internal_mentions(f.read_text())
    assert {path: lines for path, lines in found.items() if lines} == {}


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_no_help_text_names_an_internal_issue_or_the_shared_reference():
    helps = {p.prog: p.format_help() for p in _parsers(build_parser())}
    assert {"kvproof audit", "kvproof check", "kvproof prove", "kvproof validate"} < set(helps)  # every command's --help
    assert {prog: internal_mentions(text) for prog, text in helps.items() if internal_mentions(text)} == {}


@pytest.mark.parametrize("line", ["the V-ids of issue 15's reference table", "(shared reference, section 2)",
                                  "see ../shared/reference/vllm-pd-hazards.md"])
def test_the_check_catches_what_it_is_for(line):
    assert internal_mentions(f"fine\n{line}\nfine") == [line]


def test_the_check_leaves_public_sources_alone():
    assert internal_mentions("vLLM issue #52234; SGLang PR 38935; the reference interpreter") == []


def test_ci_builds_the_docs_with_warnings_as_errors():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert any(line.startswith("NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict") for line in ci)
    assert any(line.startswith(".venv/bin/pip install") and ",docs]" in line for line in ci)
    extra = re.search(r"^docs = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(1)
    assert '"mkdocs==1.6.1"' in extra and '"mkdocs-material==9.8.1"' in extra
