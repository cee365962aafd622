"""The state of the PD KV page lifecycle: its codes and its fields.

Requests are ``R0..R{n-1}``; decode pages ``p0..``; prefill (source) pages ``q0..``; a request
of ``k`` pages is sent as chunks ``0..k-1``, one page each.  Page owners are ``free`` or a
request; page contents are ``unwritten``, a live request's KV, or ``old:<tenant>`` - KV of a
finished request whose slot took a new request (only with request streams).
"""

from __future__ import annotations

from .config import Config
from .layout import Domain, Field

__all__ = [
    "P_NEW", "P_QUEUED", "P_SENDING", "P_STOPPED", "P_ENDED",
    "D_NEW", "D_RESERVED", "D_WAITING", "D_HELD", "D_ENDED",
    "OUT_NONE", "OUT_SUCCESS", "OUT_ERROR", "OUT_ABORTED",
    "POLL_NONE", "POLL_SUCCESS", "POLL_FAILED",
    "ACK_NONE", "ACK_RECEIPT", "ACK_DRAIN",
    "PAB_NONE", "PAB_RECEIVED", "PAB_ACKED",
    "READ_NONE", "READ_OWN", "READ_FOREIGN", "READ_CROSS_TENANT",
    "WR_NOT_ISSUED", "WR_LANDED", "WR_FLIGHT",
    "FREE", "UNWRITTEN", "NO_TENANT",
    "Codes", "build_fields",
]

# prefill side of a request (PrefillBootstrapQueue -> forward -> KVSender)
P_NEW, P_QUEUED, P_SENDING, P_STOPPED, P_ENDED = range(5)
P_LABELS = ("new", "queued", "sending", "stopped", "ended")
# decode side (DecodePreallocQueue -> DecodeTransferQueue -> running / _deferred_releases)
D_NEW, D_RESERVED, D_WAITING, D_HELD, D_ENDED = range(5)
D_LABELS = ("new", "reserved", "waiting", "held", "ended")
# what the client got
OUT_NONE, OUT_SUCCESS, OUT_ERROR, OUT_ABORTED = range(4)
OUT_LABELS = ("none", "success", "error", "aborted")
# the transfer's conclusion as decode polls it (KVPoll Success / Failed)
POLL_NONE, POLL_SUCCESS, POLL_FAILED = range(3)
POLL_LABELS = ("none", "success", "failed")
# acknowledgement on its way from prefill to decode
ACK_NONE, ACK_RECEIPT, ACK_DRAIN = range(3)
ACK_LABELS = ("none", "receipt", "drain")
# prefill's handling of decode's ABORT
PAB_NONE, PAB_RECEIVED, PAB_ACKED = range(3)
PAB_LABELS = ("none", "received", "acked")
# what decode's read of a request's pages found
READ_NONE, READ_OWN, READ_FOREIGN, READ_CROSS_TENANT = range(4)
READ_LABELS = ("none", "own", "foreign", "cross_tenant")
# a chunk's write: not issued, landed, or in flight with an age (WR_FLIGHT + age)
WR_NOT_ISSUED, WR_LANDED, WR_FLIGHT = 0, 1, 2

FREE = 0  # owner code of a free page; request r owns with code r + 1
UNWRITTEN = 0  # content code of a page never written; request r's KV is code r + 1
NO_TENANT = 255  # tenant of unwritten content


class Codes:
    """The value codes and domains that depend on the instance's sizes."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.R = len(cfg.requests)
        self.C = max(r.pages for r in cfg.requests)
        self.D = cfg.decode_pages
        self.P = cfg.prefill_pages
        self.tenants = cfg.tenants
        self.T = len(self.tenants)
        self.tenant = tuple(self.tenants.index(r.tenant) for r in cfg.requests)
        e = cfg.engine
        self.ages = 1 if e.write_latency_bound is None else e.write_latency_bound + 1
        req_names = tuple(f"R{r}" for r in range(self.R))
        self.req = Domain("request", self.R, req_names)
        self.chunk = Domain("chunk", self.C)
        self.page = Domain("page", self.D, tuple(f"p{p}" for p in range(self.D)))
        self.ppage = Domain("prefill_page", self.P, tuple(f"q{q}" for q in range(self.P)))
        self.page_ref = Domain("page_or_none", self.D + 1, self.page.labels + ("none",))
        self.ppage_ref = Domain("prefill_page_or_none", self.P + 1, self.ppage.labels + ("none",))
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
        # tenant of each content code: unwritten has none
        self.tenant_of_content = (NO_TENANT,) + self.tenant + tuple(range(self.T))

    def retired(self, r: int) -> int:
        """Content code of KV left behind by request slot ``r``'s previous request."""
        return 1 + self.R + self.tenant[r]


def build_fields(k: Codes) -> list[Field]:
    """The state's fields, grouped by actor, in the order traces show them."""
    req, chunk = k.req, k.chunk

    def en(name: str, labels: tuple[str, ...]) -> Domain:
        return Domain(name, len(labels), labels)

    flag = en("flag", ("no", "yes"))
    return [
        Field("p_phase", (req,), en("p_phase", P_LABELS), P_NEW, "prefill's view of the request"),
        Field("p_abort", (req,), en("p_abort", PAB_LABELS), PAB_NONE, "prefill's handling of ABORT"),
        Field("src", (req, chunk), k.ppage_ref, k.P, "prefill source page of each chunk"),
        Field("d_phase", (req,), en("d_phase", D_LABELS), D_NEW, "decode's view of the request"),
        Field("meta", (req,), flag, 0, "destination metadata published to prefill"),
        Field("dest", (req, chunk), k.page_ref, k.D, "decode destination page of each chunk"),
        Field("hold", (req,), k.hold, 0, "ticks a deferred release has been held"),
        Field("wr", (req, chunk), k.write, WR_NOT_ISSUED, "each chunk's write"),
        Field("poll", (req,), en("poll", POLL_LABELS), POLL_NONE, "KVPoll conclusion for decode"),
        Field("abort_tx", (req,), flag, 0, "decode sent ABORT to prefill"),
        Field("ack", (req,), en("ack", ACK_LABELS), ACK_NONE, "ack on its way to decode"),
        Field("outcome", (req,), en("outcome", OUT_LABELS), OUT_NONE, "what the client got"),
        Field("read", (req,), en("read", READ_LABELS), READ_NONE, "what decode's read found"),
        Field("owner", (k.page,), k.owner, FREE, "decode page owner", sentinel=True),
        Field("content", (k.page,), k.content, UNWRITTEN, "whose KV a decode page holds", sentinel=True),
        Field("src_owner", (k.ppage,), k.owner, FREE, "prefill page owner", sentinel=True),
        Field("src_content", (k.ppage,), k.content, UNWRITTEN, "whose KV a prefill page holds",
              sentinel=True),
    ]
