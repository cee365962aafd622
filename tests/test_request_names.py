"""Requests and rooms are named apart in every rendering: ``R<n>@room<m>``, a room's next
request (request streams) taking the next number, while traces keep the state's labels."""

import json
from pathlib import Path

from kvproof.checker.report.focus import Focus
from kvproof.checker.report.mermaid import trace_mermaid
from kvproof.checker.report.render import render_trace, to_text
from kvproof.checker.report.sarif import sarif_log
from kvproof.checker.report.sequence import trace_story
from kvproof.checker.report.timeline import page_timelines
from kvproof.checker.report.trace_json import trace_records
from kvproof.checker.traces import read_trace
from kvproof.model.narration import rename

REUSE = Path(__file__).resolve().parents[1] / "traces" / "room-reuse-legacy-ack__no_write_after_release.itf.json"


def test_rename_replaces_whole_labels_only():
    names = {"R0": "R0@room0", "R1": "R2@room1"}
    assert rename("R0's KV, R1, R10, PR0, R0@room0, d_phase[R1]", names) == (
        "R0@room0's KV, R2@room1, R10, PR0, R0@room0, d_phase[R2@room1]")


def test_a_rooms_next_request_gets_its_own_name_in_every_rendering():
    t = read_trace(REUSE)  # one request slot: its room takes a second request at step 4
    assert t.labels()[3] == "client_send(req=R0)"  # the trace file keeps the state's label
    assert t.names[3] == {"R0": "R0@room0"} and t.names[4] == {"R0": "R1@room0"}
    text = to_text(render_trace(t), width=100)
    assert "Step 3  prefill_drain_ack(req=R0@room0)" in text and "Step 4  client_send(req=R1@room0)" in text
    assert "! an ack of the room's earlier request is counted for R1@room0" in text
    assert "! p0 released while R1@room0's chunk 0 write is still in flight" in text
    assert "R0   " not in text and "R0," not in text and "R0]" not in text  # no bare slot label left
    steps = trace_story(t)
    assert steps[2].label == "prefill_drain_ack(req=R0@room0)"
    assert steps[-1].label == "decode_release_deferred(req=R1@room0)"
    assert all("R0@room0" not in m.text for st in steps[4:] for m in st.messages)
    mermaid = trace_mermaid(t)
    assert "Step 4 · client_send(req=R1@room0)" in mermaid and "R0)" not in mermaid
    p0 = {tl.page: tl for tl in page_timelines(t)}["p0"]
    assert p0.sentence().startswith("p0: R1@room0 reserved") and p0.cells[-2].owner == "R1@room0"
    doc = trace_records(t)
    assert doc["steps"][3]["label"] == "client_send(req=R1@room0)" and doc["steps"][3]["params"] == {"req": "R0"}


def test_focus_on_a_slot_follows_each_of_its_requests():
    t = read_trace(REUSE)
    only = Focus.of(t, ["R0"])
    assert only.text("drain ack for R1@room0 lost", t.names[5]) and not only.text("R1@room0", t.names[2])
    mermaid = trace_mermaid(t, only)
    assert "client_send(req=R1@room0)" in mermaid and "Note over client: room0 takes its next request: R1@room0" in mermaid
    assert "release p0 (R1@room0) on drain ack" in mermaid


def test_sarif_names_the_last_action_by_the_request():
    from kvproof.checker.explicit.run import check_scenario
    from kvproof.model.scenario import builtin

    rep = check_scenario(builtin("room-reuse-legacy-ack"), only=["no_write_after_release"])
    rep.claims[0].expected = "verified"
    doc = json.loads(json.dumps(sarif_log([rep])))
    text = json.dumps(doc)
    assert "the last action: decode_release_deferred(req=R1@room0)" in text


def test_two_requests_of_one_client_room_are_named_apart():
    t = read_trace(REUSE.parent / "sglang-0.5.23-shared-room__no_cross_tenant_read.itf.json")
    assert t.names[0] == {"R0": "R0@room0", "R1": "R1@room0"}  # both carry the client's room 0
    text = to_text(render_trace(t), width=120)
    assert "! decode R0@room0 (tenant A) reads p0 holding R1@room0's KV (tenant B)" in text
    assert "late write from R1@room0 lands on p0, now reserved by R0@room0" in text
