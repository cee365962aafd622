"""A trace page by page: who owned each page and whose KV it held, step by step.

:func:`page_timelines` follows every decode page (``p0..``) and prefill source page
(``q0..``) through a trace and returns, per page, the events that touched it - reserved,
written, released (and why), a late write from a request that no longer owns it, read - and
its owner and content after every step.  :meth:`PageTimeline.sentence` tells it in one line::

    p0: R0 reserved → released on abort → R1 reserved → written by R1 → late write from R0 → read by R1 (holds R0's KV (tenant A))

Events that break isolation (a foreign write, a release under an in-flight write, a read of
another request's KV) are ``hazard`` events, highlighted wherever the timeline is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvproof.spec.sglang.state import FREE, READ_NONE, UNWRITTEN, WR_FLIGHT, WR_LANDED
from kvproof.checker.report.sequence import release_reason
from kvproof.checker.traces import Trace

__all__ = ["PageEvent", "PageCell", "PageTimeline", "page_timelines"]


@dataclass(frozen=True)
class PageEvent:
    """Something that happened to a page at ``step``; ``hazard`` when it breaks isolation."""

    step: int
    text: str
    hazard: bool = False


@dataclass(frozen=True)
class PageCell:
    """A page after one step: its owner and content labels; ``foreign`` when it is owned and
    holds another request's KV."""

    owner: str
    content: str
    foreign: bool


@dataclass(frozen=True)
class PageTimeline:
    """One page through a trace: ``cells[k]`` is the page after step ``k`` (0 = initial)."""

    page: str
    pool: str
    events: tuple[PageEvent, ...]
    cells: tuple[PageCell, ...]

    def sentence(self) -> str:
        """The page's story in one line: ``p3: R1 reserved → released by timeout → ...``."""
        return f"{self.page}: " + " → ".join(e.text for e in self.events)

    @property
    def hazard(self) -> bool:
        """Some event of this page breaks isolation."""
        return any(e.hazard for e in self.events)


def page_timelines(trace: Trace, include_quiet: bool = False) -> list[PageTimeline]:
    """A timeline per decode page, then per prefill page; pages nothing happened to are left
    out unless ``include_quiet``."""
    spec = trace.machine.spec
    layout, K = spec.layout, spec.k
    states = trace.states

    def get(k: int, name: str, *idx: int) -> int:
        return states[k][layout.slot(name, *idx)]

    events: dict[tuple[str, int], list[PageEvent]] = {}

    def add(pool: str, p: int, k: int, text: str, hazard: bool = False) -> None:
        events.setdefault((pool, p), []).append(PageEvent(k, text, hazard))

    for k in range(1, len(states)):
        inst = trace.machine.instances[trace.actions[k - 1]]
        a = k - 1
        in_flight = [(r, w, c) for r in range(K.R) for w in range(K.S) for c in range(spec.send_len(r))
                     if get(a, "wr", r, w, c) >= WR_FLIGHT]
        for r in range(K.R):  # reads come first: decode reads, then releases, in one step
            if get(a, "read", r) == READ_NONE and get(k, "read", r) != READ_NONE:
                for c in range(spec.pages(r)):
                    p = get(a, "dest", r, c)
                    held = next((x for x in (get(a, "content", u, p) for u in range(K.U)) if x != r + 1), r + 1)
                    if held == r + 1:
                        add("decode", p, k, f"read by R{r}")
                    else:
                        add("decode", p, k, f"read by R{r} (holds {_held(spec, held)})", True)
        for p in range(K.D):
            before, after = get(a, "owner", p), get(k, "owner", p)
            if before == FREE and after != FREE:
                add("decode", p, k, f"R{after - 1} reserved")
            elif before != FREE and after == FREE:
                busy = any(get(a, "dest", r, c) == p and r == before - 1 for r, _, c in in_flight)
                add("decode", p, k, f"released {release_reason(inst.name)}"
                    + (f" while R{before - 1}'s write is in flight" if busy else ""), busy)
        for q in range(K.P):
            before, after = get(a, "src_owner", q), get(k, "src_owner", q)
            if before == FREE and after != FREE:
                add("prefill", q, k, f"R{after - 1} computes its KV here")
            elif before != FREE and after == FREE:
                busy = any(get(a, "src", r, c) == q and r == before - 1 for r, _, c in in_flight)
                add("prefill", q, k, "freed" + (f" while R{before - 1}'s write still reads it" if busy else ""), busy)
            elif before == after != FREE and get(a, "src_content", q) != get(k, "src_content", q):
                add("prefill", q, k, f"now holds {_held(spec, get(k, 'src_content', q))}")
        for r, w, c in in_flight:
            if get(k, "wr", r, w, c) != WR_LANDED:
                continue
            p, q = get(a, "dest", r, c), get(a, "src", r, c)
            owner, sent = get(a, "owner", p), get(a, "src_content", q)
            carrying = "" if sent == r + 1 else f" carrying {_held(spec, sent)}"
            if owner == r + 1:
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
    owner_label = "free" if owner == FREE else f"R{owner - 1}"
    labels = ["·" if c == UNWRITTEN else str(spec.k.content.label(c)) for c in contents]
    content_label = labels[0] if len(set(labels)) == 1 else "|".join(labels)
    foreign = owner != FREE and any(c not in (UNWRITTEN, owner) for c in contents)
    return PageCell(owner_label, content_label, foreign)
