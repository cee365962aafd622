"""Page timelines: each page's owners and contents over a trace, in one line and per step."""

from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.report.timeline import page_timelines
from kvproof.model.scenario import builtin


def _timelines(name, claim):
    rep = check_scenario(builtin(name), only=[claim])
    trace = rep.claims[0].result.trace
    return trace, {tl.page: tl for tl in page_timelines(trace)}


def test_the_abort_race_page_story():
    _, tl = _timelines("abort-race", "no_cross_tenant_read")
    assert tl["p0"].sentence() == (
        "p0: R0@room0 reserved → released on abort while R0@room0's write is in flight → R1@room1 reserved → "
        "written by R1@room1 → late write from R0@room0 → read by R1@room1 (holds R0@room0's KV (tenant A)) → released when finished")
    hazards = [(e.step, e.text) for e in tl["p0"].events if e.hazard]
    assert hazards == [(7, "released on abort while R0@room0's write is in flight"), (13, "late write from R0@room0"),
                       (15, "read by R1@room1 (holds R0@room0's KV (tenant A))")]


def test_the_timeout_race_is_released_by_timeout():
    _, tl = _timelines("pr-35049-timeout-unbounded", "no_cross_tenant_read")
    assert tl["p0"].sentence().startswith(
        "p0: R0@room0 reserved → released by timeout while R0@room0's write is in flight → R1@room1 reserved")


def test_the_incident_reads_a_page_never_written_for_it():
    _, tl = _timelines("incident", "no_cross_tenant_read")
    assert tl["p1"].sentence() == (
        "p1: R0@room0 reserved → written by R0@room0 → read by R0@room0 → released when finished → "
        "R1@room1 reserved → read by R1@room1 (holds R0@room0's KV (tenant A)) → released when finished")
    assert tl["p2"].events[1].text == "read by R1@room1 (holds nothing written)" and tl["p2"].hazard
    assert not tl["p0"].hazard  # p0 was rewritten by R1's placeholder chunk


def test_cells_follow_owner_and_content_and_flag_foreign_content():
    trace, tl = _timelines("abort-race", "no_cross_tenant_read")
    cells = tl["p0"].cells
    assert len(cells) == len(trace) + 1
    assert (cells[0].owner, cells[0].content) == ("free", "·")
    assert (cells[13].owner, cells[13].content, cells[13].foreign) == ("R1@room1", "R0@room0", True)
    assert (cells[12].owner, cells[12].content, cells[12].foreign) == ("R1@room1", "R1@room1", False)


def test_a_source_page_freed_under_a_write():
    _, tl = _timelines("source-reuse", "no_source_free_while_read")
    assert tl["q0"].hazard and tl["q0"].sentence().endswith("freed while R0@room0's write still reads it")


def test_quiet_pages_are_left_out_unless_asked():
    trace, tl = _timelines("abort-race", "no_write_after_release")
    everything = page_timelines(trace, include_quiet=True)
    assert {t.page for t in everything} == {"p0", "q0", "q1"}
    assert "q1" not in tl  # R1 never reached prefill's forward in this 6-step trace
