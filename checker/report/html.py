"""The HTML report: one self-contained page with the verdicts and every counterexample.

``kvproof report`` (and ``kvproof check --html FILE``) write it.  The page loads nothing: its
styles are inline, its diagrams are inline SVG drawn by :mod:`.sequence_svg`, and it has no
script, so it opens on an air-gapped machine and in a CI artifact viewer alike.

It opens with the headline: for each configuration, *exposed* (a safety or liveness claim is
violated, which claims), *safe* (every one verified by a complete search) or *undecided*,
whatever the scenario expected; then whether the verdicts match their expectations.

For every counterexample (of an invariant, or of a liveness claim: a lasso, its loop framed and
said in words) the page shows

* the sequence diagram: a lane per actor, an arrow per message or write, the foreign write and
  the violating read in red;
* the page timeline: one line per page telling its owners and contents over the steps, and a
  grid of owner/content after every step, with the foreign write and the read highlighted;
* the step list with changed fields, exactly as ``kvproof show`` prints it.
"""

from __future__ import annotations

import datetime as _dt
import io
from html import escape
from pathlib import Path
from typing import Iterable

from rich.console import Console

from kvproof import __version__
from kvproof.checker.atomic import write_text_atomic
from kvproof.checker.outcome import WORDINGS, Inconclusive, Verified
from kvproof.checker.report.render import render_trace, verdict_sentence
from kvproof.checker.results import ScenarioReport, Violated
from kvproof.checker.report.sequence import trace_lanes, trace_story
from kvproof.checker.report.sequence_svg import sequence_svg
from kvproof.checker.report.timeline import PageTimeline, page_timelines
from kvproof.checker.traces import Trace

__all__ = ["report_html", "write_report", "counterexample_id", "counterexamples", "exposure"]

_CSS = """
body { font-family: 'DejaVu Sans', Arial, sans-serif; margin: 24px auto; max-width: 1320px; color: #263238; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; border-bottom: 2px solid #cfd8dc; padding-bottom: 4px; margin-top: 40px; }
h3 { font-size: 15px; margin-top: 22px; }
.meta { color: #607d8b; font-size: 13px; }
table.verdicts { border-collapse: collapse; font-size: 13px; }
table.verdicts th, table.verdicts td { border-bottom: 1px solid #eceff1; padding: 3px 10px; text-align: left; }
table.verdicts td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #2e7d32; }
.bad { color: #c62828; font-weight: bold; }
.unknown { color: #ef6c00; font-weight: bold; }
.summary { font-size: 15px; padding: 10px 14px; border-radius: 4px; background: #eceff1; }
.summary.bad { background: #ffebee; }
.summary.unknown { background: #fff3e0; }
.summary.ok { background: #e8f5e9; }
.headline { font-size: 16px; margin-bottom: 4px; }
ul.exposure { list-style: none; padding-left: 0; font-size: 14px; margin-top: 4px; }
ul.exposure li { padding: 4px 10px; margin: 2px 0; border-radius: 4px; }
ul.exposure li.exposed { background: #ffebee; color: #b71c1c; }
ul.exposure li.safe { background: #e8f5e9; color: #1b5e20; }
ul.exposure li.undecided { background: #fff3e0; color: #e65100; }
p.loop { color: #ef6c00; font-weight: bold; }
.claim-doc { font-style: italic; color: #455a64; }
.diagram { overflow-x: auto; border: 1px solid #eceff1; }
ul.pages { list-style: none; padding-left: 0; font-size: 13px; }
ul.pages li { margin: 3px 0; }
ul.pages .page { font-weight: bold; font-family: 'DejaVu Sans Mono', monospace; }
.hazard { color: #c62828; font-weight: bold; }
table.grid { border-collapse: collapse; font-size: 11px; font-family: 'DejaVu Sans Mono', monospace; }
table.grid th { font-weight: normal; color: #607d8b; padding: 2px 4px; }
table.grid td { border: 1px solid #eceff1; padding: 2px 4px; text-align: center; min-width: 34px; }
table.grid td .owner { display: block; color: #607d8b; }
table.grid td.event { border: 2px solid #546e7a; }
table.grid td.foreign .content { color: #c62828; font-weight: bold; }
table.grid td.hazard-event { background: #ffcdd2; border: 2px solid #c62828; }
pre.steps { font-family: 'DejaVu Sans Mono', Menlo, consolas, monospace; font-size: 12px; background: #fafafa;
  padding: 10px; overflow-x: auto; }
"""

_VERDICT_CLASS = {True: "ok", False: "bad"}


def counterexample_id(scenario: str, claim: str) -> str:
    """The page anchor of one counterexample."""
    return f"cx-{scenario}-{claim}"


def _drawn(c) -> bool:
    """A claim whose counterexample the page draws: a violated invariant (a path) or liveness
    claim (a lasso)."""
    return isinstance(c.result, Violated) and c.result.trace is not None and c.kind in ("invariant", "liveness")


def counterexamples(reports: Iterable[ScenarioReport]) -> list[Trace]:
    """The traces the page draws, in order: every violated invariant's and liveness claim's."""
    return [c.result.trace for r in reports for c in r.claims if _drawn(c)]


def exposure(rep: ScenarioReport) -> str:
    """What the search says of the configuration itself, whatever was expected: ``exposed``
    (a safety or liveness claim is violated), ``safe`` (every one of them verified by a
    complete search) or ``undecided`` (none violated, some not decided)."""
    claims = [c for c in rep.claims if c.kind in ("invariant", "liveness")]
    if any(c.verdict == "violated" for c in claims):
        return WORDINGS["report"][Violated]
    safe = rep.complete and all(c.verdict == "verified" for c in claims)
    return WORDINGS["report"][Verified if safe else Inconclusive]


def _headline(reports: list[ScenarioReport]) -> str:
    """One line per configuration state: exposed (and by which claims), safe, undecided."""
    exposed, safe, undecided = (WORDINGS["report"][cls] for cls in (Violated, Verified, Inconclusive))
    by: dict[str, list[ScenarioReport]] = {exposed: [], safe: [], undecided: []}
    for rep in reports:
        by[exposure(rep)].append(rep)
    parts = []
    for rep in by[exposed]:
        bad = [c.claim for c in rep.claims if c.kind in ("invariant", "liveness") and c.verdict == "violated"]
        parts.append(f'<li class="exposed" data-scenario="{escape(rep.scenario.name)}"><b>{escape(rep.scenario.name)}: '
                     f'exposed</b>: {len(bad)} claim{"s" if len(bad) != 1 else ""} violated ({escape(", ".join(bad))})</li>')
    for rep in by[safe]:
        parts.append(f'<li class="safe" data-scenario="{escape(rep.scenario.name)}"><b>{escape(rep.scenario.name)}: '
                     "safe</b>: every safety and liveness claim verified by a complete search</li>")
    for rep in by[undecided]:
        parts.append(f'<li class="undecided" data-scenario="{escape(rep.scenario.name)}"><b>{escape(rep.scenario.name)}: '
                     "undecided</b>: nothing violated, but not every claim decided</li>")
    counts = ", ".join(f"{len(v)} {k}" for k, v in by.items() if v)
    return (f'<p class="headline">Is the configuration safe? {counts} '
            '(whatever the scenarios expect; whether the verdicts are as expected is below)</p>'
            f'<ul class="exposure">{"".join(parts)}</ul>')


def _verdict_table(reports: list[ScenarioReport]) -> str:
    rows = []
    for rep in reports:
        for n, c in enumerate(rep.claims):
            cls = "ok" if c.matches else ("unknown" if c.verdict == "inconclusive" else "bad")
            found = escape(c.verdict) + ("" if c.matches else " ✗")
            if _drawn(c):
                found = f'<a href="#{counterexample_id(rep.scenario.name, c.claim)}">{found}</a>'
            depth = c.depth if c.depth is not None else rep.stats.depth
            rows.append(
                f"<tr><td>{escape(rep.scenario.name) if n == 0 else ''}</td><td>{escape(c.claim)}</td>"
                f"<td>{escape(c.expected)}</td><td class=\"{cls}\">{found}</td>"
                f"<td class=\"num\">{rep.stats.states:,}</td><td class=\"num\">{depth}</td>"
                f"<td class=\"num\">{rep.stats.seconds:.2f}</td></tr>")
        if not rep.complete:
            rows.append(f"<tr><td></td><td colspan=\"6\" class=\"unknown\">search incomplete: {escape(rep.reason)}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("scenario", "claim", "expected", "found", "states", "depth", "seconds"))
    return f'<table class="verdicts"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _summary(reports: list[ScenarioReport]) -> str:
    rows = [c for r in reports for c in r.claims]
    wrong = sum(1 for c in rows if not c.matches and c.verdict != "inconclusive")
    unknown = sum(1 for c in rows if c.verdict == "inconclusive")
    if wrong:
        cls, text = "bad", f"{wrong} of {len(rows)} verdicts differ from their expectation"
    elif unknown:
        cls, text = "unknown", f"{unknown} of {len(rows)} verdicts are inconclusive (a limit cut the search short)"
    else:
        cls, text = "ok", f"all {len(rows)} verdicts match their expectations"
    n = len(counterexamples(reports))
    return (f'<p class="summary {cls}">{len(reports)} scenario{"s" if len(reports) != 1 else ""}: {text}; '
            f'{n} counterexample{"s" if n != 1 else ""} below.</p>')


def _timeline_sentence(tl: PageTimeline) -> str:
    parts = [f'<span class="hazard">{escape(e.text)}</span>' if e.hazard else escape(e.text) for e in tl.events]
    return f'<li><span class="page">{escape(tl.page)}</span>: {" → ".join(parts)}</li>'


def _timeline_grid(timelines: list[PageTimeline], steps: int) -> str:
    head = "<th>page</th>" + "".join(f"<th>{k}</th>" for k in range(steps + 1))
    rows = []
    for tl in timelines:
        at = {}
        for e in tl.events:
            at.setdefault(e.step, []).append(e)
        cells = [f"<th>{escape(tl.page)}</th>"]
        for k, cell in enumerate(tl.cells):
            cls = []
            evs = at.get(k, [])
            if evs:
                cls.append("hazard-event" if any(e.hazard for e in evs) else "event")
            if cell.foreign:
                cls.append("foreign")
            title = "; ".join(e.text for e in evs) or f"{cell.owner}, holds {cell.content}"
            cells.append(f'<td class="{" ".join(cls)}" title="{escape(title)}"><span class="owner">{escape(cell.owner)}</span>'
                         f'<span class="content">{escape(cell.content)}</span></td>')
        rows.append(f'<tr data-page="{escape(tl.page)}">{"".join(cells)}</tr>')
    return (f'<table class="grid"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            '<p class="meta">Each cell: the owner above, the content below, after that step. '
            'Red content: the page holds another request\'s KV; red cell: a foreign write, a release under a '
            'write in flight or a read of another request\'s KV.</p>')


def _steps_html(trace: Trace) -> str:
    console = Console(file=io.StringIO(), record=True, width=110, force_terminal=True, color_system="truecolor",
                      highlight=False, emoji=False)
    console.print(render_trace(trace))
    return console.export_html(inline_styles=True, code_format='<pre class="steps"><code>{code}</code></pre>')


def _counterexample(trace: Trace, index: int) -> str:
    sc, claim = trace.scenario, trace.machine.spec.claim(trace.claim)
    steps = trace_story(trace)
    timelines = page_timelines(trace)
    lasso = trace.loop is not None
    how = "never holds: a lasso of" if lasso else "fails after"
    loop = f'<p class="loop">{escape(verdict_sentence(trace))}</p>' if lasso else ""
    svg = sequence_svg(steps, trace_lanes(trace), f"{sc.name}: {trace.claim}", ident=f"cx{index}", loop=trace.loop)
    return (
        f'<section class="counterexample{" lasso" if lasso else ""}" id="{counterexample_id(sc.name, trace.claim)}">'
        f"<h2>{escape(sc.name)} · {escape(trace.claim)} {how} {len(trace)} steps</h2>"
        f'<p>{escape(sc.title)}</p><p class="claim-doc">{escape(claim.doc)}</p>{loop}'
        "<h3>Sequence diagram</h3>"
        f'<div class="diagram">{svg}</div>'
        "<h3>Page timeline</h3>"
        f'<ul class="pages">{"".join(_timeline_sentence(tl) for tl in timelines)}</ul>'
        f"{_timeline_grid(timelines, len(trace))}"
        "<h3>Steps</h3>"
        f"<details open><summary>every step, as <code>kvproof show</code> prints it</summary>{_steps_html(trace)}</details>"
        "</section>")


def report_html(reports: list[ScenarioReport], title: str = "kvproof report") -> str:
    """The whole page for ``reports``."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cx = counterexamples(reports)
    toc = "".join(f'<li><a href="#{counterexample_id(t.scenario.name, t.claim)}">{escape(t.scenario.name)} · '
                  f"{escape(t.claim)}</a> ({len(t)} steps)</li>" for t in cx)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f'<p class="meta">kvproof {__version__}, explicit-state search, {now}</p>'
        f"{_headline(reports)}"
        f"{_summary(reports)}"
        "<h2>Verdicts</h2>"
        f"{_verdict_table(reports)}"
        + (f"<h2>Counterexamples</h2><ol>{toc}</ol>" if cx else "")
        + "".join(_counterexample(t, i) for i, t in enumerate(cx))
        + "</body></html>\n")


def write_report(path: str | Path, reports: list[ScenarioReport], title: str = "kvproof report") -> Path:
    """Write the page for ``reports`` to ``path`` atomically; returns the path."""
    return write_text_atomic(path, report_html(reports, title))

