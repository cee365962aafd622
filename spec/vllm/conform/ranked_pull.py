"""vLLM 0.33.0's pull mode with heterogeneous TP (V8, ``read_fan_in``): prefill's ``tp_size`` is
``F`` times decode's, so decode's one rank READs each of ``F`` prefill ranks' part of a block
with a handle of its own, and READs may fail; driven one kvproof event at a time: the pull
harness (:class:`~.harness.Harness`) with one real prefill ``NixlPullConnectorWorker`` per
prefill rank and a real decode ``NixlPullConnectorWorker``.

What runs as real vLLM code, beyond what :mod:`.harness` lists:

* decode's worker (pull_worker.py, base_worker.py): ``start_load_kv`` -> ``_read_blocks_for_req``
  (the registration-generation check, one ``ReadSpec`` per source rank of the TP plan, the
  sibling loop that stops after a failed post) -> ``_read_blocks`` (``_apply_prefix_caching``,
  ``_compute_desc_ids``, ``notif_msg = "{remote_request_id}:{local_consumers}"``,
  ``make_prepped_xfer("READ", ...)``, ``transfer``, the handle appended to
  ``_recving_transfers``); ``get_transfer_results`` with ``_pop_done_transfers`` (a handle in
  ``PROC`` retained, ``DONE`` released, ``ERR`` through ``_handle_failed_transfer`` and
  ``_try_release_xfer_handle``), the ``_recv_failures`` bookkeeping that reports a failed
  request only once it has no handle left (#56104), ``_invalid_block_ids`` and
  ``_cleanup_remote_engines``;
* decode's scheduler applying ``failed_recving`` (``_handle_failed_recving``, the default
  ``kv_load_failure_policy = "fail"``: ``finish_requests(..., FINISHED_ERROR)``, then
  ``_update_from_kv_xfer_finished`` frees the blocks);
* one prefill worker per rank, each with its own lease bookkeeping, ``_get_new_notifs``
  (counting its READ's notification toward the one consumer it expects) and reaper.

What the harness stands in for, beyond :mod:`.harness`:

* the handshake and the TP plan: decode's worker is built without ``__init__`` and given the
  state a completed handshake with an ``F``-rank prefill leaves (``_remote_agents`` naming the
  ``F`` prefill ranks' agents, ``tp_mappings`` with ``F`` source ranks and one local consumer,
  ``transfer_topo`` reporting ``tp_ratio = -F``, one descriptor region whose ids are block ids);
* NIXL: a stand-in agent on decode records each READ (which prefill rank: the remote
  descriptor handle, which blocks: the descriptor ids), reports it ``PROC`` until the event
  that completes it (``DONE``) or fails it (``ERR``); a READ copies the prefill block's tag into
  that rank's part of the decode block when its data moves; its notification waits in the
  prefill rank's agent until delivered;
* ``KVOutputAggregator``: prefill's scheduler gets a request in ``finished_sending`` once every
  rank reported it.

The harness calls decode's ``get_transfer_results`` only at the model's
``decode_pop_done_transfers``, with the other requests' handles and failures set aside (the
model reports one request per step).
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from types import SimpleNamespace

from kvproof.spec.vllm.conform.engine import BLOCK_SIZE, worker_class
from kvproof.spec.vllm.conform.harness import Divergent, Harness, HarnessError, _Agent
from kvproof.spec.vllm.conform.ranked import _Parts

__all__ = ["RankedPullHarness"]

_LOCAL_HANDLE = 1000  # decode's local descriptor handles (one per source rank) start here


class _ReadAgent:
    """Decode's stand-in NIXL agent: READs are ``PROC`` until completed (``DONE``) or failed
    (``ERR``); it receives no notification."""

    def __init__(self) -> None:
        self.fail_rank: int | None = None  # V8: the prefill rank whose READ post raises next
        self.state: dict[int, str] = {}
        self.refuse_release: set[int] = set()  # V8's third path: handles whose release raises
        self.posted: dict[int, tuple[int, list[int], list[int], bytes]] = {}  # handle -> (remote, src, dst, msg)

    def make_prepped_xfer(self, op, local_handle, local_descs, remote_handle, remote_descs, notif_msg=b""):
        """Prepare a READ of prefill rank ``remote_handle``'s descriptors into ours."""
        if op != "READ":
            raise HarnessError(f"decode posted a {op}")
        if self.fail_rank is not None and int(remote_handle) % 100 == self.fail_rank:
            self.fail_rank = None
            raise RuntimeError("NIXL_ERR_BACKEND: stand-in agent failed the post")
        handle = 100 + len(self.posted)
        self.state[handle] = "PROC"
        self.posted[handle] = (int(remote_handle), [int(x) for x in remote_descs],  # 100 * epoch + rank
                               [int(x) for x in local_descs], bytes(notif_msg))
        return handle

    def transfer(self, handle: int) -> str:
        """Start the READ (its data moves at ``nixl_read_take_data_part``)."""
        return "PROC"

    def check_xfer_state(self, handle: int) -> str:
        """``PROC``, ``DONE`` or ``ERR``."""
        return self.state[handle]

    def get_xfer_telemetry(self, handle: int):
        """No telemetry."""
        return None

    def release_xfer_handle(self, handle: int) -> None:
        """Releasing a handle succeeds, but for one in ``refuse_release`` (V8's third path: the
        stand-in raises as NIXL's ``releaseXferReq`` does for a transfer still active)."""
        if handle in self.refuse_release:
            raise RuntimeError("NIXL_ERR_REPOST_ACTIVE: stand-in agent refused to release an active transfer")

    def get_new_notifs(self) -> dict:
        """Decode receives no notification in pull mode."""
        return {}

    def check_remote_metadata(self, agent_name: str) -> bool:
        """The prefill ranks' metadata stays loaded (``_cleanup_remote_engines``)."""
        return True

    def release_dlist_handle(self, handle: int) -> None:
        """``_cleanup_remote_engine`` releases the engine's descriptor lists (V17)."""

    def remove_remote_agent(self, agent_name: str) -> None:
        """``_cleanup_remote_engine`` removes the engine's agents (V17)."""


class RankedPullHarness(Harness):
    """vLLM 0.33.0's pull mode with ``fan_in`` prefill ranks per decode rank; the pull harness's
    events plus the per-rank ones (``decode_read_blocks_for_req``, ``nixl_read_take_data_part``,
    ``nixl_read_complete_part``, ``nixl_read_fails_part``, ``prefill_get_new_notifs_part``,
    V8's third path: ``decode_try_release_xfer_handle_fails``, ``nixl_read_lands_after_error_part``,
    ``decode_retry_release_xfer_handle``,
    ``decode_pop_done_transfers``)."""

    pull_ranked = True
    """Read by :func:`~.observation.code_observation`: pull with per-rank READs."""

    def __init__(self, shape, fan_in: int, reregisters: bool = False, post_may_fail: bool = False):
        self.F = fan_in
        self.reregisters = reregisters
        self.post_may_fail = post_may_fail  # V8: read_post_may_fail (observed: reads_posted)
        self.epoch = 0  # V17: prefill's KV cache registrations so far, less one
        self.handshakes = 0  # V17: decode's (stand-in) handshakes with prefill
        super().__init__(shape)
        self.d_part = [[0] * (shape.decode_blocks + 2) for _ in range(fan_in)]  # rank -> block -> tag
        self.d_tag = _Parts(self.d_part)
        self.part_read: dict[tuple[int, int], str] = {}  # (slot, rank) -> posted | taken | done | failed
        self.part_writes: dict[tuple[int, int], tuple[int, list[int], list[int], bytes]] = {}
        self.expired_slots: set[int] = set()
        self.late_slots: set[int] = set()
        self.reported: dict[int, set[int]] = {}  # slot -> prefill ranks that reported finished_sending

    # -- construction ------------------------------------------------------------------------
    def _workers(self, lease: int) -> None:
        self.agents = [_Agent() for _ in range(self.F)]
        self.pws = []
        for a in self.agents:
            self.agent = a
            self.pws.append(self._prefill_worker(lease))
        self.pw, self.agent = self.pws[0], self.agents[0]
        self.dagent = _ReadAgent()
        self.dw = self._decode_worker()
        if self.reregisters:  # V17: prefill published its first registration; decode has not handshaken
            self._publish()
        else:
            self._install_engine(self.dw)

    def _publish(self) -> None:
        """Prefill's scheduler publishes its KV cache registration (``set_xfer_handshake_metadata``,
        as ``EngineCore._set_kv_connector_handshake_metadata`` does at start and after
        ``wake_up``); the side-channel listener is not started (decode's handshake is the
        harness's)."""
        m = self.m
        cs = self.P.connector.connector_scheduler
        if cs._nixl_handshake_listener_t is None:
            cs._nixl_handshake_listener_t = SimpleNamespace()  # no ZMQ listener thread
        payload = m["metadata"].NixlHandshakePayload(compatibility_hash="kvproof",
                                                     agent_metadata_bytes=f"registration {self.epoch}".encode())
        cs.set_xfer_handshake_metadata({(0, w): payload for w in range(self.F)})

    def _install_engine(self, w) -> None:
        """What a completed handshake with the ``F``-rank prefill engine leaves in decode's worker,
        for prefill's current registration (descriptor handle ``100 * epoch + rank``)."""
        F, engine = self.F, self.p_engine
        w._remote_agents[engine] = {(0, r): f"prefill{r}" for r in range(F)}
        w._engine_by_address[("prefill", 0)] = engine
        w.tp_mappings[engine] = SimpleNamespace(all_source_ranks=list(range(F)), local_consumers=1,
                                                source_ranks_per_group=[set(range(F))])
        w.dst_xfer_side_handles[engine] = {r: 100 * self.epoch + r for r in range(F)}
        w.dst_num_blocks[engine] = self.shape.prefill_blocks + 1
        w.dst_region_num_blocks[engine] = None
        w.dst_region_group_ids[engine] = []
        w.dst_uses_region_group_mapping[engine] = False

    def _decode_worker(self):
        """``NixlPullConnectorWorker`` of decode without ``__init__``: the attributes its
        ``__init__`` and a completed handshake with the ``F``-rank prefill engine set."""
        m = self.m
        F = self.F
        harness = self

        class DecodeWorker(worker_class("pull")):
            """The real class; heartbeat sending (the harness's) and ``__del__`` are not run."""

            def _send_heartbeats(self, metadata):
                pass  # delivered by decode_send_heartbeats

            def _background_nixl_handshake(self, req_id, remote_engine_id, meta):
                harness._handshake(self, req_id, meta)

        w = object.__new__(DecodeWorker)
        engine = self.P.vllm_config.kv_transfer_config.engine_id
        self.p_engine = engine
        w.engine_id = self.D.vllm_config.kv_transfer_config.engine_id
        w.tp_rank, w.world_size = 0, 1
        w.pcp_rank, w.pcp_dcp_sharded, w.dcp_size, w.dcp_rank = 0, False, 1, 0
        w.nixl_wrapper = self.dagent
        w._reqs_to_send, w._reqs_to_process, w._replicated_pcp_done_sending = {}, set(), set()
        w._ready_requests = queue.Queue()
        w._recving_metadata, w._recv_failures = {}, set()
        w._recving_transfers = defaultdict(list)
        w._failed_recv_reqs, w._invalid_block_ids = queue.Queue(), queue.Queue()
        w._pending_recv_notifs = {}
        w.consumer_notification_counts_by_req = defaultdict(int)
        w.expected_consumer_notifications_by_req = {}
        w.xfer_stats = m["stats"].NixlKVConnectorStats()
        w._lease_extension = 0
        w._physical_blocks_per_logical_kv_block = 1
        w.use_host_buffer = w.use_mla = w._has_mamba = w._is_hma_required = False
        w._mixed_mem_types = w._bidirectional_kv_xfer_enabled = False
        w.enable_permute_local_kv = w.enable_heterogeneous_attn_post_process = False
        info = SimpleNamespace(remote_tp_size=F, remote_dcp_size=1, remote_block_size=BLOCK_SIZE,
                               remote_physical_blocks_per_logical=1)
        w.transfer_topo = SimpleNamespace(get_engine_info=lambda e: info, tp_ratio=lambda tp: -F if F > 1 else 1,
                                          block_size_ratio=lambda size: 1, unregister_remote_engine=lambda e: None)
        w.tp_mappings, w.draft_tp_mappings = {}, {}
        w.kv_cache_config = SimpleNamespace(transfer_groups=[0])
        w._remote_registration_generations = {}
        w._invalid_remote_engines, w._failed_remote_engines = set(), set()
        w._invalid_engine_backoff = {}
        w._handshake_lock = threading.Lock()
        w._handshake_futures = {}
        w._engine_by_address, w._remote_agents, w._engine_last_active = {}, {}, {}
        w.kv_caches_base_addr, w.dst_region_mem_types, w._engine_clock_offset = {}, {}, {}
        w.src_xfer_handles_by_tp_ratio = {(-F, BLOCK_SIZE): [_LOCAL_HANDLE + r for r in range(F)]}
        w.src_xfer_handles_by_block_size = {BLOCK_SIZE: _LOCAL_HANDLE}
        w.dst_xfer_side_handles = {}  # engine -> rank -> handle (100 * registration epoch + rank)
        # one descriptor region: descriptor ids are block ids (decode's own entry; prefill's at handshake)
        w.dst_num_blocks = {w.engine_id: self.shape.decode_blocks + 1}
        w.dst_region_num_blocks = {w.engine_id: None}
        w.dst_region_group_ids = {w.engine_id: []}
        w.dst_uses_region_group_mapping = {w.engine_id: False}
        w.region_group_ids, w._uses_region_group_mapping = [], False
        w._transfer_layer_group_ids, w.num_regions, w.block_len_per_layer = [], 1, [1]
        return w

    # -- prefill: every rank -----------------------------------------------------------------------
    def _prefill_worker_step(self, so) -> None:
        for pw in self.pws:
            pw.start_load_kv(so.kv_connector_metadata)

    def _report(self, r: int, w: int) -> None:
        """Rank ``w`` reported ``r`` in ``finished_sending``; the scheduler frees ``r`` once every
        rank did (``KVOutputAggregator``)."""
        got = self.reported.setdefault(r, set())
        got.add(w)
        if len(got) == self.F:
            self._free_on_prefill({self.pid(r)})

    def prefill_get_new_notifs_part(self, r: int, w: int) -> None:
        """Prefill rank ``w``'s agent delivers ``r``'s READ notification; its ``_get_new_notifs``
        counts it (one consumer expected) and reports ``finished_sending``, or takes the
        "unrecognized request" branch after the lease expired."""
        msg = f"{self.pid(r)}:1".encode()
        a, pw = self.agents[w], self.pws[w]
        if msg not in a.inbox:
            raise HarnessError(f"no notification of {self.pid(r)} is on its way to prefill rank {w}")
        a.inbox.remove(msg)
        a.deliver = [msg]
        late = len(pw.xfer_stats.data.get("num_notifications_after_expiry", ()))
        done = pw._get_new_notifs()
        if len(pw.xfer_stats.data.get("num_notifications_after_expiry", ())) > late:
            self.late_slots.add(r)
        if done - {self.pid(r)}:
            raise Divergent(f"vLLM's prefill rank {w} reported {sorted(done)}")
        if done:
            self._report(r, w)

    def prefill_reap_expired_lease(self, r: int) -> None:
        """Every rank still holding ``r`` runs ``_reap_expired_send_leases`` with only ``r`` in
        view; the scheduler frees ``r`` once every rank reported it."""
        pid = self.pid(r)
        for w, pw in enumerate(self.pws):
            if pid not in pw._reqs_to_send:
                continue
            aside = {k: v for k, v in pw._reqs_to_send.items() if k != pid}
            for k in aside:
                del pw._reqs_to_send[k]
            done: set[str] = set()
            try:
                pw._reap_expired_send_leases(done)
            finally:
                pw._reqs_to_send.update(aside)
            if done != {pid}:
                raise Divergent(f"vLLM's prefill rank {w} reaped {sorted(done)}, not {pid} "
                                f"(deadline {pw._reqs_to_send.get(pid)}, now {self.clock.now})")
            self.expired_slots.add(r)
            self._report(r, w)
        if self.pid(r) in self.P.requests:
            raise Divergent(f"vLLM's prefill still holds {pid} after its lease expired "
                            f"(ranks reported: {sorted(self.reported.get(r, ()))})")

    def _deliver_heartbeats(self, msgs: list[bytes]) -> None:
        for a, pw in zip(self.agents, self.pws):
            a.deliver = list(msgs)
            done = pw._get_new_notifs()
            if done:
                raise HarnessError(f"a heartbeat completed {sorted(done)}")

    def prefill_notified(self) -> tuple[int, ...]:
        """The slots with a READ notification on its way to some prefill rank."""
        return tuple(r for r in range(self.R) if any(f"{self.pid(r)}:1".encode() in a.inbox for a in self.agents))

    # -- decode ------------------------------------------------------------------------------------
    def decode_read_blocks_post_fails(self, r: int, w: int) -> None:
        """As :meth:`decode_read_blocks_for_req`, with the stand-in agent's
        ``make_prepped_xfer`` raising for prefill rank ``w``: 0.33.0's ``_read_blocks`` puts the
        request in ``_recv_failures`` and ``_read_blocks_for_req`` posts no later sibling."""
        self.dagent.fail_rank = w
        try:
            self.decode_read_blocks_for_req(r, ranks=list(range(w)))
        finally:
            self.dagent.fail_rank = None
        if self.did(r) not in self.dw._recv_failures:
            raise Divergent(f"vLLM's decode worker did not record the failed post of {self.did(r)}")
        self.part_read[(r, w)] = "failed"

    def decode_read_blocks_for_req(self, r: int, ranks: list[int] | None = None) -> None:
        """Decode's real ``start_load_kv`` on the ``reqs_to_recv`` entry the real decode
        scheduler emitted for ``r``: ``_read_blocks_for_req`` posts one READ per prefill rank
        (``ranks``: the ones expected posted, all by default)."""
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        did, s = self.did(r), self.slots[r]
        if s.recv is None:
            raise HarnessError(f"decode's scheduler emitted no reqs_to_recv entry for {did}")
        md = self.m["metadata"].NixlConnectorMetadata()
        md.reqs_to_recv = {did: s.recv}
        before = set(self.dagent.posted)
        self.dw.start_load_kv(md)
        new = [h for h in self.dagent.posted if h not in before]
        got = sorted(self.dagent.posted[h][0] % 100 for h in new)
        if got != (list(range(self.F)) if ranks is None else ranks) or \
                sorted(self.dw._recving_transfers.get(did, ())) != sorted(new):
            raise Divergent(f"vLLM's decode worker posted READs from prefill ranks {got} for {did} "
                            f"(handles {sorted(self.dw._recving_transfers.get(did, ()))})")
        for h in new:
            remote, src, dst, msg = self.dagent.posted[h]
            w = remote % 100
            if msg != f"{self.pid(r)}:1".encode():
                raise Divergent(f"vLLM's decode worker's READ notif_msg is {msg!r}")
            self.part_writes[(r, w)] = (h, src, dst, msg)
            self.part_read[(r, w)] = "posted"
        s.read = "posted"

    def nixl_read_take_data_part(self, r: int, w: int) -> None:
        """The READ of rank ``w``'s part moves its data: that part of each decode block gets the
        prefill block's tag now."""
        h, src, dst, _ = self.part_writes[(r, w)]
        stale = self.dagent.posted[h][0] // 100 != self.epoch  # V17: descriptors of released memory
        for a, b in zip(src, dst):
            self.d_part[w][b] = 0 if stale else self.p_tag[a]
        self.part_read[(r, w)] = "taken"

    def nixl_read_complete_part(self, r: int, w: int) -> None:
        """Rank ``w``'s READ completes: its handle is ``DONE``, its notification on its way to
        prefill rank ``w``."""
        h, _, _, msg = self.part_writes[(r, w)]
        self.dagent.state[h] = "DONE"
        self.agents[w].inbox.append(msg)
        self.part_read[(r, w)] = "done"

    def nixl_read_fails_part(self, r: int, w: int) -> None:
        """Rank ``w``'s READ fails: ``check_xfer_state`` will return ``ERR``; no notification."""
        h = self.part_writes[(r, w)][0]
        self.dagent.state[h] = "ERR"
        self.part_read[(r, w)] = "failed"

    # -- V8's third path: a failed READ whose handle release fails --------------------------------------
    def _poll(self, r: int) -> None:
        """The first lines of decode's real ``get_transfer_results`` with only ``r`` in view: its
        ``_pop_done_transfers`` over ``r``'s handles (a failed handle through
        ``_handle_failed_transfer`` and ``_try_release_xfer_handle``), newly failed requests into
        ``_recv_failures``; reporting is left to :meth:`decode_pop_done_transfers`."""
        did, dw = self.did(r), self.dw
        view = {did: list(dw._recving_transfers[did])} if did in dw._recving_transfers else {}
        _, failed = dw._pop_done_transfers(view)
        if did in view:
            dw._recving_transfers[did] = view[did]
        elif did in dw._recving_transfers:
            del dw._recving_transfers[did]
        dw._recv_failures.update(failed)

    def decode_try_release_xfer_handle_fails(self, r: int, w: int) -> None:
        """Rank ``w``'s READ reports ``ERR`` before moving its data and the stand-in agent refuses
        to release its handle (the DMA goes on); decode's real ``_pop_done_transfers`` must keep
        the handle (``_try_release_xfer_handle`` returns ``False``) and record the failure."""
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        h = self.part_writes[(r, w)][0]
        self.dagent.state[h] = "ERR"
        self.dagent.refuse_release.add(h)
        self._poll(r)
        if h not in self.dw._recving_transfers.get(self.did(r), ()):
            raise Divergent(f"vLLM's decode worker dropped the handle {h} of {self.did(r)} whose release failed")
        if self.did(r) not in self.dw._recv_failures:
            raise Divergent(f"vLLM's decode worker did not record the failed READ of {self.did(r)}")
        self.part_read[(r, w)] = "retained"

    def nixl_read_lands_after_error_part(self, r: int, w: int) -> None:
        """The DMA of rank ``w``'s failed, unreleased READ still moves its data: that part of
        each decode block gets the prefill block's tag now."""
        h, src, dst, _ = self.part_writes[(r, w)]
        if h not in self.dagent.refuse_release:
            raise HarnessError(f"READ handle {h} was released: its DMA has stopped")
        for a, b in zip(src, dst):
            self.d_part[w][b] = self.p_tag[a]

    def decode_retry_release_xfer_handle(self, r: int, w: int) -> None:
        """A later poll of decode's real ``_pop_done_transfers`` releases the retained handle (the
        stand-in no longer refuses: the DMA has stopped); it must leave ``_recving_transfers``."""
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        h = self.part_writes[(r, w)][0]
        self.dagent.refuse_release.discard(h)
        self._poll(r)
        if h in self.dw._recving_transfers.get(self.did(r), ()):
            raise Divergent(f"vLLM's decode worker still retains handle {h} of {self.did(r)} after its release")
        self.part_read[(r, w)] = "failed"

    def decode_pop_done_transfers(self, r: int) -> None:
        """Decode's real ``get_transfer_results`` with only ``r`` in view must report it
        (``finished_recving``, and ``failed_recving`` after a failed READ); a decode step applies
        the report: a loaded request runs one step, a failed one ends in ``FINISHED_ERROR``."""
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        did, dw = self.did(r), self.dw
        handles = {k: v for k, v in dw._recving_transfers.items() if k != did}
        failures = dw._recv_failures - {did}
        for k in handles:
            del dw._recving_transfers[k]
        dw._recv_failures -= failures
        try:
            res = dw.get_transfer_results()
        finally:
            dw._recving_transfers.update(handles)
            dw._recv_failures |= failures
        if set(res.finished_recving) != {did}:
            left = {h: self.dagent.state[h] for h in dw._recving_transfers.get(did, ())}
            raise Divergent(f"vLLM's decode worker reported finished_recving {sorted(res.finished_recving)}, "
                            f"not {did} (handles still retained: {left}, _recv_failures "
                            f"{sorted(dw._recv_failures)})")
        failed = set(res.failed_recving)
        blocks = self.kv_blocks(did)
        m = self.m
        kv = m["outputs"].KVConnectorOutput(finished_recving={did}, failed_recving=failed or None)
        so = self.D.schedule()
        self._decode_meta(so)
        self.D.update_from_output(so, self._runner_output(so, kv))
        s = self.slots[r]
        if failed:
            if did in self.D.requests:
                raise Divergent(f"vLLM's decode did not end {did} after its failed load")
            s.outcome = "error"
            return
        so, _ = self._decode_step()
        if did not in so.num_scheduled_tokens:
            raise Divergent(f"vLLM's decode did not run {did} after finished_recving")
        s.seen = self._kind(self.d_tag[blocks[0]] if len(blocks) == 1 else (), r)
        s.outcome = "success"

    def _kind(self, tags, r: int) -> str:
        """As the base harness, over every rank's part of the block."""
        return super()._kind(list(tags), r)

    # -- V17: a re-registered prefill KV cache -----------------------------------------------------------
    def _handshake(self, w, req_id: str, meta) -> None:
        """``_background_nixl_handshake``, completed at once: decode loads prefill's current
        registration and the request goes on ``_ready_requests``, which the same
        ``start_load_kv`` call reads next."""
        self.handshakes += 1
        self._install_engine(w)
        w._ready_requests.put((req_id, meta))

    def prefill_reregister_kv_caches(self) -> None:
        """Prefill, holding no request, sleeps and wakes up: its KV cache is discarded (every
        block's tag is gone) and registered again, and its scheduler's real
        ``set_xfer_handshake_metadata`` publishes the new registration
        (``_registration_generation`` bumped)."""
        if self.P.requests:
            raise HarnessError(f"prefill holds {sorted(self.P.requests)} at its sleep")
        cs = self.P.connector.connector_scheduler
        before = cs._registration_generation
        self.epoch += 1
        self._publish()
        if cs._registration_generation <= before:
            raise Divergent("vLLM's prefill scheduler did not bump _registration_generation")
        self.p_tag = [0] * len(self.p_tag)

    def stale_reads(self) -> tuple[int, ...]:
        """The slots with a READ in progress through descriptors of an older registration."""
        return tuple(sorted({r for (r, w), (h, _, _, _) in self.part_writes.items()
                             if self.part_read.get((r, w)) in ("posted", "taken")
                             and self.dagent.posted[h][0] // 100 != self.epoch}))
