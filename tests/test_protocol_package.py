"""The example protocol package, installed from its own directory into a fresh environment, as a
user installs a protocol of their own: ``kvproof list``, ``check``, ``show`` and ``prove`` find it
through its entry point alone, and the commands of the tutorial (``docs/tutorials/new-protocol.md``)
run there as written.

The environment: ``python -m venv --without-pip``, whose site-packages reach the running
interpreter's (one ``.pth`` line per site-packages folder: kvproof's dependencies, pip and
setuptools, with no network), then ``pip install --no-deps --no-build-isolation --no-index`` of a
copy of kvproof's source and a copy of the example (copies, so that the builds write nothing into
the checkout).  So the installed kvproof is built from this checkout's files as its
``pyproject.toml`` lists them, and the example is found only through the ``kvproof.protocols``
entry point of its own ``pyproject.toml``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "protocols" / "minipd"
TUTORIAL = ROOT / "docs" / "tutorials" / "new-protocol.md"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# The scenario a user writes first: what they believe of the engine that frees an aborted
# request's page at once.  The tutorial shows it; the check finds it false (exit 1).
EARLY_FREE = '''\
name = "early-free"
title = "My engine: decode frees an aborted request's page at once"
protocol = "minipd"

[config]
requests = 2
free_on_abort = true

[expect]
decode_reads_only_own_kv = "verified"
sometimes_abort_mid_transfer = "reached"
sometimes_request_decodes = "reached"
'''
TRACE = "traces/early-free__decode_reads_only_own_kv.itf.json"

# The tutorial's commands, in its order, with the exit code each must end with.
COMMANDS = [
    ("kvproof list", 0),
    ("kvproof check early-free.toml", 1),
    (f"kvproof show {TRACE}", 0),
    ("kvproof check minipd-early-free minipd-deferred-free", 0),
    ("kvproof prove minipd-deferred-free", 0),
]


def _setuptools_problem() -> str | None:
    """Why kvproof's source cannot be built here without the network, or ``None``."""
    needed = next(r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    floor = int(re.search(r">=\s*(\d+)", needed).group(1))
    try:
        have = metadata.version("setuptools")
    except metadata.PackageNotFoundError:
        return f"setuptools is not installed; building kvproof without the network needs {needed}"
    if int(have.split(".")[0]) < floor:
        return f"setuptools {have} is installed; building kvproof without the network needs {needed}"
    return None


def _copy_source(dest: Path) -> Path:
    """The files kvproof's build reads (pyproject's package folders, readme and licence files)."""
    setup = PYPROJECT["tool"]["setuptools"]
    names = {*setup["package-dir"].values(), PYPROJECT["project"]["readme"], *PYPROJECT["project"]["license-files"]}
    dest.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", dest)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    for name in sorted(names):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A fresh environment with kvproof and the example installed; returns ``(env, workdir)``."""
    problem = _setuptools_problem()
    if problem:
        pytest.skip(problem + " (pip install -e '.[test]' installs it)")
    root = tmp_path_factory.mktemp("fresh")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    outer = [p for p in dict.fromkeys(sys.path) if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    (purelib / "zz_outer.pth").write_text("".join(p + "\n" for p in outer))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv), COLUMNS="120",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONNOUSERSITE="1")
    src = _copy_source(root / "kvproof-src")
    example = root / "minipd"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--no-index", str(src), str(example)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    work = root / "work"
    work.mkdir()
    (work / "early-free.toml").write_text(EARLY_FREE)
    return env, work


def row(out: str, first: str, claim: str) -> list[str]:
    """The words of the table row of ``claim`` in the rows of scenario ``first`` (table borders,
    marks and alignment left out, so any layout of the same columns reads alike)."""
    rows = [re.findall(r"[\w.,-]+", line) for line in out.splitlines()]
    start = next(i for i, words in enumerate(rows) if words[:1] == [first])
    return next(words for words in rows[start:] if claim in words)


def kvproof(fresh, line: str) -> subprocess.CompletedProcess:
    """Run one command line in the fresh environment's working folder."""
    env, work = fresh
    return subprocess.run(shlex.split(line), cwd=work, env=env, capture_output=True, text=True, timeout=300)


def test_the_fresh_environment_runs_the_installed_copies(fresh):
    """kvproof and the example are the fresh environment's own installs, not the checkout's."""
    env, work = fresh
    code = ("import kvproof, kvproof_minipd, kvproof.model; from importlib import metadata; "
            "print(kvproof.__file__); print(kvproof_minipd.__file__); "
            "print(sorted(ep.value for ep in metadata.entry_points(group='kvproof.protocols')))")
    done = subprocess.run(["python", "-c", code], cwd=work, env=env, capture_output=True, text=True)
    kv_file, example_file, eps = done.stdout.splitlines()
    venv = env["VIRTUAL_ENV"]
    assert kv_file.startswith(venv) and example_file.startswith(venv), done.stdout + done.stderr
    assert eps == str(["kvproof.spec.dynamo:PROTOCOL", "kvproof.spec.sglang:PROTOCOL", "kvproof.spec.vllm:PROTOCOL",
                       "kvproof_minipd:PROTOCOL"])


def test_list_check_show_and_prove_as_the_tutorial_runs_them(fresh):
    """Each command of the tutorial, in its order: its exit code and what its output shows."""
    out = {}
    for line, code in COMMANDS:
        done = kvproof(fresh, line)
        assert done.returncode == code, f"{line}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        out[line] = done.stdout
    listed = [row.split()[0] for row in out["kvproof list"].splitlines()]
    assert listed[-2:] == ["minipd-deferred-free", "minipd-early-free"] and "incident" in listed
    early = out["kvproof check early-free.toml"]
    assert row(early, "early-free", "decode_reads_only_own_kv")[:6] == [
        "early-free", "decode_reads_only_own_kv", "verified", "violated", "63", "8"], early
    assert f"1 trace written: {TRACE}\n" in early
    assert early.rstrip().endswith("kvproof check: 1 scenario, 3 claims (explicit search): 2 matched, 1 mismatched, "
                                   "0 inconclusive; exit 1: a verdict does not match its expectation")
    shown = out[f"kvproof show {TRACE}"]
    assert shown.startswith("early-free · decode_reads_only_own_kv · counterexample, 8 steps\n")
    assert "Step 7  transfer_write_lands(req=R0)   [transfer]\n  write[R0]: in_flight → landed\n  data: R1 → R0\n" in shown
    assert "  got[R1]: none → R0\n" in shown and "✗ decode_reads_only_own_kv fails after step 8" in shown
    catalogue = out["kvproof check minipd-early-free minipd-deferred-free"]
    # two scenarios: a row each (claims, how they compare with expectations, states, depth)
    assert [ln.split()[:6] for ln in catalogue.splitlines()[2:4]] == [
        ["minipd-early-free", "3", "as", "expected", "63", "8"],
        ["minipd-deferred-free", "3", "as", "expected", "68", "10"]], catalogue
    assert catalogue.rstrip().endswith("6 matched, 0 mismatched, 0 inconclusive; exit 0: every verdict matches its "
                                       "expectation")
    proved = out["kvproof prove minipd-deferred-free"]
    assert row(proved, "minipd-deferred-free", "decode_reads_only_own_kv") == [
        "minipd-deferred-free", "decode_reads_only_own_kv", "verified", "proved", "proved", "proved"], proved
    assert "certificate traces/proofs/minipd-deferred-free.smt2" in " ".join(proved.split())  # wrapped or not
    assert (fresh[1] / "traces" / "proofs" / "minipd-deferred-free.smt2").is_file()


def test_the_tutorial_shows_these_commands_and_files_as_they_are():
    """Every command the test runs is in the tutorial, in this order; every code block of the
    tutorial is a part of a shipped file (or the scenario above), so neither drifts."""
    text = TUTORIAL.read_text()
    at = [text.find(f"\n{line}\n") for line, _ in COMMANDS]
    assert -1 not in at and at == sorted(at), [line for (line, _), i in zip(COMMANDS, at) if i == -1]
    shipped = [p.read_text() for p in sorted(EXAMPLE.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    blocks = re.findall(r"^```(python|toml)\n(.*?)^```$", text, re.M | re.S)
    assert len(blocks) >= 6
    for lang, block in blocks:
        assert block == EARLY_FREE or any(block in f for f in shipped), f"a {lang} block of the tutorial is in no " \
                                                                         f"shipped file:\n{block}"
