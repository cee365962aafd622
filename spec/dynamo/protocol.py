"""NVIDIA Dynamo's disaggregated orchestration as a protocol: the frontend's prefill router, the
prefill and decode workers' handlers, a client's cancellation and the prefill worker's shutdown
drain, over one prefill worker and one decode worker (``ai-dynamo`` 1.6.1 and the releases before
its fixes).

A request goes through the router's ``PrefillRouter`` (``lib/llm/src/kv_router/prefill_router/``):
it is sent to the prefill worker, whose handler runs the prompt and commits the KV for the decode
leg; the handoff parameters travel back on the prefill response stream; the router then routes the
request to the decode worker, which pulls the KV over NIXL and frees nothing on the prefill side
itself: the prefill engine frees its blocks when the transfer completes (or, TensorRT-LLM, when
``kv_transfer_timeout_ms`` gives up on it).  The hazards are those of Dynamo's public history:

* a cancel that reaches the prefill request after the KV commit (ai-dynamo/dynamo#7489, and
  ai-dynamo/dynamo#14507's PreCommit window) aborts nothing (TensorRT-LLM: the abort is a no-op
  once the KV is committed) but tears down the stream that carried the handoff, so no decode
  worker ever collects the blocks;
* a router that drops the decode dispatch of a cancelled request (before ai-dynamo/dynamo#13855)
  orphans the blocks the same way;
* a prefill worker's shutdown that does not drain (ai-dynamo/dynamo#4917, ai-dynamo/dynamo#9344) frees the GPU
  memory a decode worker's READ is still reading.

What is not modelled: the transfer's chunks and ranks, the engine's own block pool (a request's
prefill blocks are one unit, held or freed; the engines' own specs, ``kvproof.spec.vllm`` and
``kvproof.spec.sglang``, model their pools), several workers of a role, and time (the
transfer timeout is assumed to outlast the router's dispatch and the READ, so it only reclaims
blocks no transfer will collect).
"""

from __future__ import annotations

from kvproof.model import Domain, Field, Lane, Narration, Signal, Spec, action

from kvproof.spec.dynamo.claims import DynamoClaims
from kvproof.spec.dynamo.config import DynamoConfig
from kvproof.spec.dynamo.state import (
    D_ENDED, D_LOADED, D_LOADING, DECODE_LABELS, G_FREED, G_OWN, GOT_LABELS, P_COMMITTED, P_FREED, P_HELD,
    P_RUNNING, PREFILL_LABELS, R_DECODE, R_DONE, R_DROPPED, R_HANDED, R_IDLE, R_OPEN, R_PREFILL,
    ROUTER_LABELS, W_DOWN, W_DRAINING, W_UP, WORKER_LABELS,
)

__all__ = ["DynamoPd"]


class DynamoPd(DynamoClaims, Spec):
    """Requests ``R0``, ``R1``, ... through Dynamo's router to one prefill and one decode worker,
    for one :class:`~.config.DynamoConfig` (kept as ``cfg``)."""

    def __init__(self, cfg: DynamoConfig):
        self.cfg = cfg
        names = tuple(f"R{i}" for i in range(cfg.requests))
        self.req = Domain("req", cfg.requests, names)

    def build_fields(self):
        """Per request: the router's phase, the prefill blocks, the decode side, what decode read,
        whether the client left; the prefill worker's process."""
        flag = Domain("flag", 2, ("no", "yes"))
        return [
            Field("rt", (self.req,), Domain("rt", len(ROUTER_LABELS), ROUTER_LABELS),
                  doc="where the request is at the frontend's PrefillRouter"),
            Field("pf", (self.req,), Domain("pf", len(PREFILL_LABELS), PREFILL_LABELS),
                  doc="the request's KV blocks on the prefill worker"),
            Field("dc", (self.req,), Domain("dc", len(DECODE_LABELS), DECODE_LABELS),
                  doc="the request on the decode worker: its blocks and its NIXL READ"),
            Field("got", (self.req,), Domain("got", len(GOT_LABELS), GOT_LABELS),
                  doc="what decode's READ copied into the request's blocks"),
            Field("cancel", (self.req,), flag, doc="the client disconnected (the engine context was killed)"),
            Field("worker", (), Domain("worker", len(WORKER_LABELS), WORKER_LABELS),
                  doc="the prefill worker's process"),
        ]

    # -- the router ----------------------------------------------------------------------------
    @action("router", "req")
    def router_route_prefill(self, s, n, r):
        """The frontend routes a new request to the prefill worker, which allocates its KV blocks
        (``PrefillRouter::generate`` -> ``execute_prefill`` in
        ``lib/llm/src/kv_router/prefill_router/mod.rs``; the worker's
        ``PrefillWorkerHandler.generate``, ``components/src/dynamo/vllm/handlers.py``).  Only to a
        worker still registered in discovery (a draining one was unregistered first)."""
        s.require((s.rt[r] == R_IDLE) & (s.worker == W_UP))
        n.rt[r] = R_PREFILL
        n.pf[r] = P_RUNNING

    @action("router", "req", fair=True)
    def router_receive_handoff(self, s, n, r):
        """The prefill response stream brings the handoff parameters (``kv_transfer_params``,
        the disaggregated params) back to the router (``execute_prefill``'s result in
        ``prefill_router/mod.rs``; ai-dynamo/dynamo#14507 revokes the PreCommit cancel link
        here, after the worker committed)."""
        s.require((s.rt[r] == R_PREFILL) & (s.pf[r] == P_COMMITTED))
        n.rt[r] = R_HANDED

    @action("router", "req", fair=True)
    def router_dispatch_decode(self, s, n, r):
        """The router routes the request to the decode worker, which reserves its blocks and posts
        the NIXL READ of the prefill blocks (``PrefillRouter::generate`` "proceeding to decode",
        even for a killed context since ai-dynamo/dynamo#7489; ``DecodeWorkerHandler.generate``).
        Before ai-dynamo/dynamo#13855 (``dispatch_decode_after_cancel = false``) a request whose
        client left is not dispatched (:meth:`router_drop_decode`)."""
        s.require(s.rt[r] == R_HANDED)
        if not self.cfg.dispatch_decode_after_cancel:
            s.require(s.cancel[r] == 0)
        n.rt[r] = R_DECODE
        n.dc[r] = D_LOADING

    @action("router", "req", fair=True)
    def router_drop_decode(self, s, n, r):
        """Before ai-dynamo/dynamo#13855: every routing stage ran under ``cancel_on_stop``, whose
        ``tokio::select!`` saw the stopped context ready before the dispatch future, so the decode
        worker never hears of a request whose client left after prefill; the prefill blocks staged
        for it are orphaned (the hazard of :meth:`~.claims.DynamoClaims.no_orphaned_blocks`)."""
        s.require(not self.cfg.dispatch_decode_after_cancel)
        s.require((s.rt[r] == R_HANDED) & (s.cancel[r] == 1))
        n.rt[r] = R_DROPPED

    @action("router", "req", fair=True)
    def router_prefill_failed(self, s, n, r):
        """The prefill worker went away with the request's stream open: the router fails the
        request ("Remote prefill failed, failing request", ``prefill_router/mod.rs``)."""
        s.require((s.rt[r] == R_PREFILL) & (s.worker == W_DOWN))
        n.rt[r] = R_DONE

    # -- the client ----------------------------------------------------------------------------
    @action("client", "req")
    def client_disconnect(self, s, n, r):
        """The client disconnects: the HTTP frontend kills the request's engine context.  With
        ``cancel_reaches_prefill`` (before ai-dynamo/dynamo#7489 ``link_child`` made the prefill
        context the client's child; ai-dynamo/dynamo#14507's PreCommit link until the handoff
        arrives) the kill tears down the open prefill stream and the worker's handler aborts the
        engine request: before the commit that frees its blocks, after it the abort is a no-op
        (TensorRT-LLM, measured in ai-dynamo/dynamo#14507) and the handoff never reaches the router.  Otherwise
        the prefill runs on and decode's ``_DeferredAbort`` (``vllm/handlers.py``) waits for the
        first token, i.e. the end of the READ."""
        s.require(s.ops.is_in(s.rt[r], R_OPEN) & (s.cancel[r] == 0))
        n.cancel[r] = 1
        if self.cfg.cancel_reaches_prefill:
            streaming = s.rt[r] == R_PREFILL
            n.rt[r] = s.ops.ite(streaming, R_DROPPED, s.rt[r])
            n.pf[r] = s.ops.ite(streaming & (s.pf[r] == P_RUNNING), P_FREED, s.pf[r])

    # -- the prefill worker --------------------------------------------------------------------
    @action("prefill", "req", fair=True)
    def prefill_commit_kv(self, s, n, r):
        """The prefill engine finishes the prompt and commits the KV for the decode leg: vLLM's
        NixlConnector keeps the finished request's blocks for the remote READ
        (``PrefillWorkerHandler.generate`` yields the ``kv_transfer_params``); TensorRT-LLM's
        context request enters ``DISAGG_CONTEXT_TRANS_IN_PROGRESS``."""
        s.require((s.pf[r] == P_RUNNING) & (s.worker != W_DOWN))
        n.pf[r] = P_COMMITTED

    @action("prefill", "req", fair=True)
    def prefill_kv_transfer_timeout(self, s, n, r):
        """The engine gives up on committed blocks no transfer collected and frees them
        (TensorRT-LLM's ``kv_transfer_timeout_ms``; vLLM's NIXL abort timeout).  Only with
        ``kv_transfer_timeout``; assumed to outlast the router's dispatch and the READ, so it
        fires only for a request the router dropped."""
        s.require(self.cfg.kv_transfer_timeout)
        s.require((s.pf[r] == P_COMMITTED) & (s.rt[r] == R_DROPPED) & (s.worker != W_DOWN))
        n.pf[r] = P_FREED

    @action("operator")
    def operator_sigterm(self, s, n):
        """The operator (or the planner scaling down) stops the prefill worker: SIGTERM runs
        ``graceful_shutdown_with_discovery`` (``dynamo/common/utils/graceful_shutdown.py``), which
        unregisters the worker's endpoints from discovery and sleeps the grace period
        (``DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS``).  Only with ``shutdown``."""
        s.require(self.cfg.shutdown)
        s.require(s.worker == W_UP)
        n.worker = W_DRAINING

    @action("prefill", fair=True)
    def prefill_shutdown_cleanup(self, s, n):
        """After the drain, the engine's cleanup and ``runtime.shutdown()`` free the prefill
        worker's GPU memory and its NIXL agent, whatever is still held.  ``drain = "none"``
        (``dynamo/vllm/main.py``: no ``drain_callback``; ai-dynamo/dynamo#4917, ai-dynamo/dynamo#9344) goes
        straight on; ``until_idle`` (``_make_drain_callback`` of ``dynamo/trtllm/main.py``) waits
        until no request holds prefill blocks, unless ``transfer_outlasts_drain`` (the 30 s
        ``wait_for`` budget runs out first)."""
        s.require(s.worker == W_DRAINING)
        if self.cfg.drain == "until_idle" and not self.cfg.transfer_outlasts_drain:
            s.require(s.ops.all_(~s.ops.is_in(s.pf[r], P_HELD) for r in self.req))
        n.worker = W_DOWN
        for r in self.req:
            n.pf[r] = s.ops.ite(s.ops.is_in(s.pf[r], P_HELD), P_FREED, s.pf[r])

    # -- the transfer and the decode worker ----------------------------------------------------
    @action("transfer", "req", fair=True)
    def transfer_read_completes(self, s, n, r):
        """Decode's NIXL READ of the request's prefill blocks completes and prefill is notified,
        so its engine frees them (vLLM: the NixlConnector's finished-sending notification;
        TensorRT-LLM: the cache transceiver's completion).  A READ against a worker that already
        freed its memory copies whatever that memory holds (ai-dynamo/dynamo#7319: decode
        crashed; ai-dynamo/dynamo#9345: garbage)."""
        s.require(s.dc[r] == D_LOADING)
        intact = (s.pf[r] == P_COMMITTED) & (s.worker != W_DOWN)
        n.dc[r] = D_LOADED
        n.got[r] = s.ops.ite(intact, G_OWN, G_FREED)
        n.pf[r] = s.ops.ite(intact, P_FREED, s.pf[r])

    @action("decode", "req", fair=True)
    def decode_finish(self, s, n, r):
        """The decode worker streams the answer (or, for a request whose client left, its
        ``_DeferredAbort`` fires the engine's abort after the first token) and frees its blocks
        (``DecodeWorkerHandler.generate``, ``vllm/handlers.py``)."""
        s.require(s.dc[r] == D_LOADED)
        n.dc[r] = D_ENDED
        n.rt[r] = R_DONE

    def narration(self):
        """How reports draw a trace: a lane per actor, and the field changes that are messages."""
        return Narration(
            lanes=(Lane("client", "client"), Lane("router", "frontend router"), Lane("prefill", "prefill worker"),
                   Lane("transfer", "NIXL"), Lane("decode", "decode worker"), Lane("operator", "operator")),
            signals=(Signal("rt", (R_PREFILL,), "router", "prefill", "{req} routed to prefill", "request"),
                     Signal("rt", (R_HANDED,), "prefill", "router", "{req}: handoff parameters"),
                     Signal("rt", (R_DECODE,), "router", "decode", "{req} routed to decode", "request"),
                     Signal("cancel", (1,), "client", "router", "client leaves {req}", "request"),
                     Signal("got", (G_OWN,), "transfer", "decode", "{req}: KV read"),
                     Signal("got", (G_FREED,), "transfer", "decode", "{req}: READ of freed prefill memory",
                            hazard=True),
                     Signal("worker", (W_DRAINING,), "operator", "prefill", "SIGTERM")),
        )

