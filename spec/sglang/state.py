"""The state of the PD KV page lifecycle: its codes and its fields.

Requests are ``R0..R{n-1}`` (a request slot is also its bootstrap room); decode pages ``p0..``;
prefill (source) pages ``q0..``; metadata (aux) slots ``m0..``; prefill ranks ``P0..`` and decode
ranks ``D0..``.  A request of ``k`` pages is sent as chunks ``0..k-1``, one page each, by every
write stream: one per prefill rank and layer (``P0``, or ``P0.l1`` with several layers), each
writing its own part of the page.  Page owners are ``free`` or a request;
page contents are ``unwritten``, a request's KV, or ``old:<tenant>`` - KV left by an earlier
request of a room that took a new one (request streams).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvproof.spec.sglang.config import Config
from kvproof.model.layout import Domain, Field

__all__ = [
    "P_NEW", "P_QUEUED", "P_SENDING", "P_STOPPED", "P_ENDED",
    "D_NEW", "D_RESERVED", "D_WAITING", "D_VERIFIED", "D_HELD", "D_ENDED", "D_LIVE",
    "OUT_NONE", "OUT_SUCCESS", "OUT_ERROR", "OUT_ABORTED",
    "POLL_NONE", "POLL_SUCCESS", "POLL_FAILED",
    "ACK_NONE", "ACK_RECEIPT", "ACK_DRAIN",
    "PAB_NONE", "PAB_RECEIVED", "PAB_ACKED", "PAB_CLEARED",
    "ABT_NONE", "ABT_SENT", "ABT_DELIVERED",
    "READ_NONE", "READ_OWN", "READ_FOREIGN", "READ_CROSS_TENANT",
    "WR_NOT_ISSUED", "WR_LANDED", "WR_FLIGHT",
    "FREE", "UNWRITTEN", "NO_TENANT", "owned_by", "kv_of", "owner_request", "request_name", "room_of",
    "WriteTarget", "Codes", "build_fields",
]

# prefill scheduler's view of a request (PrefillBootstrapQueue -> forward -> KVSender)
P_NEW, P_QUEUED, P_SENDING, P_STOPPED, P_ENDED = range(5)
P_LABELS = ("new", "queued", "sending", "stopped", "ended")
# decode's view (DecodePreallocQueue -> DecodeTransferQueue -> running batch / _deferred_releases)
D_NEW, D_RESERVED, D_WAITING, D_VERIFIED, D_HELD, D_ENDED = range(6)
D_LABELS = ("new", "reserved", "waiting", "verified", "held", "ended")
D_LIVE = (D_RESERVED, D_WAITING, D_VERIFIED, D_HELD)  # phases that hold a reservation
# what the client got
OUT_NONE, OUT_SUCCESS, OUT_ERROR, OUT_ABORTED = range(4)
OUT_LABELS = ("none", "success", "error", "aborted")
# a prefill rank's transfer conclusion as decode polls it (KVPoll Success / Failed)
POLL_NONE, POLL_SUCCESS, POLL_FAILED = range(3)
POLL_LABELS = ("none", "success", "failed")
# an acknowledgement on its way from a prefill rank to decode
ACK_NONE, ACK_RECEIPT, ACK_DRAIN = range(3)
ACK_LABELS = ("none", "receipt", "drain")
# a prefill rank's handling of decode's ABORT (cleared: the ack target was dropped, H4)
PAB_NONE, PAB_RECEIVED, PAB_ACKED, PAB_CLEARED = range(4)
PAB_LABELS = ("none", "received", "acked", "cleared")
# decode's ABORT to one prefill rank
ABT_NONE, ABT_SENT, ABT_DELIVERED = range(3)
ABT_LABELS = ("none", "sent", "delivered")
# what decode's read of a request's pages found
READ_NONE, READ_OWN, READ_FOREIGN, READ_CROSS_TENANT = range(4)
READ_LABELS = ("none", "own", "foreign", "cross_tenant")
# a write: not issued, landed, or in flight with an age (WR_FLIGHT + age)
WR_NOT_ISSUED, WR_LANDED, WR_FLIGHT = 0, 1, 2

FREE = 0  # owner code of a free page or slot; request r owns with code owned_by(r)
UNWRITTEN = 0  # content code of a page never written; request r's KV is code kv_of(r)
NO_TENANT = 255  # tenant of unwritten content


# The two request-naming encodings, defined here once: every action, claim and narrator names a
# request's owner and content codes through these, never through arithmetic on ``r``.
def owned_by(r: int) -> int:
    """The owner code of a page or slot that request ``r`` owns (an ``owner``, ``src_owner`` or
    ``aux_owner`` value; ``FREE`` is 0, so request ``r`` is ``r + 1``)."""
    return r + 1


def kv_of(r: int) -> int:
    """The content code of request ``r``'s KV (a ``content``, ``src_content`` or ``aux_content``
    value; ``UNWRITTEN`` is 0, so request ``r``'s KV is ``r + 1``)."""
    return r + 1


def owner_request(code: int) -> int | None:
    """The request an owner code names, ``None`` for ``FREE`` (the inverse of :func:`owned_by`,
    for narrators reading concrete states)."""
    return None if code == FREE else code - 1


@dataclass(frozen=True)
class WriteTarget:
    """One write a request may have in flight, declared as a resource by
    :meth:`~kvproof.spec.sglang.protocol.PdProtocol.write_targets`: the write claims
    (``no_write_after_release``) iterate over every declaration, so a variant's new kind of
    write is checked by the base claims once it is declared.

    ``request`` is the issuing request; ``in_flight`` the condition under which the write is on
    its way; ``owner`` the owner field of the pool it lands in (``"owner"`` for decode pages,
    ``"aux_owner"`` for metadata slots, or a variant's own); ``dest`` the index it lands at in
    that pool (a state value such as ``s.dest[r, c]``); ``kind`` names the write for readers.
    """

    request: int
    in_flight: Any
    owner: str
    dest: Any
    kind: str = "write"


def room_of(r: int) -> int:
    """The bootstrap room of request slot ``r`` when the scenario's rooms are not the client's
    (``room_policy`` ``reused_after_end`` or ``distinct``: a slot's room is its own number);
    :meth:`~.config.Config.room_of` answers for every policy."""
    return r


def request_name(number: int, room: int) -> str:
    """How every rendering names a request: ``R<number>@room<room>``.  ``number`` counts the
    trace's requests in the order they arrived (the first request of slot ``r`` is ``r``; a
    room's next request, with request streams, takes the next free number), so two requests that
    share a room are named apart and a request is never named by its room."""
    return f"R{number}@room{room}"


class Codes:
    """The value codes and domains that depend on the instance's sizes."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        e = cfg.engine
        self.R = len(cfg.requests)
        self.C = max(r.pages for r in cfg.requests)
        self.D = cfg.decode_pages
        self.P = cfg.prefill_pages
        self.M = cfg.aux_slots
        self.PR = cfg.prefill_ranks
        self.DR = cfg.decode_ranks
        self.L = cfg.layers
        self.S = self.PR * self.L  # write streams: one per (prefill rank, layer)
        self.U = cfg.units
        self.tenants = cfg.tenants
        self.T = len(self.tenants)
        self.tenant = tuple(self.tenants.index(r.tenant) for r in cfg.requests)
        self.G = 2 if e.request_streams else 1
        self.ages = 1 if e.write_latency_bound is None else e.write_latency_bound + 1
        req_names = tuple(f"R{r}" for r in range(self.R))
        self.req = Domain("request", self.R, req_names)
        self.chunk = Domain("chunk", self.C)
        self.prank = Domain("prefill_rank", self.PR, tuple(f"P{i}" for i in range(self.PR)))
        self.drank = Domain("decode_rank", self.DR, tuple(f"D{i}" for i in range(self.DR)))
        self.unit = Domain("shard", self.U, tuple(
            f"s{u}" if self.L == 1 else f"s{u // self.L}.l{u % self.L}" for u in range(self.U)))
        self.stream = Domain(
            "write_stream", self.S,
            tuple(f"P{w // self.L}" if self.L == 1 else f"P{w // self.L}.l{w % self.L}" for w in range(self.S)),
        )
        self.page = Domain("page", self.D, tuple(f"p{p}" for p in range(self.D)))
        self.ppage = Domain("prefill_page", self.P, tuple(f"q{q}" for q in range(self.P)))
        self.slot = Domain("aux_slot", max(self.M, 1), tuple(f"m{m}" for m in range(max(self.M, 1))))
        self.page_ref = Domain("page_or_none", self.D + 1, self.page.labels + ("none",))
        self.ppage_ref = Domain("prefill_page_or_none", self.P + 1, self.ppage.labels + ("none",))
        self.slot_ref = Domain("aux_slot_or_none", self.slot.size + 1, self.slot.labels + ("none",))
        self.owner = Domain("owner", self.R + 1, ("free",) + req_names)
        self.content = Domain(
            "content",
            1 + self.R + self.T,
            ("unwritten",) + req_names + tuple(f"old:{t}" for t in self.tenants),
        )
        self.write = Domain(
            "write",
            WR_FLIGHT + self.ages,
            ("not_issued", "landed")
            + (("in_flight",) if self.ages == 1 else tuple(f"in_flight+{a}" for a in range(self.ages))),
        )
        self.hold = Domain("hold", e.timeout + 1)
        self.wait = Domain("wait", (e.waiting_timeout or 0) + 1)
        self.hb = Domain("heartbeat_misses", (e.heartbeat_timeout if e.heartbeat_detection else 0) + 1)
        self.gen = Domain("generation", self.G)
        # tenant of each content code: unwritten has none
        self.tenant_of_content = (NO_TENANT,) + self.tenant + tuple(range(self.T))

    def retired(self, r: int) -> int:
        """Content code of KV left behind by request slot ``r``'s previous request."""
        return 1 + self.R + self.tenant[r]

    def streams_of(self, pr: int) -> range:
        """The write streams of prefill rank ``pr``: one per layer."""
        return range(pr * self.L, (pr + 1) * self.L)

    def rank_of_stream(self, w: int) -> int:
        """The prefill rank that owns write stream ``w``."""
        return w // self.L

    def units_of_stream(self, w: int) -> list[int]:
        """The parts of a page that write stream ``w`` writes: its rank's shards, its layer."""
        pr, layer = divmod(w, self.L)
        shards = [sh for sh in range(self.U // self.L) if sh % self.PR == pr]
        return [sh * self.L + layer for sh in shards]

    def prefill_ranks_of(self, dr: int) -> list[int]:
        """The prefill ranks decode rank ``dr`` exchanges shards with (its bootstrap_infos)."""
        return [pr for pr in range(self.PR) if self.cfg.linked(pr, dr)]


def build_fields(k: Codes) -> list[Field]:
    """The state's fields, grouped by actor, in the order traces show them."""
    req, chunk, prank, drank = k.req, k.chunk, k.prank, k.drank

    def en(name: str, labels: tuple[str, ...]) -> Domain:
        return Domain(name, len(labels), labels)

    flag = en("flag", ("no", "yes"))
    fields = [
        Field("p_phase", (req,), en("p_phase", P_LABELS), P_NEW, "prefill scheduler's view of the request"),
        Field("p_abort", (req, prank), en("p_abort", PAB_LABELS), PAB_NONE, "each prefill rank's handling of ABORT"),
        Field("src", (req, chunk), k.ppage_ref, k.P, "prefill source page of each chunk"),
        Field("d_phase", (req,), en("d_phase", D_LABELS), D_NEW, "decode's view of the request"),
        Field("meta", (req, drank), flag, 0, "destination metadata published by each decode rank"),
        Field("dest", (req, chunk), k.page_ref, k.D, "decode destination page of each chunk"),
        Field("hold", (req,), k.hold, 0, "ticks a deferred release has been held"),
        Field("wr", (req, k.stream, chunk), k.write, WR_NOT_ISSUED,
              "each write stream's (prefill rank, layer) write of each chunk"),
        Field("poll", (req, prank), en("poll", POLL_LABELS), POLL_NONE, "each prefill rank's KVPoll conclusion"),
        Field("abort_tx", (req, prank), en("abort_tx", ABT_LABELS), 0, "decode's ABORT to each prefill rank"),
        Field("armed", (req,), flag, 0, "decode registered the room for acks (register_deferred_abort_room)"),
        Field("ack", (req, prank), en("ack", ACK_LABELS), ACK_NONE, "ack on its way from each prefill rank"),
        Field("acked", (req, prank), flag, 0, "decode recorded a drain ack from each prefill rank"),
        Field("outcome", (req,), en("outcome", OUT_LABELS), OUT_NONE, "what the client got"),
        Field("read", (req,), en("read", READ_LABELS), READ_NONE, "what decode's read found"),
        Field("owner", (k.page,), k.owner, FREE, "decode page owner", sentinel=True),
        Field("content", (k.unit, k.page), k.content, UNWRITTEN, "whose KV each shard of a decode page holds",
              sentinel=True),
        Field("src_owner", (k.ppage,), k.owner, FREE, "prefill page owner", sentinel=True),
        Field("src_content", (k.ppage,), k.content, UNWRITTEN, "whose KV a prefill page holds", sentinel=True),
    ]
    e = k.cfg.engine
    if e.waiting_timeout is not None:
        fields.append(Field("wait", (req,), k.wait, 0, "ticks decode has waited for the transfer"))
    if e.request_streams:
        fields.append(Field("gen", (req,), k.gen, 0, "generation of the room's current request"))
        fields.append(Field("ack_gen", (req, prank), k.gen, 0, "generation named by the ack in flight"))
    if k.M:
        fields += [
            Field("aux", (req,), k.slot_ref, k.slot.size, "decode metadata (aux) slot of the request"),
            Field("aux_wr", (req,), k.write, WR_NOT_ISSUED, "prefill's write of the aux data"),
            Field("aux_owner", (k.slot,), k.owner, FREE, "aux slot owner", sentinel=True),
            Field("aux_content", (k.slot,), k.content, UNWRITTEN, "whose aux data a slot holds", sentinel=True),
        ]
    if e.peer_death:
        fields.append(Field("p_dead", (), flag, 0, "the prefill node died"))
        fields.append(Field("hb", (), k.hb, 0, "heartbeats decode has missed since the death"))
    return fields
