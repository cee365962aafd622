"""Traces as step records in JSON (``kvproof show --format json``), for scripts and dashboards.

One object per trace: the scenario, the claim, and one record per step with the action, its
actor and parameters, the fields it changed (``old`` → ``new``, by label), the spec's notes
in the engine's terms, and the messages of the sequence diagram (:mod:`.sequence`).  The ITF
file holds the same path as whole states; this is the readable view of it.
"""

from __future__ import annotations

from typing import Any

from kvproof.checker.report.focus import Focus
from kvproof.checker.report.render import changes
from kvproof.checker.report.sequence import trace_story
from kvproof.checker.traces import Trace

__all__ = ["trace_records"]


def trace_records(trace: Trace, step: int | None = None, only: Focus | None = None) -> dict[str, Any]:
    """The JSON-ready view of ``trace`` (every step, or only ``step``; with ``only``, the steps
    and changes that concern its tokens)."""
    spec = trace.machine.spec
    stories = {st.step: st for st in trace_story(trace)}
    records = []
    for k in range(1, len(trace.states)):
        if step is not None and k != step:
            continue
        inst = trace.machine.instances[trace.actions[k - 1]]
        st = stories[k]
        rows = [{"field": n, "old": o, "new": v} for n, o, v in changes(trace, k)
                if only is None or only.change(n, o, v)]
        notes = [{"level": n.level, "text": n.text} for n in st.notes
                 if only is None or only.text(n.text, trace.names[k])]
        if only and not rows and not notes:
            continue
        records.append({
            "step": k,
            "action": inst.name,
            "actor": inst.action.actor,
            "params": {p: spec.domain(p).label(v) for p, v in zip(inst.action.params, inst.args)},
            "label": st.label,
            "names": dict(trace.names[k]),
            "changes": rows,
            "notes": notes,
            "messages": [{"from": m.src, "to": m.dst, "text": m.text, "kind": m.kind, "hazard": m.hazard,
                          "violation": m.violation} for m in st.messages],
        })
    return {
        "scenario": trace.scenario.name,
        "title": trace.scenario.title,
        "claim": trace.claim,
        "kind": trace.kind,
        "length": len(trace),
        "claim_doc": spec.claim(trace.claim).doc,
        "steps": records,
    }
