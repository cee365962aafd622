"""The parameters of one vLLM PD instance: pool sizes, the requests, and the engine's knobs.

Plain data, read with ordinary Python when the spec is built (not state).  Times are in
*ticks* of the model's clock (:meth:`~.protocol.VllmPd.clock_tick`); a scenario picks small
values that keep the same order as the real seconds (0.33.0: ``kv_lease_duration`` 30 s, a
heartbeat every ``lease // 6`` = 5 s, each extending the lease to ``now + 2/3 * lease``).

The scenario file's tables (:func:`parse_config`, :func:`config_data`)::

    [sizes]
    prefill_blocks = 1      # 1..4: prefill's (the KV producer's) block pool
    decode_blocks = 2       # 1..4: decode's (the KV consumer's) block pool

    [[requests]]            # 1..3 of them, one KV block each, prefilled in this order
    tenant = "A"
    # replays = 0           # optional (V9): a decode-only request carrying request 0's
                            # kv_transfer_params (a replayed or stale reference); never prefilled
    # cached = true         # optional (V13, pull): decode already holds the request's whole KV
                            # in its prefix cache (a full local hit: notify-only, no READ)
    # id = "chatcmpl-a1"    # optional, on every request or none: the external request id the
                            # client (or router) sent both engines; two requests may share one
    # suffixes = ["3f9c2a1b", "7e01d4c2"]  # optional, with id: the 8 hex digits each engine's
                            # input processor appended (prefill's, decode's); unset: none
                            # (VLLM_DISABLE_REQUEST_ID_RANDOMIZATION, internal id = external id)

    [engine]                # knobs of :class:`Engine`; unset ones keep their defaults
    mode = "pull"           # or "push"
    kv_lease_duration = 2
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable

__all__ = ["Request", "Engine", "Config", "CONFIG_KEYS", "WRITTEN_WHEN_SET", "parse_config", "config_data"]

CONFIG_KEYS = ("sizes", "requests", "engine")
_SIZES = {"prefill_blocks": (1, 4), "decode_blocks": (1, 4)}
_MAX_REQUESTS = 3
_TICKS = {"kv_lease_duration": (1, 6)}
_COUNTS = {"write_fan_in": (1, 3), "mla_prefill_ranks": (1, 2), "turn2_clock_offset_error": (0, 2),
           "read_fan_in": (1, 3)}
_CHOICES = {"mode": ("pull", "push"), "kv_load_failure_policy": ("fail", "recompute"),
            "completion_tracking": ("boolean", "skip_untracked", "counted")}
_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SUFFIX = re.compile(r"[0-9a-f]{8}")
_OPTIONAL_TICKS = {"heartbeat_interval": ("none", 1, 6), "arrival_latency_bound": ("unbounded", 0, 6),
                   "read_latency_bound": ("unbounded", 0, 6)}


@dataclass(frozen=True)
class Request:
    """One request: its tenant (whose data its KV is).  Each request's KV is one block."""

    tenant: str
    replays: int | None = None
    """V9 (#52234): this request is not prefilled; it reaches decode carrying the
    ``kv_transfer_params`` of request ``replays`` (an earlier one), consumed or not -- a router
    retry or a replayed reference.  Its prompt is that request's, so that request's KV is its
    own; it READs the block ids the parameters name, whoever holds them by then."""
    cached: bool = False
    """V13 (#54714, pull): decode already has the request's KV in its local prefix cache (a full
    local hit), yet the scheduler parks it in ``WAITING_FOR_REMOTE_KVS`` (``awaiting_kvs``) with
    an empty local block list; decode's worker takes ``_read_blocks``' notify-only path: no READ,
    only ``send_notif`` of ``"{remote_request_id}:{n}"`` so that prefill frees its blocks."""
    id: str | None = None
    """The external request id both engines were given (the client's or the router's); ``None``:
    the conformance harness's own (``R0``, ...).  Model-only it changes nothing: the model names
    requests by slot; the harness gives the real engines these ids (:meth:`internal_ids`)."""
    suffixes: tuple[str, str] | None = None
    """The 8 hex digits 0.33.0's ``InputProcessor.assign_request_id`` (input_processor.py) appended
    on prefill and on decode (``f"{external}-{random_uuid():.8}"``); ``None`` with an ``id``:
    ``VLLM_DISABLE_REQUEST_ID_RANDOMIZATION`` is set and the internal id is the external one."""

    def internal_ids(self) -> tuple[str, str] | None:
        """Prefill's and decode's internal request id (the ``request.request_id`` their
        schedulers and connectors key their state by), or ``None`` when the scenario chose none."""
        if self.id is None:
            return None
        if self.suffixes is None:
            return self.id, self.id
        return f"{self.id}-{self.suffixes[0]}", f"{self.id}-{self.suffixes[1]}"


@dataclass(frozen=True)
class Engine:
    """How vLLM 0.33.0's NIXL connector (pull or push mode) and scheduler behave, and what the
    environment may do.  The defaults are 0.33.0 as shipped, with no fault on."""

    mode: str = "pull"
    """``pull`` (``NixlPullConnector``, the default ``NixlConnector``: decode READs prefill's
    blocks) or ``push`` (``NixlPushConnector``: decode registers its blocks with ``PUSH_REG``,
    prefill WRITEs into them)."""
    kv_lease_duration: int = 2
    """``kv_lease_duration`` in ticks: prefill frees a finished request's blocks this long after
    ``request_finished`` unless a heartbeat extended the lease (``_reap_expired_send_leases``)."""
    heartbeat_interval: int | None = 1
    """Decode sends ``HB:`` notifications every this many ticks while it keeps stepping and the
    request is queued or loading (#41383, ``_send_heartbeats``); each extends prefill's lease
    to ``max(old, now + 2/3 * lease)`` (``_handle_heartbeat``).  ``none``: before #41383 (a bare
    TTL, ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT``)."""
    decode_may_stall: bool = False
    """Decode's engine loop may stall (a long forward pass): no scheduler step, so no heartbeat
    and no new READ, while time passes and posted READs go on."""
    arrival_latency_bound: int | None = None
    """The router hands a finished prefill's request to decode within this many ticks (``None``:
    any time, e.g. queued behind other work)."""
    read_latency_bound: int | None = None
    """Once decode took the request, its READ (handshake, post and data movement) completes
    within this many ticks (``None``: a stuck transport may take any time)."""
    client_aborts: bool = False
    """The client may abort a request on decode while it is ``WAITING_FOR_REMOTE_KVS``."""
    delay_free_aborted_load: bool = True
    """#32255: ``finish_requests`` on an aborted request whose READ is in flight sets
    ``delay_free_blocks`` and frees its blocks only on ``finished_recving``; ``false`` is the
    pre-fix behaviour (freed at once while the READ still writes into them, V4)."""
    prefill_aborts: bool = False
    """The client's abort may reach prefill after the request finished there (V3's race)."""
    abort_of_finished_frees: bool = False
    """Before #25067: an abort of a request prefill already finished (blocks kept for decode)
    frees those blocks at once; with #25067 ``finish_requests`` skips finished requests and
    the lease reclaims them."""

    decode_rejects: bool = False
    """Decode's serving layer may reject a request before admission (a chat-template or
    validation error, an engine paused for a weight update: ``serving.py`` calls
    ``notify_kv_transfer_request_rejected``), after prefill finished it (V12)."""
    reject_notifies_prefill: bool = True
    """#41269: a rejected request is submitted to decode's engine as ``abort_immediately``
    (``core.py``: ``add_request`` then ``abort_requests``), and ``request_finished``
    (pull_scheduler.py:219-230) seeds an empty recv so decode's worker sends prefill the
    notify-only ``"{req}:{n}"`` that frees its blocks; ``false`` is the behaviour before it
    (prefill's blocks wait for the timeout, V12).  Push mode's scheduler seeds the same empty
    recv (push_scheduler.py:233-245), but 0.33.0's push worker only records it
    (``start_load_kv``, push_worker.py:197-217) and prefill's push worker frees only on its
    own WRITE handles or the lease: in push mode no notification goes out either way."""
    kv_lease_expires: bool = True
    """Prefill's lease (or, before #41383, ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT``) can run out
    within the scenario; ``false`` models a timeout beyond the scenario's horizon (480 s
    against requests that last a second): a block only a notification would free is held for
    the whole run (V12)."""
    async_scheduling: bool = False
    """Decode runs with async scheduling (``max_concurrent_batches > 1``): step N+1 is
    scheduled, and writes the running requests' KV blocks on the GPU, before step N's output
    is processed, so a request that finishes in step N has a step in flight that still writes
    its blocks when ``update_from_output`` frees them (V15)."""
    defer_block_free: bool = True
    """#45357: on a KV consumer with overlapping batches the scheduler defers a finished
    request's block free until the step that may still write them is processed
    (``_request_blocks_can_be_freed``, ``deferred_frees``, ``_drain_deferred_frees``,
    scheduler.py:3077-3118); ``false`` is the behaviour before it (the blocks go back to the
    pool at once and may be reallocated to a request whose NIXL load races the stale GPU
    write, V15).  Only with ``async_scheduling``."""

    decode_prefix_hit: bool = False
    """Each request's KV is two blocks on prefill (a prefix and a suffix), and decode already
    has the prefix in its prefix cache: it allocates (and, in push mode, registers) only the
    uncached suffix block, fewer blocks than prefill exported (V11, #48633 row C3)."""
    prefix_end_trim: bool = True
    """#48758: the transfer pairs blocks after ``_apply_prefix_caching`` (base_worker.py:3759),
    which end-trims prefill's blocks to decode's count, so decode's suffix slot gets prefill's
    suffix block (push: ``_xfer_blocks``, push_worker.py:690-695); ``false`` is push before it
    (the block lists paired from the front: prefill's prefix block lands in decode's suffix
    slot, silently, V11).  Only with ``decode_prefix_hit``."""
    decode_appended_token: bool = False
    """V11's pull-side variant (#50558): the proxy appended a token to decode's prompt, which
    crosses a block boundary.  0.33.0's decode counts its whole prompt as remote tokens
    (``get_num_new_matched_tokens``' ``do_remote_prefill`` branch, pull_scheduler.py:59-65, via
    ``_get_remote_prefill_token_count``, base_scheduler.py:402-409: not capped by the
    ``remote_num_tokens`` prefill exported), so with the prefix cached it allocates two uncached
    blocks, as many as prefill exported; ``_apply_prefix_caching`` (pull_worker.py:479-494,
    base_worker.py:3786-3792) then trims nothing and the READ pairs decode's first uncached
    (suffix) slot with prefill's prefix block, silently.  The model tracks that suffix slot only
    (decode's block for the appended token, which gets prefill's suffix block, is not modelled).
    Pull mode, with ``decode_prefix_hit``."""
    remote_token_cap: bool = False
    """HYPOTHETICAL (#50558 was closed unmerged; not in 0.33.0): decode caps its remote token
    count at ``remote_num_tokens``, as the ``do_remote_decode`` branch already does
    (pull_scheduler.py:85-87), allocates only the suffix block for the loaded tokens and
    computes the appended token itself, so ``_apply_prefix_caching`` end-trims as without the
    appended token.  Only with ``decode_appended_token``."""
    write_fan_in: int = 1
    """Push: ``pp_size * producers_per_consumer``, how many prefill ranks each WRITE their part of
    decode's block (their heads, their pipeline stage) and each send a ``"{D_req}:{tp}"``
    notification; decode's ``_get_new_notifs`` (push_worker.py:797-806) finishes the load only
    when it has counted that many ("TP/PP fan-in").  1 (the default): one rank each side."""
    write_post_may_fail: bool = False
    """Push (V6): a prefill rank's ``_xfer_blocks`` may fail to post its WRITE
    (``make_prepped_xfer``/``transfer`` raises): the except-branch (push_worker.py:746-763) logs,
    adds the request to ``_send_failures`` and sends no notification, so decode never completes
    its count."""
    push_handshake_may_defer: bool = False
    """Push (V7's deferred variant, #55470): when prefill's writer matches a ``PUSH_REG``, the
    P->D handshake may still be pending (a slow or head-of-line-blocked peer, #48633 S2), so
    ``_do_start_push_kv`` defers the WRITE to ``_deferred_push_inbox``; its delay is not bounded
    by ``read_latency_bound``, and the writer posts it when the handshake resolves without
    checking that prefill still holds the request."""
    decode_refuses_replayed_params: bool = False
    """HYPOTHETICAL fail-closed fix of V9, not in 0.33.0 (#52234 is open): decode admits a
    ``(remote_engine_id, remote_request_id)`` reference once; a second request carrying it is
    refused before any block is allocated or READ (``FINISHED_ERROR``)."""
    report_notify_only_recv: bool = True
    """#56640 (V13): ``_read_blocks``' notify-only path records an empty transfer list for a
    request the scheduler parked (``awaiting_kvs``: ``self._recving_transfers.setdefault(
    request_id, [])``), so ``_pop_done_transfers`` reports it in ``finished_recving`` and the
    scheduler runs it on its local KV; ``false`` is the behaviour before it (#54714): nothing is
    recorded, the request is named in no ``finished_recving`` and sits in
    ``WAITING_FOR_REMOTE_KVS`` holding its blocks for the life of the process."""
    mla_prefill_ranks: int = 1
    """Pull (V16, #36958): an MLA model whose prefill runs with more TP ranks than decode
    (``tp_ratio < 0``): every prefill rank holds a replica of the request's KV, decode READs it
    from one rank only, and ``_read_blocks_for_req`` (pull_worker.py:377-399) sends each other
    prefill rank a notify-only ``"{id}:{local_consumers}"``; prefill's scheduler frees the block
    once every rank reported ``finished_sending`` (``KVOutputAggregator``).  1 (the default):
    one rank each side."""
    mla_notif_remote_id: bool = True
    """#36958 (V16): the MLA notify-only notification names prefill's request id
    (``meta.remote.request_id``), which the other rank's ``_get_new_notifs`` counts; ``false`` is
    the behaviour before it (decode's own request id: the rank logs "unrecognized request" and
    drops it, so it reports the request only when its lease expires).  Only with
    ``mla_prefill_ranks = 2``."""
    reaper_scans_every_lease: bool = True
    """V2 (#58222, #50789): 0.33.0's ``_reap_expired_send_leases`` (base_worker.py:3352-3378)
    scans every ``_reqs_to_send`` entry and reaps each expired one; ``false`` is the reaper of
    0.27.1 (#58222), which walks the dict in insertion order and stops at the first entry whose
    lease is still live ("Sorted dict, oldest requests are put first so we can exit early"),
    although ``_handle_heartbeat`` extends a lease in place, so an expired entry behind a
    heartbeated head is not reaped while the head lives."""
    read_may_hang: bool = False
    """Pull: a READ that moved its data may never complete (a wedged transport: no completion
    and no error, so ``check_xfer_state`` never reports it done).  0.33.0's decode has no READ
    timeout: the request stays loading, decode keeps stepping and heartbeating it, and
    prefill's lease for it is extended for as long as decode runs (a stuck transport
    with decode still stepping does not expire)."""
    turn2_read: bool = False
    """V14 (#47021): the READ is bidirectional KV transfer's turn-2 readback.  The roles mirror
    pull mode's: the block holder (the ``prefill_*`` actions) is turn 1's decode engine, whose
    ``request_finished`` (pull_scheduler.py:247-270, the ``is_d_node`` branch) pins its blocks
    for ``decoder_kv_blocks_ttl`` (480 s; here ``kv_lease_duration`` ticks, never heartbeated:
    ``heartbeat_interval = "none"``) and exports the deadline as ``remote_blocks_expiry_time``;
    the reader (the ``decode_*`` actions) is turn 2's prefill engine, whose pull worker READs
    those blocks when the client sends turn 2 (any time).  The holder frees them on the READ's
    notification or at the TTL (``_reap_expired_send_leases``), READ in flight or not."""
    turn2_declines_near_expiry: bool = True
    """#47021: the reader's ``_read_blocks_for_req`` declines the READ when
    ``_is_turn2_read_expired`` (pull_worker.py:127-136): ``now + 5 s >= remote_blocks_expiry_time
    - clock_offset``.  A tick is 10 s here (as in the conformance harness), so with an exact clock
    offset it declines exactly the READs of a deadline already passed (a lease at 0 the holder
    has not reaped yet); a READ posted with a tick left is not declined and may outlive the
    deadline if it takes longer than the margin.  The declined request fails (``failed_recving``,
    ``kv_load_failure_policy = "fail"``: ``FINISHED_ERROR``) and the holder is told nothing.
    ``false``: before #47021.  Only with ``turn2_read``."""
    turn2_clock_offset_error: int = 0
    """Ticks by which the reader's ``_engine_clock_offset`` (measured at the handshake) places
    the holder's deadline later than it is.  One tick (10 s) is more than the 5 s margin: the
    check then lets through READs of a deadline that passed less than a tick ago.  Only with
    ``turn2_read``."""
    push_fail_notif: bool = False
    """HYPOTHETICAL, not in 0.33.0: #50754 (open) -- a rank whose WRITE failed to post sends a
    ``PUSH_FAIL`` notification; decode counts it, and once every rank answered reports the load
    failed (``failed_recving``: ``kv_load_failure_policy = "fail"``, the request ends in
    ``FINISHED_ERROR`` and its block is freed)."""

    read_fan_in: int = 1
    """Pull, heterogeneous TP (V8): prefill's ``tp_size`` is this many times decode's, so
    decode's rank READs each of that many prefill ranks' part of the block (its heads) with a
    handle of its own: ``_read_blocks_for_req`` calls ``_read_blocks`` once per ``read_spec``
    (pull_worker.py:318-372), each READ's ``notif_msg`` ``"{req}:{local_consumers}"`` (1 here)
    tells its own prefill rank, and the request is done on decode when no handle remains
    (``_pop_done_transfers``).  1 (the default): one rank each side."""
    read_may_fail: bool = False
    """Pull (V8): a posted READ may fail: ``check_xfer_state`` returns an error (a transport
    fault); NIXL delivers no notification for it.  With ``kv_load_failure_policy = "fail"``
    (0.33.0's default) the failed load ends the request in ``FINISHED_ERROR`` and frees its
    blocks."""
    failure_waits_for_siblings: bool = True
    """#56104 (in 0.33.0): a failed READ is reported (``failed_recving``, blocks invalidated and
    freed) only once no sibling handle of the request is in progress: ``_pop_done_transfers``
    retains in-progress handles and ``get_transfer_results`` reports a request of
    ``_recv_failures`` only when it is no longer in ``_recving_transfers``
    (base_worker.py:3198-3227, 3402-3452); ``false`` is the behaviour before it (the first
    failed handle reports the load failed while sibling READs still write into its blocks,
    V8)."""

    read_post_may_fail: bool = False
    """Pull (V8): posting a READ may fail (``make_prepped_xfer`` or ``transfer`` raises in
    ``_read_blocks``, pull_worker.py:536-567): the except-branch routes the request to failure
    reporting (``_handle_failed_transfer`` into ``_recv_failures``) and returns ``False``, and
    ``_read_blocks_for_req`` (361-375) posts no further sibling ("no sibling READs may be
    posted"); the READs posted before it go on.  With ``failure_waits_for_siblings = false``
    (before #56104) the failure is reported at once and the loop posts the remaining siblings."""

    read_release_may_fail: bool = False
    """Pull (V8's third path, 0.33.0): a READ whose ``check_xfer_state`` returned an error may
    still be moving data ("A status error does not guarantee that the backend stopped DMA"), and
    releasing its handle may fail (NIXL's ``releaseXferReq`` refuses an active transfer):
    ``_handle_failed_transfer`` -> ``_try_release_xfer_handle`` (base_worker.py:3454-3467)
    returns ``False`` and ``_pop_done_transfers`` keeps the handle, so the request's failure is
    reported (its blocks freed) only after a later release succeeds.  Needs ``read_may_fail``."""
    retains_unreleased_handle: bool = True
    """0.33.0's ``_try_release_xfer_handle`` keeps a handle whose release failed; ``false`` is a
    HYPOTHETICAL decode worker that drops it (releases the handle ignoring the error) and reports
    the failure at once.  Only with ``read_release_may_fail``."""

    prefill_reregisters: bool = False
    """Pull (V17): prefill may re-register its KV cache once, while it holds no request: a sleep
    (level 1 discards the KV cache; ``release_kv_cache_memory`` needs a completed pause and no
    request) and ``wake_up``, whose ``_set_kv_connector_handshake_metadata`` publishes the new
    registration (``set_xfer_handshake_metadata`` bumps ``_registration_generation``,
    base_scheduler.py:296-322).  Decode's cached descriptors still name the old memory; a READ
    through them reads released memory, not the request's KV.  Requests prefilled after it carry
    the new ``remote_registration_generation``."""
    registration_generation_check: bool = True
    """V17 (in 0.33.0): decode's ``_read_blocks_for_req`` (pull_worker.py:146-151) compares the
    request's ``remote_registration_generation`` with the one it loaded
    (``_remote_registration_generations``); a newer one makes it drop the engine's agent and
    descriptors (``_cleanup_remote_engine``) and handshake again before the READ; ``false`` is
    the behaviour without it (the cached descriptors are used until the engine TTL evicts them).
    Only with ``prefill_reregisters``."""

    prefix_sharing: bool = False
    """Decode's prefix cache shares one KV block between live requests of the same prompt prefix
    (``BlockPool``: ``KVCacheBlock.ref_cnt``, ``touch``, ``free_blocks``, ``_maybe_evict_cached_block``):
    the knobs below, modelled only by the spec ``vllm-prefix-cache``
    (:class:`~kvproof.spec.vllm.prefix_cache.VllmPrefixCache`); the spec ``vllm`` refuses it."""
    sync_kv_load: bool = False
    """With ``prefix_sharing``: the connector loads the prefix synchronously, in the forward of the
    step that allocated it (``get_num_new_matched_tokens`` returns ``load_kv_async = False``:
    an offloading or LMCache-style connector); its blocks are cached at allocation.  ``false``
    is NIXL's asynchronous load (``WAITING_FOR_REMOTE_KVS``)."""
    kv_load_may_fail: bool = False
    """With ``prefix_sharing``: the load of the prefix block may fail; the connector reports the
    block in ``invalid_block_ids`` (NIXL: ``_handle_failed_transfer`` puts the READ's local
    blocks in ``_invalid_block_ids``, base_worker.py:3248-3252)."""
    kv_load_failure_policy: str = "fail"
    """With ``prefix_sharing``: ``kv_transfer_config.kv_load_failure_policy`` (0.33.0's default
    ``fail``: the affected requests end in error; ``recompute``: they are rescheduled to
    recompute the invalid blocks, ``_handle_invalid_blocks``, scheduler.py:3703-3791)."""
    sharers_wait_for_recompute: bool = False
    """HYPOTHETICAL fix of vLLM issue #49250 (open): under ``recompute`` a request sharing an
    invalid block that an earlier request will recompute is not scheduled until that recompute
    wrote it; 0.33.0 lets it "still consider this block as computed" (scheduler.py:3644-3651)."""
    evict_invalid_blocks: bool = True
    """0.33.0 (since vLLM PR #26813, "invalidate cached blocks by eviction to prevent
    poisoning"): under ``fail`` the invalid blocks of synchronous loads are evicted from the
    prefix cache (``kv_cache_manager.evict_blocks``); ``false`` is HYPOTHETICAL (the failed block
    keeps its hash)."""
    delay_cache_blocks: bool = True
    """0.33.0: blocks an asynchronous load fills are cached only once it finished
    (``allocate_slots(..., delay_cache_blocks=load_kv_async)``, scheduler.py:1442,
    kv_cache_manager.py:611-614; ``_update_waiting_for_remote_kv`` caches them); ``false`` is
    HYPOTHETICAL (cached at allocation, as a synchronous load's are)."""

    multi_connector: bool = False
    """Decode runs ``MultiConnector(NixlConnector, LMCacheMPConnector)``: NIXL receives a request's
    KV from prefill while LMCache's multi-process connector saves it (``request_finished``
    returns ``True`` for every request), modelled only by the spec ``vllm-multi-connector``
    (:class:`~kvproof.spec.vllm.multi_connector.VllmMultiConnector`); the spec ``vllm`` refuses it."""
    completion_tracking: str = "boolean"
    """With ``multi_connector``: how the scheduler waits for a finished request's transfer
    completions.  ``boolean`` is 0.33.0 (one ``delay_free_blocks``; the first completion
    ``_free_blocks`` the request and the second hits ``assert req_id in self.requests``, vLLM
    issue #46240); ``skip_untracked`` skips a completion of a request no longer tracked (vLLM PR
    #48821, closed unmerged); ``counted`` is HYPOTHETICAL (the completions still owed are
    counted and the blocks freed at the last)."""

    @property
    def suffix_slot_gets_prefix(self) -> bool:
        """V11: the transfer pairs decode's one (suffix) slot with prefill's prefix block: push
        before #48758 (lists paired from the front), or pull with a proxy-appended token that
        0.33.0 does not cap (#50558: equal counts, nothing trimmed)."""
        return self.decode_prefix_hit and (not self.prefix_end_trim
                                           or (self.decode_appended_token and not self.remote_token_cap))

    def problems(self) -> list[str]:
        """What is inconsistent about these knobs (``key: text``), or nothing."""
        out = []
        if self.mode == "push" and self.prefill_reregisters:
            out.append("engine.prefill_reregisters: modelled in pull mode only")
        if not self.registration_generation_check and not self.prefill_reregisters:
            out.append("engine.registration_generation_check: false matters only with prefill_reregisters = true")
        if self.mode == "push" and (self.read_fan_in != 1 or self.read_may_fail or not self.failure_waits_for_siblings):
            out.append("engine.mode: read_fan_in, read_may_fail and failure_waits_for_siblings are pull-mode knobs")
        if not self.failure_waits_for_siblings and not (self.read_may_fail or self.read_post_may_fail):
            out.append("engine.failure_waits_for_siblings: false matters only with read_may_fail = true")
        if self.mode == "push" and self.read_post_may_fail:
            out.append("engine.read_post_may_fail: a pull-mode knob")
        if self.read_release_may_fail and not self.read_may_fail:
            out.append("engine.read_release_may_fail: needs read_may_fail = true (a READ whose status is an error)")
        if not self.retains_unreleased_handle and not self.read_release_may_fail:
            out.append("engine.retains_unreleased_handle: false matters only with read_release_may_fail = true")
        if self.read_post_may_fail and self.prefill_reregisters:
            out.append("engine.read_post_may_fail: not modelled with prefill_reregisters")
        if (self.read_fan_in != 1 or self.read_may_fail or self.read_post_may_fail or self.prefill_reregisters) and (
                self.decode_rejects or self.async_scheduling or self.decode_prefix_hit or self.client_aborts
                or self.prefill_aborts or self.decode_refuses_replayed_params):
            out.append("engine.read_fan_in: per-rank READs are modelled without rejections, aborts, async "
                       "scheduling, prefix hits or refused replays")
        if (self.read_fan_in != 1 or self.read_may_fail or self.read_post_may_fail or self.prefill_reregisters) and (
                self.mla_prefill_ranks != 1 or self.read_may_hang or not self.reaper_scans_every_lease
                or self.turn2_read):
            out.append("engine.read_fan_in: per-rank READs are modelled without MLA ranks, hanging READs, the "
                       "reaper before #58222 or the turn-2 readback")
        if self.decode_appended_token and (self.mode != "pull" or not self.decode_prefix_hit):
            out.append("decode_appended_token: modelled in pull mode with decode_prefix_hit = true (#50558)")
        if self.remote_token_cap and not self.decode_appended_token:
            out.append("remote_token_cap: matters only with decode_appended_token = true")
        if not self.prefix_end_trim and not self.decode_prefix_hit:
            out.append("prefix_end_trim: false matters only with decode_prefix_hit = true")
        if not self.reject_notifies_prefill and not self.decode_rejects:
            out.append("reject_notifies_prefill: false describes a rejection; set decode_rejects = true")
        if not self.defer_block_free and not self.async_scheduling:
            out.append("defer_block_free: false matters only with async_scheduling = true")
        if self.mode == "pull" and (self.write_fan_in != 1 or self.write_post_may_fail or self.push_fail_notif):
            out.append("engine.mode: write_fan_in, write_post_may_fail and push_fail_notif are push-mode knobs")
        if self.push_handshake_may_defer and (self.mode == "pull" or self.write_fan_in != 1 or self.write_post_may_fail):
            out.append("engine.push_handshake_may_defer: modelled in push mode with one rank each side")
        if self.mla_prefill_ranks != 1 and self.mode != "pull":
            out.append("engine.mla_prefill_ranks: the MLA notify-only notification is modelled in pull mode")
        if not self.mla_notif_remote_id and self.mla_prefill_ranks == 1:
            out.append("mla_notif_remote_id: false matters only with mla_prefill_ranks = 2")
        if self.read_may_hang and self.mode != "pull":
            out.append("read_may_hang: a hanging READ is a pull-mode knob")
        if not self.reaper_scans_every_lease and not self.kv_lease_expires:
            out.append("reaper_scans_every_lease: false matters only with kv_lease_expires = true")
        if self.turn2_read and (self.mode != "pull" or self.heartbeat_interval is not None):
            out.append("turn2_read: the turn-2 readback is a pull READ of blocks pinned for a TTL that nothing "
                       'extends (mode = "pull", heartbeat_interval = "none")')
        if not self.turn2_read and (not self.turn2_declines_near_expiry or self.turn2_clock_offset_error):
            out.append("turn2_declines_near_expiry: turn2_declines_near_expiry and turn2_clock_offset_error "
                       "matter only with turn2_read = true")
        shared = {"sync_kv_load": self.sync_kv_load, "kv_load_may_fail": self.kv_load_may_fail,
                  "kv_load_failure_policy": self.kv_load_failure_policy != "fail",
                  "sharers_wait_for_recompute": self.sharers_wait_for_recompute,
                  "evict_invalid_blocks": not self.evict_invalid_blocks,
                  "delay_cache_blocks": not self.delay_cache_blocks}
        for key, away in shared.items():
            if away and not self.prefix_sharing:
                out.append(f"{key}: a prefix-sharing knob; set prefix_sharing = true (the spec vllm-prefix-cache)")
                break
        if self.sharers_wait_for_recompute and self.kv_load_failure_policy != "recompute":
            out.append('sharers_wait_for_recompute: matters only with kv_load_failure_policy = "recompute"')
        if not self.evict_invalid_blocks and not self.sync_kv_load:
            out.append("evict_invalid_blocks: false matters only with sync_kv_load = true (async blocks are not cached)")
        if not self.delay_cache_blocks and self.sync_kv_load:
            out.append("delay_cache_blocks: false matters only with an asynchronous load (sync_kv_load = false)")
        if self.completion_tracking != "boolean" and not self.multi_connector:
            out.append("completion_tracking: a MultiConnector knob; set multi_connector = true "
                       "(the spec vllm-multi-connector)")
        if self.multi_connector and self.prefix_sharing:
            out.append("multi_connector: the specs vllm-multi-connector and vllm-prefix-cache are separate; "
                       "set one of multi_connector and prefix_sharing")
        if self.push_fail_notif and not self.write_post_may_fail:
            out.append("engine.push_fail_notif: needs write_post_may_fail = true (a PUSH_FAIL answers a failed post)")
        return out


@dataclass(frozen=True)
class Config:
    """One instance: the two block pools, the requests, the engine."""

    requests: tuple[Request, ...]
    prefill_blocks: int = 1
    decode_blocks: int = 2
    engine: Engine = Engine()

    @property
    def tenants(self) -> tuple[str, ...]:
        """The distinct tenants, in order of first appearance."""
        return tuple(dict.fromkeys(r.tenant for r in self.requests))

    def problems(self) -> list[str]:
        """What is inconsistent about this instance (``key: text``), or nothing."""
        out = self.engine.problems()
        for i, r in enumerate(self.requests):
            if r.replays is None:
                continue
            if not 0 <= r.replays < i or self.requests[r.replays].replays is not None:
                out.append(f"requests[{i}].replays: the index of an earlier request that is not a replay itself")
            elif self.engine.mode != "pull":
                out.append(f"requests[{i}].replays: replayed parameters are modelled in pull mode only")
            elif (self.engine.read_fan_in != 1 or self.engine.read_may_fail or self.engine.read_post_may_fail
                  or self.engine.prefill_reregisters):
                out.append(f"requests[{i}].replays: replayed parameters are modelled with one READ per request")
        for i, r in enumerate(self.requests):
            if not r.cached:
                continue
            if self.engine.mode != "pull" or r.replays is not None:
                out.append(f"requests[{i}].cached: a full local prefix hit is modelled in pull mode, not for a replay")
            elif self.engine.client_aborts or self.engine.async_scheduling or self.engine.decode_prefix_hit:
                out.append(f"requests[{i}].cached: not modelled with client_aborts, async_scheduling or decode_prefix_hit")
        if self.engine.mla_prefill_ranks != 1 and any(r.cached or r.replays is not None for r in self.requests):
            out.append("engine.mla_prefill_ranks: not modelled with cached or replayed requests")
        if not self.engine.report_notify_only_recv and not any(r.cached for r in self.requests):
            out.append("engine.report_notify_only_recv: false matters only with a cached request (requests[].cached)")
        out.extend(self._id_problems())
        return out

    def request_ids(self) -> tuple[tuple[str, str], ...]:
        """Each slot's prefill and decode internal request id, when the scenario chose them
        (``id`` on every request); empty: the harness's own."""
        ids = tuple(r.internal_ids() for r in self.requests)
        return ids if all(ids) else ()

    def _id_problems(self) -> list[str]:
        given = [r.id is not None for r in self.requests]
        if any(given) and not all(given):
            return [f"requests[{given.index(False)}].id: set an id on every request or on none"]
        seen: dict[tuple[int, str], int] = {}
        for i, ids in enumerate(self.request_ids()):
            for side, rid in enumerate(ids):
                j = seen.setdefault((side, rid), i)
                if j != i:
                    engine = ("prefill", "decode")[side]
                    return [f"requests[{i}].suffixes: {engine}'s internal id {rid!r} is requests[{j}]'s too: "
                            "two requests with one internal id on one engine are not modelled"]
        return []


def parse_config(data: dict[str, Any], fail: Callable[..., Exception]) -> Config:
    """The configuration the ``[sizes]``, ``[[requests]]`` and ``[engine]`` tables describe;
    ``fail(key, what, got)`` makes the one-line error for the first problem."""
    sizes = data.get("sizes", {})
    if not isinstance(sizes, dict):
        raise fail("[sizes]", "a table with " + ", ".join(_SIZES))
    for key in sizes:
        if key not in _SIZES:
            raise fail(f"[sizes].{key}", "one of " + ", ".join(_SIZES))
    values = {}
    for key, (lo, hi) in _SIZES.items():
        v = sizes.get(key)
        if not _is_int(v) or not lo <= v <= hi:
            raise fail(f"[sizes].{key}", f"a whole number in {lo}..{hi}", v)
        values[key] = v
    reqs = data.get("requests")
    if not isinstance(reqs, list) or not 1 <= len(reqs) <= _MAX_REQUESTS:
        raise fail("[[requests]]", f"1..{_MAX_REQUESTS} request tables")
    requests = []
    for i, r in enumerate(reqs):
        if not isinstance(r, dict) or "tenant" not in r or set(r) - {"tenant", "replays", "cached", "id", "suffixes"}:
            raise fail(f"requests[{i}]", "a table with exactly tenant (each request is one KV block)"
                       " and optionally replays, cached, id and suffixes", r)
        if not isinstance(r["tenant"], str) or not r["tenant"]:
            raise fail(f"requests[{i}].tenant", "a non-empty string", r["tenant"])
        replays = r.get("replays")
        if replays is not None and (not _is_int(replays) or not 0 <= replays < i):
            raise fail(f"requests[{i}].replays", f"the index of an earlier request (0..{i - 1})", replays)
        cached = r.get("cached", False)
        if not isinstance(cached, bool):
            raise fail(f"requests[{i}].cached", "true or false", cached)
        rid = r.get("id")
        if rid is not None and (not isinstance(rid, str) or not _ID.fullmatch(rid)):
            raise fail(f"requests[{i}].id", "a request id (1..64 of letters, digits, '-', '_', '.')", rid)
        suffixes = r.get("suffixes")
        if suffixes is not None:
            if rid is None:
                raise fail.problem(f"requests[{i}].suffixes", "needs an id (the external id they follow)")
            if (not isinstance(suffixes, list) or len(suffixes) != 2
                    or not all(isinstance(x, str) and _SUFFIX.fullmatch(x) for x in suffixes)):
                raise fail(f"requests[{i}].suffixes", "[prefill's, decode's], each 8 lowercase hex digits "
                           "(random_uuid()'s first 8)", suffixes)
            suffixes = tuple(suffixes)
        requests.append(Request(r["tenant"], replays, cached, rid, suffixes))
    engine = _engine(data.get("engine", {}), fail)
    for problem in engine.problems():  # knobs that contradict each other: one line naming the first
        key, _, text = problem.partition(": ")
        raise fail.problem(f"[engine].{key}", text)
    cfg = Config(tuple(requests), engine=engine, **values)
    for problem in cfg.problems():  # requests that contradict the engine (V9, V13): one line too
        key, _, text = problem.partition(": ")
        raise fail.problem(key, text)
    return cfg


WRITTEN_WHEN_SET = ("decode_rejects", "reject_notifies_prefill", "kv_lease_expires", "async_scheduling",
                    "defer_block_free", "decode_prefix_hit", "prefix_end_trim", "write_fan_in",
                    "write_post_may_fail", "push_fail_notif", "decode_refuses_replayed_params",
                     "push_handshake_may_defer", "report_notify_only_recv", "mla_prefill_ranks",
                     "mla_notif_remote_id", "reaper_scans_every_lease", "read_may_hang",
                     "turn2_read", "turn2_declines_near_expiry", "turn2_clock_offset_error",
                     "read_fan_in", "read_may_fail", "failure_waits_for_siblings", "prefill_reregisters",
                     "registration_generation_check", "read_post_may_fail", "decode_appended_token",
                     "remote_token_cap", "read_release_may_fail", "retains_unreleased_handle",
                     "prefix_sharing", "sync_kv_load", "kv_load_may_fail", "kv_load_failure_policy",
                     "sharers_wait_for_recompute", "evict_invalid_blocks", "delay_cache_blocks",
                     "multi_connector", "completion_tracking")
"""Knobs added after the first vLLM certificates and traces were stored (V12, V15, V11; TP/PP
fan-in, V6, V9, #55470; V13, V16; V2, V14; V8, V17; V8's release path): :func:`config_data` writes them only when a scenario sets them away
from their default, so the stored scenario of every file that leaves them alone (certificates,
traces) stays what it was."""


def config_data(cfg: Config) -> dict[str, Any]:
    """``cfg`` as the ``sizes``, ``requests`` and ``engine`` tables (every knob, but those of
    :data:`WRITTEN_WHEN_SET` only away from their default; ``None`` as its word)."""
    words = {k: w for k, (w, _, _) in _OPTIONAL_TICKS.items()}
    default = Engine()
    return {
        "sizes": {"prefill_blocks": cfg.prefill_blocks, "decode_blocks": cfg.decode_blocks},
        "requests": [{"tenant": r.tenant, **({} if r.replays is None else {"replays": r.replays}),
                      **({"cached": True} if r.cached else {}), **({} if r.id is None else {"id": r.id}),
                      **({} if r.suffixes is None else {"suffixes": list(r.suffixes)})}
                     for r in cfg.requests],
        "engine": {k: (words[k] if v is None else v) for k, v in asdict(cfg.engine).items()
                   if k not in WRITTEN_WHEN_SET or v != getattr(default, k)},
    }


def _engine(table: Any, fail) -> Engine:
    if not isinstance(table, dict):
        raise fail("[engine]", "a table of engine knobs")
    known = {f.name: f for f in fields(Engine)}
    values = {}
    for key, v in table.items():
        if key not in known:
            raise fail(f"[engine].{key}", "one of " + ", ".join(known))
        if key in _CHOICES:
            if v not in _CHOICES[key]:
                raise fail(f"[engine].{key}", "one of " + ", ".join(_CHOICES[key]), v)
        elif key in _COUNTS:
            lo, hi = _COUNTS[key]
            if not _is_int(v) or not lo <= v <= hi:
                raise fail(f"[engine].{key}", f"a whole number in {lo}..{hi}", v)
        elif key in _TICKS:
            lo, hi = _TICKS[key]
            if not _is_int(v) or not lo <= v <= hi:
                raise fail(f"[engine].{key}", f"a whole number of ticks in {lo}..{hi}", v)
        elif key in _OPTIONAL_TICKS:
            word, lo, hi = _OPTIONAL_TICKS[key]
            if v != word and (not _is_int(v) or not lo <= v <= hi):
                raise fail(f"[engine].{key}", f'a whole number of ticks in {lo}..{hi} or "{word}"', v)
            v = None if v == word else v
        elif not isinstance(v, bool):
            raise fail(f"[engine].{key}", "true or false", v)
        values[key] = v
    return Engine(**values)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
