"""The SVG sequence diagram: lanes, arrows, and the marked violating read, read back as XML."""

import xml.etree.ElementTree as ET

import pytest

from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.report.sequence import trace_lanes, trace_story
from kvproof.checker.report.sequence_svg import sequence_svg
from kvproof.model.scenario import builtin

NS = {"s": "http://www.w3.org/2000/svg"}


def _svg(name, claim, ident="t"):
    rep = check_scenario(builtin(name), only=[claim])
    return ET.fromstring(sequence_svg(trace_story(rep.claims[0].result.trace), trace_lanes(rep.claims[0].result.trace), f"{name}: {claim}", ident=ident))


def _classes(g):
    return set(g.get("class", "").split())


@pytest.fixture(scope="module")
def race():
    return _svg("abort-race", "no_cross_tenant_read")


def test_it_is_standalone_svg(race):
    assert race.tag == "{http://www.w3.org/2000/svg}svg"
    assert int(race.get("width")) > 1000 and int(race.get("height")) > 400
    text = ET.tostring(race, encoding="unicode")
    assert "<script" not in text and "href" not in text  # nothing to load, nothing to run


def test_one_lane_per_actor_in_order(race):
    lanes = race.findall("s:g[@class='lane']", NS)
    assert [g.get("data-lane") for g in lanes] == ["client", "prefill", "transfer", "decode", "pool"]
    titles = ["".join(g.find("s:text", NS).itertext()) for g in lanes]
    assert titles == ["client", "prefill scheduler", "transfer engine", "decode scheduler", "page pool"]


def test_an_arrow_per_message_and_the_marked_read(race):
    msgs = [g for g in race.iter("{http://www.w3.org/2000/svg}g") if "msg" in _classes(g)]
    assert {int(g.get("data-step")) for g in msgs} == set(range(1, 16))
    reads = [g for g in msgs if "violating-read" in _classes(g)]
    assert len(reads) == 1
    read = reads[0]
    assert (read.get("data-step"), read.get("data-from"), read.get("data-to")) == ("15", "pool", "decode")
    assert "R1@room1 reads p0; p0 holds R0@room0's KV (tenant A)" in "".join(read.itertext())
    assert read.find("s:line", NS).get("marker-end") == "url(#t-arrow-hazard)"
    late = [g for g in msgs if g.get("data-step") == "13"]
    assert len(late) == 1 and {"write", "hazard"} <= _classes(late[0]) and "violation" not in _classes(late[0])


def test_hazard_notes_are_written_under_their_step(race):
    notes = ["".join(t.itertext()) for t in race.iter("{http://www.w3.org/2000/svg}text")
             if t.get("class") == "hazard-note"]
    assert notes == ["! p0 released while R0@room0's chunk 0 write is still in flight",
                     "! late write from R0@room0 lands on p0, now reserved by R1@room1",
                     "! decode R1@room1 (tenant B) reads p0 holding R0@room0's KV (tenant A)"]


def test_marker_ids_are_prefixed_so_diagrams_share_a_page():
    a, b = _svg("abort-race", "no_cross_tenant_read", "a"), _svg("incident", "no_cross_tenant_read", "b")
    ids_a = {m.get("id") for m in a.iter("{http://www.w3.org/2000/svg}marker")}
    ids_b = {m.get("id") for m in b.iter("{http://www.w3.org/2000/svg}marker")}
    assert ids_a == {"a-arrow", "a-arrow-hazard"} and not ids_a & ids_b


def test_no_violation_in_a_witness_trace():
    rep = check_scenario(builtin("v0.5.22"), only=["sometimes_request_succeeds"])
    svg = ET.fromstring(sequence_svg(trace_story(rep.claims[0].result.trace), trace_lanes(rep.claims[0].result.trace)))
    assert not [g for g in svg.iter("{http://www.w3.org/2000/svg}g") if _classes(g) & {"hazard", "violation"}]
