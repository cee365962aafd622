"""One prefill, one decode, one KV page, and an abort: the smallest PD-disaggregated protocol.

Decode reserves its only page for a request and tells prefill where to write; prefill posts the
request's KV write; the write lands on the page some time later; decode reads the page and frees
it when the request finishes.  The client may abort a request while decode waits for its KV.
The hazard is SGLang's abort race (fixed by https://github.com/sgl-project/sglang/pull/35049):
decode frees an aborted request's page at once, the next request reserves it, and the aborted
request's late write lands on it, so the next request decodes on another request's KV.

Abstractions: prefill learns of an abort at once and posts no write after it (the ABORT message
of https://github.com/sgl-project/sglang/pull/27372), but a write already posted still lands;
"the write is no longer in flight" stands for the drain acknowledgement with which prefill tells
decode that it is safe to free the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvproof.model import Domain, Field, Lane, Narration, Pool, Read, Signal, Spec, action, invariant, witness

__all__ = ["MiniPdConfig", "MiniPd"]

NEW, WAITING, DECODED, ABORTED = 0, 1, 2, 3  # phase[r]: where request r is at decode
IDLE, IN_FLIGHT, LANDED = 0, 1, 2  # write[r]: prefill's KV write for request r
FREE = 0  # owner: nobody holds the page


def owned_by(r: int) -> int:
    """The ``owner`` code of request ``r`` holding the page."""
    return r + 1


def kv_of(r: int) -> int:
    """The ``data`` / ``got`` code of request ``r``'s KV."""
    return r + 1


@dataclass(frozen=True)
class MiniPdConfig:
    """A scenario's ``[config]`` table: how many requests share the page, and whether decode
    frees an aborted request's page at once (before PR 35049) or holds it until its write is
    no longer in flight (the deferred release of PR 35049)."""

    requests: int = 2
    free_on_abort: bool = False

    def __post_init__(self):
        if not 1 <= self.requests <= 3:
            raise ValueError(f"requests: expected a whole number in 1..3, got {self.requests}")


class MiniPd(Spec):
    """Requests ``R0``, ``R1``, ... share decode's one KV page, one at a time."""

    def __init__(self, cfg: MiniPdConfig):
        self.cfg = cfg
        names = tuple(f"R{i}" for i in range(cfg.requests))
        self.req = Domain("req", cfg.requests, names)
        self.holder = Domain("holder", cfg.requests + 1, ("free", *names))
        self.kv = Domain("kv", cfg.requests + 1, ("none", *names))

    def build_fields(self):
        """Each request's phase at decode and its KV write; the page's holder and content; what
        each request read."""
        return [
            Field("phase", (self.req,), Domain("phase", 4, ("new", "waiting", "decoded", "aborted")),
                  doc="where the request is at decode"),
            Field("write", (self.req,), Domain("write", 3, ("idle", "in_flight", "landed")),
                  doc="prefill's KV write for the request"),
            Field("owner", (), self.holder, doc="the request the page is reserved for"),
            Field("data", (), self.kv, doc="whose KV the page holds"),
            Field("got", (self.req,), self.kv, doc="whose KV decode read for the request"),
        ]

    @action("decode", "req")
    def decode_prealloc(self, s, n, r):
        """Decode reserves the free page for a new request and tells prefill where to write
        (SGLang: ``DecodePreallocQueue`` pre-allocating KV pages, then ``send_metadata``)."""
        s.require((s.phase[r] == NEW) & (s.owner == FREE))
        n.phase[r] = WAITING
        n.owner = owned_by(r)

    @action("prefill", "req")
    def prefill_send_kv(self, s, n, r):
        """Prefill runs the prompt and posts its KV write to the page decode reserved (SGLang:
        the KV sender's ``send`` handing the chunk to the transfer engine)."""
        s.require((s.phase[r] == WAITING) & (s.write[r] == IDLE))
        n.write[r] = IN_FLIGHT

    @action("transfer", "req")
    def transfer_write_lands(self, s, n, r):
        """A posted write lands on the page, whoever holds the page now (the transfer engine
        completing the RDMA write); the hazard: after an early free it lands on the next
        request's page."""
        s.require(s.write[r] == IN_FLIGHT)
        n.write[r] = LANDED
        n.data = kv_of(r)

    @action("decode", "req")
    def decode_commit(self, s, n, r):
        """Decode sees the transfer done, runs the request on the page and frees the page when
        the request finishes (SGLang: ``DecodeTransferQueue.pop_transferred``, then the decode
        forward); what it read is recorded in ``got``."""
        s.require((s.phase[r] == WAITING) & (s.write[r] == LANDED))
        n.phase[r] = DECODED
        n.got[r] = s.data
        n.owner = FREE

    @action("decode", "req")
    def decode_abort(self, s, n, r):
        """The client aborts a request while decode waits for its KV (SGLang: ``/abort_request``
        reaching the KV receiver's ``abort``).  With ``free_on_abort`` the page is freed at
        once, though the request's write may still be in flight (the abort race, before PR
        35049)."""
        s.require(s.phase[r] == WAITING)
        n.phase[r] = ABORTED
        if self.cfg.free_on_abort:
            n.owner = FREE

    @action("decode", "req")
    def decode_release_deferred(self, s, n, r):
        """Decode frees an aborted request's held page once its write is no longer in flight
        (PR 35049's ``resolve_deferred_releases`` once ``is_abort_release_safe``: prefill's
        drain ack).  Only without ``free_on_abort``."""
        s.require(not self.cfg.free_on_abort)
        s.require((s.phase[r] == ABORTED) & (s.owner == owned_by(r)) & (s.write[r] != IN_FLIGHT))
        n.owner = FREE

    @invariant
    def decode_reads_only_own_kv(self, s):
        """Every request decode ran read its own KV, never another request's (broken by the
        abort race: an aborted request's late write lands on the page the next one reserved)."""
        return s.ops.all_((s.phase[r] != DECODED) | (s.got[r] == kv_of(r)) for r in self.req)

    @witness
    def sometimes_abort_mid_transfer(self, s):
        """A request is aborted while its write is in flight (so a pass is not vacuous)."""
        return s.ops.any_((s.phase[r] == ABORTED) & (s.write[r] == IN_FLIGHT) for r in self.req)

    @witness
    def sometimes_request_decodes(self, s):
        """A request is decoded (so the invariant has reads to judge)."""
        return s.ops.any_(s.phase[r] == DECODED for r in self.req)

    def narration(self):
        """How reports draw a trace: five lanes, the page as a pool (``owner`` and ``data``),
        decode's read into ``got``, and the field changes that are messages."""
        return Narration(
            lanes=(Lane("client", "client"), Lane("prefill", "prefill"), Lane("transfer", "transfer engine"),
                   Lane("decode", "decode"), Lane("page", "KV page")),
            signals=(Signal("phase", (WAITING,), "client", "decode", "{req} arrives", "request"),
                     Signal("phase", (ABORTED,), "client", "decode", "client aborts {req}", "request"),
                     Signal("write", (IN_FLIGHT,), "prefill", "transfer", "{req}: KV write posted"),
                     Signal("phase", (DECODED,), "decode", "client", "{req}: decoded")),
            pools=(Pool("page", owner="owner", content="data", lane="page",
                        reasons={"decode_abort": "on abort", "decode_commit": "when finished",
                                 "decode_release_deferred": "once the write is no longer in flight"}),),
            reads=(Read("got", None, "page", "decode"),),
        )
