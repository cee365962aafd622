"""The claims of the PD protocol: invariants (named as what must be true) and witnesses.

Each invariant says which hazard it guards against.  Witnesses are states that must be
reachable, so that a verified invariant is never vacuous (an invariant that holds because
nothing ever happens would fail its scenario's witnesses).
"""

from __future__ import annotations

from .framework import invariant, witness
from .pd_state import (
    D_ENDED, D_HELD, D_RESERVED, D_WAITING, FREE, OUT_ABORTED, OUT_ERROR, OUT_SUCCESS, P_ENDED, P_SENDING,
    P_STOPPED, POLL_SUCCESS, READ_CROSS_TENANT, READ_OWN, UNWRITTEN, WR_FLIGHT, WR_LANDED,
)

__all__ = ["PdClaims"]


class PdClaims:
    """Mixin of :class:`~kvproof.spec.pd.PdProtocol`: its invariants and witnesses."""

    # -- isolation ---------------------------------------------------------------------------
    @invariant
    def decode_reads_only_own_pages(self, s):
        """Decode reads only pages written for this request: every page a request read held
        its own KV.  Broken by H1 (placeholder handoff reads stale pages), H2 (a late write
        lands in the next owner's page), H8 (a reused source page sends another's KV)."""
        o = s.ops
        return o.all_(o.le(s.read[r], READ_OWN) for r in range(self.k.R))

    @invariant
    def no_cross_tenant_read(self, s):
        """No response is computed from another tenant's KV (the incident's 155 responses)."""
        o = s.ops
        return o.all_(o.ne(s.read[r], READ_CROSS_TENANT) for r in range(self.k.R))

    @invariant
    def no_write_after_release(self, s):
        """A page is never released while a write to it is in flight: every in-flight write's
        destination is still owned by the request that issued it.  Broken by H2 (immediate
        release on abort), H3 (receipt ack taken as drain), H6 (timeout shorter than the write
        latency), H7 (failure releases at once)."""
        o = s.ops
        return o.all_(
            o.implies(o.ge(s.wr[r, c], WR_FLIGHT), o.eq(s.owner[s.dest[r, c]], r + 1))
            for r in range(self.k.R)
            for c in range(self.send_len(r))
        )

    @invariant
    def no_source_free_while_read(self, s):
        """A prefill source page is never freed while a write still reads it: every in-flight
        write's source page is still owned by its request.  Broken by H8 (prefill frees source
        pages on failure or abort, reuses them for another request, and the transfer sends
        that request's KV)."""
        o = s.ops
        return o.all_(
            o.implies(o.ge(s.wr[r, c], WR_FLIGHT), o.eq(s.src_owner[s.src[r, c]], r + 1))
            for r in range(self.k.R)
            for c in range(self.send_len(r))
        )

    # -- page accounting -----------------------------------------------------------------------
    @invariant
    def exclusive_ownership(self, s):
        """Every page in a live reservation is owned by that request alone: no page is in two
        live reservations (an allocator that hands out a reserved page breaks it)."""
        o = s.ops
        return o.all_(
            o.implies(
                o.is_in(s.d_phase[r], (D_RESERVED, D_WAITING, D_HELD)),
                o.all_(o.eq(s.owner[s.dest[r, c]], r + 1) for c in range(self.pages(r))),
            )
            for r in range(self.k.R)
        )

    @invariant
    def pages_conserved(self, s):
        """Every page is free or in the reservation of a live request: nothing leaks (a release
        that forgets a page, or frees a page twice into someone else's reservation, breaks it).
        Holds for the decode pool and the prefill source pool."""
        o = s.ops
        k = self.k

        def decode_ok(p):
            return o.or_(
                o.eq(s.owner[p], FREE),
                *[
                    o.and_(
                        o.eq(s.owner[p], r + 1),
                        o.is_in(s.d_phase[r], (D_RESERVED, D_WAITING, D_HELD)),
                        o.any_(o.eq(s.dest[r, c], p) for c in range(self.pages(r))),
                    )
                    for r in range(k.R)
                ],
            )

        def source_ok(q):
            return o.or_(
                o.eq(s.src_owner[q], FREE),
                *[
                    o.and_(
                        o.eq(s.src_owner[q], r + 1),
                        o.is_in(s.p_phase[r], (P_SENDING, P_STOPPED)),
                        o.any_(o.eq(s.src[r, c], q) for c in range(self.send_len(r))),
                    )
                    for r in range(k.R)
                ],
            )

        return o.and_(o.all_(decode_ok(p) for p in range(k.D)), o.all_(source_ok(q) for q in range(k.P)))

    # -- admission -------------------------------------------------------------------------------
    @invariant
    def rejected_never_succeeds(self, s):
        """A request that fails ``validate_input_length`` never returns success (H1: before PR
        36988 the placeholder's handoff reported success and discarded the pending error)."""
        o = s.ops
        return o.all_(
            o.ne(s.outcome[r], OUT_SUCCESS) for r in range(self.k.R) if self.over_long(r)
        )

    @invariant
    def rejected_never_reserves(self, s):
        """A rejected request never holds a decode page (efficiency: PR 38935 rejects before any
        reservation; PR 36988 alone stops the stale read but still reserves)."""
        o = s.ops
        return o.all_(
            o.ne(s.owner[p], r + 1)
            for r in range(self.k.R)
            if self.over_long(r)
            for p in range(self.k.D)
        )

    @invariant
    def success_implies_full_coverage(self, s):
        """A successful request had every reserved page written by its own transfer (PR 38704's
        transferred-length check; H1 breaks it with a one-page placeholder)."""
        o = s.ops
        return o.all_(
            o.implies(
                o.eq(s.outcome[r], OUT_SUCCESS),
                o.all_(o.eq(s.wr[r, c], WR_LANDED) for c in range(self.pages(r))),
            )
            for r in range(self.k.R)
        )

    # -- bounded liveness --------------------------------------------------------------------------
    @invariant(at="quiescent")
    def quiescent_holds_nothing(self, s):
        """Where nothing can move any more, every request has ended on both sides and no page
        is held (H4 with H6: a lost drain ack without a timeout holds pages forever; H13)."""
        o = s.ops
        k = self.k
        return o.and_(
            o.all_(o.eq(s.owner[p], FREE) for p in range(k.D)),
            o.all_(o.eq(s.src_owner[q], FREE) for q in range(k.P)),
            o.all_(o.and_(o.eq(s.d_phase[r], D_ENDED), o.eq(s.p_phase[r], P_ENDED)) for r in range(k.R)),
        )

    # -- witnesses -------------------------------------------------------------------------------
    @witness
    def sometimes_request_succeeds(self, s):
        """Some request completes with success (reads are actually exercised)."""
        o = s.ops
        return o.any_(o.eq(s.outcome[r], OUT_SUCCESS) for r in range(self.k.R))

    @witness
    def sometimes_abort_mid_transfer(self, s):
        """A request is aborted while one of its writes is still in flight."""
        o = s.ops
        return o.any_(
            o.and_(o.eq(s.outcome[r], OUT_ABORTED), self._writes_in_flight(s, r))
            for r in range(self.k.R)
        )

    @witness
    def sometimes_timeout_release(self, s):
        """A held request reaches its deadline, so the timeout release can fire."""
        o = s.ops
        return o.any_(
            o.and_(o.eq(s.d_phase[r], D_HELD), o.ge(s.hold[r], self.e.timeout))
            for r in range(self.k.R)
        )

    @witness
    def sometimes_checksum_mismatch(self, s):
        """A transfer concluded Success but the request failed: the checksum caught corruption."""
        o = s.ops
        return o.any_(
            o.and_(o.eq(s.poll[r], POLL_SUCCESS), o.eq(s.outcome[r], OUT_ERROR)) for r in range(self.k.R)
        )

    @witness
    def sometimes_stale_page_reserved(self, s):
        """A request reserves a page that still holds an earlier request's KV (page reuse)."""
        o = s.ops
        return o.any_(
            o.and_(
                o.ne(s.owner[p], FREE),
                o.ne(s.content[p], UNWRITTEN),
                o.ne(s.content[p], s.owner[p]),
            )
            for p in range(self.k.D)
        )
