"""Traces as messages between lanes: derived from state changes, hazards and the violation marked."""

import pytest

from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.report.sequence import trace_story
from kvproof.spec.sglang.narration import LANES
from kvproof.model.scenario import builtin, load_scenario


def _trace(name, claim):
    rep = check_scenario(builtin(name), only=[claim])
    return rep.claims[0].result.trace


@pytest.fixture(scope="module")
def race():
    return trace_story(_trace("abort-race", "no_cross_tenant_read"))


def test_the_five_lanes():
    assert [ln.title for ln in LANES] == ["client", "prefill scheduler", "transfer engine", "decode scheduler",
                                          "page pool"]


def test_every_step_has_a_message_on_known_lanes(race):
    keys = {ln.key for ln in LANES} | {None}
    assert [st.step for st in race] == list(range(1, 16))
    for st in race:
        assert st.messages
        assert all(m.src in keys and m.dst in keys and m.step == st.step for m in st.messages)


def test_the_abort_race_story(race):
    by_step = {st.step: st for st in race}
    texts = {st.step: [m.text for m in st.messages] for st in race}
    assert texts[6] == ["R0@room0 chunk 0: RDMA write q0 → p0"]
    release = by_step[7].messages[-1]
    assert (release.src, release.dst, release.kind, release.hazard) == ("decode", "pool", "release", True)
    assert "still written in flight" in release.text
    late = by_step[13].messages[0]
    assert (late.src, late.dst, late.kind, late.hazard) == ("transfer", "pool", "write", True)
    assert late.text == "late write from R0@room0 lands on p0, now R1@room1's"
    assert not late.violation  # only the last step is the violation


def test_the_read_after_which_the_claim_fails_is_marked(race):
    reads = [m for st in race for m in st.messages if m.violating_read]
    assert len(reads) == 1
    read = reads[0]
    assert (read.step, read.src, read.dst) == (15, "pool", "decode")
    assert read.text == "R1@room1 reads p0; p0 holds R0@room0's KV (tenant A)"
    # the read comes before the release of the same step (decode reads, then finishes)
    kinds = [m.kind for m in race[-1].messages]
    assert kinds.index("read") < kinds.index("release")


def test_the_incident_placeholder_success_and_stale_read():
    story = trace_story(_trace("incident", "no_cross_tenant_read"))
    success = [m for st in story for m in st.messages if "KVPoll.Success (1 of 3 pages sent)" in m.text]
    assert len(success) == 1 and success[0].hazard
    last = story[-1]
    read = next(m for m in last.messages if m.kind == "read")
    assert read.violating_read and "p1 holds R0@room0's KV (tenant A)" in read.text
    http = next(m for m in last.messages if m.dst == "client")
    assert http.text == "R1@room1: HTTP 200 (rejected prompt)" and http.hazard


def test_a_witness_trace_marks_no_violation():
    rep = check_scenario(builtin("v0.5.22"), only=["sometimes_request_succeeds"])
    story = trace_story(rep.claims[0].result.trace)
    assert not any(m.violation or m.hazard for st in story for m in st.messages)


def test_a_variant_action_is_drawn_from_what_it_changed():
    """The early-release variant overrides decode_release_deferred: no table names it, yet its
    release under an in-flight write is drawn as a hazard on the pool lane."""
    from pathlib import Path

    from kvproof.model.registry import trust_variant, variant_scope

    examples = Path(__file__).resolve().parents[1] / "examples" / "variant"
    with variant_scope():  # the variant file is code: trusted for this test only
        trust_variant(examples / "early_release.py")
        sc = load_scenario(examples / "early_release.toml")
        rep = check_scenario(sc, only=["no_write_after_release"])
        story = trace_story(rep.claims[0].result.trace)
    last = story[-1]
    assert last.label.startswith("decode_release_deferred")
    release = [m for m in last.messages if m.kind == "release"]
    assert len(release) == 1 and release[0].hazard and release[0].violation
    assert release[0].text.startswith("release p0 (R0@room0) on drain ack")


def test_a_lost_drain_ack_is_a_lost_message():
    rep = check_scenario(builtin("lost-drain-ack"), only=["quiescent_holds_nothing"])
    story = trace_story(rep.claims[0].result.trace)
    lost = [m for st in story for m in st.messages if m.kind == "lost"]
    assert [(m.src, m.dst, m.text) for m in lost] == [("prefill", "decode", "drain ack for R0@room0 lost"),
                                                     ("prefill", "decode", "drain ack for R1@room1 lost")]
