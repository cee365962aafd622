"""Sequence-diagram messages and page timelines derived from what a protocol declares.

A protocol that does not hand-write its narration declares it (:class:`Narration`, returned by
:meth:`~.framework.Spec.narration`): its lanes and which lane each actor runs on, the changes of
its state that are messages between lanes (:class:`Signal`), its page pools (:class:`Pool`) and
how a request reads pages (:class:`Read`).  This module turns the declaration and a step's pre-
and post-state into the :class:`~.narration.Message` s of the step (:func:`derive_messages`),
a trace's states into one :class:`~.narration.PageTimeline` per page
(:func:`derive_timelines`), and a state into a table per pool (:func:`derive_page_maps`), the way :meth:`~.framework.Spec.messages` and
:meth:`~.framework.Spec.page_timelines` and :meth:`~.framework.Spec.page_maps` default to.  What a pool's change means is read off the
state, not off the action's name, so an engine variant that overrides an action is drawn without
a table to update:

* a page's owner going from free to a request: *reserved* (an arrow from the actor's lane to the
  pool's); back to free: *released* by the action, a hazard while a transfer the pool declares
  (:class:`Busy`) still uses the page;
* a page's content changing: *written* when the new content is its owner's, else a hazard:
  another request's data landing on an owned page (a late write, or a transfer that moved
  another request's data), or any data landing on a free one;
* a :class:`Read`'s field leaving its "none" value: the request *reads* its pages, a hazard when
  a page holds another request's data;
* a :class:`Signal`: a declared field changing to a declared value, e.g. decode's READ posted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from kvproof.model.narration import Cell, Lane, Message, PageCell, PageEvent, PageMap, PageTimeline

__all__ = ["Narration", "Signal", "Pool", "Busy", "Read", "derive_messages", "derive_timelines", "derive_page_maps"]


@dataclass(frozen=True)
class Signal:
    """A message between two lanes, declared as a change of one field: whenever a slot of
    ``field`` changes to a value in ``to`` (from one in ``since``; ``None``: from any other),
    the step carries a message from lane ``src`` to lane ``dst`` (both ``None``: across every
    lane; equal: a note on one lane).  ``text`` is formatted with the labels of the slot's
    indices by domain name (``{request}``), ``{value}`` and ``{was}`` (the new and old value's
    labels).  ``kind`` is a :class:`~.narration.Message` kind; ``hazard`` marks an isolation
    failure."""

    field: str
    to: tuple[int, ...]
    src: str | None
    dst: str | None
    text: str
    kind: str = "message"
    since: tuple[int, ...] | None = None
    hazard: bool = False


@dataclass(frozen=True)
class Busy:
    """Pages a transfer still uses: while a slot of ``field`` (its first index a request) holds
    a value in ``values``, the pages of the pool that ``pages`` (a field indexed by the request
    first) names are in use by that request's ``what`` ("READ"); releasing one then is a hazard."""

    field: str
    values: tuple[int, ...]
    pages: str
    what: str = "transfer"


@dataclass(frozen=True)
class Pool:
    """A pool of pages: ``owner`` is a field indexed by page (a scalar field: a pool of one page,
    named ``name``) whose value ``free`` means no owner
    and whose other labels name requests; ``content`` a field whose last index is the page and
    whose value ``unwritten`` means no data.  ``lane`` is the lane drawn for the pool.  ``whose``
    maps a content code to the owner code whose data it is (default: the same code).
    ``reasons`` names, per action, how a release by it reads ("on abort"; default "by ACTION");
    ``title`` heads the pool's table in ``kvproof show`` (default "NAME pages"); ``busy`` says
    when a page is still in use by a transfer (:class:`Busy`), so that its release is a hazard."""

    name: str
    owner: str
    content: str
    lane: str
    free: int = 0
    unwritten: int = 0
    whose: Callable[[int], int] | None = None
    reasons: Mapping[str, str] = field(default_factory=dict)
    title: str = ""
    busy: tuple[Busy, ...] = ()

    def owner_of(self, content: int) -> int:
        """The owner code whose data content code ``content`` is."""
        return self.whose(content) if self.whose is not None else content


@dataclass(frozen=True)
class Read:
    """A request reading pages: when a slot of ``field`` (indexed by request) leaves the value
    ``none``, that request reads every page of ``pool`` that ``pages`` (a field indexed by the
    request first; ``None`` for a pool of one page) names, on lane ``reader``.  The read is a hazard when a page holds data that
    is not the request's."""

    field: str
    pages: str | None
    pool: str
    reader: str
    none: int = 0


@dataclass(frozen=True)
class Narration:
    """What a protocol declares for its diagrams: ``lanes`` left to right, ``actors`` (the lane
    each action's actor runs on; an actor mapped to ``None`` spans every lane, as a clock does;
    an actor not listed runs on the lane of its own name), and its signals, pools and reads."""

    lanes: tuple[Lane, ...]
    actors: Mapping[str, str | None] = field(default_factory=dict)
    signals: tuple[Signal, ...] = ()
    pools: tuple[Pool, ...] = ()
    reads: tuple[Read, ...] = ()

    def lane_of(self, actor: str) -> str | None:
        """The lane ``actor`` runs on (``None``: every lane)."""
        return self.actors.get(actor, actor)


def _slots(layout, name: str) -> list[tuple[tuple[int, ...], int]]:
    """Every (index tuple, slot) of field ``name``, in layout order."""
    f = layout.by_name[name]
    return [(idx, layout.slot(name, *idx)) for idx in itertools.product(*(range(d.size) for d in f.dims))]


def _label(domain, code: int) -> str:
    return str(domain.label(code))


class _Pages:
    """One pool of a spec's layout: page labels, owner and content slots, and their labels."""

    def __init__(self, spec, pool: Pool):
        layout = spec.layout
        self.pool, self.spec = pool, spec
        of, cf = layout.by_name[pool.owner], layout.by_name[pool.content]
        self.page_dom = of.dims[0] if of.dims else None  # a pool of one page: scalar fields
        self.owner_dom, self.content_dom = of.values, cf.values
        self.size = self.page_dom.size if self.page_dom is not None else 1
        self.owner_slot = [slot for _, slot in _slots(layout, pool.owner)]
        self.content_slots: list[list[int]] = [[] for _ in range(self.size)]
        for idx, slot in _slots(layout, pool.content):
            self.content_slots[idx[-1] if idx else 0].append(slot)

    def page(self, p: int) -> str:
        return _label(self.page_dom, p) if self.page_dom is not None else self.pool.name

    def owner(self, code: int) -> str:
        return "free" if code == self.pool.free else _label(self.owner_dom, code)

    def held(self, code: int) -> str:
        """Whose data a content code is, in words (the spec's ``content_label`` if it has one)."""
        if code == self.pool.unwritten:
            return "nothing written"
        named = getattr(self.spec, "content_label", None)
        return named(code) if named is not None else f"{_label(self.content_dom, code)}'s data"

    def short(self, code: int) -> str:
        return "·" if code == self.pool.unwritten else _label(self.content_dom, code)

    def foreign(self, owner: int, content: int) -> bool:
        """An owned page holding data that is not its owner's."""
        return owner != self.pool.free and content != self.pool.unwritten and self.pool.owner_of(content) != owner

    def cell(self, state, p: int) -> PageCell:
        owner = state[self.owner_slot[p]]
        contents = [state[s] for s in self.content_slots[p]]
        labels = [self.short(c) for c in contents]
        return PageCell(self.owner(owner), labels[0] if len(set(labels)) == 1 else "|".join(labels),
                        any(self.foreign(owner, c) for c in contents))


def _pools(spec, narration: Narration) -> dict[str, _Pages]:
    return {pool.name: _Pages(spec, pool) for pool in narration.pools if pool.owner in spec.layout.by_name}


def _in_use(layout, pages: _Pages, state) -> dict[int, str]:
    """The pages of a pool a declared transfer still uses in ``state``: page -> "R0's READ"."""
    out: dict[int, str] = {}
    for b in pages.pool.busy:
        if b.field not in layout.by_name or b.pages not in layout.by_name:
            continue
        req = layout.by_name[b.field].dims[0]
        for idx, slot in _slots(layout, b.field):
            if state[slot] not in b.values:
                continue
            for pidx, ps in _slots(layout, b.pages):
                if pidx[0] == idx[0] and state[ps] < pages.size:
                    out.setdefault(state[ps], f"{_label(req, idx[0])}'s {b.what}")
    return out


def _step_events(spec, narration: Narration, pools: dict[str, _Pages], pre, post, action: str, src: str | None):
    """What happened to pages in one step: ``(pool, page, event text, hazard, message)`` with the
    message as ``(src, dst, text, kind)`` or ``None``; reads first, then owners, then contents."""
    out: list[tuple[str, int, str, bool, tuple | None]] = []
    layout = spec.layout
    for rd in narration.reads:
        pages = pools.get(rd.pool)
        if pages is None or rd.field not in layout.by_name:
            continue
        req_dom = layout.by_name[rd.field].dims[0]
        for (r,), slot in _slots(layout, rd.field):
            if pre[slot] != rd.none or post[slot] == rd.none:
                continue
            who = _label(req_dom, r)
            own = next((c for c in range(pages.owner_dom.size) if pages.owner(c) == who), None)
            read = ([0] if rd.pages is None else
                    sorted({pre[s] for idx, s in _slots(layout, rd.pages) if idx[0] == r and pre[s] < pages.size}))
            held = []
            for p in read:
                bad = [c for c in (pre[s] for s in pages.content_slots[p])
                       if c == pages.pool.unwritten or pages.pool.owner_of(c) != own]
                text = f"read by {who}" + (f" (holds {pages.held(bad[0])})" if bad else "")
                out.append((rd.pool, p, text, bool(bad), None))
                if bad:
                    held.append(f"{pages.page(p)} holds {pages.held(bad[0])}")
            names = ", ".join(pages.page(p) for p in read) or "no page"
            msg = f"{who} reads {names}" + ("; " + "; ".join(held) if held else "")
            out.append((rd.pool, read[0] if read else -1, "", bool(held), (pages.pool.lane, rd.reader, msg, "read")))
    for name, pages in pools.items():
        pool = pages.pool
        taken: dict[int, list[int]] = {}
        freed: dict[int, list[int]] = {}
        in_use = _in_use(layout, pages, pre)
        for p in range(pages.size):
            a, b = pre[pages.owner_slot[p]], post[pages.owner_slot[p]]
            if a == b:
                continue
            if a != pool.free:
                freed.setdefault(a, []).append(p)
                reason = pool.reasons.get(action, f"by {action}")
                busy = f" while {in_use[p]} still uses it" if p in in_use else ""
                out.append((name, p, f"released {reason}{busy}", bool(busy), None))
            if b != pool.free:
                taken.setdefault(b, []).append(p)
                out.append((name, p, f"{pages.owner(b)} reserved", False, None))
        at = src or pool.lane
        for o, ps in taken.items():
            out.append((name, ps[0], "", False, (at, pool.lane, f"reserve {', '.join(map(pages.page, ps))} for "
                                                               f"{pages.owner(o)}", "reserve")))
        for o, ps in freed.items():
            reason = pool.reasons.get(action, f"by {action}")
            busy = [p for p in ps if p in in_use]
            text = f"release {', '.join(map(pages.page, ps))} ({pages.owner(o)}) {reason}"
            if busy:
                text += "; " + "; ".join(f"{pages.page(p)} still used by {in_use[p]}" for p in busy)
            out.append((name, ps[0], "", bool(busy), (at, pool.lane, text, "release")))
        for p in range(pages.size):
            changed = [post[s] for s in pages.content_slots[p] if pre[s] != post[s]]
            if not changed or changed[0] == pool.unwritten:
                continue
            c, owner = changed[0], post[pages.owner_slot[p]]
            if owner != pool.free and pool.owner_of(c) == owner:
                text, hazard = f"written by {pages.owner(owner)}", False
                msg = f"{pages.page(p)} ← {pages.held(c)}"
            else:
                now = "free" if owner == pool.free else f"owned by {pages.owner(owner)}"
                text = (f"late write: {pages.held(c)} lands on the free page" if owner == pool.free
                        else f"gets {pages.held(c)}, not its owner {pages.owner(owner)}'s")
                hazard, msg = True, f"{pages.held(c)} lands on {pages.page(p)}, {now}"
            out.append((name, p, text, hazard, (at, pool.lane, msg, "write")))
    return out


def derive_messages(spec, narration: Narration, step: int, pre, inst, post, label: str) -> list[Message]:
    """Step ``step`` (action instance ``inst`` from ``pre`` to ``post``) as the messages the
    declaration derives; a step that changes nothing declared is a note with ``label`` on its
    actor's lane (across every lane for an actor that spans them)."""
    layout = spec.layout
    lane = narration.lane_of(inst.action.actor)
    out: list[Message] = []
    for sig in narration.signals:
        if sig.field not in layout.by_name:
            continue
        f = layout.by_name[sig.field]
        for idx, slot in _slots(layout, sig.field):
            a, b = pre[slot], post[slot]
            if a == b or b not in sig.to or (sig.since is not None and a not in sig.since):
                continue
            names = {d.name: _label(d, i) for d, i in zip(f.dims, idx)}
            text = sig.text.format(**names, value=_label(f.values, b), was=_label(f.values, a))
            out.append(Message(step, sig.src, sig.dst, text, sig.kind, sig.hazard))
    pools = _pools(spec, narration)
    for _, _, _, hazard, msg in _step_events(spec, narration, pools, pre, post, inst.name, lane):
        if msg is not None:
            src, dst, text, kind = msg
            out.append(Message(step, src, dst, text, kind, hazard))
    if not out:
        out.append(Message(step, lane, lane, label, "note") if lane else Message(step, None, None, label, "tick"))
    return out


def derive_timelines(spec, narration: Narration, states: Sequence[Any], actions: Sequence[int],
                     include_quiet: bool = False) -> list[PageTimeline]:
    """Each page of each declared pool through a trace: its events and its cell after every
    step (pages nothing happened to only with ``include_quiet``)."""
    pools = _pools(spec, narration)
    events: dict[tuple[str, int], list[PageEvent]] = {}
    for k in range(1, len(states)):
        inst = spec.instances[actions[k - 1]]
        lane = narration.lane_of(inst.action.actor)
        for pool, p, text, hazard, _ in _step_events(spec, narration, pools, states[k - 1], states[k], inst.name, lane):
            if text:
                events.setdefault((pool, p), []).append(PageEvent(k, text, hazard))
    out = []
    for name, pages in pools.items():
        for p in range(pages.size):
            evs = tuple(events.get((name, p), ()))
            if evs or include_quiet:
                out.append(PageTimeline(pages.page(p), name, evs, tuple(pages.cell(s, p) for s in states)))
    return out


def derive_page_maps(spec, narration: Narration, pre, post) -> list[PageMap]:
    """A table per declared pool after a step that changed it (every pool at the initial state,
    ``pre`` ``None``): each page's owner, and what it holds, marked ``!`` (a hazard) when it
    holds data that is not its owner's."""
    out = []
    for name, pages in _pools(spec, narration).items():
        slots = pages.owner_slot + [s for ss in pages.content_slots for s in ss]
        if pre is not None and all(pre[s] == post[s] for s in slots):
            continue
        owners = tuple(Cell(pages.owner(post[pages.owner_slot[p]])) for p in range(pages.size))
        holds = []
        for p in range(pages.size):
            cell = pages.cell(post, p)
            holds.append(Cell(cell.content + (" !" if cell.foreign else ""), cell.foreign))
        out.append(PageMap(pages.pool.title or f"{name} pages", tuple(pages.page(p) for p in range(pages.size)),
                           (("owner", owners), ("holds", tuple(holds)))))
    return out
