"""SGLang 0.5.23's real disaggregation objects, built as its own CPU unit tests build them
(``Class.__new__`` and only the attributes the methods use), one set per rank.

A prefill rank is a ``MooncakeKVManager`` in prefill mode with its real bootstrap thread and
real ``transfer_worker`` thread, a ``PrefillBootstrapQueue`` and its KV pools and metadata
buffers; a decode rank is a ``MooncakeKVManager`` in decode mode with its real decode thread, a
``DecodePreallocQueue``, a ``DecodeTransferQueue`` whose ``gloo_group`` is its handle on the
harness's :class:`~.fakes.Collective`, its KV pools and metadata buffers.  The prefill server
info a decode rank uses is computed by the manager's own ``_resolve_rank_mapping``.

KV pools are MHA-shaped (a K and a V buffer, ``page_size`` 1) with one 8-byte slot per KV head;
the model's shard ``u`` is head ``u`` of ``max(prefill_ranks, decode_ranks)`` heads, and byte 0
of a head's slot carries a tag naming the request instance whose KV it is.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

__all__ = [
    "PREFILL_HOST", "PREFILL_PORT", "DECODE_IP", "DECODE_PORT", "SESSION_PORT", "ROOM_BASE", "HEAD_BYTES",
    "PrefillRank", "DecodeRank", "parallel_of", "make_manager", "build_prefill_rank", "build_decode_rank",
]

PREFILL_HOST = "127.0.0.1"
PREFILL_PORT = 17000  # + prefill rank
DECODE_IP = "127.0.0.2"
DECODE_PORT = 18000  # + decode rank
SESSION_PORT = 19000  # + decode rank: Mooncake session ids are host:port
ROOM_BASE = 1000
HEAD_BYTES = 8


@dataclass
class PrefillRank:
    """One prefill TP rank: manager, bootstrap queue, worker queue, pools."""

    rank: int
    mgr: Any
    pbq: Any
    k_pool: Any
    v_pool: Any
    meta: Any
    meta_alloc: Any
    inbox: Any
    queue: Any
    engine: Any
    executor: Any
    sched: Any
    heads: int
    worker_error: BaseException | None = None
    senders: dict = field(default_factory=dict)  # request instance -> Req on this rank
    concluded: set = field(default_factory=set)  # request instances whose sender polled Success


@dataclass
class DecodeRank:
    """One decode TP rank: manager, prealloc and transfer queues, pools, page table."""

    rank: int
    mgr: Any
    pq: Any
    tq: Any
    k_pool: Any
    v_pool: Any
    meta: Any
    meta_alloc: Any
    inbox: Any
    sched: Any
    heads: int
    owner: list[int] = field(default_factory=list)  # decode page -> instance tag, 0 free
    reqs: dict = field(default_factory=dict)  # request instance -> DecodeRequest


def parallel_of(rank: int, size: int) -> SimpleNamespace:
    """``get_parallel()`` of one attention-TP rank (no DP, CP or PP)."""
    return SimpleNamespace(
        tp_rank=rank, attn_tp_rank=rank, attn_tp_size=size, attn_cp_size=1, attn_cp_rank=0, pp_size=1,
        pp_rank=0, dp_rank=0, attn_dp_rank=0, attn_dp_size=1, num_dp_ranks=1, dp_size=1,
        load_balance_method="round_robin", enable_kv_cache_sharding=False, enable_dsa_cache_layer_split=False,
        attn_tp_group=SimpleNamespace(cpu_group=object()),
    )


def make_manager(m: dict, mode, rank: int, size: int, deferred: bool, policy: str = "early") -> Any:
    """A ``MooncakeKVManager`` built with ``__new__``: the attributes its bookkeeping, thread
    loops and transfer worker read, for one rank of an attention-TP group of ``size``; with
    ``policy = "prefill_complete"`` what ``CommonKVManager.__init__`` sets for it
    (``defer_decode_allocation``, and on prefill a real ``DeferredBootstrap``)."""
    mc = m["mooncake"]
    mgr = mc.MooncakeKVManager.__new__(mc.MooncakeKVManager)
    envs = m["environ"].envs
    mgr.enable_deferred_decode_kv_release = deferred and bool(envs.SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE.get())
    mgr.disaggregation_mode = mode
    mgr.server_args = SimpleNamespace(enable_pd_role_switch=False)
    mgr.defer_decode_allocation = policy == "prefill_complete"
    mgr.deferred_bootstrap = None
    if mgr.defer_decode_allocation and mode == m["utils"].DisaggregationMode.PREFILL:
        envs = m["environ"].envs
        mgr.deferred_bootstrap = m["bootstrap"].DeferredBootstrap(
            envs.SGLANG_DISAGGREGATION_WAITING_TIMEOUT.get() + envs.SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT.get())
    mgr.request_status = {}
    mgr.failure_records = {}
    mgr.failure_lock = threading.Lock()
    mgr._staging_outstanding = defaultdict(int)
    mgr._deferred_ack_targets = {}
    mgr._deferred_ack_poisoned_rooms = set()
    mgr._stopped = False
    mgr._worker_threads = []
    mgr.enable_staging = False
    mgr._staging_handler = None
    mgr._staging_ctx = None
    mgr.enable_trace = False
    mgr.attn_tp_rank, mgr.attn_tp_size = rank, size
    mgr.attn_cp_rank = mgr.pp_rank = 0
    mgr.attn_cp_size = mgr.pp_size = 1
    mgr.is_mla_backend = False
    mgr.is_hybrid_mla_backend = False
    mgr.enable_all_cp_ranks_for_transfer = False
    mgr.kv_status_msg_tag = None
    mgr.kv_status_msg_carries_reason = False
    return mgr


def _metadata(m: dict, size: int):
    import torch

    buffers = m["utils"].MetadataBuffers(size, hidden_size=8, hidden_states_dtype=torch.float32,
                                         max_sampling_mask_tokens=1)
    return buffers, m["utils"].ReqToMetadataIdxAllocator(size)


def _scheduler(m: dict, stream_output) -> SimpleNamespace:
    """The scheduler attributes the queues read; ``retire_unadmitted_request`` is the real one."""
    sched = SimpleNamespace(
        output_streamer=SimpleNamespace(stream_output=stream_output),
        beam_coordinator=SimpleNamespace(retire_group=lambda req: None),
        batch_result_processor=SimpleNamespace(_maybe_update_reasoning_tokens=lambda req, tok: None),
        _release_aborted_request=lambda req: None,
        hisparse_coordinator=None,
        enable_hisparse=False,
        enable_decode_hicache=False,
        enable_priority_scheduling=False,
        kv_checksum_computer=None,
        metrics_reporter=SimpleNamespace(enable_metrics=False),
        spec_algorithm=None,
    )
    sched.retire_unadmitted_request = lambda req: m["scheduler"].Scheduler.retire_unadmitted_request(sched, req)
    return sched


def build_prefill_rank(h, g: int) -> PrefillRank:
    """Prefill rank ``g`` of harness ``h`` (rank ``g % prefill_ranks`` of instance
    ``g // prefill_ranks``; one instance unless the scenario routes requests to two): the
    manager (its real bootstrap thread is started by the caller), the bootstrap queue, the
    worker queue and the pools."""
    import torch

    from kvproof.spec.sglang.conform.fakes import FakeTransferEngine, Inbox, WorkerQueue

    m = h.m
    utils, prefill_mod = m["utils"], m["prefill"]
    heads = h.heads // h.PR
    item = heads * HEAD_BYTES
    k_pool = torch.zeros((h.P, item), dtype=torch.uint8)
    v_pool = torch.zeros((h.P, item), dtype=torch.uint8)
    meta, meta_alloc = _metadata(m, max(4, h.R + 1))  # prefill's own slots: not modelled, never short
    pr, inst = g % h.PR, g // h.PR
    mgr = make_manager(m, utils.DisaggregationMode.PREFILL, pr, h.PR, h.opt.deferred_release, h.opt.allocation_policy)
    mgr.local_ip, mgr.rank_port = PREFILL_HOST, PREFILL_PORT + g
    mgr.bootstrap_port = h.bootstrap_port(inst)
    inbox = Inbox(f"prefill rank {g} bootstrap")
    mgr.server_socket = inbox
    mgr.transfer_infos = {}
    mgr.req_to_decode_prefix_len = {}
    mgr.is_dummy_cp_rank = False
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
    aux_ptrs, aux_lens, aux_items = meta.get_buf_infos()
    mgr.kv_args = SimpleNamespace(
        kv_data_ptrs=[k_pool.data_ptr(), v_pool.data_ptr()], kv_data_lens=[k_pool.numel(), v_pool.numel()],
        kv_item_lens=[item, item], aux_data_ptrs=aux_ptrs, aux_data_lens=aux_lens, aux_item_lens=aux_items,
        kv_layer_ids=None, num_draft_entries=0, page_size=1, mla_compression_ratios=None, state_types=[],
        state_item_lens=[], engine_rank=pr, kv_head_num=heads, total_kv_head_num=h.heads, prefill_start_layer=0,
    )
    mgr.kv_item_lens_sum = 2 * item
    mgr.decode_kv_args_table = {}
    for d, dr in enumerate(h.dranks):
        d_aux_ptrs, _, _ = dr.meta.get_buf_infos()
        mgr.decode_kv_args_table[h.session(d)] = SimpleNamespace(
            dst_kv_ptrs=[dr.k_pool.data_ptr(), dr.v_pool.data_ptr()], dst_aux_ptrs=d_aux_ptrs,
            dst_kv_item_len=dr.heads * HEAD_BYTES, dst_attn_tp_size=h.DR, dst_tp_rank=d, requires_dcp_relayout=False,
            dst_kv_layer_ids=None, dst_state_data_ptrs=[], staging_base_ptr=0, staging_total_size=0,
        )
    mgr._send_multipart_locked = lambda endpoint, parts, is_ipv6=False: h.route_to_decode(g, endpoint, parts)
    mgr._validate_envelope_kv_layout = lambda *a, **kw: None
    mgr._get_dsa_cache_transfer_skip_flags = lambda info: (False, False)
    engine = FakeTransferEngine(h.wire, g, h.decode_rank_of_session)
    mgr.engine = engine
    queue = WorkerQueue(h.wire)
    mgr.transfer_queues = [queue]
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    sched = _scheduler(m, lambda reqs, *a, **kw: h.stream_output("prefill", pr, reqs))
    pbq = prefill_mod.PrefillBootstrapQueue.__new__(prefill_mod.PrefillBootstrapQueue)
    pbq.scheduler = sched
    pbq.queue = []
    pbq.kv_manager = mgr
    pbq.transfer_backend = utils.TransferBackend.MOONCAKE
    pbq.bootstrap_port = h.bootstrap_port(inst)
    pbq.max_input_len = 1 << 30
    pbq.req_to_metadata_buffer_idx_allocator = meta_alloc
    return PrefillRank(g, mgr, pbq, k_pool, v_pool, meta, meta_alloc, inbox, queue, engine, executor, sched, heads)


def build_decode_rank(h, d: int) -> DecodeRank:
    """Decode rank ``d`` of harness ``h``: the manager (its real decode thread is started by the
    caller), the prealloc and transfer queues and the pools."""
    import torch

    from kvproof.spec.sglang.conform.fakes import Inbox, RankGroup

    m = h.m
    common, decode_mod, utils = m["common"], m["decode"], m["utils"]
    heads = h.heads // h.DR
    item = heads * HEAD_BYTES
    k_pool = torch.zeros((h.D, item), dtype=torch.uint8)
    v_pool = torch.zeros((h.D, item), dtype=torch.uint8)
    meta, meta_alloc = _metadata(m, h.n_meta)
    mgr = make_manager(m, utils.DisaggregationMode.DECODE, d, h.DR, h.opt.deferred_release, h.opt.allocation_policy)
    mgr.local_ip, mgr.rank_port = DECODE_IP, DECODE_PORT + d
    inbox = Inbox(f"decode rank {d}")
    mgr.server_socket = inbox
    mgr.connection_pool = {}
    mgr.connection_lock = threading.Lock()
    mgr.required_prefill_response_num_table = {}
    mgr.kv_args = SimpleNamespace(engine_rank=d)
    mgr.engine = SimpleNamespace(get_session_id=lambda: h.session(d))
    info = common.PrefillServerInfo(attn_tp_size=h.PR, attn_cp_size=1, dp_size=1, pp_size=1, page_size=1,
                                    kv_cache_dtype="auto", follow_bootstrap_room=True,
                                    decode_allocation_policy=h.opt.allocation_policy)
    mgr._resolve_rank_mapping(info)  # SGLang's own TP rank mapping: target ranks, response counts
    mgr.prefill_info_table = {f"{PREFILL_HOST}:{h.bootstrap_port(n)}": info for n in range(h.NI)}
    mgr.addr_to_rooms_tracker = defaultdict(set)
    mgr.prefill_response_tracker = {}
    mgr._deferred_abort_ack_tracker = {}
    mgr._deferred_abort_generation = 0
    mgr.waiting_timeout = float(m["environ"].envs.SGLANG_DISAGGREGATION_WAITING_TIMEOUT.get())
    mgr._send_multipart_locked = lambda endpoint, parts, is_ipv6=False: h.route_to_prefill(d, endpoint, parts)
    sched = _scheduler(m, lambda reqs, *a, **kw: h.stream_output("decode", d, reqs))
    envs = m["environ"].envs
    tq = decode_mod.DecodeTransferQueue.__new__(decode_mod.DecodeTransferQueue)
    tq.queue = []
    tq.gloo_group = RankGroup(d)
    tq.req_to_metadata_buffer_idx_allocator = meta_alloc
    tq.tp_rank = d
    tq.metadata_buffers = meta
    tq.scheduler = sched
    tq.enable_host_receive = False
    tq.tree_cache = object()
    tq.spec_algorithm = SimpleNamespace(is_none=lambda: True)
    tq._skipped_checksum_signatures = set()
    tq.enable_staging = False
    tq.staging_handler = None
    tq.enable_deferred_kv_release = envs.SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE.get()
    tq.deferred_kv_release_timeout = h.release_timeout
    tq._deferred_releases = []
    tq._clean_hicache_prefetch_resources = lambda decode_req: None
    pq = decode_mod.DecodePreallocQueue.__new__(decode_mod.DecodePreallocQueue)
    pq.scheduler = sched
    pq.kv_manager = mgr
    pq.transfer_backend = utils.TransferBackend.MOONCAKE
    pq.queue, pq.retracted_queue, pq.pending_reqs = [], [], []
    pq.token_to_kv_pool_allocator = None
    pq._num_published_destinations = 0
    pq.pp_size, pq.tp_rank, pq.gloo_group = 1, d, RankGroup(d)  # _update_handshake_waiters
    pq._check_if_req_exceed_kv_capacity = lambda req: False  # capacity: the harness's page table
    sched.disagg_decode_prealloc_queue = pq
    return DecodeRank(d, mgr, pq, tq, k_pool, v_pool, meta, meta_alloc, inbox, sched, heads, [0] * h.D)
