"""The parameters of one spec instance: sizes, the requests, and the engine's flags.

A :class:`Config` is plain data.  The protocol reads it with ordinary Python (it is not state),
so every flag below selects behaviour at instance-build time and costs the explicit engine
nothing at run time.  Each flag names the real change it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from math import perm

__all__ = ["Request", "Engine", "Config", "RELEASE_POLICIES"]

RELEASE_POLICIES = ("immediate", "drain_ack", "drain_ack_or_timeout")
MAX_ALLOCATION_CHOICES = 720  # ordered page choices of one reservation under any_free_pages


@dataclass(frozen=True)
class Request:
    """One request: its tenant (who owns its data) and its prompt length in KV pages."""

    tenant: str
    pages: int


@dataclass(frozen=True)
class Engine:
    """How the serving engine behaves; the defaults are the incident-era engine (no fixes)."""

    reject_at_prefill_door: bool = False
    """PR 38935: ``PrefillBootstrapQueue.add`` retires a pending-error request before any work."""
    reject_at_decode_door: bool = False
    """PR 38935: ``DecodePreallocQueue.add`` rejects an over-long prompt before reserving pages."""
    retire_pending_error_prefill: bool = False
    """PR 36988: prefill retires a pending-error request when its forward returns: no KV send,
    the transfer concludes Failed."""
    release_policy: str = "immediate"
    """Decode release on abort: ``immediate`` (before PR 35049), ``drain_ack`` (hold until the
    drain ack), ``drain_ack_or_timeout`` (PR 35049: hold until the drain ack or the deadline)."""
    defer_on_every_failure: bool = False
    """PR 41404: a transfer failure decode did not start also arms the abort and defers."""
    receipt_ack_taken_as_drain: bool = False
    """H3 bug: prefill acks the ABORT on receipt and decode releases on that ack."""
    lossy_drain_acks: bool = False
    """H4: a drain ack can be lost on the way to decode."""
    hold_source_until_drained: bool = True
    """H8 fix (PR 38961): prefill keeps its source pages until every write reading them landed;
    ``false`` frees them as soon as the request fails or is aborted."""
    checksum: bool = False
    """PR 39500: ``--disaggregation-enable-kv-checksum``, verified by decode at commit."""
    model_supports_checksum: bool = True
    """Whether the served model supports the transfer checksum (if not, it is skipped)."""
    client_aborts: bool = True
    """Clients may abort a request at decode at any point before it finishes."""
    transfer_failures: bool = False
    """Prefill-side transfer failures (fault, transport error, prefill abort) may happen."""
    timeout: int = 2
    """Deferred-release timeout, in clock ticks (used by ``drain_ack_or_timeout``)."""
    write_latency_bound: int | None = None
    """Longest time, in ticks, a write stays in flight; ``None`` means unbounded."""
    ordered_arrivals: bool = True
    """Requests reach each admission door in id order (a FIFO queue); fewer interleavings."""
    request_streams: bool = False
    """A finished request's slot takes a new request (``client_send``): unbounded streams."""
    any_free_pages: bool = False
    """Decode's allocator may hand out any free pages, in any order (a free list kept unsorted),
    modelled as a choice (``decode_prealloc_pick``); ``false``: the lowest-numbered free pages,
    as SGLang's allocator after ``merge_and_sort_free``.  With it, decode pages are
    interchangeable (symmetry reduction permutes them)."""

    @classmethod
    def flag_names(cls) -> list[str]:
        """Every field name, in declaration order."""
        return [f.name for f in fields(cls)]


@dataclass(frozen=True)
class Config:
    """One instance of the protocol: pool sizes, the context limit, the requests, the engine."""

    requests: tuple[Request, ...]
    decode_pages: int
    prefill_pages: int
    context_limit: int
    engine: Engine = field(default_factory=Engine)

    @property
    def tenants(self) -> list[str]:
        """Tenant names in order of first appearance."""
        out: list[str] = []
        for r in self.requests:
            if r.tenant not in out:
                out.append(r.tenant)
        return out

    def problems(self) -> list[str]:
        """What makes this configuration unusable (empty when it is fine)."""
        out = []
        e = self.engine
        if not self.requests:
            out.append("requests: at least one request is needed")
        if e.release_policy not in RELEASE_POLICIES:
            out.append(f"engine.release_policy: expected one of {', '.join(RELEASE_POLICIES)}")
        if e.request_streams and e.ordered_arrivals:
            out.append("engine.request_streams: needs ordered_arrivals = false")
        if e.timeout < 1:
            out.append("engine.timeout: expected a whole number >= 1")
        if e.write_latency_bound is not None and e.write_latency_bound < 0:
            out.append("engine.write_latency_bound: expected a whole number >= 0")
        for i, r in enumerate(self.requests):
            if not 1 <= r.pages <= self.context_limit:
                out.append(f"requests[{i}].pages: expected 1..context_limit ({self.context_limit})")
        if e.any_free_pages:
            choices = max(perm(self.decode_pages, r.pages) for r in self.requests) if self.requests else 0
            if choices > MAX_ALLOCATION_CHOICES:
                out.append(f"engine.any_free_pages: {self.decode_pages} decode pages give {choices} allocation "
                           f"choices for one request; at most {MAX_ALLOCATION_CHOICES}")
        if len(self.requests) + len(self.tenants) > 250:
            out.append("requests: too many requests and tenants for one-byte codes")
        return out
