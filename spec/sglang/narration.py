"""How the SGLang protocol tells a trace: sequence-diagram messages, page maps and page timelines.

The general renderers (:mod:`kvproof.checker.report`) ask the spec, through the narration
methods of :class:`~kvproof.model.framework.Spec`; :class:`PdNarration` answers them for
:class:`~.protocol.PdProtocol` (a mixin, like :class:`~.story.PdStory` for the notes):

* :meth:`PdNarration.narration` declares the five lanes and the lane of each actor;
  :meth:`PdNarration.messages` tells a step as messages between the five
  lanes (client, prefill scheduler, transfer engine, decode scheduler, page pool), derived from
  what the step *changed* in the state, not from the action's name, so an engine variant that
  overrides an action is drawn correctly without a table to update: a request field going
  from ``new`` is an arrival, ``meta`` set is the metadata message, ``abort_tx`` the ABORT,
  ``wr`` issued is an RDMA write, a landed write's ``content`` change is a write into the pool,
  a ``read`` is decode reading its pages, ``owner`` changes are reservations and releases.  A
  message is a *hazard* when it is one of the isolation failures the claims guard against: a
  write landing on a page its request no longer owns, a page released (or a source page freed)
  while a write to (from) it is in flight, a read of a page holding another request's KV, a
  success reported for a rejected prompt;
* :meth:`PdNarration.page_maps` - the decode pages after a step (and the prefill pages and aux
  slots where they changed), another request's KV in an owned page marked ``!`` (another
  tenant's: ``!!``);
* :meth:`PdNarration.page_timelines` - every decode page (``p0..``) and prefill source page
  (``q0..``) through a trace: reserved, written, released (and why), a late write from a
  request that no longer owns it, read - and its owner and content after every step;
* :meth:`PdNarration.display_names` - every rendering names a request apart from its room
  (``R0@room0``; a room's next request, with request streams, ``R2@room0``), while the state
  and trace files keep the slot's label (``R0``);
* :meth:`PdNarration.shown_params` - a rank or stream parameter is left out of an action's
  label when there is only one.
"""

from __future__ import annotations

from typing import Sequence

from kvproof.model.narrate import Narration
from kvproof.model.narration import Cell, Lane, Message, PageCell, PageEvent, PageMap, PageTimeline
from kvproof.spec.sglang.state import (
    ABT_NONE, ABT_SENT, ACK_DRAIN, ACK_NONE, ACK_RECEIPT, D_NEW, FREE, OUT_ABORTED, OUT_ERROR, OUT_NONE,
    OUT_SUCCESS, P_NEW, PAB_NONE, POLL_NONE, POLL_SUCCESS, READ_FOREIGN, READ_NONE, UNWRITTEN, WR_FLIGHT,
    WR_LANDED, WR_NOT_ISSUED, kv_of, owned_by, owner_request, request_name, room_of,
)

__all__ = ["PdNarration", "LANES", "lane_of_actor", "release_reason"]

LANES = (
    Lane("client", "client"),
    Lane("prefill", "prefill scheduler"),
    Lane("transfer", "transfer engine"),
    Lane("decode", "decode scheduler"),
    Lane("pool", "page pool"),
)
_ACTOR_LANE = {"client": "client", "prefill": "prefill", "transfer": "transfer", "decode": "decode",
               "network": "transfer"}


def lane_of_actor(actor: str) -> str | None:
    """The lane an action's actor runs on; ``None`` for actors that span every lane (the clock)."""
    return _ACTOR_LANE.get(actor)


_SINGLE = ("prank", "drank", "stream")  # parameters left out of a label when their domain has one value


class PdNarration:
    """Mixin of :class:`~.protocol.PdProtocol`: the narration methods of
    :class:`~kvproof.model.framework.Spec` (see the module docstring)."""

    def display_names(self, states: Sequence[bytes], actions: Sequence[int]) -> list[dict[str, str]]:
        """Per state of a trace, the name of the request each slot label (``R0``) stands for:
        :func:`~.state.request_name` of its number and room.  Slot ``r`` starts with request
        ``r``; each step that gives a room a new request (``client_send``, seen as the slot's
        ``gen`` changing) gives it the next unused number."""
        k = self.k
        numbers, fresh = list(range(k.R)), k.R
        gens = [self.layout.slot("gen", r) for r in range(k.R)] if "gen" in self.layout.by_name else []
        out = []
        for i, state in enumerate(states):
            if i:
                for r, g in enumerate(gens):
                    if state[g] != states[i - 1][g]:
                        numbers[r], fresh = fresh, fresh + 1
            out.append({k.req.label(r): request_name(numbers[r], self.cfg.room_of(r)) for r in range(k.R)})
        return out

    def shown_params(self, inst) -> tuple[str, ...]:
        """The parameters an action's label shows: a rank or stream only when there are several."""
        return tuple(p for p in inst.action.params if not (p in _SINGLE and self.domain(p).size == 1))

    def narration(self) -> Narration:
        """The lanes (client, prefill scheduler, transfer engine, decode scheduler, page pool)
        and the lane of each actor (the clock spans them all), from which :meth:`lanes` comes;
        the messages and timelines are told by :meth:`messages` and :meth:`page_timelines`
        below, which know chunks, streams, aux slots and the ABORT protocol."""
        return Narration(lanes=LANES, actors={**_ACTOR_LANE, "clock": None})

    def messages(self, step: int, pre: Sequence[int], inst, post: Sequence[int], label: str) -> list[Message]:
        """Step ``step`` (action instance ``inst`` from ``pre`` to ``post``) as messages."""
        return _messages(_View(self, pre, post), step, inst.action.actor, inst.name, label)

    def page_maps(self, pre: Sequence[int] | None, post: Sequence[int]) -> list[PageMap]:
        """The decode pages after a step, and the prefill pages and aux slots where the step
        changed them (all three at the initial state, ``pre`` ``None``)."""
        out = [_page_map(self, post, "decode")]
        for pool in ("prefill", "aux"):
            if pool == "aux" and not self.k.M:
                continue
            owner_f, content_f = _POOLS[pool][:2]
            if pre is None or _pool_differs(self, pre, post, owner_f, content_f):
                out.append(_page_map(self, post, pool))
        return out

    def page_timelines(self, states: Sequence[bytes], actions: Sequence[int],
                       include_quiet: bool = False) -> list[PageTimeline]:
        """A timeline per decode page, then per prefill page; pages nothing happened to are
        left out unless ``include_quiet``."""
        return _page_timelines(self, states, actions, include_quiet)


class _View:
    """Reads named slots of the pre- and post-state of one step."""

    def __init__(self, spec, pre, post):
        self.spec, self.k, self.layout = spec, spec.k, spec.layout
        self.pre, self.post = pre, post

    def a(self, name: str, *idx: int) -> int:
        return self.pre[self.layout.slot(name, *idx)]

    def b(self, name: str, *idx: int) -> int:
        return self.post[self.layout.slot(name, *idx)]

    def changed(self, name: str, *idx: int) -> bool:
        return self.a(name, *idx) != self.b(name, *idx)


def _pages(view: _View, r: int, state: str) -> list[int]:
    get = view.a if state == "pre" else view.b
    return [get("dest", r, c) for c in range(view.spec.pages(r)) if get("dest", r, c) < view.k.D]


def _names(prefix: str, pages: list[int]) -> str:
    return ", ".join(f"{prefix}{p}" for p in pages)


def _content(view: _View, code: int) -> str:
    return "nothing written" if code == UNWRITTEN else view.spec.content_label(code)


def _n_pages(n: int) -> str:
    return f"{n} page" if n == 1 else f"{n} pages"


def _foreign_part(v: _View, r: int, p: int) -> int | None:
    """The content code of the first part of page ``p`` (before the step) not written by ``r``."""
    for u in range(v.k.U):
        held = v.a("content", u, p)
        if held != kv_of(r):
            return held
    return None


def _messages(v: _View, k: int, actor: str, name: str, label: str) -> list[Message]:
    spec, K = v.spec, v.k
    lane = lane_of_actor(actor)
    out: list[Message] = []

    def add(src, dst, text, kind, hazard=False):
        out.append(Message(k, src, dst, text, kind, hazard))

    def to_rank(pr):  # " to P1" when there are several prefill ranks
        return "" if K.PR == 1 else f" (P{pr})"

    def stream(w):
        return "" if K.S == 1 else f" ({K.stream.label(w)})"

    # writes in flight before the step: (request, stream, chunk) -> (decode page, source page)
    flying = {
        (r, w, c): (v.a(*_wd(spec, r, w, c)), v.a("src", r, c))
        for r in range(K.R) for w in range(K.S) for c in range(spec.send_len(r)) if v.a("wr", r, w, c) >= WR_FLIGHT
    }
    if K.M:
        flying.update({(r, "aux", 0): (v.a("aux", r), None) for r in range(K.R) if v.a("aux_wr", r) >= WR_FLIGHT})
    if spec.e.peer_death and v.changed("p_dead"):
        add("prefill", "prefill", "the prefill node dies", "note", True)
    for r in range(K.R):
        R = f"R{r}"
        aborted_now = v.a("outcome", r) == OUT_NONE and v.b("outcome", r) == OUT_ABORTED
        seen_by = [pr for pr in range(K.PR) if v.a("p_abort", r, pr) == PAB_NONE and v.b("p_abort", r, pr) != PAB_NONE]
        if v.a("p_phase", r) == P_NEW and v.b("p_phase", r) != P_NEW and not seen_by:
            add("client", "prefill", f"{R} arrives ({_n_pages(spec.pages(r))})", "request")
        for pr in seen_by:
            add("prefill", "prefill", f"ABORT {R} received{to_rank(pr)}: no more chunks", "note")
        polls_quiet = all(v.a("poll", r, pr) == POLL_NONE for pr in range(K.PR))
        if v.a("d_phase", r) == D_NEW and v.b("d_phase", r) != D_NEW and not aborted_now and polls_quiet:
            add("client", "decode", f"{R} arrives ({_n_pages(spec.pages(r))})", "request")
        if aborted_now and lane != "prefill":
            add("client", "decode", f"client aborts {R}", "request")
        elif aborted_now:
            add("client", "prefill", f"client aborts {R} at prefill", "request")
        for pr in range(K.PR):
            a, b = v.a("abort_tx", r, pr), v.b("abort_tx", r, pr)
            if a != ABT_SENT and b == ABT_SENT:
                add("decode", "prefill", f"ABORT {R}{to_rank(pr)}", "message")
            elif a == ABT_SENT and b == ABT_NONE:
                add("decode", "prefill", f"ABORT {R}{to_rank(pr)} lost", "lost")
        for d in range(K.DR):
            if v.a("meta", r, d) == 0 and v.b("meta", r, d) == 1:
                who = "" if K.DR == 1 else f" from D{d}"
                add("decode", "prefill", f"{R} metadata{who}: {_names('p', _pages(v, r, 'post'))}", "message")
        if v.a("read", r) == READ_NONE and v.b("read", r) != READ_NONE:
            pages = _pages(v, r, "pre")
            foreign = [(p, _foreign_part(v, r, p)) for p in pages if _foreign_part(v, r, p) is not None]
            text = f"{R} reads {_names('p', pages)}"
            if foreign:
                text += "; " + "; ".join(f"p{p} holds {_content(v, code)}" for p, code in foreign)
            if K.M and v.a("aux_content", v.a("aux", r)) != kv_of(r):
                text += f"; aux m{v.a('aux', r)} holds {_content(v, v.a('aux_content', v.a('aux', r)))}"
            add("pool", "decode", text, "read", v.b("read", r) >= READ_FOREIGN)
    _pool_messages(v, k, lane, name, flying, add)
    for r in range(K.R):
        R = f"R{r}"
        for w in range(K.S):
            for c in range(spec.send_len(r)):
                a, b = v.a("wr", r, w, c), v.b("wr", r, w, c)
                if a == WR_NOT_ISSUED and b >= WR_FLIGHT:
                    add("prefill", "transfer",
                        f"{R} chunk {c}{stream(w)}: RDMA write q{v.a('src', r, c)} → p{v.b(*_wd(spec, r, w, c))}", "message")
                elif a >= WR_FLIGHT and b == WR_LANDED:
                    p, q = v.a(*_wd(spec, r, w, c)), v.a("src", r, c)
                    owner, sent = v.a("owner", p), v.a("src_content", q)
                    text = f"{R} chunk {c}{stream(w)} lands on p{p}"
                    hazard = False
                    if owner != owned_by(r):
                        now = "free" if owner == FREE else f"R{owner_request(owner)}'s"
                        text = f"late write from {R}{stream(w)} lands on p{p}, now {now}"
                        hazard = True
                    if sent != kv_of(r):
                        text += f", carrying {_content(v, sent)}"
                        hazard = True
                    add("transfer", "pool", text, "write", hazard)
        if K.M:
            a, b = v.a("aux_wr", r), v.b("aux_wr", r)
            m = v.a("aux", r)
            if a == WR_NOT_ISSUED and b >= WR_FLIGHT:
                add("prefill", "transfer", f"{R} aux data → m{m}", "message")
            elif a >= WR_FLIGHT and b == WR_LANDED:
                owner = v.a("aux_owner", m)
                late = owner != owned_by(r)
                text = (f"late aux write from {R} lands in m{m}, now {'free' if owner == FREE else f'R{owner_request(owner)}'}"
                        if late else f"{R} aux data lands in m{m}")
                add("transfer", "pool", text, "write", late)
        for pr in range(K.PR):
            if v.a("poll", r, pr) == POLL_NONE and v.b("poll", r, pr) != POLL_NONE:
                ok = v.b("poll", r, pr) == POLL_SUCCESS
                placeholder = ok and spec.send_len(r) < spec.pages(r)
                add("prefill", "decode", f"{R}{to_rank(pr)}: KVPoll.{'Success' if ok else 'Failed'}"
                    + (f" ({spec.send_len(r)} of {spec.pages(r)} pages sent)" if placeholder else ""),
                    "message", placeholder)
            ack_a, ack_b = v.a("ack", r, pr), v.b("ack", r, pr)
            if ack_a != ack_b:
                if ack_b == ACK_RECEIPT:
                    add("prefill", "decode", f"ABORT_ACK {R}{to_rank(pr)} (receipt only)", "message")
                elif ack_b == ACK_DRAIN:
                    add("prefill", "decode", f"ABORT_ACK {R}{to_rank(pr)} (drained)", "message")
                elif ack_b == ACK_NONE and actor == "network":
                    add("prefill", "decode", f"drain ack for {R}{to_rank(pr)} lost", "lost")
                elif ack_b == ACK_NONE:
                    counted = v.a("acked", r, pr) == 0 and v.b("acked", r, pr) == 1
                    add("decode", "decode", f"ack for {R}{to_rank(pr)} " + ("counted" if counted else "dropped"), "note")
        out_a, out_b = v.a("outcome", r), v.b("outcome", r)
        if out_a == OUT_NONE and out_b in (OUT_SUCCESS, OUT_ERROR):
            src = lane or "decode"
            if out_b == OUT_SUCCESS:
                bad = spec.over_long(r) or v.b("read", r) >= READ_FOREIGN
                add(src, "client", f"{R}: HTTP 200" + (" (rejected prompt)" if spec.over_long(r) else ""), "message", bad)
            else:
                add(src, "client", f"{R}: error", "message")
        if v.b("p_phase", r) == P_NEW and v.a("p_phase", r) != P_NEW:
            add("client", "client", f"room{room_of(r)} takes its next request: {R}", "note")
    if actor == "clock":
        held = [f"R{r} held {v.b('hold', r)}" for r in range(K.R) if v.changed("hold", r)]
        aged = [f"R{r} chunk {c}{stream(w)} age {v.b('wr', r, w, c) - WR_FLIGHT}"
                for (r, w, c) in flying if w != "aux" and v.changed("wr", r, w, c)]
        add(None, None, "clock tick" + (": " + ", ".join(held + aged) if held or aged else ""), "tick")
    if not out:
        add(lane, lane, label, "note") if lane else add(None, None, label, "tick")
    return out


_RELEASE_REASON = {
    "decode_abort": "on abort",
    "decode_release_timeout": "by timeout",
    "decode_release_deferred": "on drain ack",
    "decode_commit": "when finished",
    "decode_forward": "when finished",
    "decode_poll_failed": "on failure",
    "decode_waiting_timeout": "by the waiting timeout",
    "decode_peer_dead_release": "when the prefill is declared dead",
}


def release_reason(action: str) -> str:
    """How a release by ``action`` reads in a sentence ("by timeout"); the action's name for
    actions it does not know."""
    return _RELEASE_REASON.get(action, f"by {action}")


def _pool_messages(v: _View, k: int, lane: str | None, name: str, flying: dict, add) -> None:
    K = v.k
    src = lane or "decode"
    pools = [("decode", "owner", "p", K.D, 0), ("prefill", "src_owner", "q", K.P, 1)]
    if K.M:
        pools.append(("aux", "aux_owner", "m", K.M, 0))
    for pool, owner_f, prefix, size, slot in pools:
        taken: dict[int, list[int]] = {}
        freed: dict[int, list[int]] = {}
        for p in range(size):
            a, b = v.a(owner_f, p), v.b(owner_f, p)
            if a == FREE and b != FREE:
                taken.setdefault(owner_request(b), []).append(p)
            elif a != FREE and b == FREE:
                freed.setdefault(owner_request(a), []).append(p)
        for r, pages in taken.items():
            if pool in ("decode", "aux"):
                add(src, "pool", f"reserve {_names(prefix, pages)} for R{r}", "reserve")
            else:
                add("prefill", "pool", f"R{r} forward: KV into {_names(prefix, pages)}", "write")
        for r, pages in freed.items():
            busy = [p for p in pages if any(where[slot] == p and rr == r and (ww == "aux") == (pool == "aux")
                                            for (rr, ww, _), where in flying.items())]
            what = "free source" if pool == "prefill" else "release"
            text = f"{what} {_names(prefix, pages)} (R{r}) {release_reason(name) if pool != 'prefill' else ''}".rstrip()
            if busy:
                text += f"; {_names(prefix, busy)} still {'read' if pool == 'prefill' else 'written'} in flight"
            add("prefill" if pool == "prefill" else src, "pool", text, "release", bool(busy))


# -- page maps -------------------------------------------------------------------------------------
_POOLS = {
    # pool: (owner field, content field, size attribute, prefix, title)
    "decode": ("owner", "content", "D", "p", "decode pages"),
    "prefill": ("src_owner", "src_content", "P", "q", "prefill pages"),
    "aux": ("aux_owner", "aux_content", "M", "m", "aux slots"),
}


def _content_label(spec, content: int) -> tuple[str, int | None]:
    k = spec.k
    if content == 0:
        return "·", None
    if content <= k.R:
        return f"R{content - 1} ({k.tenants[k.tenant[content - 1]]})", k.tenant[content - 1]
    tenant = content - 1 - k.R
    return f"old ({k.tenants[tenant]})", tenant


def _content_cell(spec, owner: int, contents: list[int]) -> Cell:
    """What a page (all its shards) or slot holds; another request's KV in an owned page is
    marked ``!`` (another tenant's: ``!!``)."""
    labels, mark = [], ""
    for content in contents:
        label, tenant = _content_label(spec, content)
        labels.append(label)
        if owner != 0 and content not in (0, owner):
            mark = "!!" if tenant != spec.k.tenant[owner_request(owner)] else (mark or "!")
    text = labels[0] if len(set(labels)) == 1 else "|".join(labels)
    return Cell(text + (" " + mark if mark else ""), bool(mark))


def _page_map(spec, state: Sequence[int], pool: str) -> PageMap:
    layout = spec.layout
    owner_f, content_f, size, prefix, title = _POOLS[pool]
    n = getattr(spec.k, size)
    owners = [state[layout.slot(owner_f, p)] for p in range(n)]
    shards = spec.k.U if pool == "decode" else 1

    def contents(p):
        if pool == "decode":
            return [state[layout.slot(content_f, u, p)] for u in range(shards)]
        return [state[layout.slot(content_f, p)]]

    owner_row = tuple(Cell("free" if o == FREE else f"R{owner_request(o)}") for o in owners)
    holds_row = tuple(_content_cell(spec, o, contents(p)) for p, o in enumerate(owners))
    return PageMap(title, tuple(f"{prefix}{p}" for p in range(n)), (("owner", owner_row), ("holds", holds_row)))


def _pool_differs(spec, pre, post, owner_f: str, content_f: str) -> bool:
    layout = spec.layout
    for name in (owner_f, content_f):
        f = layout.by_name[name]
        base = layout.base[name]
        if any(pre[i] != post[i] for i in range(base, base + f.width)):
            return True
    return False


# -- page timelines --------------------------------------------------------------------------------
def _page_timelines(spec, states, actions, include_quiet: bool = False) -> list[PageTimeline]:
    """A timeline per decode page, then per prefill page; pages nothing happened to are left
    out unless ``include_quiet``."""
    layout, K = spec.layout, spec.k

    def get(k: int, name: str, *idx: int) -> int:
        return states[k][layout.slot(name, *idx)]

    events: dict[tuple[str, int], list[PageEvent]] = {}

    def add(pool: str, p: int, k: int, text: str, hazard: bool = False) -> None:
        events.setdefault((pool, p), []).append(PageEvent(k, text, hazard))

    for k in range(1, len(states)):
        inst = spec.instances[actions[k - 1]]
        a = k - 1
        in_flight = [(r, w, c) for r in range(K.R) for w in range(K.S) for c in range(spec.send_len(r))
                     if get(a, "wr", r, w, c) >= WR_FLIGHT]
        for r in range(K.R):  # reads come first: decode reads, then releases, in one step
            if get(a, "read", r) == READ_NONE and get(k, "read", r) != READ_NONE:
                for c in range(spec.pages(r)):
                    p = get(a, "dest", r, c)
                    held = next((x for x in (get(a, "content", u, p) for u in range(K.U)) if x != kv_of(r)), kv_of(r))
                    if held == kv_of(r):
                        add("decode", p, k, f"read by R{r}")
                    else:
                        add("decode", p, k, f"read by R{r} (holds {_held(spec, held)})", True)
        for p in range(K.D):
            before, after = get(a, "owner", p), get(k, "owner", p)
            if before == FREE and after != FREE:
                add("decode", p, k, f"R{owner_request(after)} reserved")
            elif before != FREE and after == FREE:
                busy = any(get(a, *_wd(spec, r, w, c)) == p and r == owner_request(before) for r, w, c in in_flight)
                add("decode", p, k, f"released {release_reason(inst.name)}"
                    + (f" while R{owner_request(before)}'s write is in flight" if busy else ""), busy)
        for q in range(K.P):
            before, after = get(a, "src_owner", q), get(k, "src_owner", q)
            if before == FREE and after != FREE:
                add("prefill", q, k, f"R{owner_request(after)} computes its KV here")
            elif before != FREE and after == FREE:
                busy = any(get(a, "src", r, c) == q and r == owner_request(before) for r, _, c in in_flight)
                add("prefill", q, k, "freed" + (f" while R{owner_request(before)}'s write still reads it" if busy else ""), busy)
            elif before == after != FREE and get(a, "src_content", q) != get(k, "src_content", q):
                add("prefill", q, k, f"now holds {_held(spec, get(k, 'src_content', q))}")
        for r, w, c in in_flight:
            if get(k, "wr", r, w, c) != WR_LANDED:
                continue
            p, q = get(a, *_wd(spec, r, w, c)), get(a, "src", r, c)
            owner, sent = get(a, "owner", p), get(a, "src_content", q)
            carrying = "" if sent == kv_of(r) else f" carrying {_held(spec, sent)}"
            if owner == owned_by(r):
                add("decode", p, k, f"written by R{r}{carrying}", bool(carrying))
            else:
                add("decode", p, k, f"late write from R{r}{carrying}", True)
            add("prefill", q, k, f"sent to p{p}" + (f" ({_held(spec, sent)})" if carrying else ""), bool(carrying))

    def contents(k: int, pool: str, content_f: str, p: int) -> list[int]:
        if pool == "decode":
            return [get(k, content_f, u, p) for u in range(K.U)]
        return [get(k, content_f, p)]

    out = []
    for pool, owner_f, content_f, prefix, size in (("decode", "owner", "content", "p", K.D),
                                                   ("prefill", "src_owner", "src_content", "q", K.P)):
        for p in range(size):
            evs = tuple(events.get((pool, p), ()))
            if not evs and not include_quiet:
                continue
            cells = tuple(_cell(spec, get(k, owner_f, p), contents(k, pool, content_f, p)) for k in range(len(states)))
            out.append(PageTimeline(f"{prefix}{p}", pool, evs, cells))
    return out


def _held(spec, code: int) -> str:
    return "nothing written" if code == UNWRITTEN else spec.content_label(code)


def _cell(spec, owner: int, contents: list[int]) -> PageCell:
    owner_label = "free" if owner == FREE else f"R{owner_request(owner)}"
    labels = ["·" if c == UNWRITTEN else str(spec.k.content.label(c)) for c in contents]
    content_label = labels[0] if len(set(labels)) == 1 else "|".join(labels)
    foreign = owner != FREE and any(c not in (UNWRITTEN, owner) for c in contents)
    return PageCell(owner_label, content_label, foreign)


def _wd(spec, r: int, w: int, c: int) -> tuple:
    """``(field, *index)`` of where write ``(r, w, c)`` lands (:meth:`~.protocol.PdProtocol.write_dest`)."""
    name, idx = spec.write_dest(r, w, c)
    return (name, *idx)
