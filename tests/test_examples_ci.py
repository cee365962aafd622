"""The example GitHub Actions workflow: complete, installs kvproof from its source (not PyPI), its
gate step copes with a repository without scenario files, and every kvproof command in it parses
(.ci/plugin-smoke runs the steps for real)."""

import os
import re
import shlex
import subprocess
from pathlib import Path

from kvproof.checker.cli.commands import build_parser
from tests.ci_recipe import run_steps

WORKFLOW = Path(__file__).resolve().parents[1] / "examples" / "ci" / "kvproof.yml"


def _kvproof_commands(text: str) -> list[list[str]]:
    """Every kvproof command line of the workflow's run steps (continuation lines joined)."""
    out = []
    for steps in run_steps(text).values():
        for script in steps:
            for line in script.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                if words[:1] == ["kvproof"]:
                    out.append(words[1:])
    return out


def test_the_workflow_gates_and_uploads_everything():
    text = WORKFLOW.read_text()
    for needed in ("actions/checkout@", "actions/setup-python@", "actions/upload-artifact@",
                   "github/codeql-action/upload-sarif@", "security-events: write", "if: always()",
                   "pytest --kvproof"):
        assert needed in text, needed
    assert "\t" not in text


def test_the_workflow_installs_kvproof_from_its_source_not_pypi():
    """kvproof is not on PyPI: every install step names KVPROOF_SOURCE (a git URL or a path)."""
    jobs = run_steps(WORKFLOW.read_text())
    assert set(jobs) == {"kv-isolation", "pytest-gate"}
    installs = [s for steps in jobs.values() for s in steps if "pip install" in s]
    assert installs == ['python -m pip install "$KVPROOF_SOURCE"\n'] * 2
    assert re.search(r'^  KVPROOF_SOURCE: "git\+https://', WORKFLOW.read_text(), re.M)
    assert not re.search(r"pip install\s+['\"]?kvproof\b", WORKFLOW.read_text())


def test_the_gate_step_with_and_without_scenario_files(tmp_path):
    """The gate's step run by bash with a stand-in ``kvproof`` that prints its arguments: the
    scenario glob expands to the files, and to nothing (not to itself) when there are none."""
    gate = run_steps(WORKFLOW.read_text())["kv-isolation"][-1]
    fake = tmp_path / "bin" / "kvproof"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    repo = tmp_path / "repo"
    repo.mkdir()

    def args() -> list[str]:
        done = subprocess.run(["bash", "-e", "-c", gate], cwd=repo, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.split("\n")[:4]

    assert args() == ["check", "v0.5.22", "--max-seconds", "600"]
    (repo / "kvproof").mkdir()
    for name in ("b.toml", "a.toml"):
        (repo / "kvproof" / name).write_text("")
    assert args() == ["check", "v0.5.22", "kvproof/a.toml", "kvproof/b.toml"]


def test_plugin_smoke_runs_the_recipes_own_steps():
    """.ci/plugin-smoke takes the steps from the workflow file (not a copy) and .ci/run runs it."""
    smoke = (ROOT / ".ci" / "plugin-smoke").read_text()
    assert "tests/ci_recipe.py\" \"$root/examples/ci/kvproof.yml\" kv-isolation" in smoke
    assert 'bash -e "$work/gate/2.sh"' in smoke and 'bash -e "$work/pytest-gate/2.sh"' in smoke
    assert "bash .ci/plugin-smoke" in (ROOT / ".ci" / "run").read_text().splitlines()


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
