"""A second protocol, written in a few lines under tests/, runs through check, show, replay,
report, prove and certify without any change to model/ or checker/ (issue 13)."""

from pathlib import Path

import pytest

from kvproof.checker.cli import main
from kvproof.model.registry import register, unregister
from kvproof.model.scenario import builtins, load_scenario

from .tiny_protocol import TINY

HERE = Path(__file__).parent / "tiny" / "scenarios"
EARLY, HELD = str(HERE / "tiny-early.toml"), str(HERE / "tiny-held.toml")


@pytest.fixture(autouse=True)
def tiny():
    register(TINY)
    yield
    unregister("tiny")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_its_catalogue_joins_the_built_in_one():
    names = [sc.name for sc in builtins()]
    assert names[-2:] == ["tiny-early", "tiny-held"] and "incident" in names
    assert load_scenario(EARLY).family == "tiny"


def test_check_show_replay_and_report(capsys, tmp_path):
    code, out, _ = run(capsys, "check", EARLY, HELD, "--traces", str(tmp_path), "--json")
    assert code == 0, out
    import json
    doc = json.loads(out)
    early, held = doc["scenarios"]
    assert early["stats"]["states"] == 32 and held["stats"]["states"] == 17
    assert [(r["invariant"], r["verdict"]) for r in early["results"]] == [("reads_only_own_data", "violated"),
                                                                          ("sometimes_read", "reached")]
    trace = tmp_path / "tiny-early__reads_only_own_data.itf.json"
    assert trace.exists() and [p.name for p in tmp_path.iterdir()] == [trace.name]
    code, out, _ = run(capsys, "show", str(trace))
    assert code == 0 and "client_write(client=C0)" in out and "write_lands(client=C0)" in out
    assert "reads_only_own_data fails after step" in out
    code, out, _ = run(capsys, "replay", str(trace))
    assert code == 0 and out.startswith("reproduced:")
    code, out, _ = run(capsys, "report", EARLY, "-o", str(tmp_path / "r.html"))
    assert code == 0 and (tmp_path / "r.html").read_text().count('<section class="counterexample"') == 1


def test_prove_and_certify(capsys, tmp_path):
    code, out, _ = run(capsys, "prove", EARLY, HELD, "--certificates", str(tmp_path), "--traces", str(tmp_path / "t"),
                       "--lemma-seconds", "30", "--induction-seconds", "30")
    assert code == 0, out
    cert = tmp_path / "tiny-held.smt2"
    assert cert.exists()
    code, out, _ = run(capsys, "certify", str(cert), "--scenario", HELD)
    assert code == 0 and "1 of 1 certificates check" in out
