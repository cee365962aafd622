"""vLLM 0.33.0's PD disaggregation over NIXL.  Pull mode (``NixlPullConnector``, the default
``NixlConnector``): decode READs prefill's blocks, prefill frees them on the READ's completion
notification or when a lease expires.  Push mode (``NixlPushConnector``, ``mode = "push"``):
decode registers its blocks (``PUSH_REG``), prefill WRITEs into them and frees its own blocks
when its WRITE completes or when the lease expires, WRITE outstanding or not; decode finishes
the load on the WRITE's notification.

Every action is named by its actor (``prefill_``, ``decode_``, ``nixl_read_``, ``nixl_write_``,
``clock_``) and says which code path of 0.33.0 it stands for (files under
``vllm/distributed/kv_transfer/kv_connector/v1/nixl/`` and ``vllm/v1/core/sched/scheduler.py``)
and which of vLLM's hazards it takes part in (V1..V17, kvproof's numbering; the docs page
*The hazards of SGLang and vLLM* gives each one's upstream pull request or issue).

Modelling choices, each stated once here:

* One KV block per request; allocation takes the lowest-numbered free block; a freed block
  keeps its content until it is overwritten (a reused block hands out another request's KV).
* A READ (push: a WRITE) is posted, moves its data at some later step (the source block's
  content at that moment lands in the destination block, whoever owns either now), then
  completes.  The completion notification (``notif_msg``) is created by the completion itself:
  it proves the data moved.  The peer (pull: prefill, push: decode) consumes it later.
* Push: by default one prefill rank and one decode rank, so one notification completes the
  count (``pp_size * producers_per_consumer`` = 1).  With ``write_fan_in`` above one, or with
  V6's failed posts (``write_post_may_fail``), each prefill rank ``w`` has its own WRITE of its
  part of the block (``wr[r, w]``, ``content[w, block]``) and its own notification, and decode
  counts them (the ``*_part`` actions and :meth:`VllmPd.decode_get_new_notifs`); the prefill
  side stays one request view (its ranks' leases move together: same start, the same
  heartbeats; the scheduler frees once every rank reported, ``KVOutputAggregator``).  Registrations match by exact id (0.33.0's writer
  matches by exact, then base id: with one registration per request both pair the same); the handshake is
  instantaneous and a WRITE is posted only while prefill still holds the request, unless
  ``push_handshake_may_defer`` lets the writer defer a matched WRITE behind a pending handshake
  and post it later, lease or no lease (#55470); the watchdog is not modelled.
* Pull with per-rank READs (``read_fan_in``, V8; also V17's ``prefill_reregisters``): decode
  posts one READ per prefill rank at once (sibling handles ``wr[r, w]``), each moves its rank's
  part of the block and notifies its own prefill rank; prefill stays one view of the request
  (its ranks' leases move together) and frees once every rank reported.  A READ may fail
  (``read_may_fail``) before moving data; decode reports the load (``decode_pop_done_transfers``)
  with ``kv_load_failure_policy = "fail"``.  V17: prefill re-registers at most once, while it
  holds nothing; decode's handshake is instantaneous.
* V9 (pull): a request with ``replays = N`` carries request N's ``kv_transfer_params``: it is
  never prefilled, READs N's block ids (``src``), its notification names N, and decode's
  heartbeat set (``hb_set``) holds N's id once for both.
* Decode's scheduler steps (taking a request, posting a READ, heartbeats, ``finished_recving``,
  aborts) need decode not stalled; NIXL's data movement and prefill go on during a stall.
* The scheduler's side (declared last, so earlier scenarios keep their action ids): a
  pre-admission rejection (V12) allocates nothing on decode; with async scheduling (V15) the
  step scheduled after a request's last one is in flight when the request finishes, and its
  write lands (with that step's processing, one action) in the block the request had; with a
  decode prefix hit (V11) a request's KV is a prefix and a suffix block on prefill, decode has
  the prefix cached and takes one block, and the transfer pairs that block with prefill's
  suffix (end-trimmed) or, before #48758 in push, with its prefix.
* Time passes in ticks (:meth:`VllmPd.clock_tick`).  A heartbeat is sent and applied in one
  step (its delivery latency is not modelled); decode sends it every ``heartbeat_interval``
  ticks while it is not stalled: time cannot pass while one is due.  The latency bounds
  likewise stop time at their bound.
"""

from __future__ import annotations

from kvproof.model.framework import ConfiguredSpec, action
from kvproof.model.layout import Domain
from kvproof.model.lifting import over_approximated, per_element, take_lowest_free
from kvproof.spec.vllm.claims import VllmClaims
from kvproof.spec.vllm.state import (
    D_ENDED, D_HELD, D_NEW, D_READING, D_TRACKED, D_WAITING, FREE, OUT_ABORTED, OUT_SUCCESS,
    OUT_ERROR, P_ABORTED, P_EXPIRED, P_HELD, P_NEW, P_SENT, RD_DONE, RD_FAILED, RD_NONE, RD_POSTED, RD_RETAINED,
    RD_TAKEN,
    READ_CROSS_TENANT, READ_FOREIGN, READ_OWN, UNWRITTEN, WN_DONE, WN_FAIL, WN_NONE, Codes, build_fields,
)
from kvproof.spec.vllm.story import VllmStory

__all__ = ["VllmPd"]


class VllmPd(VllmClaims, VllmStory, ConfiguredSpec):
    """The protocol instance (pull or push mode) for one :class:`~.config.Config` (refused with
    ``ValueError`` when the configuration has a problem; kept as ``cfg``, its engine as ``e``,
    its :class:`~.state.Codes` as ``k``).  Subclass and override one action or helper to describe
    another engine's behaviour."""

    codes = Codes
    fields_of = staticmethod(build_fields)

    # -- structure ---------------------------------------------------------------------------
    def config_problems(self, cfg) -> list[str]:
        """Decode's shared prefix blocks (``prefix_sharing``) are the spec ``vllm-prefix-cache``'s
        (:class:`~.prefix_cache.VllmPrefixCache`): this spec gives every block one owner; decode's
        ``MultiConnector`` (``multi_connector``) is the spec ``vllm-multi-connector``'s
        (:class:`~.multi_connector.VllmMultiConnector`)."""
        if cfg.engine.prefix_sharing:
            return ["engine.prefix_sharing: shared prefix blocks are modelled by the spec vllm-prefix-cache "
                    '(protocol = "vllm-prefix-cache")']
        if cfg.engine.multi_connector:
            return ["engine.multi_connector: MultiConnector's two connectors are modelled by the spec "
                    'vllm-multi-connector (protocol = "vllm-multi-connector")']
        return []

    def domain(self, name: str) -> Domain:
        """The parameter domains: ``req``, and ``wrank`` (a prefill rank WRITing its part, push)."""
        return {"req": self.k.req, "wrank": self.k.wrank}[name]

    @property
    def reqs(self) -> Domain:
        """Every request (the request domain: its indices, or one bound request in the lift)."""
        return self.k.req

    def small_instances(self):
        """What the all-sizes pipeline mines for the lifted model: two requests of the scenario's
        two first tenants (one if it has one) on two decode blocks and two prefill blocks."""
        import dataclasses

        from kvproof.spec.vllm.config import Request
        tenants = [r.tenant for r in self.cfg.requests]
        second = tenants[1] if len(tenants) > 1 else tenants[0]
        return (type(self)(dataclasses.replace(self.cfg, requests=(Request(tenants[0]), Request(second)),
                                               decode_blocks=2, prefill_blocks=2)),)

    def link_instances(self):
        """Where ``prove --all-sizes`` proves the lifted model's link first (beside the
        scenario's own size): one request on one block of each pool; the mining instance; three
        requests of two tenants on two decode and three prefill blocks."""
        import dataclasses

        from kvproof.spec.vllm.config import Request
        tenants = [r.tenant for r in self.cfg.requests]
        second = tenants[1] if len(tenants) > 1 else tenants[0]
        one = type(self)(dataclasses.replace(self.cfg, requests=(Request(tenants[0]),), decode_blocks=1,
                                             prefill_blocks=1))
        three = type(self)(dataclasses.replace(self.cfg, requests=(Request(tenants[0]), Request(second),
                                                                   Request(second)), decode_blocks=2, prefill_blocks=3))
        return (one, *self.small_instances(), three)

    def link_size(self) -> str:
        """``2 requests, 3 decode pages, 1 prefill page`` (the link's report has said pages of vLLM's
        blocks since it was written)."""
        from kvproof.checker.outcome import plural

        k = self.k
        return f"{plural(k.R, 'request')}, {plural(k.D, 'decode page')}, {plural(k.P, 'prefill page')}"

    def size_label(self) -> str:
        """``N requests, D decode blocks, P prefill blocks``."""
        c = self.cfg
        return f"{len(c.requests)} request(s), {c.decode_blocks} decode and {c.prefill_blocks} prefill block(s)"

    def origin(self, r: int) -> int:
        """Whose prompt and ``kv_transfer_params`` request ``r`` carries: itself, or for a replay
        (V9) the request it replays."""
        return self.k.origin[r] if self.k.replays else r

    def is_replay(self, r: int) -> bool:
        """Request ``r`` replays another's ``kv_transfer_params`` (V9; never without replays)."""
        return self.k.replays and self.k.replay[r]

    def is_cached(self, r: int) -> bool:
        """Decode holds request ``r``'s whole KV in its local prefix cache (V13; never when no
        request is)."""
        return any(self.k.cached) and self.cached(r)

    @per_element("condition")
    def cached(self, r: int) -> bool:
        """The scenario marks request ``r`` as cached at decode (``requests[].cached``): in the
        lift, any request may be."""
        return bool(self.k.cached[r])

    def lift_sorts(self):
        """The lift to sorts reads requests, decode blocks and prefill blocks as sorts (``rnone``:
        ``free`` as an owner and ``unwritten`` as a content; ``bnone``/``qnone``: no block);
        owner and content codes name requests (offset 1), block references name blocks (NONE the
        last code); a request's tenant, looked up by request or content code, is a rigid
        function.  Prefill ranks stay at the scenario's size."""
        from kvproof.model.sorted_lift import SortDecl
        k = self.k
        return SortDecl(
            sorts={"request": ("Req", "rnone"), "decode_block": ("Block", "bnone"), "prefill_block": ("PBlock", "qnone")},
            refs={"owner": ("request", FREE, 1), "content": ("request", UNWRITTEN, 1),
                  "decode_block_or_none": ("decode_block", None, 0), "prefill_block_or_none": ("prefill_block", None, 0)},
            tables=((k.tenant, "request", "tenant", "Tenant"), (k.tenant_of_content, "content", "tenant", "Tenant")))

    # -- helpers -------------------------------------------------------------------------------
    def _running(self, s):
        """Decode's engine loop is stepping (not stalled)."""
        return s.ops.eq(s.stalled, 0) if self.e.decode_may_stall else s.ops.const(True)

    def narration(self):
        """What reports draw (:func:`~.narration.narration`): six lanes, the two block pools,
        decode's read, and the field changes that are messages."""
        from kvproof.spec.vllm.narration import narration
        return narration(self)

    def _allocate(self, s, n, r: int, owner: str, table: str, size: int, content: str | None = None):
        """Give ``r`` the lowest-numbered free block of a pool (guarded: one must be free); with
        ``content``, fill it with ``r``'s KV (prefill's forward pass)."""
        take_lowest_free(s, n, owner, size, 1, lambda i: (table, r), r + 1, FREE, content, r + 1)

    def _allocate_prefix_and_suffix(self, s, n, r: int):
        """V11: prefill computes the request's KV into two blocks, the lowest free one for the
        prefix (``src_prefix``) and the next free one for the suffix (``src``)."""
        o = s.ops
        P = self.k.P
        one, two = o.const(False), o.const(False)  # a free block already seen; two seen
        prefix_at, suffix_at = o.const(P), o.const(P)
        for q in range(P):
            free = o.eq(s.src_owner[q], FREE)
            first = o.and_(free, o.not_(one))
            second = o.and_(free, one, o.not_(two))
            prefix_at = o.ite(first, q, prefix_at)
            suffix_at = o.ite(second, q, suffix_at)
            n.src_owner[q] = o.ite(o.or_(first, second), r + 1, s.src_owner[q])
            n.src_content[q] = o.ite(first, self.k.prefix_content(r), o.ite(second, r + 1, s.src_content[q]))
            two = o.or_(two, second)
            one = o.or_(one, free)
        s.require(two)
        n.src_prefix[r] = prefix_at
        n.src[r] = suffix_at

    def _free_source(self, s, n, r: int, when=True):
        """Free ``r``'s prefill block(s) where ``when`` holds (V11: the prefix block too)."""
        if not self.k.prefix:
            self._free(s, n, r, "src_owner", "src", when=when)
            return
        o = s.ops
        for q in range(self.k.P):
            mine = o.and_(when, o.or_(o.eq(s.src[r], q), o.eq(s.src_prefix[r], q)), o.eq(s.src_owner[q], r + 1))
            n.src_owner[q] = o.ite(mine, FREE, s.src_owner[q])

    def _free(self, s, n, r: int, owner: str, table: str, when=True):
        """Free ``r``'s block of a pool (if it still owns it) where ``when`` holds; the content stays."""
        o = s.ops
        b = getattr(s, table)[r]
        own = getattr(s, owner)
        getattr(n, owner)[b] = o.ite(o.and_(when, o.eq(own[b], r + 1)), FREE, own[b])

    def _classify(self, s, r: int):
        """What decode computes on when ``r`` runs: its destination block's content (per-rank
        WRITEs: every rank's part of it; own only if every part is ``r``'s)."""
        o = s.ops
        if self.k.ranked:
            parts = [s.content[w, s.dest[r]] for w in range(self.k.F)]
            own = o.all_(o.eq(x, r + 1) for x in parts)
            cross = o.any_(o.and_(o.ne(x, UNWRITTEN),
                                  o.ne(o.lookup(self.k.tenant_of_content, x), o.lookup(self.k.tenant, r))) for x in parts)
            return o.ite(own, READ_OWN, o.ite(cross, READ_CROSS_TENANT, READ_FOREIGN))
        held = s.content[s.dest[r]]
        own = o.eq(held, self.origin(r) + 1)  # a replay's own KV is its reference's (V9)
        cross = o.and_(o.ne(held, UNWRITTEN), o.ne(o.lookup(self.k.tenant_of_content, held), o.lookup(self.k.tenant, r)))
        return o.ite(own, READ_OWN, o.ite(cross, READ_CROSS_TENANT, READ_FOREIGN))

    def _reference_admitted(self, s, r: int):
        """Decode already admitted another request carrying ``r``'s reference (V9)."""
        o = s.ops
        t = self.origin(r)
        return o.any_(o.ne(s.d_phase[x], D_NEW) for x in self.reqs if x != r and self.origin(x) == t)

    def _heartbeat_names(self, s) -> list:
        """Per request: decode's ``HB:`` notification names its id (:meth:`_heartbeat_names_one`)."""
        return [self._heartbeat_names_one(s, r) for r in self.reqs]

    def _heartbeat_names_one(self, s, r):
        """Decode's ``HB:`` notification names request ``r``'s id: decode tracks the requests
        it has queued or loading; with replays (V9) the heartbeat set holds remote request ids
        (``hb_set``), shared by a request and its replays.  One request at a time, so the lift
        reads it for a bound element too."""
        o = s.ops
        if self.k.replays:
            return o.eq(s.hb_set[r], 1)
        return o.is_in(s.d_phase[r], D_TRACKED)

    def _stop_heartbeat(self, s, n, r: int, when) -> None:
        """``_stop_heartbeat`` (base_scheduler.py:243-251) when ``r`` stops being queued or
        loading (``when``): it discards ``r``'s remote request id from the heartbeat set, even if
        another decode request carrying the same id (a replay, V9) still loads, whose lease then
        gets no more heartbeats."""
        o = s.ops
        t = self.origin(r)
        n.hb_set[t] = o.ite(when, 0, s.hb_set[t])

    @property
    def pull(self) -> bool:
        """Pull mode (decode READs); else push mode (prefill WRITEs)."""
        return self.e.mode == "pull"

    def _move_data(self, s, n, r: int):
        """The transfer's data movement: the destination block gets the source block's content
        as it is now, whoever owns either block now."""
        o = s.ops
        s.require(o.eq(s.rd[r], RD_POSTED))
        n.rd[r] = RD_TAKEN
        # V11: decode allocated one (suffix) block; prefill's list is [prefix, suffix].  End-trimmed
        # (_apply_prefix_caching, #48758) the transfer pairs decode's slot with prefill's suffix;
        # paired from the front (push before #48758) with prefill's prefix.  Pull with a
        # proxy-appended token (#50558, ``decode_appended_token``): decode took two uncached blocks,
        # as many as prefill's list, so _apply_prefix_caching trims nothing and its first (suffix)
        # slot, the one modelled, gets prefill's prefix too.
        src = s.src_prefix[r] if self.e.suffix_slot_gets_prefix else s.src[r]
        n.content[s.dest[r]] = s.src_content[src]

    def _complete(self, s, n, r: int):
        """The transfer completes and NIXL hands its ``notif_msg`` to the peer."""
        o = s.ops
        s.require(o.eq(s.rd[r], RD_TAKEN))
        n.rd[r] = RD_DONE
        n.notif[r] = 1

    # -- prefill ------------------------------------------------------------------------------
    @action("prefill", "req", fair=True)
    def prefill_request_finished(self, s, n, r):
        """Prefill allocates a block, computes the request's KV into it and finishes it
        (``max_tokens=1``); ``request_finished`` (pull_scheduler.py:191-293) keeps the blocks
        (``delay_free_blocks``) and starts the lease: ``_reqs_need_send[req] = now +
        kv_lease_duration``.  These are the blocks decode will READ (V1).  Requests reach
        prefill in order."""
        o = s.ops
        s.require(not self.is_replay(r))  # a replay (V9) is never prefilled
        s.require(o.eq(s.p_phase[r], P_NEW))
        s.require(self.reaches_prefill_in_order(s, r))
        if self.k.prefix:
            self._allocate_prefix_and_suffix(s, n, r)
        else:
            self._allocate(s, n, r, "src_owner", "src", self.k.P, content="src_content")
        n.p_phase[r] = P_HELD
        n.lease[r] = self.k.L

    @over_approximated("requests reach prefill in any order (the spec: in request order)")
    def reaches_prefill_in_order(self, s, r: int):
        """Requests reach prefill in order: ``r`` only after the request before it (replays
        aside, which are never prefilled) left ``new``.  A condition."""
        o = s.ops
        before = [x for x in range(r) if not self.is_replay(x)]
        return o.ne(s.p_phase[before[-1]], P_NEW) if before else o.const(True)

    @action("prefill", "req", fair=True)
    def prefill_get_new_notifs(self, s, n, r):
        """Prefill's worker polls NIXL notifications (``_get_new_notifs``, pull_worker.py:650-701)
        and finds the READ's ``"{req}:{n}"``: for a request still in ``_reqs_to_send`` this is
        ``finished_sending`` and its blocks are freed (after the READ moved its data: a drain
        proof).  For one whose lease already expired it logs "Potentially invalid KV blocks for
        unrecognized request" (``record_notification_after_expiry``) and drops it: nothing
        reaches decode (V1).  The same branch takes the notify-only ``"{req}:{n}"`` decode sends
        for a request it rejected before admission (V12, #41269).  A replay's READ (V9) notifies
        ``"{remote_request_id}:1"``, the id of the request it replays: prefill counts it for that
        request, which is then ``finished_sending`` and freed while its own decode READ may still
        be in flight."""
        o = s.ops
        s.require(self.pull and not self.k.ranked)
        s.require(o.eq(s.notif[r], 1))
        n.notif[r] = 0
        t = self.origin(r)  # the request the notification names
        held = o.eq(s.p_phase[t], P_HELD)
        if self.k.mla:  # V16: rank 0 reports; the scheduler frees once rank 1 reported too
            n.r0_sent[t] = o.ite(held, 1, s.r0_sent[t])
            n.late[r] = o.ite(held, s.late[r], 1)
            self._finish_sending_all_ranks(s, n, t, o.and_(held, o.eq(s.r1_sent[t], 1)))
            return
        n.p_phase[t] = o.ite(held, P_SENT, s.p_phase[t])
        n.lease[t] = o.ite(held, 0, s.lease[t])
        n.late[r] = o.ite(held, s.late[r], 1)
        self._free_source(s, n, t, when=held)

    @action("prefill", "req", fair=True)
    def prefill_reap_expired_lease(self, s, n, r):
        """``_reap_expired_send_leases`` (base_worker.py:3352-3378): the lease ran out, so the
        request is reported ``finished_sending`` and the scheduler frees its blocks, whether or
        not a READ is still reading them (push: a WRITE still outstanding, V7); only a log line
        and ``num_kv_expired_reqs`` record it, no negative acknowledgement goes to decode (V1)."""
        o = s.ops
        s.require(self.e.kv_lease_expires)
        s.require(self.e.reaper_scans_every_lease)  # before #58222: prefill_reap_expired_send_leases_in_order
        s.require(o.eq(s.p_phase[r], P_HELD))
        s.require(o.eq(s.lease[r], 0))
        n.p_phase[r] = P_EXPIRED
        self._free_source(s, n, r)

    @action("prefill", "req")
    def prefill_abort_finished(self, s, n, r):
        """The client's abort reaches prefill after ``request_finished`` kept the blocks for
        decode (V3, #25067's race).  Before #25067 the blocks are freed at once, while decode may
        still READ them; with it ``finish_requests`` skips a finished request (this step does
        not exist) and the lease reclaims the blocks."""
        o = s.ops
        s.require(self.e.prefill_aborts and self.e.abort_of_finished_frees)
        s.require(o.eq(s.p_phase[r], P_HELD))
        n.p_phase[r] = P_ABORTED
        n.lease[r] = 0
        self._free_source(s, n, r)

    # -- decode ----------------------------------------------------------------------------------
    @action("decode", "req", fair=True)
    def decode_on_new_request(self, s, n, r):
        """Decode takes the request with prefill's ``kv_transfer_params`` (the router sends it
        after prefill finished): ``on_new_request`` starts heartbeat tracking
        (base_scheduler.py:202-241), ``get_num_new_matched_tokens`` asks for an async load, the
        scheduler allocates a block and parks the request in ``WAITING_FOR_REMOTE_KVS``
        (scheduler.py:1523).  The parameters may already be stale: prefill's lease may have
        expired (V1, "D has not read yet").  A replay (V9, #52234) carries the parameters of the
        request it replays, consumed or not: the same ``remote_block_ids`` (``src``), the same
        ``remote_request_id`` in the heartbeat set.  With the HYPOTHETICAL
        ``decode_refuses_replayed_params`` a reference decode already admitted is refused instead
        (:meth:`decode_refuse_replayed_params`)."""
        o = s.ops
        t = self.origin(r)
        s.require(o.eq(s.d_phase[r], D_NEW))
        s.require(o.ne(s.p_phase[t], P_NEW))
        s.require(self._running(s))
        if self.e.decode_refuses_replayed_params:
            s.require(o.not_(self._reference_admitted(s, r)))
        # V13: a full local prefix hit -- the block decode takes already holds the request's KV
        self._allocate(s, n, r, "owner", "dest", self.k.D, content="content" if self.is_cached(r) else None)
        if self.is_replay(r):
            n.src[r] = s.src[t]
        if self.k.replays:
            n.hb_set[t] = 1
        n.d_phase[r] = D_WAITING
        if self.k.A is not None:
            n.age[r] = 0

    @action("decode", "req", fair=True)
    def decode_start_load_kv(self, s, n, r):
        """Decode's worker ``start_load_kv`` (pull_worker.py:49-125) -> ``_read_blocks_for_req``
        -> ``_read_blocks``: ``make_prepped_xfer("READ", ..., notif_msg="{req}:{n}")`` and
        ``transfer`` (pull_worker.py:450-567).  The READ reads prefill's block ids from the
        parameters, whoever owns that block now (V1).  The worker got the load in
        ``reqs_to_recv`` of the step that allocated it, so it posts the READ of a request aborted
        since (held by ``delay_free_blocks``) all the same."""
        o = s.ops
        s.require(self.pull and not self.k.ranked)
        if self.is_cached(r):  # V13: a full local hit posts no READ (decode_read_blocks_notify_only)
            s.require(False)
        waiting = o.eq(s.d_phase[r], D_WAITING)
        s.require(o.or_(waiting, o.and_(o.eq(s.d_phase[r], D_HELD), o.eq(s.rd[r], RD_NONE))))
        s.require(self._running(s))
        if self.e.turn2_read:  # V14: a READ _is_turn2_read_expired declines is not posted
            s.require(o.not_(self._turn2_read_expired(s, r)))
        n.d_phase[r] = o.ite(waiting, D_READING, D_HELD)
        n.rd[r] = RD_POSTED
        if self.k.mla:  # V16: the same _read_blocks_for_req call notifies the unread prefill rank
            n.mla_notif[r] = 1

    @action("decode", "req", fair=True)
    def decode_finished_recving(self, s, n, r):
        """Decode's worker reports ``finished_recving`` once no READ handle remains
        (``_pop_done_transfers``, base_worker.py:3204-3238; push: once ``_get_new_notifs``
        counted the WRITE's notification, push_worker.py:767-807): a loading request is cached and
        runs on its block, a held (aborted) one is freed (``_update_from_kv_xfer_finished``,
        scheduler.py:3569-3582).  What the running request computes on is recorded in
        ``read`` (V1: another request's KV, served with HTTP 200).  The running request finishes
        in that step (``max_tokens=1``); with ``async_scheduling`` step N+1 was already scheduled
        with it and still writes its block, so ``_free_request_blocks`` frees the block at once
        before #45357 (V15) and, with it, puts it in ``deferred_frees`` until that step is
        processed (:meth:`decode_update_from_output`)."""
        o = s.ops
        s.require(not self.k.ranked)
        if self.pull:
            s.require(o.eq(s.rd[r], RD_DONE))
        else:
            s.require(o.eq(s.notif[r], 1))
            n.notif[r] = 0
        s.require(o.is_in(s.d_phase[r], (D_READING, D_HELD)))
        s.require(self._running(s))
        loading = o.eq(s.d_phase[r], D_READING)
        n.outcome[r] = o.ite(loading, OUT_SUCCESS, s.outcome[r])
        n.read[r] = o.ite(loading, self._classify(s, r), s.read[r])
        n.d_phase[r] = D_ENDED
        if self.e.async_scheduling:  # V15: step N+1, already scheduled, still writes the block
            n.inflight[r] = o.ite(loading, 1, s.inflight[r])
            deferred = loading if self.e.defer_block_free else o.const(False)
            self._free(s, n, r, "owner", "dest", when=o.not_(deferred))
        else:
            self._free(s, n, r, "owner", "dest")
        if self.k.replays:
            self._stop_heartbeat(s, n, r, loading)

    @action("decode", "req")
    def decode_abort(self, s, n, r):
        """The client aborts the request on decode in ``WAITING_FOR_REMOTE_KVS``:
        ``finish_requests`` (scheduler.py:3014-3027).  With #32255 a request whose READ is in
        flight is held (``delay_free_blocks``) until ``finished_recving``; before it the blocks
        are freed at once and the READ still writes into them (V4).  0.33.0 cannot tell whether
        the worker has posted the READ (it got the load with the allocating step), so a request
        in ``WAITING_FOR_REMOTE_KVS`` is held whether its READ is posted, in flight or complete,
        until ``finished_recving`` (found by ``kvproof conform --random``: the model freed an
        unposted one at once).  Push likewise (found by replaying the push traces on 0.33.0:
        the model freed a request whose ``PUSH_REG`` had not gone out, or whose WRITE
        notification had reached decode's agent but not its scheduler): the registration is
        already with decode's worker, which sends it all the same, and the block is held until
        the WRITE's notification, which may never come (V5, #46283).  Heartbeats for the
        request stop."""
        o = s.ops
        s.require(self.e.client_aborts)
        s.require(o.is_in(s.d_phase[r], D_TRACKED))
        s.require(self._running(s))
        # WAITING_FOR_REMOTE_KVS until finished_recving, READ posted or not, PUSH_REG sent or not
        hold = o.const(self.e.delay_free_aborted_load)
        n.outcome[r] = OUT_ABORTED
        n.d_phase[r] = o.ite(hold, D_HELD, D_ENDED)
        self._free(s, n, r, "owner", "dest", when=o.not_(hold))
        if self.k.replays:
            self._stop_heartbeat(s, n, r, True)

    @action("decode", fair=True)
    def decode_send_heartbeats(self, s, n):
        """``_send_heartbeats`` (base_worker.py:3517-3549), every ``heartbeat_interval``: an
        ``HB:`` notification naming every request decode has queued or loading; prefill's
        ``_handle_heartbeat`` (base_worker.py:3380-3400) extends each lease to ``max(old, now +
        2/3 * lease)`` (#41383).  Only a decode that keeps stepping sends them (V1)."""
        o = s.ops
        s.require(self.k.I is not None)
        s.require(self._running(s))
        s.require(o.eq(s.hb_age, self.k.I))
        tracked = self._heartbeat_names(s)
        s.require(o.any_(tracked))
        n.hb_age = 0
        for r in self.reqs:
            extend = o.and_(self._heartbeat_names_one(s, r), o.eq(s.p_phase[r], P_HELD))
            n.lease[r] = o.ite(extend, o.max_(s.lease[r], self.k.X), s.lease[r])

    @action("decode")
    def decode_stall(self, s, n):
        """Decode's engine loop stalls (a long forward pass): no scheduler step, so no heartbeat,
        no new READ and no ``finished_recving`` until it resumes ("a long model forward pass
        will delay heartbeats", #43099): the weak point of V1's and V7's heartbeat mitigation.
        Only with ``decode_may_stall``."""
        o = s.ops
        s.require(self.e.decode_may_stall)
        s.require(o.eq(s.stalled, 0))
        n.stalled = 1

    @action("decode", fair=True)
    def decode_resume(self, s, n):
        """The stalled engine loop steps again (``EngineCore.step``): heartbeats, READ posts and
        ``finished_recving`` resume, too late if the lease already expired (V1, V7)."""
        o = s.ops
        s.require(self.e.decode_may_stall)
        s.require(o.eq(s.stalled, 1))
        n.stalled = 0

    # -- the NIXL READ ----------------------------------------------------------------------------
    @action("nixl", "req", fair=True)
    def nixl_read_take_data(self, s, n, r):
        """The one-sided READ moves its data at some moment between post and completion: the
        destination block receives what prefill's block holds NOW (V1: a block prefill freed and
        reused holds another request's KV), whoever owns the destination now (V4)."""
        s.require(self.pull and not self.k.ranked)
        self._move_data(s, n, r)

    @action("nixl", "req", fair=True)
    def nixl_read_complete(self, s, n, r):
        """The READ completes (``check_xfer_state`` DONE) and NIXL delivers its ``notif_msg`` to
        prefill after the data movement: the notification travels with the READ, a drain proof
        that arrives too late to matter once the lease expired (V1).  A hung READ
        (``read_may_hang``, :meth:`nixl_read_hangs`) never completes."""
        s.require(self.pull and not self.k.ranked)
        if self.e.read_may_hang:
            s.require(s.ops.eq(s.hung[r], 0))
        self._complete(s, n, r)

    # -- push mode (NixlPushConnector) ------------------------------------------------------------------
    @action("decode", "req", fair=True)
    def decode_send_push_reg(self, s, n, r):
        """Push: ``update_state_after_alloc`` (push_scheduler.py:128-205) stashed a registration
        of the request's blocks; decode's ``nixl-push-writer`` thread sends it to prefill as
        ``PUSH_REG:<msgpack>`` (``_send_registration_to_p`` 337, ``_do_send_reg_notif`` 384).
        From here decode waits for the WRITE's notification.  The worker got the registration in
        the step that allocated the block (``meta.push_registrations``), so it sends the
        registration of a request aborted since (held by ``delay_free_blocks``) all the same."""
        o = s.ops
        s.require(not self.pull)
        waiting = o.eq(s.d_phase[r], D_WAITING)
        s.require(o.or_(waiting, o.and_(o.eq(s.d_phase[r], D_HELD), o.eq(s.reg[r], 0))))
        s.require(self._running(s))
        n.d_phase[r] = o.ite(waiting, D_READING, D_HELD)
        n.reg[r] = 1

    @action("prefill", "req", fair=True)
    def prefill_push_write(self, s, n, r):
        """Push: prefill's writer thread matches the ``PUSH_REG`` with the finished request's
        blocks (``_pop_matching_registration`` / ``_pop_matching_finished_blocks``, 418-448) and
        posts the WRITE (``_xfer_blocks``: ``make_prepped_xfer("WRITE", ...,
        notif_msg="{D_req}:{world_size}")``, 651-763) while it still holds the request."""
        o = s.ops
        s.require(not self.pull and not self.k.ranked)
        s.require(o.eq(s.reg[r], 1))
        s.require(o.eq(s.p_phase[r], P_HELD))
        s.require(o.eq(s.rd[r], RD_NONE))
        if self.e.push_handshake_may_defer:
            s.require(o.eq(s.deferred[r], 0))
        n.rd[r] = RD_POSTED

    @action("nixl", "req", fair=True)
    def nixl_write_land(self, s, n, r):
        """Push: the WRITE moves its data at some moment between post and completion: decode's
        block receives what prefill's block holds NOW (V7: a block prefill freed on lease expiry
        and reused holds another request's KV)."""
        s.require(not self.pull and not self.k.ranked)
        self._move_data(s, n, r)

    @action("nixl", "req", fair=True)
    def nixl_write_complete(self, s, n, r):
        """Push: the WRITE completes (``check_xfer_state`` DONE); NIXL delivers its notification
        ``"{D_req}:{world_size}"`` to decode after the data movement, and prefill's handle is
        done.  Its count completes decode's load even when the WRITE carried a reused block's
        KV (V7)."""
        s.require(not self.pull and not self.k.ranked)
        self._complete(s, n, r)

    @action("prefill", "req", fair=True)
    def prefill_get_transfer_results(self, s, n, r):
        """Push: prefill's main thread polls its own WRITE handles (``_pop_done_transfers(
        self._sending_transfers)``) and reports ``finished_sending`` when they are all done
        (push_worker.py:809-847): the blocks are freed after the WRITE (a drain proof).  A
        request whose lease expired was already reported ("Expired requests were already
        reported, even if their WRITEs finish later").  The base worker's
        ``get_transfer_results`` runs ``_reap_expired_send_leases`` before the push part polls
        the WRITE handles, so once the lease has run out the same call reports the request as
        expired (``num_kv_expired_reqs``), WRITE done or not: that is
        :meth:`prefill_reap_expired_lease`, and this step needs the lease still running (found
        by replaying push on 0.33.0: the model counted such a request as sent).  Per-rank WRITEs:
        every rank's handle must be done (``KVOutputAggregator`` frees once all ranks reported);
        a rank whose post failed (V6) has no handle, so only its lease expiry reports it."""
        o = s.ops
        s.require(not self.pull)
        if self.k.ranked:
            s.require(o.all_(o.eq(s.wr[r, w], RD_DONE) for w in range(self.k.F)))
        else:
            s.require(o.eq(s.rd[r], RD_DONE))
        s.require(o.eq(s.p_phase[r], P_HELD))
        s.require(o.gt(s.lease[r], 0))
        n.p_phase[r] = P_SENT
        n.lease[r] = 0
        self._free_source(s, n, r)

    # -- time ----------------------------------------------------------------------------------------
    @action("clock", fair=True)
    def clock_tick(self, s, n):
        """One tick of wall time: leases (``_reqs_to_send`` expiries, V1/V7) count down
        (saturating at 0), decode's heartbeat timer and the request ages count up (saturating).  Time cannot pass while a heartbeat is due from a
        stepping decode, or while a request sits at an ``arrival_latency_bound`` or
        ``read_latency_bound``."""
        o = s.ops
        e, k = self.e, self.k
        moves, blocks = [], []

        def advance(value, running, step=1):
            moves.append(running)
            return o.ite(running, o.add(value, step), value)

        for r in self.reqs:
            if e.kv_lease_expires:
                n.lease[r] = advance(s.lease[r], o.and_(o.eq(s.p_phase[r], P_HELD), o.gt(s.lease[r], 0)), -1)
            if e.turn2_read and e.turn2_clock_offset_error:  # V14: how long ago the exported deadline passed
                n.overdue[r] = advance(s.overdue[r], o.and_(o.ne(s.p_phase[r], P_NEW), o.eq(s.lease[r], 0),
                                                            o.lt(s.overdue[r], e.turn2_clock_offset_error)))
            if k.A is None:
                continue
            counting = []
            if e.arrival_latency_bound is not None:
                arriving = o.and_(o.ne(s.p_phase[r], P_NEW), o.eq(s.d_phase[r], D_NEW))
                counting.append(o.and_(arriving, o.lt(s.age[r], e.arrival_latency_bound)))
                blocks.append(o.and_(arriving, o.ge(s.age[r], e.arrival_latency_bound)))
            if e.read_latency_bound is not None and k.ranked:  # a failed post is never loading
                xs = [s.wr[r, w] for w in range(k.F)]
                loading = o.or_(o.and_(o.is_in(s.d_phase[r], D_TRACKED), o.any_(o.lt(x, RD_DONE) for x in xs)),
                                o.any_(o.is_in(x, (RD_POSTED, RD_TAKEN)) for x in xs))
                counting.append(o.and_(loading, o.lt(s.age[r], e.read_latency_bound)))
                blocks.append(o.and_(loading, o.ge(s.age[r], e.read_latency_bound)))
            elif e.read_latency_bound is not None:
                loading = o.or_(o.and_(o.is_in(s.d_phase[r], D_TRACKED), o.ne(s.rd[r], RD_DONE)),
                                o.is_in(s.rd[r], (RD_POSTED, RD_TAKEN)))
                if self.pull:  # an aborted load's READ is posted by the worker all the same
                    loading = o.or_(loading, o.and_(o.eq(s.d_phase[r], D_HELD), o.eq(s.rd[r], RD_NONE)))
                if e.push_handshake_may_defer:  # a deferred WRITE waits on an unbounded handshake
                    loading = o.and_(loading, o.eq(s.deferred[r], 0))
                counting.append(o.and_(loading, o.lt(s.age[r], e.read_latency_bound)))
                blocks.append(o.and_(loading, o.ge(s.age[r], e.read_latency_bound)))
            n.age[r] = advance(s.age[r], o.any_(counting))
        if k.I is not None:
            tracked = o.any_(self._heartbeat_names(s))
            n.hb_age = advance(s.hb_age, o.and_(tracked, o.lt(s.hb_age, k.I)))
            blocks.append(o.and_(tracked, o.eq(s.hb_age, k.I), self._running(s)))
        s.require(o.any_(moves))
        s.require(o.not_(o.any_(blocks)))

    # -- push with per-rank WRITEs: TP/PP fan-in, V6 ------------------------------------------------
    @action("prefill", "req", "wrank", fair=True)
    def prefill_xfer_blocks(self, s, n, r, w):
        """Push, per-rank WRITEs (``write_fan_in``, V6): prefill rank ``w``'s writer thread
        matches the ``PUSH_REG`` (decode's ``_do_send_reg_notif`` sends it to every prefill rank)
        with its finished blocks and posts its WRITE of its part (``_xfer_blocks_for_req`` ->
        ``_xfer_blocks``: ``make_prepped_xfer("WRITE", ..., notif_msg="{D_req}:{world_size}")``
        and ``transfer``, push_worker.py:651-763) while prefill still holds the request."""
        o = s.ops
        s.require(self.k.ranked and not self.pull)
        s.require(o.eq(s.reg[r], 1))
        s.require(o.eq(s.p_phase[r], P_HELD))
        s.require(o.eq(s.wr[r, w], RD_NONE))
        n.wr[r, w] = RD_POSTED

    @action("prefill", "req", "wrank")
    def prefill_xfer_blocks_fails(self, s, n, r, w):
        """V6: rank ``w``'s ``_xfer_blocks`` raises while posting (``make_prepped_xfer`` or
        ``transfer``): the except-branch (push_worker.py:746-763) logs "Push WRITE submission
        failed; releasing handle", adds the request to ``_send_failures`` and returns no handle.
        0.33.0 sends no notification, so decode's count never completes; with no handle the
        rank reports the request only when its lease expires ("let the engine reschedule via the
        lease / watchdog").  With ``push_fail_notif`` (HYPOTHETICAL, #50754, open) the rank sends
        ``PUSH_FAIL`` to decode instead."""
        o = s.ops
        s.require(self.k.ranked and self.e.write_post_may_fail)
        s.require(o.eq(s.reg[r], 1))
        s.require(o.eq(s.p_phase[r], P_HELD))
        s.require(o.eq(s.wr[r, w], RD_NONE))
        n.wr[r, w] = RD_FAILED
        if self.e.push_fail_notif:
            n.wnotif[r, w] = WN_FAIL

    @action("nixl", "req", "wrank", fair=True)
    def nixl_write_land_part(self, s, n, r, w):
        """Push, per-rank WRITEs: rank ``w``'s WRITE moves its part (its heads / its stage's
        layers) at some moment between post and completion: that part of decode's block
        receives what prefill's block holds NOW (V7 per rank)."""
        o = s.ops
        s.require(self.k.ranked and not self.pull)
        s.require(o.eq(s.wr[r, w], RD_POSTED))
        n.wr[r, w] = RD_TAKEN
        n.content[w, s.dest[r]] = s.src_content[s.src[r]]

    @action("nixl", "req", "wrank", fair=True)
    def nixl_write_complete_part(self, s, n, r, w):
        """Push, per-rank WRITEs: rank ``w``'s WRITE completes (``check_xfer_state`` DONE) and
        NIXL delivers its ``"{D_req}:{world_size}"`` to decode after the data movement."""
        o = s.ops
        s.require(self.k.ranked and not self.pull)
        s.require(o.eq(s.wr[r, w], RD_TAKEN))
        n.wr[r, w] = RD_DONE
        n.wnotif[r, w] = WN_DONE

    @action("decode", "req", "wrank", fair=True)
    def decode_get_new_notifs(self, s, n, r, w):
        """Push, per-rank WRITEs: decode's ``get_transfer_results`` -> ``_get_new_notifs``
        (push_worker.py:767-807) counts rank ``w``'s notification in
        ``consumer_notification_counts_by_req`` toward ``pp_size * producers_per_consumer``
        (``write_fan_in``); the count that reaches it makes ``_pop_done_transfers`` report
        ``finished_recving`` in the same call, and the scheduler caches and runs the request (an
        aborted, held one is freed), as :meth:`decode_finished_recving`.  A rank whose post
        failed sends nothing (V6), so the count stays short: decode holds the half-written block
        and heartbeats for it.  With ``push_fail_notif`` (HYPOTHETICAL, #50754) a ``PUSH_FAIL``
        counts too and the completed count reports ``failed_recving``: ``kv_load_failure_policy
        = "fail"`` ends the request in ``FINISHED_ERROR`` and frees its block -- only once every
        rank answered, so after every sibling WRITE landed (a PUSH_FAIL that failed the load at
        once would free the block under a sibling WRITE, V8's shape; not modelled)."""
        o = s.ops
        k = self.k
        s.require(k.ranked and not self.pull)
        s.require(o.ne(s.wnotif[r, w], WN_NONE))
        s.require(o.is_in(s.d_phase[r], (D_READING, D_HELD)))
        s.require(self._running(s))
        n.wnotif[r, w] = WN_NONE
        last = o.eq(s.counted[r], k.F - 1)
        n.counted[r] = o.add(s.counted[r], 1)
        loading = o.and_(last, o.eq(s.d_phase[r], D_READING))
        served = loading
        if self.e.push_fail_notif:
            failed = o.or_(o.eq(s.load_failed[r], 1), o.eq(s.wnotif[r, w], WN_FAIL))
            n.load_failed[r] = o.ite(failed, 1, 0)
            served = o.and_(loading, o.not_(failed))
            n.outcome[r] = o.ite(served, OUT_SUCCESS, o.ite(loading, OUT_ERROR, s.outcome[r]))
        else:
            n.outcome[r] = o.ite(served, OUT_SUCCESS, s.outcome[r])
        n.read[r] = o.ite(served, self._classify(s, r), s.read[r])
        n.d_phase[r] = o.ite(last, D_ENDED, s.d_phase[r])
        self._free(s, n, r, "owner", "dest", when=last)

    # -- V9's HYPOTHETICAL fail-closed fix ------------------------------------------------------------
    @action("decode", "req", fair=True)
    def decode_refuse_replayed_params(self, s, n, r):
        """HYPOTHETICAL (not in 0.33.0; #52234 is open), V9 failing closed: decode admits each
        ``(remote_engine_id, remote_request_id)`` reference once; a request arriving with a
        reference decode already admitted (a replay, or the original after its replay) is refused
        before any block is allocated or READ: ``FINISHED_ERROR``."""
        o = s.ops
        s.require(self.e.decode_refuses_replayed_params)
        t = self.origin(r)
        s.require(o.eq(s.d_phase[r], D_NEW))
        s.require(o.ne(s.p_phase[t], P_NEW))
        s.require(self._running(s))
        s.require(self._reference_admitted(s, r))
        n.d_phase[r] = D_ENDED
        n.outcome[r] = OUT_ERROR

    # -- push: the deferred WRITE (V7's deferred variant, #55470) ---------------------------------------
    @action("prefill", "req")
    def prefill_defer_push(self, s, n, r):
        """Push (``push_handshake_may_defer``): prefill's writer matches the ``PUSH_REG`` with the
        finished blocks, but ``_do_start_push_kv`` (push_worker.py:452-501) finds the P->D
        handshake not ready: it registers ``_on_handshake`` on the handshake's future and returns;
        the WRITE will be re-driven from ``_deferred_push_inbox`` (V7, #55470)."""
        o = s.ops
        s.require(self.e.push_handshake_may_defer)
        s.require(o.eq(s.reg[r], 1))
        s.require(o.eq(s.p_phase[r], P_HELD))
        s.require(o.eq(s.rd[r], RD_NONE))
        s.require(o.eq(s.deferred[r], 0))
        n.deferred[r] = 1

    @action("prefill", "req", fair=True)
    def prefill_deferred_push_write(self, s, n, r):
        """Push: the handshake resolves, ``_on_handshake`` puts the request on
        ``_deferred_push_inbox`` and the writer's next pass (``_push_writer_loop`` step 2) calls
        ``_do_start_push_kv`` again, which posts the WRITE of the block ids it kept -- without
        checking that prefill still holds the request: after a lease expiry the block may
        belong to another request (V7's deferred variant, #55470, open)."""
        o = s.ops
        s.require(self.e.push_handshake_may_defer)
        s.require(o.eq(s.deferred[r], 1))
        n.deferred[r] = 0
        n.rd[r] = RD_POSTED

    # -- the scheduler's side: pre-admission rejection (V12) and deferred frees (V15) ----------------
    # Declared last so that the action ids of the scenarios above stay what they were.
    @action("decode", "req")
    def decode_reject_request(self, s, n, r):
        """Decode's serving layer rejects the request before admission (a chat-template or
        validation error, ``engine_paused``): ``serving.py`` calls
        ``notify_kv_transfer_request_rejected`` (v1/engine/async_llm.py:961), which submits an
        ``abort_immediately`` request; ``EngineCore.add_request`` (core.py:559) adds and at once
        aborts it (``finish_requests``).  Nothing was allocated on decode and no READ will come.
        With #41269 ``request_finished`` finds ``do_remote_prefill`` still set and seeds an empty
        recv (pull_scheduler.py:219-230), so decode's worker sends prefill the notify-only
        ``"{req}:{n}"`` of ``_read_blocks`` (pull_worker.py:450-476) and prefill frees its
        blocks on it (:meth:`prefill_get_new_notifs`); before it nothing tells prefill, whose
        blocks wait for the timeout (V12).  The client gets an error.  Push mode: the push
        scheduler seeds the same empty recv (push_scheduler.py:233-245), but the push worker's
        ``start_load_kv`` only records it in ``_recving_metadata`` (push_worker.py:197-217) and
        prefill's push worker frees only on its WRITE handles or the lease, so nothing tells
        prefill with #41269 either (V12 in push mode, 0.33.0 as shipped)."""
        o = s.ops
        s.require(self.e.decode_rejects)
        s.require(o.eq(s.d_phase[r], D_NEW))
        s.require(o.ne(s.p_phase[r], P_NEW))
        s.require(self._running(s))
        n.d_phase[r] = D_ENDED
        n.outcome[r] = OUT_ABORTED
        if self.e.reject_notifies_prefill and self.pull:
            n.notif[r] = 1

    @action("decode", "req", fair=True)
    def decode_update_from_output(self, s, n, r):
        """Async scheduling: the GPU step that was scheduled with the request before its finish
        was processed (step N+1) writes its KV into the request's block, and its output is
        processed: ``update_from_output`` (scheduler.py:2279-2281) advances
        ``processed_step_seq`` ("every GPU write enqueued by this and earlier steps has
        completed") and ``_drain_deferred_frees`` returns the blocks whose fence passed.  With
        #45357 (``defer_block_free``) the request's block was kept out of the pool until now and
        is freed here; before it the block went back to the pool when the request finished and
        may belong to a request loading KV over NIXL by now: the stale write lands in that
        request's block, unordered with the READ (V15)."""
        o = s.ops
        s.require(self.e.async_scheduling)
        s.require(o.eq(s.inflight[r], 1))
        s.require(self._running(s))
        n.inflight[r] = 0
        n.content[s.dest[r]] = r + 1
        if self.e.defer_block_free:
            self._free(s, n, r, "owner", "dest")

    # -- V13 (#54714 -> #56640): a full local prefix hit's notify-only load ------------------------
    # Appended after every earlier action so that the other scenarios keep their action ids.
    @action("decode", "req", fair=True)
    def decode_read_blocks_notify_only(self, s, n, r):
        """V13: decode already holds the request's whole KV in its local prefix cache (a full
        local hit), and the scheduler parked it in ``WAITING_FOR_REMOTE_KVS`` with an empty local
        block list (``update_state_after_alloc``, pull_scheduler.py:144-177: ``awaiting_kvs``).
        Decode's worker (``start_load_kv`` -> ``_read_blocks_for_req`` -> ``_read_blocks``,
        pull_worker.py:450-476) finds nothing to READ and takes the notify-only path:
        ``send_notif`` of ``"{remote_request_id}:{n}"``, on which prefill frees its blocks
        (:meth:`prefill_get_new_notifs`).  With #56640 (``report_notify_only_recv``) it records an
        empty transfer list for a parked request (``self._recving_transfers.setdefault(
        request_id, [])``), so ``_pop_done_transfers`` reports it in ``finished_recving``
        (:meth:`decode_finished_recving`) and the request runs on its local KV; before it
        (#54714) nothing is recorded: no ``finished_recving`` ever names the request, and the
        scheduler (``_handle_blocked_waiting_request``, scheduler.py:3519-3526) keeps it in
        ``WAITING_FOR_REMOTE_KVS`` holding its blocks for the life of the process."""
        o = s.ops
        s.require(self.pull and self.is_cached(r))
        s.require(o.eq(s.d_phase[r], D_WAITING))
        s.require(self._running(s))
        n.d_phase[r] = D_READING
        n.notif[r] = 1
        if self.e.report_notify_only_recv:
            n.rd[r] = RD_DONE

    # -- V16 (#36958): MLA's notify-only notification to the prefill rank decode does not READ ---------
    def _finish_sending_all_ranks(self, s, n, r: int, when) -> None:
        """V16 (MLA ranks) and V8 (per-rank READs): once every prefill rank reported
        ``finished_sending`` (``KVOutputAggregator``, ``when``) prefill's scheduler frees the
        request's block (``_update_from_kv_xfer_finished``)."""
        o = s.ops
        n.p_phase[r] = o.ite(when, P_SENT, s.p_phase[r])
        n.lease[r] = o.ite(when, 0, s.lease[r])
        self._free_source(s, n, r, when=when)

    @action("prefill", "req", fair=True)
    def prefill_get_new_notifs_mla_rank(self, s, n, r):
        """V16: prefill's rank 1 (MLA, ``tp_ratio < 0``: decode READs the replicated KV from rank
        0 only) polls NIXL and finds the notify-only notification decode's
        ``_read_blocks_for_req`` (pull_worker.py:377-399) sent it when it posted the READ.  With
        #36958 (``mla_notif_remote_id``) it names prefill's request id (``meta.remote.request_id``):
        ``_get_new_notifs`` counts it and the rank reports ``finished_sending`` (the block is freed
        once rank 0 reported too); before it, decode's own request id: the rank logs "Potentially
        invalid KV blocks for unrecognized request" (``record_notification_after_expiry``), drops
        it, and reports the request only when its lease expires -- a block held until the lease
        (forever, with a timeout beyond the horizon)."""
        o = s.ops
        s.require(self.pull and self.k.mla)
        s.require(o.eq(s.mla_notif[r], 1))
        n.mla_notif[r] = 0
        if not self.e.mla_notif_remote_id:
            n.late[r] = 1
            return
        held = o.eq(s.p_phase[r], P_HELD)
        n.r1_sent[r] = o.ite(held, 1, s.r1_sent[r])
        n.late[r] = o.ite(held, s.late[r], 1)
        self._finish_sending_all_ranks(s, n, r, o.and_(held, o.eq(s.r0_sent[r], 1)))

    # -- V2 (#58222): the reaper that stops at the first live lease; a hung READ ------------------------
    # Appended after every earlier action so that the earlier scenarios keep their action ids.
    @action("prefill", fair=True)
    def prefill_reap_expired_send_leases_in_order(self, s, n):
        """V2 (#58222, found on 0.27.1; #50789): one pass of the reaper before 0.33.0's
        ``_reap_expired_send_leases`` (base_worker.py:3352-3378) learned to scan every entry.
        It walks ``_reqs_to_send`` in insertion order (the order prefill finished the requests:
        ``start_load_kv`` inserts them, pull_worker.py:115-121) and reaps the expired head
        entries, stopping at the first entry whose lease is live ("Sorted dict, oldest requests
        are put first so we can exit early").  ``_handle_heartbeat`` (base_worker.py:3380-3400)
        extends a lease in place, so a heartbeated head can sit in front of expired entries:
        the pass then reaps nothing (a step that changes no state) and their blocks stay held
        while the head lives.  Runs on every ``get_transfer_results`` (fair) when some lease has
        run out; only with ``reaper_scans_every_lease = false`` (0.33.0 runs
        :meth:`prefill_reap_expired_lease` instead)."""
        o = s.ops
        s.require(self.e.kv_lease_expires and not self.e.reaper_scans_every_lease)
        held = [o.eq(s.p_phase[r], P_HELD) for r in self.reqs]
        expired = [o.and_(held[r], o.eq(s.lease[r], 0)) for r in self.reqs]
        s.require(o.any_(expired))
        blocked = o.const(False)  # a live entry came first: the loop broke
        reaped = []
        for r in self.reqs:  # insertion order: prefill finishes requests in index order
            reap = o.and_(expired[r], o.not_(blocked))
            blocked = o.or_(blocked, o.and_(held[r], o.gt(s.lease[r], 0)))
            n.p_phase[r] = o.ite(reap, P_EXPIRED, s.p_phase[r])
            reaped.append(reap)
        for q in range(self.k.P):  # every block a reaped request holds (V11: its prefix block too)
            mine = [o.and_(reaped[r], o.eq(s.src_owner[q], r + 1),
                           o.or_(o.eq(s.src[r], q), o.eq(s.src_prefix[r], q)) if self.k.prefix else o.eq(s.src[r], q))
                    for r in self.reqs]
            n.src_owner[q] = o.ite(o.any_(mine), FREE, s.src_owner[q])

    @action("nixl", "req")
    def nixl_read_hangs(self, s, n, r):
        """A READ that moved its data never completes (``read_may_hang``: a wedged transport,
        no completion and no error, so ``check_xfer_state`` never reports DONE and
        ``_pop_done_transfers`` keeps the handle).  0.33.0's decode has no READ timeout: the
        request stays in ``WAITING_FOR_REMOTE_KVS`` and decode heartbeats it as long as it
        steps (``_send_heartbeats``), so prefill's lease for it never runs out.  The live head
        that strands the expired leases behind it in V2 (#58222)."""
        o = s.ops
        s.require(self.pull and self.e.read_may_hang)
        s.require(o.eq(s.rd[r], RD_TAKEN))
        s.require(o.eq(s.hung[r], 0))
        n.hung[r] = 1

    # -- V14 (#47021): the turn-2 readback of blocks decode pinned for a TTL ------------------------------
    def _turn2_read_expired(self, s, r: int):
        """``_is_turn2_read_expired`` (pull_worker.py:127-136) of ``r``'s turn-2 READ, with #47021
        (``turn2_declines_near_expiry``): ``now + 5 s >= remote_blocks_expiry_time -
        clock_offset``.  In 10-s ticks with the deadline on a tick and an offset ``error`` ticks
        late, that is "the deadline passed at least ``error`` ticks ago": with an exact offset a
        deadline already passed (``lease`` at 0), with an offset a tick off only one passed a
        tick or more ago (``overdue``; found by ``kvproof conform --random``: the model declined
        nothing).  False before #47021."""
        o = s.ops
        if not self.e.turn2_declines_near_expiry:
            return o.const(False)
        if self.e.turn2_clock_offset_error:
            return o.and_(o.eq(s.lease[r], 0), o.ge(s.overdue[r], self.e.turn2_clock_offset_error))
        return o.eq(s.lease[r], 0)

    @action("decode", "req", fair=True)
    def decode_decline_turn2_read(self, s, n, r):
        """V14 with #47021: the reader's ``_read_blocks_for_req`` (pull_worker.py:160-171) finds
        ``_is_turn2_read_expired`` true: it logs "Declining expired remote read", counts
        ``record_kv_expired_req`` and runs ``_handle_failed_transfer``'s state cleanup, so the
        request is reported in ``failed_recving`` and, with ``kv_load_failure_policy = "fail"``
        (the default), ends in ``FINISHED_ERROR`` with its block freed.  No READ is posted and no
        notification goes to the holder, whose blocks wait for the TTL.  The check reads the
        exported deadline and the handshake's clock offset, not the holder's state: it is not a
        drain proof, a READ it lets through may outlive the deadline."""
        o = s.ops
        s.require(self.e.turn2_read)
        s.require(o.eq(s.d_phase[r], D_WAITING))
        s.require(self._running(s))
        s.require(self._turn2_read_expired(s, r))
        n.d_phase[r] = D_ENDED
        n.outcome[r] = OUT_ERROR
        self._free(s, n, r, "owner", "dest")
    # -- V8: pull with per-rank READs (hetero TP), a READ that fails, #56104; V17: a re-registered --
    # prefill KV cache.  Declared after every other action so that the earlier scenarios keep
    # their action ids.
    @action("decode", "req", fair=True)
    def decode_read_blocks_for_req(self, s, n, r):
        """Pull with per-rank READs (``read_fan_in``, V8): decode's worker ``start_load_kv`` ->
        ``_read_blocks_for_req`` (pull_worker.py:138-372) builds one ``ReadSpec`` per prefill
        rank of ``tp_mappings[engine].all_source_ranks`` (prefill's ``tp_size`` a multiple of
        decode's: ``tp_ratio < 0``) and posts each with ``_read_blocks``:
        ``make_prepped_xfer("READ", ..., notif_msg="{req}:{local_consumers}")`` and ``transfer``,
        every handle appended to ``_recving_transfers[req]`` (sibling handles).  Each READ
        reads its prefill rank's part (its heads) of the block into decode's part.  V17: the
        READs use decode's cached descriptors of prefill; with the registration check (0.33.0,
        pull_worker.py:146-151) a request carrying a newer ``remote_registration_generation``
        first makes decode drop them (``_cleanup_remote_engine``) and handshake again
        (instantaneous here), without it the old ones are used."""
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.d_phase[r], D_WAITING))
        s.require(self._running(s))
        n.d_phase[r] = D_READING
        for w in range(self.k.F):
            n.wr[r, w] = RD_POSTED
        if self.e.prefill_reregisters:  # V17: whose registration the READs' descriptors name
            handshake = o.eq(s.d_gen, 0)  # no agent of prefill's yet: _background_nixl_handshake
            if self.e.registration_generation_check:  # newer: _cleanup_remote_engine, handshake again
                handshake = o.or_(handshake, o.gt(o.add(s.gen[r], 1), s.d_gen))
            loaded = o.ite(handshake, s.p_gen, o.add(s.d_gen, -1))
            n.d_gen = o.add(loaded, 1)
            n.rgen[r] = loaded

    @action("nixl", "req", "wrank", fair=True)
    def nixl_read_take_data_part(self, s, n, r, w):
        """Pull, per-rank READs (V8): the READ of prefill rank ``w``'s part moves its data at
        some moment between post and completion: that part of decode's block receives what
        prefill's block holds NOW, whoever owns decode's block now (a sibling READ still
        writing a block the scheduler freed and reused: V8 before #56104)."""
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.wr[r, w], RD_POSTED))
        n.wr[r, w] = RD_TAKEN
        took = s.src_content[s.src[r]]
        if self.e.prefill_reregisters:  # V17: descriptors of a released registration read no KV of prefill's
            took = o.ite(o.eq(s.rgen[r], s.p_gen), took, UNWRITTEN)
        n.content[w, s.dest[r]] = took

    @action("nixl", "req", "wrank", fair=True)
    def nixl_read_complete_part(self, s, n, r, w):
        """Pull, per-rank READs (V8): rank ``w``'s READ completes (``check_xfer_state`` DONE)
        and NIXL delivers its ``"{req}:1"`` to prefill rank ``w`` after the data movement."""
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.wr[r, w], RD_TAKEN))
        n.wr[r, w] = RD_DONE
        n.wnotif[r, w] = WN_DONE

    @action("nixl", "req", "wrank")
    def nixl_read_fails_part(self, s, n, r, w):
        """Pull (``read_may_fail``, V8): rank ``w``'s posted READ fails (``check_xfer_state``
        returns ``ERR``: a transport fault) before moving its data; NIXL sends prefill rank
        ``w`` no notification, so only its lease frees prefill's block.  Its sibling READs go
        on: "Posted transfers cannot be aborted" (#56104)."""
        o = s.ops
        s.require(self.k.pull_ranked and self.e.read_may_fail)
        s.require(o.eq(s.wr[r, w], RD_POSTED))
        n.wr[r, w] = RD_FAILED

    @action("prefill", "req", "wrank", fair=True)
    def prefill_get_new_notifs_part(self, s, n, r, w):
        """Pull, per-rank READs (V8): prefill rank ``w``'s worker polls NIXL
        (``_get_new_notifs``, pull_worker.py:650-701) and finds its READ's ``"{req}:1"``: its
        count reaches the one consumer it expects, so rank ``w`` reports ``finished_sending``;
        the scheduler frees the block once every rank reported (``KVOutputAggregator``), here
        when this is the last rank's notification and the others' were consumed.  After the
        lease expired it is the "unrecognized request" branch: a log line, nothing more (V1)."""
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.wnotif[r, w], WN_DONE))
        n.wnotif[r, w] = WN_NONE
        held = o.eq(s.p_phase[r], P_HELD)
        others = [o.and_(o.eq(s.wr[r, x], RD_DONE), o.eq(s.wnotif[r, x], WN_NONE)) for x in range(self.k.F) if x != w]
        n.late[r] = o.ite(held, s.late[r], 1)
        self._finish_sending_all_ranks(s, n, r, o.and_(held, *others))

    @action("decode", "req", fair=True)
    def decode_pop_done_transfers(self, s, n, r):
        """Pull, per-rank READs (V8): decode's worker ``get_transfer_results`` polls the
        request's handles (``_pop_done_transfers``, base_worker.py:3402-3452) and a decode step
        applies what it reports.  Every READ done: ``finished_recving``, the request is cached
        and runs on its block (every rank's part of it).  A READ failed: ``failed_recving``,
        and ``kv_load_failure_policy = "fail"`` (0.33.0's default) ends the request in
        ``FINISHED_ERROR`` (``finish_requests``) and ``_update_from_kv_xfer_finished`` frees its
        blocks.  With #56104 (``failure_waits_for_siblings``) ``_pop_done_transfers`` retains the
        sibling handles still in progress and ``get_transfer_results`` reports a request of
        ``_recv_failures`` only once it has no handle left (base_worker.py:3198-3227), so the
        blocks are freed after every sibling READ stopped; before it the first failed handle
        reported the load failed while sibling READs still wrote into the blocks the scheduler
        then reused (V8)."""
        o = s.ops
        s.require(self.k.pull_ranked)
        s.require(o.eq(s.d_phase[r], D_READING))
        s.require(self._running(s))
        xs = [s.wr[r, w] for w in range(self.k.F)]
        ok = o.all_(o.eq(x, RD_DONE) for x in xs)
        if self.e.read_may_fail or self.e.read_post_may_fail:
            failed = o.any_(o.eq(x, RD_FAILED) for x in xs)
            if self.k.release_may_fail:  # V8's third path: a handle whose release failed
                # 0.33.0 retains it (not stopped: the failure waits); HYPOTHETICAL: dropped, so
                # the failure is reported with its DMA possibly still moving data
                failed = o.any_(o.is_in(x, (RD_FAILED, RD_RETAINED)) for x in xs)
                if self.e.retains_unreleased_handle:
                    failed = o.and_(o.any_(o.eq(x, RD_FAILED) for x in xs),
                                    o.all_(o.ne(x, RD_RETAINED) for x in xs))
            if self.e.failure_waits_for_siblings:  # a sibling never posted (after a failed post) has stopped too
                stopped = (RD_DONE, RD_FAILED, RD_NONE) if self.e.read_post_may_fail else (RD_DONE, RD_FAILED)
                if self.k.release_may_fail and not self.e.retains_unreleased_handle:
                    stopped += (RD_RETAINED,)  # the dropped handle is no longer in _recving_transfers
                failed = o.and_(failed, o.all_(o.is_in(x, stopped) for x in xs))
            s.require(o.or_(ok, failed))
            n.outcome[r] = o.ite(ok, OUT_SUCCESS, OUT_ERROR)
        else:
            s.require(ok)
            n.outcome[r] = OUT_SUCCESS
        n.read[r] = o.ite(ok, self._classify(s, r), s.read[r])
        n.d_phase[r] = D_ENDED
        self._free(s, n, r, "owner", "dest")

    @action("prefill")
    def prefill_reregister_kv_caches(self, s, n):
        """V17 (``prefill_reregisters``): prefill sleeps (level 1: its KV cache is discarded;
        ``release_kv_cache_memory`` needs a completed pause and no request, so it holds none)
        and wakes up: ``EngineCore.wake_up`` re-registers the KV cache at new memory and
        ``_set_kv_connector_handshake_metadata`` -> ``set_xfer_handshake_metadata``
        (base_scheduler.py:296-322) bumps ``_registration_generation``.  Requests prefilled from
        now on carry the new ``remote_registration_generation``; decode's cached descriptors
        still name the released memory."""
        o = s.ops
        s.require(self.e.prefill_reregisters)
        s.require(o.eq(s.p_gen, 0))
        s.require(o.all_(o.ne(s.p_phase[r], P_HELD) for r in self.reqs))
        n.p_gen = 1
        for r in self.reqs:
            n.gen[r] = o.ite(o.eq(s.p_phase[r], P_NEW), 1, s.gen[r])
        for q in range(self.k.P):
            n.src_content[q] = UNWRITTEN  # the new memory: the old KV was discarded

    @action("decode", "req", "wrank")
    def decode_read_blocks_post_fails(self, s, n, r, w):
        """Pull (``read_post_may_fail``, V8): decode's ``_read_blocks_for_req`` posts the READs
        of ranks before ``w`` and ``_read_blocks`` fails to post rank ``w``'s
        (``make_prepped_xfer`` or ``transfer`` raises; pull_worker.py:536-567): the request goes
        to ``_recv_failures`` and, with #56104, ``_read_blocks`` returns ``False`` and the loop
        (361-375) posts no later sibling; the earlier READs go on.  Before #56104 the loop posted
        the later siblings all the same."""
        o = s.ops
        s.require(self.k.pull_ranked and self.e.read_post_may_fail)
        s.require(o.eq(s.d_phase[r], D_WAITING))
        s.require(self._running(s))
        n.d_phase[r] = D_READING
        for x in range(self.k.F):
            if x == w:
                n.wr[r, x] = RD_FAILED
            elif x < w or not self.e.failure_waits_for_siblings:
                n.wr[r, x] = RD_POSTED

    # -- V8's third path (0.33.0): a failed READ whose handle release fails ----------------------------
    # (``read_release_may_fail``).  Declared after every other action so that the earlier scenarios
    # keep their action ids.
    @action("decode", "req", "wrank")
    def decode_try_release_xfer_handle_fails(self, s, n, r, w):
        """Pull (``read_release_may_fail``, V8's third path): decode's poll (``get_transfer_results``
        -> ``_pop_done_transfers``, base_worker.py:3402-3452) finds rank ``w``'s posted READ in an
        error state before it moved its data, but the status error did not stop the backend's
        DMA, and ``_handle_failed_transfer`` -> ``_try_release_xfer_handle`` (3454-3467) fails to
        release the handle (NIXL refuses to release an active transfer): the request is in
        ``_recv_failures`` and, in 0.33.0, the handle stays in ``_recving_transfers`` ("Retaining
        handle and blocks until release succeeds"), so ``get_transfer_results`` does not report the
        load yet.  With ``retains_unreleased_handle = false`` (HYPOTHETICAL) the handle is dropped
        and the failure is reported as if the READ had stopped.  No notification reaches prefill
        rank ``w``."""
        o = s.ops
        s.require(self.k.release_may_fail)
        s.require(o.eq(s.wr[r, w], RD_POSTED))
        s.require(o.eq(s.d_phase[r], D_READING))
        s.require(self._running(s))
        n.wr[r, w] = RD_RETAINED

    @action("nixl", "req", "wrank")
    def nixl_read_lands_after_error_part(self, s, n, r, w):
        """Pull (``read_release_may_fail``, V8's third path): the DMA of rank ``w``'s READ, whose
        status was an error and whose handle could not be released, still moves its data: that
        part of decode's block receives what prefill's block holds now, whoever owns decode's
        block now (the hazard when the failure was reported and the block freed and reused).  It
        may land at any time until a release succeeds (and again: a still-running DMA)."""
        o = s.ops
        s.require(self.k.release_may_fail)
        s.require(o.eq(s.wr[r, w], RD_RETAINED))
        n.content[w, s.dest[r]] = s.src_content[s.src[r]]

    @action("decode", "req", "wrank", fair=True)
    def decode_retry_release_xfer_handle(self, s, n, r, w):
        """Pull (``read_release_may_fail``, 0.33.0): a later poll of decode's retained handle
        (``_pop_done_transfers``: ``check_xfer_state`` still an error, ``_try_release_xfer_handle``
        again) releases it: the backend stopped the DMA, the handle leaves ``_recving_transfers``
        and the request's failure can be reported once no sibling is in progress.  Only when the
        handle was retained (``retains_unreleased_handle``, 0.33.0)."""
        o = s.ops
        s.require(self.k.release_may_fail and self.e.retains_unreleased_handle)
        s.require(o.eq(s.wr[r, w], RD_RETAINED))
        s.require(o.eq(s.d_phase[r], D_READING))
        s.require(self._running(s))
        n.wr[r, w] = RD_FAILED
