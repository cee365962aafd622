"""The PD KV page lifecycle: requests through prefill, the transfer and decode.

Every action is named after the SGLang code path it stands for (``python/sglang/srt/``; the
table in ``spec/sglang/README.md`` lists them) and says which hazard of SGLang's PD history it
takes part in (H1-H13, numbered as in the docs' page *The hazards of SGLang and vLLM*).  The
claims live in :mod:`.claims`, the trace story in :mod:`.story` and :mod:`.narration`.

Modelling choices, each stated once here:

* Allocation takes the lowest-numbered free pages (and aux slots), as SGLang's allocators do
  after ``merge_and_sort_free``; released pages keep their content, which is how stale KV is
  reused.  Tensor-parallel ranks allocate in lockstep, so one page index serves every rank.
* A chunk is one page.  Each prefill rank writes its shard of every chunk; a write lands at any
  later step; with ``write_latency_bound`` set, time cannot pass while a write has reached that
  age.  A page is written for a request only when every shard is.
* Control messages (ABORT) reach a live prefill before time passes unless they are lost; the
  data-plane writes carry the latency.  Acks travel without that guarantee and may be lost.
* Decode's commit, checksum check and read are one step unless ``verify_then_read`` splits the
  read into the running batch's later step.
"""

from __future__ import annotations

from functools import cached_property
from itertools import permutations, product

from kvproof.spec.sglang.config import Config
from kvproof.model.framework import ConfiguredSpec, SpecError, action
from kvproof.model.layout import Domain
from kvproof.model.lifting import indices, lifted, over_approximated, per_element, take_lowest_free
from kvproof.model.ops import ConcreteOps
from kvproof.spec.sglang.claims import PdClaims
from kvproof.spec.sglang.state import (
    ABT_DELIVERED, ABT_NONE, ABT_SENT, ACK_DRAIN, ACK_NONE, ACK_RECEIPT, D_ENDED, D_HELD, D_LIVE,
    D_NEW, D_RESERVED, D_VERIFIED, D_WAITING, FREE, OUT_ABORTED, OUT_ERROR, OUT_NONE, OUT_SUCCESS,
    P_ENDED, P_NEW, P_QUEUED, P_SENDING, P_STOPPED, PAB_ACKED, PAB_CLEARED, PAB_NONE,
    PAB_RECEIVED, POLL_FAILED, POLL_NONE, POLL_SUCCESS, READ_CROSS_TENANT, READ_FOREIGN,
    READ_NONE, READ_OWN, UNWRITTEN, WR_FLIGHT, WR_LANDED, WR_NOT_ISSUED, Codes, WriteTarget, build_fields, kv_of, owned_by,
)
from kvproof.spec.sglang.narration import PdNarration
from kvproof.spec.sglang.story import PdStory
from kvproof.spec.sglang.symmetry import PdSymmetry

# A variant imports everything it needs from this module: the protocol and the state's codes and
# encodings (``D_HELD``, ``WR_FLIGHT``, ``owned_by``, ...), re-exported from :mod:`.state`.
from kvproof.spec.sglang import state as _state  # noqa: E402
from kvproof.spec.sglang.state import *  # noqa: E402,F401,F403

__all__ = ["PdProtocol", "exceeds_input_limit", "RENAMED_HELPERS",
           *[name for name in _state.__all__ if name not in ("Codes", "build_fields")]]

RENAMED_HELPERS = {
    "_in_order": "in_order", "_alive": "prefill_alive", "_allocate": "allocate", "_release_aux": "release_aux",
    "_release_decode": "release_decode", "_release_source": "release_source",
    "_rank_writes_in_flight": "rank_writes_in_flight", "_writes_in_flight": "writes_in_flight",
    "_combine": "combine", "_holds": "hold_decision", "_ready": "release_safe", "_send_abort": "send_abort",
    "_end_or_hold": "end_or_hold", "_classify_read": "classify_read", "_fail": "fail_request",
}
"""The helpers' former private names and their public ones: a subclass defining an old name is
refused (see :meth:`PdProtocol.__init_subclass__`)."""


def exceeds_input_limit(o, pages, context_limit, prefill_pool):
    """``validate_input_length`` in pages: a prompt longer than ``min(context, pool)`` is
    rejected (H1; the deployment's context limit exceeded its prefill pool).  Written with the
    ops facade so the symbolic engine can take the sizes as unknowns."""
    return o.gt(pages, o.min_(context_limit, prefill_pool))


class PdProtocol(PdClaims, PdStory, PdNarration, PdSymmetry, ConfiguredSpec):
    """The protocol instance for one :class:`Config` (refused with ``ValueError`` when the
    configuration has a problem; kept as ``cfg``, its engine as ``e``, its :class:`~.state.Codes`
    as ``k``).  Subclass and override one action or helper to describe another engine's
    behaviour (the docs: *Your own engine variant*)."""

    codes = Codes
    fields_of = staticmethod(build_fields)

    def __init_subclass__(cls, **kwargs):
        """Refuse a variant that overrides a helper under its old private name (the override
        would silently never run)."""
        super().__init_subclass__(**kwargs)
        for old, new in RENAMED_HELPERS.items():
            if old in vars(cls):
                raise SpecError(f"{cls.__name__}.{old}: the helper is public now: override {new} instead")

    models_client_rooms = False
    """Whether the protocol models client-chosen rooms (the room-keyed maps two requests of one
    room share); the base protocol does not, :class:`~.v0523.Sglang0523` does."""

    def config_problems(self, cfg: Config) -> list[str]:
        """Client-chosen rooms (``engine.room_policy = "client"``) on a class that does not
        model them."""
        if cfg.engine.room_policy == "client" and not self.models_client_rooms:
            return [f"engine.room_policy: {type(self).__name__} does not model client-chosen rooms "
                    "(protocol = \"sglang-0.5.23\" does)"]
        return []

    # -- structure ---------------------------------------------------------------------------
    def domain(self, name: str) -> Domain:
        """Parameter domains: ``req``, ``chunk``, ``prank`` (prefill rank), ``drank``,
        ``stream`` (a prefill rank's write stream for one layer), ``pick`` (an allocation
        choice)."""
        k = self.k
        if name == "pick":
            return self._pick_domain
        return {"req": k.req, "chunk": k.chunk, "prank": k.prank, "drank": k.drank, "stream": k.stream}[name]

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

    def lift_sorts(self):
        """The lift to sorts reads requests, decode pages, prefill pages and chunks as sorts
        (``rnone``: ``free`` as an owner and ``unwritten`` as a content; ``pnone``/``qnone``: no
        page); owner and content codes name requests (``owned_by``, ``kv_of``: offset 1), page
        references name pages (NONE the last code); a request's tenant, looked up by request or
        by content code, is a rigid function; chunk 0 (a placeholder's one chunk) is the
        constant ``cfirst``.  Ranks, layers, shards and aux slots stay at the scenario's size."""
        from kvproof.model.sorted_lift import SortDecl
        k = self.k
        return SortDecl(
            sorts={"request": ("Req", "rnone"), "page": ("Page", "pnone"), "prefill_page": ("PPage", "qnone"),
                   "chunk": ("Chunk", None)},
            refs={"owner": ("request", FREE, 1), "content": ("request", UNWRITTEN, 1),
                  "page_or_none": ("page", None, 0), "prefill_page_or_none": ("prefill_page", None, 0)},
            tables=((k.tenant, "request", "tenant", "Tenant"), (k.tenant_of_content, "content", "tenant", "Tenant")),
            firsts={"chunk": "cfirst"})

    def small_instances(self):
        """What the all-sizes pipeline mines for the lifted model: two one-page requests of the
        scenario's first tenant on two decode pages and one prefill page (51,492 reachable
        states for v0.5.22's engine), this engine and this class; and, when this engine queues an
        over-long prompt (no rejection at the prefill door, so it sends a one-chunk placeholder
        while decode reserves the whole prompt), also :meth:`_mixed_instance`, where a request's
        sent chunks and reserved pages differ (the one-page requests never show that shape)."""
        import dataclasses

        from kvproof.spec.sglang.config import Request
        cfg = self.cfg
        tenant = cfg.requests[0].tenant
        two = type(self)(dataclasses.replace(cfg, requests=(Request(tenant, 1), Request(tenant, 1)), decode_pages=2,
                                             prefill_pages=1, context_limit=max(cfg.context_limit, 1)))
        return (two,) if self.e.reject_at_prefill_door else (two, self._mixed_instance())

    def _mixed_instance(self):
        """A two-page request (over-long against one prefill page) beside a one-page one of
        another tenant, on two decode pages."""
        import dataclasses

        from kvproof.spec.sglang.config import Request
        cfg = self.cfg
        tenants = list(dict.fromkeys(r.tenant for r in cfg.requests))
        second = tenants[1] if len(tenants) > 1 else tenants[0]
        return type(self)(dataclasses.replace(cfg, requests=(Request(tenants[0], 2), Request(second, 1)),
                                              decode_pages=2, prefill_pages=1, context_limit=max(cfg.context_limit, 2)))

    def link_instances(self):
        """Where ``prove --all-sizes`` proves the lifted model's link with the spec
        first (beside the scenario's own size): one one-page request on one page of each pool;
        the mining instances; a two-page request (over-long against one prefill page) beside a
        one-page one of another tenant, on two decode pages (:meth:`_mixed_instance`, once)."""
        import dataclasses

        from kvproof.spec.sglang.config import Request
        cfg = self.cfg
        tenants = list(dict.fromkeys(r.tenant for r in cfg.requests))
        one = type(self)(dataclasses.replace(cfg, requests=(Request(tenants[0], 1),), decode_pages=1, prefill_pages=1,
                                             context_limit=max(cfg.context_limit, 1)))
        mined = self.small_instances()
        return (one, *mined, *((self._mixed_instance(),) if self.e.reject_at_prefill_door else ()))

    def link_size(self) -> str:
        """``2 requests, 3 decode pages, 1 prefill page``."""
        from kvproof.checker.outcome import plural

        k = self.k
        return f"{plural(k.R, 'request')}, {plural(k.D, 'decode page')}, {plural(k.P, 'prefill page')}"

    def size_label(self) -> str:
        """``N requests (pages ...), D decode pages, P prefill pages``."""
        c = self.cfg
        return (f"{len(c.requests)} request(s) of {'+'.join(str(r.pages) for r in c.requests)} page(s), "
                f"{c.decode_pages} decode and {c.prefill_pages} prefill page(s)")

    # -- static facts (plain Python: configuration, not state) ---------------------------------
    @cached_property
    def max_input_pages(self) -> int:
        """The longest prompt admission accepts, in pages."""
        return min(self.cfg.context_limit, self.cfg.prefill_pages)

    @per_element("count:chunk", at_least_one=True)
    def pages(self, r: int) -> int:
        """Prompt length of request ``r`` in pages: what decode reserves (at least one: the
        configuration refuses an empty prompt)."""
        return self.cfg.requests[r].pages

    @per_element("condition")
    def over_long(self, r: int) -> bool:
        """Request ``r`` fails ``validate_input_length``."""
        c = self.cfg
        return exceeds_input_limit(ConcreteOps(()), self.pages(r), c.context_limit, c.prefill_pages)

    def pending_error(self, r: int) -> bool:
        """Request ``r`` is queued at prefill with a pending error and a one-token placeholder."""
        return not self.e.reject_at_prefill_door and self.over_long(r)

    @per_element("count:chunk", derived=True)
    def send_len(self, r: int) -> int:
        """Chunks each prefill rank sends: the placeholder's one page, or the whole prompt."""
        return 1 if self.pending_error(r) else self.pages(r)

    @property
    def deferred(self) -> bool:
        """Decode holds an aborted request's pages instead of releasing them at once."""
        return self.e.release_policy != "immediate"

    @property
    def checksum_active(self) -> bool:
        """The transfer checksum is on and the model supports it."""
        return self.e.checksum and self.e.model_supports_checksum

    @property
    def prs(self) -> range:
        """Prefill ranks."""
        return range(self.k.PR)

    # -- the public helper API: what actions share, and what a variant overrides or calls --------
    # Each helper models one piece of SGLang's code (named in its docstring); ``spec/sglang/
    # README.md`` lists them.  ``s`` is the pre-state, ``n`` the next state, ``r`` a request.
    @over_approximated("arrivals in any order (the spec: FIFO doors)")
    def in_order(self, s, phase_field: str, new: int, r: int):
        """FIFO admission (``ordered_arrivals``): request ``r`` reaches a door
        (``PrefillBootstrapQueue`` / ``DecodePreallocQueue``) only after ``r - 1`` left phase
        ``new`` of ``phase_field``.  A condition."""
        o = s.ops
        if not self.e.ordered_arrivals or r == 0:
            return o.const(True)
        return getattr(s, phase_field)[r - 1] != new

    def prefill_alive(self, s):
        """The prefill node is alive (with ``peer_death``; always otherwise): a dead node sends,
        handles ABORT and acks nothing.  A condition."""
        return s.p_dead == 0 if self.e.peer_death else s.ops.const(True)

    def allocate(self, s, n, r: int, k: int, owner: str, table: str, size: int, content=None):
        """Reserve the ``k`` lowest-numbered free entries of a pool for ``r`` (guarded: the
        action needs ``k`` free entries): the token-to-KV pool allocator after
        ``merge_and_sort_free`` (``mem_cache/allocator.py``) or ``ReqToMetadataIdxAllocator``.

        Writes the chosen entry of each chunk into ``table`` (a per-chunk table, or a
        per-request field when ``table`` is one-dimensional) and marks them owned; with
        ``content``, also fills them with ``r``'s KV (the prefill forward pass).
        """
        if lifted(s):  # the lift to sorts reads this allocation as any k free entries (an abstraction it prints)
            two_dim = len(self.layout.by_name[table].dims) == 2
            take_lowest_free(s, n, owner, size, k, lambda c: (table, (r, c) if two_dim else r), owned_by(r), FREE,
                             content, kv_of(r))
            return
        o = s.ops
        own = getattr(s, owner)
        free = [own[p] == FREE for p in range(size)]
        ranks, seen = [], o.const(0)
        for p in range(size):
            ranks.append(seen)
            seen = seen + o.ite(free[p], o.const(1), o.const(0))
        s.require(seen >= k)
        two_dim = len(self.layout.by_name[table].dims) == 2
        for c in range(k):
            chosen = o.const(size)  # NONE
            for p in reversed(range(size)):
                chosen = o.ite(free[p] & (ranks[p] == c), o.const(p), chosen)
            getattr(n, table)[(r, c) if two_dim else r] = chosen
        for p in range(size):
            taken = free[p] & (ranks[p] < k)
            getattr(n, owner)[p] = o.ite(taken, owned_by(r), own[p])
            if content is not None:
                getattr(n, content)[p] = o.ite(taken, kv_of(r), getattr(s, content)[p])

    def release_aux(self, s, n, r: int, when=True):
        """Free ``r``'s metadata (aux) slot where ``when`` holds and ``r`` still owns it:
        ``ReqToMetadataIdxAllocator.free`` (``disaggregation/utils.py``).  Nothing without aux
        slots."""
        if not self.k.M:
            return
        o = s.ops
        m = s.aux[r]
        n.aux_owner[m] = o.ite(when & (s.aux_owner[m] == owned_by(r)), FREE, s.aux_owner[m])

    def release_decode(self, s, n, r: int, when=True):
        """``release_kv_cache`` on decode (``mem_cache/common.py``): free ``r``'s destination pages and aux slot where
        ``when`` holds, and forget the room's ack state.  Contents stay: the next owner finds
        the old KV until it is overwritten."""
        o = s.ops
        for c in indices(self.pages(r)):
            p = s.dest[r, c]
            n.owner[p] = o.ite(when & (s.owner[p] == owned_by(r)), FREE, s.owner[p])
        self.release_aux(s, n, r, when)
        n.armed[r] = o.ite(when, 0, s.armed[r])
        for pr in self.prs:
            n.acked[r, pr] = o.ite(when, 0, s.acked[r, pr])

    def release_source(self, s, n, r: int, when=True):
        """Free ``r``'s prefill source pages (those it still owns) where ``when`` holds:
        ``release_kv_cache`` on prefill, from ``process_disagg_prefill_inflight_queue`` (H8: the
        fix holds them until the writes drained)."""
        o = s.ops
        for c in indices(self.send_len(r)):
            q = s.src[r, c]
            n.src_owner[q] = o.ite(when & (s.src_owner[q] == owned_by(r)), FREE, s.src_owner[q])

    def rank_writes_in_flight(self, s, r: int, pr: int):
        """Some write of ``r`` by prefill rank ``pr`` (rank 0: its aux write too) is in flight:
        what rank ``pr``'s ``_maybe_ack_drained_abort`` waits for before the drain ack (H3), and
        what a drain needs gone.  A condition."""
        o = s.ops
        flying = [s.wr[r, w, c] >= WR_FLIGHT for w in self.k.streams_of(pr) for c in indices(self.send_len(r))]
        if self.k.M and pr == 0:
            flying.append(s.aux_wr[r] >= WR_FLIGHT)
        return o.any_(flying)

    def write_targets(self, s) -> list[WriteTarget]:
        """Every write the protocol issues into decode memory, declared as a resource
        (:class:`WriteTarget`: issuing request, in-flight condition, owner field, destination):
        each write stream's write of each chunk into its decode page (``wr`` into ``dest``,
        owned in ``owner``), then each request's aux write into its metadata slot (``aux_wr``
        into ``aux``, owned in ``aux_owner``).  ``no_write_after_release`` iterates over these;
        a variant that adds a kind of write returns ``super().write_targets(s)`` plus its own,
        and the base claim checks it."""
        k = self.k
        out = [WriteTarget(r, s.wr[r, w, c] >= WR_FLIGHT, "owner", s.dest[r, c], "page")
               for r in k.req for w in range(k.S) for c in indices(self.send_len(r))]
        if k.M:
            out += [WriteTarget(r, s.aux_wr[r] >= WR_FLIGHT, "aux_owner", s.aux[r], "aux")
                    for r in k.req]
        return out

    def reserved_targets(self, s) -> list[WriteTarget]:
        """The memory each request reserved that its writes may target, for
        ``release_justified`` (a release of it needs a drain proof): by default every declared
        write target (:meth:`write_targets`, a variant's own included)."""
        return self.write_targets(s)

    def release_needs_reservation(self) -> bool:
        """Whether ``release_justified`` must skip a request decode has not reserved for yet
        (still ``new``): not in the base protocol, where prefill forwards a request only after
        decode reserved and published its metadata; a variant where it may forward earlier says
        so."""
        return False

    def has_reserved(self, s, r: int):
        """Whether decode reserved for ``r`` at some point (a condition), where
        :meth:`release_needs_reservation` asks: by default it left ``new``
        (``DecodePreallocQueue`` reserves as it admits)."""
        return s.d_phase[r] != D_NEW

    def write_dest(self, r: int, w: int, c: int) -> tuple[str, tuple[int, ...]]:
        """Where write stream ``w``'s write of ``r``'s chunk ``c`` lands, as (field, index) for
        narrators reading concrete states: ``dest[r, c]``, the request's own reserved page (a
        protocol whose writes are addressed otherwise, such as 0.5.23 with client rooms,
        answers its own field)."""
        return "dest", (r, c)

    def writes_in_flight(self, s, r: int):
        """Some write of ``r`` (any rank, any chunk, the aux data) is still in flight (a
        condition): :meth:`rank_writes_in_flight` over every prefill rank."""
        return s.ops.any_(self.rank_writes_in_flight(s, r, pr) for pr in self.prs)

    def combine(self, o, per_rank: list, how: str):
        """Combine per-decode-rank conditions over the attention-TP group: ``max`` (any) or
        ``min`` (all), as the scheduler's ``all_reduce`` of a flag does."""
        return o.any_(per_rank) if how == "max" else o.all_(per_rank)

    def hold_decision(self, s, r: int, deferrable: bool):
        """The group's hold decision (``_deferred_releases`` or release at once): each decode
        rank holds when ``deferrable`` (a Python bool: deferral applies) and its metadata was
        published (a writer may know the pages); combined by ``hold_combine``.  A condition."""
        o = s.ops
        per_rank = [deferrable & (s.meta[r, d] == 1) for d in range(self.k.DR)]
        return self.combine(o, per_rank, self.e.hold_combine)

    def release_safe(self, s, r: int):
        """``is_abort_release_safe(room, required_acks)`` per decode rank (enough of its prefill
        ranks drain-acked), combined by ``ready_combine``: when ``resolve_deferred_releases``
        may free a held request.  A condition."""
        o = s.ops
        per_rank = []
        for d in range(self.k.DR):
            linked = self.k.prefill_ranks_of(d)
            need = len(linked) if self.e.required_acks == "every_prefill_rank" else 1
            per_rank.append(o.count(s.acked[r, pr] == 1 for pr in linked) >= need)
        return self.combine(o, per_rank, self.e.ready_combine)

    def send_abort(self, s, n, r: int, send=True, arm=True):
        """``ensure_abort_notified``: send ABORT to every prefill rank of the room where ``send``
        holds, and where ``arm`` holds register the room for its acks first
        (``register_deferred_abort_room``), unless ``register_before_abort`` is off."""
        o = s.ops
        for pr in self.prs:
            n.abort_tx[r, pr] = o.ite(send, ABT_SENT, n.abort_tx[r, pr])
        if self.e.register_before_abort:  # where it does not arm, the room keeps what this step left
            n.armed[r] = o.ite(arm, 1, n.armed[r])

    def end_or_hold(self, s, n, r: int, hold, outcome: int):
        """Finish ``r`` on decode with ``outcome`` (unless it already has one): held in
        ``_deferred_releases`` where ``hold`` (a condition), released at once otherwise
        (``prepare_abort`` then ``release_kv_cache``)."""
        o = s.ops
        n.outcome[r] = o.ite(s.outcome[r] == OUT_NONE, outcome, s.outcome[r])
        n.d_phase[r] = o.ite(hold, D_HELD, D_ENDED)
        n.hold[r] = 0
        live = o.is_in(s.d_phase[r], D_LIVE)
        self.release_decode(s, n, r, when=o.and_(o.not_(hold), live))
        if not self.e.aux_held_with_pages:  # the slot goes back at once, held or not
            self.release_aux(s, n, r, when=live)

    def read_targets(self, s, r: int) -> list[tuple]:
        """What decode's read of ``r`` takes, declared part by part: ``(held, landed)`` per part,
        ``held`` the content code it finds there and ``landed`` the condition that ``r``'s own
        writes into it have all landed (``True``: nothing more to wait for).  The base spec declares every shard of every reserved
        page (``content`` at ``dest``; landed: every write stream's write of that chunk) and,
        with metadata slots, the request's slot (``aux_content`` at ``aux``; landed: the aux
        write).  :meth:`classify_read`, and so ``decode_reads_only_own_pages`` and
        ``no_cross_tenant_read``, covers every part declared here; a variant whose decode reads
        a pool of its own returns ``super().read_targets(s, r)`` plus its parts."""
        k = self.k
        out = []
        for c in indices(self.pages(r)):
            p = s.dest[r, c]
            landed = s.ops.all_(s.wr[r, w, c] == WR_LANDED for w in range(k.S))  # (with the first shard)
            out += [(s.content[u, p], landed if u == 0 else True) for u in range(k.U)]
        if k.M:
            out.append((s.aux_content[s.aux[r]], s.aux_wr[r] == WR_LANDED))
        return out

    def classify_read(self, s, r: int):
        """What decode's read of ``r``'s pages (every shard) and aux data finds (a ``READ_*``
        code) and whether everything was written by ``r``'s own transfer (a condition: what the
        checksum of PR 39500 compares), as the decode forward after ``pop_transferred`` reads:
        over every part :meth:`read_targets` declares."""
        o = s.ops
        k = self.k
        parts = self.read_targets(s, r)
        own = [held == kv_of(r) for held, _ in parts]
        cross = [(held != UNWRITTEN) & (o.lookup(k.tenant_of_content, held) != o.lookup(k.tenant, r))
                 for held, _ in parts]
        # the worst part decides (cross-tenant over foreign over own), so: is some part cross, foreign
        found = o.ite(o.any_(~a & b for a, b in zip(own, cross)), READ_CROSS_TENANT,
                      o.ite(o.any_(~a & ~b for a, b in zip(own, cross)), READ_FOREIGN, READ_OWN))
        intact = o.all_(o.and_(a, *([] if landed is True else [landed])) for a, (_, landed) in zip(own, parts))
        return found, intact

    # -- prefill: admission and forward ----------------------------------------------------------
    @action("prefill", "req", fair=True)
    def prefill_bootstrap_add(self, s, n, r):
        """Prefill admits the request: ``PrefillBootstrapQueue.add`` after
        ``validate_input_length``.  H1: an over-long prompt gets a pending error and a one-token
        placeholder and is queued anyway, unless PR 38935 rejects it at this door."""
        o = s.ops
        s.require(s.p_phase[r] == P_NEW)
        s.require(self.in_order(s, "p_phase", P_NEW, r))
        s.require(self.prefill_alive(s))
        if self.over_long(r) and self.e.reject_at_prefill_door:
            n.p_phase[r] = P_ENDED
            n.outcome[r] = o.ite(s.outcome[r] == OUT_NONE, OUT_ERROR, s.outcome[r])
        else:
            n.p_phase[r] = P_QUEUED

    @action("prefill", "req", fair=True)
    def prefill_forward(self, s, n, r):
        """Prefill runs the forward pass once bootstrap finished (every decode rank published
        its destination, so the request left ``PrefillBootstrapQueue``): allocates source pages
        and computes the KV into them (H8: these are the pages the transfer reads).  With PR
        36988 a pending-error request is retired here instead: nothing is sent and every
        rank's transfer concludes Failed."""
        o = s.ops
        s.require(s.p_phase[r] == P_QUEUED)
        s.require(o.all_(s.meta[r, d] == 1 for d in range(self.k.DR)))
        s.require(self.prefill_alive(s))
        if self.pending_error(r) and self.e.retire_pending_error_prefill:
            n.p_phase[r] = P_ENDED
            for pr in self.prs:
                n.poll[r, pr] = POLL_FAILED
            return
        self.allocate(s, n, r, self.send_len(r), "src_owner", "src", self.k.P, content="src_content")
        n.p_phase[r] = P_SENDING

    @action("prefill", "req")
    def prefill_abort(self, s, n, r):
        """The client's abort reaches prefill (the router aborts both sides).  The sender is
        marked Failed, so decode polls ``KVPoll.Failed`` - unless the abort is not propagated
        (H13), and decode keeps waiting with its pages reserved."""
        o = s.ops
        s.require(self.e.prefill_aborts)
        s.require(s.outcome[r] == OUT_NONE)
        s.require(o.is_in(s.p_phase[r], (P_QUEUED, P_SENDING)))
        s.require(self.prefill_alive(s))
        n.outcome[r] = OUT_ABORTED
        n.p_phase[r] = o.ite(s.p_phase[r] == P_SENDING, P_STOPPED, P_ENDED)
        if self.e.propagate_prefill_abort:
            for pr in self.prs:
                n.poll[r, pr] = o.ite(s.poll[r, pr] == POLL_NONE, POLL_FAILED, s.poll[r, pr])
        if not self.e.hold_source_until_drained:
            self.release_source(s, n, r, when=s.p_phase[r] == P_SENDING)

    # -- decode: admission, reservation, metadata --------------------------------------------
    @action("decode", "req", fair=True)
    def decode_prealloc(self, s, n, r):
        """Decode admits and reserves: ``DecodePreallocQueue.add`` / ``_pre_alloc`` reserve
        pages (and a metadata slot) for the ORIGINAL prompt length (H1: the placeholder will
        fill only one), unless PR 38935 rejects the over-long prompt at this door first."""
        o = s.ops
        s.require(s.d_phase[r] == D_NEW)
        s.require(self.in_order(s, "d_phase", D_NEW, r))
        if self.over_long(r) and self.e.reject_at_decode_door:
            n.d_phase[r] = D_ENDED
            n.outcome[r] = o.ite(s.outcome[r] == OUT_NONE, OUT_ERROR, s.outcome[r])
            return
        s.require(s.outcome[r] == OUT_NONE)
        s.require(not self.e.any_free_pages)  # then decode_prealloc_pick reserves
        self.allocate(s, n, r, self.pages(r), "owner", "dest", self.k.D)
        if self.k.M:
            self.allocate(s, n, r, 1, "aux_owner", "aux", self.k.M)
        n.d_phase[r] = D_RESERVED

    @action("decode", "req", "drank", fair=True)
    def decode_send_metadata(self, s, n, r, d):
        """Decode rank ``d`` publishes the destination pages and aux slot to its prefill ranks:
        ``CommonKVReceiver.send_metadata``.  From here on a writer knows the pages (H7: releasing
        at once is safe only before this step)."""
        o = s.ops
        s.require(s.d_phase[r] == D_RESERVED)
        s.require(s.meta[r, d] == 0)
        n.meta[r, d] = 1
        others = [s.meta[r, x] == 1 for x in range(self.k.DR) if x != d]
        n.d_phase[r] = o.ite(o.all_(others), D_WAITING, D_RESERVED)

    # -- the transfer -----------------------------------------------------------------------------
    @action("transfer", "req", "stream", "chunk")
    def kv_transfer_write(self, s, n, r, w, c):
        """A prefill rank's transfer worker issues write stream ``w``'s write (one layer, or all)
        of chunk ``c`` (chunks in order) to the published destination page.  H2: once issued,
        it lands whenever it lands."""
        pr = self.k.rank_of_stream(w)
        s.require(c < self.send_len(r))
        s.require(s.p_phase[r] == P_SENDING)
        s.require(s.p_abort[r, pr] == PAB_NONE)
        s.require(s.poll[r, pr] == POLL_NONE)
        s.require(s.wr[r, w, c] == WR_NOT_ISSUED)
        s.require(self.chunk_in_order(s, r, w, c))
        s.require(self.prefill_alive(s))
        n.wr[r, w, c] = WR_FLIGHT

    @over_approximated("a request's chunks issued in any order (the spec: in order)")
    def chunk_in_order(self, s, r: int, w: int, c: int):
        """The transfer worker issues a stream's chunks in order: chunk ``c`` only after chunk
        ``c - 1`` was issued (a condition)."""
        if c > 0:
            return s.wr[r, w, c - 1] != WR_NOT_ISSUED
        return s.ops.const(True)

    @action("transfer", "req", "stream", "chunk", fair=True)
    def kv_write_lands(self, s, n, r, w, c):
        """An in-flight write lands on its own: its parts of the destination page receive
        whatever the source page holds NOW (H8: a reused source page sends another request's
        KV), whoever owns the page now (H2: a released page may belong to the next request)."""
        s.require(c < self.send_len(r))
        s.require(s.wr[r, w, c] >= WR_FLIGHT)
        n.wr[r, w, c] = WR_LANDED
        p = s.dest[r, c]
        for u in self.k.units_of_stream(w):
            n.content[u, p] = s.src_content[s.src[r, c]]

    @action("transfer", "req")
    def kv_transfer_aux(self, s, n, r):
        """Prefill rank 0 sends the aux data (first output token, metadata) to the request's
        metadata slot after its last chunk: ``send_aux``."""
        o = s.ops
        s.require(self.k.M > 0)
        s.require(s.p_phase[r] == P_SENDING)
        s.require(s.p_abort[r, 0] == PAB_NONE)
        s.require(s.poll[r, 0] == POLL_NONE)
        s.require(s.aux_wr[r] == WR_NOT_ISSUED)
        s.require(o.all_(s.wr[r, w, c] != WR_NOT_ISSUED
                         for w in self.k.streams_of(0) for c in indices(self.send_len(r))))
        s.require(self.prefill_alive(s))
        n.aux_wr[r] = WR_FLIGHT

    @action("transfer", "req", fair=True)
    def kv_aux_lands(self, s, n, r):
        """The aux write lands in the slot it was addressed to, whoever holds it now."""
        s.require(self.k.M > 0)
        s.require(s.aux_wr[r] >= WR_FLIGHT)
        n.aux_wr[r] = WR_LANDED
        n.aux_content[s.aux[r]] = kv_of(r)

    @action("prefill", "req", "prank", fair=True)
    def prefill_transfer_done(self, s, n, r, pr):
        """Prefill rank ``pr``'s sender concludes ``KVPoll.Success`` once its writes (and rank 0's
        aux write) landed; when the last rank concludes, prefill frees its source pages.  H1:
        for a placeholder that is one chunk, whatever decode reserved."""
        o = s.ops
        s.require(s.p_phase[r] == P_SENDING)
        s.require(s.poll[r, pr] == POLL_NONE)
        s.require(s.p_abort[r, pr] == PAB_NONE)
        s.require(o.all_(s.wr[r, w, c] == WR_LANDED
                         for w in self.k.streams_of(pr) for c in indices(self.send_len(r))))
        if pr == 0 and self.k.M:
            s.require(s.aux_wr[r] == WR_LANDED)
        s.require(self.prefill_alive(s))
        n.poll[r, pr] = POLL_SUCCESS
        last = o.all_(s.poll[r, x] == POLL_SUCCESS for x in self.prs if x != pr)
        n.p_phase[r] = o.ite(last, P_ENDED, P_SENDING)
        self.release_source(s, n, r, when=last)

    @action("prefill", "req", "prank")
    def prefill_transfer_failed(self, s, n, r, pr):
        """Prefill rank ``pr``'s transfer fails (a fault, a transport error): its sender concludes
        ``KVPoll.Failed`` and the request stops issuing on every rank; issued writes still land
        (H7).  Without the H8 fix the source pages are freed right here; with H4's bug,
        ``CommonKVSender.clear()`` drops the ack target so this rank will never ack."""
        o = s.ops
        s.require(self.e.transfer_failures)
        s.require(s.p_phase[r] == P_SENDING)
        s.require(s.poll[r, pr] == POLL_NONE)
        s.require(self.prefill_alive(s))
        n.poll[r, pr] = POLL_FAILED
        n.p_phase[r] = P_STOPPED
        if self.e.failure_clears_ack_target:
            n.p_abort[r, pr] = o.ite(s.p_abort[r, pr] == PAB_NONE, PAB_CLEARED, s.p_abort[r, pr])
        if not self.e.hold_source_until_drained:
            self.release_source(s, n, r)

    # -- decode: commit, failure, abort ---------------------------------------------------------
    @action("decode", "req", fair=True)
    def decode_commit(self, s, n, r):
        """``DecodeTransferQueue.pop_transferred`` sees Success from every prefill rank (the
        poll is MIN-all-reduced), verifies the checksum (PR 39500, when on and supported) and
        decode runs over every reserved page.  H1/H2/H8: what it reads is recorded in ``read``;
        the pages are released when the request finishes.  With ``verify_then_read`` the read
        waits for :meth:`decode_forward`."""
        o = s.ops
        s.require(s.d_phase[r] == D_WAITING)
        s.require(o.all_(s.poll[r, pr] == POLL_SUCCESS for pr in self.prs))
        found, intact = self.classify_read(s, r)
        ok = intact if self.checksum_active else o.const(True)
        if self.e.verify_then_read:
            n.d_phase[r] = o.ite(ok, D_VERIFIED, D_ENDED)
            n.outcome[r] = o.ite(ok, s.outcome[r], OUT_ERROR)
            self.release_decode(s, n, r, when=~ok)
            return
        n.outcome[r] = o.ite(ok, OUT_SUCCESS, OUT_ERROR)
        n.read[r] = o.ite(ok, found, READ_NONE)
        n.d_phase[r] = D_ENDED
        self.release_decode(s, n, r)

    @action("decode", "req", fair=True)
    def decode_forward(self, s, n, r):
        """The verified request runs in the decode batch, reading its pages now (only with
        ``verify_then_read``): a write that landed since the checksum check is read unseen."""
        s.require(self.e.verify_then_read)
        s.require(s.d_phase[r] == D_VERIFIED)
        found, _ = self.classify_read(s, r)
        n.outcome[r] = OUT_SUCCESS
        n.read[r] = found
        n.d_phase[r] = D_ENDED
        self.release_decode(s, n, r)

    def fail_request(self, s, n, r):
        """``pop_transferred``'s Failed branch: ``failure_exception()``, then hold (arming the
        abort) where deferral applies, else release at once."""
        hold = self.hold_decision(s, r, self.e.defer_on_every_failure and self.deferred)
        self.end_or_hold(s, n, r, hold, OUT_ERROR)
        self.send_abort(s, n, r, send=hold, arm=hold)

    @action("decode", "req", fair=True)
    def decode_poll_failed(self, s, n, r):
        """``pop_transferred`` sees Failed from some prefill rank.  Before PR 41404 it releases at
        once even though other ranks or chunks may still be writing (H7); with it, a request
        whose metadata was published arms the abort and is held like an aborted one."""
        o = s.ops
        s.require(o.any_(s.poll[r, pr] == POLL_FAILED for pr in self.prs))
        s.require(o.is_in(s.d_phase[r], (D_NEW, D_RESERVED, D_WAITING)))
        self.fail_request(s, n, r)

    @action("decode", "req", fair=True)
    def decode_waiting_timeout(self, s, n, r):
        """``SGLANG_DISAGGREGATION_WAITING_TIMEOUT`` passes with no conclusion from prefill: the
        receiver is failed and the request takes the Failed branch (H13's backstop)."""
        o = s.ops
        s.require(self.e.waiting_timeout is not None)
        s.require(o.is_in(s.d_phase[r], (D_RESERVED, D_WAITING)))
        s.require(s.wait[r] >= (self.e.waiting_timeout or 0))
        s.require(~o.any_(s.poll[r, pr] == POLL_FAILED for pr in self.prs))
        self.fail_request(s, n, r)

    @action("decode", "req")
    def decode_abort(self, s, n, r):
        """The client aborts at decode (``/abort_request`` -> ``CommonKVReceiver.abort``), which
        sends ABORT to every prefill rank (PR 27372).  H2: before PR 35049 the pages are released
        at once while a write may be in flight; with deferred release they are held in
        ``_deferred_releases``.  A decode rank that never published its metadata has no writer
        that knows its pages; the ranks' hold decisions combine by ``hold_combine``."""
        o = s.ops
        s.require(self.e.client_aborts)
        s.require(s.outcome[r] == OUT_NONE)
        s.require(o.is_in(s.d_phase[r], (D_NEW, D_RESERVED, D_WAITING, D_VERIFIED)))
        hold = self.hold_decision(s, r, self.deferred)
        self.end_or_hold(s, n, r, hold, OUT_ABORTED)
        self.send_abort(s, n, r, send=True, arm=hold)

    @action("decode", "req", fair=True)
    def decode_register_abort_room(self, s, n, r):
        """``register_deferred_abort_room`` after the ABORT went out (only when
        ``register_before_abort`` is off): an ack that arrived before this step was dropped
        (H4)."""
        o = s.ops
        s.require(not self.e.register_before_abort)
        s.require(s.d_phase[r] == D_HELD)
        s.require(s.armed[r] == 0)
        s.require(o.any_(s.abort_tx[r, pr] != ABT_NONE for pr in self.prs))
        n.armed[r] = 1

    # -- prefill: abort handling and drain ack ---------------------------------------------------
    @action("prefill", "req", "prank", fair=True)
    def prefill_handle_abort(self, s, n, r, pr):
        """Prefill rank ``pr`` receives decode's ABORT (``_handle_abort_notification``): the
        request stops issuing on every rank.  H3: a legacy engine acks receipt right here.  H8:
        without the fix the source pages are freed here, while issued writes may still read
        them.  A repeated ABORT for a drained room is answered with the drain ack again."""
        o = s.ops
        s.require(s.abort_tx[r, pr] == ABT_SENT)
        s.require(self.prefill_alive(s))
        n.abort_tx[r, pr] = ABT_DELIVERED
        first = s.p_abort[r, pr] == PAB_NONE
        again = s.p_abort[r, pr] == PAB_ACKED
        n.p_abort[r, pr] = o.ite(first, PAB_RECEIVED, s.p_abort[r, pr])
        ph = s.p_phase[r]
        n.p_phase[r] = o.ite(o.is_in(ph, (P_NEW, P_QUEUED)), P_ENDED, o.ite(ph == P_SENDING, P_STOPPED, ph))
        fresh = o.ite(first, ACK_RECEIPT, s.ack[r, pr]) if self.e.receipt_ack_taken_as_drain else s.ack[r, pr]
        n.ack[r, pr] = o.ite(again, ACK_DRAIN, fresh)
        if self.e.request_streams:
            fresh_ack = o.or_(again, o.and_(first, self.e.receipt_ack_taken_as_drain))
            n.ack_gen[r, pr] = o.ite(fresh_ack, s.gen[r], s.ack_gen[r, pr])
        if not self.e.hold_source_until_drained:
            self.release_source(s, n, r, when=o.is_in(ph, (P_SENDING, P_STOPPED)))

    @action("prefill", "req", fair=True)
    def prefill_drain(self, s, n, r):
        """A stopped request's issued writes have all landed: it ends on prefill and its source
        pages are freed (the H8 fix frees them only now)."""
        o = s.ops
        s.require(s.p_phase[r] == P_STOPPED)
        s.require(o.not_(self.writes_in_flight(s, r)))
        s.require(self.prefill_alive(s))
        n.p_phase[r] = P_ENDED
        self.release_source(s, n, r)

    @action("prefill", "req", "prank", fair=True)
    def prefill_drain_ack(self, s, n, r, pr):
        """Prefill rank ``pr`` sends the drain ack (``_maybe_ack_drained_abort``: ``ABORT_ACK``
        naming the room's generation) once it stopped sending and its own writes drained: the
        only proof that none of this rank's writes is left (H3).  Other ranks answer for
        theirs."""
        o = s.ops
        s.require(s.p_abort[r, pr] == PAB_RECEIVED)
        s.require(o.is_in(s.p_phase[r], (P_STOPPED, P_ENDED)))
        s.require(o.not_(self.rank_writes_in_flight(s, r, pr)))
        s.require(self.prefill_alive(s))
        n.p_abort[r, pr] = PAB_ACKED
        n.ack[r, pr] = ACK_DRAIN
        if self.e.request_streams:
            n.ack_gen[r, pr] = s.gen[r]

    @action("prefill")
    def prefill_dies(self, s, n):
        """The prefill node dies: it stops sending, handling ABORT and acking; writes already on
        the wire still land."""
        s.require(self.e.peer_death)
        s.require(s.p_dead == 0)
        n.p_dead = 1

    @action("network", "req", "prank")
    def net_drop_ack(self, s, n, r, pr):
        """A drain ack is lost on its way to decode (H4), so decode can only time out."""
        s.require(self.e.lossy_drain_acks)
        s.require(s.ack[r, pr] == ACK_DRAIN)
        n.ack[r, pr] = ACK_NONE

    @action("network", "req", "prank")
    def net_drop_abort(self, s, n, r, pr):
        """An ABORT is lost on its way to a prefill rank."""
        s.require(self.e.lossy_aborts)
        s.require(s.abort_tx[r, pr] == ABT_SENT)
        n.abort_tx[r, pr] = ABT_NONE

    # -- decode: acks and deferred release -------------------------------------------------------
    @action("decode", "req", "prank", fair=True)
    def decode_handle_abort_ack(self, s, n, r, pr):
        """``handle_abort_ack_message`` -> ``note_abort_ack``: decode takes an ack from prefill
        rank ``pr`` and records it only if the room is registered, held, and the ack names the
        generation currently armed (generation-less acks count only in the legacy engine).  H3:
        a legacy engine counts a receipt ack as a drain ack."""
        o = s.ops
        s.require(s.ack[r, pr] != ACK_NONE)
        counts = (ACK_DRAIN, ACK_RECEIPT) if self.e.receipt_ack_taken_as_drain else (ACK_DRAIN,)
        ok = [s.armed[r] == 1, s.d_phase[r] == D_HELD, o.is_in(s.ack[r, pr], counts)]
        if self.e.request_streams and self.e.acks_carry_generation:
            ok.append(s.ack_gen[r, pr] == s.gen[r])
        n.ack[r, pr] = ACK_NONE
        n.acked[r, pr] = o.ite(o.and_(*ok), 1, s.acked[r, pr])

    @action("decode", "req", fair=True)
    def decode_release_deferred(self, s, n, r):
        """``resolve_deferred_releases`` when ``is_abort_release_safe``: enough prefill ranks
        acked (``required_acks``), per decode rank and then over the group (MIN in 0.5.23), so
        the held pages and aux slot are freed."""
        s.require(s.d_phase[r] == D_HELD)
        s.require(self.release_safe(s, r))
        n.d_phase[r] = D_ENDED
        n.hold[r] = 0
        self.release_decode(s, n, r)

    @action("decode", "req", fair=True)
    def decode_release_timeout(self, s, n, r):
        """``resolve_deferred_releases`` past the deadline ("releasing anyway", PR 35049): the
        held pages are freed without proof that the writes drained (H6)."""
        s.require(self.e.release_policy == "drain_ack_or_timeout")
        s.require(self.e.timeout_action == "release")
        s.require(s.d_phase[r] == D_HELD)
        s.require(s.hold[r] >= self.e.timeout)
        n.d_phase[r] = D_ENDED
        n.hold[r] = 0
        self.release_decode(s, n, r)

    @action("decode", "req", fair=True)
    def decode_retry_abort(self, s, n, r):
        """Past the deadline, the hold-forever fix keeps the pages and sends ABORT again to the
        prefill ranks that have not acked ("an unknown writer set never counts as zero writers"):
        safe, but live only if prefill answers or its death is detected (H6)."""
        o = s.ops
        s.require(self.e.release_policy == "drain_ack_or_timeout")
        s.require(self.e.timeout_action == "hold_and_retry")
        s.require(s.d_phase[r] == D_HELD)
        s.require(s.hold[r] >= self.e.timeout)
        n.hold[r] = 0
        for pr in self.prs:
            resend = (s.acked[r, pr] == 0) & (s.abort_tx[r, pr] != ABT_SENT)
            n.abort_tx[r, pr] = o.ite(resend, ABT_SENT, s.abort_tx[r, pr])

    @action("decode", "req", fair=True)
    def decode_peer_dead_release(self, s, n, r):
        """Heartbeats from the prefill stopped for ``heartbeat_timeout`` ticks: decode declares
        it dead (KVPoll Failed by heartbeat loss) and frees what it held for it - the writer set
        is known to be gone."""
        o = s.ops
        s.require(self.e.heartbeat_detection)
        s.require(s.p_dead == 1)
        s.require(s.hb >= self.e.heartbeat_timeout)
        s.require(o.is_in(s.d_phase[r], D_LIVE))
        n.outcome[r] = o.ite(s.outcome[r] == OUT_NONE, OUT_ERROR, s.outcome[r])
        n.d_phase[r] = D_ENDED
        n.hold[r] = 0
        self.release_decode(s, n, r)

    # -- time ---------------------------------------------------------------------------------------
    @action("clock", fair=True)
    def clock_tick(self, s, n):
        """One tick: hold, waiting and heartbeat timers and write ages advance (saturating).
        Time cannot pass while a write has reached the latency bound or an ABORT to a live
        prefill is undelivered (H6's assumptions)."""
        o = s.ops
        e, k = self.e, self.k
        moves, blocks = [], []

        def advance(value, running):
            moves.append(running)
            return o.ite(running, value + 1, value)

        def tick(name, idx):
            w = getattr(s, name)[idx]
            getattr(n, name)[idx] = advance(w, (w >= WR_FLIGHT) & (w < WR_FLIGHT + bound))
            blocks.append(w == WR_FLIGHT + bound)

        for r in k.req:
            if e.release_policy == "drain_ack_or_timeout":
                n.hold[r] = advance(s.hold[r], (s.d_phase[r] == D_HELD) & (s.hold[r] < e.timeout))
            if e.waiting_timeout is not None:
                waiting = o.is_in(s.d_phase[r], (D_RESERVED, D_WAITING))
                n.wait[r] = advance(s.wait[r], waiting & (s.wait[r] < e.waiting_timeout))
            if e.write_latency_bound is not None:
                bound = e.write_latency_bound
                for w in range(k.S):
                    for c in indices(self.send_len(r)):
                        tick("wr", (r, w, c))
                if k.M:
                    tick("aux_wr", r)
            for pr in self.prs:
                blocks.append((s.abort_tx[r, pr] == ABT_SENT) & self.prefill_alive(s))
        if e.heartbeat_detection:
            n.hb = advance(s.hb, (s.p_dead == 1) & (s.hb < e.heartbeat_timeout))
        s.require(o.any_(moves))
        s.require(o.not_(o.any_(blocks)))

    # -- request streams ----------------------------------------------------------------------------
    @action("client", "req")
    def client_send(self, s, n, r):
        """A finished request's room takes the client's next request (request streams only).
        The old request's KV stays in the pools as ``old:<tenant>`` content, and acks still on
        their way keep the old generation: a late message can meet the room's next owner."""
        o = s.ops
        s.require(self.e.request_streams)
        s.require(s.d_phase[r] == D_ENDED)
        s.require(s.p_phase[r] == P_ENDED)
        s.require(o.not_(self.writes_in_flight(s, r)))
        s.require(o.all_(s.abort_tx[r, pr] != ABT_SENT for pr in self.prs))
        # generations are unbounded in the engine; the model counts modulo 2, so a room is not
        # reused while an ack of the generation it would get again is still on its way
        new_gen = o.ite(s.gen[r] == 0, 1, 0)
        s.require(o.all_((s.ack[r, pr] == ACK_NONE) | (s.ack_gen[r, pr] != new_gen) for pr in self.prs))
        keep = {"ack", "ack_gen", "gen"}
        for f in self.layout.fields:
            if f.dims and f.dims[0] is self.k.req and f.name not in keep:
                for idx in _indices(r, f.shape[1:]):
                    getattr(n, f.name)[idx] = f.init
        n.gen[r] = new_gen
        old = self.k.retired(r)
        for u in range(self.k.U):
            for p in range(self.k.D):
                n.content[u, p] = o.ite(s.content[u, p] == kv_of(r), old, s.content[u, p])
        for q in range(self.k.P):
            n.src_content[q] = o.ite(s.src_content[q] == kv_of(r), old, s.src_content[q])
        for m in range(self.k.M):
            n.aux_content[m] = o.ite(s.aux_content[m] == kv_of(r), old, s.aux_content[m])


    # -- decode: reservation from an unsorted free list ----------------------------------------------
    @action("decode", "req", "pick", fair=True)
    def decode_prealloc_pick(self, s, n, r, pick):
        """``DecodePreallocQueue`` reserves the prompt's pages from an allocator that hands out
        any free pages (``any_free_pages``): as ``decode_prealloc``, with allocation choice
        ``pick`` naming which free page each chunk gets (H1 applies alike: the original prompt
        length is reserved).  Rejection at the decode door stays with ``decode_prealloc``."""
        choices = self.picks(self.pages(r))
        s.require(pick < len(choices))
        s.require(not (self.over_long(r) and self.e.reject_at_decode_door))
        s.require(s.d_phase[r] == D_NEW)
        s.require(self.in_order(s, "d_phase", D_NEW, r))
        s.require(s.outcome[r] == OUT_NONE)
        pages = choices[pick] if pick < len(choices) else ()
        for c, p in enumerate(pages):
            s.require(s.owner[p] == FREE)
            n.dest[r, c] = p
            n.owner[p] = owned_by(r)
        if self.k.M:
            self.allocate(s, n, r, 1, "aux_owner", "aux", self.k.M)
        n.d_phase[r] = D_RESERVED


def _indices(r: int, rest: tuple[int, ...]):
    """Every index of a request's part of a field: ``r`` or ``(r, i, ...)``."""
    if not rest:
        yield r
        return
    for tail in product(*[range(n) for n in rest]):
        yield (r, *tail)
