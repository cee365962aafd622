"""vLLM 0.33.0's prefill and decode engines in push mode (``NixlPushConnector``), driven one
kvproof event at a time: the pull harness (:class:`~.harness.Harness`: both ``Scheduler``\\ s, the
fake clock, the fabricated model runner) with the push connector and both push workers.

What runs as real vLLM code, beyond what :mod:`.harness` lists:

* both engines' scheduler-side ``NixlPushConnectorScheduler`` (push_scheduler.py):
  ``update_state_after_alloc`` (decode's registration, ``_reqs_need_recv``),
  ``request_finished`` (prefill: the lease, ``_newly_finished_push_blocks``; decode: an aborted
  load returns ``(False, None)``), ``build_connector_meta`` (``push_registrations``,
  ``push_finished_blocks``, the watchdog) and ``update_connector_output``;
* both engines' worker, methods of the real ``NixlPushConnectorWorker`` (push_worker.py):
  ``start_load_kv`` on every step's metadata (decode: ``_recving_metadata``, the registration
  handed to the writer; prefill: finished blocks handed to the writer, the rebased lease
  deadlines); the writer thread's loop ``_push_writer_loop``, run one pass at a time on the
  harness's thread (``_send_registration_to_p`` -> ``_do_send_reg_notif``: ``PUSH_REG``;
  ``_handle_push_reg_notif`` / ``_pop_matching_registration`` / ``_pop_matching_finished_blocks``
  matching by exact then base id; ``_do_start_push_kv``; the eviction of finished requests;
  the routing of other notifications to the main thread); ``get_transfer_results`` (the base
  worker's, with ``_reap_expired_send_leases``, and push's ``_pop_done_transfers(
  _sending_transfers)`` that reports a WRITE's completion only for a request still under its
  lease; decode's ``_get_new_notifs`` counting the WRITE's ``"{D_req}:{world_size}"``).

What the harness stands in for, beyond :mod:`.harness`:

* the writer thread's scheduling: one pass of the real loop runs after each event that hands
  it work (the stop event reports "set" after one pass); decode's registrations wait in a
  per-request list until ``decode_send_push_reg`` hands that request's one back to the writer;
* handshakes: ``_ensure_handshake`` reports the peer as connected (the model's handshake is
  instantaneous) and ``_remote_agents`` names the peer's agent, except at ``prefill_defer_push``
  (``push_handshake_may_defer``, #55470), where prefill's returns a pending future that the
  harness resolves at ``prefill_deferred_push_write`` (the real callback and writer pass post
  the deferred WRITE);
* NIXL: ``_xfer_blocks_for_req`` (the descriptor plumbing: TP mapping, ``_compute_desc_ids``,
  ``make_prepped_xfer("WRITE", ...)``) is replaced by a stand-in that posts one WRITE of
  prefill's block ids into decode's (from the registration) with the code's ``notif_msg`` and
  publishes its handle in ``_sending_transfers`` as the real method does; the WRITE copies the
  source block's tag when its data moves (``nixl_write_land``) and its notification waits in
  decode's agent until ``decode_finished_recving``;
* heartbeats, as in pull: the ``HB:`` notification is built from the decode scheduler's
  tracking at ``decode_send_heartbeats`` (decode worker's ``_send_heartbeats`` does nothing) and
  reaches prefill through its writer's routing and ``_get_new_notifs``.

Request ids carry vLLM's ``-<8 hex>`` suffix (prefill ``R0-aaaa0000``, decode ``R0-dddd0000``, or
the scenario's ``id`` and ``suffixes``), as the input processor assigns them, so the writer matches
registrations by base id.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from concurrent.futures import Future
from types import SimpleNamespace

from kvproof.spec.vllm.conform.engine import BLOCK_SIZE, worker_class
from kvproof.spec.vllm.conform.harness import Divergent, Harness, HarnessError

__all__ = ["PushHarness"]


class _OnePass:
    """The writer's stop event: "not set" for one loop pass, then "set"."""

    def __init__(self) -> None:
        self.left = 1

    def is_set(self) -> bool:
        """False once per :meth:`arm`."""
        self.left -= 1
        return self.left < 0

    def arm(self) -> None:
        """Allow one more pass."""
        self.left = 1

    def wait(self, timeout=None) -> bool:
        """The writer's self-poll sleep: nothing to wait for."""
        return True

    set = clear = arm


class _Wake:
    """The writer's wake event: waking is the harness's :meth:`PushHarness._writer_pass`."""

    def set(self) -> None:
        """Ignored."""

    clear = set

    def wait(self, timeout=None) -> bool:
        """Never blocks."""
        return True


class _PushAgent:
    """The stand-in NIXL agent of one side: notifications wait in ``inbox`` until an event
    delivers them; WRITE handles are ``PROC`` until completed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.peer: _PushAgent | None = None
        self.inbox: list[bytes] = []
        self.deliver: list[bytes] = []
        self.state: dict[int, str] = {}

    def get_new_notifs(self) -> dict[str, list[bytes]]:
        """What the event delivers now."""
        out, self.deliver = self.deliver, []
        return {"peer": out} if out else {}

    def send_notif(self, agent_name: str, notif_msg: bytes) -> None:
        """A notify-only message to the peer (``PUSH_REG``)."""
        assert self.peer is not None and agent_name == self.peer.name
        self.peer.inbox.append(notif_msg)

    def check_xfer_state(self, handle: int) -> str:
        """``PROC`` until the WRITE completed, then ``DONE``."""
        return self.state[handle]

    def get_xfer_telemetry(self, handle: int):
        """No telemetry."""
        return None

    def release_xfer_handle(self, handle: int) -> None:
        """Releasing a handle always succeeds."""


class PushHarness(Harness):
    """vLLM 0.33.0's prefill and decode engines in push mode; the pull harness's events plus
    the push ones (``decode_send_push_reg``, ``prefill_push_write``, ``nixl_write_land``,
    ``nixl_write_complete``, ``prefill_get_transfer_results``)."""

    CONNECTOR = "NixlPushConnector"
    TIMED_MODULES = Harness.TIMED_MODULES + ("push_scheduler", "push_worker")
    defer_next = False
    """``prefill_defer_push`` is under way: prefill's next P->D handshake is pending."""

    def pid(self, r: int) -> str:
        """Prefill's request id of slot ``r``: the scenario's, or ``R{r}-aaaa000{r}`` (base id ``R{r}``)."""
        return self.shape.ids[r][0] if self.shape.ids else f"R{r}-{0xaaaa0000 + r:08x}"

    def did(self, r: int) -> str:
        """Decode's request id of slot ``r``: the scenario's, or ``R{r}-dddd000{r}`` (same base id as prefill's)."""
        return self.shape.ids[r][1] if self.shape.ids else f"R{r}-{0xdddd0000 + r:08x}"

    # -- construction ------------------------------------------------------------------------
    def _workers(self, lease: int) -> None:
        self.agent = _PushAgent("prefill")
        self.dagent = _PushAgent("decode")
        self.agent.peer, self.dagent.peer = self.dagent, self.agent
        self.pw = self._push_worker("kv_producer", self.agent, "kv_consumer", lease)
        self.dw = self._push_worker("kv_consumer", self.dagent, "kv_producer", lease)
        self.defer_next = False  # prefill_defer_push: the next P->D handshake is pending
        self.pending_handshake: Future | None = None
        self.deferred: dict[int, Future] = {}  # slot -> its pending handshake
        self.regs: dict[int, tuple] = {}  # slot -> registration the decode writer has not sent
        self.writes: dict[int, tuple[int, list[int], list[int], bytes]] = {}  # slot -> WRITE

    def _push_worker(self, engine_id: str, agent: _PushAgent, peer: str, lease: int):
        """``NixlPushConnectorWorker`` without ``__init__``: the attributes its ``__init__``
        (and the base worker's) sets for the methods the harness runs."""
        m = self.m
        harness = self

        class PushWorker(worker_class("push")):
            """The real class; the handshake, the WRITE's descriptor plumbing, decode's heartbeat
            sending and ``__del__`` are the harness's."""

            def _ensure_handshake(self, *args, **kwargs):
                if harness.defer_next and self is harness.pw:  # prefill_defer_push: still pending
                    harness.defer_next = False
                    harness.pending_handshake = Future()
                    return harness.pending_handshake
                return None  # connected

            def _send_heartbeats(self, metadata):
                pass  # delivered by decode_send_heartbeats

            def _xfer_blocks_for_req(self, req_id, meta):
                harness._post_write(self, req_id, meta)

        w = object.__new__(PushWorker)
        w.engine_id, w.tp_rank, w.world_size = engine_id, 0, 1
        w.pcp_rank, w.pcp_dcp_sharded = 0, False
        w.nixl_wrapper = agent
        w._reqs_to_send, w._reqs_to_process = {}, set()
        w._replicated_pcp_done_sending = set()
        w._recving_metadata, w._recving_transfers, w._recv_failures = {}, {}, set()
        w._failed_recv_reqs = queue.Queue()
        w._pending_recv_notifs = {}
        w.consumer_notification_counts_by_req = defaultdict(int)
        w.expected_consumer_notifications_by_req = {}
        w.xfer_stats = m["stats"].NixlKVConnectorStats()
        w._lease_extension = lease * 2 // 3
        w._physical_blocks_per_logical_kv_block = 1
        w._has_mamba = False
        w.use_host_buffer = w.use_mla = w._has_mamba = w._is_hma_required = False
        w.enable_permute_local_kv = w.enable_heterogeneous_attn_post_process = False
        info = SimpleNamespace(remote_block_size=BLOCK_SIZE, remote_physical_blocks_per_logical=1)
        w.transfer_topo = SimpleNamespace(get_engine_info=lambda engine: info, block_size_ratio=lambda size: 1)
        w._handshake_lock = threading.Lock()
        w._remote_agents = {peer: {0: agent.peer.name}}
        w._engine_last_active = {}
        w._sending_transfers = defaultdict(list)
        w._send_failures = set()
        w._sending_transfers_lock = threading.Lock()
        w._push_finished_blocks, w._pending_d_registrations = {}, {}
        for q in ("_reg_send_inbox", "_finished_blocks_inbox", "_pending_completion_notifs",
                  "_evict_finished_inbox", "_deferred_push_inbox"):
            setattr(w, q, queue.Queue())
        w._push_writer_wake = _Wake()
        w._push_writer_stop = _OnePass()
        return w

    # -- the stand-ins the real code calls ----------------------------------------------------------
    def _post_write(self, worker, req_id: str, meta) -> None:
        """The WRITE of ``_xfer_blocks_for_req``: prefill's blocks into decode's, with the
        code's ``notif_msg``; its handle is published in ``_sending_transfers``."""
        if worker is not self.pw:
            raise HarnessError("decode's worker posted a WRITE")
        r = next(r for r in range(self.R) if self.pid(r) == req_id)
        handle = 100 + len(self.agent.state)
        self.agent.state[handle] = "PROC"
        # as _xfer_blocks does (push_worker.py:690-695): 0.33.0's own _apply_prefix_caching pairs
        # decode's (uncached) blocks with the end of prefill's list (#48758, V11)
        dst_ids, src_ids = worker._apply_prefix_caching(decode_block_ids=meta.remote.block_ids,
                                                        prefill_block_ids=meta.local_physical_block_ids,
                                                        decode_physical_per_logical=1,
                                                        prefill_physical_per_logical=1)
        src = [b for g in src_ids for b in g]
        dst = [b for g in dst_ids for b in g]
        self.writes[r] = (handle, src, dst, f"{meta.remote.request_id}:{worker.world_size}".encode())
        self.slots[r].read = "posted"
        with worker._sending_transfers_lock:
            worker._sending_transfers[req_id].append(handle)

    def _writer_pass(self, worker) -> None:
        """One pass of the worker's real ``_push_writer_loop``."""
        worker._push_writer_stop.arm()
        worker._push_writer_loop()

    # -- steps of the real engines ----------------------------------------------------------------------
    def _decode_worker_step(self, so) -> None:
        self.dw.start_load_kv(so.kv_connector_metadata)
        while True:  # the registrations wait for decode_send_push_reg
            try:
                rid, rd = self.dw._reg_send_inbox.get_nowait()
            except queue.Empty:
                break
            self.regs[self.slot_of(rid)] = (rid, rd)

    def _prefill_worker_step(self, so) -> None:
        self.pw.start_load_kv(so.kv_connector_metadata)

    def _prefill_results(self, r: int) -> set[str]:
        """Prefill's ``get_transfer_results`` with only ``r``'s lease and WRITE handles (and
        those of requests no longer under a lease) in view: the model takes one request per
        step.  Then a prefill step frees what it reported and the writer evicts it."""
        pid, w = self.pid(r), self.pw
        leases = {k: v for k, v in w._reqs_to_send.items() if k != pid}
        handles = {k: v for k, v in w._sending_transfers.items() if k != pid and k in leases}
        for k in leases:
            del w._reqs_to_send[k]
        for k in handles:
            del w._sending_transfers[k]
        try:
            done = set(w.get_transfer_results().finished_sending)
        finally:
            w._reqs_to_send.update(leases)
            w._sending_transfers.update(handles)
        if done:
            self._free_on_prefill(done)
            self._writer_pass(w)
        return done

    # -- prefill ------------------------------------------------------------------------------------------
    def prefill_request_finished(self, r: int) -> None:
        """As in pull; prefill's writer then takes the finished blocks (``push_finished_blocks``)."""
        super().prefill_request_finished(r)
        self._writer_pass(self.pw)
        if self.pid(r) not in self.pw._push_finished_blocks:
            raise Divergent(f"vLLM's prefill writer holds no finished blocks of {self.pid(r)}")

    def prefill_reap_expired_lease(self, r: int) -> None:
        """Prefill's ``get_transfer_results`` reaps ``r``'s lease (``_reap_expired_send_leases``),
        WRITE outstanding or not."""
        before = len(self.pw.xfer_stats.data.get("num_kv_expired_reqs", ()))
        done = self._prefill_results(r)
        if done != {self.pid(r)} or len(self.pw.xfer_stats.data.get("num_kv_expired_reqs", ())) != before + 1:
            raise Divergent(f"vLLM's prefill get_transfer_results reported {sorted(done)}, not an expired "
                            f"{self.pid(r)} (deadline {self.pw._reqs_to_send.get(self.pid(r))}, now {self.clock.now})")

    def _deliver_push_reg(self, r: int, agent=None, where: str = "") -> None:
        """A prefill agent (``agent``, default the one prefill rank's) delivers ``r``'s
        ``PUSH_REG`` (taken from its inbox) to the next writer pass; none on its way is the
        harness's error (``where`` names the rank)."""
        agent = self.agent if agent is None else agent
        msg = next((x for x in agent.inbox if x.startswith(self.m["metadata"].PUSH_REG_NOTIF_PREFIX)
                    and self.did(r).encode() in x), None)
        if msg is None:
            raise HarnessError(f"no PUSH_REG of {self.did(r)} is on its way{where}")
        agent.inbox.remove(msg)
        agent.deliver = [msg]

    def prefill_push_write(self, r: int) -> None:
        """Prefill's agent delivers ``r``'s ``PUSH_REG``; a writer pass matches it with the
        finished blocks and posts the WRITE."""
        self._deliver_push_reg(r)
        self._writer_pass(self.pw)
        if r not in self.writes:
            raise Divergent(f"vLLM's prefill writer posted no WRITE for {self.pid(r)}")

    def prefill_defer_push(self, r: int) -> None:
        """Prefill's agent delivers ``r``'s ``PUSH_REG`` while the P->D handshake is pending: the
        writer matches it and the real ``_do_start_push_kv`` defers the WRITE (a callback on the
        handshake's future), posting nothing (#55470)."""
        self._deliver_push_reg(r)
        self.defer_next, self.pending_handshake = True, None
        self._writer_pass(self.pw)
        self.defer_next = False
        if r in self.writes or self.pending_handshake is None:
            raise Divergent(f"vLLM's prefill writer did not defer {self.pid(r)}'s WRITE behind the handshake")
        self.deferred[r] = self.pending_handshake

    def prefill_deferred_push_write(self, r: int) -> None:
        """The handshake resolves: the real ``_on_handshake`` puts ``r`` on
        ``_deferred_push_inbox`` and a writer pass posts the WRITE (``_do_start_push_kv``)."""
        fut = self.deferred.pop(r, None)
        if fut is None:
            raise HarnessError(f"no deferred WRITE of {self.pid(r)}")
        fut.set_result(({}, 0.0))  # runs the done-callbacks here
        self._writer_pass(self.pw)
        if r not in self.writes:
            raise Divergent(f"vLLM's prefill writer did not post the deferred WRITE of {self.pid(r)}")

    def prefill_get_transfer_results(self, r: int) -> None:
        """Prefill's ``get_transfer_results`` finds ``r``'s WRITE handle done."""
        done = self._prefill_results(r)
        if done != {self.pid(r)}:
            raise Divergent(f"vLLM's prefill get_transfer_results reported {sorted(done)}, not {self.pid(r)}")

    # -- decode --------------------------------------------------------------------------------------------
    def decode_send_push_reg(self, r: int) -> None:
        """Decode's writer sends ``r``'s registration (``_send_registration_to_p``)."""
        if r not in self.regs:
            raise Divergent(f"vLLM's decode worker got no registration of {self.did(r)}")
        self.dw._reg_send_inbox.put(self.regs.pop(r))
        n = len(self.agent.inbox)
        self._writer_pass(self.dw)
        if len(self.agent.inbox) != n + 1:
            raise Divergent(f"vLLM's decode writer sent no PUSH_REG for {self.did(r)}")

    def _finished_recving(self, r: int) -> set[str]:
        """Decode's agent delivers the WRITE's notification; the writer routes it to the main
        thread, whose ``get_transfer_results`` counts it (``_get_new_notifs``)."""
        msg = self.writes[r][3] if r in self.writes else None
        if msg is None or msg not in self.dagent.inbox:
            raise HarnessError(f"no WRITE notification of {self.did(r)} is on its way")
        self.dagent.inbox.remove(msg)
        self.dagent.deliver = [msg]
        self._writer_pass(self.dw)
        res = self.dw.get_transfer_results()
        if set(res.finished_recving) != {self.did(r)} or res.finished_sending:
            raise Divergent(f"vLLM's decode worker reported finished_recving {sorted(res.finished_recving)}, "
                            f"not {self.did(r)}")
        return set(res.finished_recving)

    def _deliver_heartbeats(self, msgs: list[bytes]) -> None:
        self.agent.deliver = msgs
        self._writer_pass(self.pw)
        done = self.pw._get_new_notifs()
        if done:
            raise HarnessError(f"a heartbeat completed {sorted(done)}")

    def _notify_rejected(self, s) -> None:
        """Push: decode's real worker took the seeded recv in ``start_load_kv`` (on the decode
        step just run) and sends nothing; the writer runs one pass as it would."""
        self._writer_pass(self.dw)

    def prefill_notified(self) -> tuple[int, ...]:
        """Push: not compared (the WRITE's notification goes to decode)."""
        return ()

    def stranded(self, r: int) -> bool:
        """Prefill no longer holds ``r`` (no lease) and its writer dropped ``r``'s finished
        blocks, so no ``PUSH_REG`` can match them and no WRITE will come (V5)."""
        pid = self.pid(r)
        return pid not in self.pw._reqs_to_send and pid not in self.pw._push_finished_blocks

    # -- the NIXL WRITE ----------------------------------------------------------------------------------
    def nixl_write_land(self, r: int) -> None:
        """The WRITE moves its data: each decode block gets its prefill block's tag now."""
        _, src, dst, _ = self.writes[r]
        for a, b in zip(src, dst):
            self.d_tag[b] = self.p_tag[a]
        self.slots[r].read = "taken"

    def nixl_write_complete(self, r: int) -> None:
        """The WRITE completes: prefill's handle is ``DONE`` and its notification is on its way
        to decode."""
        handle, _, _, msg = self.writes[r]
        self.agent.state[handle] = "DONE"
        self.dagent.inbox.append(msg)
        self.slots[r].read = "done"
