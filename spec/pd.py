"""The PD KV page lifecycle: one request's path through prefill, the transfer and decode.

Every action is named after the SGLang code path it stands for (``python/sglang/srt/``) and
says which hazard of ``reference/sglang-pd-hazards.md`` it takes part in.  The claims live in
:mod:`.pd_claims`, the trace story in :mod:`.pd_story`.

Modelling choices, each stated once here:

* Allocation takes the lowest-numbered free pages, as SGLang's paged allocator does after
  ``merge_and_sort_free``; released pages keep their content, which is how stale KV is reused.
* A chunk is one page.  Writes land at any later step; with ``write_latency_bound`` set, time
  cannot pass while a write has reached that age.
* Control messages (ABORT) reach prefill before time passes; the data-plane writes carry the
  latency.  Acks travel without that guarantee and may be lost (``lossy_drain_acks``).
* Decode's commit, checksum check and read of the pages are one step: the read happens before
  any later write can land.
"""

from __future__ import annotations

from functools import cached_property
from itertools import permutations

from .config import Config
from .framework import Spec, action
from .layout import Domain, Field
from .ops import ConcreteOps
from .pd_claims import PdClaims
from .pd_state import (
    ACK_DRAIN, ACK_NONE, ACK_RECEIPT, D_ENDED, D_HELD, D_NEW, D_RESERVED, D_WAITING, FREE,
    OUT_ABORTED, OUT_ERROR, OUT_NONE, OUT_SUCCESS, P_ENDED, P_NEW, P_QUEUED, P_SENDING,
    P_STOPPED, PAB_ACKED, PAB_NONE, PAB_RECEIVED, POLL_FAILED, POLL_NONE, POLL_SUCCESS,
    READ_CROSS_TENANT, READ_FOREIGN, READ_NONE, READ_OWN, UNWRITTEN, WR_FLIGHT, WR_LANDED,
    WR_NOT_ISSUED, Codes, build_fields,
)
from .pd_story import PdStory
from .pd_symmetry import PdSymmetry

__all__ = ["PdProtocol", "exceeds_input_limit"]


def exceeds_input_limit(o, pages, context_limit, prefill_pool):
    """``validate_input_length`` in pages: a prompt longer than ``min(context, pool)`` is
    rejected (H1; the deployment's context limit exceeded its prefill pool).  Written with the
    ops facade so the symbolic engine can take the sizes as unknowns."""
    return o.gt(pages, o.min_(context_limit, prefill_pool))


class PdProtocol(PdClaims, PdStory, PdSymmetry, Spec):
    """The protocol instance for one :class:`Config`.  Subclass and override one action or
    helper to describe another engine's behaviour (see the README)."""

    def __init__(self, cfg: Config):
        problems = cfg.problems()
        if problems:
            raise ValueError(problems[0])
        self.cfg = cfg
        self.e = cfg.engine
        self.k = Codes(cfg)

    # -- structure ---------------------------------------------------------------------------
    def build_fields(self) -> list[Field]:
        """See :func:`.pd_state.build_fields`."""
        return build_fields(self.k)

    def domain(self, name: str) -> Domain:
        """Parameter domains: ``req``, ``chunk``, ``pick`` (an allocation choice)."""
        if name == "pick":
            return self._pick_domain
        return {"req": self.k.req, "chunk": self.k.chunk}[name]

    def picks(self, k: int) -> list[tuple[int, ...]]:
        """The allocation choices of ``k`` decode pages with ``any_free_pages``: every ordered
        ``k``-tuple of distinct pages (chunk ``c`` goes to the ``c``-th); none without it."""
        if not self.e.any_free_pages:
            return []
        return list(permutations(range(self.k.D), k))

    @cached_property
    def _pick_domain(self) -> Domain:
        size = max([len(self.picks(r.pages)) for r in self.cfg.requests] + [1])
        return Domain("pick", size)

    # -- static facts about requests (plain Python: configuration, not state) ---------------
    @cached_property
    def max_input_pages(self) -> int:
        """The longest prompt admission accepts, in pages."""
        return min(self.cfg.context_limit, self.cfg.prefill_pages)

    def pages(self, r: int) -> int:
        """Prompt length of request ``r`` in pages: what decode reserves."""
        return self.cfg.requests[r].pages

    def over_long(self, r: int) -> bool:
        """Request ``r`` fails ``validate_input_length``."""
        c = self.cfg
        return exceeds_input_limit(ConcreteOps(()), self.pages(r), c.context_limit, c.prefill_pages)

    def pending_error(self, r: int) -> bool:
        """Request ``r`` is queued at prefill with a pending error and a one-token placeholder."""
        return self.over_long(r) and not self.e.reject_at_prefill_door

    def send_len(self, r: int) -> int:
        """Chunks prefill sends: the placeholder's one page, or the whole prompt."""
        return 1 if self.pending_error(r) else self.pages(r)

    @property
    def deferred(self) -> bool:
        """Decode holds an aborted request's pages instead of releasing them at once."""
        return self.e.release_policy != "immediate"

    @property
    def checksum_active(self) -> bool:
        """The transfer checksum is on and the model supports it."""
        return self.e.checksum and self.e.model_supports_checksum

    # -- helpers shared by actions -------------------------------------------------------------
    def _in_order(self, s, phase_field: str, new: int, r: int):
        """FIFO admission: request ``r`` reaches a door only after ``r - 1`` did."""
        o = s.ops
        if not self.e.ordered_arrivals or r == 0:
            return o.const(True)
        return o.ne(getattr(s, phase_field)[r - 1], new)

    def _allocate(self, s, n, r: int, k: int, owner: str, table: str, size: int, content=None):
        """Reserve the ``k`` lowest-numbered free pages of a pool for ``r`` (guarded).

        Writes the chosen page of each chunk into ``table`` and marks the pages owned; with
        ``content``, also fills them with ``r``'s KV (the prefill forward pass).
        """
        o = s.ops
        own = getattr(s, owner)
        free = [o.eq(own[p], FREE) for p in range(size)]
        ranks, seen = [], o.const(0)
        for p in range(size):
            ranks.append(seen)
            seen = o.add(seen, o.ite(free[p], o.const(1), o.const(0)))
        s.require(o.ge(seen, k))
        for c in range(k):
            chosen = o.const(size)  # NONE
            for p in reversed(range(size)):
                chosen = o.ite(o.and_(free[p], o.eq(ranks[p], c)), o.const(p), chosen)
            getattr(n, table)[r, c] = chosen
        for p in range(size):
            taken = o.and_(free[p], o.lt(ranks[p], k))
            getattr(n, owner)[p] = o.ite(taken, r + 1, own[p])
            if content is not None:
                getattr(n, content)[p] = o.ite(taken, r + 1, getattr(s, content)[p])

    def _release_decode(self, s, n, r: int, when=True):
        """``release_kv_cache`` on decode: free ``r``'s destination pages where ``when`` holds.

        Contents stay: the next owner finds the old KV until it is overwritten."""
        o = s.ops
        for c in range(self.pages(r)):
            p = s.dest[r, c]
            n.owner[p] = o.ite(o.and_(when, o.eq(s.owner[p], r + 1)), FREE, s.owner[p])

    def _release_source(self, s, n, r: int, when=True):
        """Free ``r``'s prefill source pages (those it still owns) where ``when`` holds."""
        o = s.ops
        for c in range(self.send_len(r)):
            q = s.src[r, c]
            n.src_owner[q] = o.ite(o.and_(when, o.eq(s.src_owner[q], r + 1)), FREE, s.src_owner[q])

    def _writes_in_flight(self, s, r: int):
        """Some chunk write of ``r`` is still in flight."""
        o = s.ops
        return o.any_(o.ge(s.wr[r, c], WR_FLIGHT) for c in range(self.send_len(r)))

    # -- prefill: admission and forward ----------------------------------------------------------
    @action("prefill", "req")
    def prefill_bootstrap_add(self, s, n, r):
        """Prefill admits the request: ``PrefillBootstrapQueue.add`` after
        ``validate_input_length``.  H1: an over-long prompt gets a pending error and a one-token
        placeholder and is queued anyway, unless PR 38935 rejects it at this door."""
        o = s.ops
        s.require(o.eq(s.p_phase[r], P_NEW))
        s.require(self._in_order(s, "p_phase", P_NEW, r))
        if self.over_long(r) and self.e.reject_at_prefill_door:
            n.p_phase[r] = P_ENDED
            n.outcome[r] = o.ite(o.eq(s.outcome[r], OUT_NONE), OUT_ERROR, s.outcome[r])
        else:
            n.p_phase[r] = P_QUEUED

    @action("prefill", "req")
    def prefill_forward(self, s, n, r):
        """Prefill runs the forward pass once bootstrap finished (decode published its
        destination, so the request left ``PrefillBootstrapQueue``): allocates source pages in
        its pool and computes the KV into them (H8: these are the pages the transfer reads).
        With PR 36988 a pending-error request is retired here instead: nothing is sent and the
        transfer concludes Failed."""
        o = s.ops
        s.require(o.eq(s.p_phase[r], P_QUEUED))
        s.require(o.eq(s.meta[r], 1))
        if self.pending_error(r) and self.e.retire_pending_error_prefill:
            n.p_phase[r] = P_ENDED
            n.poll[r] = POLL_FAILED
            return
        self._allocate(s, n, r, self.send_len(r), "src_owner", "src", self.k.P, content="src_content")
        n.p_phase[r] = P_SENDING

    # -- decode: admission, reservation, metadata --------------------------------------------
    @action("decode", "req")
    def decode_prealloc(self, s, n, r):
        """Decode admits and reserves: ``DecodePreallocQueue.add`` / ``_pre_alloc`` reserve
        pages for the ORIGINAL prompt length (H1: the placeholder will fill only one), unless
        PR 38935 rejects the over-long prompt at this door first."""
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_NEW))
        s.require(self._in_order(s, "d_phase", D_NEW, r))
        if self.over_long(r) and self.e.reject_at_decode_door:
            n.d_phase[r] = D_ENDED
            n.outcome[r] = o.ite(o.eq(s.outcome[r], OUT_NONE), OUT_ERROR, s.outcome[r])
            return
        s.require(o.eq(s.outcome[r], OUT_NONE))
        s.require(not self.e.any_free_pages)  # then decode_prealloc_pick reserves
        self._allocate(s, n, r, self.pages(r), "owner", "dest", self.k.D)
        n.d_phase[r] = D_RESERVED

    @action("decode", "req")
    def decode_send_metadata(self, s, n, r):
        """Decode publishes the destination page indices: ``CommonKVReceiver.send_metadata``.
        From here on a prefill writer knows the pages (H7: releasing at once is safe only
        before this step)."""
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_RESERVED))
        n.d_phase[r] = D_WAITING
        n.meta[r] = 1

    # -- the transfer -----------------------------------------------------------------------------
    @action("transfer", "req", "chunk")
    def kv_transfer_write(self, s, n, r, c):
        """The prefill transfer worker issues chunk ``c``'s RDMA write to its published
        destination page (chunks in order).  H2: once issued, it lands whenever it lands."""
        o = s.ops
        s.require(c < self.send_len(r))
        s.require(o.eq(s.p_phase[r], P_SENDING))
        s.require(o.eq(s.meta[r], 1))
        s.require(o.eq(s.wr[r, c], WR_NOT_ISSUED))
        if c > 0:
            s.require(o.ne(s.wr[r, c - 1], WR_NOT_ISSUED))
        n.wr[r, c] = WR_FLIGHT

    @action("transfer", "req", "chunk")
    def kv_write_lands(self, s, n, r, c):
        """An in-flight write lands: the destination page receives whatever the source page
        holds NOW (H8: a reused source page sends another request's KV), and it lands whoever
        owns the destination now (H2: a released page may belong to the next request)."""
        o = s.ops
        s.require(c < self.send_len(r))
        s.require(o.ge(s.wr[r, c], WR_FLIGHT))
        n.wr[r, c] = WR_LANDED
        n.content[s.dest[r, c]] = s.src_content[s.src[r, c]]

    @action("prefill", "req")
    def prefill_transfer_done(self, s, n, r):
        """The sender concludes ``KVPoll.Success`` once every chunk it sends has landed, and
        prefill frees its source pages.  H1: for a placeholder that is one chunk, whatever
        decode reserved."""
        o = s.ops
        s.require(o.eq(s.p_phase[r], P_SENDING))
        s.require(o.all_(o.eq(s.wr[r, c], WR_LANDED) for c in range(self.send_len(r))))
        n.p_phase[r] = P_ENDED
        n.poll[r] = POLL_SUCCESS
        self._release_source(s, n, r)

    @action("prefill", "req")
    def prefill_transfer_failed(self, s, n, r):
        """The transfer fails on the prefill side (a fault, a transport error, an abort seen by
        prefill): the sender concludes ``KVPoll.Failed`` and stops issuing; issued writes still
        land (H7).  Without the H8 fix the source pages are freed right here."""
        o = s.ops
        s.require(self.e.transfer_failures)
        s.require(o.eq(s.p_phase[r], P_SENDING))
        n.p_phase[r] = P_STOPPED
        n.poll[r] = POLL_FAILED
        if not self.e.hold_source_until_drained:
            self._release_source(s, n, r)

    # -- decode: commit, failure, abort ---------------------------------------------------------
    @action("decode", "req")
    def decode_commit(self, s, n, r):
        """``DecodeTransferQueue.pop_transferred`` sees Success, verifies the checksum (PR
        39500, when on and supported) and decode runs over every reserved page.  H1/H2/H8: what
        it reads is recorded in ``read``; the pages are released when the request finishes."""
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_WAITING))
        s.require(o.eq(s.poll[r], POLL_SUCCESS))
        k = self.k
        found = o.const(READ_OWN)
        intact = o.const(True)
        for c in range(self.pages(r)):
            held = s.content[s.dest[r, c]]
            own = o.eq(held, r + 1)
            cross = o.and_(
                o.ne(held, UNWRITTEN), o.ne(o.lookup(k.tenant_of_content, held), k.tenant[r])
            )
            found = o.max_(found, o.ite(own, READ_OWN, o.ite(cross, READ_CROSS_TENANT, READ_FOREIGN)))
            intact = o.and_(intact, own, o.eq(s.wr[r, c], WR_LANDED))
        if self.checksum_active:
            n.outcome[r] = o.ite(intact, OUT_SUCCESS, OUT_ERROR)
            n.read[r] = o.ite(intact, found, READ_NONE)
        else:
            n.outcome[r] = OUT_SUCCESS
            n.read[r] = found
        n.d_phase[r] = D_ENDED
        self._release_decode(s, n, r)

    @action("decode", "req")
    def decode_poll_failed(self, s, n, r):
        """``pop_transferred``'s Failed branch.  Before PR 41404 it releases at once even though
        other chunks may still be writing (H7); with it, a request whose metadata was published
        arms the abort and is held like an aborted one."""
        o = s.ops
        s.require(o.eq(s.poll[r], POLL_FAILED))
        s.require(o.is_in(s.d_phase[r], (D_NEW, D_RESERVED, D_WAITING)))
        n.outcome[r] = o.ite(o.eq(s.outcome[r], OUT_NONE), OUT_ERROR, s.outcome[r])
        defer = o.and_(self.e.defer_on_every_failure and self.deferred, o.eq(s.d_phase[r], D_WAITING))
        n.d_phase[r] = o.ite(defer, D_HELD, D_ENDED)
        n.abort_tx[r] = o.ite(defer, 1, s.abort_tx[r])
        n.hold[r] = 0
        self._release_decode(s, n, r, when=o.and_(o.not_(defer), o.ne(s.d_phase[r], D_NEW)))

    @action("decode", "req")
    def decode_abort(self, s, n, r):
        """The client aborts at decode (``/abort_request`` -> ``CommonKVReceiver.abort``), which
        sends ABORT to prefill (PR 27372).  H2: before PR 35049 the pages are released at once
        while a write may be in flight; with deferred release they are held in
        ``_deferred_releases``.  Before the metadata is published no writer knows the pages, so
        they are released at once under every policy."""
        o = s.ops
        s.require(self.e.client_aborts)
        s.require(o.eq(s.outcome[r], OUT_NONE))
        s.require(o.is_in(s.d_phase[r], (D_NEW, D_RESERVED, D_WAITING)))
        n.outcome[r] = OUT_ABORTED
        n.abort_tx[r] = 1
        hold = o.and_(self.deferred, o.eq(s.d_phase[r], D_WAITING))
        n.d_phase[r] = o.ite(hold, D_HELD, D_ENDED)
        n.hold[r] = 0
        self._release_decode(s, n, r, when=o.and_(o.not_(hold), o.ne(s.d_phase[r], D_NEW)))

    # -- prefill: abort handling and drain ack ---------------------------------------------------
    @action("prefill", "req")
    def prefill_handle_abort(self, s, n, r):
        """Prefill receives decode's ABORT (``_handle_abort_notification``) and stops issuing
        chunks.  H3: a legacy engine acks receipt right here.  H8: without the fix the source
        pages are freed here, while issued writes may still read them."""
        o = s.ops
        s.require(o.eq(s.abort_tx[r], 1))
        s.require(o.eq(s.p_abort[r], PAB_NONE))
        n.p_abort[r] = PAB_RECEIVED
        ph = s.p_phase[r]
        n.p_phase[r] = o.ite(
            o.is_in(ph, (P_NEW, P_QUEUED)), P_ENDED, o.ite(o.eq(ph, P_SENDING), P_STOPPED, ph)
        )
        if self.e.receipt_ack_taken_as_drain:
            n.ack[r] = ACK_RECEIPT
        if not self.e.hold_source_until_drained:
            self._release_source(s, n, r, when=o.is_in(ph, (P_SENDING, P_STOPPED)))

    @action("prefill", "req")
    def prefill_drain(self, s, n, r):
        """A stopped sender's issued writes have all landed: the request ends on prefill and
        its source pages are freed (the H8 fix frees them only now)."""
        o = s.ops
        s.require(o.eq(s.p_phase[r], P_STOPPED))
        s.require(o.not_(self._writes_in_flight(s, r)))
        n.p_phase[r] = P_ENDED
        self._release_source(s, n, r)

    @action("prefill", "req")
    def prefill_drain_ack(self, s, n, r):
        """Prefill sends the drain ack (``_maybe_ack_drained_abort``, ``ABORT_ACK`` with the
        generation) once the aborted request has drained: the only proof that no write is left
        (H3)."""
        o = s.ops
        s.require(o.eq(s.p_abort[r], PAB_RECEIVED))
        s.require(o.eq(s.p_phase[r], P_ENDED))
        n.p_abort[r] = PAB_ACKED
        n.ack[r] = ACK_DRAIN

    @action("network", "req")
    def net_drop_ack(self, s, n, r):
        """The drain ack is lost on its way to decode (H4), so decode can only time out."""
        o = s.ops
        s.require(self.e.lossy_drain_acks)
        s.require(o.eq(s.ack[r], ACK_DRAIN))
        n.ack[r] = ACK_NONE

    # -- decode: deferred release ----------------------------------------------------------------
    @action("decode", "req")
    def decode_release_deferred(self, s, n, r):
        """``resolve_deferred_releases`` when ``is_abort_release_safe``: the drain ack arrived,
        so the held pages are freed.  H3: a legacy engine takes a receipt ack as that proof."""
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_HELD))
        acks = (ACK_DRAIN, ACK_RECEIPT) if self.e.receipt_ack_taken_as_drain else (ACK_DRAIN,)
        s.require(o.is_in(s.ack[r], acks))
        n.d_phase[r] = D_ENDED
        n.ack[r] = ACK_NONE
        n.hold[r] = 0
        self._release_decode(s, n, r)

    @action("decode", "req")
    def decode_release_timeout(self, s, n, r):
        """``resolve_deferred_releases`` past the deadline ("releasing anyway", PR 35049): the
        held pages are freed without proof that the writes drained (H6)."""
        o = s.ops
        s.require(self.e.release_policy == "drain_ack_or_timeout")
        s.require(o.eq(s.d_phase[r], D_HELD))
        s.require(o.ge(s.hold[r], self.e.timeout))
        n.d_phase[r] = D_ENDED
        n.hold[r] = 0
        self._release_decode(s, n, r)

    # -- time ---------------------------------------------------------------------------------------
    @action("clock")
    def clock_tick(self, s, n):
        """One tick: hold timers and write ages advance (saturating).  Time cannot pass while a
        write has reached the latency bound or an ABORT is undelivered (H6's assumptions)."""
        o = s.ops
        moves, blocks = [], []
        if self.e.release_policy == "drain_ack_or_timeout":
            for r in range(self.k.R):
                run = o.and_(o.eq(s.d_phase[r], D_HELD), o.lt(s.hold[r], self.e.timeout))
                n.hold[r] = o.ite(run, o.add(s.hold[r], 1), s.hold[r])
                moves.append(run)
        bound = self.e.write_latency_bound
        if bound is not None:
            for r in range(self.k.R):
                for c in range(self.send_len(r)):
                    w = s.wr[r, c]
                    run = o.and_(o.ge(w, WR_FLIGHT), o.lt(w, WR_FLIGHT + bound))
                    n.wr[r, c] = o.ite(run, o.add(w, 1), w)
                    moves.append(run)
                    blocks.append(o.eq(w, WR_FLIGHT + bound))
        for r in range(self.k.R):
            blocks.append(o.and_(o.eq(s.abort_tx[r], 1), o.eq(s.p_abort[r], PAB_NONE)))
        s.require(o.any_(moves))
        s.require(o.not_(o.any_(blocks)))

    # -- decode: reservation from an unsorted free list ----------------------------------------------
    @action("decode", "req", "pick")
    def decode_prealloc_pick(self, s, n, r, pick):
        """``DecodePreallocQueue`` reserves the prompt's pages from an allocator that hands out
        any free pages (``any_free_pages``): as ``decode_prealloc``, with allocation choice
        ``pick`` naming which free page each chunk gets (H1 applies alike: the original prompt
        length is reserved).  Rejection at the decode door stays with ``decode_prealloc``."""
        o = s.ops
        choices = self.picks(self.pages(r))
        s.require(pick < len(choices))
        s.require(not (self.over_long(r) and self.e.reject_at_decode_door))
        s.require(o.eq(s.d_phase[r], D_NEW))
        s.require(self._in_order(s, "d_phase", D_NEW, r))
        s.require(o.eq(s.outcome[r], OUT_NONE))
        pages = choices[pick] if pick < len(choices) else ()
        for c, p in enumerate(pages):
            s.require(o.eq(s.owner[p], FREE))
            n.dest[r, c] = p
            n.owner[p] = r + 1
        n.d_phase[r] = D_RESERVED

    # -- request streams ----------------------------------------------------------------------------
    @action("client", "req")
    def client_send(self, s, n, r):
        """A finished request's slot takes the client's next request (request streams only).
        The old request's KV stays in the pools as ``old:<tenant>`` content."""
        o = s.ops
        s.require(self.e.request_streams)
        s.require(o.eq(s.d_phase[r], D_ENDED))
        s.require(o.eq(s.p_phase[r], P_ENDED))
        s.require(o.not_(self._writes_in_flight(s, r)))
        s.require(o.implies(o.eq(s.abort_tx[r], 1), o.ne(s.p_abort[r], PAB_NONE)))
        for f in self.layout.fields:
            if f.dims and f.dims[0] is self.k.req:
                for c in range(f.shape[1] if len(f.dims) == 2 else 1):
                    idx = (r, c) if len(f.dims) == 2 else r
                    getattr(n, f.name)[idx] = f.init
        old = self.k.retired(r)
        for p in range(self.k.D):
            n.content[p] = o.ite(o.eq(s.content[p], r + 1), old, s.content[p])
        for q in range(self.k.P):
            n.src_content[q] = o.ite(o.eq(s.src_content[q], r + 1), old, s.src_content[q])
