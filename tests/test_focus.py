"""Following a page, a request or a field through a trace."""

import pytest

from kvproof.checker.report.focus import Focus, FocusError
from kvproof.checker.report.render import render_trace, to_text
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import builtin


@pytest.fixture(scope="module")
def trace():
    return check_scenario(builtin("abort-race"), only=["no_cross_tenant_read"]).claims[0].result.trace


def test_matching_by_name_index_and_value(trace):
    f = Focus.of(trace, ["p0"])
    assert f.change("owner[p0]", "free", "R0")
    assert f.change("dest[R1, chunk 0]", "none", "p0")  # the page handed to R1
    assert not f.change("owner[p1]", "free", "R0") and not f.change("p_phase[R0]", "new", "queued")
    assert f.text("late write from R0 lands on p0, now reserved by R1")
    assert not f.text("p01 is another page")
    assert Focus.of(trace, ["owner"]).change("owner[p0]", "R0", "free")
    assert Focus.of(trace, ["owner[p0]"]).change("owner[p0]", "R0", "free")


def test_unknown_names_are_bad_input(trace):
    with pytest.raises(FocusError, match="--only p7: not a field or an index label of this trace"):
        Focus.of(trace, ["p7"])


def test_render_follows_one_request(trace):
    text = to_text(render_trace(trace, only=Focus.of(trace, ["R1"])), width=100)
    steps = [ln.split()[1] for ln in text.splitlines() if ln.startswith("Step ")]
    assert steps == ["2", "8", "9", "10", "11", "12", "13", "14", "15"]
    assert "decode pages" not in text and "p_phase[R0]" not in text
    assert "owner[p0]: free → R1" in text and text.rstrip().endswith("(the incident's 155 responses).")
