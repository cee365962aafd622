"""Traces as JSON step records."""

import json

from kvproof.checker.report.focus import Focus
from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.report.trace_json import trace_records
from kvproof.model.scenario import builtin


def test_records_of_the_abort_race():
    t = check_scenario(builtin("abort-race"), only=["no_cross_tenant_read"]).claims[0].result.trace
    doc = json.loads(json.dumps(trace_records(t)))
    assert (doc["scenario"], doc["claim"], doc["kind"], doc["length"]) == (
        "abort-race", "no_cross_tenant_read", "counterexample", 15)
    assert [r["step"] for r in doc["steps"]] == list(range(1, 16))
    s7 = doc["steps"][6]
    assert (s7["action"], s7["actor"], s7["params"], s7["label"]) == ("decode_abort", "decode", {"req": "R0"},
                                                                       "decode_abort(req=R0@room0)")
    assert {"field": "owner[p0]", "old": "R0", "new": "free"} in s7["changes"]  # data: the state's labels
    assert s7["names"] == {"R0": "R0@room0", "R1": "R1@room1"}  # what the renderings call them
    assert s7["notes"] == [{"level": "hazard", "text": "p0 released while R0@room0's chunk 0 write is still in flight"}]
    assert doc["steps"][-1]["messages"][0]["violation"] is True
    only = trace_records(t, only=Focus.of(t, ["content"]))
    assert [r["step"] for r in only["steps"]] == [12, 13]
    assert [r["step"] for r in trace_records(t, step=4)["steps"]] == [4]
