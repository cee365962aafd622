"""The SGLang 0.5.23 recorder: its real disaggregation classes, patched to write the event log
``kvproof validate`` reads (schema version 1, ``kvproof.spec.sglang.validate``).

:func:`install` wraps these methods (the original runs unchanged; the wrapper only reads its
arguments, its result and the object's own fields, and appends a line):

========================================================  ==================================
real method                                               event
========================================================  ==================================
``PrefillBootstrapQueue.add`` (prefill attn-TP rank 0)    ``prefill_bootstrap_add`` (not for a
                                                          request whose ABORT prefill handled
                                                          before it arrived: the model's
                                                          ``prefill_handle_abort`` ended it)
``DecodePreallocQueue.add`` (decode rank 0)               ``decode_prealloc`` (admitted: no
                                                          ``pages``, the reservation is not
                                                          a call this wraps; retired at the
                                                          door: ``pages: []``)
``CommonKVReceiver.send_metadata`` (every decode rank)    ``decode_send_metadata``
``CommonKVSender.init`` (prefill rank 0)                  ``prefill_forward`` (no ``pages``:
                                                          ``init`` gets only their number)
``MooncakeKVManager.add_transfer_request``                (which room and chunk a source page
                                                          set belongs to)
``MooncakeKVManager.send_kvcache`` / ``send_kvcache_slice``  entry: ``kv_transfer_write`` (one
                                                          a destination page); return 0 from
                                                          the chunk's last session:
                                                          ``kv_write_lands``
``MooncakeKVManager.send_aux`` returning 0 (rank 0)       ``kv_aux_lands`` (0.5.23 has no
                                                          separate ``kv_transfer_aux``: the
                                                          worker issues it after the last
                                                          chunk's call), only when the log's
                                                          scenario has metadata slots
``CommonKVSender.poll`` returning Success (first time)    ``prefill_transfer_done`` (not once
                                                          prefill handled the request's ABORT)
``CommonKVManager.conclude_failure`` (prefill)            ``prefill_transfer_failed``
``DecodeTransferQueue._commit_transfer_to_req`` (rank 0)  ``decode_commit`` (``pages`` as
                                                          published by ``send_metadata``;
                                                          ``status`` error when it aborted)
``DecodeTransferQueue._abort_failed_transfer`` (rank 0)   ``decode_poll_failed`` (not after a
                                                          client abort of the request)
``CommonKVReceiver.abort`` (decode rank 0)                ``decode_abort``
``MooncakeKVManager._handle_abort_notification``          ``prefill_handle_abort``
``CommonKVManager._send_abort_acks`` (with a target)      ``prefill_drain_ack``
``CommonKVManager.handle_abort_ack_message``              ``decode_handle_abort_ack``
``DecodeTransferQueue.resolve_deferred_releases``         ``decode_release_deferred`` (the
(decode rank 0)                                           entry was drained) or
                                                          ``decode_release_timeout``
========================================================  ==================================

A request's room is its ``bootstrap_room`` minus ``room_base``; the first request id seen in a
room is its generation 0, and a new request id in the room is a ``client_send`` opening the
next generation (logged when the new ``Req`` first reaches either admission door).
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from kvproof.checker.logs.eventlog import EventLog, Patches

__all__ = ["MODULES", "SglangRecorder", "install", "write_event"]

MODULES = {
    "decode": "sglang.srt.disaggregation.decode",
    "prefill": "sglang.srt.disaggregation.prefill",
    "common": "sglang.srt.disaggregation.common.conn",
    "mooncake": "sglang.srt.disaggregation.mooncake.conn",
    "base": "sglang.srt.disaggregation.base.conn",
    "utils": "sglang.srt.disaggregation.utils",
    "schedule_batch": "sglang.srt.managers.schedule_batch",
}
"""The SGLang 0.5.23 modules whose classes are patched (or read)."""


def write_event(log: EventLog, event: str, actor: str, rank: int, room: int, rid: str, gen: int,
                **fields: Any) -> None:
    """Append one event line of SGLang's schema to ``log``: the request ``rid`` (its ``gen``-th
    in the room) of the log's ``room`` (a ``bootstrap_room``), seen by ``actor`` at attention TP
    ``rank``; ``fields``: pages, chunk, page, status, ... as the schema has them."""
    log.write(actor=actor, rank=rank, event=event, room=room, rid=rid, gen=gen, **fields)


class SglangRecorder(Patches):
    """The patches on SGLang's classes and the bookkeeping that turns calls into events."""

    def __init__(self, log: EventLog, room_base: int = 0, aux: bool = True):
        self.log = log
        self.room_base = room_base
        self.aux = aux  # the scenario models metadata slots: log the metadata write
        self.m = {k: importlib.import_module(v) for k, v in MODULES.items()}
        self.lock = threading.RLock()
        self.rooms: dict[int, list] = {}  # slot -> [rid, gen]
        self.once: set = set()
        self.pages: dict[int, list[int]] = {}  # id(receiver) -> published decode pages
        self.client_aborted: set = set()  # (slot, gen)
        self.prefill_aborted: set = set()  # (slot, gen) whose ABORT a prefill rank handled
        self.chunk_of: dict = {}  # (id(mgr), source pages) -> (slot, gen, first chunk)
        self.next_chunk: dict = {}  # (id(mgr), slot, gen) -> next chunk number
        self.sessions: dict = {}  # (id(mgr), slot, gen, chunk) -> sessions still writing
        self.undo: list[tuple[Any, str, Any]] = []  # (class, name, original) for uninstall

    # -- rooms and requests ----------------------------------------------------------------------
    def slot(self, bootstrap_room: int) -> int:
        """The log's room for a ``bootstrap_room``."""
        return int(bootstrap_room) - self.room_base

    def see(self, req) -> tuple[int, str, int]:
        """A ``Req`` reaches an admission door: its (slot, rid, gen); a new request id in a room
        is the client's next request (``client_send``)."""
        slot, rid = self.slot(req.bootstrap_room), str(req.rid)
        with self.lock:
            cur = self.rooms.get(slot)
            if cur is None:
                cur = self.rooms[slot] = [rid, 0]
            elif cur[0] != rid:
                cur[0], cur[1] = rid, cur[1] + 1
                write_event(self.log, "client_send", "client", 0, slot, rid, cur[1])
            return slot, cur[0], cur[1]

    def current(self, bootstrap_room: int) -> tuple[int, str, int]:
        """The room's current (slot, rid, gen)."""
        slot = self.slot(bootstrap_room)
        with self.lock:
            rid, gen = self.rooms.get(slot) or [str(bootstrap_room), 0]
        return slot, rid, gen

    def first(self, *key: Any) -> bool:
        """True the first time ``key`` is asked about."""
        with self.lock:
            if key in self.once:
                return False
            self.once.add(key)
            return True

    def emit(self, event: str, actor: str, rank: int, bootstrap_room: int, **fields: Any) -> None:
        """One event of the room's current request."""
        slot, rid, gen = self.current(bootstrap_room)
        write_event(self.log, event, actor, rank, slot, rid, gen, **fields)

    # -- patching --------------------------------------------------------------------------------
    def install(self) -> "SglangRecorder":
        """Wrap the methods listed in the module docstring."""
        m, rec = self.m, self
        KVPoll = m["base"].KVPoll
        common, mc = m["common"], m["mooncake"]
        FINISH_ABORT = m["schedule_batch"].FINISH_ABORT

        def pbq_add(orig):
            def add(self, req, *a, **kw):
                slot, _, gen = rec.see(req)
                out = orig(self, req, *a, **kw)
                late = (slot, gen) in rec.prefill_aborted  # its ABORT came first: no step of the model
                if self.kv_manager.attn_tp_rank == 0 and not late and rec.first("bootstrap_add", slot, gen):
                    rec.emit("prefill_bootstrap_add", "prefill", 0, req.bootstrap_room)
                return out
            return add

        def pq_add(orig):
            def add(self, req, *a, **kw):
                slot, _, gen = rec.see(req)
                out = orig(self, req, *a, **kw)
                if self.kv_manager.attn_tp_rank == 0 and rec.first("prealloc", slot, gen):
                    queued = any(d.req is req for d in list(self.queue) + list(self.pending_reqs))
                    if queued:
                        rec.emit("decode_prealloc", "decode", 0, req.bootstrap_room)
                    elif req.finished_reason is not None:  # retired at the door
                        rec.emit("decode_prealloc", "decode", 0, req.bootstrap_room, pages=[])
                return out
            return add

        def send_metadata(orig):
            def send(self, kv_indices, *a, **kw):
                out = orig(self, kv_indices, *a, **kw)
                pages = [int(p) for p in kv_indices]
                with rec.lock:
                    rec.pages[id(self)] = pages
                rec.emit("decode_send_metadata", "decode", int(self.kv_mgr.attn_tp_rank), self.bootstrap_room)
                return out
            return send

        def sender_init(orig):
            def init(self, *a, **kw):
                out = orig(self, *a, **kw)
                if self.kv_mgr.attn_tp_rank == 0:
                    slot, _, gen = rec.current(self.bootstrap_room)
                    if rec.first("forward", slot, gen):
                        rec.emit("prefill_forward", "prefill", 0, self.bootstrap_room)
                return out
            return init

        def add_transfer_request(orig):
            def add(self, bootstrap_room, kv_indices, *a, **kw):
                slot, _, gen = rec.current(bootstrap_room)
                src = tuple(int(p) for p in kv_indices)
                with rec.lock:
                    key = (id(self), slot, gen)
                    c = rec.next_chunk.get(key, 0)
                    rec.next_chunk[key] = c + len(src)
                    rec.chunk_of[(id(self), src)] = (bootstrap_room, slot, gen, c)
                return orig(self, bootstrap_room, kv_indices, *a, **kw)
            return add

        def send_kv(orig):
            def send(self, session, prefill_kv_indices, dst_kv_ptrs, dst_kv_indices, *a, **kw):
                src = tuple(int(p) for p in prefill_kv_indices)
                with rec.lock:
                    found = rec.chunk_of.get((id(self), src))
                if found is None:
                    return orig(self, session, prefill_kv_indices, dst_kv_ptrs, dst_kv_indices, *a, **kw)
                room, slot, gen, c = found
                rank = int(self.attn_tp_rank)
                dst = [int(p) for p in dst_kv_indices]
                with rec.lock:
                    key = (id(self), slot, gen, c)
                    if key not in rec.sessions:
                        rec.sessions[key] = len(self.transfer_infos.get(room, {})) or 1
                        issue = True
                    else:
                        issue = False
                if issue:
                    for j, page in enumerate(dst):
                        rec.emit("kv_transfer_write", "prefill", rank, room, layer=0, chunk=c + j, page=page)
                ret = orig(self, session, prefill_kv_indices, dst_kv_ptrs, dst_kv_indices, *a, **kw)
                with rec.lock:
                    left = rec.sessions.get(key, 1) - 1
                    rec.sessions[key] = left
                if ret == 0 and left == 0:
                    for j, page in enumerate(dst):
                        rec.emit("kv_write_lands", "prefill", rank, room, layer=0, chunk=c + j, page=page)
                return ret
            return send

        def send_aux(orig):
            def send(self, req, *a, **kw):
                ret = orig(self, req, *a, **kw)
                if ret == 0 and self.attn_tp_rank == 0 and rec.aux:
                    rec.emit("kv_aux_lands", "prefill", 0, req.room, slot=int(req.dst_aux_index))
                return ret
            return send

        def sender_poll(orig):
            def poll(self, *a, **kw):
                status = orig(self, *a, **kw)
                if status == KVPoll.Success:
                    rank = int(self.kv_mgr.attn_tp_rank)
                    slot, _, gen = rec.current(self.bootstrap_room)
                    # after an ABORT the request is stopped: a Success poll then is no conclusion
                    if (slot, gen) not in rec.prefill_aborted and rec.first("done", slot, gen, rank):
                        rec.emit("prefill_transfer_done", "prefill", rank, self.bootstrap_room)
                return status
            return poll

        def conclude_failure(orig):
            def conclude(self, *a, bootstrap_room, **kw):
                if self.disaggregation_mode == m["utils"].DisaggregationMode.PREFILL:
                    rank = int(self.attn_tp_rank)
                    slot, _, gen = rec.current(bootstrap_room)
                    if rec.first("failed", slot, gen, rank):
                        rec.emit("prefill_transfer_failed", "prefill", rank, bootstrap_room)
                return orig(self, *a, bootstrap_room=bootstrap_room, **kw)
            return conclude

        def commit(orig):
            def commit_(self, decode_req, *a, **kw):
                with rec.lock:  # before the call: a failed commit clears the receiver
                    pages = rec.pages.get(id(decode_req.kv_receiver), [])
                out = orig(self, decode_req, *a, **kw)
                if self.tp_rank == 0:
                    status = "error" if isinstance(decode_req.req.finished_reason, FINISH_ABORT) else "success"
                    rec.emit("decode_commit", "decode", 0, decode_req.req.bootstrap_room, pages=pages, status=status)
                return out
            return commit_

        def abort_failed(orig):
            def abort(self, decode_req, *a, **kw):
                if self.tp_rank == 0:
                    slot, _, gen = rec.current(decode_req.req.bootstrap_room)
                    if (slot, gen) not in rec.client_aborted and rec.first("poll_failed", slot, gen):
                        rec.emit("decode_poll_failed", "decode", 0, decode_req.req.bootstrap_room)
                return orig(self, decode_req, *a, **kw)
            return abort

        def receiver_abort(orig):
            def abort(self, *a, **kw):
                if self.kv_mgr.attn_tp_rank == 0:
                    slot, _, gen = rec.current(self.bootstrap_room)
                    with rec.lock:
                        rec.client_aborted.add((slot, gen))
                    if rec.first("abort", slot, gen):
                        rec.emit("decode_abort", "decode", 0, self.bootstrap_room)
                return orig(self, *a, **kw)
            return abort

        def handle_abort(orig):
            def handle(self, msg, *a, **kw):
                if msg and msg[0] == common.ABORT_TAG:
                    n = common.AbortNotification.from_zmq(msg)
                    if n is not None:
                        with rec.lock:
                            rec.prefill_aborted.add(rec.current(n.room)[::2])
                        rec.emit("prefill_handle_abort", "prefill", int(self.attn_tp_rank), n.room)
                return orig(self, msg, *a, **kw)
            return handle

        def send_acks(orig):
            def send(self, room, targets, *a, **kw):
                if targets:
                    rec.emit("prefill_drain_ack", "prefill", int(self.attn_tp_rank), room)
                return orig(self, room, targets, *a, **kw)
            return send

        def handle_ack(orig):
            def handle(self, msg, *a, **kw):
                if msg and msg[0] == common.ABORT_ACK_TAG and self.enable_deferred_decode_kv_release:
                    ack = common.AbortAck.from_zmq(msg)
                    if ack is not None:
                        slot, _, gen = rec.current(ack.room)
                        if rec.first("ack", slot, gen, ack.prefill_rank, ack.generation):
                            rec.emit("decode_handle_abort_ack", "decode", int(ack.prefill_rank), ack.room)
                return orig(self, msg, *a, **kw)
            return handle

        def resolve(orig):
            def resolve_(self, *a, **kw):
                if self.tp_rank != 0 or not self._deferred_releases:
                    return orig(self, *a, **kw)
                before = []
                for decode_req, _, _, _, required in self._deferred_releases:
                    drained = decode_req.kv_receiver.kv_mgr.is_abort_release_safe(decode_req.req.bootstrap_room,
                                                                                   required)
                    with rec.lock:
                        pages = rec.pages.get(id(decode_req.kv_receiver), [])
                    before.append((decode_req, drained, pages))
                out = orig(self, *a, **kw)
                left = {id(e[0]) for e in self._deferred_releases}
                for decode_req, drained, pages in before:
                    if id(decode_req) not in left:
                        name = "decode_release_deferred" if drained else "decode_release_timeout"
                        rec.emit(name, "decode", 0, decode_req.req.bootstrap_room, pages=pages)
                return out
            return resolve_

        dq = m["decode"]
        self.wrap(m["prefill"].PrefillBootstrapQueue, "add", pbq_add)
        self.wrap(dq.DecodePreallocQueue, "add", pq_add)
        self.wrap(common.CommonKVReceiver, "send_metadata", send_metadata)
        self.wrap(common.CommonKVSender, "init", sender_init)
        self.wrap(mc.MooncakeKVManager, "add_transfer_request", add_transfer_request)
        self.wrap(mc.MooncakeKVManager, "send_kvcache", send_kv)
        self.wrap(mc.MooncakeKVManager, "send_kvcache_slice", send_kv)
        self.wrap(mc.MooncakeKVManager, "send_aux", send_aux)
        self.wrap(common.CommonKVSender, "poll", sender_poll)
        self.wrap(common.CommonKVManager, "conclude_failure", conclude_failure)
        self.wrap(dq.DecodeTransferQueue, "_commit_transfer_to_req", commit)
        self.wrap(dq.DecodeTransferQueue, "_abort_failed_transfer", abort_failed)
        self.wrap(common.CommonKVReceiver, "abort", receiver_abort)
        self.wrap(mc.MooncakeKVManager, "_handle_abort_notification", handle_abort)
        self.wrap(common.CommonKVManager, "_send_abort_acks", send_acks)
        self.wrap(common.CommonKVManager, "handle_abort_ack_message", handle_ack)
        self.wrap(dq.DecodeTransferQueue, "resolve_deferred_releases", resolve)
        return self


def install(path: str, scenario: Any, room_base: int = 0, **header: Any) -> SglangRecorder:
    """Patch SGLang 0.5.23's classes to log to ``path`` (header naming ``scenario``); call
    ``uninstall()`` on the result to undo, ``log.close()`` to close the file."""
    from kvproof.spec.sglang.validate import ACKS_UNSEEN_KEY, UNSEEN_KEY

    from kvproof.model.scenario import builtin, parse_scenario

    header.setdefault(UNSEEN_KEY, True)  # a failed send's bytes land where no call returns
    header.setdefault(ACKS_UNSEEN_KEY, True)  # no ABORT_ACK for an ABORT decode did not arm for
    sc = builtin(scenario) if isinstance(scenario, str) else parse_scenario(scenario, "scenario")
    return SglangRecorder(EventLog(path, scenario, **header), room_base, aux=sc.config.aux_slots > 0).install()
