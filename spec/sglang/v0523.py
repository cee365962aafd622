"""SGLang 0.5.23 as shipped on the Mooncake backend: the behaviours of the release that the base
protocol does not have, each an override of one action (paths under
``python/sglang/srt/disaggregation/``).

* ``mooncake/conn.py`` ``add_transfer_request`` shards a prefill rank's chunks by the room's
  destination sessions and ``transfer_worker`` sends them one synchronous
  ``batch_transfer_sync`` at a time, so a prefill rank starts a write only when none of its own
  transfer calls is still running (:meth:`Sglang0523.kv_transfer_write`).  Prefill ranks are
  separate processes with their own workers: their calls run side by side.
* The worker sends a request's metadata with ``send_aux`` right after the last chunk's call
  returned, in the same thread, whether or not an ABORT arrived meanwhile
  (:meth:`Sglang0523.kv_write_lands`, :meth:`Sglang0523.kv_transfer_aux`).
* A prefill-side failure is a send that failed while its batch may still be writing
  (``batch_transfer_sync`` returning -1 on its timeout): the worker calls
  ``_poison_unsettled_send`` and ``conclude_failure`` and goes on with the next chunk
  (:meth:`Sglang0523.prefill_transfer_failed`).
* A poisoned room never gets that rank's drain ack (``_maybe_ack_drained_abort`` drops the
  target), so decode's hold can end only by its deadline (:meth:`Sglang0523.prefill_drain_ack`).
* The metadata slot: ``_apply_metadata_gate`` treats a slot whose bootstrap room is still 0
  as not yet transferred, ``_commit_transfer_to_req`` aborts the request when the slot names
  another room ("Metadata corruption detected"), and every release clears the slot
  (``MetadataBuffers.clear_slot``) (:meth:`Sglang0523.decode_commit`,
  :meth:`Sglang0523.release_aux`).
* The decode ranks of an attention-TP group process a client's abort in the same scheduler
  iteration (the request is broadcast to the group) and publish a request's metadata in the
  same ``pop_preallocated`` iteration, so an abort never falls between two ranks' publications
  (:meth:`Sglang0523.decode_abort`).

Everything else is an engine flag of the scenarios (``spec/sglang/scenarios/*-sglang-0.5.23-*.toml``):
both admission doors reject pending-error placeholders (``is_unadmitted_reject``); deferred
release is on for backends that declare ``supports_deferred_decode_kv_release`` and holds until
``is_abort_release_safe(room, required_acks)`` with ``required_acks = len(bootstrap_infos)``
(``required_acks = "every_prefill_rank"``) or the 30 s deadline; the hold decision is
MAX-all-reduced and the readiness MIN-all-reduced over the attention-TP group; every failure
after the metadata was published defers (``ensure_abort_notified(force_arm=True)``); the room's
generation is armed before ABORT is sent (``register_before_abort``) and acks carry it
(``acks_carry_generation``); the metadata slot is held with the pages (``aux_held_with_pages``).
"""

from __future__ import annotations

from kvproof.model.framework import action, witness
from kvproof.model.layout import Domain, Field
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.state import (
    D_ENDED, D_NEW, D_RESERVED, D_WAITING, OUT_ERROR, OUT_NONE, OUT_SUCCESS, P_ENDED, P_QUEUED, P_SENDING,
    PAB_NONE, POLL_FAILED, POLL_NONE, POLL_SUCCESS, READ_NONE, UNWRITTEN, WR_FLIGHT, WR_LANDED, WR_NOT_ISSUED,
    WriteTarget, kv_of, owned_by,
)

__all__ = ["Sglang0523", "update_status", "RS_LABELS"]


class _Sglang0523Base(PdProtocol):
    """SGLang 0.5.23's Mooncake prefill worker and decode scheduler on top of the base protocol
    (the behaviours listed in the module docstring)."""

    def _calls_running(self, s, pr: int, but=None):
        """Transfer calls of prefill rank ``pr``'s worker that have not returned: its in-flight
        writes (and, rank 0, aux writes) of requests whose send did not fail on this rank, except
        the write ``but`` = (request, stream, chunk)."""
        o = s.ops
        k = self.k
        out = []
        for r in range(k.R):
            returned = s.poll[r, pr] == POLL_FAILED
            for w in k.streams_of(pr):
                for c in range(self.send_len(r)):
                    if (r, w, c) != but:
                        out.append((s.wr[r, w, c] >= WR_FLIGHT) & ~returned)
            if k.M and pr == 0:
                out.append((s.aux_wr[r] >= WR_FLIGHT) & ~returned)
        return o.any_(out)

    def kv_transfer_write(self, s, n, r, w, c):
        """``transfer_worker`` dequeues chunk ``c`` and starts its synchronous
        ``batch_transfer_sync``: only when no other transfer call of this prefill rank is
        running (one worker thread serves the destination sessions)."""
        o = s.ops
        pr = self.k.rank_of_stream(w)
        s.require(o.not_(self._calls_running(s, pr, but=(r, w, c))))
        super().kv_transfer_write(s, n, r, w, c)

    def kv_write_lands(self, s, n, r, w, c):
        """The write lands and its transfer call returns.  When it was rank 0's last chunk and
        the call did not fail, the same worker thread goes straight on to ``send_aux`` (with aux
        slots): the metadata write is issued in this step, ABORT or not."""
        super().kv_write_lands(s, n, r, w, c)
        k = self.k
        if not k.M or k.rank_of_stream(w) != 0 or c != self.send_len(r) - 1:
            return
        o = s.ops
        others = [s.wr[r, w2, c] != WR_NOT_ISSUED for w2 in k.streams_of(0) if w2 != w]
        last = o.and_(s.poll[r, 0] != POLL_FAILED, s.aux_wr[r] == WR_NOT_ISSUED, *others)
        n.aux_wr[r] = o.ite(last, WR_FLIGHT, s.aux_wr[r])

    def kv_transfer_aux(self, s, n, r):
        """Never a step of its own: ``send_aux`` follows the last chunk's call in the same
        worker thread (see :meth:`kv_write_lands`)."""
        s.require(False)

    def prefill_transfer_failed(self, s, n, r, pr):
        """A send of prefill rank ``pr`` fails while its batch may still write
        (``batch_transfer_sync`` returns -1 on its timeout): ``_poison_unsettled_send`` then
        ``conclude_failure``; the write stays in flight and lands whenever it lands."""
        s.require(self.rank_writes_in_flight(s, r, pr))
        super().prefill_transfer_failed(s, n, r, pr)

    def prefill_drain_ack(self, s, n, r, pr):
        """``_maybe_ack_drained_abort``: never for a room this rank poisoned (a failed send), so
        decode falls back to its release timeout."""
        s.require(s.poll[r, pr] != POLL_FAILED)
        super().prefill_drain_ack(s, n, r, pr)

    def decode_abort(self, s, n, r):
        """``Scheduler.abort_request`` on every decode rank of the group in the same iteration:
        either no rank or every rank has published the request's metadata (``pop_preallocated``
        publishes on all ranks in one iteration)."""
        o = s.ops
        metas = [s.meta[r, d] == 1 for d in range(self.k.DR)]
        s.require(o.all_(metas) | ~o.any_(metas))
        super().decode_abort(s, n, r)

    def release_aux(self, s, n, r: int, when=True):
        """``_do_release`` / ``pop_transferred`` free the metadata slot and clear it
        (``clear_slot``: its bootstrap room reads 0 again, "not yet written")."""
        super().release_aux(s, n, r, when)
        if not self.k.M:
            return
        o = s.ops
        m = s.aux[r]
        n.aux_content[m] = o.ite(when & (s.aux_owner[m] == owned_by(r)), UNWRITTEN, s.aux_content[m])

    def decode_commit(self, s, n, r):
        """``pop_transferred``'s Success branch with a metadata slot: the gate
        (``_apply_metadata_gate``) waits while the slot's bootstrap room is 0, and
        ``_commit_transfer_to_req`` aborts the request with an error when the slot names another
        room ("Metadata corruption detected") instead of reading its pages; either way the
        pages are released.  Without aux slots, or with the checksum or ``verify_then_read``
        flags (no scenario of the family sets them), the base commit runs unchanged."""
        if not self.k.M or self.e.checksum or self.e.verify_then_read:
            super().decode_commit(s, n, r)
            return
        o = s.ops
        slot = s.aux_content[s.aux[r]]
        s.require(s.d_phase[r] == D_WAITING)
        s.require(o.all_(s.poll[r, pr] == POLL_SUCCESS for pr in self.prs))
        s.require(slot != UNWRITTEN)
        found, _ = self.classify_read(s, r)
        mine = slot == kv_of(r)
        n.outcome[r] = o.ite(mine, OUT_SUCCESS, OUT_ERROR)
        n.read[r] = o.ite(mine, found, READ_NONE)
        n.d_phase[r] = D_ENDED
        self.release_decode(s, n, r)


# -- client rooms: 0.5.23's maps keyed by bootstrap_room ------------------------------------------
# With ``room_policy = "client"`` two requests may carry one ``bootstrap_room``.  Per request (one
# object each) stay what the code keeps per object: the ``Req`` in its queues, the sender's and
# receiver's ``conclude_state`` (``poll``, ``d_concl``), the reserved pages, the metadata slot
# and its gate (``md``).  Keyed by the room, shared by every request
# that carries it, are (``disaggregation/common/conn.py`` ``CommonKVManager``):
#
# * decode's ``request_status[room]`` (``d_status``): created Bootstrapping by the receiver's
#   ``__init__`` (``update_status``), Success when the prefill status message arrives
#   (``apply_prefill_status`` via ``prefill_response_tracker[room]``), Failed by ``abort`` or the
#   duplicate guard, popped by the receiver's ``clear`` (commit, ``failure_exception``); the
#   receiver's ``poll`` reads it;
# * each prefill instance's ``request_status[room]`` (``p_status``): created by the sender's
#   ``__init__``, WaitingForInput when the room's ``transfer_infos`` is complete (the
#   Mooncake ``bootstrap_thread``), Success when the transfer worker concludes, Failed by
#   ``_handle_abort_notification``, popped by ``CommonKVSender.clear``; the sender's ``poll``
#   reads it;
# * each prefill instance's ``transfer_infos[room][session]`` (``p_dst``): the destination
#   ``send_metadata`` last published for the room; ``add_transfer_request`` and
#   ``transfer_worker`` address every chunk of the room by it (``wr_dst`` records where each
#   issued write goes, ``wr_md`` whose metadata slot its ``send_aux`` writes); popped by the
#   worker when it concludes the room and by ``CommonKVSender.clear``;
# * each prefill instance's ``_staging_outstanding[room]``: chunks of the room dequeued by the
#   worker and not finished (the sender's ``poll`` holds Success back while it is positive).
#
# Keyed by (room, generation) or remembering one, the abort bookkeeping, which the scenarios with
# client rooms do not reach (``Config.problems`` refuses aborts and failures with them):
#
# * decode's ``_deferred_abort_ack_tracker[room]`` = ``DeferredAbortAckState(generation,
#   prefill_ranks)``: ONE armed generation per room (``register_deferred_abort_room`` replaces
#   it), ``note_abort_ack(room, rank, generation)`` records an ack only for that generation,
#   ``is_abort_release_safe(room, k)`` counts its ranks, ``clear_deferred_abort_state(room)``
#   pops it at the release;
# * a held entry of ``_deferred_releases`` (``decode.py`` ``_defer_release``) remembers the
#   request, its start, its deadline, its metadata slot and ``required_acks``; it is resolved by
#   ``is_abort_release_safe(req.bootstrap_room, required_acks)``: by ROOM, not by generation;
# * prefill's ``_deferred_ack_targets[room][(decode ip, port)] = AckTarget(ip, port,
#   generation)`` and ``_deferred_ack_poisoned_rooms``, dropped with ``_staging_outstanding[room]``
#   when a new lifecycle of the room opens (``update_status`` creating the entry).
#
# So two requests sharing a room while the first is held after an abort is not checked.  Nor are
# several ranks per instance and metadata slots with client rooms; of
# ``--disaggregation-decode-allocation-policy prefill_complete`` only its decode-side
# duplicate-room check is modelled (``decode_duplicate_room``), not its prefill-side check
# (``common/bootstrap.py`` ``DeferredBootstrap.open``) nor its deferred allocation.

RS_ABSENT, RS_FAILED, RS_BOOTSTRAPPING, RS_WAITING, RS_SUCCESS = range(5)
RS_LABELS = ("absent", "failed", "bootstrapping", "waiting_for_input", "success")
"""A room's ``request_status`` entry: absent, or a ``KVPoll`` value in ``KVPoll``'s order
(Failed < Bootstrapping < WaitingForInput < Success)."""


def update_status(o, cur, status: int):
    """``CommonKVManager.update_status(room, status)`` on an entry ``cur``: only an opening
    status (Bootstrapping, WaitingForInput) creates an absent entry; Failed overwrites and is
    terminal; otherwise the entry keeps the larger status."""
    if status in (RS_BOOTSTRAPPING, RS_WAITING):
        return o.ite(cur == RS_ABSENT, status, o.ite(cur == RS_FAILED, RS_FAILED, o.max_(cur, status)))
    if status == RS_FAILED:
        return o.ite(cur == RS_ABSENT, RS_ABSENT, RS_FAILED)
    return o.ite((cur == RS_ABSENT) | (cur == RS_FAILED), cur, o.max_(cur, status))


class _ClientRooms:
    """The overrides of :class:`Sglang0523` for client-chosen rooms (each runs the base action
    unchanged unless the scenario's ``room_policy`` is ``client``)."""

    models_client_rooms = True

    @property
    def client_rooms(self) -> bool:
        """The scenario's rooms are the client's (``room_policy = "client"``)."""
        return self.e.room_policy == "client"

    @property
    def room_guard(self) -> bool:
        """``--disaggregation-decode-allocation-policy prefill_complete``: the duplicate-room
        guard of ``CommonKVReceiver.__init__`` is on."""
        return self.e.decode_allocation_policy == "prefill_complete"

    def room(self, r: int) -> int:
        """Request ``r``'s ``bootstrap_room``."""
        return self.cfg.room_of(r)

    def instance(self, r: int) -> int:
        """The prefill instance serving request ``r``."""
        return self.cfg.requests[r].prefill_instance

    def build_fields(self) -> list[Field]:
        """The base fields, and with client rooms the room-keyed maps (see the comment above
        :data:`RS_LABELS`)."""
        fields = super().build_fields()
        if not self.client_rooms:
            return fields
        k, cfg = self.k, self.cfg
        room = Domain("room", cfg.rooms, tuple(f"room{x}" for x in range(cfg.rooms)))
        inst = Domain("prefill_instance", cfg.prefill_instances, tuple(f"I{i}" for i in range(cfg.prefill_instances)))
        status = Domain("room_status", len(RS_LABELS), RS_LABELS)
        return fields + [
            Field("d_status", (room,), status, RS_ABSENT, "decode's request_status[room]"),
            Field("p_status", (inst, room), status, RS_ABSENT, "each prefill instance's request_status[room]"),
            Field("p_dst", (inst, room, k.chunk), k.page_ref, k.D,
                  "each prefill instance's transfer_infos[room]: the pages decode last published for the room"),
            Field("wr_dst", (k.req, k.stream, k.chunk), k.page_ref, k.D,
                  "the decode page each issued write is addressed to (from transfer_infos[room] at send)"),
            Field("p_md", (inst, room), Domain("request_or_none", k.R + 1, k.req.labels + ("none",)), k.R,
                  "each prefill instance's transfer_infos[room]: whose metadata slot (dst_aux_index) it names"),
            Field("md", (k.req,), Domain("metadata", 2, ("empty", "written")), 0,
                  "the request's metadata slot on decode: its bootstrap_room is still 0, or send_aux wrote it"),
            Field("wr_md", (k.req,), Domain("request_or_none", k.R + 1, k.req.labels + ("none",)), k.R,
                  "whose metadata slot the request's last chunk's send_aux will write (the TransferInfo the "
                  "worker took from transfer_infos[room] with that chunk)"),
            Field("d_concl", (k.req,), Domain("conclusion", 3, ("none", "success", "failed")), 0,
                  "the decode receiver's conclude_state: what its poll cached"),
        ]

    def write_dest(self, r: int, w: int, c: int) -> tuple[str, tuple[int, ...]]:
        """With client rooms a write lands where it was addressed (``wr_dst``)."""
        if not self.client_rooms:
            return super().write_dest(r, w, c)
        return "wr_dst", (r, w, c)

    def write_targets(self, s):
        """With client rooms a page write lands where ``transfer_infos[room]`` addressed it
        (``wr_dst``), which may be another request's page: ``no_write_after_release`` then
        checks that page is still owned by the request whose write it is."""
        if not self.client_rooms:
            return super().write_targets(s)
        k = self.k
        return [WriteTarget(r, s.wr[r, w, c] >= WR_FLIGHT, "owner", s.wr_dst[r, w, c], "page")
                for r in range(k.R) for w in range(k.S) for c in range(self.send_len(r))]

    def prefill_bootstrap_add(self, s, n, r):
        """``CommonKVSender.__init__`` opens the room on its prefill instance
        (``update_status(room, Bootstrapping)``: a live entry of another request stays)."""
        super().prefill_bootstrap_add(s, n, r)
        if not self.client_rooms or (self.over_long(r) and self.e.reject_at_prefill_door):
            return
        i, x = self.instance(r), self.room(r)
        n.p_status[i, x] = update_status(s.ops, s.p_status[i, x], RS_BOOTSTRAPPING)

    def decode_prealloc(self, s, n, r):
        """``CommonKVReceiver.__init__`` opens the room on decode (``update_status(room,
        Bootstrapping)``); with the guard a room still in ``request_status`` is refused here
        (see :meth:`decode_duplicate_room`)."""
        if self.client_rooms and not (self.over_long(r) and self.e.reject_at_decode_door):
            x = self.room(r)
            if self.room_guard:
                s.require(s.d_status[x] == RS_ABSENT)
            n.d_status[x] = update_status(s.ops, s.d_status[x], RS_BOOTSTRAPPING)
        super().decode_prealloc(s, n, r)

    @action("decode", "req", fair=True)
    def decode_duplicate_room(self, s, n, r):
        """The duplicate-room guard (``prefill_complete`` only): ``CommonKVReceiver.__init__``
        finds the room in decode's ``request_status`` ("Duplicate decode bootstrap room"),
        records the failure and marks the ROOM Failed (``update_status(room, Failed)``, which
        the live request of that room polls too); the new request fails in
        ``_update_handshake_waiters`` before any page is reserved, and its ``clear`` leaves the
        room alone (``_owns_bootstrap_room`` is false)."""
        s.require(self.client_rooms and self.room_guard)
        x = self.room(r)
        s.require(s.d_phase[r] == D_NEW)
        s.require(self.in_order(s, "d_phase", D_NEW, r))
        s.require(s.outcome[r] == OUT_NONE)
        s.require(s.d_status[x] != RS_ABSENT)
        n.d_status[x] = RS_FAILED
        n.outcome[r] = OUT_ERROR
        n.d_phase[r] = D_ENDED

    def decode_send_metadata(self, s, n, r, d):
        """``send_metadata`` reaches the prefill instance's ``bootstrap_thread``, which stores
        it as ``transfer_infos[room][session]`` (replacing what another request of the room
        published from the same session) and, the room's destinations complete, sets
        ``update_status(room, WaitingForInput)``."""
        super().decode_send_metadata(s, n, r, d)
        if not self.client_rooms:
            return
        i, x = self.instance(r), self.room(r)
        for c in range(self.k.C):
            n.p_dst[i, x, c] = s.dest[r, c] if c < self.pages(r) else self.k.D
        n.p_md[i, x] = r
        n.p_status[i, x] = update_status(s.ops, s.p_status[i, x], RS_WAITING)

    def prefill_forward(self, s, n, r):
        """With client rooms the forward runs once the request's sender polls WaitingForInput:
        the ROOM's ``request_status`` on its instance, whichever request of the room published
        the destinations."""
        if not self.client_rooms:
            super().prefill_forward(s, n, r)
            return
        s.require(s.p_phase[r] == P_QUEUED)
        s.require(s.p_status[self.instance(r), self.room(r)] == RS_WAITING)
        if self.pending_error(r) and self.e.retire_pending_error_prefill:
            n.p_phase[r] = P_ENDED
            for pr in self.prs:
                n.poll[r, pr] = POLL_FAILED
            return
        self.allocate(s, n, r, self.send_len(r), "src_owner", "src", self.k.P, content="src_content")
        n.p_phase[r] = P_SENDING

    def kv_transfer_write(self, s, n, r, w, c):
        """``add_transfer_request`` skips a room that is absent or Failed; the worker addresses
        the chunk by ``transfer_infos[room]``: the destination the room's LAST publication
        named, which may be another request's pages."""
        super().kv_transfer_write(s, n, r, w, c)
        if not self.client_rooms:
            return
        i, x = self.instance(r), self.room(r)
        s.require((s.p_status[i, x] != RS_ABSENT) & (s.p_status[i, x] != RS_FAILED))
        s.require(s.p_dst[i, x, c] != self.k.D)
        n.wr_dst[r, w, c] = s.p_dst[i, x, c]
        if c == self.send_len(r) - 1:
            n.wr_md[r] = s.p_md[i, x]

    def kv_write_lands(self, s, n, r, w, c):
        """With client rooms the write lands in the page it was addressed to (``wr_dst``); when
        it is the request's last, the Mooncake ``transfer_worker`` concludes the ROOM Success on
        its instance (``conclude_transfer``: ``update_status(room, Success)`` and the status
        message to decode, delivered at :meth:`prefill_transfer_done`) and tears the room down
        (``transfer_infos.pop(room)``)."""
        if not self.client_rooms:
            super().kv_write_lands(s, n, r, w, c)
            return
        o = s.ops
        s.require(c < self.send_len(r))
        s.require(s.wr[r, w, c] >= WR_FLIGHT)
        n.wr[r, w, c] = WR_LANDED
        p = s.wr_dst[r, w, c]
        for u in self.k.units_of_stream(w):
            n.content[u, p] = s.src_content[s.src[r, c]]
        i, x = self.instance(r), self.room(r)
        rest = [s.wr[r, w2, c2] == WR_LANDED for w2 in range(self.k.S) for c2 in range(self.send_len(r))
                if (w2, c2) != (w, c)]
        done = o.all_(rest)
        n.p_status[i, x] = o.ite(done, update_status(o, s.p_status[i, x], RS_SUCCESS), s.p_status[i, x])
        # the worker tears the room down once nothing of it is outstanding and it concluded
        # Success: transfer_infos.pop(room) (the other requests of the room lose their
        # destinations: add_transfer_request drops their chunks)
        for c2 in range(self.k.C):
            n.p_dst[i, x, c2] = o.ite(done, self.k.D, s.p_dst[i, x, c2])
        n.p_md[i, x] = o.ite(done, self.k.R, s.p_md[i, x])
        # send_aux follows the last chunk in the same worker thread (no latency without aux
        # slots in the scenario), with the TransferInfo the worker took for that chunk: it
        # writes the metadata slot that publication named (wr_md), even if the room was
        # published again meanwhile
        for r2 in range(self.k.R):
            hit = done & (s.wr_md[r] == r2)
            n.md[r2] = o.ite(hit, 1, s.md[r2])

    def prefill_transfer_done(self, s, n, r, pr):
        """With client rooms the sender's ``poll`` (``_poll_with_status``) reads the ROOM's
        status on its instance: it concludes Success once any request of the room concluded it
        and no chunk of the room is outstanding in the worker, whether or not its own writes
        were ever issued.  The room's status message reaches decode (``apply_prefill_status``), and
        the prefill scheduler ends the request: ``CommonKVSender.clear`` pops the room's
        ``request_status`` and ``transfer_infos`` on the instance."""
        if not self.client_rooms:
            super().prefill_transfer_done(s, n, r, pr)
            return
        i, x = self.instance(r), self.room(r)
        s.require(s.p_phase[r] == P_SENDING)
        s.require(s.poll[r, pr] == POLL_NONE)
        s.require(s.p_abort[r, pr] == PAB_NONE)
        s.require(s.p_status[i, x] == RS_SUCCESS)
        # _poll_with_status holds Success back (Transferring) while the room has a chunk
        # outstanding in the worker (_staging_outstanding[room] > 0), whichever request's
        s.require(s.ops.not_(s.ops.any_(self.writes_in_flight(s, r2) for r2 in range(self.k.R)
                                        if self.room(r2) == x and self.instance(r2) == i)))
        n.poll[r, pr] = POLL_SUCCESS
        n.p_phase[r] = P_ENDED
        self.release_source(s, n, r)
        n.d_status[x] = update_status(s.ops, s.d_status[x], RS_SUCCESS)
        n.p_status[i, x] = RS_ABSENT
        for c in range(self.k.C):
            n.p_dst[i, x, c] = self.k.D

    def polled(self, s, r: int):
        """What request ``r``'s decode receiver polls (``CommonKVReceiver._poll``): its cached
        ``conclude_state`` if it has one, else the room's ``request_status`` entry (a
        ``conclusion`` code; an absent room is not Success or Failed here, but see
        :meth:`pop_transferred_polls`)."""
        o = s.ops
        st = s.d_status[self.room(r)]
        live = o.ite(st == RS_SUCCESS, 1, o.ite(st == RS_FAILED, 2, 0))
        return o.ite(s.d_concl[r] != 0, s.d_concl[r], live)

    def pop_transferred_polls(self, s, n):
        """``pop_transferred`` polls EVERY receiver of the transfer queue first
        (``poll_and_all_reduce``), so each caches a Success or Failed of its room before any is
        cleared; a receiver with nothing cached whose room's entry is gone makes the poll raise
        (``check_status``: ``request_status[room]``, a ``KeyError`` in the decode scheduler), and
        the model takes no such step."""
        o = s.ops
        for r2 in range(self.k.R):
            queued = s.d_phase[r2] == D_WAITING
            s.require(~queued | (s.d_concl[r2] != 0) | (s.d_status[self.room(r2)] != RS_ABSENT))
            n.d_concl[r2] = o.ite(queued, self.polled(s, r2), s.d_concl[r2])

    @witness
    def sometimes_decode_polls_cleared_room(self, s):
        """(Client rooms.) A request waits in the transfer queue with nothing cached while its
        room's ``request_status`` entry was popped by another request of the room: the next
        ``pop_transferred`` raises ``KeyError`` in the decode scheduler."""
        o = s.ops
        if not self.client_rooms:
            return o.const(False)
        return o.any_((s.d_phase[r] == D_WAITING) & (s.d_concl[r] == 0) & (s.d_status[self.room(r)] == RS_ABSENT)
                      for r in range(self.k.R))

    def decode_commit(self, s, n, r):
        """With client rooms the receiver's ``poll`` (:meth:`polled`, after
        :meth:`pop_transferred_polls`) reads decode's ``request_status[room]``: Success once any
        request of the room concluded; the metadata gate waits for the
        request's own metadata slot (written by ``send_aux`` of whichever request of the room
        transfer_infos addressed it to); ``pop_transferred`` commits the request and reads its
        reserved pages, and the receiver's ``clear`` pops the room's entry."""
        if not self.client_rooms:
            super().decode_commit(s, n, r)
            return
        x = self.room(r)
        s.require(s.d_phase[r] == D_WAITING)
        s.require(self.polled(s, r) == 1)
        self.pop_transferred_polls(s, n)
        # _apply_metadata_gate: the request's own metadata slot must have been written (its
        # bootstrap_room is no longer 0); _commit_transfer_to_req's room check passes, since
        # only a request of the same room can have written it
        s.require(s.md[r] == 1)
        found, _ = self.classify_read(s, r)
        n.outcome[r] = OUT_SUCCESS
        n.read[r] = found
        n.d_phase[r] = D_ENDED
        self.release_decode(s, n, r)
        n.d_status[x] = RS_ABSENT

    def decode_poll_failed(self, s, n, r):
        """With client rooms the receiver polls Failed when decode's ``request_status[room]``
        is Failed (the guard marked the room); ``failure_exception`` clears the receiver, which
        pops the room's entry."""
        if not self.client_rooms:
            super().decode_poll_failed(s, n, r)
            return
        o = s.ops
        x = self.room(r)
        s.require(self.polled(s, r) == 2)
        s.require(o.is_in(s.d_phase[r], (D_RESERVED, D_WAITING)))
        self.pop_transferred_polls(s, n)
        self.fail_request(s, n, r)
        n.d_status[x] = RS_ABSENT

    def prefill_handle_abort(self, s, n, r, pr):
        """With client rooms ``_handle_deferred_abort_notification`` marks the ROOM Failed on
        the instance when it is active (present, not Success)."""
        super().prefill_handle_abort(s, n, r, pr)
        if not self.client_rooms:
            return
        i, x = self.instance(r), self.room(r)
        cur = s.p_status[i, x]
        n.p_status[i, x] = s.ops.ite(cur == RS_SUCCESS, cur, update_status(s.ops, cur, RS_FAILED))

    def prefill_drain(self, s, n, r):
        """With client rooms the request's end on prefill runs ``CommonKVSender.clear``, which
        pops the room's ``request_status`` and ``transfer_infos`` on the instance."""
        super().prefill_drain(s, n, r)
        if not self.client_rooms:
            return
        i, x = self.instance(r), self.room(r)
        n.p_status[i, x] = RS_ABSENT
        for c in range(self.k.C):
            n.p_dst[i, x, c] = self.k.D


class Sglang0523(_ClientRooms, _Sglang0523Base):
    """SGLang 0.5.23's Mooncake prefill worker and decode scheduler on top of the base protocol,
    with its room-keyed bookkeeping when the scenario's rooms are the client's."""
