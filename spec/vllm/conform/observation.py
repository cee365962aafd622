"""What is compared between the model and vLLM's code after every step, in the model's terms:
one :class:`Observation` from each side (:func:`model_observation` reads a model state,
:func:`code_observation` reads the harness's vLLM objects).

Block ids are not compared (the model takes the lowest free block, vLLM's block pool the head of
its free queue); what each request holds, how many blocks are free on each side (so every free
is seen), whose KV each held decode block carries and what decode computed on are.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kvproof.spec.vllm.state import (
    D_ENDED, D_HELD, D_NEW, D_READING, D_TRACKED, D_WAITING, FREE, OUT_LABELS, P_EXPIRED, P_FREED, P_HELD, P_NEW,
    RD_DONE, RD_FAILED, RD_NONE, RD_POSTED, RD_TAKEN, READ_LABELS,
)

__all__ = ["Observation", "model_observation", "code_observation", "NOT_MOVED"]

NOT_MOVED = -3
"""``kv`` of a request whose transfer has not moved its data yet."""

_D_VIEW = {D_NEW: "new", D_WAITING: "waiting_for_remote_kvs", D_READING: "waiting_for_remote_kvs",
           D_HELD: "held", D_ENDED: "ended"}


@dataclass(frozen=True)
class Observation:
    """One side's state after a step.

    ``prefill``: per request ``new`` / ``held`` (finished, blocks kept under a lease) /
    ``freed``; ``decode``: per request ``new`` / ``waiting_for_remote_kvs`` / ``held``
    (aborted, blocks kept until ``finished_recving``) / ``ended``; ``prefill_free`` and
    ``decode_free``: free blocks per side; ``kv``: per request, whose KV its decode block holds
    once its transfer moved data (0 unwritten, ``s + 1`` slot ``s``'s, ``-1`` no block, ``-3``
    no data moved yet: a newly allocated block's stale content depends on which free block the
    allocator hands out, and vLLM's free queue does not follow the model's lowest-free choice;
    per-rank WRITEs: a tuple, one entry per rank's part); ``tracked``: the requests decode
    heartbeats for; ``outcome`` and ``read`` per request; ``expired``: leases reaped;
    ``late``: completion notifications prefill found after the lease expired;
    ``source_freed_under_read`` / ``dest_freed_under_read``: the requests whose READ is posted
    (data not yet moved) while prefill no longer holds the source block / decode no longer holds
    the destination block; ``count_short``: push with per-rank WRITEs only, the requests decode
    still loads or holds while a prefill rank's WRITE failed to post, so its notification count
    cannot complete (V6); ``stranded``: push only, the aborted requests decode holds (until
    ``finished_recving``) for which no WRITE is posted and none can be any more (prefill freed
    the request: its writer dropped the finished blocks), V5; ``prefill_notified``: pull only,
    the requests whose notification to prefill (a READ's, or the notify-only one of a
    rejection, V12) is on its way (per-rank READs, V8: to some prefill rank); ``notify_only_reported``: pull only, the full local prefix
    hits (V13) whose notify-only load decode's worker recorded for ``finished_recving`` and the
    scheduler has not yet taken (#56640); ``mla_notified``: pull with two MLA prefill ranks only,
    the requests whose notify-only notification to prefill's rank 1 names prefill's request id
    and is on its way (V16, #36958); ``hung``: pull with ``read_may_hang`` only, the requests
    whose READ moved its data and will never complete.  With per-rank
    READs ``late`` counts requests, not notifications (two ranks may each find one).
    ``stale_read`` (V17): the requests with a READ in progress through decode's descriptors of
    a prefill KV cache registration that was replaced since.  ``reads_posted`` (V8 with failed
    posts): per request, how many of its READs were posted (in flight or done).
    """

    prefill: tuple[str, ...] = ()
    decode: tuple[str, ...] = ()
    prefill_free: int = 0
    decode_free: int = 0
    kv: tuple[int, ...] = ()
    tracked: frozenset[int] = frozenset()
    outcome: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    expired: int = 0
    late: int = 0
    source_freed_under_read: tuple[int, ...] = ()
    dest_freed_under_read: tuple[int, ...] = ()
    stranded: tuple[int, ...] = ()
    prefill_notified: tuple[int, ...] = ()
    count_short: tuple[int, ...] = ()
    notify_only_reported: tuple[int, ...] = ()
    mla_notified: tuple[int, ...] = ()
    hung: tuple[int, ...] = ()
    stale_read: tuple[int, ...] = ()
    reads_posted: tuple[int, ...] = ()

    def differences(self, other: "Observation", engine: str = "vLLM") -> list[str]:
        """What differs, one phrase per field (``self`` is the model, ``other`` the code)."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                out.append(f"{f.name}: model {_show(a)}, {engine} {_show(b)}")
        return out


def _show(v: Any) -> str:
    if isinstance(v, frozenset):
        return "{" + ", ".join(f"R{r}" for r in sorted(v)) + "}"
    if isinstance(v, tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


_SLOTS: dict[int, tuple[Any, dict]] = {}  # id(layout) -> (layout, {(field, *idx): slot}): slot lookups memoised


def model_observation(machine, state: bytes) -> Observation:
    """The model's state in the harness's terms."""
    spec = machine.spec
    lay, k = spec.layout, spec.k
    entry = _SLOTS.get(id(lay))
    if entry is None or entry[0] is not lay:
        entry = _SLOTS[id(lay)] = (lay, {})
    table = entry[1]

    def get(name, *idx):
        key = (name, *idx)
        if key not in table:
            table[key] = lay.slot(name, *idx)
        return state[table[key]]

    def p_view(r):
        ph = get("p_phase", r)
        return "new" if ph == P_NEW else "held" if ph == P_HELD else "freed"

    kv = []
    for r in range(k.R):
        ph = get("d_phase", r)
        if ph not in (D_WAITING, D_READING, D_HELD):
            kv.append(-1)
        elif k.ranked:  # every prefill rank's part of the block
            kv.append(tuple(get("content", w, get("dest", r)) if get("wr", r, w) in (RD_TAKEN, RD_DONE) else NOT_MOVED
                            for w in range(k.F)))
        else:
            kv.append(get("content", get("dest", r)) if get("rd", r) in (RD_TAKEN, RD_DONE) else NOT_MOVED)
    xfers = ((lambda r: [get("wr", r, w) for w in range(k.F)]) if k.ranked else (lambda r: [get("rd", r)]))
    return Observation(
        prefill=tuple(p_view(r) for r in range(k.R)),
        decode=tuple(_D_VIEW[get("d_phase", r)] for r in range(k.R)),
        prefill_free=sum(get("src_owner", b) == FREE for b in range(k.P)),
        decode_free=sum(get("owner", b) == FREE for b in range(k.D)),
        kv=tuple(kv),
        tracked=frozenset(r for r in range(k.R) if get("d_phase", r) in D_TRACKED),
        outcome=tuple((OUT_LABELS + ("error",))[get("outcome", r)] for r in range(k.R)),
        read=tuple(READ_LABELS[get("read", r)] for r in range(k.R)),
        expired=sum(get("p_phase", r) == P_EXPIRED for r in range(k.R)),
        late=sum(get("late", r) for r in range(k.R)),
        source_freed_under_read=tuple(r for r in range(k.R) if RD_POSTED in xfers(r)  # a replay's source: V9
                                      and get("src_owner", get("src", r)) != k.origin[r] + 1),
        dest_freed_under_read=tuple(r for r in range(k.R) if RD_POSTED in xfers(r)
                                    and get("owner", get("dest", r)) != r + 1),
        stranded=tuple(r for r in range(k.R) if not spec.pull and get("d_phase", r) == D_HELD
                       and all(x == RD_NONE for x in xfers(r)) and get("p_phase", r) in P_FREED),
        # a notification names the request whose parameters the READ carried (a replay's: the one it replays, V9)
        prefill_notified=tuple(sorted({k.origin[r] for r in range(k.R) if spec.pull and (
            any(get("wnotif", r, w) for w in range(k.F)) if k.ranked else get("notif", r) == 1)})),
        count_short=tuple(r for r in range(k.R) if k.ranked and not spec.pull and not spec.e.push_fail_notif
                          and get("d_phase", r) in (D_READING, D_HELD) and RD_FAILED in xfers(r)),
        notify_only_reported=tuple(r for r in range(k.R) if k.cached[r] and get("d_phase", r) == D_READING
                                   and get("rd", r) == RD_DONE),
        mla_notified=tuple(r for r in range(k.R) if k.mla and spec.e.mla_notif_remote_id
                           and get("mla_notif", r) == 1),
        hung=tuple(r for r in range(k.R) if spec.e.read_may_hang and get("hung", r) == 1),
        stale_read=tuple(r for r in range(k.R) if spec.e.prefill_reregisters and get("rgen", r) != get("p_gen")
                         and any(x in (RD_POSTED, RD_TAKEN) for x in xfers(r))),
        reads_posted=(tuple(sum(x in (RD_POSTED, RD_TAKEN, RD_DONE) for x in xfers(r)) for r in range(k.R))
                      if spec.e.read_post_may_fail else ()),
    )


def code_observation(h) -> Observation:
    """What harness ``h``'s vLLM objects did, in the model's terms."""
    prefill, decode, kv = [], [], []
    pws = getattr(h, "pws", None) or [h.pw, *getattr(h, "extra_pws", [])]  # every prefill rank's worker
    for r in range(h.R):
        pid, did = h.pid(r), h.did(r)
        preq = h.P.requests.get(pid)
        leased = any(pid in pw._reqs_to_send for pw in pws)
        if h.slots[r].params is None and preq is None:
            prefill.append("new")
        elif preq is not None and leased:
            prefill.append("held")
        elif preq is None and not leased:
            prefill.append("freed")
        else:
            prefill.append("scheduler and worker disagree")
        dreq = h.D.requests.get(did)
        if dreq is None:
            decode.append("ended" if h.slots[r].recv is not None else "new")
        elif dreq.status.name == "WAITING_FOR_REMOTE_KVS":
            decode.append("waiting_for_remote_kvs")
        elif dreq.is_finished():
            decode.append("held")
        else:
            decode.append(dreq.status.name.lower())
        blocks = h.kv_blocks(did)
        if len(blocks) != 1:
            kv.append(-1 if not blocks else -2)
        elif hasattr(h, "pws"):
            kv.append(tuple(t if h.part_read.get((r, w)) in ("taken", "done", "counted") else NOT_MOVED
                            for w, t in enumerate(h.d_tag[blocks[0]])))
        else:
            kv.append(h.d_tag[blocks[0]] if h.slots[r].read in ("taken", "done") else NOT_MOVED)
    hb = h.D.connector.connector_scheduler._heartbeat_req_engine
    stats = h.pw.xfer_stats.data
    ranked = hasattr(h, "pws")
    pull_ranked = getattr(h, "pull_ranked", False)  # V8: per-rank READs (late counted per request)

    def posted(r):
        if ranked:
            return any(h.part_read.get((r, w)) == "posted" for w in range(h.F))
        return h.slots[r].read == "posted"

    def unposted(r):
        if ranked:
            return all((r, w) not in h.part_read for w in range(h.F))
        return h.slots[r].read == "none"
    return Observation(
        prefill=tuple(prefill), decode=tuple(decode),
        prefill_free=h.P.kv_cache_manager.block_pool.get_num_free_blocks(),
        decode_free=h.decode_free(),
        kv=tuple(kv),
        tracked=frozenset(h.slot_of(d) for d in hb),
        outcome=tuple(s.outcome for s in h.slots), read=tuple(s.seen for s in h.slots),
        expired=len(h.expired_slots) if ranked else len(stats.get("num_kv_expired_reqs", ())),
        late=(len(h.late_slots) if pull_ranked
              else sum(len(pw.xfer_stats.data.get("num_notifications_after_expiry", ())) for pw in pws)),
        source_freed_under_read=tuple(r for r in range(h.R) if posted(r)
                                      and h.pid(h.origin(r)) not in h.P.requests),
        dest_freed_under_read=tuple(r for r in range(h.R) if posted(r) and not h._blocks(h.D, h.did(r))),
        stranded=tuple(r for r in range(h.R) if decode[r] == "held" and unposted(r) and h.stranded(r)),
        count_short=tuple(r for r in range(h.R) if ranked and not pull_ranked and decode[r] in ("waiting_for_remote_kvs", "held")
                          and any(h.part_read.get((r, w)) == "failed" for w in range(h.F))
                          and h.dw.consumer_notification_counts_by_req.get(h.did(r), 0) < h.F),
        prefill_notified=h.prefill_notified(),
        notify_only_reported=h.notify_only_reported() if hasattr(h, "notify_only_reported") else (),
        mla_notified=h.mla_notified() if hasattr(h, "mla_notified") else (),
        hung=tuple(sorted(getattr(h, "hung", ()))),
        stale_read=h.stale_reads() if getattr(h, "reregisters", False) else (),
        reads_posted=(tuple(sum(h.part_read.get((r, w)) in ("posted", "taken", "done") for w in range(h.F))
                            for r in range(h.R)) if getattr(h, "post_may_fail", False) else ()),
    )
