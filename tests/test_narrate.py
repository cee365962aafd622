"""Diagrams and page timelines derived from what a protocol declares (``model/narrate.py``):
minipd and vLLM declare a :class:`~kvproof.model.narrate.Narration`; their traces are drawn with
arrows, hazards and page timelines, and lassos with their loop.  Plain text, fixed width."""

from __future__ import annotations

import dataclasses

from lxml import etree

from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.explicit.search import Limits
from kvproof.checker.report.html import exposure
from kvproof.checker.report.mermaid import trace_mermaid
from kvproof.checker.report.sequence import trace_lanes, trace_story
from kvproof.checker.report.sequence_svg import sequence_svg
from kvproof.checker.report.timeline import page_timelines
from kvproof.model.narrate import Narration
from kvproof.model.scenario import builtin, load_scenario

from .minipd import EXAMPLE, registered

MINI = EXAMPLE / "kvproof_minipd" / "scenarios"


def _trace(name, claim):
    return check_scenario(builtin(name), only=[claim]).claims[0].result.trace


def _mini(name, claim):
    with registered():
        rep = check_scenario(load_scenario(MINI / f"{name}.toml"))
        return next(c for c in rep.claims if c.claim == claim).result.trace, rep


MINI_EARLY = """\
sequenceDiagram
    %% minipd-early-free · decode_reads_only_own_kv (counterexample, 8 steps)
    participant client as client
    participant prefill as prefill
    participant transfer as transfer engine
    participant decode as decode
    participant page as KV page
    Note over client,page: Step 1 · decode_prealloc(req=R0)
    client->>decode: R0 arrives
    decode->>page: reserve page for R0
    Note over client,page: Step 2 · prefill_send_kv(req=R0)
    prefill->>transfer: R0: KV write posted
    Note over client,page: Step 3 · decode_abort(req=R0)
    client->>decode: client aborts R0
    decode->>page: release page (R0) on abort
    Note over client,page: Step 4 · decode_prealloc(req=R1)
    client->>decode: R1 arrives
    decode->>page: reserve page for R1
    Note over client,page: Step 5 · prefill_send_kv(req=R1)
    prefill->>transfer: R1: KV write posted
    Note over client,page: Step 6 · transfer_write_lands(req=R1)
    transfer->>page: page ← R1's data
    Note over client,page: Step 7 · transfer_write_lands(req=R0)
    rect rgb(255, 205, 210)
    transfer->>page: R0's data lands on page, owned by R1
    end
    Note over client,page: Step 8 · decode_commit(req=R1)
    decode->>client: R1: decoded
    rect rgb(255, 205, 210)
    page->>decode: ✗ R1 reads page, page holds R0's data
    Note right of decode: violating read: decode_reads_only_own_kv fails here
    end
    decode->>page: release page (R1) when finished
"""


def test_a_new_protocols_counterexample_is_drawn_from_its_declaration():
    trace, _ = _mini("minipd-early-free", "decode_reads_only_own_kv")
    assert trace_mermaid(trace) == MINI_EARLY
    [tl] = page_timelines(trace)
    assert tl.sentence() == ("page: R0 reserved → released on abort → R1 reserved → written by R1 → "
                             "gets R0's data, not its owner R1's → read by R1 (holds R0's data) → released when finished")
    assert [e.hazard for e in tl.events] == [False, False, False, False, True, True, False]
    assert [(c.owner, c.content, c.foreign) for c in tl.cells][6:] == [("R1", "R1", False), ("R1", "R0", True),
                                                                      ("free", "R0", False)]


def test_a_safe_trace_has_no_hazard_and_no_declaration_means_notes_only():
    trace, _ = _mini("minipd-deferred-free", "sometimes_request_decodes")
    msgs = [m for st in trace_story(trace) for m in st.messages]
    assert [m.kind for m in msgs] == ["request", "reserve", "message", "write", "message", "read", "release"]
    assert not any(m.hazard for m in msgs)  # its own KV: the write and the read are not hazards
    assert [tl.sentence() for tl in page_timelines(trace)] == [
        "page: R0 reserved → written by R0 → read by R0 → released when finished"]
    # the same spec without its declaration: one note per step on the actor's lane, no timeline
    spec = trace.machine.spec
    plain = type("Undeclared", (type(spec),), {"narration": lambda self: None})(spec.cfg)
    assert [ln.key for ln in plain.lanes()] == ["decode", "prefill", "transfer"]
    inst = spec.instances[trace.actions[0]]
    assert [m.kind for m in plain.messages(1, trace.states[0], inst, trace.states[1], "x")] == ["note"]
    assert plain.page_timelines(trace.states, trace.actions) == []


def test_a_vllm_pull_counterexample_has_arrows_and_a_timeline():
    trace = _trace("vllm-pull-ttl-expiry", "no_cross_tenant_read")
    assert [ln.key for ln in trace_lanes(trace)] == ["client", "prefill", "prefill_blocks", "nixl", "decode_blocks",
                                                      "decode"]
    text = trace_mermaid(trace)
    arrows = [ln.strip() for ln in text.splitlines() if "->>" in ln]
    assert len(arrows) == 16
    for line in ("decode->>nixl: R0: READ posted", "nixl->>prefill: R0: completion notification",
                 "prefill->>prefill_blocks: q0 ← R1's KV (tenant B)", "decode->>client: R0: HTTP 200"):
        assert line in arrows, line
    lines = text.splitlines()
    i = lines.index("    nixl->>decode_blocks: R1's KV (tenant B) lands on p0, owned by R0")
    assert lines[i - 1].strip().startswith("rect rgb(")
    assert "    decode_blocks->>decode: ✗ R0 reads p0, p0 holds R1's KV (tenant B)" in lines
    assert [tl.sentence() for tl in page_timelines(trace)] == [
        "q0: R0 reserved → written by R0 → released when the lease expired while R0's READ still uses it → "
        "R1 reserved → written by R1",
        "p0: R0 reserved → gets R1's KV (tenant B), not its owner R0's → read by R0 (holds R1's KV (tenant B)) → "
        "released on finished_recving"]


def test_a_vllm_push_counterexample_marks_a_prefix_block_in_decodes_suffix_slot():
    trace = _trace("vllm-push-prefix-hit-before-48758", "decode_reads_only_own_pages")
    text = trace_mermaid(trace)
    for line in ("decode->>prefill: R0: PUSH_REG", "prefill->>nixl: R0: WRITE posted",
                 "prefill->>prefill_blocks: q0 ← R0's prefix KV (tenant A)",  # its own prefix, in prefill: no hazard
                 "decode_blocks->>decode: ✗ R0 reads p0, p0 holds R0's prefix KV (tenant A)"):
        assert f"    {line}" in text.splitlines(), line
    hazards = [m.text for st in trace_story(trace) for m in st.messages if m.hazard]
    assert hazards == ["R0's prefix KV (tenant A) lands on p0, owned by R0", "R0 reads p0; p0 holds R0's prefix KV "
                       "(tenant A)"]


def test_a_lasso_is_drawn_with_its_loop():
    trace = _trace("hold-forever-no-heartbeat", "requests_end")
    assert (trace.loop, len(trace)) == (4, 7)
    lines = trace_mermaid(trace).splitlines()
    i = lines.index("    loop steps 5-7 repeat forever")
    assert lines[i + 1] == "    Note over client,pool: Step 5 · clock_tick()" and lines[-1] == "    end"
    svg = etree.fromstring(sequence_svg(trace_story(trace), trace_lanes(trace), loop=trace.loop))
    ns = {"s": "http://www.w3.org/2000/svg"}
    [loop] = svg.xpath("//s:g[@class='loop']", namespaces=ns)
    assert (loop.get("data-first-step"), loop.get("data-last-step")) == ("5", "7")
    assert "".join(loop.itertext()) == "↺ steps 5-7 repeat forever"
    # a lasso that ends where nothing can move: marked after its last step
    stuck = _trace("lost-drain-ack", "requests_end")
    assert stuck.loop == len(stuck) == 10
    assert trace_mermaid(stuck).splitlines()[-1] == "    Note over client,pool: after step 10 nothing can move"
    svg = etree.fromstring(sequence_svg(trace_story(stuck), trace_lanes(stuck), loop=stuck.loop))
    assert "".join(svg.xpath("//s:g[@class='loop deadlock']", namespaces=ns)[0].itertext()) == \
        "⏹ after step 10 nothing can move"
    # a path (no loop) has no loop mark
    path = _trace("vllm-pull-ttl-expiry", "no_cross_tenant_read")
    assert not etree.fromstring(sequence_svg(trace_story(path), trace_lanes(path))).xpath("//s:g[@class='loop']",
                                                                                         namespaces=ns)


def test_the_headline_says_exposed_safe_or_undecided_whatever_was_expected():
    _, safe = _mini("minipd-deferred-free", "decode_reads_only_own_kv")
    _, exposed = _mini("minipd-early-free", "decode_reads_only_own_kv")
    assert exposed.claims[0].matches  # as expected, and still exposed
    assert (exposure(safe), exposure(exposed)) == ("safe", "exposed")
    cut = check_scenario(builtin("lost-drain-ack"), Limits(max_states=50), only=["held_pages_are_released"])
    assert exposure(cut) == "undecided"
    assert exposure(check_scenario(builtin("lost-drain-ack"))) == "exposed"


def test_narration_is_a_declaration_of_the_general_layer():
    import kvproof.model as m

    assert {"Narration", "Signal", "Pool", "Read", "Lane"} <= set(m.__all__)
    assert dataclasses.is_dataclass(Narration)


def test_a_block_freed_under_a_posted_read_is_the_hazard_of_its_step():
    trace = _trace("vllm-pull-ttl-expiry", "no_source_free_while_read")
    last = trace_story(trace)[-1]
    assert [(m.text, m.hazard, m.violation) for m in last.messages if m.kind == "release"] == [
        ("release q0 (R0) when the lease expired; q0 still used by R0's READ", True, True)]
    [q0] = [tl for tl in page_timelines(trace) if tl.page == "q0"]
    assert q0.events[-1].text == "released when the lease expired while R0's READ still uses it" and q0.events[-1].hazard
    # the other trace frees q0 under the same READ (a hazard), and p0 once the READ completed (none)
    other = _trace("vllm-pull-ttl-expiry", "no_cross_tenant_read")
    assert [(st.step, m.hazard) for st in trace_story(other) for m in st.messages if m.kind == "release"] == [
        (5, True), (9, False)]
