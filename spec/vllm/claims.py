"""The claims of vLLM's PD protocol (pull and push mode): invariants (named as SGLang's where they mean the
same), a quiescence claim, and witnesses so that no verified claim is vacuous.

Decode's READ (push: prefill's WRITE) writes decode's block and reads prefill's block, so
SGLang's "write in flight" is here "transfer posted, its data not yet moved" (``rd == posted``).
"""

from __future__ import annotations

from kvproof.model.framework import invariant, liveness, witness
from kvproof.spec.vllm.state import (
    D_ENDED, D_HELD, D_LIVE, D_READING, D_TRACKED, FREE, OUT_ABORTED, OUT_ERROR, OUT_SUCCESS, P_EXPIRED, P_FREED, P_HELD,
    P_NEW, P_SENT, RD_DONE, RD_FAILED, RD_NONE, RD_POSTED, RD_RETAINED, RD_TAKEN, READ_CROSS_TENANT, READ_OWN, UNWRITTEN,
)

__all__ = ["VllmClaims"]


class VllmClaims:
    """Mixin of :class:`~kvproof.spec.vllm.protocol.VllmPd`: its claims."""

    def xfers(self, s, r: int) -> list:
        """The states of ``r``'s transfers: its READ or WRITE (``rd``), or with per-rank WRITEs
        (fan-in, V6) every prefill rank's (``wr[r, w]``)."""
        if self.k.ranked:
            return [s.wr[r, w] for w in range(self.k.F)]
        return [s.rd[r]]

    def posted(self, s, r: int):
        """Some transfer of ``r`` is posted and has not moved its data yet."""
        o = s.ops
        if not self.k.ranked:
            return o.eq(s.rd[r], RD_POSTED)
        if self.k.release_may_fail:  # V8's third path: a failed READ's unreleased DMA may still move data
            return o.any_(o.is_in(x, (RD_POSTED, RD_RETAINED)) for x in self.xfers(s, r))
        return o.any_(o.eq(x, RD_POSTED) for x in self.xfers(s, r))

    # -- isolation ---------------------------------------------------------------------------------
    @invariant
    def decode_reads_only_own_pages(self, s):
        """Decode computes only on KV written for this request (a replay's: for the prompt of the
        request it replays, V9).  Broken by V1 (the READ took a
        block prefill freed on lease expiry and reused; push: V7, the WRITE did), V4 (an aborted request's READ
        landed in a block decode had freed and given to another request), V15 (a finished request's stale GPU
        write landed in a block reallocated to a request loading over NIXL) and V11 (the request's prefix KV
        landed in its suffix slot)."""
        o = s.ops
        return o.all_(o.le(s.read[r], READ_OWN) for r in self.reqs)

    @invariant
    def no_cross_tenant_read(self, s):
        """No response is computed from another tenant's KV (aws-do-eks#84: 8 of 42 requests
        served on freed blocks with HTTP 200)."""
        o = s.ops
        return o.all_(o.ne(s.read[r], READ_CROSS_TENANT) for r in self.reqs)

    @invariant
    def no_write_after_release(self, s):
        """A decode block is never freed while a READ still moves data into it: every posted
        READ's destination is still owned by its request (V4: before #32255 an abort in
        ``WAITING_FOR_REMOTE_KVS`` freed it at once).  With async scheduling, likewise while a
        GPU step in flight still writes it (V15: before #45357 a finished request's block went
        back to the pool with step N+1 still writing it)."""
        o = s.ops
        parts = [o.implies(self.posted(s, r), o.eq(s.owner[s.dest[r]], r + 1)) for r in self.reqs]
        if self.e.async_scheduling:  # V15: nor while a GPU step in flight still writes it
            parts += [o.implies(o.eq(s.inflight[r], 1), o.eq(s.owner[s.dest[r]], r + 1)) for r in self.reqs]
        return o.all_(parts)

    @invariant
    def no_source_free_while_read(self, s):
        """A prefill block is never freed while a READ (push: a WRITE) still reads it: every
        posted transfer's source is still owned by its request.  Broken by V1 (lease expiry
        while decode has not read yet or is reading), V7 (push: lease expiry with the WRITE
        outstanding), V3 (an abort of the finished request, before #25067) and V9 (a replayed
        reference READs a block its request no longer holds; a replay's source belongs to the
        request it replays)."""
        o = s.ops
        return o.all_(o.implies(self.posted(s, r), o.eq(s.src_owner[s.src[r]], self.origin(r) + 1))
                      for r in self.reqs)

    # -- block accounting --------------------------------------------------------------------------
    @invariant
    def exclusive_ownership(self, s):
        """Every live request owns its own blocks: a decode request holding blocks owns its
        destination, a prefill request under its lease owns its source."""
        o = s.ops
        return o.all_(
            o.and_(o.implies(o.is_in(s.d_phase[r], D_LIVE), o.eq(s.owner[s.dest[r]], r + 1)),
                   o.implies(o.eq(s.p_phase[r], P_HELD), o.eq(s.src_owner[s.src[r]], r + 1)))
            for r in self.reqs)

    @invariant
    def pages_conserved(self, s):
        """Every block is free or held by a live request that refers to it, in both pools:
        nothing leaks and nothing is freed into another request's hands."""
        o = s.ops
        k = self.k
        def live(r):  # with async scheduling a finished request's block waits in deferred_frees (V15)
            held = o.is_in(s.d_phase[r], D_LIVE)
            return o.or_(held, o.eq(s.inflight[r], 1)) if self.e.async_scheduling else held

        parts = [o.or_(o.eq(s.owner[b], FREE),
                       o.any_(o.and_(o.eq(s.owner[b], r + 1), live(r), o.eq(s.dest[r], b))
                              for r in self.reqs))
                 for b in k.block]
        def refers(r, q):  # V11: a request's prefix block too
            own = o.eq(s.src[r], q)
            return o.or_(own, o.eq(s.src_prefix[r], q)) if k.prefix else own

        parts += [o.or_(o.eq(s.src_owner[q], FREE),
                        o.any_(o.and_(o.eq(s.src_owner[q], r + 1), o.eq(s.p_phase[r], P_HELD), refers(r, q))
                               for r in self.reqs))
                  for q in k.pblock]
        return o.all_(parts)

    @invariant(at="quiescent")
    def quiescent_holds_nothing(self, s):
        """Where nothing can move any more, every request ended on both sides and every block
        of both pools is free."""
        o = s.ops
        parts = [o.eq(s.d_phase[r], D_ENDED) for r in self.reqs]
        parts += [o.is_in(s.p_phase[r], P_FREED) for r in self.reqs if not self.is_replay(r)]  # a replay: never prefilled
        parts += [o.eq(s.owner[b], FREE) for b in range(self.k.D)]
        parts += [o.eq(s.src_owner[q], FREE) for q in range(self.k.P)]
        return o.all_(parts)

    # -- liveness ------------------------------------------------------------------------------------
    @liveness
    def held_pages_are_released(self, s):
        """Every held block (either pool) is eventually freed, on every fair path."""
        o = s.ops
        out = [(f"p{b} held", o.ne(s.owner[b], FREE)) for b in range(self.k.D)]
        out += [(f"q{q} held", o.ne(s.src_owner[q], FREE)) for q in range(self.k.P)]
        return out

    @liveness
    def requests_end(self, s):
        """Every request eventually ends on decode, on every fair path."""
        o = s.ops
        return [(f"R{r} unanswered", o.ne(s.d_phase[r], D_ENDED)) for r in self.reqs]

    @liveness
    def expired_leases_are_reaped(self, s):
        """V2 (#58222): every lease that ran out is eventually reaped, on every fair path: a
        request prefill still holds (in ``_reqs_to_send``) with no lease left does not stay so
        forever.  Broken by the reaper before #58222, which stops at the first live entry while
        a heartbeated head lives."""
        o = s.ops
        return [(f"R{r} expired, not reaped", o.and_(o.eq(s.p_phase[r], P_HELD), o.eq(s.lease[r], 0)))
                for r in self.reqs]

    # -- witnesses -------------------------------------------------------------------------------------
    @witness
    def sometimes_request_succeeds(self, s):
        """Some request is served (reads are actually exercised)."""
        o = s.ops
        return o.any_(o.eq(s.outcome[r], OUT_SUCCESS) for r in self.reqs)

    @witness
    def sometimes_lease_expires(self, s):
        """Prefill reaps an expired lease (``num_kv_expired_reqs`` counts it)."""
        o = s.ops
        return o.any_(o.eq(s.p_phase[r], P_EXPIRED) for r in self.reqs)

    @witness
    def sometimes_lease_expires_before_read(self, s):
        """Prefill's lease expired while decode had not finished loading: decode holds the
        request with its transfer (READ, or push's WRITE) not yet posted or not yet moved."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.p_phase[r], P_EXPIRED), o.is_in(s.d_phase[r], (*D_TRACKED, D_HELD)),
                             o.any_(o.is_in(x, (RD_NONE, RD_POSTED)) for x in self.xfers(s, r)))
                      for r in self.reqs)

    @witness
    def sometimes_notification_after_expiry(self, s):
        """A completion notification reaches prefill after the lease expired
        (``num_notifications_after_expiry``) while decode serves the request anyway."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.late[r], 1), o.eq(s.outcome[r], OUT_SUCCESS)) for r in self.reqs)

    @witness
    def sometimes_source_block_reused(self, s):
        """A prefill block freed by one request holds another request's KV (block reuse)."""
        o = s.ops
        return o.any_(o.and_(o.ne(s.src_owner[q], FREE), o.ne(s.src_content[q], UNWRITTEN),
                             o.any_(o.and_(o.ne(s.p_phase[r], P_NEW), o.eq(s.src[r], q), o.ne(s.src_owner[q], r + 1))
                                    for r in self.reqs))
                      for q in range(self.k.P))

    @witness
    def sometimes_abort_mid_read(self, s):
        """Decode aborts a request while its READ is still moving data."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.outcome[r], OUT_ABORTED), self.posted(s, r))
                      for r in self.reqs)

    @witness
    def sometimes_held_after_abort(self, s):
        """An aborted request's blocks are held until its READ completes (#32255)."""
        o = s.ops
        return o.any_(o.eq(s.d_phase[r], D_HELD) for r in self.reqs)

    @witness
    def sometimes_write_post_fails(self, s):
        """A prefill rank's WRITE failed to post (V6: ``_xfer_blocks``' except-branch)."""
        o = s.ops
        if not self.k.ranked or self.pull:
            return o.const(False)
        return o.any_(o.eq(s.wr[r, w], RD_FAILED) for r in self.reqs for w in range(self.k.F))

    @witness
    def sometimes_half_written_load_held(self, s):
        """V6: decode still waits for (holds) a request whose block one rank's WRITE filled with
        its part while another rank's WRITE failed to post: a count it will never reach."""
        o = s.ops
        if not self.k.ranked or self.pull:
            return o.const(False)
        F = self.k.F
        return o.any_(o.and_(o.is_in(s.d_phase[r], (D_READING, D_HELD)),
                             o.any_(o.eq(s.wr[r, w], RD_FAILED) for w in range(F)),
                             o.any_(o.eq(s.content[w, s.dest[r]], r + 1) for w in range(F)))
                      for r in self.reqs)

    @witness
    def sometimes_counts_several_notifications(self, s):
        """Decode counted a notification of one rank and waits for another's (fan-in above one)."""
        o = s.ops
        if not self.k.ranked or self.pull:
            return o.const(False)
        return o.any_(o.and_(o.gt(s.counted[r], 0), o.lt(s.counted[r], self.k.F)) for r in self.reqs)

    @witness
    def sometimes_load_fails(self, s):
        """A load ends in ``FINISHED_ERROR``: a counted ``PUSH_FAIL`` (HYPOTHETICAL #50754), or a
        failed READ reported as ``failed_recving`` (V8)."""
        o = s.ops
        if not (self.e.push_fail_notif or self.e.read_may_fail or self.e.read_post_may_fail):
            return o.const(False)
        return o.any_(o.eq(s.outcome[r], OUT_ERROR) for r in self.reqs)

    @witness
    def sometimes_replay_served(self, s):
        """V9: a request carrying replayed ``kv_transfer_params`` is served (on whatever its READ took)."""
        o = s.ops
        return o.any_(o.eq(s.outcome[r], OUT_SUCCESS) for r in self.reqs if self.is_replay(r))

    @witness
    def sometimes_replay_refused(self, s):
        """HYPOTHETICAL fail-closed V9 fix: decode refuses a reference it already admitted."""
        o = s.ops
        if not self.e.decode_refuses_replayed_params:
            return o.const(False)
        return o.any_(o.eq(s.outcome[r], OUT_ERROR) for r in self.reqs)

    @witness
    def sometimes_write_posted_after_expiry(self, s):
        """V7 deferred (#55470): a WRITE is posted (not yet moved) for a request whose lease prefill already reaped."""
        o = s.ops
        if not self.e.push_handshake_may_defer:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.rd[r], RD_POSTED), o.eq(s.p_phase[r], P_EXPIRED)) for r in self.reqs)

    @witness
    def sometimes_request_rejected(self, s):
        """Decode rejects a request before admission while prefill still holds its blocks for
        it (V12): nothing was allocated on decode (no destination block)."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.outcome[r], OUT_ABORTED), o.eq(s.dest[r], self.k.D), o.eq(s.p_phase[r], P_HELD))
                      for r in self.reqs)

    @witness
    def sometimes_rejection_frees_prefill(self, s):
        """Prefill frees the blocks of a request decode rejected before admission on a
        notification (``finished_sending``), not on the lease (V12, #41269)."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.outcome[r], OUT_ABORTED), o.eq(s.dest[r], self.k.D), o.eq(s.p_phase[r], P_SENT))
                      for r in self.reqs)

    @witness
    def sometimes_finished_under_gpu_step(self, s):
        """A request finished on decode while a GPU step in flight still writes its block (V15)."""
        o = s.ops
        if not self.e.async_scheduling:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.d_phase[r], D_ENDED), o.eq(s.inflight[r], 1)) for r in self.reqs)

    @witness
    def sometimes_block_reused_under_gpu_step(self, s):
        """Another request holds a decode block that a GPU step in flight still writes for the
        request that finished in it (V15: the block went back to the pool too early)."""
        o = s.ops
        if not self.e.async_scheduling:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.inflight[r], 1), o.ne(s.owner[s.dest[r]], FREE), o.ne(s.owner[s.dest[r]], r + 1))
                      for r in self.reqs)

    @witness
    def sometimes_suffix_slot_gets_prefix(self, s):
        """Decode's suffix block holds the request's own prefix KV: prefill's prefix block was
        paired with decode's only (suffix) slot (V11, push before #48758, #48633 row C3)."""
        o = s.ops
        if not self.k.prefix:
            return o.const(False)
        return o.any_(o.and_(o.ne(s.dest[r], self.k.D), o.eq(s.owner[s.dest[r]], r + 1),
                             o.eq(s.content[s.dest[r]], self.k.prefix_content(r)))
                      for r in self.reqs)

    # -- V13 (#54714 -> #56640) ------------------------------------------------------------------------
    @witness
    def sometimes_full_hit_frees_prefill(self, s):
        """V13: prefill frees a request's block on the notify-only notification of decode's full
        local prefix hit (``_read_blocks``' ``send_notif``; no READ was posted)."""
        o = s.ops
        return o.any_(o.eq(s.p_phase[r], P_SENT) for r in self.reqs
                      if self.is_cached(r)) if any(self.k.cached) else o.const(False)

    @witness
    def sometimes_full_hit_served(self, s):
        """V13: a request decode had wholly in its local prefix cache is served on its own KV
        (its notify-only load was reported in ``finished_recving``: #56640)."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.outcome[r], OUT_SUCCESS), o.eq(s.read[r], READ_OWN)) for r in self.reqs
                      if self.is_cached(r)) if any(self.k.cached) else o.const(False)

    @witness
    def sometimes_full_hit_parked(self, s):
        """V13: a full local hit sits in ``WAITING_FOR_REMOTE_KVS`` holding its decode block after
        its worker took the notify-only path (for a step with #56640, forever before it)."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.d_phase[r], D_READING), o.eq(s.owner[s.dest[r]], r + 1)) for r in self.reqs
                      if self.is_cached(r)) if any(self.k.cached) else o.const(False)

    # -- V16 (#36958) ------------------------------------------------------------------------------------
    @witness
    def sometimes_mla_rank_reports(self, s):
        """V16: prefill's rank 1 counted decode's MLA notify-only notification (``finished_sending``
        on that rank: #36958's request id)."""
        o = s.ops
        if not self.k.mla:
            return o.const(False)
        return o.any_(o.eq(s.r1_sent[r], 1) for r in self.reqs)

    @witness
    def sometimes_mla_notif_unrecognized(self, s):
        """V16 before #36958: prefill's rank 1 dropped the MLA notify-only notification as one for
        an unrecognized request while prefill still holds the request."""
        o = s.ops
        if not self.k.mla:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.late[r], 1), o.eq(s.p_phase[r], P_HELD)) for r in self.reqs)

    @witness
    def sometimes_expired_lease_behind_live_head(self, s):
        """V2 (#58222): an expired lease sits behind a live one in ``_reqs_to_send``'s insertion
        order (an earlier request prefill still holds has lease left, e.g. heartbeated): the
        order a heartbeat breaks."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.p_phase[r], P_HELD), o.eq(s.lease[r], 0),
                             o.any_(o.and_(o.eq(s.p_phase[x], P_HELD), o.gt(s.lease[x], 0)) for x in range(r)))
                      for r in self.reqs)

    @witness
    def sometimes_read_hangs(self, s):
        """A READ hung (``read_may_hang``) while decode still loads the request and heartbeats it."""
        o = s.ops
        if not self.e.read_may_hang:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.hung[r], 1), o.eq(s.d_phase[r], D_READING)) for r in self.reqs)

    @witness
    def sometimes_turn2_read_declined(self, s):
        """V14 with #47021: the reader declined a turn-2 READ whose deadline (nearly) passed
        (``FINISHED_ERROR``), while the holder still held the block or had reaped it."""
        o = s.ops
        if not self.e.turn2_read:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.outcome[r], OUT_ERROR), o.eq(s.rd[r], RD_NONE)) for r in self.reqs)
    # -- V8: per-rank READs, a READ that fails (#56104) --------------------------------------------
    @witness
    def sometimes_read_fails(self, s):
        """V8: one of a request's sibling READs failed (``check_xfer_state`` returned an error)."""
        o = s.ops
        if not (self.k.pull_ranked and self.e.read_may_fail):
            return o.const(False)
        return o.any_(o.eq(s.wr[r, w], RD_FAILED) for r in self.reqs for w in range(self.k.F))

    @witness
    def sometimes_failed_load_waits_for_sibling(self, s):
        """V8: decode still holds a load one of whose READs failed while a sibling READ is still
        in progress (with #56104 the failure is not reported before the sibling stops)."""
        o = s.ops
        if not (self.k.pull_ranked and (self.e.read_may_fail or self.e.read_post_may_fail)):
            return o.const(False)
        F = self.k.F
        return o.any_(o.and_(o.eq(s.d_phase[r], D_READING),
                             o.any_(o.eq(s.wr[r, w], RD_FAILED) for w in range(F)),
                             o.any_(o.is_in(s.wr[r, w], (RD_POSTED, RD_TAKEN)) for w in range(F)))
                      for r in self.reqs)

    @witness
    def sometimes_failed_under_sibling_read(self, s):
        """V8 before #56104: a load was reported failed (``FINISHED_ERROR``, its block freed)
        while a sibling READ of it has not yet moved its data."""
        o = s.ops
        if not (self.k.pull_ranked and (self.e.read_may_fail or self.e.read_post_may_fail)):
            return o.const(False)
        return o.any_(o.and_(o.eq(s.outcome[r], OUT_ERROR), o.eq(s.d_phase[r], D_ENDED),
                             o.any_(o.eq(s.wr[r, w], RD_POSTED) for w in range(self.k.F)))
                      for r in self.reqs)

    @witness
    def sometimes_read_post_fails(self, s):
        """V8: posting one of a request's sibling READs failed (``_read_blocks``' except-branch)."""
        o = s.ops
        if not self.e.read_post_may_fail:
            return o.const(False)
        return o.any_(o.eq(s.wr[r, w], RD_FAILED) for r in self.reqs for w in range(self.k.F))

    @witness
    def sometimes_sibling_left_unposted(self, s):
        """V8 with #56104: after a failed post decode loads a request one of whose sibling READs
        was never posted (``_read_blocks_for_req`` stopped)."""
        o = s.ops
        if not self.e.read_post_may_fail:
            return o.const(False)
        F = self.k.F
        return o.any_(o.and_(o.eq(s.d_phase[r], D_READING), o.any_(o.eq(s.wr[r, w], RD_FAILED) for w in range(F)),
                             o.any_(o.eq(s.wr[r, w], RD_NONE) for w in range(F)))
                      for r in self.reqs)

    # -- V17: a re-registered prefill KV cache --------------------------------------------------------
    @witness
    def sometimes_read_through_stale_registration(self, s):
        """V17: a READ is in progress through descriptors of a prefill registration that was
        replaced (decode's cached descriptors name released memory)."""
        o = s.ops
        if not self.e.prefill_reregisters:
            return o.const(False)
        return o.any_(o.and_(o.ne(s.rgen[r], s.p_gen),
                             o.any_(o.is_in(s.wr[r, w], (RD_POSTED, RD_TAKEN)) for w in range(self.k.F)))
                      for r in self.reqs)

    @witness
    def sometimes_reregistered_request_served(self, s):
        """V17: a request prefilled after prefill re-registered its KV cache is served."""
        o = s.ops
        if not self.e.prefill_reregisters:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.gen[r], 1), o.eq(s.outcome[r], OUT_SUCCESS)) for r in self.reqs)

    # -- V8's third path: a failed READ whose handle release fails (0.33.0 retains it) ------------------
    @witness
    def sometimes_release_fails(self, s):
        """V8's third path: a READ's status was an error and its handle release failed
        (``_try_release_xfer_handle`` returned ``False``): its DMA may still move data."""
        o = s.ops
        if not self.k.release_may_fail:
            return o.const(False)
        return o.any_(o.eq(s.wr[r, w], RD_RETAINED) for r in self.reqs for w in range(self.k.F))

    @witness
    def sometimes_failed_load_waits_for_release(self, s):
        """V8's third path in 0.33.0: decode still holds a load whose every READ stopped or
        failed but one failed READ's handle is retained (its release failed): the failure waits."""
        o = s.ops
        if not self.k.release_may_fail:
            return o.const(False)
        F = self.k.F
        return o.any_(o.and_(o.eq(s.d_phase[r], D_READING),
                             o.any_(o.eq(s.wr[r, w], RD_RETAINED) for w in range(F)),
                             o.all_(o.is_in(s.wr[r, w], (RD_DONE, RD_FAILED, RD_RETAINED)) for w in range(F)))
                      for r in self.reqs)

    @witness
    def sometimes_failed_under_unreleased_read(self, s):
        """V8's third path without retention (HYPOTHETICAL): a load was reported failed
        (``FINISHED_ERROR``, its block freed) while a failed READ of it, whose handle release
        failed, may still move data."""
        o = s.ops
        if not self.k.release_may_fail:
            return o.const(False)
        return o.any_(o.and_(o.eq(s.outcome[r], OUT_ERROR), o.eq(s.d_phase[r], D_ENDED),
                             o.any_(o.eq(s.wr[r, w], RD_RETAINED) for w in range(self.k.F)))
                      for r in self.reqs)
