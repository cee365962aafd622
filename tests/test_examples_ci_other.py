"""The GitLab CI and pre-commit recipes (``examples/ci/``): the GitLab jobs run the GitHub
workflow's own gate and pytest steps (so the recipes cannot drift apart; ``.ci/plugin-smoke``
runs those for real) and keep the JUnit file as a test report; the pre-commit hook's entry,
given the staged scenario files, passes a file whose verdicts hold and refuses one whose do not."""

import re
import shlex
from pathlib import Path

import yaml

from kvproof.checker.cli.commands import main
from tests.ci_recipe import run_steps

ROOT = Path(__file__).resolve().parents[1]
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"
PRE_COMMIT = ROOT / "examples" / "ci" / "pre-commit-config.yaml"
GITHUB = run_steps((ROOT / "examples" / "ci" / "kvproof.yml").read_text())

GOOD = """name = "ours"
[sizes]
decode_pages = 1
prefill_pages = 2
context_limit = 1
[[requests]]
tenant = "A"
pages = 1
[engine]
release_policy = "drain_ack"
[expect]
default = "verified"
"""
BAD = GOOD.replace('[engine]\nrelease_policy = "drain_ack"\n', "").replace('"ours"', '"wrong"').replace(
    'tenant = "A"\npages = 1\n', 'tenant = "A"\npages = 1\n[[requests]]\ntenant = "B"\npages = 1\n')


def test_the_gitlab_jobs_run_the_github_workflows_steps():
    jobs = yaml.safe_load(GITLAB.read_text())
    assert jobs["variables"]["KVPROOF_SOURCE"].startswith("git+https://")
    for job, github in (("kv-isolation", "kv-isolation"), ("pytest-gate", "pytest-gate")):
        script = [s if s.endswith("\n") else s + "\n" for s in jobs[job]["script"]]
        assert [s.strip() for s in script] == [s.strip() for s in GITHUB[github]], job
    assert jobs["kv-isolation"]["artifacts"] == {"when": "always", "paths": ["kvproof-out/"],
                                                 "reports": {"junit": "kvproof-out/junit.xml"}}
    assert jobs["pytest-gate"]["artifacts"]["reports"] == {"junit": "kvproof-pytest.xml"}


def _hook() -> dict:
    [repo] = yaml.safe_load(PRE_COMMIT.read_text())["repos"]
    [hook] = repo["hooks"]
    assert repo["repo"] == "local" and hook["language"] == "system" and hook["pass_filenames"] is True
    return hook


def test_the_pre_commit_hook_passes_good_files_and_refuses_a_bad_one(tmp_path, monkeypatch, capsys):
    hook = _hook()
    entry = shlex.split(hook["entry"])
    assert entry[:2] == ["kvproof", "check"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvproof").mkdir()
    (tmp_path / "kvproof" / "ours.toml").write_text(GOOD)
    (tmp_path / "kvproof" / "wrong.toml").write_text(BAD)
    staged = [f for f in ("kvproof/ours.toml", "kvproof/wrong.toml", "README.md") if re.search(hook["files"], f)]
    assert staged == ["kvproof/ours.toml", "kvproof/wrong.toml"]  # pre-commit hands over the scenario files only
    assert main(entry[1:] + staged[:1]) == 0
    assert main(entry[1:] + staged) == 1
    out = capsys.readouterr().out
    assert "wrong" in out and out.rstrip().splitlines()[-1].startswith("kvproof check: 2 scenarios")
    assert not (tmp_path / "traces").exists()  # --no-traces: nothing written into the user's repository


def test_the_ci_gate_page_shows_all_three_recipes():
    page = (ROOT / "docs" / "how-to" / "ci-gate.md").read_text()
    for name in ("examples/ci/kvproof.yml", "examples/ci/gitlab-ci.yml", "examples/ci/pre-commit-config.yaml"):
        assert name in page, name
