"""A trace page by page: who owned each page and whose data it held, step by step.

:func:`page_timelines` asks the protocol (:meth:`~kvproof.model.framework.Spec.page_timelines`)
for one :class:`~kvproof.model.narration.PageTimeline` per page that something happened to:
its events - reserved, written, released (and why), a late write, read - and its owner and
content after every step.  :meth:`~kvproof.model.narration.PageTimeline.sentence` tells it in
one line::

    p0: R0 reserved → released on abort → R1 reserved → written by R1 → late write from R0 → read by R1 (holds R0's KV (tenant A))

Events that break isolation are ``hazard`` events, highlighted wherever the timeline is drawn.
"""

from __future__ import annotations

from kvproof.checker.traces import Trace
from kvproof.model.narration import PageCell, PageEvent, PageTimeline

__all__ = ["PageEvent", "PageCell", "PageTimeline", "page_timelines"]


def page_timelines(trace: Trace, include_quiet: bool = False) -> list[PageTimeline]:
    """The protocol's page timelines of ``trace`` (pages nothing happened to only with
    ``include_quiet``), requests named as renderings show them (:meth:`~kvproof.checker.traces.Trace.shown`)."""
    out = []
    for tl in trace.machine.spec.page_timelines(trace.states, trace.actions, include_quiet):
        events = tuple(PageEvent(e.step, trace.shown(e.text, e.step), e.hazard) for e in tl.events)
        cells = tuple(PageCell(trace.shown(c.owner, k), trace.shown(c.content, k), c.foreign)
                      for k, c in enumerate(tl.cells))
        out.append(PageTimeline(tl.page, tl.pool, events, cells))
    return out
