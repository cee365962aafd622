"""ITF traces: what is stored, round trips, and files that do not fit."""

import json

import itf_py
import pytest

from kvproof.checker.run import check_scenario
from kvproof.checker.traces import TraceError, read_trace, to_itf, write_trace
from kvproof.spec.scenario import builtin


@pytest.fixture(scope="module")
def race_trace():
    rep = check_scenario(builtin("abort-race"), only=["no_cross_tenant_read"])
    return rep.claims[0].result.trace


def test_the_itf_document_has_meta_vars_and_one_state_per_step(race_trace):
    doc = to_itf(race_trace)
    assert doc["#meta"]["format"] == "ITF" and doc["#meta"]["claim"] == "no_cross_tenant_read"
    assert len(doc["states"]) == len(race_trace) + 1
    assert "owner" in doc["vars"] and "mbt::actionTaken" in doc["vars"]
    last = doc["states"][-1]
    assert last["mbt::actionTaken"] == "decode_commit"
    assert last["mbt::nondetPicks"] == {"req": "R1"}
    assert last["hold"] == [{"#bigint": "0"}, {"#bigint": "0"}]
    assert last["read"] == ["none", "cross_tenant"]
    # existing ITF tooling reads it
    parsed = itf_py.trace_from_json(doc)
    assert len(parsed.states) == len(race_trace) + 1


def test_write_and_read_round_trip(tmp_path, race_trace):
    path = write_trace(race_trace, tmp_path)
    assert path.name == "abort-race__no_cross_tenant_read.itf.json"
    back = read_trace(path)
    assert back.actions == race_trace.actions and back.states == race_trace.states
    assert back.claim == race_trace.claim and back.scenario.config == race_trace.scenario.config
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def _mangle(tmp_path, race_trace, change):
    doc = to_itf(race_trace)
    change(doc)
    p = tmp_path / "t.itf.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("change,message", [
    (lambda d: d["states"][3].__setitem__("mbt::actionTaken", "decode_teleport"), "state 3: unknown action 'decode_teleport'"),
    (lambda d: d["states"][2].__setitem__("d_phase", ["new", "flying"]), "state 2: field d_phase"),
    (lambda d: d["states"][2].pop("owner"), "state 2: missing field(s): owner"),
    (lambda d: d["#meta"].__setitem__("claim", "made_up"), "#meta.claim 'made_up' is not a claim"),
    (lambda d: d["#meta"]["scenario"]["engine"].__setitem__("release_policy", "never"), "stored scenario"),
    (lambda d: d["#meta"].__setitem__("source", "apalache"), "not a kvproof trace"),
    (lambda d: d["states"][1]["mbt::nondetPicks"].__setitem__("req", "R9"), "prefill_bootstrap_add.req"),
])
def test_traces_that_do_not_fit_are_one_line_errors(tmp_path, race_trace, change, message):
    with pytest.raises(TraceError) as e:
        read_trace(_mangle(tmp_path, race_trace, change))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_not_json_and_missing_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{nope")
    with pytest.raises(TraceError, match="not JSON"):
        read_trace(p)
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "missing.json")
    p.write_text("[]")
    with pytest.raises(TraceError, match="not an ITF trace"):
        read_trace(p)
