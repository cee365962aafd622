"""Trace diffs: the first divergence and what differs there, with known answers."""

from dataclasses import replace

import pytest

from kvproof.checker.report.diff import diff_traces, render_diff
from kvproof.checker.report.render import to_text
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import builtin


def _trace(name, claim="no_cross_tenant_read"):
    return check_scenario(builtin(name), only=[claim]).claims[0].result.trace


@pytest.fixture(scope="module")
def race():
    return _trace("abort-race")


def test_immediate_release_and_timeout_release_part_at_the_abort(race):
    d = diff_traces(race, _trace("pr-35049-timeout-unbounded"))
    assert (d.common, d.diverge) == (6, 7)
    assert d.settings == [("engine.release_policy", "immediate", "drain_ack_or_timeout")]
    assert d.fields == [("d_phase[R0]", "ended", "held"), ("armed[R0]", "no", "yes"), ("owner[p0]", "free", "R0")]
    text = to_text(render_diff(d, "a.json", "b.json"), width=120)
    assert "first divergence at step 7:" in text and "owner[p0]: A free · B R0" in text


def test_identical_traces(race):
    d = diff_traces(race, race)
    assert d.identical and d.diverge is None and d.common == 15 and not d.fields
    assert "identical: the same 15 steps" in to_text(render_diff(d), width=100)


def test_a_prefix_diverges_where_it_ends(race):
    short = replace(race, actions=race.actions[:10], states=race.states[:11])
    d = diff_traces(short, race)
    assert (d.common, d.diverge, d.fields) == (10, 11, [])
    assert "A: (ends: 10 steps)" in to_text(render_diff(d), width=100)


def test_different_sizes_compare_on_shared_fields(race):
    d = diff_traces(race, _trace("incident"))
    assert d.diverge == 5  # both admit and publish R0 the same way; R0's forward fills one page or two
    assert ("src_owner[q1]", "free", "R0") in d.fields
    assert ("sizes.decode_pages", 1, 3) in d.settings
