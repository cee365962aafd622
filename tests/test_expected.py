"""Every scenario gets its expected verdicts; traces/expected.toml and the committed traces stay in
step with the spec."""

from pathlib import Path

import pytest

from kvproof.checker.expected import expected_table, read_expected
from kvproof.checker.explicit.liveness import lasso_is_fair
from kvproof.checker.traces import read_trace, trace_filename
from kvproof.model.replay import replay
from kvproof.model.scenario import builtin_names, builtins

from .conftest import checked


TRACES = Path(__file__).resolve().parents[1] / "traces"


@pytest.fixture(scope="module")
def reports():
    return [checked(sc.name) for sc in builtins()]


@pytest.mark.parametrize("name", builtin_names())
def test_every_scenario_gets_its_expected_verdicts(name):
    rep = checked(name)
    assert rep.complete
    wrong = [(c.claim, c.expected, c.verdict) for c in rep.claims if not c.matches]
    assert wrong == []


def test_expected_table_matches_a_fresh_run(reports):
    stored = read_expected(TRACES / "expected.toml")
    assert stored == expected_table(reports)


def test_a_table_with_the_old_witness_words_reads_as_the_new_ones(tmp_path):
    old = tmp_path / "old.toml"
    old.write_text('[abort-race.verdicts]\nno_cross_tenant_read = "violated"\nsometimes_abort_mid_transfer = "verified"\n'
                   '[mine.verdicts]\nsometimes_request_succeeds = "violated"\n')
    table = read_expected(old, {"mine": {"sometimes_request_succeeds": "witness"}})
    assert table["mine"]["verdicts"] == {"sometimes_request_succeeds": "unreachable"}
    assert read_expected(old)["abort-race"]["verdicts"] == {"no_cross_tenant_read": "violated",
                                                           "sometimes_abort_mid_transfer": "reached"}


def test_the_committed_traces_are_exactly_the_catalogues_counterexamples(reports):
    wanted = {trace_filename(r.scenario.name, c.claim): c for r in reports for c in r.claims
              if c.kind != "witness" and c.verdict == "violated"}
    stored = {p.name for p in TRACES.glob("*.itf.json")}
    assert stored == set(wanted)


@pytest.mark.parametrize("path", sorted(TRACES.glob("*.itf.json")), ids=lambda p: p.name)
def test_every_committed_trace_replays_and_still_violates(path):
    t = read_trace(path)
    assert replay(t.machine, t.actions, t.states) is None
    if t.loop is not None:  # a lasso of a liveness claim
        assert lasso_is_fair(t.machine, t.claim, t.states, t.actions, t.loop) is None
        return
    assert t.machine.claim_hits(t.claim, t.states[-1])
    assert not any(t.machine.claim_hits(t.claim, s) for s in t.states[:-1])  # it is hit only at the end
