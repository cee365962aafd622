"""The claims of the PD protocol: invariants (named as what must be true), witnesses, and
liveness claims.

Each invariant says which hazard it guards against.  Witnesses are states that must be
reachable, so that a verified invariant is never vacuous.  Liveness claims are checked on the
whole state graph under weak fairness of the actions the engine runs eventually (``fair=True``
in :mod:`.pd`); the bounded form, :meth:`quiescent_holds_nothing`, is checked by every engine.
"""

from __future__ import annotations

from kvproof.model.framework import invariant, liveness, witness
from kvproof.model.lifting import indices
from kvproof.spec.sglang.state import (
    ACK_NONE, D_ENDED, D_HELD, D_LIVE, D_NEW, FREE, OUT_ABORTED, OUT_ERROR, OUT_SUCCESS, P_ENDED, P_NEW, P_QUEUED, P_SENDING,
    P_STOPPED, PAB_ACKED, POLL_SUCCESS, READ_CROSS_TENANT, READ_OWN, UNWRITTEN, WR_FLIGHT, WR_LANDED, owned_by,
)

__all__ = ["PdClaims"]


class PdClaims:
    """Mixin of :class:`~kvproof.spec.sglang.protocol.PdProtocol`: its invariants, witnesses and liveness."""

    def _chunk_writes(self, r: int):
        """(write stream, chunk) of every write ``r`` may issue."""
        return [(w, c) for w in range(self.k.S) for c in indices(self.send_len(r))]

    # -- isolation ---------------------------------------------------------------------------
    @invariant
    def decode_reads_only_own_pages(self, s):
        """Decode reads only pages (every shard, and the aux data) written for this request.
        Broken by H1 (placeholder handoff reads stale pages), H2 (a late write lands in the next
        owner's page), H8 (a reused source page sends another's KV) and a write landing after
        the checksum check."""
        o = s.ops
        return o.all_(s.read[r] <= READ_OWN for r in self.k.req)

    @invariant
    def no_cross_tenant_read(self, s):
        """No response is computed from another tenant's KV (the incident's 155 responses)."""
        o = s.ops
        return o.all_(s.read[r] != READ_CROSS_TENANT for r in self.k.req)

    @invariant
    def no_write_after_release(self, s):
        """A page or aux slot is never released while a write to it is in flight: every
        in-flight write's destination is still owned by the request that issued it.  Broken by
        H2 (immediate release on abort), H3 (receipt ack taken as drain), H6 (timeout shorter
        than the write latency), H7 (failure releases at once), partial acks across ranks, stale
        acks of a reused room, and an aux slot freed before its write.  It covers every write
        the protocol declares in write_targets, a variant's own writes included."""
        o = s.ops
        return o.all_(
            o.implies(t.in_flight, getattr(s, t.owner)[t.dest] == owned_by(t.request))
            for t in self.write_targets(s)
        )

    @invariant
    def no_source_free_while_read(self, s):
        """A prefill source page is never freed while a write still reads it: every in-flight
        write's source page is still owned by its request.  Broken by H8 (prefill frees source
        pages on failure or abort, reuses them for another request, and the transfer sends that
        request's KV)."""
        o = s.ops
        return o.all_(
            o.implies(s.wr[r, w, c] >= WR_FLIGHT, s.src_owner[s.src[r, c]] == owned_by(r))
            for r in self.k.req
            for w, c in self._chunk_writes(r)
        )

    @invariant
    def release_justified(self, s):
        """Every release of a page or aux slot that a write may still target is justified by a
        drain proof, not by a deadline: once a request no longer owns one of its write targets
        (every target ``reserved_targets`` names: by default what ``write_targets`` declares, a
        variant's own included) and a write may
        target them - prefill ran its forward (the transfer may start), or may still run it
        (alive, and bootstrap done: every decode rank published its metadata,
        ``send_metadata``) - every
        prefill rank that has not concluded ``KVPoll.Success`` (which it reaches only after its
        writes landed) has drained and sent its drain ack for this request
        (``_maybe_ack_drained_abort``; ``p_abort`` is reset with the room's next request, so
        the ack is this generation's).  The hazard is the H6 path: ``resolve_deferred_releases``
        "releasing anyway" past ``SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT``
        (or a heartbeat deadline), which is safe only under a timing assumption; so it is
        violated wherever a deadline release is reachable, even where ``no_write_after_release``
        holds, and wherever a release needs no ack at all (H2's immediate release, H7's release
        on Failed, H3's receipt ack, a partial or stale ack, an aux slot freed before its
        write).  Checked on the state after the release: the release clears decode's own ack
        record, the prefill rank's ABORT state stays."""
        o = s.ops
        k = self.k
        targets: dict[int, list] = {r: [] for r in range(k.R)}
        for t in self.reserved_targets(s):
            targets[t.request].append(t)
        parts = []
        for r in range(k.R):
            released = o.any_(getattr(s, t.owner)[t.dest] != owned_by(r) for t in targets[r])
            if self.release_needs_reservation():
                released = o.and_(self.has_reserved(s, r), released)
            # a write may target r's memory once prefill ran its forward (source pages allocated),
            # or while it still may: alive, not ended, and every decode rank published
            forwarded = s.src[r, 0] != k.P
            may_forward = o.and_(self.prefill_alive(s), o.is_in(s.p_phase[r], (P_NEW, P_QUEUED)),
                                 *[s.meta[r, d] == 1 for d in range(k.DR)])
            writable = o.or_(forwarded, may_forward)
            for pr in self.prs:
                unproved = (s.poll[r, pr] != POLL_SUCCESS) & (s.p_abort[r, pr] != PAB_ACKED)
                parts.append(o.not_(o.and_(released, writable, unproved)))
        return o.all_(parts)

    # -- page accounting -----------------------------------------------------------------------
    @invariant
    def exclusive_ownership(self, s):
        """Every page (and aux slot) in a live reservation is owned by that request alone: no
        page is in two live reservations (an allocator that hands out a reserved page breaks
        it)."""
        o = s.ops

        def holds_all(r):
            parts = [s.owner[s.dest[r, c]] == owned_by(r) for c in indices(self.pages(r))]
            if self.k.M and self.e.aux_held_with_pages:
                parts.append(s.aux_owner[s.aux[r]] == owned_by(r))
            return o.all_(parts)

        return o.all_(o.implies(o.is_in(s.d_phase[r], D_LIVE), holds_all(r)) for r in self.k.req)

    @invariant
    def pages_conserved(self, s):
        """Every page is free or in the reservation of a live request: nothing leaks (a release
        that forgets a page, or frees a page twice into someone else's reservation, breaks it).
        Holds for the decode pool, the prefill source pool and the aux slots."""
        o = s.ops
        k = self.k

        def pool_ok(owner, index, live_phases, phase, table, count):
            return o.or_(
                owner == FREE,
                *[
                    o.and_(
                        owner == owned_by(r),
                        o.is_in(getattr(s, phase)[r], live_phases),
                        o.any_(table(r, c) == index for c in range(count(r))),
                    )
                    for r in range(k.R)
                ],
            )

        parts = [pool_ok(s.owner[p], p, D_LIVE, "d_phase", lambda r, c: s.dest[r, c], self.pages)
                 for p in range(k.D)]
        parts += [pool_ok(s.src_owner[q], q, (P_SENDING, P_STOPPED), "p_phase", lambda r, c: s.src[r, c],
                          self.send_len) for q in range(k.P)]
        if k.M:
            parts += [pool_ok(s.aux_owner[m], m, D_LIVE, "d_phase", lambda r, c: s.aux[r], lambda r: 1)
                      for m in range(k.M)]
        return o.all_(parts)

    # -- admission -------------------------------------------------------------------------------
    @invariant
    def rejected_never_succeeds(self, s):
        """A request that fails ``validate_input_length`` never returns success (H1: before PR
        36988 the placeholder's handoff reported success and discarded the pending error)."""
        o = s.ops
        return o.all_(
            s.outcome[r] != OUT_SUCCESS for r in range(self.k.R) if self.over_long(r)
        )

    @invariant
    def rejected_never_reserves(self, s):
        """A rejected request never holds a decode page (efficiency: PR 38935 rejects before any
        reservation; PR 36988 alone stops the stale read but still reserves)."""
        o = s.ops
        return o.all_(
            s.owner[p] != owned_by(r)
            for r in range(self.k.R)
            if self.over_long(r)
            for p in range(self.k.D)
        )

    @invariant
    def success_implies_full_coverage(self, s):
        """A successful request had every reserved page written by every write stream (prefill
        rank and layer) of its own transfer (PR 38704's transferred-length check; H1 breaks it with a one-page
        placeholder)."""
        o = s.ops
        return o.all_(
            o.implies(
                s.outcome[r] == OUT_SUCCESS,
                o.all_(s.wr[r, w, c] == WR_LANDED for w in range(self.k.S) for c in range(self.pages(r))),
            )
            for r in range(self.k.R)
        )

    # -- liveness ----------------------------------------------------------------------------------
    def _prefill_done(self, s, r):
        ended = s.p_phase[r] == P_ENDED
        return ended | (s.p_dead == 1) if self.e.peer_death else ended

    @invariant(at="quiescent")
    def quiescent_holds_nothing(self, s):
        """Where nothing can move any more, every request has ended (on prefill too, unless the
        prefill died) and no page or slot is held (H4 with H6: a lost drain ack without a
        timeout holds pages forever; H13).  The bounded form of the liveness claims below."""
        o = s.ops
        k = self.k
        parts = [s.owner[p] == FREE for p in range(k.D)]
        parts += [s.aux_owner[m] == FREE for m in range(k.M)]
        parts += [s.d_phase[r] == D_ENDED for r in range(k.R)]
        parts += [self._prefill_done(s, r) for r in range(k.R)]
        if not self.e.peer_death:
            parts += [s.src_owner[q] == FREE for q in range(k.P)]
        return o.all_(parts)

    @liveness
    def held_pages_are_released(self, s):
        """Every held decode page (and aux slot) is eventually released, on every fair path:
        pending while the page is owned.  Broken by a hold that only a lost or never-sent ack
        could end (H4), by hold-forever after a timeout when prefill died and its death goes
        undetected (H6), and by an unpropagated prefill abort (H13)."""
        out = [(f"p{p} held", s.owner[p] != FREE) for p in range(self.k.D)]
        out += [(f"m{m} held", s.aux_owner[m] != FREE) for m in range(self.k.M)]
        return out

    @liveness
    def requests_end(self, s):
        """Every request eventually ends on decode (the client gets an answer), on every fair
        path: pending while decode has not ended it."""
        return [(f"R{r} unanswered", s.d_phase[r] != D_ENDED) for r in range(self.k.R)]

    # -- witnesses -------------------------------------------------------------------------------
    @witness
    def sometimes_request_succeeds(self, s):
        """Some request completes with success (reads are actually exercised)."""
        o = s.ops
        return o.any_(s.outcome[r] == OUT_SUCCESS for r in range(self.k.R))

    @witness
    def sometimes_abort_mid_transfer(self, s):
        """A request is aborted while one of its writes is still in flight."""
        o = s.ops
        return o.any_(
            (s.outcome[r] == OUT_ABORTED) & self.writes_in_flight(s, r)
            for r in range(self.k.R)
        )

    @witness
    def sometimes_timeout_release(self, s):
        """A held request reaches its deadline, so the timeout release (or retry) can fire."""
        o = s.ops
        return o.any_(
            (s.d_phase[r] == D_HELD) & (s.hold[r] >= self.e.timeout)
            for r in range(self.k.R)
        )

    @witness
    def sometimes_checksum_mismatch(self, s):
        """Every prefill rank concluded Success but the request failed: the checksum caught
        corruption."""
        o = s.ops
        return o.any_(
            o.all_(s.poll[r, pr] == POLL_SUCCESS for pr in range(self.k.PR)) & (s.outcome[r] == OUT_ERROR)
            for r in range(self.k.R)
        )

    @witness
    def sometimes_stale_page_reserved(self, s):
        """A request reserves a page that still holds an earlier request's KV (page reuse)."""
        o = s.ops
        return o.any_(
            o.and_(
                s.owner[p] != FREE,
                s.content[0, p] != UNWRITTEN,
                s.content[0, p] != s.owner[p],
            )
            for p in range(self.k.D)
        )

    @witness
    def sometimes_partial_acks(self, s):
        """A held request has a drain ack from some prefill rank but not from all."""
        o = s.ops
        return o.any_(
            o.and_(
                s.d_phase[r] == D_HELD,
                o.any_(s.acked[r, pr] == 1 for pr in range(self.k.PR)),
                ~o.all_(s.acked[r, pr] == 1 for pr in range(self.k.PR)),
            )
            for r in range(self.k.R)
        )

    @witness
    def sometimes_stale_ack_meets_next_request(self, s):
        """An ack of a room's earlier request is still on its way when the room's next request
        is held (room reuse with a late message)."""
        o = s.ops
        if not self.e.request_streams:
            return o.const(False)
        return o.any_(
            o.and_(s.d_phase[r] == D_HELD, s.ack[r, pr] != ACK_NONE, s.ack_gen[r, pr] != s.gen[r])
            for r in range(self.k.R)
            for pr in range(self.k.PR)
        )

    @witness
    def sometimes_prefill_dies_while_held(self, s):
        """The prefill dies while decode holds a request's pages for it."""
        o = s.ops
        if not self.e.peer_death:
            return o.const(False)
        return (s.p_dead == 1) & o.any_(s.d_phase[r] == D_HELD for r in range(self.k.R))
