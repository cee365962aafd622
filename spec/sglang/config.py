"""The parameters of one spec instance: sizes, the requests, and the engine's flags.

A :class:`Config` is plain data.  The protocol reads it with ordinary Python (it is not state),
so every flag below selects behaviour at instance-build time and costs the explicit engine
nothing at run time.  Each flag names the real change it stands for; the defaults are the
incident-era engine, and every dimension beyond it (ranks, aux slots, generations, deaths) is
off by default so the small scenarios stay small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import gcd, perm

__all__ = ["Request", "Engine", "Config", "CHOICES"]

CHOICES = {
    "release_policy": ("immediate", "drain_ack", "drain_ack_or_timeout"),
    "timeout_action": ("release", "hold_and_retry"),
    "required_acks": ("every_prefill_rank", "first_ack"),
    "hold_combine": ("max", "min"),
    "ready_combine": ("min", "max"),
    "room_policy": ("reused_after_end", "distinct", "client"),
    "decode_allocation_policy": ("early", "prefill_complete"),
}
"""The string-valued flags and their allowed values (the first is the fixed engine's)."""

RELEASE_POLICIES = CHOICES["release_policy"]
MAX_ALLOCATION_CHOICES = 720  # ordered page choices of one reservation under any_free_pages


@dataclass(frozen=True)
class Request:
    """One request: its tenant (who owns its data), its prompt length in KV pages and, with
    ``room_policy = "client"``, the ``bootstrap_room`` the client gave it and the prefill
    instance (bootstrap address) the router sent it to."""

    tenant: str
    pages: int
    room: int | None = None
    """The client's ``bootstrap_room`` (only with ``room_policy = "client"``; two requests may
    name the same room).  ``None``: the request slot's own room."""
    prefill_instance: int = 0
    """The prefill instance (``bootstrap_host``/``bootstrap_port``) serving the request (only
    with ``room_policy = "client"``)."""


@dataclass(frozen=True)
class Engine:
    """How the serving engine behaves; the defaults are the incident-era engine (no fixes)."""

    # -- admission (H1) --------------------------------------------------------------------
    reject_at_prefill_door: bool = False
    """PR 38935: ``PrefillBootstrapQueue.add`` retires a pending-error request before any work."""
    reject_at_decode_door: bool = False
    """PR 38935: ``DecodePreallocQueue.add`` rejects an over-long prompt before reserving pages."""
    retire_pending_error_prefill: bool = False
    """PR 36988: prefill retires a pending-error request when its forward returns: no KV send,
    the transfer concludes Failed."""
    # -- release (H2, H3, H6, H7) ------------------------------------------------------------
    release_policy: str = "immediate"
    """Decode release on abort: ``immediate`` (before PR 35049), ``drain_ack`` (hold until the
    drain acks), ``drain_ack_or_timeout`` (PR 35049: hold until the drain acks or the deadline)."""
    timeout_action: str = "release"
    """At the deadline: ``release`` ("releasing anyway", PR 35049) or ``hold_and_retry`` (the
    later fix: keep holding and send ABORT again; "an unknown writer set never counts as zero")."""
    defer_on_every_failure: bool = False
    """PR 41404: a transfer failure decode did not start also arms the abort and defers."""
    receipt_ack_taken_as_drain: bool = False
    """H3 bug: prefill acks the ABORT on receipt and decode releases on that ack."""
    required_acks: str = "every_prefill_rank"
    """``is_abort_release_safe``: how many prefill ranks must ack: ``every_prefill_rank`` the
    room talks to (0.5.23's ``required_acks``), or ``first_ack`` (a variant that trusts one)."""
    hold_combine: str = "max"
    """How the per-decode-rank hold decisions combine over the attention-TP group (0.5.23: MAX,
    hold if any rank holds)."""
    ready_combine: str = "min"
    """How per-decode-rank release readiness combines (0.5.23: MIN, release when every rank is
    ready)."""
    acks_carry_generation: bool = True
    """Acks name the generation of the room's ABORT and decode counts only the armed one
    (``note_abort_ack``); ``false`` is the legacy generation-less ack."""
    register_before_abort: bool = True
    """Decode registers the room for acks before it sends ABORT (H4: an ack arriving before the
    registration is dropped)."""
    failure_clears_ack_target: bool = False
    """H4 bug: ``CommonKVSender.clear()`` on failure drops the ack target while writes are still
    in flight, so nobody is acked when they drain (fixed by PR 40645)."""
    lossy_drain_acks: bool = False
    """H4: a drain ack can be lost on the way to decode."""
    lossy_aborts: bool = False
    """An ABORT can be lost on the way to prefill."""
    aux_held_with_pages: bool = True
    """Deferred release holds the metadata (aux) slot with the pages (``_deferred_releases``
    keeps it); ``false`` frees the slot at once while its write may be in flight."""
    # -- prefill source pages (H8) -------------------------------------------------------------
    hold_source_until_drained: bool = True
    """H8 fix (PR 38961): prefill keeps its source pages until every write reading them landed;
    ``false`` frees them as soon as the request fails or is aborted."""
    # -- detection ------------------------------------------------------------------------------
    checksum: bool = False
    """PR 39500: ``--disaggregation-enable-kv-checksum``, verified by decode at commit."""
    model_supports_checksum: bool = True
    """Whether the served model supports the transfer checksum (if not, it is skipped)."""
    verify_then_read: bool = False
    """Decode verifies at commit and reads the pages in a later step (the running batch), so a
    write landing in between is not caught by the checksum."""
    # -- environment ------------------------------------------------------------------------------
    client_aborts: bool = True
    """Clients may abort a request at decode at any point before it finishes."""
    prefill_aborts: bool = False
    """Clients may abort a request at prefill too (the router sends the abort to both)."""
    propagate_prefill_abort: bool = True
    """A prefill-side abort marks the sender Failed so decode sees ``KVPoll.Failed`` (H13 bug when
    false: decode keeps waiting, holding its pages)."""
    transfer_failures: bool = False
    """Prefill-side transfer failures (fault, transport error) may happen on any prefill rank."""
    peer_death: bool = False
    """The prefill node may die: it stops sending, handling ABORT and acking."""
    heartbeat_detection: bool = False
    """Decode detects a dead prefill after ``heartbeat_timeout`` ticks of missed heartbeats and
    releases what it held for it."""
    # -- time -------------------------------------------------------------------------------------
    timeout: int = 2
    """Deferred-release timeout, in clock ticks (used by ``drain_ack_or_timeout``)."""
    write_latency_bound: int | None = None
    """Longest time, in ticks, a write stays in flight; ``None`` means unbounded."""
    waiting_timeout: int | None = None
    """``SGLANG_DISAGGREGATION_WAITING_TIMEOUT`` in ticks: decode fails a request whose transfer
    has not concluded by then; ``None`` means no such timeout."""
    heartbeat_timeout: int = 2
    """Ticks of missed heartbeats before decode declares the prefill dead."""
    # -- shape of the exploration -------------------------------------------------------------------
    ordered_arrivals: bool = True
    """Requests reach each admission door in id order (a FIFO queue); fewer interleavings."""
    request_streams: bool = False
    """A finished request's slot (its bootstrap room) takes a new request (``client_send``)."""
    room_policy: str = "reused_after_end"
    """How bootstrap rooms are drawn.  ``reused_after_end`` (the default, and every scenario
    before client rooms): a request slot is its room, and with ``request_streams`` the room takes
    the client's next request only after the previous one ended with nothing in flight;
    ``distinct``: every request has a room of its own, never reused (no ``request_streams``);
    ``client``: the client chooses (``room`` of each request), so two live requests may carry
    the same room and 0.5.23's room-keyed maps are shared (see :mod:`kvproof.spec.sglang.v0523`)."""
    decode_allocation_policy: str = "early"
    """``--disaggregation-decode-allocation-policy``: ``early`` (0.5.23's default: no duplicate
    check) or ``prefill_complete``, which turns on the duplicate-room guard of
    ``CommonKVReceiver.__init__`` ("Duplicate decode bootstrap room": a receiver whose room is
    still in decode's ``request_status`` fails, and marks the room Failed) and defers decode's
    reservation until prefill's forward completed (``decode_reserve``).  Its prefill-side check
    (``DeferredBootstrap.open``) is not modelled: scenarios keep two requests of one room on
    different prefill instances with it."""
    any_free_pages: bool = False
    """Decode's allocator may hand out any free pages, in any order (a free list kept unsorted),
    modelled as a choice (``decode_prealloc_pick``); ``false``: the lowest-numbered free pages,
    as SGLang's allocator after ``merge_and_sort_free``.  With it, decode pages are
    interchangeable (symmetry reduction permutes them)."""


@dataclass(frozen=True)
class Config:
    """One instance of the protocol: pool sizes, ranks, the context limit, the requests, the
    engine."""

    requests: tuple[Request, ...]
    decode_pages: int
    prefill_pages: int
    context_limit: int
    engine: Engine = field(default_factory=Engine)
    prefill_ranks: int = 1
    decode_ranks: int = 1
    aux_slots: int = 0
    layers: int = 1

    @property
    def tenants(self) -> list[str]:
        """Tenant names in order of first appearance."""
        out: list[str] = []
        for r in self.requests:
            if r.tenant not in out:
                out.append(r.tenant)
        return out

    def problems(self) -> list[str]:
        """What makes this configuration unusable (empty when it is fine); each starts with the
        key it is about."""
        out = []
        e = self.engine
        if not self.requests:
            out.append("requests: at least one request is needed")
        for key, allowed in CHOICES.items():
            if getattr(e, key) not in allowed:
                out.append(f"engine.{key}: expected one of {', '.join(allowed)}")
        if e.request_streams and e.ordered_arrivals:
            out.append("engine.request_streams: needs ordered_arrivals = false")
        for key in ("timeout", "heartbeat_timeout"):
            if getattr(e, key) < 1:
                out.append(f"engine.{key}: expected a whole number >= 1")
        for key in ("write_latency_bound", "waiting_timeout"):
            v = getattr(e, key)
            if v is not None and v < 0:
                out.append(f"engine.{key}: expected a whole number >= 0")
        if e.room_policy == "distinct" and e.request_streams:
            out.append("engine.room_policy: distinct rooms are never reused (needs request_streams = false)")
        if e.room_policy != "client":
            for i, r in enumerate(self.requests):
                if r.room is not None or r.prefill_instance != 0:
                    out.append(f"requests[{i}].room: a request names its room and prefill instance only with "
                               "room_policy = \"client\"")
                    break
        else:
            if e.request_streams:
                out.append("engine.room_policy: client rooms need request_streams = false (the client's requests "
                           "are the scenario's requests)")
            if self.prefill_ranks != 1 or self.decode_ranks != 1 or self.aux_slots or self.layers != 1:
                out.append("engine.room_policy: client rooms are modelled for one prefill rank, one decode rank, "
                           "one layer and no aux slots per instance")
            if e.prefill_aborts or e.transfer_failures or e.peer_death or e.lossy_aborts:
                out.append("engine.room_policy: client rooms are modelled with client aborts at decode only "
                           "(no prefill aborts, transfer failures, deaths or lost ABORTs)")
            if e.client_aborts:
                seen = set()
                for i, r in enumerate(self.requests):
                    key = (self.room_of(i), r.prefill_instance)
                    if key in seen:
                        out.append(f"requests[{i}].prefill_instance: with client aborts two requests of one room on "
                                   "one prefill instance share its _deferred_ack_targets[room], which is not "
                                   "modelled")
                        break
                    seen.add(key)
                if e.decode_allocation_policy != "early":
                    out.append("engine.client_aborts: client rooms with aborts are modelled with "
                               "decode_allocation_policy = \"early\" only")
            for i, r in enumerate(self.requests):
                if r.room is not None and not 0 <= r.room < len(self.requests):
                    out.append(f"requests[{i}].room: expected 0..{len(self.requests) - 1}")
                    break
                if not 0 <= r.prefill_instance <= 1:
                    out.append(f"requests[{i}].prefill_instance: expected 0 or 1")
                    break
            if e.decode_allocation_policy == "prefill_complete":
                seen = set()
                for i, r in enumerate(self.requests):
                    key = (self.room_of(i), r.prefill_instance)
                    if key in seen:
                        out.append(f"requests[{i}].prefill_instance: with prefill_complete two requests of one room "
                                   "on one prefill instance meet its prefill-side check (DeferredBootstrap), which "
                                   "is not modelled")
                        break
                    seen.add(key)
        if e.decode_allocation_policy != "early" and e.room_policy != "client":
            out.append("engine.decode_allocation_policy: the duplicate-room guard is modelled only with "
                       "room_policy = \"client\"")
        if e.heartbeat_detection and not e.peer_death:
            out.append("engine.heartbeat_detection: needs peer_death = true")
        if e.any_free_pages:
            choices = max(perm(self.decode_pages, r.pages) for r in self.requests) if self.requests else 0
            if choices > MAX_ALLOCATION_CHOICES:
                out.append(f"engine.any_free_pages: {self.decode_pages} decode pages give {choices} allocation "
                           f"choices for one request; at most {MAX_ALLOCATION_CHOICES}")
        pr, dr = self.prefill_ranks, self.decode_ranks
        if max(pr, dr) % min(pr, dr) != 0:
            out.append("sizes.decode_ranks: one of prefill_ranks and decode_ranks must divide the other")
        for i, r in enumerate(self.requests):
            if not 1 <= r.pages <= self.context_limit:
                out.append(f"requests[{i}].pages: expected 1..context_limit ({self.context_limit})")
        if len(self.requests) + len(self.tenants) > 250:
            out.append("requests: too many requests and tenants for one-byte codes")
        return out

    @property
    def units(self) -> int:
        """Independently written parts of a page: one per (prefill rank, decode rank) pairing
        (``max`` of the two) and per layer."""
        return max(self.prefill_ranks, self.decode_ranks) * self.layers

    def room_of(self, r: int) -> int:
        """The ``bootstrap_room`` of request ``r``: the client's choice with ``room_policy =
        "client"``, the request slot's own number otherwise."""
        room = self.requests[r].room
        return r if room is None else room

    @property
    def rooms(self) -> int:
        """How many room numbers the requests may name (``0..rooms-1``)."""
        return len(self.requests)

    @property
    def prefill_instances(self) -> int:
        """Prefill instances the requests are routed to (1 unless a request names instance 1)."""
        return 1 + max(r.prefill_instance for r in self.requests)

    def linked(self, prefill_rank: int, decode_rank: int) -> bool:
        """Prefill rank and decode rank exchange a shard (TP fan-in / fan-out)."""
        g = gcd(self.prefill_ranks, self.decode_ranks)
        return prefill_rank % g == decode_rank % g
