"""The vLLM 0.33.0 recorder: its real NIXL connector and scheduler classes (pull and push mode),
patched to write the event log ``kvproof validate`` reads for vLLM (schema version 1,
``kvproof.spec.vllm.validate``).

:func:`install` wraps these methods (the original runs unchanged; the wrapper reads its
arguments, its result and the object's own fields, and appends a line):

===========================================================  =======================================
real method                                                  event
===========================================================  =======================================
``NixlPullConnectorScheduler.request_finished`` returning    ``prefill_request_finished`` (the
``delay_free_blocks`` for a ``do_remote_decode`` request     request takes a slot: see below)
(prefill's scheduler)
``NixlPullConnectorScheduler.update_state_after_alloc``      ``decode_on_new_request``
for a ``do_remote_prefill`` request with tokens to load
(decode's scheduler)
``NixlPullConnectorWorker.start_load_kv``: each              ``decode_start_load_kv`` (``src`` the
``reqs_to_recv`` entry awaiting KV (decode's worker)         remote block, ``dest`` the local one)
``NixlPullConnectorWorker._get_new_notifs``: each READ       ``prefill_get_new_notifs``:
notification it takes (prefill's worker)                     ``finished_sending`` when it completes
                                                             the request, ``late`` for a request no
                                                             longer in ``_reqs_to_send`` /
                                                             ``_reqs_to_process`` ("unrecognized")
``NixlBaseConnectorWorker._handle_heartbeat`` (prefill's     ``decode_send_heartbeats`` (``reqs``:
worker applying an ``HB:``)                                  the slots the message names)
``NixlBaseConnectorWorker._reap_expired_send_leases``        ``prefill_reap_expired_lease`` per
                                                             request it adds to ``done_sending``
``Scheduler._update_from_kv_xfer_finished`` (decode): each   ``decode_finished_recving``: ``loaded``
``finished_recving`` request                                 (it was ``WAITING_FOR_REMOTE_KVS``) or
                                                             ``released`` (aborted and held)
``Scheduler.finish_requests(..., FINISHED_ABORTED)``         ``decode_abort``: ``held`` when the
(decode) of a request it has, not finished                   request is still there after the call
                                                             (#32255's ``delay_free_blocks``), else
                                                             ``freed``
``Scheduler._free_blocks``                                   (no event: the block is free again)
push: ``NixlPushConnectorScheduler.request_finished`` and    ``prefill_request_finished``,
``update_state_after_alloc``, as the pull scheduler's        ``decode_on_new_request``
push: ``NixlPushConnectorWorker._do_send_reg_notif`` (decode ``decode_send_push_reg`` (``block``:
writer sending ``PUSH_REG``, a peer agent known)             decode's)
push: ``NixlPushConnectorWorker._do_start_push_kv`` (prefill ``prefill_push_write`` (``src``,
writer) when it posted a WRITE (a handle added to            ``dest``)
``_sending_transfers``)
push: ``NixlPushConnectorWorker.get_transfer_results``       ``prefill_get_transfer_results`` per
(prefill): each request in ``finished_sending`` that         request (``block``: prefill's)
``_reap_expired_send_leases`` did not report in the call
===========================================================  =======================================

Requests and slots: the log's request slots are given out in the order prefill finishes
requests (``prefill_request_finished``): slot ``r`` is the ``r``-th request (the scenario's
requests reach prefill in order); in a stream (the header has ``slots``) each goes to the lowest
slot that is new or whose last request ended on both sides with nothing in flight (prefill freed
its block, decode ended it, and a READ it posted was notified to prefill): the stream's reuse
rule (:class:`~kvproof.spec.vllm.validate.VllmStream`).  Each slot's requests are its generations 0, 1, ...
Decode's request is tied to prefill's by ``kv_transfer_params["remote_request_id"]``; every
event carries prefill's request id as ``rid``.

Blocks: vLLM's block pool hands out the head of its free queue, the model the lowest-numbered
free block, so a block is logged under the model's numbering: the lowest number free in the
recorder's own table of each pool when the request gets it, kept until the real block is freed
(prefill: ``_free_blocks``; decode: at ``finished_recving``, at an abort that frees it, or at
``_free_blocks`` - the model's decode request ends when its load completes).  The real block id
is logged too, as ``vllm_block`` (``vllm_src``, ``vllm_dest``; validation ignores them).  The log
then shows which request held which block when, not which physical block a reused one was: a
READ of a block freed under it is flagged (``no_source_free_while_read``) whatever the real pool
handed out next; which request's KV it then carried is the model's inference.

Not recorded: ``prefill_abort_finished`` (0.33.0's ``finish_requests`` skips a finished request,
#25067: the step does not exist), several decode engines or prefill ranks (one ``HB:`` per event,
one consumer per notification), push's WRITE deferred until a handshake completes (recorded when
``_do_start_push_kv`` runs again and posts it).
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from kvproof.checker.logs.eventlog import EventLog, Patches

__all__ = ["MODULES", "VllmRecorder", "install"]

_NIXL = "vllm.distributed.kv_transfer.kv_connector.v1.nixl."
MODULES = {
    "scheduler": "vllm.v1.core.sched.scheduler",
    "request": "vllm.v1.request",
    "base_worker": _NIXL + "base_worker",
    "pull_worker": _NIXL + "pull_worker",
    "pull_scheduler": _NIXL + "pull_scheduler",
    "push_worker": _NIXL + "push_worker",
    "push_scheduler": _NIXL + "push_scheduler",
}
"""The vLLM 0.33.0 modules whose classes are patched (or read)."""


class _Pool:
    """One side's blocks in the model's numbering: the lowest free number to each new holder."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}  # request id -> block number

    def take(self, rid: str) -> int:
        used = set(self.held.values())
        b = next(i for i in range(len(used) + 1) if i not in used)
        self.held[rid] = b
        return b

    def free(self, rid: str) -> None:
        self.held.pop(rid, None)


class _Slot:
    """What the recorder knows of one request slot's current request."""

    def __init__(self) -> None:
        self.gen = -1
        self.rid: str | None = None
        self.prefill_held = False
        self.decode_started = False  # decode took the request
        self.decode_held = False
        self.notif_due = False  # a READ (push: WRITE) was posted; its notification not yet taken
        self.push = False  # push mode: the WRITE's notification goes to decode

    def reusable(self) -> bool:
        return self.gen < 0 or (not self.prefill_held and self.decode_started and not self.decode_held
                                and not self.notif_due)


class _Notifs:
    """A stand-in for a worker's ``nixl_wrapper`` during one ``_get_new_notifs`` call: forwards
    everything, remembers what ``get_new_notifs`` returned."""

    def __init__(self, agent: Any):
        self._agent = agent
        self.got: list[bytes] = []

    def get_new_notifs(self, *a, **kw):
        out = self._agent.get_new_notifs(*a, **kw)
        for notifs in out.values():
            self.got.extend(notifs)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)


class VllmRecorder(Patches):
    """The patches on vLLM's classes and the bookkeeping that turns calls into events."""

    def __init__(self, log: EventLog, slots: int, stream: bool = False):
        self.log = log
        self.stream = stream  # the log's header makes the scenario a stream: slots are reused
        self.m = {k: importlib.import_module(v) for k, v in MODULES.items()}
        self.lock = threading.RLock()
        self.slots = [_Slot() for _ in range(slots)]
        self.of: dict[str, int] = {}  # prefill's request id -> slot
        self.remote: dict[str, str] = {}  # decode's request id -> prefill's
        self.pools = {"prefill": _Pool(), "decode": _Pool()}
        self.labels: dict[tuple[str, str], int] = {}  # (side, prefill rid) -> block number it got
        self.undo: list[tuple[Any, str, Any]] = []  # (class, name, original) for uninstall
        self.reaped = threading.local()  # the requests _reap_expired_send_leases reported in this thread

    # -- requests and events ----------------------------------------------------------------------
    def open(self, rid: str) -> int:
        """Prefill finished request ``rid``: the slot it takes (its next generation)."""
        with self.lock:
            free = (s.reusable() if self.stream else s.gen < 0 for s in self.slots)
            r = next((i for i, ok in enumerate(free) if ok), len(self.slots))
            if r == len(self.slots):  # more requests at once than the log's slots: validate says so
                self.slots.append(_Slot())
            s = self.slots[r]
            s.gen, s.rid, s.prefill_held = s.gen + 1, rid, True
            s.decode_started = s.decode_held = s.notif_due = s.push = False
            self.of[rid] = r
            return r

    def slot(self, rid: str) -> _Slot | None:
        """The slot of prefill's request ``rid`` while it is the slot's current request."""
        r = self.of.get(rid)
        if r is None or self.slots[r].rid != rid:
            return None
        return self.slots[r]

    def emit(self, event: str, actor: str, rid: str, **fields: Any) -> None:
        """One event of prefill's request ``rid`` (nothing if the recorder never saw it open)."""
        with self.lock:
            s = self.slot(rid)
            if s is None:
                return
            self.log.write(actor=actor, event=event, req=self.of[rid], rid=rid, gen=s.gen, **fields)

    def prefill_rid(self, decode_rid: str) -> str | None:
        """Prefill's request id of decode's request ``decode_rid``."""
        return self.remote.get(decode_rid)

    def free(self, side: str, rid: str) -> None:
        """Request ``rid``'s block on ``side`` is free again."""
        with self.lock:
            self.pools[side].free(rid)
            s = self.slot(rid)
            if s is not None:
                if side == "prefill":
                    s.prefill_held = False
                else:
                    s.decode_held = False

    def read_posted(self, decode_rid: str, meta: Any) -> None:
        """Decode's worker posts the READ of one ``reqs_to_recv`` entry (``meta``: its
        ``ReqMeta``): ``decode_start_load_kv``.  Called by the ``start_load_kv`` wrapper; a
        driver that stands in for decode's worker calls it where the worker would post."""
        rid = self.prefill_rid(decode_rid) or getattr(meta.remote, "request_id", None)
        if rid is None:
            return
        src = [b for g in meta.remote.block_ids for b in g]
        dst = [b for g in meta.local_block_ids for b in g]
        with self.lock:
            s = self.slot(rid)
            if s is None:
                return
            s.notif_due = True
            self.emit("decode_start_load_kv", "decode", rid, src=self._label("prefill", rid),
                      dest=self._label("decode", rid), vllm_src=src[0] if src else None,
                      vllm_dest=dst[0] if dst else None)

    def _label(self, side: str, rid: str) -> int:
        """The model's number of the block ``rid`` got on ``side`` (kept after it was freed: a
        READ names the block the parameters named)."""
        return self.labels.get((side, rid), 0)

    # -- patching --------------------------------------------------------------------------------
    def install(self) -> "VllmRecorder":
        """Wrap the methods listed in the module docstring."""
        m, rec = self.m, self
        Status = m["request"].RequestStatus

        def consumer(sched) -> bool:
            ktc = sched.vllm_config.kv_transfer_config
            return ktc is not None and ktc.kv_role == "kv_consumer"

        def take(side: str, rid: str) -> int:
            with rec.lock:
                b = rec.pools[side].take(rid)
                rec.labels[(side, rid)] = b
                return b

        def request_finished(orig):
            def finished(self, request, block_ids, *a, **kw):
                params = request.kv_transfer_params or {}
                producer = bool(params.get("do_remote_decode"))
                delay, out = orig(self, request, block_ids, *a, **kw)
                if producer and delay:
                    rid = str(request.request_id)
                    blocks = [b for g in block_ids for b in g]
                    with rec.lock:
                        rec.open(rid)
                        b = take("prefill", rid)
                        rec.emit("prefill_request_finished", "prefill", rid, block=b,
                                 vllm_block=blocks[0] if blocks else None)
                return delay, out
            return finished

        def after_alloc(orig):
            def update(self, request, blocks, num_external_tokens, *a, **kw):
                params = request.kv_transfer_params or {}
                load = bool(params.get("do_remote_prefill")) and num_external_tokens > 0
                remote = params.get("remote_request_id")
                out = orig(self, request, blocks, num_external_tokens, *a, **kw)
                if load and remote is not None:
                    rid, did = str(remote), str(request.request_id)
                    real = [b for g in blocks.get_block_ids() for b in g]
                    with rec.lock:
                        rec.remote[did] = rid
                        s = rec.slot(rid)
                        if s is not None:
                            s.decode_started = s.decode_held = True
                            b = take("decode", rid)
                            rec.emit("decode_on_new_request", "decode", rid, block=b,
                                     vllm_block=real[0] if real else None)
                return out
            return update

        def start_load_kv(orig):
            def start(self, metadata, *a, **kw):
                for req_id, meta in metadata.reqs_to_recv.items():
                    if meta.remote is not None and (meta.awaiting_kvs or any(meta.local_block_ids)):
                        rec.read_posted(str(req_id), meta)
                return orig(self, metadata, *a, **kw)
            return start

        def get_new_notifs(orig):
            def get(self, *a, **kw):
                known = set(self._reqs_to_send) | set(self._reqs_to_process)
                agent = self.nixl_wrapper
                proxy = _Notifs(agent)
                self.nixl_wrapper = proxy
                try:
                    done = orig(self, *a, **kw)
                finally:
                    self.nixl_wrapper = agent
                for raw in proxy.got:
                    msg = raw.decode("utf-8", "replace")
                    if msg.startswith("HB:") or ":" not in msg:
                        continue
                    rid = msg.rsplit(":", 1)[0]
                    if rid not in known:
                        status = "late"
                    elif rid in done:
                        status = "finished_sending"
                    else:  # one consumer of several: not the model's step
                        continue
                    with rec.lock:
                        s = rec.slot(rid)
                        if s is not None:
                            s.notif_due = False
                        rec.emit("prefill_get_new_notifs", "prefill", rid, status=status)
                return done
            return get

        def handle_heartbeat(orig):
            def handle(self, payload, *a, **kw):
                with rec.lock:
                    reqs = sorted({rec.of[r] for r in payload.split(",") if rec.slot(r) is not None})
                    if reqs:
                        rec.log.write(actor="decode", event="decode_send_heartbeats", reqs=reqs)
                return orig(self, payload, *a, **kw)
            return handle

        def reap(orig):
            def reap_(self, done_sending, *a, **kw):
                before = set(done_sending)
                out = orig(self, done_sending, *a, **kw)
                for rid in sorted(set(done_sending) - before):
                    rec.emit("prefill_reap_expired_lease", "prefill", rid, block=rec._label("prefill", rid))
                    getattr(rec.reaped, "ids", set()).add(rid)
                return out
            return reap_

        def xfer_finished(orig):
            def update(self, kv_connector_output, *a, **kw):
                if not consumer(self):
                    return orig(self, kv_connector_output, *a, **kw)
                seen = []
                for did in kv_connector_output.finished_recving or ():
                    req = self.requests.get(did)
                    rid = rec.prefill_rid(str(did))
                    if req is not None and rid is not None:
                        loading = req.status == Status.WAITING_FOR_REMOTE_KVS
                        seen.append((rid, "loaded" if loading else "released"))
                out = orig(self, kv_connector_output, *a, **kw)
                for rid, status in seen:
                    rec.emit("decode_finished_recving", "decode", rid, block=rec._label("decode", rid),
                             status=status)
                    rec.free("decode", rid)
                    with rec.lock:
                        s = rec.slot(rid)
                        if s is not None and s.push:  # decode took the WRITE's notification
                            s.notif_due = False
                return out
            return update

        def finish_requests(orig):
            def finish(self, request_ids, finished_status, *a, **kw):
                if not consumer(self) or finished_status != Status.FINISHED_ABORTED:
                    return orig(self, request_ids, finished_status, *a, **kw)
                ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
                live = [d for d in ids if d in self.requests and not self.requests[d].is_finished()]
                out = orig(self, request_ids, finished_status, *a, **kw)
                for did in live:
                    rid = rec.prefill_rid(str(did))
                    if rid is None:
                        continue
                    held = did in self.requests
                    rec.emit("decode_abort", "decode", rid, block=rec._label("decode", rid),
                             status="held" if held else "freed")
                    if not held:
                        rec.free("decode", rid)
                return out
            return finish

        def free_blocks(orig):
            def free(self, request, *a, **kw):
                out = orig(self, request, *a, **kw)
                rid = str(request.request_id)
                if consumer(self):
                    rid = rec.prefill_rid(rid)
                    if rid is not None:
                        rec.free("decode", rid)
                else:
                    rec.free("prefill", rid)
                return out
            return free

        # -- push mode (NixlPushConnector) --------------------------------------------------------
        def send_reg(orig):
            def send(self, req_id, reg_data, *a, **kw):
                out = orig(self, req_id, reg_data, *a, **kw)
                sent = bool(self._remote_agents.get(reg_data.get("remote_engine_id")))
                rid = rec.prefill_rid(str(req_id))
                if sent and rid is not None:
                    rec.emit("decode_send_push_reg", "decode", rid, block=rec._label("decode", rid))
                return out
            return send

        def start_push(orig):
            def start(self, request_id, local_block_ids, registration_data, *a, **kw):
                before = len(self._sending_transfers.get(request_id, ()))
                out = orig(self, request_id, local_block_ids, registration_data, *a, **kw)
                if len(self._sending_transfers.get(request_id, ())) > before:  # the WRITE is posted
                    rid = str(request_id)
                    src, dst = _flat(local_block_ids), _flat(registration_data.get("local_block_ids", ()))
                    with rec.lock:
                        s = rec.slot(rid)
                        if s is not None:
                            s.notif_due = s.push = True
                        rec.emit("prefill_push_write", "prefill", rid, src=rec._label("prefill", rid),
                                 dest=rec._label("decode", rid), vllm_src=src[0] if src else None,
                                 vllm_dest=dst[0] if dst else None)
                return out
            return start

        def transfer_results(orig):
            def results(self, *a, **kw):
                rec.reaped.ids = reaped = set()
                try:
                    res = orig(self, *a, **kw)
                finally:
                    rec.reaped.ids = set()
                for rid in sorted(set(res.finished_sending or ()) - reaped):
                    rec.emit("prefill_get_transfer_results", "prefill", rid, block=rec._label("prefill", rid))
                return res
            return results

        PushSched = m["push_scheduler"].NixlPushConnectorScheduler
        PushWorker = m["push_worker"].NixlPushConnectorWorker
        self.wrap(PushSched, "request_finished", request_finished)
        self.wrap(PushSched, "update_state_after_alloc", after_alloc)
        self.wrap(PushWorker, "_do_send_reg_notif", send_reg)
        self.wrap(PushWorker, "_do_start_push_kv", start_push)
        self.wrap(PushWorker, "get_transfer_results", transfer_results)

        Sched = m["scheduler"].Scheduler
        PullSched = m["pull_scheduler"].NixlPullConnectorScheduler
        Worker, BaseWorker = m["pull_worker"].NixlPullConnectorWorker, m["base_worker"].NixlBaseConnectorWorker
        self.wrap(PullSched, "request_finished", request_finished)
        self.wrap(PullSched, "update_state_after_alloc", after_alloc)
        self.wrap(Worker, "start_load_kv", start_load_kv)
        self.wrap(Worker, "_get_new_notifs", get_new_notifs)
        self.wrap(BaseWorker, "_handle_heartbeat", handle_heartbeat)
        self.wrap(BaseWorker, "_reap_expired_send_leases", reap)
        self.wrap(Sched, "_update_from_kv_xfer_finished", xfer_finished)
        self.wrap(Sched, "finish_requests", finish_requests)
        self.wrap(Sched, "_free_blocks", free_blocks)
        return self


def _flat(block_ids: Any) -> list[int]:
    """Block ids, flat (vLLM passes them per KV-cache group, or flat)."""
    out: list[int] = []
    for g in block_ids or ():
        if isinstance(g, int):
            out.append(g)
        else:
            out.extend(g)
    return out


def install(path: str, scenario: Any, **header: Any) -> VllmRecorder:
    """Patch vLLM 0.33.0's classes to log to ``path`` (header naming ``scenario``, plus
    ``header``: ``slots``, ``prefill_blocks``, ``decode_blocks`` for a stream); call
    ``uninstall()`` on the result to undo, ``log.close()`` to close the file."""
    from kvproof.model.scenario import builtin, parse_scenario

    sc = builtin(scenario) if isinstance(scenario, str) else parse_scenario(scenario, "scenario")
    if sc.family != "vllm":
        from kvproof.model.scenario import ScenarioError

        raise ScenarioError(f"scenario {sc.name} is not a vLLM scenario")
    slots = header.get("slots", len(sc.config.requests))
    return VllmRecorder(EventLog(path, scenario, **header), slots, stream="slots" in header).install()
