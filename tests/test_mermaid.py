"""Mermaid sequence diagrams of traces."""

from kvproof.checker.report.focus import Focus
from kvproof.checker.report.mermaid import trace_mermaid
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import builtin


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
    i = lines.index("    pool->>decode: ✗ R1@room1 reads p0, p0 holds R0@room0's KV (tenant A)")
    assert lines[i - 1].strip().startswith("rect rgb(") and "violating read" in lines[i + 1]
    assert lines[i + 2].strip() == "end"
    assert "transfer->>pool: late write from R0@room0 lands on p0, now R1@room1's" in text
    assert ";" not in text.replace("&#59;", "")  # statement separators would split messages


def test_lost_messages_end_in_a_cross_and_focus_filters():
    t = _trace("lost-drain-ack", "quiescent_holds_nothing")
    assert "prefill-xdecode: drain ack for R0@room0 lost" in trace_mermaid(t)
    focused = trace_mermaid(t, Focus.of(t, ["R1"]))
    assert "R1@room1" in focused and "drain ack for R0@room0 lost" not in focused


def test_real_mermaid_parses_and_renders_the_diagrams(tmp_path):
    """With Mermaid's own bundle (``KVPROOF_MERMAID_JS``, fetched by ``.ci/run`` with ``npm pack``),
    headless Chromium parses and renders the diagrams of five kinds of trace (SGLang's, vLLM's,
    a lasso's loop)."""
    import json
    import os
    from pathlib import Path

    import pytest

    from .browser import run_chromium

    bundle = os.environ.get("KVPROOF_MERMAID_JS")
    if not bundle or not Path(bundle).is_file():
        if os.environ.get("KVPROOF_REQUIRE_BROWSER") == "1":
            pytest.fail("KVPROOF_REQUIRE_BROWSER=1 but KVPROOF_MERMAID_JS names no mermaid.min.js")
        pytest.skip("set KVPROOF_MERMAID_JS to mermaid's dist/mermaid.min.js (npm pack mermaid) to run this")
    texts = [trace_mermaid(_trace(n, c)) for n, c in (("abort-race", "no_cross_tenant_read"),
                                                      ("incident", "no_cross_tenant_read"),
                                                      ("lost-drain-ack", "quiescent_holds_nothing"),
                                                      ("vllm-pull-ttl-expiry", "no_cross_tenant_read"),
                                                      ("hold-forever-no-heartbeat", "requests_end"))]
    assert "->>" in texts[3] and "loop steps 5-7 repeat forever" in texts[4]  # vLLM arrows; a lasso's loop
    texts.append("sequenceDiagram\n    client->>: broken\n")  # the check must be able to fail
    page = tmp_path / "mermaid.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<script src="{Path(bundle).resolve().as_uri()}"></script></head><body><pre id="out">pending</pre><script>'
        f"const texts = {json.dumps(texts)};"
        "mermaid.initialize({startOnLoad: false});"
        "(async () => { const out = [];"
        "  for (const [i, t] of texts.entries()) {"
        "    try { const r = await mermaid.render('d' + i, t); out.push(r.svg.includes('<svg') ? 'ok' : 'empty'); }"
        "    catch (e) { out.push('error'); } }"
        "  document.getElementById('out').textContent = out.join(' '); })();"
        "</script></body></html>", encoding="utf-8")
    dom = run_chromium(tmp_path / "profile", "--allow-file-access-from-files", "--virtual-time-budget=30000",
                       "--dump-dom", page.as_uri())
    from lxml import html as lxml_html

    assert lxml_html.fromstring(dom).xpath("string(//pre[@id='out'])") == "ok ok ok ok ok error"
