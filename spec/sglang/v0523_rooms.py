"""SGLang 0.5.23 with client-chosen bootstrap rooms: the overrides of
:class:`~kvproof.spec.sglang.v0523.Sglang0523` that key 0.5.23's bookkeeping by room as the code
does (paths under ``python/sglang/srt/disaggregation/``), active only when a scenario sets
``room_policy = "client"``; a module of its own so that each action of the release is defined once
per file (the mutation gate locates a mutant by its function's name)."""

from __future__ import annotations

from kvproof.model.framework import action, witness
from kvproof.model.layout import Domain, Field
from kvproof.spec.sglang.state import (
    D_ENDED, D_HELD, D_NEW, D_RESERVED, D_WAITING, OUT_ERROR, OUT_NONE, OUT_SUCCESS, P_ENDED, P_QUEUED, P_SENDING,
    PAB_NONE, POLL_FAILED, POLL_NONE, POLL_SUCCESS, WR_FLIGHT, WR_LANDED, WriteTarget,
)

__all__ = ["update_status", "RS_LABELS", "RS_ABSENT", "RS_FAILED", "RS_BOOTSTRAPPING", "RS_WAITING", "RS_SUCCESS"]


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
# Keyed by (room, generation) or remembering one, the abort bookkeeping, modelled with client
# aborts at decode (``room_acks``; ``Config.problems`` refuses prefill aborts, transfer failures,
# deaths and lost ABORTs with client rooms, and two requests of one room on one prefill instance
# when aborts are on):
#
# * decode's ``_deferred_abort_ack_tracker[room]`` = ``DeferredAbortAckState(generation,
#   prefill_ranks)``: ONE armed generation per room (``register_deferred_abort_room`` replaces
#   it: :meth:`_ClientRooms.send_abort`), ``note_abort_ack(room, rank, generation)`` records an
#   ack only for that generation (``armed[r]``: the room's tracker holds r's generation),
#   ``is_abort_release_safe(room, k)`` counts its ranks (:meth:`_ClientRooms.release_safe`),
#   ``clear_deferred_abort_state(room)`` pops it when ``_do_release`` frees a held entry
#   (:meth:`_ClientRooms.release_decode`);
# * a held entry of ``_deferred_releases`` (``decode.py`` ``_defer_release``) remembers the
#   request, its start, its deadline, its metadata slot and ``required_acks``; it is resolved by
#   ``is_abort_release_safe(req.bootstrap_room, required_acks)``: by ROOM, not by generation;
# * prefill's ``_deferred_ack_targets[room][(decode ip, port)] = AckTarget(ip, port,
#   generation)`` and ``_deferred_ack_poisoned_rooms`` are per prefill instance: with the
#   requests of a room on distinct instances they are each request's own (the base ``p_abort``);
#   two requests of a room on one instance with aborts are refused, as that sharing is not
#   modelled.
#
# Not modelled with client rooms: several ranks per instance, metadata slots; with
# ``--disaggregation-decode-allocation-policy prefill_complete`` (``decode_prealloc`` opens the
# receiver, ``decode_reserve`` reserves after prefill's forward, ``DeferredBootstrap`` per
# instance and room in ``p_ep`` / ``p_ready``), its prefill-side duplicate check
# (``DeferredBootstrap.open``), its bootstrap timeout and aborts.

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

    @property
    def room_acks(self) -> bool:
        """Client rooms with client aborts: decode's ``_deferred_abort_ack_tracker`` is keyed
        by the room (see :meth:`send_abort`, :meth:`release_safe`, :meth:`release_decode`)."""
        return self.client_rooms and self.e.client_aborts

    def room_mates(self, r: int) -> list[int]:
        """The other requests that carry request ``r``'s room."""
        return [r2 for r2 in range(self.k.R) if r2 != r and self.room(r2) == self.room(r)]

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
        ] + (self._deferred_allocation_fields() if self.room_guard else [])

    def _deferred_allocation_fields(self) -> list[Field]:
        """With ``prefill_complete``: whether the request's decode receiver exists (it sent
        ``BOOTSTRAP``, no page reserved yet) and each prefill instance's ``DeferredBootstrap``
        entry of a room (``common/bootstrap.py`` ``BootstrapRoom``: decode's endpoint
        registered, the prefill forward complete)."""
        k, cfg = self.k, self.cfg
        flag = Domain("flag", 2, ("no", "yes"))
        room = Domain("room", cfg.rooms, tuple(f"room{x}" for x in range(cfg.rooms)))
        inst = Domain("prefill_instance", cfg.prefill_instances, tuple(f"I{i}" for i in range(cfg.prefill_instances)))
        return [
            Field("d_boot", (k.req,), flag, 0,
                  "decode's receiver exists and sent BOOTSTRAP (prefill_complete: pages are reserved later)"),
            Field("p_ep", (inst, room), flag, 0, "each prefill instance's DeferredBootstrap room: decode's endpoint"),
            Field("p_ready", (inst, room), flag, 0,
                  "each prefill instance's DeferredBootstrap room: the prefill forward completed (ready)"),
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

    def reserved_targets(self, s):
        """With client rooms a write's address (``wr_dst``) is unset until the write is issued
        and may be another request's page, so ``release_justified`` looks at what each request
        reserved itself: its pages (``dest``) and aux slot, as without client rooms.  A release of
        a page that another request's write of the same room targets is
        ``no_write_after_release``'s to catch."""
        return super().write_targets(s)

    def release_needs_reservation(self) -> bool:
        """With client rooms prefill may forward a request of a shared room on another
        request's metadata, before decode reserved anything for it: a request still ``new`` on
        decode has released nothing."""
        return self.client_rooms or super().release_needs_reservation()

    def has_reserved(self, s, r: int):
        """With ``prefill_complete`` a request may leave ``new`` on decode without a page
        (the duplicate-room guard, a failure while it waited for prefill): it reserved only if
        ``_pre_alloc`` gave it pages (:meth:`decode_reserve`)."""
        if not (self.client_rooms and self.room_guard):
            return super().has_reserved(s, r)
        return (s.d_phase[r] != D_NEW) & (s.dest[r, 0] != self.k.D)

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
        (see :meth:`decode_duplicate_room`), and the reservation waits for prefill (see
        :meth:`decode_open_receiver`)."""
        deferred = self.client_rooms and self.room_guard and not (self.over_long(r) and self.e.reject_at_decode_door)
        if deferred:
            self.decode_open_receiver(s, n, r)
            return
        if self.client_rooms and not (self.over_long(r) and self.e.reject_at_decode_door):
            x = self.room(r)
            n.d_status[x] = update_status(s.ops, s.d_status[x], RS_BOOTSTRAPPING)
        super().decode_prealloc(s, n, r)

    def arrived_in_order(self, s, r: int):
        """With ``prefill_complete``, FIFO arrival at ``DecodePreallocQueue.add``
        (``ordered_arrivals``): request ``r - 1`` has its receiver, or left ``new``.  A
        condition."""
        o = s.ops
        if not self.e.ordered_arrivals or r == 0:
            return o.const(True)
        return (s.d_phase[r - 1] != D_NEW) | (s.d_boot[r - 1] == 1)

    def decode_open_receiver(self, s, n, r):
        """(``prefill_complete``, the body of :meth:`decode_prealloc`.)
        ``DecodePreallocQueue.add`` creates the receiver: ``CommonKVReceiver.__init__`` finds
        the room absent from decode's ``request_status`` (the duplicate case is
        :meth:`decode_duplicate_room`) and opens it Bootstrapping; ``init`` sends ``BOOTSTRAP``
        (room, decode's endpoint) to the prefill instance instead of reserving, and the
        instance's bootstrap thread registers it (``_handle_bootstrap_message`` ->
        ``DeferredBootstrap.register``): if the forward there already completed, the readiness
        message (``_notify_bootstrap``, WaitingForInput) reaches decode's
        ``apply_prefill_status``.  No page is reserved until :meth:`decode_reserve`."""
        o = s.ops
        x, i = self.room(r), self.instance(r)
        s.require(s.d_phase[r] == D_NEW)
        s.require(s.d_boot[r] == 0)
        s.require(self.arrived_in_order(s, r))
        s.require(s.outcome[r] == OUT_NONE)
        s.require(s.d_status[x] == RS_ABSENT)
        n.d_boot[r] = 1
        n.p_ep[i, x] = 1
        n.d_status[x] = o.ite(s.p_ready[i, x] == 1, RS_WAITING, RS_BOOTSTRAPPING)

    @action("decode", "req", fair=True)
    def decode_reserve(self, s, n, r):
        """(``prefill_complete`` only.)  ``pop_preallocated``: ``_update_handshake_waiters``
        polls the receiver WaitingForInput (decode's ``request_status[room]``, set by the
        prefill instance's readiness message), so the request is ``waiting_for_input``;
        ``_pre_alloc`` reserves its pages now, after prefill completed (the deferred allocation
        of ``--disaggregation-decode-allocation-policy prefill_complete``), and the same
        ``pop_preallocated`` iteration publishes them (``send_metadata``, one decode rank with
        client rooms) and moves the request to ``DecodeTransferQueue``."""
        s.require(self.client_rooms and self.room_guard)
        s.require(s.d_phase[r] == D_NEW)
        s.require(s.d_boot[r] == 1)
        s.require(s.outcome[r] == OUT_NONE)
        s.require(s.d_concl[r] == 0)
        s.require(s.d_status[self.room(r)] == RS_WAITING)
        self.allocate(s, n, r, self.pages(r), "owner", "dest", self.k.D)
        n.meta[r, 0] = 1
        n.d_phase[r] = D_WAITING
        self.publish_room(s, n, r, [n.dest[r, c] for c in range(self.pages(r))])

    @action("decode", "req", fair=True)
    def decode_duplicate_room(self, s, n, r):
        """The duplicate-room guard (``prefill_complete`` only): ``CommonKVReceiver.__init__``
        finds the room in decode's ``request_status`` ("Duplicate decode bootstrap room"),
        records the failure and marks the ROOM Failed (``update_status(room, Failed)``, which
        the live request of that room polls too); ``init`` returns at once (no ``BOOTSTRAP``),
        the new request fails in ``_update_handshake_waiters`` before any page is reserved, and
        its ``clear`` leaves the room alone (``_owns_bootstrap_room`` is false)."""
        s.require(self.client_rooms and self.room_guard)
        x = self.room(r)
        s.require(s.d_phase[r] == D_NEW)
        s.require(s.d_boot[r] == 0)
        s.require(self.arrived_in_order(s, r))
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
        self.publish_room(s, n, r, [s.dest[r, c] for c in range(self.pages(r))])

    def publish_room(self, s, n, r: int, pages: list) -> None:
        """The prefill instance's ``bootstrap_thread`` stores request ``r``'s ``send_metadata``
        (destination ``pages``, one per chunk) as ``transfer_infos[room][session]`` and sets
        ``update_status(room, WaitingForInput)``."""
        i, x = self.instance(r), self.room(r)
        for c in range(self.k.C):
            n.p_dst[i, x, c] = pages[c] if c < len(pages) else self.k.D
        n.p_md[i, x] = r
        n.p_status[i, x] = update_status(s.ops, s.p_status[i, x], RS_WAITING)

    def prefill_forward(self, s, n, r):
        """With client rooms the forward runs once the request's sender polls WaitingForInput:
        the ROOM's ``request_status`` on its instance, whichever request of the room published
        the destinations.  With ``prefill_complete`` it runs while the room is still
        Bootstrapping too (``can_prefill_before_bootstrap``: an optimistic prefill, the request
        parked ``pending_bootstrap``), and ``mark_prefill_complete`` marks the instance's
        ``DeferredBootstrap`` room ready: if decode's ``BOOTSTRAP`` is registered, the readiness
        message (WaitingForInput) reaches decode's ``apply_prefill_status``, which drops it for
        a room no longer in ``request_status``."""
        if not self.client_rooms:
            super().prefill_forward(s, n, r)
            return
        o = s.ops
        i, x = self.instance(r), self.room(r)
        s.require(s.p_phase[r] == P_QUEUED)
        if self.room_guard:
            s.require(o.is_in(s.p_status[i, x], (RS_BOOTSTRAPPING, RS_WAITING)))
        else:
            s.require(s.p_status[i, x] == RS_WAITING)
        if self.pending_error(r) and self.e.retire_pending_error_prefill:
            n.p_phase[r] = P_ENDED
            for pr in self.prs:
                n.poll[r, pr] = POLL_FAILED
            return
        self.allocate(s, n, r, self.send_len(r), "src_owner", "src", self.k.P, content="src_content")
        n.p_phase[r] = P_SENDING
        if self.room_guard:
            n.p_ready[i, x] = 1
            d = s.d_status[x]
            told = (s.p_ep[i, x] == 1) & (d != RS_ABSENT)
            n.d_status[x] = o.ite(told, update_status(o, d, RS_WAITING), d)

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
        if self.room_guard:
            # prefill_complete: conclude_transfer sends no Success; CommonKVSender.clear does,
            # through DeferredBootstrap.close(success=True), which deletes the room's entry
            n.p_ep[i, x] = 0
            n.p_ready[i, x] = 0

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
        pops the room's entry.  With ``prefill_complete`` a request still waiting for prefill
        (no page reserved: ``_update_handshake_waiters``) fails too, and the receiver's
        ``_clear`` first sends ``ABORT`` to its prefill instance (the room is not Success and no
        ABORT went out yet); unarmed unless the metadata was published (``init_time``), where
        the base Failed branch arms and holds."""
        if not self.client_rooms:
            super().decode_poll_failed(s, n, r)
            return
        o = s.ops
        x = self.room(r)
        s.require(self.polled(s, r) == 2)
        if self.room_guard:
            waiting = (s.d_phase[r] == D_NEW) & (s.d_boot[r] == 1)
            s.require(waiting | o.is_in(s.d_phase[r], (D_RESERVED, D_WAITING)))
        else:
            s.require(o.is_in(s.d_phase[r], (D_RESERVED, D_WAITING)))
        self.pop_transferred_polls(s, n)
        self.fail_request(s, n, r)
        if self.room_guard:
            unpublished = o.is_in(s.d_phase[r], (D_NEW, D_RESERVED))
            self.send_abort(s, n, r, send=unpublished, arm=False)
        n.d_status[x] = RS_ABSENT

    # -- the abort bookkeeping keyed by room (client rooms with aborts) -------------------------
    # decode's _deferred_abort_ack_tracker[room] holds ONE generation and the prefill ranks that
    # acked it; ``armed[r]`` reads "the room's tracker holds r's generation" and ``acked[r, pr]``
    # "and rank pr's ack for it was recorded", so at most one request of a room is armed.
    # Prefill's _deferred_ack_targets[room] is per prefill instance; Config.problems keeps the
    # requests of one room on distinct instances when aborts are on, so there it is the
    # request's own (the base p_abort).
    def send_abort(self, s, n, r: int, send=True, arm=True):
        """With client rooms and aborts ``register_deferred_abort_room(room)`` replaces the
        ROOM's tracker (``DeferredAbortAckState(generation, set())``): the generation another
        request of the room armed is gone, with its recorded acks."""
        super().send_abort(s, n, r, send, arm)
        if not self.room_acks or arm is False:
            return
        o = s.ops
        for pr in self.prs:
            n.acked[r, pr] = o.ite(arm, 0, n.acked[r, pr])
        for r2 in self.room_mates(r):
            n.armed[r2] = o.ite(arm, 0, n.armed[r2])
            for pr in self.prs:
                n.acked[r2, pr] = o.ite(arm, 0, n.acked[r2, pr])

    def release_safe(self, s, r: int):
        """With client rooms and aborts ``resolve_deferred_releases`` asks
        ``is_abort_release_safe(req.bootstrap_room, required_acks)``: the ROOM's tracker, whichever
        request of the room armed it (a held entry does not remember its generation)."""
        if not self.room_acks:
            return super().release_safe(s, r)
        o = s.ops
        per_rank = []
        for d in range(self.k.DR):
            linked = self.k.prefill_ranks_of(d)
            need = len(linked) if self.e.required_acks == "every_prefill_rank" else 1
            per_rank.append(o.any_((s.armed[r2] == 1) & (o.count(s.acked[r2, pr] == 1 for pr in linked) >= need)
                                   for r2 in [r, *self.room_mates(r)]))
        return self.combine(o, per_rank, self.e.ready_combine)

    def release_decode(self, s, n, r: int, when=True):
        """With client rooms and aborts the release of a HELD request (``_do_release``) calls
        ``clear_deferred_abort_state(room)``: the room's tracker goes, also when another request
        of the room armed it (a commit's or an immediate release does not touch it)."""
        super().release_decode(s, n, r, when)
        if not self.room_acks:
            return
        o = s.ops
        gone = s.d_phase[r] == D_HELD if when is True else o.and_(when, s.d_phase[r] == D_HELD)
        for r2 in self.room_mates(r):
            n.armed[r2] = o.ite(gone, 0, n.armed[r2])
            for pr in self.prs:
                n.acked[r2, pr] = o.ite(gone, 0, n.acked[r2, pr])

    def decode_abort(self, s, n, r):
        """With client rooms ``CommonKVReceiver.abort`` marks the ROOM Failed on decode
        (``update_status(room, Failed)``).  A request in the transfer queue then takes
        ``pop_transferred``'s Failed branch, which first polls every queued receiver (each
        caches the room's status: another request of the room caches Failed; a receiver with
        nothing cached whose room is gone raises ``KeyError``, no step) and whose
        ``failure_exception`` clears the receiver, popping the room's ``request_status``; one
        in the prealloc queue is cleared by ``pop_preallocated``'s abort scan (popping it too);
        a request that never reached decode has no receiver.  A receiver that already cached
        the room's Failed (another request's abort) records no "Aborted by AbortReq." of its
        own, so the client gets the Failed branch's error, not an abort."""
        super().decode_abort(s, n, r)
        if not self.room_acks:
            return
        o = s.ops
        x = self.room(r)
        n.outcome[r] = o.ite(s.d_concl[r] == 2, OUT_ERROR, n.outcome[r])
        failed = update_status(o, s.d_status[x], RS_FAILED)
        queued = s.d_phase[r] == D_WAITING
        for r2 in range(self.k.R):
            if r2 == r:
                continue
            st = failed if self.room(r2) == x else s.d_status[self.room(r2)]
            polls = queued & (s.d_phase[r2] == D_WAITING) & (s.d_concl[r2] == 0)
            s.require(~polls | (st != RS_ABSENT))
            n.d_concl[r2] = o.ite(polls, o.ite(st == RS_SUCCESS, 1, o.ite(st == RS_FAILED, 2, 0)), s.d_concl[r2])
        n.d_status[x] = o.ite(s.d_phase[r] != D_NEW, RS_ABSENT, s.d_status[x])

    def prefill_handle_abort(self, s, n, r, pr):
        """With client rooms ``_handle_deferred_abort_notification`` marks the ROOM Failed on
        the instance when it is active (present, not Success)."""
        super().prefill_handle_abort(s, n, r, pr)
        if not self.client_rooms:
            return
        o = s.ops
        i, x = self.instance(r), self.room(r)
        cur = s.p_status[i, x]
        n.p_status[i, x] = o.ite(cur == RS_SUCCESS, cur, update_status(o, cur, RS_FAILED))
        if self.room_guard:
            # prefill_complete: _handle_bootstrap_message sees the ABORT first,
            # DeferredBootstrap.fail(room): with decode's endpoint registered the Failed
            # message goes to decode, whose apply_prefill_status drops it for a cleared room
            d = s.d_status[x]
            told = (s.p_ep[i, x] == 1) & (d != RS_ABSENT)
            n.d_status[x] = o.ite(told, update_status(o, d, RS_FAILED), d)

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
