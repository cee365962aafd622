"""Mermaid sequence diagrams of traces."""

from kvproof.checker.focus import Focus
from kvproof.checker.mermaid import trace_mermaid
from kvproof.checker.run import check_scenario
from kvproof.spec.scenario import builtin


def _trace(name, claim):
    return check_scenario(builtin(name), only=[claim]).claims[0].result.trace


def test_participants_steps_and_the_marked_read():
    text = trace_mermaid(_trace("abort-race", "no_cross_tenant_read"))
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram"
    assert [ln.strip() for ln in lines if ln.strip().startswith("participant")] == [
        "participant client as client", "participant prefill as prefill scheduler",
        "participant transfer as transfer engine", "participant decode as decode scheduler",
        "participant pool as page pool"]
    assert sum(1 for ln in lines if ln.strip().startswith("Note over client,pool: Step ")) == 15
    i = lines.index("    pool->>decode: ✗ R1 reads p0, p0 holds R0's KV (tenant A)")
    assert lines[i - 1].strip().startswith("rect rgb(") and "violating read" in lines[i + 1]
    assert lines[i + 2].strip() == "end"
    assert "transfer->>pool: late write from R0 lands on p0, now R1's" in text
    assert ";" not in text.replace("&#59;", "")  # statement separators would split messages


def test_lost_messages_end_in_a_cross_and_focus_filters():
    t = _trace("lost-drain-ack", "quiescent_holds_nothing")
    assert "prefill-xdecode: drain ack for R0 lost" in trace_mermaid(t)
    focused = trace_mermaid(t, Focus.of(t, ["R1"]))
    assert "R1" in focused and "drain ack for R0 lost" not in focused
