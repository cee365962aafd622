"""The example GitHub Actions workflow: complete, and every kvproof command in it parses."""

import re
import shlex
from pathlib import Path

from kvproof.checker.cli.commands import build_parser

WORKFLOW = Path(__file__).resolve().parents[1] / "examples" / "ci" / "kvproof.yml"


def _kvproof_commands(text: str) -> list[list[str]]:
    """Folded ``run: >-`` blocks and one-line ``run:`` steps that call kvproof."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:- )?run:\s*(.*)$", line)
        if not m:
            continue
        body = m.group(1).split(" #")[0].strip()
        if body in (">-", ">", "|"):
            indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
            block = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) < indent:
                    break
                block.append(nxt.strip())
            body = " ".join(b for b in block if b and not b.startswith("#"))
        if body.startswith("kvproof "):
            out.append(shlex.split(body)[1:])
    return out


def test_the_workflow_gates_and_uploads_everything():
    text = WORKFLOW.read_text()
    for needed in ("actions/checkout@", "actions/setup-python@", "pip install kvproof", "actions/upload-artifact@",
                   "github/codeql-action/upload-sarif@", "security-events: write", "if: always()",
                   "pytest --kvproof"):
        assert needed in text, needed
    assert "\t" not in text


def test_every_kvproof_command_in_it_parses():
    commands = _kvproof_commands(WORKFLOW.read_text())
    assert commands and commands[0][0] == "check"
    for argv in commands:
        args = build_parser().parse_args(argv)
        assert args.junit == "kvproof-out/junit.xml" and args.sarif == "kvproof-out/kvproof.sarif"
        assert args.html == "kvproof-out/report.html"
        assert args.traces == "kvproof-out/traces"


ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    """The two set-up commands the README begins with (its first two ``sh`` blocks)."""
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    return [b.strip() for b in blocks[:2]]


def test_the_readme_begins_with_the_main_job_and_the_test_command():
    main_job, tests = _readme_commands()
    assert main_job.startswith("python3 -m venv .venv && ") and main_job.endswith(".venv/bin/kvproof check")
    assert tests.startswith("python3 -m venv .venv && ") and tests.endswith(".venv/bin/pytest -q")


def test_ci_runs_the_readmes_test_command_exactly():
    _, tests = _readme_commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci  # a line of its own, word for word
    assert any(line.startswith(".venv/bin/kvproof certify") for line in ci)
