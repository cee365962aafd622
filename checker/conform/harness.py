"""SGLang 0.5.23's own disaggregation code, wired up on one machine with one prefill and one
decode rank, driven one kvproof event at a time.

What runs as real SGLang code (``python/sglang/srt/``):

* admission doors: ``PrefillBootstrapQueue.add`` and ``DecodePreallocQueue.add`` (with
  ``is_unadmitted_reject`` and ``Scheduler.retire_unadmitted_request``); ``Req`` and
  ``Req.set_finish_with_abort`` for prompts that fail ``validate_input_length``;
* decode: ``DecodePreallocQueue._create_receiver_and_enqueue``, ``_resolve_prefill_dp_rank``,
  ``_init_receiver``; ``MooncakeKVReceiver`` (``CommonKVReceiver``) ``__init__``, ``init``,
  ``send_metadata``, ``poll``, ``abort``, ``ensure_abort_notified``,
  ``_send_abort_notification``, ``failure_exception``, ``clear``; ``DecodeTransferQueue``
  ``extend``, ``pop_transferred`` (with the metadata gate ``poll_and_all_reduce`` over real CPU
  ``MetadataBuffers`` and the MAX ``all_reduce_flags``), ``_defer_release``,
  ``resolve_deferred_releases`` (with the MIN ``all_reduce_flags``), ``_do_release``; the
  Mooncake manager's ``register_deferred_abort_room``, ``note_abort_ack``,
  ``handle_abort_ack_message``, ``is_abort_release_safe``, ``apply_prefill_status``,
  ``update_status`` and its decode thread (``start_decode_thread``'s loop) reading every
  message prefill sends;
* prefill: ``MooncakeKVSender`` (``CommonKVSender``) ``__init__``, ``init``, ``send``, ``poll``;
  the Mooncake manager's bootstrap thread (``start_prefill_thread``'s loop: destination
  metadata, ``_handle_abort_notification``, ``register_deferred_ack_target``,
  ``_maybe_ack_drained_abort``), ``add_transfer_request`` and ``transfer_worker`` (its
  in-flight accounting ``_staging_outstanding``, ``send_kvcache``, ``send_aux``,
  ``conclude_transfer``, ``conclude_failure``, ``_poison_unsettled_send``), and
  ``MetadataBuffers.set_buf``.

What the harness fakes, and nothing else:

* the clock: ``time`` in the decode, common and Mooncake modules reads a fake clock that
  moves only on ``clock_tick`` (one tick is the release timeout divided by the scenario's
  ``timeout`` in ticks);
* the transport: ZMQ sockets are in-process queues; each manager's ``_send_multipart_locked``
  and the receiver's ``_connect_to_bootstrap_server`` / ``_get_bootstrap_info_from_server``
  hand frames to the peer's queue; frames are delivered when the kvproof event says the
  message arrives, and the decode/prefill threads process them before the step ends;
* the transfer engine: ``batch_transfer_sync`` copies bytes between CPU tensors (the KV
  pools, one byte tag per page, and the metadata buffers) with ``ctypes.memmove``; a KV write
  stays in flight (its thread blocked) until the event ``kv_write_lands``; a failed send
  returns -1 while its write stays in flight, as a timed-out Mooncake batch does;
* the tensor-parallel collective: a scripted two-rank attention-TP group whose other rank
  reports the same flags (``dist.get_world_size`` is 2, ``dist.all_reduce`` applies the op);
* pages: decode and prefill page allocation is the harness's page table (lowest free pages
  first, as kvproof's model); ``release_kv_cache`` is patched to free the request's pages in
  that table and to record a release of a page that a write is still in flight to.  The
  prefill side's forward pass (computing KV into source pages), its source-page release and
  the decode commit's bookkeeping (``_commit_transfer_to_req``, replaced by a read of the
  reserved pages) are the harness's;
* the peer registration (``KVArgsRegisterInfo`` of the decode rank) and the bootstrap
  server's route answer are constructed, not exchanged.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import queue
import threading
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from http import HTTPStatus
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np

from .stubs import load_sglang

__all__ = ["Harness", "HarnessError", "Observation", "Options"]

PREFILL_HOST = "prefill"
PREFILL_PORT = 17000
DECODE_IP = "127.0.0.2"
DECODE_PORT = 18000
SESSION = "127.0.0.2:19000"  # Mooncake session ids are host:port
ROOM_BASE = 1000
ITEM = 8  # bytes of one KV page per layer (one layer): byte 0 is the tag
WAIT = 10.0  # seconds a step may wait for a harness thread before it is a harness error


class HarnessError(RuntimeError):
    """The harness could not carry out a step (a thread did not answer, a call raised)."""


@dataclass(frozen=True)
class Options:
    """The engine configuration of one run: which decode release path SGLang takes."""

    deferred_release: bool = True
    """``SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE`` and a backend that declares
    ``supports_deferred_decode_kv_release`` (Mooncake does)."""
    timeout_ticks: int = 2
    """The scenario's deferred-release timeout in kvproof ticks."""


@dataclass
class Observation:
    """What can be compared between the model and the real code after a step."""

    held: frozenset[int] = frozenset()
    owner: tuple[int, ...] = ()  # decode page -> request + 1, 0 free
    content: tuple[int, ...] = ()  # decode page -> tag: request + 1, 0 unwritten
    outcome: tuple[str, ...] = ()  # per request: none/success/error/aborted
    aborts: tuple[tuple[int, int | None], ...] = ()  # (request, generation) of ABORTs sent
    read: tuple[str, ...] = ()  # per request: none/own/foreign/cross_tenant
    write_after_release: bool = False

    def differences(self, other: "Observation") -> list[str]:
        """What differs, one phrase per field (``self`` is the model, ``other`` the code)."""
        out = []
        for name in ("held", "owner", "content", "outcome", "read", "write_after_release"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                out.append(f"{name}: model {_show(a)}, SGLang {_show(b)}")
        return out


def _show(v: Any) -> str:
    if isinstance(v, frozenset):
        return "{" + ", ".join(f"R{r}" for r in sorted(v)) + "}"
    if isinstance(v, tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


# -- fakes -------------------------------------------------------------------------------------
class FakeClock:
    """``time`` for the SGLang modules: ``time()``, ``monotonic()`` and ``perf_counter()`` read
    one counter that moves only when the harness advances it."""

    def __init__(self, start: float = 1_000_000.0):
        self.now = start

    def time(self) -> float:
        """Wall clock."""
        return self.now

    monotonic = perf_counter = time

    def sleep(self, seconds: float) -> None:
        """Sleeping passes no fake time (no harness thread sleeps on purpose)."""

    def __getattr__(self, name: str) -> Any:  # anything else the modules read from ``time``
        import time

        return getattr(time, name)


class Inbox:
    """A ZMQ PULL socket as a queue: ``recv_multipart`` blocks in the reading thread;
    :meth:`deliver` returns once the thread has processed the frames and is back at recv."""

    def __init__(self, name: str):
        self.name = name
        self.q: queue.Queue = queue.Queue()
        self.calls = 0
        self.cond = threading.Condition()

    def recv_multipart(self) -> list[bytes]:
        """Called by the real thread loop."""
        with self.cond:
            self.calls += 1
            self.cond.notify_all()
        return self.q.get()

    def deliver(self, frames: list[bytes]) -> None:
        """Hand ``frames`` to the thread and wait until it has handled them."""
        with self.cond:
            target = self.calls + 1
            self.q.put(list(frames))
            if not self.cond.wait_for(lambda: self.calls >= target, timeout=WAIT):
                raise HarnessError(f"{self.name} thread did not come back after a message")

    def wait_ready(self) -> None:
        """Wait until the reading thread first reached recv."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.calls >= 1, timeout=WAIT):
                raise HarnessError(f"{self.name} thread did not start")


class CountingQueue:
    """The transfer worker's queue (``FastQueue``'s interface) that counts ``get`` calls."""

    def __init__(self):
        self.q: queue.Queue = queue.Queue()
        self.gets = 0
        self.cond = threading.Condition()

    def put(self, item: Any) -> None:
        """What ``add_transfer_request`` calls."""
        self.q.put(item)

    def get(self) -> Any:
        """What ``transfer_worker`` blocks on."""
        with self.cond:
            self.gets += 1
            self.cond.notify_all()
        return self.q.get()


class OutSocket:
    """A ZMQ PUSH socket that appends frames to a list (one per destination); ``on_send`` sees
    every message as it is sent."""

    def __init__(self, log: list, on_send=None):
        self.log = log
        self.on_send = on_send

    def send_multipart(self, frames: list[bytes]) -> None:
        """Queue the frames for delivery."""
        frames = [bytes(f) for f in frames]
        if self.on_send is not None:
            self.on_send(frames)
        self.log.append(frames)


@dataclass
class Write:
    """A KV write the transfer engine has in flight: destination/source page per block."""

    room: int
    blocks: list[tuple[int, int, int]]  # (src_addr, dst_addr, length)
    pages: list[int]  # decode pages written
    landed: threading.Event = field(default_factory=threading.Event)
    result: int = 0
    returned: bool = False


class FakeTransferEngine:
    """``MooncakeTransferEngine`` as far as the worker uses it: ``batch_transfer_sync`` copies
    bytes between CPU tensors; KV writes into the decode pool wait for :meth:`land`."""

    def __init__(self, harness: "Harness"):
        self.h = harness
        self.cond = threading.Condition()
        self.in_flight: list[Write] = []

    def get_session_id(self) -> str:
        """The decode rank's session id (one decode rank)."""
        return SESSION

    def batch_transfer_sync(self, session_id, src_addrs, dst_addrs, lengths) -> int:
        """Copy now (metadata) or when the write lands (KV pages)."""
        blocks = list(zip(src_addrs, dst_addrs, lengths))
        pages = [p for _, dst, n in blocks for p in self.h.decode_pages_at(dst, n)]
        if not pages:  # the metadata (aux) write: no latency in kvproof's model
            for src, dst, n in blocks:
                ctypes.memmove(dst, src, n)
            return 0
        room = self.h.sending_room
        w = Write(room, blocks, pages)
        with self.cond:
            self.in_flight.append(w)
            self.cond.notify_all()
        w.landed.wait()
        w.returned = True
        return w.result

    def land(self, w: Write) -> None:
        """The write's bytes arrive (whoever owns the pages now)."""
        for src, dst, n in w.blocks:
            ctypes.memmove(dst, src, n)
        with self.cond:
            self.in_flight.remove(w)
        if not w.returned:
            w.landed.set()


# -- the harness ---------------------------------------------------------------------------
class Harness:
    """One prefill rank and one decode rank of SGLang 0.5.23 over shared CPU memory.

    Requests are ``R0..R{n-1}`` with ``bootstrap_room`` ``1000 + r``.  Every public method is
    one kvproof event; :meth:`observe` reads what the code did.  Close with :meth:`close`.
    """

    def __init__(self, requests: list[tuple[int, int, bool]], decode_pages: int, prefill_pages: int,
                 options: Options = Options()):
        """``requests``: (tenant index, pages, over-long) per request."""
        import torch

        self.m = load_sglang()
        self.torch = torch
        self.opt = options
        self.requests = requests
        self.D, self.P = decode_pages, prefill_pages
        self.clock = FakeClock()
        self.patches: list = []
        self.threads: list[threading.Thread] = []
        self.owner = [0] * self.D  # decode page table
        self.src_owner = [0] * self.P  # prefill page table
        self.dest: dict[int, list[int]] = {}
        self.src: dict[int, list[int]] = {}
        self.outcome = ["none"] * len(requests)
        self.read = ["none"] * len(requests)
        self.write_after_release = False
        self.aborts: list[tuple[int, int | None]] = []
        self.problems: list[str] = []
        self.armed: dict[int, int] = {}  # request -> generation of the ABORT decode sent
        self.to_prefill: list = []  # frames decode sent, not yet delivered
        self.to_decode: list = []  # frames prefill sent, not yet delivered
        self.sending_room: int | None = None
        self.failing: set[int] = set()
        self.reqs: dict[int, Any] = {}
        self.decode_reqs: dict[int, Any] = {}
        self.streamed: list = []
        self.closed = False
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- construction -----------------------------------------------------------------------
    def _patch(self, target: Any, attr: str, value: Any) -> None:
        p = mock.patch.object(target, attr, value)
        p.start()
        self.patches.append(p)

    def _build(self) -> None:
        m, torch = self.m, self.torch
        rc = m["runtime_context"]
        rc.reset_context()
        rc.publish(m["server_args"].ServerArgs(model_path="dummy"), role="tokenizer")
        parallel = SimpleNamespace(
            tp_rank=0, attn_tp_rank=0, attn_tp_size=1, attn_cp_size=1, attn_cp_rank=0, pp_size=1,
            pp_rank=0, dp_rank=0, attn_dp_rank=0, attn_dp_size=1, num_dp_ranks=1, dp_size=1,
            load_balance_method="round_robin", enable_kv_cache_sharding=False,
            attn_tp_group=SimpleNamespace(cpu_group=object()),
        )
        for mod in ("decode", "common", "mooncake", "schedule_batch", "prefill"):
            if hasattr(m[mod], "get_parallel"):
                self._patch(m[mod], "get_parallel", lambda: parallel)
        for mod in ("decode", "common", "mooncake"):
            self._patch(m[mod], "time", self.clock)
        # the scripted attention-TP collective: two ranks, the other reports the same flags
        dist = m["utils"].dist
        self._patch(dist, "get_world_size", lambda group=None: 2)
        self._patch(dist, "all_reduce", self._all_reduce)
        # pages
        self._patch(m["decode"], "release_kv_cache", self._release_kv_cache)
        # the KV pools and metadata buffers: real CPU memory
        self.decode_kv = torch.zeros((self.D, ITEM), dtype=torch.uint8)
        self.prefill_kv = torch.zeros((self.P, ITEM), dtype=torch.uint8)
        n_meta = max(4, len(self.requests) + 1)
        mb = m["utils"].MetadataBuffers
        self.decode_meta = mb(n_meta, hidden_size=8, hidden_states_dtype=torch.float32, max_sampling_mask_tokens=1)
        self.prefill_meta = mb(n_meta, hidden_size=8, hidden_states_dtype=torch.float32, max_sampling_mask_tokens=1)
        alloc = m["utils"].ReqToMetadataIdxAllocator
        self.decode_meta_alloc = alloc(n_meta)
        self.prefill_meta_alloc = alloc(n_meta)
        self.engine = FakeTransferEngine(self)
        self.prefill_inbox = Inbox("prefill bootstrap")
        self.decode_inbox = Inbox("decode")
        self._build_scheduler()
        self._build_decode()
        self._build_prefill()

    def _all_reduce(self, tensor, op=None, group=None, **_kw):
        """Both ranks hold the same flags: MAX and MIN leave them as they are."""
        return None

    def _build_scheduler(self) -> None:
        m = self.m
        sched = SimpleNamespace(
            output_streamer=SimpleNamespace(stream_output=self._stream_output),
            beam_coordinator=SimpleNamespace(retire_group=lambda req: None),
            _release_aborted_request=lambda req: None,
            hisparse_coordinator=None,
            enable_hisparse=False,
            enable_decode_hicache=False,
            metrics_reporter=SimpleNamespace(enable_metrics=False),
            spec_algorithm=None,
        )
        sched.retire_unadmitted_request = lambda req: m["scheduler"].Scheduler.retire_unadmitted_request(sched, req)
        self.sched = sched

    def _stream_output(self, reqs, return_logprob=False, *a, **kw) -> None:
        """What the client receives: a finish reason per request."""
        FINISH_ABORT = self.m["schedule_batch"].FINISH_ABORT
        for req in reqs:
            r = int(req.rid[1:])
            reason = req.finished_reason
            if isinstance(reason, FINISH_ABORT) and self.outcome[r] == "none":  # the client keeps the first
                aborted = "Aborted by AbortReq" in str(reason.message)
                self.outcome[r] = "aborted" if aborted else "error"
            self.streamed.append((req.rid, reason))

    def _manager(self, mode) -> Any:
        m = self.m
        mc = m["mooncake"]
        mgr = mc.MooncakeKVManager.__new__(mc.MooncakeKVManager)
        envs = m["environ"].envs
        mgr.enable_deferred_decode_kv_release = self.opt.deferred_release and bool(
            envs.SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE.get()
        )
        mgr.disaggregation_mode = mode
        mgr.server_args = SimpleNamespace(enable_pd_role_switch=False)
        mgr.deferred_bootstrap = None
        mgr.defer_decode_allocation = False
        mgr.request_status = {}
        mgr.failure_records = {}
        mgr.failure_lock = threading.Lock()
        mgr._staging_outstanding = defaultdict(int)
        mgr._deferred_ack_targets = {}
        mgr._deferred_ack_poisoned_rooms = set()
        mgr._stopped = False
        mgr._worker_threads = []
        mgr.engine = self.engine
        mgr.enable_staging = False
        mgr._staging_handler = None
        mgr._staging_ctx = None
        mgr.enable_trace = False
        mgr.attn_tp_rank = mgr.attn_cp_rank = mgr.pp_rank = 0
        mgr.attn_tp_size = mgr.attn_cp_size = mgr.pp_size = 1
        mgr.is_mla_backend = True
        mgr.is_hybrid_mla_backend = False
        mgr.kv_status_msg_tag = None
        mgr.kv_status_msg_carries_reason = False
        return mgr

    def _build_decode(self) -> None:
        m = self.m
        common, mc, decode_mod, utils = m["common"], m["mooncake"], m["decode"], m["utils"]
        mgr = self._manager(utils.DisaggregationMode.DECODE)
        mgr.local_ip, mgr.rank_port = DECODE_IP, DECODE_PORT
        mgr.server_socket = self.decode_inbox
        mgr.connection_pool = {}
        mgr.connection_lock = threading.Lock()
        mgr.required_prefill_response_num_table = {}
        mgr.prefill_info_table = {
            f"{PREFILL_HOST}:{PREFILL_PORT}": common.PrefillServerInfo(
                attn_tp_size=1, attn_cp_size=1, dp_size=1, pp_size=1, page_size=1, kv_cache_dtype="auto",
                follow_bootstrap_room=True, target_tp_rank=0, target_tp_ranks=[0], target_cp_ranks=[0],
                target_pp_ranks=[0], required_dst_info_num=1, required_prefill_response_num=1,
            )
        }
        mgr.addr_to_rooms_tracker = defaultdict(set)
        mgr.prefill_response_tracker = {}
        mgr._deferred_abort_ack_tracker = {}
        mgr._deferred_abort_generation = 0
        mgr.waiting_timeout = float(m["environ"].envs.SGLANG_DISAGGREGATION_WAITING_TIMEOUT.get())
        mgr._send_multipart_locked = self._decode_send
        self._patch(mc.MooncakeKVManager, "_start_heartbeat_checker_thread",
                    lambda self_: threading.Thread(target=lambda: None))
        self.decode_mgr = mgr
        harness = self

        class HarnessReceiver(mc.MooncakeKVReceiver):
            """``MooncakeKVReceiver`` whose sockets are the harness's queues (transport only)."""

            @classmethod
            def _connect_to_bootstrap_server(cls, bootstrap_info):
                return OutSocket(harness.to_prefill, harness._on_abort_sent), threading.Lock()

            def _get_bootstrap_info_from_server(self, *a):
                return {"rank_ip": PREFILL_HOST, "rank_port": PREFILL_PORT}

            def _register_kv_args(self):
                return True  # the registration is constructed on the prefill side

        self.Receiver = HarnessReceiver
        real_get_kv_class = utils.get_kv_class

        def get_kv_class(backend, kind):
            if kind == utils.KVClassType.RECEIVER:
                return HarnessReceiver
            return real_get_kv_class(backend, kind)

        self._patch(decode_mod, "get_kv_class", get_kv_class)
        # the transfer queue and the prealloc queue, built as SGLang's unit tests build them
        envs = m["environ"].envs
        tq = decode_mod.DecodeTransferQueue.__new__(decode_mod.DecodeTransferQueue)
        tq.queue = []
        tq.gloo_group = object()
        tq.req_to_metadata_buffer_idx_allocator = self.decode_meta_alloc
        tq.tp_rank = 0
        tq.metadata_buffers = self.decode_meta
        tq.scheduler = self.sched
        tq.enable_host_receive = False
        tq.tree_cache = object()
        tq.spec_algorithm = None
        tq._skipped_checksum_signatures = set()
        tq.enable_staging = False
        tq.staging_handler = None
        tq.enable_deferred_kv_release = envs.SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE.get()
        self.release_timeout = float(envs.SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT.get())
        tq.deferred_kv_release_timeout = self.release_timeout
        tq._deferred_releases = []
        tq._commit_transfer_to_req = self._commit
        tq._clean_hicache_prefetch_resources = lambda decode_req: None
        self.tick_seconds = self.release_timeout / self.opt.timeout_ticks
        pq = decode_mod.DecodePreallocQueue.__new__(decode_mod.DecodePreallocQueue)
        pq.scheduler = self.sched
        pq.kv_manager = mgr
        pq.transfer_backend = utils.TransferBackend.MOONCAKE
        pq.queue, pq.retracted_queue, pq.pending_reqs = [], [], []
        pq.token_to_kv_pool_allocator = None
        pq._num_published_destinations = 0
        pq._check_if_req_exceed_kv_capacity = lambda req: False  # capacity: the page table's
        self.sched.disagg_decode_prealloc_queue = pq
        self.tq, self.pq = tq, pq
        mgr.start_decode_thread()  # the real decode thread loop, reading decode_inbox
        self.decode_inbox.wait_ready()

    def _build_prefill(self) -> None:
        m = self.m
        mc, prefill_mod, utils = m["mooncake"], m["prefill"], m["utils"]
        mgr = self._manager(utils.DisaggregationMode.PREFILL)
        mgr.local_ip, mgr.rank_port = PREFILL_HOST, PREFILL_PORT
        mgr.bootstrap_port = PREFILL_PORT
        mgr.server_socket = self.prefill_inbox
        mgr.transfer_infos = {}
        mgr.req_to_decode_prefix_len = {}
        mgr.is_dummy_cp_rank = False
        mgr.enable_all_cp_ranks_for_transfer = False
        mgr.bootstrap_timeout = float(m["environ"].envs.SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT.get())
        mgr.session_lock = threading.Lock()
        mgr.state_layout_rejections = {}
        mgr.failed_sessions = set()
        mgr.failed_session_probes = {}
        mgr.session_failures = defaultdict(int)
        mgr.enable_custom_mem_pool = False
        mgr.custom_mem_pool_type = None
        mgr.max_transfer_batch_indices = 0
        mgr.state_strides_validated = set()
        mgr._kv_replica_factor = 1
        aux_ptrs, aux_lens, aux_items = self.prefill_meta.get_buf_infos()
        mgr.kv_args = SimpleNamespace(
            kv_data_ptrs=[self.prefill_kv.data_ptr()], kv_data_lens=[self.prefill_kv.numel()],
            kv_item_lens=[ITEM], aux_data_ptrs=aux_ptrs, aux_data_lens=aux_lens, aux_item_lens=aux_items,
            kv_layer_ids=None, num_draft_entries=0, page_size=1, mla_compression_ratios=None,
            state_types=[], state_item_lens=[],
        )
        mgr.kv_item_lens_sum = ITEM
        d_aux_ptrs, _, _ = self.decode_meta.get_buf_infos()
        mgr.decode_kv_args_table = {
            SESSION: SimpleNamespace(
                dst_kv_ptrs=[self.decode_kv.data_ptr()], dst_aux_ptrs=d_aux_ptrs, dst_kv_item_len=ITEM,
                dst_attn_tp_size=1, dst_tp_rank=0, requires_dcp_relayout=False, dst_kv_layer_ids=None,
                dst_state_data_ptrs=[], staging_base_ptr=0, staging_total_size=0,
            )
        }
        mgr._send_multipart_locked = self._prefill_send
        mgr._validate_envelope_kv_layout = lambda *a, **kw: None
        mgr._get_dsa_cache_transfer_skip_flags = lambda info: (False, False)
        self.transfer_queue = CountingQueue()
        mgr.transfer_queues = [self.transfer_queue]
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self.prefill_mgr = mgr
        pbq = prefill_mod.PrefillBootstrapQueue.__new__(prefill_mod.PrefillBootstrapQueue)
        pbq.scheduler = self.sched
        pbq.queue = []
        pbq.kv_manager = mgr
        pbq.transfer_backend = utils.TransferBackend.MOONCAKE
        pbq.bootstrap_port = PREFILL_PORT
        pbq.max_input_len = 1 << 30
        pbq.req_to_metadata_buffer_idx_allocator = self.prefill_meta_alloc
        self.pbq = pbq
        mgr.start_prefill_thread()  # the real bootstrap thread loop, reading prefill_inbox
        w = threading.Thread(target=self._run_worker, name="sglang-transfer-worker", daemon=True)
        w.start()
        self.threads.append(w)
        self.prefill_inbox.wait_ready()
        self._wait_worker_idle(1)

    def _run_worker(self) -> None:
        try:
            self.prefill_mgr.transfer_worker(self.transfer_queue, self.executor)
        except BaseException as e:  # recorded; the next step reports it
            self.worker_error = e

    def _decode_send(self, endpoint, parts, is_ipv6=False) -> None:
        self.to_prefill.append([bytes(p) for p in parts])

    def _prefill_send(self, endpoint, parts, is_ipv6=False) -> None:
        self.to_decode.append([bytes(p) for p in parts])

    # -- page table -------------------------------------------------------------------------
    def decode_pages_at(self, addr: int, length: int) -> list[int]:
        """Decode pages a byte range of the decode KV pool covers (empty if it is not there)."""
        base = self.decode_kv.data_ptr()
        if not base <= addr < base + self.D * ITEM:
            return []
        first = (addr - base) // ITEM
        return list(range(first, first + max(1, length // ITEM)))

    def _release_kv_cache(self, req, tree_cache, *a, **kw) -> None:
        """``release_kv_cache`` on decode: free the request's pages in the page table."""
        r = int(req.rid[1:])
        for p in self.dest.get(r, []):
            if self.owner[p] == r + 1:
                if any(p in w.pages for w in self.engine.in_flight):
                    self.write_after_release = True
                self.owner[p] = 0

    @staticmethod
    def _lowest_free(table: list[int], k: int) -> list[int] | None:
        free = [i for i, o in enumerate(table) if o == 0]
        return free[:k] if len(free) >= k else None

    # -- synchronisation --------------------------------------------------------------------
    def _wait_worker_idle(self, target: int) -> None:
        with self.transfer_queue.cond:
            if not self.transfer_queue.cond.wait_for(lambda: self.transfer_queue.gets >= target, timeout=WAIT):
                raise HarnessError("the transfer worker did not come back to its queue")

    def _check_worker(self) -> None:
        err = getattr(self, "worker_error", None)
        if err is not None:
            raise HarnessError(f"the Mooncake transfer worker died: {err}")

    def _deliver_to_prefill(self, keep) -> None:
        """Deliver queued decode->prefill frames for which ``keep(frames)`` holds, in order."""
        rest = []
        for frames in self.to_prefill:
            if keep(frames):
                self.prefill_inbox.deliver(frames)
            else:
                rest.append(frames)
        self.to_prefill = rest

    def _deliver_to_decode(self, keep) -> None:
        """Deliver queued prefill->decode frames for which ``keep(frames)`` holds."""
        rest = []
        for frames in self.to_decode:
            if keep(frames):
                self.decode_inbox.deliver(frames)
            else:
                rest.append(frames)
        self.to_decode = rest

    def _is_ack(self, frames, room: int) -> bool:
        return bool(frames) and frames[0] == self.m["common"].ABORT_ACK_TAG and int(frames[1]) == room

    def _is_status(self, frames, room: int) -> bool:
        return bool(frames) and frames[0] != self.m["common"].ABORT_ACK_TAG and int(frames[0]) == room

    @staticmethod
    def room(r: int) -> int:
        """The ``bootstrap_room`` of request ``r``."""
        return ROOM_BASE + r

    # -- requests ---------------------------------------------------------------------------
    def _req(self, r: int, side: str) -> Any:
        m = self.m
        tenant, pages, over_long = self.requests[r]
        req = m["schedule_batch"].Req(
            rid=f"R{r}", origin_input_text="", origin_input_ids=array("q", list(range(1, pages + 1))),
            sampling_params=m["sampling"].SamplingParams(max_new_tokens=8),
            bootstrap_host=PREFILL_HOST, bootstrap_port=PREFILL_PORT, bootstrap_room=self.room(r),
        )
        req.time_stats.trace_ctx = mock.MagicMock()
        if over_long:  # validate_input_length failed at the tokenizer: pending error + stub
            req.set_finish_with_abort(f"Input length ({pages} pages) exceeds the maximum allowed length.")
        return req

    # -- events (one per kvproof action) ------------------------------------------------------
    def prefill_bootstrap_add(self, r: int) -> None:
        """``PrefillBootstrapQueue.add``: the door, then ``create_sender`` (a real
        ``MooncakeKVSender``)."""
        req = self._req(r, "prefill")
        self.reqs[("p", r)] = req
        self.pbq.add(req, num_kv_heads=1)

    def decode_prealloc(self, r: int) -> None:
        """``DecodePreallocQueue.add`` (door, receiver, ``init``), then the page reservation
        (the harness's page table, for the original prompt length)."""
        req = self._req(r, "decode")
        self.reqs[("d", r)] = req
        with mock.patch.object(self.m["decode"], "_is_fake_transfer", lambda req: False):
            self.pq.add(req)
        found = [dr for dr in self.pq.queue if dr.req is req]
        if not found:
            return  # retired at the door
        dr = found[0]
        self.decode_reqs[r] = dr
        pages = self._lowest_free(self.owner, self.requests[r][1])
        if pages is None:
            raise HarnessError(f"no free decode pages for R{r}")
        for p in pages:
            self.owner[p] = r + 1
        self.dest[r] = pages
        req.kv.req_pool_idx = r  # holds KV from here on

    def decode_send_metadata(self, r: int) -> None:
        """``pop_preallocated``'s publish: a metadata slot, ``send_metadata`` with the page
        indices, and the move to ``DecodeTransferQueue`` (``extend``)."""
        dr = self.decode_reqs[r]
        idx = self.decode_meta_alloc.alloc()
        dr.metadata_buffer_index = idx
        dr.req.metadata_buffer_index = idx
        dr.kv_receiver.send_metadata(np.array(self.dest[r], dtype=np.int32), aux_index=idx)
        self.pq.queue.remove(dr)
        self.pq._num_published_destinations += 1
        self.tq.extend([dr])
        abort = self.m["common"].ABORT_TAG
        self._deliver_to_prefill(lambda f: f[0] != abort and int(f[0]) == self.room(r))

    def prefill_forward(self, r: int) -> None:
        """Bootstrap done (the sender polls ``WaitingForInput``), a metadata slot, the sender's
        ``init``, and the forward pass writing the request's KV into source pages."""
        req = self.reqs[("p", r)]
        sender = req.disagg_kv_sender
        status = sender.poll()
        if status != self.m["base"].KVPoll.WaitingForInput:
            raise HarnessError(f"R{r}: prefill sender polls {status!r}, not WaitingForInput")
        n = self.send_len(r)
        pages = self._lowest_free(self.src_owner, n)
        if pages is None:
            raise HarnessError(f"no free prefill pages for R{r}")
        for q in pages:
            self.src_owner[q] = r + 1
            self.prefill_kv[q, 0] = r + 1
        self.src[r] = pages
        self.pbq.ensure_metadata_buffer(req)
        sender.init(n, req.metadata_buffer_index)
        req.output_ids = [7]
        self.prefill_meta.set_buf(req)

    def send_len(self, r: int) -> int:
        """Pages prefill sends: a placeholder's one page, or the prompt."""
        return 1 if self.requests[r][2] else self.requests[r][1]

    def kv_transfer_write(self, r: int, c: int) -> None:
        """``MooncakeKVSender.send`` of chunk ``c``; the transfer worker dequeues it and starts
        the KV write (or skips it, for a failed room)."""
        req = self.reqs[("p", r)]
        before = self.transfer_queue.gets
        with self.engine.cond:
            flying = len(self.engine.in_flight)
        self.sending_room = self.room(r)
        req.disagg_kv_sender.send(np.array([self.src[r][c]], dtype=np.int32))
        # wait until the worker blocks in the engine on this write, or is back at its queue
        with self.engine.cond:
            self.engine.cond.wait_for(
                lambda: len(self.engine.in_flight) > flying or self.transfer_queue.gets > before, timeout=WAIT
            )
        self._check_worker()

    def _write_of(self, r: int, c: int) -> Write | None:
        page = self.dest[r][c]
        for w in list(self.engine.in_flight):
            if w.room == self.room(r) and page in w.pages:
                return w
        return None

    def kv_write_lands(self, r: int, c: int) -> None:
        """The write's bytes arrive; the worker finishes the chunk (accounting, aux, status)."""
        w = self._write_of(r, c)
        if w is None:
            raise HarnessError(f"no write of R{r} chunk {c} is in flight")
        was_returned = w.returned
        before = self.transfer_queue.gets
        self.engine.land(w)
        if not was_returned:
            self._wait_worker_idle(before + 1)
        self._check_worker()

    def prefill_transfer_done(self, r: int) -> None:
        """The sender concluded Success: its status reaches decode (``apply_prefill_status``),
        prefill polls Success and frees its source pages."""
        req = self.reqs[("p", r)]
        status = req.disagg_kv_sender.poll()
        if status != self.m["base"].KVPoll.Success:
            raise HarnessError(f"R{r}: prefill sender polls {status!r}, not Success")
        self._deliver_to_decode(lambda f: self._is_status(f, self.room(r)))
        self._free_source(r)

    def prefill_transfer_failed(self, r: int) -> None:
        """A prefill-side transport failure.  With a write in flight it is that send failing
        (``batch_transfer_sync`` returns -1 while the batch may still write: the worker runs
        ``_poison_unsettled_send`` and ``conclude_failure``); otherwise the worker's
        ``conclude_failure``.  The Failed status reaches decode."""
        room = self.room(r)
        flying = [w for w in self.engine.in_flight if w.room == room and not w.returned]
        if flying:
            w = flying[0]
            w.result = -1
            before = self.transfer_queue.gets
            w.landed.set()  # the call returns; the bytes stay in flight until kv_write_lands
            self._wait_worker_idle(before + 1)
            self.prefill_mgr._unblacklist_session(SESSION)  # the failed-session probe succeeds
        else:
            self.prefill_mgr.conclude_failure(bootstrap_room=room, failure_reason="KV transfer failed")
        self._check_worker()
        self._deliver_to_decode(lambda f: self._is_status(f, room))

    def _free_source(self, r: int) -> None:
        for q in self.src.get(r, []):
            if self.src_owner[q] == r + 1:
                self.src_owner[q] = 0

    def decode_commit(self, r: int) -> None:
        """``DecodeTransferQueue.pop_transferred`` for this request: the metadata gate and the
        MIN collective see Success and the request commits (its reserved pages are read);
        the pages are released when it finishes."""
        dr = self.decode_reqs[r]
        done = self.tq.pop_transferred(rids_to_check=[dr.req.rid])
        if dr.req not in done:
            raise HarnessError(f"R{r}: pop_transferred did not commit it")
        self.outcome[r] = "success"
        self._release_kv_cache(dr.req, None)

    def _commit(self, decode_req) -> None:
        """The commit's read: what the request's reserved pages hold (in place of
        ``_commit_transfer_to_req``'s copy of the first token from the metadata slot)."""
        r = int(decode_req.req.rid[1:])
        tenant = self.requests[r][0]
        found = "own"
        rank = {"own": 0, "foreign": 1, "cross_tenant": 2}
        for p in self.dest[r]:
            tag = int(self.decode_kv[p, 0])
            if tag == r + 1:
                kind = "own"
            elif tag != 0 and self.requests[tag - 1][0] != tenant:
                kind = "cross_tenant"
            else:
                kind = "foreign"
            found = max(found, kind, key=rank.__getitem__)
        self.read[r] = found

    def decode_poll_failed(self, r: int) -> None:
        """``pop_transferred`` for this request sees Failed: ``failure_exception``,
        ``prepare_abort``, the abort armed (``ensure_abort_notified(force_arm=True)``) when
        deferrable, the MAX collective on the hold, then hold or release."""
        dr = self.decode_reqs[r]
        self.tq.pop_transferred(rids_to_check=[dr.req.rid])
        self._after_abort_sent(r)

    def decode_abort(self, r: int) -> None:
        """``Scheduler.abort_request`` on decode: ``kv_receiver.abort()`` (arms a generation
        when the metadata was published, then sends ABORT); for a transfer-queue request the
        next ``pop_transferred`` takes the Failed branch.  A request still in the prealloc
        queue is released by ``pop_preallocated`` (the harness releases its pages)."""
        dr = self.decode_reqs.get(r)
        if dr is None:  # never reached decode: only the client's abort
            if self.outcome[r] == "none":
                self.outcome[r] = "aborted"
            return
        dr.kv_receiver.abort()
        if dr in self.tq.queue:
            self.tq.pop_transferred(rids_to_check=[dr.req.rid])
        else:
            if dr in self.pq.queue:
                self.pq.queue.remove(dr)
            if self.outcome[r] == "none":
                self.outcome[r] = "aborted"
            self._release_kv_cache(dr.req, None)
        self._after_abort_sent(r)

    def _after_abort_sent(self, r: int) -> None:
        """Nothing to do: :meth:`_on_abort_sent` saw the frames as they were sent."""

    def _on_abort_sent(self, frames: list[bytes]) -> None:
        """An ABORT leaving decode: record (request, generation); a generation must already
        be the one armed for the room when the frame is sent."""
        common = self.m["common"]
        if not frames or frames[0] != common.ABORT_TAG:
            return
        n = common.AbortNotification.from_zmq(frames)
        self.aborts.append((n.room - ROOM_BASE, n.generation))
        if n.generation is not None:
            self.armed[n.room - ROOM_BASE] = n.generation
            state = self.decode_mgr._deferred_abort_ack_tracker.get(n.room)
            if state is None or state.generation != n.generation:
                self.problems.append(f"ABORT for room {n.room} carries generation {n.generation} "
                                     "that was not armed before it was sent")

    def anomalies(self) -> list[str]:
        """Problems the harness saw in the code itself (returned once each)."""
        out, self.problems = self.problems, []
        return out

    def prefill_handle_abort(self, r: int) -> None:
        """The ABORT reaches prefill's bootstrap thread: ``_handle_abort_notification``.  If
        decode never had the request (the client aborted before it reached decode), the abort
        reaches prefill through its own ``Scheduler.abort_request``: ``disagg_kv_sender.abort()``."""
        abort = self.m["common"].ABORT_TAG
        mine = lambda f: f[0] == abort and int(f[1]) == self.room(r)  # noqa: E731
        if any(mine(f) for f in self.to_prefill):
            self._deliver_to_prefill(mine)
            return
        req = self.reqs.get(("p", r))
        sender = getattr(req, "disagg_kv_sender", None) if req is not None else None
        if sender is not None:
            sender.abort()

    def prefill_drain(self, r: int) -> None:
        """Every write of the stopped sender has landed: prefill frees its source pages."""
        self._free_source(r)

    def prefill_drain_ack(self, r: int) -> None:
        """The drain ack is on its way: if decode armed a generation for the room, SGLang must
        have sent ``ABORT_ACK`` carrying it (an unarmed abort waits for no ack)."""
        g = self.armed.get(r)
        if g is None:
            return
        if not any(self._is_ack(f, self.room(r)) and len(f) > 3 and int(f[3]) == g for f in self.to_decode):
            raise Divergent(f"SGLang sent no ABORT_ACK with generation {g} for R{r}'s room")

    def net_drop_ack(self, r: int) -> None:
        """The ack is lost on the way."""
        self.to_decode = [f for f in self.to_decode if not self._is_ack(f, self.room(r))]

    def decode_release_deferred(self, r: int) -> None:
        """The ack reaches decode (``handle_abort_ack_message``) and
        ``resolve_deferred_releases`` runs on this request's entry."""
        self._deliver_to_decode(lambda f: self._is_ack(f, self.room(r)))
        self._resolve(r)

    def decode_release_timeout(self, r: int) -> None:
        """``resolve_deferred_releases`` on this request's entry, its deadline passed."""
        self._resolve(r)

    def _resolve(self, r: int) -> None:
        """Run the real ``resolve_deferred_releases`` on the named request's entry only (the
        others are set aside and put back), as kvproof's event names one request."""
        mine = [e for e in self.tq._deferred_releases if e[0].req.rid == f"R{r}"]
        others = [e for e in self.tq._deferred_releases if e[0].req.rid != f"R{r}"]
        self.tq._deferred_releases = mine
        self.tq.resolve_deferred_releases()
        self.tq._deferred_releases = self.tq._deferred_releases + others

    def clock_tick(self) -> None:
        """One kvproof tick of the fake clock."""
        self.clock.now += self.tick_seconds

    # -- observation --------------------------------------------------------------------------
    def observe(self) -> Observation:
        """What the real code did, in the model's terms."""
        with self.engine.cond:
            for w in self.engine.in_flight:  # a write in flight to a page its request lost
                r = w.room - ROOM_BASE
                if any(self.owner[p] != r + 1 for p in w.pages):
                    self.write_after_release = True
        held = frozenset(int(e[0].req.rid[1:]) for e in self.tq._deferred_releases)
        content = tuple(int(self.decode_kv[p, 0]) for p in range(self.D))
        return Observation(
            held=held, owner=tuple(self.owner), content=content, outcome=tuple(self.outcome),
            aborts=tuple(self.aborts), read=tuple(self.read), write_after_release=self.write_after_release,
        )

    def close(self) -> None:
        """Stop the harness threads and undo every patch."""
        if self.closed:
            return
        self.closed = True
        for w in list(getattr(getattr(self, "engine", None), "in_flight", [])):
            w.landed.set()
        for mgr in (getattr(self, "decode_mgr", None), getattr(self, "prefill_mgr", None)):
            if mgr is not None:
                mgr._stopped = True
        common = self.m["common"]
        if hasattr(self, "decode_inbox"):  # a message each loop consumes quietly, then it sees _stopped
            self.decode_inbox.q.put([b"0", b"0", b"0"])  # a status for no room: dropped
        if hasattr(self, "prefill_inbox"):
            self.prefill_inbox.q.put([common.ABORT_TAG, b"0"])
        if hasattr(self, "transfer_queue"):
            self.transfer_queue.put(None)
        if hasattr(self, "executor"):
            self.executor.shutdown(wait=False)
        for p in reversed(self.patches):
            p.stop()
        self.patches.clear()


class Divergent(Exception):
    """The real code cannot take the step the model takes (the message says why)."""
