"""ITF traces: what is stored, round trips, and files that do not fit."""

import json

import itf_py
import pytest

from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.traces import TraceError, read_trace, to_itf, write_trace
from kvproof.model.scenario import builtin


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


# -- issue 12: a trace is data -------------------------------------------------------------------
def _evil_engine(tmp_path):
    """A variant file that leaves a mark when it runs."""
    f = tmp_path / "engine.py"
    f.write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').close()\n"
                 "from kvproof.spec.sglang.protocol import PdProtocol\nclass E(PdProtocol):\n    pass\n")
    return f


def test_a_trace_naming_a_variant_file_runs_nothing_until_trusted(tmp_path, race_trace):
    # problem 5: show and replay imported whatever #meta.scenario.protocol named
    from kvproof.model.registry import trust_variant

    engine = _evil_engine(tmp_path)
    p = _mangle(tmp_path, race_trace, lambda d: d["#meta"]["scenario"].__setitem__("protocol", f"{engine}:E"))
    with pytest.raises(TraceError, match=r"is an engine variant, and a variant file is code: nothing was run; "
                                         r"pass the file with --variant engine.py to trust it"):
        read_trace(p)
    assert not (tmp_path / "RAN").exists()
    trust_variant(engine)
    assert type(read_trace(p).machine.spec).__name__ == "E"


def test_a_trace_naming_a_module_imports_nothing(tmp_path, race_trace, monkeypatch):
    import sys

    (tmp_path / "evil_mod.py").write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for ref in ("evil_mod:E", ":X", ".x:Y", "os:system"):
        p = _mangle(tmp_path, race_trace, lambda d: d["#meta"]["scenario"].__setitem__("protocol", ref))
        with pytest.raises(TraceError, match="protocol: "):
            read_trace(p)
    assert not (tmp_path / "RAN").exists() and "evil_mod" not in sys.modules


@pytest.mark.parametrize("change,message", [
    (lambda d: d.__setitem__("loop", "abc"), "loop: the trace of the invariant no_cross_tenant_read is a path, not a lasso"),
    (lambda d: d.__setitem__("loop", 3), "loop: the trace of the invariant no_cross_tenant_read is a path"),
    (lambda d: d["#meta"].__setitem__("kind", "lasso"), "#meta.kind: expected 'counterexample' for the invariant"),
    (lambda d: d.__setitem__("#meta", []), "not a kvproof trace"),
    (lambda d: d["#meta"].__setitem__("claim", ["x"]), "is not a claim of the spec"),
])
def test_a_trace_s_shape_is_checked_when_read(tmp_path, race_trace, change, message):
    # problem 6: a string loop, or a loop on an invariant's trace, were tracebacks in show
    with pytest.raises(TraceError) as e:
        read_trace(_mangle(tmp_path, race_trace, change))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_lasso_s_loop_must_be_a_step_of_it(tmp_path):
    from pathlib import Path

    lasso = Path(__file__).resolve().parents[1] / "traces" / "ack-before-register__requests_end.itf.json"
    doc = json.loads(lasso.read_text())
    assert read_trace(lasso).loop == doc["loop"]
    for bad in ("4", None, True, -1, len(doc["states"])):
        doc["loop"] = bad
        p = tmp_path / "l.itf.json"
        p.write_text(json.dumps(doc))
        with pytest.raises(TraceError, match="loop: expected the step a liveness lasso loops back to"):
            read_trace(p)


def test_deeply_nested_binary_and_nul_named_traces_are_one_line(tmp_path):
    # problem 6: RecursionError, UnicodeDecodeError
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TraceError, match="nested too deeply"):
        read_trace(p)
    p.write_bytes(b"\xff\xfe{}")
    with pytest.raises(TraceError, match=r"not UTF-8 text \(byte 0\)"):
        read_trace(p)
    with pytest.raises(TraceError, match="cannot read"):
        read_trace("a\x00b.json")
