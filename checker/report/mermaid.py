"""Traces as Mermaid sequence diagrams (``kvproof show --format mermaid``).

The same messages as the HTML report's SVG diagram (:mod:`.sequence`), written as Mermaid
text that GitHub, GitLab and most wikis render in a fenced ``mermaid`` block.  Each step opens
with a note naming its action; hazards sit in a red ``rect`` block; the violating read of a
counterexample is followed by a note that says so; a lost message ends in a cross; the steps a
liveness counterexample (a lasso) repeats forever sit in a ``loop`` block.
"""

from __future__ import annotations

from kvproof.checker.report.focus import Focus
from kvproof.checker.report.sequence import Message, trace_lanes, trace_story
from kvproof.checker.traces import Trace

__all__ = ["trace_mermaid"]

def _clean(text: str) -> str:
    """Message text Mermaid accepts: no statement separators or comment markers."""
    return text.replace(";", ",").replace("#", "no.").replace("%%", "%").replace("\n", " ")


def _line(m: Message, first: str, last: str) -> str:
    text = _clean(("✗ " if m.violating_read else "") + m.text)
    if m.src is None or m.dst is None:
        return f"Note over {first},{last}: {text}"
    if m.src == m.dst:
        return f"Note over {m.src}: {text}"
    arrow = "-x" if m.kind == "lost" else "->>"
    return f"{m.src}{arrow}{m.dst}: {text}"


def trace_mermaid(trace: Trace, only: Focus | None = None) -> str:
    """``trace`` as a Mermaid ``sequenceDiagram``; with ``only``, just the messages that
    mention its tokens."""
    out = ["sequenceDiagram",
           f"    %% {_clean(trace.scenario.name)} · {trace.claim} ({trace.kind}, {len(trace)} steps)"]
    lanes = trace_lanes(trace)
    first, last_lane = lanes[0].key, lanes[-1].key
    out += [f"    participant {ln.key} as {ln.title}" for ln in lanes]
    story = trace_story(trace)
    last = story[-1].step if story else 0
    looping = False
    for st in story:
        if trace.loop is not None and st.step == trace.loop + 1:
            out.append(f"    loop steps {st.step}-{last} repeat forever")
            looping = True
        msgs = [m for m in st.messages if only is None or only.text(m.text, trace.names[st.step])]
        if not msgs:
            continue
        out.append(f"    Note over {first},{last_lane}: Step {st.step} · {_clean(st.label)}")
        for m in msgs:
            if m.hazard or m.violation:
                out += ["    rect rgb(255, 205, 210)", f"    {_line(m, first, last_lane)}"]
                if m.violating_read:
                    out.append(f"    Note right of {m.dst}: violating read: {trace.claim} fails here")
                out.append("    end")
            else:
                out.append(f"    {_line(m, first, last_lane)}")
    if looping:
        out.append("    end")
    elif trace.loop is not None:
        out.append(f"    Note over {first},{last_lane}: after step {last} nothing can move")
    return "\n".join(out) + "\n"
