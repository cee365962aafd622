"""Sequence diagrams of traces, drawn as standalone SVG (no script, no external reference).

One lane per participant the protocol names (:func:`~kvproof.checker.report.sequence.trace_lanes`;
e.g. client, prefill scheduler, transfer engine, decode scheduler, page pool), one block per step with the step's
action on the left, one arrow per message, and the step's hazard notes in red under its
arrows.  The markup is meant to be read by machines too:

* every lane is ``<g class="lane" data-lane="KEY">`` with its title as text;
* every arrow is ``<g class="msg KIND ..." data-step="K" data-from="LANE" data-to="LANE">``
  with the classes ``hazard`` (an isolation failure), ``violation`` (the last step of a
  counterexample) and ``violating-read`` (the read after which the claim fails);
* the loop of a liveness counterexample (a lasso) is ``<g class="loop" data-first-step="J"
  data-last-step="N">``: a dashed frame around the steps that repeat forever, with the
  sentence that says so; a lasso that ends where nothing can move has a ``loop deadlock``
  mark after its last step.
"""

from __future__ import annotations

from html import escape

from kvproof.checker.report.sequence import Lane, Message, StepStory

__all__ = ["sequence_svg"]

LEFT = 250  # the step column
LANE_W = 190
TOP = 56  # below the lane titles
ROW = 30  # one message
NOTE_ROW = 17  # one hazard note
GAP = 10  # between steps
CHAR_W = 6.3  # average width of a character at the label font size, for placing labels

HAZARD = "#c62828"
INK = "#263238"
REQUEST = "#1565c0"
LOOP = "#ef6c00"

_STYLE = f"""
text {{ font-family: 'DejaVu Sans', Arial, sans-serif; font-size: 11px; fill: {INK}; }}
.lane-title {{ font-weight: bold; font-size: 12px; }}
.lane rect {{ fill: #eceff1; stroke: #90a4ae; }}
.lifeline {{ stroke: #b0bec5; stroke-dasharray: 4 4; }}
.step-no {{ font-weight: bold; }}
.step-action {{ font-family: 'DejaVu Sans Mono', monospace; font-size: 10.5px; fill: #455a64; }}
.step-sep {{ stroke: #eceff1; }}
.msg line, .msg path {{ stroke: {INK}; stroke-width: 1.3; fill: none; }}
.msg text {{ paint-order: stroke; stroke: #ffffff; stroke-width: 3px; stroke-linejoin: round; }}
.msg.request line {{ stroke: {REQUEST}; }}
.msg.hazard line, .msg.hazard path {{ stroke: {HAZARD}; stroke-width: 2.2; }}
.msg.hazard text {{ fill: {HAZARD}; font-weight: bold; }}
.msg.violation line {{ stroke-width: 3.2; }}
.msg.lost line {{ stroke-dasharray: 5 3; }}
.msg.note rect {{ fill: #fffde7; stroke: #fbc02d; }}
.msg.tick rect {{ fill: #f5f5f5; stroke: #e0e0e0; }}
.hazard-note {{ fill: {HAZARD}; font-style: italic; }}
.violation-mark circle {{ fill: {HAZARD}; }}
.violation-mark text {{ fill: #ffffff; font-weight: bold; font-size: 12px; stroke: none; }}
.loop rect {{ fill: none; stroke: {LOOP}; stroke-width: 2; stroke-dasharray: 6 3; }}
.loop text {{ fill: {LOOP}; font-weight: bold; }}
"""


def _x(lanes: tuple[Lane, ...], lane: str) -> float:
    i = [ln.key for ln in lanes].index(lane)
    return LEFT + LANE_W * i + LANE_W / 2


def _width(lanes: tuple[Lane, ...]) -> int:
    return LEFT + LANE_W * len(lanes) + 10


def _label_x(lanes: tuple[Lane, ...], x1: float, x2: float, text: str) -> float:
    """Centre of the label: the arrow's middle, shifted so the label stays inside the drawing."""
    half = len(text) * CHAR_W / 2
    mid = (x1 + x2) / 2
    return max(LEFT + half + 4, min(_width(lanes) - half - 4, mid))


def _row(m: Message) -> int:
    return ROW + 8 if m.violating_read else ROW


def _message(lanes: tuple[Lane, ...], m: Message, y: float, ident: str) -> str:
    classes = ["msg", m.kind] + (["hazard"] if m.hazard else []) + (["violation"] if m.violation else [])
    if m.violating_read:
        classes.append("violating-read")
    head = (f'<g class="{" ".join(classes)}" data-step="{m.step}" data-from="{m.src or "all"}" '
            f'data-to="{m.dst or "all"}"><title>{escape(m.text)}</title>')
    text = escape(m.text if not m.violating_read else "✗ " + m.text)
    if m.kind == "tick" or m.src is None:
        x1, x2 = LEFT + 6, _width(lanes) - 6
        return (head + f'<rect x="{x1}" y="{y + 4}" width="{x2 - x1}" height="20" rx="3"/>'
                f'<text x="{(x1 + x2) / 2}" y="{y + 18}" text-anchor="middle">{text}</text></g>')
    x1, x2 = _x(lanes, m.src), _x(lanes, m.dst)
    if m.src == m.dst:
        w = min(LANE_W * 2 - 10, len(m.text) * CHAR_W + 16)
        cx = max(LEFT + w / 2 + 2, min(_width(lanes) - w / 2 - 2, x1))
        return (head + f'<rect x="{cx - w / 2}" y="{y + 4}" width="{w}" height="20" rx="3"/>'
                f'<text x="{cx}" y="{y + 18}" text-anchor="middle">{text}</text></g>')
    marker = f"{ident}-arrow-hazard" if m.hazard else f"{ident}-arrow"
    ly = y + _row(m) - 7
    parts = [head]
    if m.kind == "lost":
        xe = x1 + (x2 - x1) * 0.7
        parts.append(f'<line x1="{x1}" y1="{ly}" x2="{xe}" y2="{ly}"/>'
                     f'<path d="M{xe - 5} {ly - 5} L{xe + 5} {ly + 5} M{xe - 5} {ly + 5} L{xe + 5} {ly - 5}"/>')
    else:
        parts.append(f'<line x1="{x1}" y1="{ly}" x2="{x2}" y2="{ly}" marker-end="url(#{marker})"/>')
    lift = 13 if m.violating_read else 5  # clear of the mark on the line
    parts.append(f'<text x="{_label_x(lanes, x1, x2, m.text)}" y="{ly - lift}" text-anchor="middle">{text}</text>')
    if m.violating_read:
        parts.append(f'<g class="violation-mark"><circle cx="{x1}" cy="{ly}" r="8"/>'
                     f'<text x="{x1}" y="{ly + 4}" text-anchor="middle">!</text></g>')
    parts.append("</g>")
    return "".join(parts)


def sequence_svg(steps: list[StepStory], lanes: tuple[Lane, ...], title: str = "", ident: str = "seq",
                 loop: int | None = None, loop_text: str = "") -> str:
    """The sequence diagram of ``steps`` between ``lanes`` as an ``<svg>`` element (inline in
    HTML, or a file); ``ident`` prefixes its element ids, so several diagrams can share one
    page.  ``loop`` is a lasso's loop state (:attr:`~kvproof.checker.traces.Trace.loop`):
    steps ``loop + 1`` to the last repeat forever, framed and labelled ``loop_text``."""
    body: list[str] = []
    y = TOP
    loop_top = None
    for st in steps:
        top = y
        if loop is not None and st.step == loop + 1:
            loop_top = top
        body.append(f'<line class="step-sep" x1="0" y1="{top}" x2="{_width(lanes)}" y2="{top}"/>')
        body.append(f'<text class="step-no" x="8" y="{top + 18}">Step {st.step}</text>'
                    f'<text class="step-action" x="8" y="{top + 32}">{escape(st.label)}</text>')
        for m in st.messages:
            body.append(_message(lanes, m, y, ident))
            y += _row(m)
        for note in st.notes:
            if note.level == "hazard":
                y += NOTE_ROW
                body.append(f'<text class="hazard-note" x="{LEFT + 8}" y="{y - 4}">! {escape(note.text)}</text>')
        y = max(y, top + 40) + GAP
    if loop is not None:
        last = steps[-1].step if steps else 0
        w = _width(lanes)
        text = escape(loop_text or (f"↺ steps {loop + 1}-{last} repeat forever" if loop < last
                                    else f"after step {last} nothing can move"))
        if loop < last and loop_top is not None:
            body.append(f'<g class="loop" data-first-step="{loop + 1}" data-last-step="{last}">'
                        f'<rect x="3" y="{loop_top + 2}" width="{w - 6}" height="{y - loop_top + ROW - 4}" rx="6"/>'
                        f'<text x="{LEFT + 8}" y="{y + ROW - 12}">{text}</text></g>')
        else:
            body.append(f'<g class="loop deadlock" data-first-step="{last + 1}" data-last-step="{last}">'
                        f'<text x="{LEFT + 8}" y="{y + ROW - 12}">⏹ {text}</text></g>')
        y += ROW
    height = y + 10
    drawn = []
    for ln in lanes:
        x = _x(lanes, ln.key)
        drawn.append(f'<g class="lane" data-lane="{ln.key}"><rect x="{x - 80}" y="10" width="160" height="30" rx="4"/>'
                     f'<text class="lane-title" x="{x}" y="30" text-anchor="middle">{escape(ln.title)}</text>'
                     f'<line class="lifeline" x1="{x}" y1="40" x2="{x}" y2="{height}"/></g>')
    defs = ("<defs>"
            f'<marker id="{ident}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="{INK}"/></marker>'
            f'<marker id="{ident}-arrow-hazard" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="{HAZARD}"/></marker>'
            "</defs>")
    w = _width(lanes)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{w}" height="{height}" '
            f'viewBox="0 0 {w} {height}" role="img" aria-label="{escape(title or "sequence diagram")}">'
            f"<title>{escape(title)}</title><style>{_STYLE}</style>{defs}"
            + "".join(drawn) + "".join(body) + "</svg>")
