"""pytest --kvproof in a fresh project: the catalogue and the project's scenario files as tests."""

import os
import subprocess
import sys
import textwrap

import pytest

from kvproof.model.scenario import builtin, builtins

GOOD = """
name = "mine"
[sizes]
decode_pages = 1
prefill_pages = 2
context_limit = 1
[[requests]]
tenant = "A"
pages = 1
[[requests]]
tenant = "B"
pages = 1
[engine]
release_policy = "drain_ack"
[expect]
sometimes_abort_mid_transfer = "verified"
default = "verified"
"""


def _pytest(project, *args, cache=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", *([] if cache else ["-p", "no:cacheprovider"]), *args],
                          cwd=project,
                          capture_output=True, text=True, env=env, timeout=600)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "user-project"\n')  # not a scenario
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "mine.toml").write_text(GOOD)
    return tmp_path


@pytest.mark.slow  # two pytest runs in a subprocess: about 10 s
def test_the_catalogue_runs_as_tests(tmp_path):
    """Every expectation of the catalogue is an item; one scenario's items run and pass (the whole
    catalogue through the plugin is .ci/plugin-smoke's, from a wheel in a fresh project, and
    every scenario's verdicts are test_expected's)."""
    n = sum(len(sc.expectations(sc.build())) for sc in builtins())
    code, out = _pytest(tmp_path, "--kvproof", "-q", "--collect-only")
    assert out.count("kvproof-catalogue/") == n, out[-500:]
    incident = builtin("incident")
    code, out = _pytest(tmp_path, "--kvproof", "-q", "-k", "incident")
    assert code == 0, out
    assert f"{len(incident.expectations(incident.build()))} passed" in out


@pytest.mark.slow  # a pytest subprocess in a fresh project: about 3.5 s
def test_project_scenarios_pass_and_a_wrong_expectation_fails(project):
    code, out = _pytest(project, "--kvproof", "-q", "-o", "kvproof_catalogue=false")
    assert code == 0 and "12 passed" in out, out
    wrong = project / "scenarios" / "mine.toml"
    wrong.write_text(GOOD.replace('release_policy = "drain_ack"', 'release_policy = "immediate"')
                     .replace('sometimes_abort_mid_transfer = "verified"', 'sometimes_abort_mid_transfer = "unreachable"'))
    code, out = _pytest(project, "--kvproof", "-q", "-o", "kvproof_catalogue=false")
    assert code == 1, out
    assert "5 failed, 7 passed" in out
    assert "FAILED scenarios/mine.toml::no_write_after_release" in out
    # a witness reads reached / unreachable ("verified" in GOOD is the old word, read as reached)
    assert "mine: sometimes_abort_mid_transfer was expected unreachable but is reached after" in out
    assert "! p0 released while R0@room0's chunk 0 write is still in flight" in out  # the counterexample
    assert "Traceback" not in out


def test_a_malformed_scenario_file_fails_with_file_key_and_expectation(project):
    (project / "scenarios" / "broken.toml").write_text(GOOD.replace("decode_pages = 1", "decode_pages = 0"))
    code, out = _pytest(project, "--kvproof", "-q", "-o", "kvproof_catalogue=false")
    assert code == 1
    assert "broken.toml: [sizes].decode_pages: expected a whole number in 1..64, got 0" in out


@pytest.mark.slow  # two pytest runs in a subprocess: about 6 s
def test_nothing_is_collected_without_the_flag_and_k_selects(project):
    code, out = _pytest(project, "-q")
    assert code == 5 and "no tests ran" in out  # exit 5: no tests; .toml files are not collected
    code, out = _pytest(project, "--kvproof", "-q", "-k", "incident and no_cross_tenant_read")
    assert code == 0 and "1 passed" in out, out


def test_an_inconclusive_search_fails(project):
    code, out = _pytest(project, "--kvproof", "-q", "-o", "kvproof_catalogue=false", "--kvproof-max-states", "10")
    assert code == 1 and "is inconclusive" in out and "state limit 10" in out


@pytest.mark.slow  # two pytest runs in a subprocess: about 5 s
def test_a_scenario_naming_a_variant_runs_it_only_when_the_ini_lists_it(project):
    # issue 12: a scenario file is data; the variant file is code, trusted by kvproof_variants
    (project / "scenarios" / "engine.py").write_text(
        f"open({str(project / 'RAN')!r}, 'w').close()\n"
        "from kvproof.spec.sglang.protocol import PdProtocol\nclass Mine(PdProtocol):\n    pass\n")
    (project / "scenarios" / "mine.toml").write_text(GOOD.replace('name = "mine"', 'name = "mine"\nprotocol = "engine.py:Mine"'))
    code, out = _pytest(project, "--kvproof", "-q", "-o", "kvproof_catalogue=false")
    assert code == 1 and "1 failed" in out and "pass the file with --variant engine.py to trust it" in out, out
    assert not (project / "RAN").exists()
    code, out = _pytest(project, "--kvproof", "-q", "-o", "kvproof_catalogue=false",
                        "-o", "kvproof_variants=scenarios/engine.py")
    assert code == 0 and "12 passed" in out, out
    assert (project / "RAN").exists()


@pytest.mark.slow  # a pytest subprocess in a fresh project: about 3.5 s
def test_collect_only_counts_every_item_and_a_node_id_selects_one(project):
    """Catalogue items are counted like a file's (the count once said 11 with 774 listed), have
    ids without a leading ``::``, match ``-k``; a file's node id runs that item alone, without the
    catalogue (it once ran all of it)."""
    n = sum(len(sc.expectations(sc.build())) for sc in builtins()) + 12
    code, out = _pytest(project, "--kvproof", "-q", "--collect-only", "-k", "incident and no_cross_tenant_read")
    ids = [line for line in out.splitlines() if "::" in line]
    assert ids == ["kvproof-catalogue/incident::no_cross_tenant_read"], out[-800:]
    assert f"1/{n} tests collected ({n - 1} deselected)" in out, out[-300:]
    code, out = _pytest(project, "--kvproof", "-v", "scenarios/mine.toml::no_cross_tenant_read")
    assert code == 0 and "1 passed" in out and "deselected" not in out, out[-800:]
    assert "scenarios/mine.toml::no_cross_tenant_read PASSED" in out


@pytest.mark.thorough  # a pytest subprocess in a fresh project: about 8 s
def test_lf_reruns_only_the_items_that_failed(project):
    (project / "scenarios" / "mine.toml").write_text(GOOD.replace('"drain_ack"', '"immediate"'))
    code, out = _pytest(project, "--kvproof", "-q", "-o", "kvproof_catalogue=false", cache=True)
    assert code == 1 and "4 failed, 8 passed" in out, out[-800:]
    code, out = _pytest(project, "--kvproof", "-q", "--lf", cache=True)  # the catalogue's items are deselected too
    assert code == 1 and "4 failed" in out and "passed" not in out, out[-800:]
    assert "FAILED scenarios/mine.toml::no_cross_tenant_read" in out
