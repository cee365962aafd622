"""SGLang 0.5.23's own disaggregation code, wired up on one machine with ``prefill_ranks``
prefill ranks and ``decode_ranks`` decode ranks, driven one kvproof event at a time.

What runs as real SGLang code (``python/sglang/srt/``), on every rank:

* admission doors: ``PrefillBootstrapQueue.add`` and ``DecodePreallocQueue.add`` (with
  ``is_unadmitted_reject`` and ``Scheduler.retire_unadmitted_request``); ``Req`` and
  ``Req.set_finish_with_abort`` for prompts that fail ``validate_input_length``;
* decode: ``DecodePreallocQueue._create_receiver_and_enqueue``, ``_resolve_prefill_dp_rank``,
  ``_init_receiver``; the manager's ``_resolve_rank_mapping`` (which prefill ranks a decode rank
  talks to); ``MooncakeKVReceiver`` (``CommonKVReceiver``) ``__init__``, ``init``,
  ``_setup_bootstrap_infos``, ``send_metadata``, ``poll``, ``abort``, ``ensure_abort_notified``,
  ``_send_abort_notification``, ``failure_exception``, ``clear``; ``DecodeTransferQueue``
  ``extend``, ``pop_transferred`` (the metadata gate ``poll_and_all_reduce`` over real CPU
  ``MetadataBuffers``, ``_commit_transfer_to_req`` with its bootstrap-room check, the MAX
  ``all_reduce_flags`` on holds), ``_defer_release`` (``required_acks = len(bootstrap_infos)``),
  ``resolve_deferred_releases`` (the MIN ``all_reduce_flags`` on readiness), ``_do_release``;
  the manager's ``register_deferred_abort_room``, ``handle_abort_ack_message``,
  ``note_abort_ack``, ``is_abort_release_safe``, ``clear_deferred_abort_state``,
  ``apply_prefill_status``, ``update_status`` and its decode thread loop;
* prefill: ``MooncakeKVSender`` (``CommonKVSender``) ``__init__``, ``init``, ``send``, ``poll``,
  ``abort``, ``clear``; the manager's bootstrap thread loop (destination metadata,
  ``_handle_abort_notification``, ``register_deferred_ack_target``,
  ``_maybe_ack_drained_abort``), ``add_transfer_request`` and ``transfer_worker`` (its
  in-flight accounting ``_staging_outstanding``, ``send_kvcache`` or, with unequal TP sizes,
  the head-sliced ``send_kvcache_slice``, ``send_aux``, ``conclude_transfer``,
  ``conclude_failure``, ``_poison_unsettled_send``), and ``MetadataBuffers.set_buf``.

What the harness fakes (:mod:`.fakes`), and nothing else:

* the clock: ``time`` in the decode, common and Mooncake modules reads a fake clock that
  moves only on ``clock_tick`` (one tick is the release timeout divided by the scenario's
  ``timeout`` in ticks);
* the transport: ZMQ sockets are in-process queues, one per rank; frames are delivered when
  the kvproof event says the message arrives, and the receiving thread has handled them before
  the step ends;
* the transfer engine: ``batch_transfer_sync`` copies bytes between CPU tensors with
  ``memmove``; a KV write (and, when the model has aux slots, a metadata write) stays in flight,
  its call blocked, until the event that lands it; a failed send returns -1 while its bytes stay
  in flight, as a timed-out Mooncake batch does;
* the attention-TP collective of the decode ranks: each rank's ``pop_transferred`` /
  ``resolve_deferred_releases`` runs in its own thread and ``all_reduce`` combines every rank's
  flags at a barrier (one decode rank: SGLang's own single-rank short cut);
* pages: decode and prefill page allocation is the harness's page table per rank (lowest free
  pages first, as kvproof's model; ranks allocate in lockstep) and so is the metadata slot's
  allocation; ``release_kv_cache`` is patched to free the request's pages in that table.  The
  prefill forward pass (computing KV into source pages), the prefill scheduler's inflight
  queue (source release, ``sender.clear()`` when the request ends there) and decode's running
  batch (the read of the reserved pages after ``_commit_transfer_to_req``) are the harness's;
* peer registration (``KVArgsRegisterInfo`` of each decode rank) and the bootstrap server's
  route answer are constructed, not exchanged.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass
from typing import Any, Callable
from unittest import mock

import numpy as np

from kvproof.spec.sglang.conform.fakes import WAIT, Collective, FakeClock, HarnessError, OutSocket, Wire
from kvproof.spec.sglang.conform.observation import Observation, code_observation
from kvproof.spec.sglang.conform.stubs import load_sglang
from kvproof.spec.sglang.conform.wiring import (
    DECODE_PORT, HEAD_BYTES, PREFILL_HOST, PREFILL_PORT, ROOM_BASE, SESSION_PORT, DecodeRank, PrefillRank,
    build_decode_rank, build_prefill_rank, parallel_of,
)

__all__ = ["Harness", "HarnessError", "Divergent", "Options", "Shape"]

READ_RANK = {"none": 0, "own": 1, "foreign": 2, "cross_tenant": 3}


class Divergent(Exception):
    """The real code cannot take the step the model takes (the message says why)."""


@dataclass(frozen=True)
class Options:
    """The engine configuration of one run: which decode release path SGLang takes."""

    deferred_release: bool = True
    """``SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE`` and a backend that declares
    ``supports_deferred_decode_kv_release`` (Mooncake does)."""
    timeout_ticks: int = 2
    """The scenario's deferred-release timeout in kvproof ticks."""
    allocation_policy: str = "early"
    """``--disaggregation-decode-allocation-policy``: ``early`` (0.5.23's default) or
    ``prefill_complete`` (decode reserves after prefill's forward; the duplicate-room guard)."""

    @property
    def deferred_allocation(self) -> bool:
        """``prefill_complete``: decode reserves only after prefill's forward completed."""
        return self.allocation_policy == "prefill_complete"


@dataclass(frozen=True)
class Shape:
    """The sizes of one run: requests as (tenant index, pages, over-long), pools and ranks."""

    requests: tuple[tuple[int, int, bool], ...]
    decode_pages: int
    prefill_pages: int
    prefill_ranks: int = 1
    decode_ranks: int = 1
    aux_slots: int = 0
    rooms: tuple[int, ...] | None = None
    """Each request slot's client room (``room_policy = "client"``: two slots may share one);
    ``None``: slot ``r``'s room is ``r``."""
    instances: tuple[int, ...] | None = None
    """Each request slot's prefill instance (a bootstrap address of its own, ``prefill_ranks``
    ranks each); ``None``: one instance."""


@dataclass
class Instance:
    """One request served in a slot (a slot takes a new request after ``client_send``)."""

    slot: int
    gen: int
    tenant: int
    pages: int
    over_long: bool
    dest: list[int] | None = None
    src: list[int] | None = None
    outcome: str = "none"
    read: str = "none"
    forwarded: bool = False
    prefill_ended: bool = False


class Harness:
    """SGLang 0.5.23's prefill and decode ranks over shared CPU memory.

    Request slots are ``R0..R{n-1}`` with ``bootstrap_room`` ``1000 + r``.  Every public event
    method is one kvproof action with the action's parameters; :meth:`observe` reads what the
    code did.  Close with :meth:`close`.
    """

    def __init__(self, shape: Shape, options: Options = Options()):
        self.m = load_sglang()
        self.shape, self.opt = shape, options
        self.R = len(shape.requests)
        self.D, self.P = shape.decode_pages, shape.prefill_pages
        self.PR, self.DR, self.M = shape.prefill_ranks, shape.decode_ranks, shape.aux_slots
        self.heads = max(self.PR, self.DR)
        self.NI = 1 + max(shape.instances) if shape.instances else 1  # prefill instances
        self.n_meta = self.M if self.M else max(4, self.R + 1)
        self.clock = FakeClock()
        self.patches: list = []
        self.threads: list[threading.Thread] = []
        self.instances: list[Instance] = []
        self.current = [self._new_instance(r) for r in range(self.R)]
        self.src_owner = [0] * self.P  # prefill page table (ranks allocate in lockstep)
        self.aux_holder: list[list[int]] = []  # per decode rank: metadata slot -> instance tag
        self.wire = Wire(self._locate, aux_latency=self.M > 0)
        self.collective = Collective(self.DR)
        self.to_prefill: list[list[tuple[int, list[bytes]]]] = [[] for _ in range(self.PR * self.NI)]  # (from decode rank, frames)
        self.to_decode: list[list[tuple[int, list[bytes]]]] = [[] for _ in range(self.DR)]  # (from prefill rank, frames)
        self.abort_log: list[tuple[int, int, int, int | None]] = []  # (instance, prefill rank, decode rank, generation)
        self.armed: dict[tuple[int, int], int] = {}  # (instance, decode rank) -> generation of its ABORT
        self.acks_seen: set[tuple[int, int]] = set()  # (instance, prefill rank) acks the code has sent
        self.model_ack: dict[tuple[int, int], tuple[int, set]] = {}  # (slot, prank) -> the model's ack on its way
        self.req_of: dict[int, tuple[str, int, int]] = {}  # id(Req) -> (side, rank, instance)
        self.in_call: dict[int, tuple[int, int] | None] = {}  # prefill rank -> (instance, chunk) it sends
        self.write_after_release = False
        self.acting: int | None = None  # the request instance whose decode event is running
        self.problems: list[str] = []
        self.closed = False
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- construction -----------------------------------------------------------------------
    def _new_instance(self, r: int) -> int:
        tenant, pages, over_long = self.shape.requests[r]
        gen = sum(1 for x in self.instances if x.slot == r)
        self.instances.append(Instance(r, gen, tenant, pages, over_long))
        if len(self.instances) > 250:
            raise HarnessError("more than 250 request instances (one-byte tags)")
        return len(self.instances) - 1

    def _patch(self, target: Any, attr: str, value: Any) -> None:
        p = mock.patch.object(target, attr, value)
        p.start()
        self.patches.append(p)

    def _build(self) -> None:
        m = self.m
        rc = m["runtime_context"]
        rc.reset_context()
        rc.publish(m["server_args"].ServerArgs(
            model_path="dummy", disaggregation_decode_allocation_policy=self.opt.allocation_policy), role="tokenizer")
        self.parallel = threading.local()
        for mod in ("decode", "common", "mooncake", "schedule_batch", "prefill"):
            if hasattr(m[mod], "get_parallel"):
                self._patch(m[mod], "get_parallel", self._get_parallel)
        for mod in ("decode", "common", "mooncake"):
            self._patch(m[mod], "time", self.clock)
        dist = m["utils"].dist
        self._patch(dist, "get_world_size", self.collective.world_size)
        self._patch(dist, "all_reduce", self.collective.all_reduce)
        self._patch(m["decode"], "release_kv_cache", self._release_kv_cache)
        self._patch(m["mooncake"].MooncakeKVManager, "_start_heartbeat_checker_thread",
                    lambda self_: threading.Thread(target=lambda: None))
        self.release_timeout = float(m["environ"].envs.SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT.get())
        self.tick_seconds = self.release_timeout / self.opt.timeout_ticks
        self.dranks: list[DecodeRank] = [build_decode_rank(self, d) for d in range(self.DR)]
        self.aux_holder = [[0] * self.n_meta for _ in range(self.DR)]
        for dr in self.dranks:  # follow the real allocator's frees (``_do_release``, ``pop_transferred``)
            dr.meta_alloc.free = self._meta_free(dr.rank, dr.meta_alloc.free)
        self._receiver_class()
        for dr in self.dranks:
            self._on_rank(dr.rank, dr.mgr.start_decode_thread)
            dr.inbox.wait_ready()
        # prefill ranks of every instance: instance n's rank pr is pranks[n * PR + pr]
        self.pranks: list[PrefillRank] = [build_prefill_rank(self, g) for g in range(self.PR * self.NI)]
        for p in self.pranks:
            self._on_rank(p.rank, p.mgr.start_prefill_thread, prefill=True)
            p.inbox.wait_ready()
            w = threading.Thread(target=self._run_worker, args=(p,), name=f"sglang-transfer-worker-{p.rank}", daemon=True)
            w.start()
            self.threads.append(w)
            self.in_call[p.rank] = None
            self._wait_worker(p, 1)

    def _get_parallel(self):
        """``get_parallel()`` for the rank the calling thread acts for."""
        side, rank = getattr(self.parallel, "who", ("decode", 0))
        return parallel_of(rank % self.PR if side == "prefill" else rank, self.PR if side == "prefill" else self.DR)

    def _on_rank(self, rank: int, fn: Callable, *args, prefill: bool = False):
        """Run ``fn`` as rank ``rank`` (its ``get_parallel()``), in this thread."""
        old = getattr(self.parallel, "who", None)
        self.parallel.who = ("prefill" if prefill else "decode", rank)
        try:
            return fn(*args)
        finally:
            if old is None:
                del self.parallel.who
            else:
                self.parallel.who = old

    def _receiver_class(self) -> None:
        mc, utils, decode_mod = self.m["mooncake"], self.m["utils"], self.m["decode"]
        harness = self

        class HarnessReceiver(mc.MooncakeKVReceiver):
            """``MooncakeKVReceiver`` whose sockets are the harness's queues (transport only)."""

            def _connect_to_bootstrap_server(self, bootstrap_info):
                d = harness._decode_rank_of_mgr(self.kv_mgr)
                pr = int(bootstrap_info["rank_port"]) - PREFILL_PORT
                sock = OutSocket(lambda frames: harness.to_prefill[pr].append((d, frames)),
                                 lambda frames: harness._on_abort_sent(d, pr, frames))
                return sock, threading.Lock()

            def _get_bootstrap_info_from_server(self, prefill_dp_rank, cp_rank, target_tp_rank, pp_rank):
                inst = harness.instance_of_addr(self.bootstrap_addr)
                return {"rank_ip": PREFILL_HOST, "rank_port": PREFILL_PORT + inst * harness.PR + int(target_tp_rank)}

            def _register_kv_args(self):
                return True  # the registration is constructed on the prefill side

        real_get_kv_class = utils.get_kv_class

        def get_kv_class(backend, kind):
            if kind == utils.KVClassType.RECEIVER:
                return HarnessReceiver
            return real_get_kv_class(backend, kind)

        self._patch(decode_mod, "get_kv_class", get_kv_class)

    def _meta_free(self, d: int, real_free: Callable[[int], None]) -> Callable[[int], None]:
        def free(idx: int) -> None:
            self.aux_holder[d][idx] = 0
            real_free(idx)

        return free

    def _decode_rank_of_mgr(self, mgr) -> int:
        for dr in self.dranks:
            if dr.mgr is mgr:
                return dr.rank
        raise HarnessError("a receiver of an unknown decode manager")

    def _run_worker(self, p: PrefillRank) -> None:
        self.parallel.who = ("prefill", p.rank)
        try:
            p.mgr.transfer_worker(p.queue, p.executor)
        except BaseException as e:  # recorded; the next step reports it
            p.worker_error = e

    # -- addresses --------------------------------------------------------------------------
    def room(self, r: int) -> int:
        """The ``bootstrap_room`` of request slot ``r``: ``1000 +`` the client's room with
        client rooms (two slots may share it), ``1000 + r`` otherwise."""
        return ROOM_BASE + (r if self.shape.rooms is None else self.shape.rooms[r])

    def instance(self, r: int) -> int:
        """The prefill instance serving request slot ``r``."""
        return 0 if self.shape.instances is None else self.shape.instances[r]

    def g(self, r: int, pr: int) -> int:
        """The index in :attr:`pranks` of prefill rank ``pr`` of slot ``r``'s instance."""
        return self.instance(r) * self.PR + pr

    def instance_ranks(self, r: int) -> list[PrefillRank]:
        """The prefill ranks of slot ``r``'s instance."""
        return [self.pranks[self.g(r, pr)] for pr in range(self.PR)]

    @staticmethod
    def bootstrap_port(inst: int) -> int:
        """The bootstrap port of prefill instance ``inst`` (its rank ports follow ``PREFILL_PORT``)."""
        return PREFILL_PORT + 500 * inst

    @staticmethod
    def instance_of_addr(addr: str) -> int:
        """Which prefill instance a bootstrap address ``host:port`` names."""
        return (int(str(addr).rsplit(":", 1)[1]) - PREFILL_PORT) // 500

    @staticmethod
    def session(d: int) -> str:
        """The Mooncake session id of decode rank ``d``."""
        return f"127.0.0.2:{SESSION_PORT + d}"

    def decode_rank_of_session(self, session_id: str) -> int:
        """Which decode rank a Mooncake session id names."""
        return int(session_id.rsplit(":", 1)[1]) - SESSION_PORT

    def route_to_decode(self, pr: int, endpoint: str, parts) -> None:
        """A prefill rank's manager sends to a decode rank's endpoint (``tcp://ip:port``)."""
        d = int(str(endpoint).rsplit(":", 1)[1]) - DECODE_PORT
        self.to_decode[d].append((pr, [bytes(x) for x in parts]))
        self._note_ack_sent(pr, d, [bytes(x) for x in parts])

    def route_to_prefill(self, d: int, endpoint: str, parts) -> None:
        """A decode rank's manager sends to a prefill rank's endpoint."""
        pr = int(str(endpoint).rsplit(":", 1)[1]) - PREFILL_PORT
        self.to_prefill[pr].append((d, [bytes(x) for x in parts]))

    def _locate(self, d: int, addr: int, length: int) -> tuple[list[int], int | None]:
        """Decode pages (or the metadata slot) of decode rank ``d`` a byte range lies in."""
        dr = self.dranks[d]
        item = dr.heads * HEAD_BYTES
        for pool in (dr.k_pool, dr.v_pool):
            base = pool.data_ptr()
            if base <= addr < base + self.D * item:
                first = (addr - base) // item
                last = (addr + max(length, 1) - 1 - base) // item
                return list(range(first, last + 1)), None
        ptrs, lens, items = dr.meta.get_buf_infos()
        for base, total, it in zip(ptrs, lens, items):
            if base <= addr < base + total:
                return [], (addr - base) // it
        return [], None

    # -- requests -----------------------------------------------------------------------------
    def tag(self, i: int) -> int:
        """The byte that marks request instance ``i``'s KV."""
        return i + 1

    def rid(self, i: int) -> str:
        """The request id of instance ``i``."""
        x = self.instances[i]
        return f"R{x.slot}" if x.gen == 0 else f"R{x.slot}.{x.gen}"

    def _req(self, i: int, side: str, rank: int) -> Any:
        m = self.m
        x = self.instances[i]
        req = m["schedule_batch"].Req(
            rid=self.rid(i), origin_input_text="", origin_input_ids=array("q", list(range(1, x.pages + 1))),
            sampling_params=m["sampling"].SamplingParams(max_new_tokens=8),
            bootstrap_host=PREFILL_HOST, bootstrap_port=self.bootstrap_port(self.instance(x.slot)),
            bootstrap_room=self.room(x.slot),
        )
        req.time_stats.trace_ctx = mock.MagicMock()
        if x.over_long:  # validate_input_length failed at the tokenizer: pending error + stub
            req.set_finish_with_abort(f"Input length ({x.pages} pages) exceeds the maximum allowed length.")
        self.req_of[id(req)] = (side, rank, i)
        return req

    def stream_output(self, side: str, rank: int, reqs) -> None:
        """What the client receives: a finish reason per request (rank 0 of each side speaks
        for its group; the client keeps the first answer)."""
        if rank != 0:
            return
        FINISH_ABORT = self.m["schedule_batch"].FINISH_ABORT
        for req in reqs:
            found = self.req_of.get(id(req))
            if found is None:
                continue
            x = self.instances[found[2]]
            reason = req.finished_reason
            if isinstance(reason, FINISH_ABORT) and x.outcome == "none":
                x.outcome = "aborted" if "Aborted by AbortReq" in str(reason.message) else "error"

    def send_len(self, i: int) -> int:
        """Pages prefill sends: a placeholder's one page, or the prompt."""
        x = self.instances[i]
        return 1 if x.over_long else x.pages

    # -- ranks in parallel ----------------------------------------------------------------------
    def _on_decode_ranks(self, fn: Callable[[DecodeRank], Any]) -> list[Any]:
        """Run ``fn`` on every decode rank, each in its own thread when there are several (so
        that the collective can combine their flags); results in rank order."""
        if self.DR == 1:
            return [self._on_rank(0, fn, self.dranks[0])]
        results: list[Any] = [None] * self.DR
        errors: list[BaseException | None] = [None] * self.DR

        def run(dr):
            self.parallel.who = ("decode", dr.rank)
            try:
                results[dr.rank] = fn(dr)
            except BaseException as e:
                errors[dr.rank] = e

        threads = [threading.Thread(target=run, args=(dr,), daemon=True) for dr in self.dranks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 2)
        if any(t.is_alive() for t in threads):
            raise HarnessError("a decode rank did not return from a collective step")
        self.collective.barrier.reset()
        for e in errors:
            if e is not None:
                raise e
        return results

    # -- waiting for the transfer workers --------------------------------------------------------
    def _wait_worker(self, p: PrefillRank, target: int) -> None:
        with self.wire.cond:
            if not self.wire.cond.wait_for(lambda: p.queue.gets >= target, timeout=WAIT):
                raise HarnessError(f"the transfer worker of P{p.rank} did not come back to its queue")

    def _check_workers(self) -> None:
        for p in self.pranks:
            if p.worker_error is not None:
                raise HarnessError(f"the Mooncake transfer worker of P{p.rank} died: {p.worker_error}")

    def _writes(self, pr: int, i: int, page: int | None = None, aux: bool = False, returned=None):
        """In-flight writes of prefill rank ``pr`` for instance ``i`` (to ``page``, or the aux)."""
        out = []
        for w in self.wire.in_flight:
            if w.prank != pr or w.instance != i or w.is_aux != aux:
                continue
            if page is not None and page not in w.pages:
                continue
            if returned is not None and w.returned != returned:
                continue
            out.append(w)
        return out

    # -- events: admission and reservation --------------------------------------------------------
    def prefill_bootstrap_add(self, r: int) -> None:
        """``PrefillBootstrapQueue.add`` on every prefill rank: the door, then
        ``create_sender`` (a real ``MooncakeKVSender``)."""
        i = self.current[r]
        for p in self.instance_ranks(r):
            req = self._req(i, "prefill", p.rank)
            p.senders[i] = req
            self._on_rank(p.rank, p.pbq.add, req, 1, prefill=True)

    def decode_prealloc(self, r: int) -> None:
        """``DecodePreallocQueue.add`` on every decode rank (door, receiver, ``init``), then the
        page reservation for the original prompt length and a metadata slot (the harness's
        tables, lowest free first, as ``pop_preallocated`` would).  With ``prefill_complete``
        nothing is reserved here: ``init`` sends ``BOOTSTRAP`` to the prefill instance, whose
        bootstrap thread registers it (``DeferredBootstrap.register``) and, if its forward
        completed, answers WaitingForInput (see :meth:`decode_reserve`)."""
        if not self._admit(self.current[r]):
            return  # retired at the door
        if self.opt.deferred_allocation:
            self._bootstrap_handshake(r)
            return
        self._reserve(r)

    def _admit(self, i: int) -> bool:
        """``DecodePreallocQueue.add`` of request instance ``i`` on every decode rank; whether
        it was admitted (``False``: retired at the door)."""
        admitted = []
        for dr in self.dranks:
            req = self._req(i, "decode", dr.rank)
            self._on_rank(dr.rank, dr.pq.add, req)
            found = [q for q in dr.pq.queue if q.req is req]
            admitted.append(bool(found))
            if found:
                dr.reqs[i] = found[0]
        if any(admitted) and not all(admitted):
            raise Divergent("the decode ranks' admission doors disagree")
        return all(admitted)

    def _bootstrap_handshake(self, r: int) -> None:
        """``prefill_complete``: the ``BOOTSTRAP`` frames decode's ``init`` sent reach the
        prefill instance's bootstrap threads, and their answers (a readiness or failure status)
        reach decode."""
        room = str(self.room(r)).encode()
        for p in self.instance_ranks(r):
            self._deliver_to_prefill(p.rank, lambda src, f: f[0] == b"BOOTSTRAP" and f[1] == room)
        for pr in range(self.PR):
            self._deliver_status(r, pr)

    def _reserve(self, r: int) -> None:
        """The page reservation (the harness's page table, lowest free first) and the metadata
        slot of slot ``r``'s request on every decode rank, as ``pop_preallocated`` makes them."""
        i = self.current[r]
        x = self.instances[i]
        pages = None
        for dr in self.dranks:
            mine = self._lowest_free(dr.owner, x.pages)
            if mine is None:
                raise HarnessError(f"no free decode pages for R{r}")
            if pages is not None and mine != pages:
                raise HarnessError("decode ranks' page tables differ")
            pages = mine
            for p in mine:
                dr.owner[p] = self.tag(i)
            dreq = dr.reqs[i]
            idx = dr.meta_alloc.alloc()
            if idx is None:
                raise HarnessError(f"no free metadata slot for R{r}")
            self.aux_holder[dr.rank][idx] = self.tag(i)
            dreq.metadata_buffer_index = idx
            dreq.req.metadata_buffer_index = idx
            dreq.req.kv.req_pool_idx = r  # holds KV from here on
        x.dest = pages

    def decode_reserve(self, r: int) -> None:
        """``prefill_complete``: ``pop_preallocated``'s ``_update_handshake_waiters`` on every
        decode rank must find the receiver WaitingForInput (``waiting_for_input``); then the
        reservation and, in the same iteration, ``send_metadata`` and the move to
        ``DecodeTransferQueue`` on every decode rank."""
        i = self.current[r]
        rid = self.rid(i)
        self._on_decode_ranks(lambda dr: dr.pq._update_handshake_waiters([rid]))
        if not all(dr.reqs[i].waiting_for_input for dr in self.dranks):
            raise Divergent(f"R{r}: the receiver does not poll WaitingForInput; pop_preallocated reserves nothing")
        self._reserve(r)
        for d in range(self.DR):
            self.decode_send_metadata(r, d)

    def decode_duplicate_room(self, r: int) -> None:
        """``prefill_complete``: ``DecodePreallocQueue.add`` creates a receiver whose
        ``__init__`` finds the room in ``request_status`` (the guard); the next
        ``pop_preallocated`` polls it Failed (``_update_handshake_waiters``:
        ``failure_exception``, ``prepare_abort``) and its abort scan streams and clears it."""
        i = self.current[r]
        if not self._admit(i):
            raise Divergent(f"R{r} was retired at the decode door")
        if self.dranks[0].reqs[i].kv_receiver._owns_bootstrap_room:
            raise Divergent(f"R{r}: the receiver owns its room (no duplicate-room refusal)")
        self._fail_in_prealloc(i)

    def _fail_in_prealloc(self, i: int) -> None:
        """``pop_preallocated`` on request instance ``i`` still in the prealloc queue without
        pages: ``_update_handshake_waiters`` (a Failed poll: ``failure_exception``, which
        clears the receiver, and ``prepare_abort``), then the abort scan (``stream_output``,
        ``kv_receiver.clear``)."""
        rid = self.rid(i)
        self._on_decode_ranks(lambda dr: dr.pq._update_handshake_waiters([rid]))
        FINISH_ABORT = self.m["schedule_batch"].FINISH_ABORT
        for dr in self.dranks:
            dreq = dr.reqs[i]
            if not isinstance(dreq.req.finished_reason, FINISH_ABORT):
                raise Divergent(f"{rid}: pop_preallocated did not fail it")
            self.stream_output("decode", dr.rank, [dreq.req])
            self._on_rank(dr.rank, dreq.kv_receiver.clear)
            if dreq in dr.pq.queue:
                dr.pq.queue.remove(dreq)

    def decode_send_metadata(self, r: int, d: int) -> None:
        """``pop_preallocated``'s publish on decode rank ``d``: ``send_metadata`` with the page
        indices and the metadata slot, and the move to ``DecodeTransferQueue`` (``extend``);
        the metadata reaches the prefill ranks' bootstrap threads."""
        i = self.current[r]
        dr = self.dranks[d]
        dreq = dr.reqs[i]
        self._on_rank(d, dreq.kv_receiver.send_metadata, np.array(self.instances[i].dest, dtype=np.int32),
                      dreq.metadata_buffer_index)
        dr.pq.queue.remove(dreq)
        dr.pq._num_published_destinations += 1
        dr.tq.extend([dreq])
        abort = self.m["common"].ABORT_TAG
        for p in self.instance_ranks(r):
            self._deliver_to_prefill(p.rank, lambda src, f: src == d and f[0] != abort and f[0] == str(self.room(r)).encode())

    def prefill_forward(self, r: int) -> None:
        """Bootstrap done on every prefill rank (its sender polls ``WaitingForInput``), a metadata
        slot, the sender's ``init``, and the forward pass writing the request's KV (each rank its
        heads) into source pages."""
        i = self.current[r]
        x = self.instances[i]
        n = self.send_len(i)
        pages = self._lowest_free(self.src_owner, n)
        if pages is None:
            raise HarnessError(f"no free prefill pages for R{r}")
        for q in pages:
            self.src_owner[q] = self.tag(i)
        x.src, x.forwarded = pages, True
        for p in self.instance_ranks(r):
            req = p.senders[i]
            sender = req.disagg_kv_sender
            status = self._on_rank(p.rank, sender.poll, prefill=True)
            KVPoll = self.m["base"].KVPoll
            # prefill_complete: pop_bootstrapped forwards a Bootstrapping request too
            # (can_prefill_before_bootstrap: an optimistic prefill, parked pending_bootstrap)
            ok = (KVPoll.WaitingForInput, KVPoll.Bootstrapping) if self.opt.deferred_allocation else (
                KVPoll.WaitingForInput,)
            if status not in ok:
                raise Divergent(f"R{r}: the sender of P{p.rank} polls {status!r}, not "
                                + " or ".join(s.name for s in ok))
            for q in pages:
                for j in range(p.heads):
                    p.k_pool[q, j * HEAD_BYTES] = self.tag(i)
                    p.v_pool[q, j * HEAD_BYTES] = self.tag(i)
            self._on_rank(p.rank, p.pbq.ensure_metadata_buffer, req, prefill=True)
            self._on_rank(p.rank, sender.init, n, req.metadata_buffer_index, prefill=True)
            req.output_ids = [7]
            p.meta.set_buf(req)
            if self.opt.deferred_allocation:  # process_batch_result_disagg_prefill
                self._on_rank(p.rank, sender.mark_prefill_complete, prefill=True)
        if self.opt.deferred_allocation:  # the readiness message reaches decode
            for pr in range(self.PR):
                self._deliver_status(r, pr)

    # -- events: the transfer ----------------------------------------------------------------------
    def kv_transfer_write(self, r: int, w: int, c: int) -> None:
        """``MooncakeKVSender.send`` of chunk ``c`` on the prefill rank of write stream ``w``; its
        transfer worker dequeues it and starts the KV write (or skips it, for a failed room)."""
        i = self.current[r]
        p = self.pranks[self.g(r, w)]
        req = p.senders[i]
        with self.wire.cond:
            before, issued = p.queue.gets, self.wire.issued.get(p.rank, 0)
        p.engine.sending = (self.room(r), i)
        self.in_call[p.rank] = (i, c)
        self._on_rank(p.rank, req.disagg_kv_sender.send, np.array([self.instances[i].src[c]], dtype=np.int32),
                      prefill=True)
        with self.wire.cond:
            if not self.wire.cond.wait_for(
                lambda: self.wire.issued.get(p.rank, 0) > issued or p.queue.gets > before, timeout=WAIT
            ):
                raise HarnessError(f"the transfer worker of P{p.rank} neither wrote nor came back")
            if p.queue.gets > before:
                self.in_call[p.rank] = None
        self._check_workers()

    def kv_write_lands(self, r: int, w: int, c: int) -> None:
        """The write's bytes arrive.  If its call had not returned, the worker goes on: the next
        destination session's write of the same chunk (landed too), then ``send_aux`` after the
        last chunk, accounting and status, until it is back at its queue (or blocked on the
        metadata write, when the model has aux slots)."""
        i = self.current[r]
        p = self.pranks[self.g(r, w)]
        # with client rooms the write goes where transfer_infos[room] addressed it (possibly
        # another request's page): the request's writes are found wherever they go
        page = None if self.shape.rooms is not None else self.instances[i].dest[c]
        flying = self._writes(p.rank, i, page)
        if not flying:
            raise Divergent(f"no write of R{r} chunk {c} from P{p.rank} is in flight")
        if all(x.returned for x in flying):  # a failed send's bytes arriving late
            for x in flying:
                self.wire.land(x)
            return
        before = p.queue.gets
        while True:
            for x in flying:
                self.wire.land(x)
            with self.wire.cond:
                if not self.wire.cond.wait_for(
                    lambda: p.queue.gets > before or self._writes(p.rank, i, page, returned=False)
                    or (self.M and self._writes(p.rank, i, aux=True)), timeout=WAIT
                ):
                    raise HarnessError(f"the transfer worker of P{p.rank} did not go on after a write landed")
                flying = [] if p.queue.gets > before else self._writes(p.rank, i, page, returned=False)
            if not flying:
                break
        self.in_call[p.rank] = None  # the chunk's KV writes are over; a metadata write is in the wire
        self._check_workers()

    def kv_transfer_aux(self, r: int) -> None:
        """Never a step of its own in SGLang 0.5.23: ``send_aux`` follows the last chunk's call in
        the same worker thread."""
        raise Divergent("SGLang 0.5.23 sends the metadata right after the last chunk, not as a separate step")

    def kv_aux_lands(self, r: int) -> None:
        """The metadata write lands in the slot it was addressed to; the worker concludes the
        transfer (status to decode), its accounting and a pending drain ack."""
        i = self.current[r]
        p = self.pranks[self.g(r, 0)]
        flying = self._writes(p.rank, i, aux=True)
        if not flying:
            raise Divergent(f"no metadata write of R{r} is in flight")
        before = p.queue.gets
        returned = all(x.returned for x in flying)
        for x in flying:
            self.wire.land(x)
        if not returned:
            self._wait_worker(p, before + 1)
            self.in_call[p.rank] = None
        self._check_workers()

    def prefill_transfer_done(self, r: int, pr: int) -> None:
        """Prefill rank ``pr``'s sender polls Success; its status reaches decode
        (``apply_prefill_status``).  When every rank concluded, the prefill scheduler frees the
        source pages and clears the senders."""
        i = self.current[r]
        p = self.pranks[self.g(r, pr)]
        status = self._on_rank(p.rank, p.senders[i].disagg_kv_sender.poll, prefill=True)
        if status != self.m["base"].KVPoll.Success:
            raise Divergent(f"R{r}: the sender of P{pr} polls {status!r}, not Success")
        if not self.opt.deferred_allocation:
            self._deliver_status(r, pr)
        p.concluded.add(i)
        if all(i in q.concluded for q in self.instance_ranks(r)):
            self._end_on_prefill(i)
        if self.opt.deferred_allocation:  # Success goes out from sender.clear (DeferredBootstrap.close)
            self._deliver_status(r, pr)

    def prefill_transfer_failed(self, r: int, pr: int) -> None:
        """A transport failure on prefill rank ``pr``.  With a write in flight it is that send
        failing (``batch_transfer_sync`` returns -1 while the batch may still write: the worker
        runs ``_poison_unsettled_send`` and ``conclude_failure``); otherwise the worker's
        ``conclude_failure``.  The Failed status reaches decode."""
        i = self.current[r]
        p = self.pranks[self.g(r, pr)]
        flying = (self._writes(p.rank, i, returned=False)
                  + (self._writes(p.rank, i, aux=True, returned=False) if self.M else []))
        if flying:
            before = p.queue.gets
            for w in flying:
                w.result = -1
                w.landed.set()  # the call returns; the bytes stay in flight until they land
            self._wait_worker(p, before + 1)
            self.in_call[p.rank] = None
            for d in range(self.DR):
                p.mgr._unblacklist_session(self.session(d))  # the failed-session probe succeeds
        else:
            p.mgr.conclude_failure(bootstrap_room=self.room(r), failure_reason="KV transfer failed")
        self._check_workers()
        self._deliver_status(r, pr)

    def prefill_drain(self, r: int) -> None:
        """Every write of the stopped request has landed: the prefill scheduler frees its
        source pages and clears the senders."""
        self._end_on_prefill(self.current[r])

    def _end_on_prefill(self, i: int) -> None:
        x = self.instances[i]
        for q, owner in enumerate(self.src_owner):
            if owner == self.tag(i):
                self.src_owner[q] = 0
        if x.prefill_ended:
            return
        x.prefill_ended = True
        failed = self.m["base"].KVPoll.Failed
        for p in self.instance_ranks(x.slot):
            if i not in p.senders:  # aborted before it reached prefill: it arrives, already aborted
                req = self._req(i, "prefill", p.rank)
                p.senders[i] = req
                self._on_rank(p.rank, p.pbq.add, req, 1, prefill=True)
                sender = getattr(req, "disagg_kv_sender", None)
                if sender is not None and self._on_rank(p.rank, sender.poll, prefill=True) != failed:
                    self._on_rank(p.rank, sender.abort, prefill=True)
            req = p.senders.get(i)
            sender = getattr(req, "disagg_kv_sender", None) if req is not None else None
            if sender is not None:  # the prefill scheduler concludes the request on this rank
                if self._on_rank(p.rank, sender.poll, prefill=True) == failed:
                    try:  # handle_inflight_transfer_failure: the reason, then clear()
                        self._on_rank(p.rank, sender.failure_exception, prefill=True)
                    except Exception as e:
                        if type(e).__name__ != "KVTransferError":
                            raise
                else:
                    self._on_rank(p.rank, sender.clear, prefill=True)
            if req is not None and req in p.pbq.queue:
                p.pbq.queue.remove(req)
            if req is not None:
                self.m["prefill"].maybe_release_metadata_buffer(req, p.meta_alloc)

    # -- events: decode commit, failure, abort ------------------------------------------------------
    def _commit_on(self, dr: DecodeRank, i: int):
        """``pop_transferred`` on one decode rank with the harness's read after the real
        ``_commit_transfer_to_req``."""
        real = dr.tq._commit_transfer_to_req
        found: dict[str, str] = {}

        def commit(decode_req):
            real(decode_req)
            if not isinstance(decode_req.req.finished_reason, self.m["schedule_batch"].FINISH_ABORT):
                found["read"] = self._read(dr, i)

        dr.tq._commit_transfer_to_req = commit
        try:
            done = dr.tq.pop_transferred(rids_to_check=[self.rid(i)])
        finally:
            del dr.tq._commit_transfer_to_req
        return done, found.get("read")

    def decode_commit(self, r: int) -> None:
        """``DecodeTransferQueue.pop_transferred`` on every decode rank: the metadata gate and the
        MIN collective see Success, ``_commit_transfer_to_req`` checks the metadata's bootstrap
        room and the request commits (its reserved pages are read); the pages are released when
        it finishes.  A room mismatch aborts it instead (SGLang releases it itself)."""
        i = self.current[r]
        x = self.instances[i]
        results = self._on_decode_ranks(lambda dr: self._commit_on(dr, i))
        committed = [any(req is dr.reqs[i].req for req in done) for dr, (done, _) in zip(self.dranks, results)]
        reads = [read for _, read in results]
        if not any(committed) and all(read is None for read in reads) and x.outcome == "none":
            raise Divergent(f"R{r}: pop_transferred did not commit it")
        if any(committed):
            if not all(committed):
                self.problems.append(f"R{r}: the decode ranks disagree on the commit")
            x.read = max((rd for rd in reads if rd), key=READ_RANK.__getitem__, default="none")
            if x.outcome == "none":
                x.outcome = "success"
            for dr in self.dranks:
                self._release_kv_cache(dr.reqs[i].req, None)

    def _read(self, dr: DecodeRank, i: int) -> str:
        """What this decode rank's heads of the request's reserved pages hold."""
        x = self.instances[i]
        worst = "own"
        for p in x.dest:
            for j in range(dr.heads):
                kind = self._kind(int(dr.k_pool[p, j * HEAD_BYTES]), i)
                worst = max(worst, kind, key=READ_RANK.__getitem__)
        return worst

    def _kind(self, tag: int, i: int) -> str:
        if tag == self.tag(i):
            return "own"
        if tag != 0 and self.instances[tag - 1].tenant != self.instances[i].tenant:
            return "cross_tenant"
        return "foreign"

    def decode_poll_failed(self, r: int) -> None:
        """``pop_transferred`` on every decode rank sees Failed: ``failure_exception``,
        ``prepare_abort``, the abort armed (``ensure_abort_notified(force_arm=True)``) when
        deferrable, the MAX collective on the hold, then hold or release."""
        self.acting = self.current[r]
        try:
            self._decode_poll_failed(r)
        finally:
            self.acting = None

    def _decode_poll_failed(self, r: int) -> None:
        i = self.current[r]
        if self.opt.deferred_allocation and self.dranks[0].reqs[i] in self.dranks[0].pq.queue:
            self._fail_in_prealloc(i)  # prefill_complete: still waiting for prefill, no pages
            return
        self._on_decode_ranks(lambda dr: dr.tq.pop_transferred(rids_to_check=[self.rid(i)]))

    def decode_abort(self, r: int) -> None:
        """``Scheduler.abort_request`` on every decode rank: ``kv_receiver.abort()`` (arms a
        generation when the metadata was published, then sends ABORT to every prefill rank in
        ``bootstrap_infos``); for a transfer-queue request the next ``pop_transferred`` takes
        the Failed branch; a request still in the prealloc queue is streamed, cleared and
        released by ``pop_preallocated``'s abort scan (the harness releases its pages)."""
        self.acting = self.current[r]
        try:
            self._decode_abort(r)
        finally:
            self.acting = None

    def _decode_abort(self, r: int) -> None:
        i = self.current[r]
        x = self.instances[i]
        if i not in self.dranks[0].reqs:  # never reached decode: only the client's abort
            if x.outcome == "none":
                x.outcome = "aborted"
            return
        for dr in self.dranks:
            self._on_rank(dr.rank, dr.reqs[i].kv_receiver.abort)
        if self.dranks[0].reqs[i] in self.dranks[0].tq.queue:
            self._on_decode_ranks(lambda dr: dr.tq.pop_transferred(rids_to_check=[self.rid(i)]))
            return
        if x.outcome == "none":
            x.outcome = "aborted"
        for dr in self.dranks:
            dreq = dr.reqs[i]
            if dreq in dr.pq.queue:
                dr.pq.queue.remove(dreq)
            self._on_rank(dr.rank, dreq.kv_receiver.clear)
            self._release_kv_cache(dreq.req, None)
            dr.meta_alloc.free(dreq.metadata_buffer_index)

    # -- events: ABORT at prefill, drain ack, acks at decode -----------------------------------------
    def prefill_handle_abort(self, r: int, pr: int) -> None:
        """The ABORT reaches prefill rank ``pr``'s bootstrap thread: ``_handle_abort_notification``
        (marks the room Failed, registers the ack target, acks at once if nothing is in flight).
        If decode never had the request (the client aborted before it reached decode), the abort
        reaches prefill through its own ``Scheduler.abort_request``: ``disagg_kv_sender.abort()``.
        A request that prefill had not run yet ends there."""
        i = self.current[r]
        abort = self.m["common"].ABORT_TAG
        mine = lambda src, f: f[0] == abort and int(f[1]) == self.room(r)  # noqa: E731
        g = self.g(r, pr)
        if any(mine(src, f) for src, f in self.to_prefill[g]):
            self._deliver_to_prefill(g, mine)
        else:
            req = self.pranks[g].senders.get(i)
            sender = getattr(req, "disagg_kv_sender", None) if req is not None else None
            if sender is not None:
                self._on_rank(g, sender.abort, prefill=True)
        if not self.instances[i].forwarded:
            self._end_on_prefill(i)

    def prefill_drain_ack(self, r: int, pr: int) -> None:
        """The drain ack of prefill rank ``pr`` is on its way: for every decode rank that armed a
        generation and sent it ABORT, SGLang must have sent ``ABORT_ACK`` carrying that
        generation.  An unarmed ABORT waits for no ack and SGLang sends none: the model's ack is
        then a message that carries nothing."""
        i = self.current[r]
        targets = self._ack_targets(i, pr)
        ack = self.m["common"].ABORT_ACK_TAG
        src_rank = self.g(r, pr)
        for d, g in targets:
            if not any(src == src_rank and f[0] == ack and int(f[1]) == self.room(r) and len(f) > 3 and int(f[3]) == g
                       for src, f in self.to_decode[d]):
                raise Divergent(f"SGLang's P{pr} sent no ABORT_ACK with generation {g} to D{d} for R{r}'s room")
        self.model_ack[(r, pr)] = (i, targets)

    def _ack_targets(self, i: int, pr: int) -> set[tuple[int, int]]:
        """(decode rank, generation) of the armed ABORTs request instance ``i`` sent to ``pr``."""
        return {(d, g) for j, p, d, g in self.abort_log if j == i and p == pr and g is not None}

    def decode_handle_abort_ack(self, r: int, pr: int) -> None:
        """The ack the model has on its way from prefill rank ``pr`` (possibly of the room's
        earlier request) reaches decode: ``handle_abort_ack_message`` -> ``note_abort_ack`` on
        every decode rank it was sent to."""
        msg = self.model_ack.pop((r, pr), None)
        if msg is None:
            raise Divergent(f"no ABORT_ACK from P{pr} for R{r}'s room is on its way")
        _, targets = msg
        ack = self.m["common"].ABORT_ACK_TAG
        src_rank = self.g(r, pr)
        for d, g in targets:
            mine = lambda src, f: (src == src_rank and f[0] == ack and int(f[1]) == self.room(r)  # noqa: E731
                                   and len(f) > 3 and int(f[3]) == g)
            if not any(mine(src, f) for src, f in self.to_decode[d]):
                raise Divergent(f"the ABORT_ACK from P{pr} to D{d} for R{r}'s room is no longer on its way")
            self._deliver_to_decode(d, mine)

    def net_drop_ack(self, r: int, pr: int) -> None:
        """The drain ack of prefill rank ``pr`` is lost on its way to decode (every ABORT_ACK
        frame of the room from that rank still queued)."""
        ack = self.m["common"].ABORT_ACK_TAG
        src_rank = self.g(r, pr)
        for d in range(self.DR):
            self.to_decode[d] = [(src, f) for src, f in self.to_decode[d]
                                 if not (src == src_rank and f[0] == ack and int(f[1]) == self.room(r))]
        self.model_ack.pop((r, pr), None)

    def net_drop_abort(self, r: int, pr: int) -> None:
        """An ABORT is lost on its way to prefill rank ``pr``."""
        abort = self.m["common"].ABORT_TAG
        g = self.g(r, pr)
        self.to_prefill[g] = [(src, f) for src, f in self.to_prefill[g]
                              if not (f[0] == abort and int(f[1]) == self.room(r))]

    def decode_release_deferred(self, r: int) -> None:
        """``resolve_deferred_releases`` on every decode rank, on this request's entry: each
        rank's ``is_abort_release_safe(room, required_acks)``, combined by the MIN collective."""
        self._resolve(self.current[r])

    def decode_release_timeout(self, r: int) -> None:
        """``resolve_deferred_releases`` on every decode rank, this request's deadline passed."""
        self._resolve(self.current[r])

    def _resolve(self, i: int) -> None:
        """The real ``resolve_deferred_releases`` on the named request's entry only (the others
        are set aside and put back), as kvproof's event names one request."""
        rid = self.rid(i)

        def run(dr):
            mine = [e for e in dr.tq._deferred_releases if e[0].req.rid == rid]
            others = [e for e in dr.tq._deferred_releases if e[0].req.rid != rid]
            dr.tq._deferred_releases = mine
            try:
                dr.tq.resolve_deferred_releases()
            finally:
                dr.tq._deferred_releases = dr.tq._deferred_releases + others

        self._on_decode_ranks(run)

    def clock_tick(self) -> None:
        """One kvproof tick of the fake clock."""
        self.clock.now += self.tick_seconds

    def client_send(self, r: int) -> None:
        """Slot ``r``'s room takes the client's next request (a new ``Req`` with the same
        ``bootstrap_room`` on every rank from its next admission on).  Status messages of the
        previous request the model has no counterpart of (the worker's Failed status after an
        ABORT: "Room marked Failed before the transfer ended") arrive first: decode drops them
        for the cleared room."""
        for pr in range(self.PR):
            self._deliver_status(r, pr)
        self.current[r] = self._new_instance(r)

    def forget_unsent_ack(self, r: int, pr: int) -> None:
        """The model ends a room's request with prefill rank ``pr``'s drain ack not yet sent
        (``client_send`` resets it), where SGLang had sent it at the drain already: drop that
        frame, as the model does."""
        self.net_drop_ack(r, pr)

    # -- messages ----------------------------------------------------------------------------------
    def _deliver_to_prefill(self, pr: int, keep) -> None:
        """Deliver queued decode->prefill frames for which ``keep(src, frames)`` holds, in order."""
        self.to_prefill[pr] = _deliver(self.to_prefill[pr], self.pranks[pr].inbox, keep)

    def _deliver_to_decode(self, d: int, keep) -> None:
        """Deliver queued prefill->decode frames for which ``keep(src, frames)`` holds."""
        self.to_decode[d] = _deliver(self.to_decode[d], self.dranks[d].inbox, keep)

    def _deliver_status(self, r: int, pr: int) -> None:
        ack = self.m["common"].ABORT_ACK_TAG
        room = str(self.room(r)).encode()
        src_rank = self.g(r, pr)
        for d in range(self.DR):
            self._deliver_to_decode(d, lambda src, f: src == src_rank and f[0] != ack and f[0] == room)

    def _on_abort_sent(self, d: int, pr: int, frames: list[bytes]) -> None:
        """An ABORT leaving decode rank ``d`` for prefill rank ``pr``: record it; a generation
        must already be the one armed for the room when the frame is sent."""
        common = self.m["common"]
        if not frames or frames[0] != common.ABORT_TAG:
            return
        n = common.AbortNotification.from_zmq(frames)
        i = self._sender_of_abort(d, n.room, n.generation)
        pr %= self.PR  # the rank within the request's prefill instance
        self.abort_log.append((i, pr, d, n.generation))
        if n.generation is not None:
            self.armed[(i, d)] = n.generation
            state = self.dranks[d].mgr._deferred_abort_ack_tracker.get(n.room)
            if state is None or state.generation != n.generation:
                self.problems.append(f"D{d}'s ABORT for room {n.room} carries generation {n.generation} "
                                     "that was not armed before it was sent")

    def _note_ack_sent(self, pr: int, d: int, frames: list[bytes]) -> None:
        """An ABORT_ACK leaving prefill rank ``pr``: remember it for the current request of the
        room when it carries that request's armed generation."""
        if not frames or frames[0] != self.m["common"].ABORT_ACK_TAG or len(frames) < 4:
            return
        for r in self._slots_of_room(int(frames[1])):
            i = self.current[r]
            if self.armed.get((i, d)) == int(frames[3]):
                self.acks_seen.add((i, pr % self.PR))

    def _slots_of_room(self, room: int) -> list[int]:
        """The request slots whose ``bootstrap_room`` is ``room`` (several with client rooms)."""
        return [r for r in range(self.R) if self.room(r) == room]

    def _sender_of_abort(self, d: int, room: int, generation) -> int:
        """The request instance whose decode receiver on rank ``d`` sends an ABORT for ``room``:
        the one slot of the room, or with client rooms the one whose receiver armed
        ``generation`` (or, unarmed, the one that has notified)."""
        slots = self._slots_of_room(room)
        if generation is None and self.acting is not None and self.instances[self.acting].slot in slots:
            return self.acting  # the request whose decode event sends it (unarmed ABORTs name no generation)
        if len(slots) > 1:
            for r in slots:
                dreq = self.dranks[d].reqs.get(self.current[r])
                rcv = getattr(dreq, "kv_receiver", None)
                if rcv is not None and (rcv._abort_generation == generation if generation is not None
                                        else rcv.abort_notified):
                    return self.current[r]
        return self.current[slots[0]]

    def acks_sent(self) -> set[tuple[int, int]]:
        """(slot, prefill rank) of the drain acks SGLang has sent for each slot's current request."""
        return {(self.instances[i].slot, pr) for i, pr in self.acks_seen if self.current[self.instances[i].slot] == i}

    def anomalies(self) -> list[str]:
        """Problems the harness saw in the code itself (returned once each)."""
        out, self.problems = self.problems, []
        return out

    # -- pages ----------------------------------------------------------------------------------------
    def _release_kv_cache(self, req, tree_cache, *a, **kw) -> None:
        """``release_kv_cache`` on decode: free the request's pages in its rank's page table."""
        found = self.req_of.get(id(req))
        if found is None or found[0] != "decode":
            return
        _, d, i = found
        dr = self.dranks[d]
        for p in self.instances[i].dest or []:
            if dr.owner[p] == self.tag(i):
                if self._written(d, p):
                    self.write_after_release = True
                dr.owner[p] = 0

    def _written(self, d: int, page: int) -> bool:
        """A write to decode page ``page`` of rank ``d`` is in flight, or a worker is inside the
        transfer call of a chunk destined there."""
        with self.wire.cond:
            if any(w.drank == d and page in w.pages for w in self.wire.in_flight):
                return True
        for pr, call in self.in_call.items():
            dest = self.instances[call[0]].dest if call is not None else None
            if dest is not None and dest[call[1]] == page:
                return True
        return False

    @staticmethod
    def _lowest_free(table: list[int], k: int) -> list[int] | None:
        free = [i for i, o in enumerate(table) if o == 0]
        return free[:k] if len(free) >= k else None

    # -- observation -----------------------------------------------------------------------------------
    def observe(self) -> Observation:
        """What the real code did, in the model's terms (:func:`.observation.code_observation`)."""
        return code_observation(self)

    def instance_of(self, req) -> int:
        """The request instance a ``Req`` object of any rank belongs to."""
        return self.req_of[id(req)][2]

    def close(self) -> None:
        """Stop the harness threads and undo every patch."""
        if self.closed:
            return
        self.closed = True
        if getattr(self, "wire", None) is not None:
            self.wire.close()
        common = self.m["common"]
        for dr in getattr(self, "dranks", []):
            dr.mgr._stopped = True
            dr.inbox.q.put([b"0", b"0", b"0"])  # a status for no room: dropped, then the loop sees _stopped
        for p in getattr(self, "pranks", []):
            p.mgr._stopped = True
            p.inbox.q.put([common.ABORT_TAG, b"0"])
            p.queue.put(None)
            p.executor.shutdown(wait=False, cancel_futures=True)
        for patch in reversed(self.patches):
            patch.stop()
        self.patches.clear()


def _deliver(queue: list, inbox, keep) -> list:
    """Deliver the ``(src, frames)`` of ``queue`` that ``keep`` accepts to ``inbox``, in order;
    the rest, still queued."""
    rest = []
    for src, frames in queue:
        if keep(src, frames):
            inbox.deliver(frames)
        else:
            rest.append((src, frames))
    return rest
