"""The state of vLLM 0.33.0's PD lifecycle (pull and push mode): its codes and its fields.

Requests are ``R0..R{n-1}``, each one KV block; prefill's (the producer's) blocks are
``q0..``, decode's (the consumer's) ``p0..``.  A block's owner is ``free`` or a request; its
content is ``unwritten`` or a request's KV (a freed block keeps its content until it is
overwritten, which is how a reused block hands out another request's KV).  Clocks saturate:
the lease counts down to 0, the other counters up to their bound.
"""

from __future__ import annotations

from kvproof.model.layout import Domain, Field
from kvproof.spec.vllm.config import Config

__all__ = [
    "P_NEW", "P_HELD", "P_SENT", "P_EXPIRED", "P_ABORTED", "P_FREED",
    "D_NEW", "D_WAITING", "D_READING", "D_HELD", "D_ENDED", "D_LIVE", "D_TRACKED",
    "RD_NONE", "RD_POSTED", "RD_TAKEN", "RD_DONE", "RD_FAILED", "RD_RETAINED", "WN_NONE", "WN_DONE", "WN_FAIL",
    "OUT_NONE", "OUT_SUCCESS", "OUT_ABORTED", "OUT_ERROR",
    "READ_NONE", "READ_OWN", "READ_FOREIGN", "READ_CROSS_TENANT",
    "FREE", "UNWRITTEN", "NO_TENANT", "Codes", "build_fields",
]

# prefill's view: new -> held (finished, blocks kept for decode under a lease, in _reqs_to_send)
# -> sent (freed on the consumer's completion notification: finished_sending) | expired (freed
# by _reap_expired_send_leases) | aborted (freed by an abort of the finished request, pre-#25067)
P_NEW, P_HELD, P_SENT, P_EXPIRED, P_ABORTED = range(5)
P_LABELS = ("new", "held", "sent", "expired", "aborted")
P_FREED = (P_SENT, P_EXPIRED, P_ABORTED)
# decode's view: new -> waiting (WAITING_FOR_REMOTE_KVS, blocks allocated, READ not posted /
# PUSH_REG not sent) -> reading (READ posted / PUSH_REG sent: loading) -> ended; held: aborted while its READ may still move data
# (delay_free_blocks, #32255), freed on finished_recving
D_NEW, D_WAITING, D_READING, D_HELD, D_ENDED = range(5)
D_LABELS = ("new", "waiting_for_remote_kvs", "reading", "held", "ended")
D_LIVE = (D_WAITING, D_READING, D_HELD)  # phases that hold decode blocks
D_TRACKED = (D_WAITING, D_READING)  # phases decode heartbeats for (queued or loading)
# the transfer of a request (pull: decode's READ; push: prefill's WRITE): not posted, posted
# (data not yet moved), data moved, complete
RD_NONE, RD_POSTED, RD_TAKEN, RD_DONE = range(4)
RD_LABELS = ("none", "posted", "data_taken", "complete")
RD_FAILED = 4  # per-rank transfers only: the rank's WRITE failed to post (V6), or the READ failed (V8)
WR_LABELS = RD_LABELS + ("post_failed",)
RD_RETAINED = 5  # per-rank READs with read_release_may_fail (V8's third path): check_xfer_state returned an
# error and _try_release_xfer_handle failed: the DMA may still land (0.33.0 retains the handle)
# a rank's notification on its way to decode (per-rank WRITEs): none, the WRITE's completion
# "{D_req}:{tp}", or (hypothetical #50754) PUSH_FAIL; per-rank READs (V8): the READ's
# completion "{req}:1" on its way to its prefill rank
# a per-rank READ that failed (V8) is RD_FAILED: check_xfer_state returned an error
WN_NONE, WN_DONE, WN_FAIL = range(3)
WN_LABELS = ("none", "write_done", "push_fail")
OUT_NONE, OUT_SUCCESS, OUT_ABORTED = range(3)
OUT_LABELS = ("none", "success", "aborted")
OUT_ERROR = 3  # with push_fail_notif only: the load failed, FINISHED_ERROR (kv_load_failure_policy "fail")
READ_NONE, READ_OWN, READ_FOREIGN, READ_CROSS_TENANT = range(4)
READ_LABELS = ("none", "own", "foreign", "cross_tenant")

FREE = 0  # owner code of a free block; request r owns with code r + 1
UNWRITTEN = 0  # content code of a block never written; request r's KV is code r + 1
NO_TENANT = 255  # tenant of unwritten content


class Codes:
    """The value codes and domains that depend on the instance's sizes."""

    def __init__(self, cfg: Config):
        e = cfg.engine
        self.cfg = cfg
        self.R = len(cfg.requests)
        self.P = cfg.prefill_blocks
        self.D = cfg.decode_blocks
        self.tenants = cfg.tenants
        self.tenant = tuple(self.tenants.index(r.tenant) for r in cfg.requests)
        self.prefix = cfg.engine.decode_prefix_hit  # V11: a second (prefix) block per request on prefill
        self.tenant_of_content = (NO_TENANT,) + self.tenant + (self.tenant if self.prefix else ())
        self.L = e.kv_lease_duration
        self.X = max(1, (2 * self.L) // 3)  # a heartbeat's extension: now + 2/3 * lease
        self.I = e.heartbeat_interval
        bounds = [b for b in (e.arrival_latency_bound, e.read_latency_bound) if b is not None]
        self.A = max(bounds) if bounds else None  # the age counter's cap (None: no counter)
        names = tuple(f"R{r}" for r in range(self.R))
        self.req = Domain("request", self.R, names)
        self.block = Domain("decode_block", self.D, tuple(f"p{p}" for p in range(self.D)))
        self.pblock = Domain("prefill_block", self.P, tuple(f"q{q}" for q in range(self.P)))
        self.block_ref = Domain("decode_block_or_none", self.D + 1, self.block.labels + ("none",))
        self.pblock_ref = Domain("prefill_block_or_none", self.P + 1, self.pblock.labels + ("none",))
        self.owner = Domain("owner", self.R + 1, ("free",) + names)
        prefixes = tuple(f"{x}:prefix" for x in names) if self.prefix else ()
        self.content = Domain("content", self.R + 1 + len(prefixes), ("unwritten",) + names + prefixes)
        self.lease = Domain("lease_ticks_left", self.L + 1)
        self.origin = tuple(i if r.replays is None else r.replays for i, r in enumerate(cfg.requests))
        """Whose prompt and ``kv_transfer_params`` each request carries: itself, or for a replay
        (V9) the request it replays."""
        self.replay = tuple(r.replays is not None for r in cfg.requests)
        self.replays = any(self.replay)
        self.mla = e.mla_prefill_ranks > 1
        """V16: MLA with two prefill ranks holding replicas; decode READs from rank 0 and sends
        rank 1 a notify-only notification."""
        self.cached = tuple(r.cached for r in cfg.requests)
        """V13: per request, decode holds its whole KV in its local prefix cache (a full local
        hit: ``_read_blocks``' notify-only path, no READ)."""
        self.pull_ranked = e.mode == "pull" and (e.read_fan_in > 1 or e.read_may_fail or e.read_post_may_fail
                                                 or e.prefill_reregisters)
        """Pull with per-rank READs (V8: hetero TP, READs that may fail): decode's rank READs
        each prefill rank ``w``'s part with its own handle ``wr[r, w]`` into its part
        ``content[w, block]``, and each READ's notification ``wnotif[r, w]`` goes to its own
        prefill rank.  V17 (``prefill_reregisters``) uses the same per-rank READs."""
        self.F = e.read_fan_in if self.pull_ranked else e.write_fan_in
        self.release_may_fail = self.pull_ranked and e.read_release_may_fail
        """V8's third path (``read_release_may_fail``): a failed READ's handle release may fail."""
        self.ranked = self.pull_ranked or (e.mode == "push" and (self.F > 1 or e.write_post_may_fail))
        """Per-rank transfers: push with per-rank WRITEs (fan-in above one, or V6's failed
        posts): each prefill rank ``w`` has its own WRITE ``wr[r, w]`` writing its part
        ``content[w, block]`` and its own notification ``wnotif[r, w]``; decode counts them
        (``counted``); or pull with per-rank READs (:attr:`pull_ranked`)."""
        self.wrank = Domain("prefill_rank", self.F, tuple(f"w{w}" for w in range(self.F)))

    def prefix_content(self, r: int) -> int:
        """The content code of request ``r``'s prefix KV (with ``decode_prefix_hit``): ``r``'s
        own KV is ``r + 1``, the KV of its suffix block, the one decode needs."""
        return self.R + 1 + r


def build_fields(k: Codes) -> list[Field]:
    """The state's fields: prefill's, the READs', decode's, then the two block pools."""
    e = k.cfg.engine
    req = k.req

    def en(name: str, labels: tuple[str, ...]) -> Domain:
        return Domain(name, len(labels), labels)

    flag = en("flag", ("no", "yes"))
    if k.ranked:
        return _ranked_fields(k, e, req, en, flag)
    fields = [
        Field("p_phase", (req,), en("p_phase", P_LABELS), P_NEW, "prefill's view of the request"),
        Field("src", (req,), k.pblock_ref, k.P, "prefill block holding the request's KV"),
        Field("lease", (req,), k.lease, 0, "ticks left on prefill's lease (_reqs_to_send expiry)"),
        Field("late", (req,), flag, 0, "prefill saw a completion notification after the lease expired"),
        Field("d_phase", (req,), en("d_phase", D_LABELS), D_NEW, "decode's view of the request"),
        Field("dest", (req,), k.block_ref, k.D, "decode block the READ fills"),
        Field("rd", (req,), en("xfer", RD_LABELS), RD_NONE, "the NIXL transfer (pull: READ, push: WRITE)"),
        Field("notif", (req,), flag, 0, "the transfer's completion notification on its way to the peer"),
        Field("outcome", (req,), en("outcome", OUT_LABELS + (("error",) if e.decode_refuses_replayed_params
                                                             or e.turn2_read else ())),
              OUT_NONE, "what the client got"),
        Field("read", (req,), en("read", READ_LABELS), READ_NONE, "what decode computed on"),
        Field("owner", (k.block,), k.owner, FREE, "decode block owner", sentinel=True),
        Field("content", (k.block,), k.content, UNWRITTEN, "whose KV a decode block holds", sentinel=True),
        Field("src_owner", (k.pblock,), k.owner, FREE, "prefill block owner", sentinel=True),
        Field("src_content", (k.pblock,), k.content, UNWRITTEN, "whose KV a prefill block holds", sentinel=True),
    ]
    if e.mode == "push":
        fields.append(Field("reg", (req,), flag, 0, "decode's PUSH_REG for the request reached prefill's writer"))
    if e.push_handshake_may_defer:
        fields.append(Field("deferred", (req,), flag, 0,
                            "prefill's writer matched the PUSH_REG and deferred the WRITE until the handshake resolves"))
    if k.replays:
        fields.append(Field("hb_set", (req,), flag, 0, "the request's id is in decode's heartbeat set "
                            "(_heartbeat_by_engine[...].req_ids: one entry per remote request id)"))
    if k.A is not None:
        fields.append(Field("age", (req,), Domain("age", k.A + 1), 0,
                            "ticks waiting for decode to take the request, then for its READ"))
    if k.I is not None:
        fields.append(Field("hb_age", (), Domain("hb_age", k.I + 1), 0, "ticks since decode's last heartbeats"))
    if k.prefix:
        fields.append(Field("src_prefix", (req,), k.pblock_ref, k.P,
                            "prefill block holding the request's prefix KV (decode has the prefix cached)"))
    if e.async_scheduling:
        fields.append(Field("inflight", (req,), flag, 0,
                            "a GPU step scheduled before the request's finish was processed still writes its "
                            "decode block (async scheduling)"))
    if e.decode_may_stall:
        fields.append(Field("stalled", (), flag, 0, "decode's engine loop is stalled (a long forward pass)"))
    if k.mla:
        fields.append(Field("mla_notif", (req,), flag, 0,
                            "decode's MLA notify-only notification to prefill's rank 1 is on its way"))
        fields.append(Field("r0_sent", (req,), flag, 0, "prefill's rank 0 reported finished_sending (the READ's notification)"))
        fields.append(Field("r1_sent", (req,), flag, 0, "prefill's rank 1 reported finished_sending (the notify-only one)"))
    if e.turn2_read and e.turn2_clock_offset_error:
        fields.append(Field("overdue", (req,), Domain("overdue", e.turn2_clock_offset_error + 1), 0,
                            "ticks since the exported turn-2 deadline passed (saturating)"))
    if e.read_may_hang:
        fields.append(Field("hung", (req,), flag, 0, "the READ moved its data and will never complete (a wedged transport)"))
    return fields


def _ranked_fields(k: Codes, e, req: Domain, en, flag) -> list[Field]:
    """The fields of per-rank transfers (:attr:`Codes.ranked`: push's per-rank WRITEs, or pull's
    per-rank READs, V8 and V17): ``rd``, ``notif`` and ``content`` become per prefill rank (``wr``,
    ``wnotif``, ``content[w, block]``), decode counts notifications (``counted``)."""
    w = k.wrank
    outcomes = OUT_LABELS + (("error",) if e.push_fail_notif or e.read_may_fail or e.read_post_may_fail else ())
    fields = [
        Field("p_phase", (req,), en("p_phase", P_LABELS), P_NEW, "prefill's view of the request"),
        Field("src", (req,), k.pblock_ref, k.P, "prefill block holding the request's KV"),
        Field("lease", (req,), k.lease, 0, "ticks left on prefill's lease (_reqs_to_send expiry)"),
        Field("late", (req,), flag, 0, "prefill saw a completion notification after the lease expired"),
        Field("d_phase", (req,), en("d_phase", D_LABELS), D_NEW, "decode's view of the request"),
        Field("dest", (req,), k.block_ref, k.D, "decode block the WRITEs fill"),
        Field("wr", (req, w), en("xfer", RD_LABELS + ("failed",) + (("release_failed",) if k.release_may_fail else ())
                                if k.pull_ranked else WR_LABELS), RD_NONE,
              "decode's READ of each prefill rank's part" if k.pull_ranked else "each prefill rank's WRITE of its part"),
        Field("wnotif", (req, w), en("wnotif", ("none", "read_done") if k.pull_ranked else WN_LABELS), WN_NONE,
              "each READ's notification on its way to its prefill rank" if k.pull_ranked
              else "each rank's notification on its way to decode"),
        *([] if k.pull_ranked else [
            Field("counted", (req,), Domain("counted", k.F + 1), 0,
                  "notifications decode's _get_new_notifs counted (consumer_notification_counts_by_req)")]),
        Field("outcome", (req,), en("outcome", outcomes), OUT_NONE, "what the client got"),
        Field("read", (req,), en("read", READ_LABELS), READ_NONE, "what decode computed on"),
        Field("owner", (k.block,), k.owner, FREE, "decode block owner", sentinel=True),
        Field("content", (w, k.block), k.content, UNWRITTEN, "whose KV each rank's part of a decode block holds",
              sentinel=True),
        Field("src_owner", (k.pblock,), k.owner, FREE, "prefill block owner", sentinel=True),
        Field("src_content", (k.pblock,), k.content, UNWRITTEN, "whose KV a prefill block holds", sentinel=True),
    ]
    if not k.pull_ranked:
        fields.append(Field("reg", (req,), flag, 0, "decode's PUSH_REG for the request reached prefill's writers"))
    if e.push_fail_notif:
        fields.append(Field("load_failed", (req,), flag, 0, "decode counted a PUSH_FAIL for the request"))
    if e.prefill_reregisters:  # V17
        gen = Domain("registration", 2, ("first", "second"))
        fields += [
            Field("p_gen", (), gen, 0, "prefill's KV cache registration (_registration_generation)"),
            Field("d_gen", (), Domain("handshake", 3, ("none", "first", "second")), 0,
                  "the registration decode's cached descriptors of prefill name (none: no handshake yet)"),
            Field("gen", (req,), gen, 0, "the remote_registration_generation the request's kv_transfer_params carry"),
            Field("rgen", (req,), gen, 0, "the registration whose descriptors the request's READs were posted with"),
        ]
    if k.A is not None:
        fields.append(Field("age", (req,), Domain("age", k.A + 1), 0,
                            "ticks waiting for decode to take the request, then for its WRITEs"))
    if k.I is not None:
        fields.append(Field("hb_age", (), Domain("hb_age", k.I + 1), 0, "ticks since decode's last heartbeats"))
    if e.decode_may_stall:
        fields.append(Field("stalled", (), flag, 0, "decode's engine loop is stalled (a long forward pass)"))
    return fields
