"""Rendering as plain text at a fixed width, without colour."""

from pathlib import Path

import pytest

from kvproof.checker.report.render import changes, render_reports, render_trace, to_text
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import builtin

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def race():
    return check_scenario(builtin("abort-race"))


def _trace(report, claim):
    return next(c for c in report.claims if c.claim == claim).result.trace


def test_the_abort_race_renders_exactly_as_the_golden_text(race):
    text = to_text(render_trace(_trace(race, "no_cross_tenant_read")), width=100)
    assert text == (GOLDEN / "abort-race__no_cross_tenant_read.txt").read_text()


def test_the_story_shows_the_late_write_and_the_foreign_read(race):
    text = to_text(render_trace(_trace(race, "no_cross_tenant_read")), width=100)
    assert "! p0 released while R0@room0's chunk 0 write is still in flight" in text
    assert "! late write from R0@room0 lands on p0, now reserved by R1@room1" in text
    assert "! decode R1@room1 (tenant B) reads p0 holding R0@room0's KV (tenant A)" in text
    assert "R0@room0 (A) !!" in text  # another tenant's KV in R1's page, marked without colour
    assert text.rstrip().endswith("No response is computed from another tenant's KV (the incident's 155 responses).")


def test_the_incident_shows_a_placeholder_handoff_reading_another_tenants_page():
    rep = check_scenario(builtin("incident"), only=["no_cross_tenant_read"])
    text = to_text(render_trace(rep.claims[0].result.trace), width=100)
    assert "pending error" in text and "one-token placeholder" in text
    assert "! decode R1@room1 (tenant B) reads p1 holding R0@room0's KV (tenant A)" in text


def test_changes_list_only_changed_fields(race):
    t = _trace(race, "no_write_after_release")
    assert changes(t, 1) == [("p_phase[R0]", "new", "queued")]


def test_a_single_step_can_be_shown(race):
    t = _trace(race, "no_write_after_release")
    text = to_text(render_trace(t, step=6), width=100)
    assert "Step 6  decode_abort(req=R0@room0)" in text and "Step 5" not in text


def test_the_verdict_table_at_fixed_width(race):
    text = to_text(render_reports([race]), width=120)
    lines = text.splitlines()
    assert any("abort-race" in ln and "decode_reads_only_own_pages" in ln and "violated" in ln for ln in lines)
    assert any("sometimes_abort_mid_transfer" in ln and "reached" in ln for ln in lines)
    assert not any("sometimes_" in ln and "verified" in ln for ln in lines)
    assert all(len(ln) <= 120 for ln in lines)
    assert "\x1b[" not in text
    assert lines[0].split() == ["scenario", "claim", "expected", "found", "states", "depth", "seconds"]
    assert len([ln for ln in lines if "2,958" in ln]) == len(race.claims)  # a row per claim, the state count whole


def test_the_verdict_table_cuts_no_cell_at_any_width(race):
    """At 40 columns the rows are wider than the width: they are left long, never cut (rich's
    own table would print ``violat…`` and drop the number columns)."""
    wide = to_text(render_reports([race]), width=200)
    narrow = to_text(render_reports([race]), width=40)
    assert narrow == wide
    row = next(ln for ln in narrow.splitlines() if "no_write_after_release" in ln)
    assert row.split() == ["no_write_after_release", "violated", "violated", "2,958", "6", f"{race.stats.seconds:.2f}"]
    assert "…" not in narrow


def test_several_scenarios_get_a_row_each_and_a_line_per_claim_not_as_expected(race):
    """The compact table: one row per scenario; a claim whose verdict is not the expected one
    gets a line under its scenario (what was expected, what was found); ``verbose`` gives every
    claim its row."""
    import copy

    incident = check_scenario(builtin("incident"))
    odd = copy.deepcopy(incident)
    odd.claims[2].expected = "violated"  # no_write_after_release: verified, now "expected violated"
    text = to_text(render_reports([race, odd]), width=80)
    lines = text.splitlines()
    assert lines[0].split() == ["scenario", "claims", "found", "states", "depth", "seconds"]
    assert lines[2].split() == ["abort-race", "14", "as", "expected", "2,958", "22", f"{race.stats.seconds:.2f}"]
    assert lines[3].split() == ["incident", "13", "1", "unexpected", "68", "28", f"{incident.stats.seconds:.2f}"]
    assert lines[4] == "  no_write_after_release: expected violated, found verified ✗"
    assert len(lines) == 5
    assert lines[0].index("claims") == len("abort-race  ")  # the note widens no column
    verbose = to_text(render_reports([race, odd], verbose=True), width=80).splitlines()
    assert len(verbose) == 2 + len(race.claims) + len(odd.claims)
    assert any(ln.split()[:4] == ["no_write_after_release", "violated", "verified", "✗"] for ln in verbose)


def test_trace_files_are_one_line_and_verbose_lists_them(tmp_path):
    rep = check_scenario(builtin("abort-race"), traces_dir=tmp_path)
    paths = [c.trace_path for c in rep.claims if c.trace_path]
    text = to_text(render_reports([rep]), width=60)
    assert f"4 traces written to {tmp_path}/" in text.splitlines() and len(paths) == 4
    assert not any(str(p) in text for p in paths)
    verbose = to_text(render_reports([rep], verbose=True), width=60)
    assert all(f"  {p}" in verbose.splitlines() for p in paths)  # whole, not wrapped at 60


def test_scenarios_no_search_reached_are_one_line_not_a_row_per_claim(race):
    """The time budget ran out before two scenarios: each claim of theirs is inconclusive, and
    they are named in one line after the table (a row per claim of a hundred scenarios took
    rich seconds to lay out, past the budget) - the scenario that was searched keeps its rows,
    laid out as before (the column widths given: the same text)."""
    import time

    from kvproof.checker.explicit.search import Limits

    spent = Limits(max_seconds=1.0, started=time.perf_counter() - 5)
    skipped = [check_scenario(builtin(n), spent) for n in ("incident", "pr-36988")]
    assert all(c.verdict == "inconclusive" for r in skipped for c in r.claims) and not skipped[0].stats.states
    text = to_text(render_reports([race, *skipped]), width=200)
    claims = sum(len(r.claims) for r in skipped)
    assert (f"not searched: 2 scenarios ({claims} claims, every one inconclusive): time limit 1 s reached before "
            f"them: incident, pr-36988") in " ".join(text.split())
    rows = [ln for ln in text.splitlines() if "2,958" in ln]
    assert not any("incident" in ln or "pr-36988" in ln for ln in rows)
    assert sum("abort-race" in ln for ln in rows) == 1 and len(rows) == len(race.claims)
    alone = to_text(render_reports([race]), width=200)
    assert text.startswith(alone.rstrip("\n"))  # the searched scenario's table, unchanged
    only_skipped = to_text(render_reports(skipped), width=120)
    assert "claim" not in only_skipped.split()[:3] and only_skipped.startswith("not searched: 2 scenarios")
