"""vLLM 0.33.0's own prefill and decode engines (pull mode), wired up in one process and driven
one kvproof event at a time (push mode: :mod:`.push`, a subclass).

What runs as real vLLM code (``vllm/v1/core/sched/scheduler.py`` and
``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``):

* both engines' ``Scheduler`` (``add_request``, ``schedule``, ``update_from_output`` with a
  ``KVConnectorOutput``, ``finish_requests``, ``_update_from_kv_xfer_finished``,
  ``_free_request`` and its ``delay_free_blocks``), their ``KVCacheManager`` and block pool (the
  block ids below are the real allocator's);
* both engines' scheduler-side connector ``NixlPullConnectorScheduler``: ``request_finished``
  (the lease start ``_reqs_need_send[req] = now + kv_lease_duration``, the
  ``kv_transfer_params`` decode gets), ``get_num_new_matched_tokens`` (the async load),
  ``update_state_after_alloc``, ``build_connector_meta`` (``reqs_to_send``, ``reqs_in_batch``,
  ``reqs_to_recv``, the heartbeat packaging throttled by ``kv_lease_duration // 6``),
  ``on_new_request`` / ``_stop_heartbeat`` (which requests decode heartbeats for);
* prefill's worker-side lease bookkeeping, methods of the real ``NixlPullConnectorWorker``:
  ``start_load_kv`` (``_reqs_to_process``, the rebased ``_reqs_to_send`` deadlines),
  ``_get_new_notifs`` (a READ's ``"{req}:{n}"`` notification, ``HB:`` heartbeats through
  ``_handle_heartbeat``, the "unrecognized request" branch and its
  ``record_notification_after_expiry``) and ``_reap_expired_send_leases``.

What the harness stands in for, and nothing else:

* the clock: ``time`` in the four NIXL modules reads a fake clock that moves only on
  ``clock_tick``, by ``TICK_SECONDS`` (a tick is 10 s, so a 3-tick lease is 0.33.0's default 30 s
  and a heartbeat every ``30 // 6`` = 5 s fits in a tick); no real sleep is needed for a lease to
  expire;
* the workers' construction: prefill's worker object is created without ``__init__`` (which
  needs a device, a collective world and a NIXL agent) and given the attributes its
  ``__init__`` sets for the methods above; decode's worker is not run: the harness posts the
  READ of the ``reqs_to_recv`` entry the real decode scheduler emitted (its ``local_block_ids``
  and ``remote.block_ids``), sends the ``HB:`` notifications of the ``heartbeat_by_engine`` the
  real scheduler packaged, as ``_send_heartbeats`` does, and reports ``finished_recving`` when
  the READ completed, as ``get_transfer_results`` does;
* NIXL: a stand-in agent holds notifications until the event that delivers them (one request's
  at a time); a READ copies the source block's tag into the destination block when its data
  moves (``nixl_read_take_data``), whoever owns either block then;
* the model runner: ``ModelRunnerOutput`` is fabricated (one sampled token per scheduled
  request); a block's KV is a tag (the request's slot + 1) that prefill's forward pass writes.

Heartbeats: the model sends and applies one in a single step.  At that step the real decode
scheduler must have packaged heartbeats in the same tick (its throttle, ``kv_lease_duration //
6`` = 5 s, is shorter than a tick), and the ``HB:`` notification names the requests its
heartbeat tracking holds at that step; heartbeats packaged at other steps are not sent.  With ``heartbeat_interval = "none"`` (before #41383) no heartbeat is ever
delivered: 0.33.0's prefill then behaves as a bare TTL.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from unittest import mock

from kvproof.spec.vllm.conform.engine import BLOCK_SIZE, load_vllm, vllm_config, worker_class

__all__ = ["Harness", "HarnessError", "Divergent", "Shape", "TICK_SECONDS", "PROMPT_TOKENS"]

TICK_SECONDS = 10
"""Seconds of the fake clock per kvproof tick."""
PROMPT_TOKENS = 8
"""Prompt length of every request (one block of ``BLOCK_SIZE`` tokens)."""
_EPOCH = 1000.0
_PREFIX = list(range(1, 33))  # V11: the prompt prefix every request shares (one block of BLOCK_SIZE tokens)


class Divergent(Exception):
    """The real code cannot take the step the model takes (the message says why)."""


class HarnessError(RuntimeError):
    """The harness itself cannot go on (a bug or an unsupported shape, not a verdict)."""


@dataclass(frozen=True)
class Shape:
    """The sizes and knobs of one run."""

    tenants: tuple[int, ...]
    """Tenant index of each request slot."""
    prefill_blocks: int
    decode_blocks: int
    lease_ticks: int
    async_scheduling: bool = False
    """Decode runs vLLM's ``AsyncScheduler`` with ``async_scheduling`` (two batches in flight)."""
    prefix_hit: bool = False
    """V11: every prompt is two blocks whose first (the same tokens for every request) decode
    has in its prefix cache (prefix caching on, one more decode block, warmed by a local
    request before the run)."""
    appended_token: bool = False
    """V11 pull (#50558): decode's prompt is prefill's plus one proxy-appended token, which starts a
    third block; decode takes two uncached blocks per request (twice the model's decode blocks,
    plus the cached prefix), of which the first, the suffix slot, is the one the model tracks."""
    origin: tuple[int, ...] = ()
    """Whose ``kv_transfer_params`` each slot carries (its own, or a replayed one's, V9); empty: its own."""
    cached: tuple[bool, ...] = ()
    """V13: the slots whose whole KV decode holds in its local prefix cache (a full local hit);
    empty: none."""
    mla: bool = False
    """V16: an MLA model with two prefill ranks (each a replica of the KV) and one decode rank:
    decode READs rank 0 and notifies rank 1 (``_read_blocks_for_req``)."""
    turn2: bool = False
    """V14: the READ is the turn-2 readback: the holder's parameters carry
    ``remote_blocks_expiry_time`` and the reader runs ``_is_turn2_read_expired`` before posting."""
    turn2_offset_error: int = 0
    """V14: ticks by which the reader's handshake clock offset places the holder's deadline later."""
    ids: tuple[tuple[str, str], ...] = ()
    """Each slot's prefill and decode internal request id as the scenario chose them
    (:meth:`~kvproof.spec.vllm.config.Config.request_ids`); empty: the harness's own."""


class _Clock:
    """The fake ``time`` module of the NIXL connector modules."""

    def __init__(self) -> None:
        self.now = _EPOCH

    def perf_counter(self) -> float:
        """The fake time in seconds."""
        return self.now

    time = monotonic = perf_counter

    def sleep(self, seconds: float) -> None:
        """Never needed: nothing the harness calls sleeps."""


class _Agent:
    """The stand-in NIXL agent of prefill: notifications wait here until delivered."""

    def __init__(self) -> None:
        self.inbox: list[bytes] = []
        self.deliver: list[bytes] = []

    def get_new_notifs(self) -> dict[str, list[bytes]]:
        """What the event delivers now (``nixl_agent.get_new_notifs``)."""
        out, self.deliver = self.deliver, []
        return {"decode": out} if out else {}


@dataclass
class _Slot:
    """What the harness knows of one request slot."""

    params: dict | None = None  # prefill's kv_transfer_params, for decode
    recv: Any = None  # the ReqMeta decode's scheduler emitted in reqs_to_recv
    read: str = "none"  # none | posted | taken | done (the READ)
    outcome: str = "none"
    seen: str = "none"  # what decode computed on


class Harness:
    """vLLM 0.33.0's prefill and decode engines (pull mode).  Every public event method is one
    kvproof action with the action's parameters; :meth:`observe` reads what the code did.
    :class:`~.push.PushHarness` is the push-mode subclass."""

    CONNECTOR = "NixlConnector"
    """The ``kv_connector`` both engines are configured with."""
    TIMED_MODULES = ("base_scheduler", "pull_scheduler", "base_worker", "pull_worker")
    """The NIXL modules whose ``time`` reads the fake clock."""

    def __init__(self, shape: Shape):
        self.m = m = load_vllm()
        self.shape = shape
        self.R = len(shape.tenants)
        self.clock = _Clock()
        self.patches: list = []
        for mod in self.TIMED_MODULES:
            p = mock.patch.object(m[mod], "time", self.clock)
            p.start()
            self.patches.append(p)
        lease = shape.lease_ticks * TICK_SECONDS
        try:
            self.P = self._scheduler(vllm_config("kv_producer", lease, shape.prefill_blocks, self.CONNECTOR),
                                     shape.prefill_blocks)
            # + the cached prefix; V11 pull (#50558): a second uncached block per request for the appended token
            dblocks = shape.decode_blocks * (2 if shape.appended_token else 1) + (1 if shape.prefix_hit else 0)
            self.D = self._scheduler(vllm_config("kv_consumer", lease, dblocks, self.CONNECTOR,
                                                 async_scheduling=shape.async_scheduling,
                                                 prefix_caching=shape.prefix_hit), dblocks)
            self._workers(lease)
        except BaseException:
            self.close()
            raise
        self.p_tag = [0] * (shape.prefill_blocks + 1)  # block id -> tag (0: unwritten)
        self.d_tag = [0] * (max(shape.decode_blocks + 2, dblocks + 1))
        self.slots = [_Slot() for _ in range(self.R)]
        self.prefix_block: int | None = None  # V11: decode's cached prefix block
        self.block_hasher = None  # V11: the block hasher of decode's requests
        self.hb_packaged = False  # decode's scheduler packaged heartbeats in this tick
        self.stalled = False
        self.on_read_posted: list = []  # hooks (decode's request id, ReqMeta): where the worker posts
        self.in_flight: dict[int, tuple] = {}  # async: slot -> (step N+1's scheduler output, the blocks it writes)
        self.hung: set[int] = set()  # slots whose READ hung after moving its data (read_may_hang)
        if shape.prefix_hit:
            self._warm_prefix()

    # -- construction -----------------------------------------------------------------------
    def _scheduler(self, vc, blocks: int):
        m = self.m
        ki = m["kv_cache_interface"]
        spec = ki.FullAttentionSpec(block_size=vc.cache_config.block_size, num_kv_heads=2, head_size=32,
                                    dtype=m["torch"].float32)
        kcc = ki.KVCacheConfig(num_blocks=blocks + 1, kv_cache_tensors=[],
                               kv_cache_groups=[ki.KVCacheGroupSpec(["layer0"], spec)])
        cls = (m["async_scheduler"].AsyncScheduler if vc.scheduler_config.async_scheduling
               else m["scheduler"].Scheduler)
        return cls(vllm_config=vc, kv_cache_config=kcc,
                   structured_output_manager=m["structured_output"].StructuredOutputManager(vc),
                   block_size=vc.cache_config.block_size, log_stats=False)

    def _workers(self, lease: int) -> None:
        """The worker-side objects the harness drives (pull: prefill's lease bookkeeping; V16:
        a second prefill rank's, with its own stand-in agent)."""
        self.agent = _Agent()
        self.pw = self._prefill_worker(lease)
        self.extra_pws: list = []
        self.rank_reported: dict[str, set[int]] = defaultdict(set)
        if self.shape.mla:
            self.agent_mla = _Agent()
            self.pw_mla = self._prefill_worker(lease)
            self.pw_mla.nixl_wrapper = self.agent_mla
            self.extra_pws = [self.pw_mla]

    def _prefill_worker(self, lease: int):
        """``NixlPullConnectorWorker`` without ``__init__``: the attributes ``__init__`` sets
        (base_worker.py) for ``start_load_kv``'s prefill part, ``_get_new_notifs``,
        ``_handle_heartbeat`` and ``_reap_expired_send_leases``."""
        import queue

        m = self.m

        w = object.__new__(worker_class("pull"))
        w._reqs_to_send = {}
        w._reqs_to_process = set()
        w._replicated_pcp_done_sending = set()
        w._ready_requests = queue.Queue()
        w._recving_metadata = {}
        w.pcp_rank, w.pcp_dcp_sharded = 0, False
        w.consumer_notification_counts_by_req = defaultdict(int)
        w.expected_consumer_notifications_by_req = {}
        w.xfer_stats = m["stats"].NixlKVConnectorStats()
        w._lease_extension = lease * 2 // 3
        w.transfer_topo = object()  # asserted not None by _get_new_notifs; not read on prefill
        w.nixl_wrapper = self.agent
        return w

    # -- helpers ------------------------------------------------------------------------------
    def pid(self, r: int) -> str:
        """Prefill's request id of slot ``r``: the scenario's, or ``R{r}``."""
        return self.shape.ids[r][0] if self.shape.ids else f"R{r}"

    def did(self, r: int) -> str:
        """Decode's request id of slot ``r``: the scenario's, or ``d-R{r}``."""
        return self.shape.ids[r][1] if self.shape.ids else f"d-R{r}"

    def origin(self, r: int) -> int:
        """The slot whose ``kv_transfer_params`` slot ``r`` carries (V9: a replay's is another's)."""
        return self.shape.origin[r] if self.shape.origin else r

    def slot_of(self, did: str) -> int:
        """The slot of decode's request id ``did``."""
        return next(r for r in range(self.R) if self.did(r) == did)

    def _prompt(self, rid: str) -> list[int]:
        """The prompt of request ``rid``: one block of ``PROMPT_TOKENS`` tokens, or (V11) the
        shared prefix block and a suffix block of the request's own tokens."""
        if not self.shape.prefix_hit:
            return list(range(1, PROMPT_TOKENS + 1))
        r = next(r for r in range(self.R) if rid in (self.pid(r), self.did(r)))
        appended = [99] if self.shape.appended_token and rid == self.did(r) else []  # #50558: decode's only
        return _PREFIX + [100 + 40 * r + i for i in range(BLOCK_SIZE)] + appended

    def _warm_prefix(self) -> None:
        """V11: a local request on decode computes the shared prefix block, which stays in
        decode's prefix cache (free, evictable) when it finishes.  Decode's requests carry the
        block hasher ``EngineCore`` gives them (``get_request_block_hasher``, core.py:219-230)."""
        import importlib

        m = self.m
        utils = importlib.import_module("vllm.v1.core.kv_cache_utils")
        hash_fn = importlib.import_module("vllm.utils.hashing").get_hash_fn_by_name(
            self.D.vllm_config.cache_config.prefix_caching_hash_algo)
        utils.init_none_hash(hash_fn)
        self.block_hasher = utils.get_request_block_hasher(BLOCK_SIZE, hash_fn)
        sp = m["sampling_params"].SamplingParams(max_tokens=1, temperature=0.0)
        self.D.add_request(m["request"].Request(request_id="warm-prefix", prompt_token_ids=_PREFIX + [1],
                                                sampling_params=sp, pooling_params=None,
                                                block_hasher=self.block_hasher))
        blocks: list[int] = []
        self._step(self.D, after_schedule=lambda so: blocks.extend(self._blocks(self.D, "warm-prefix")))
        if "warm-prefix" in self.D.requests or not blocks:
            raise HarnessError("decode's prefix-warming request did not run")
        self.prefix_block = blocks[0]

    def kv_blocks(self, did: str) -> list[int]:
        """Decode's blocks of ``did`` the transfer fills (V11: not the cached prefix block; with a
        proxy-appended token, #50558, only the first uncached one, the suffix slot the model tracks)."""
        blocks = [b for b in self._blocks(self.D, did) if b != self.prefix_block]
        return blocks[:1] if self.shape.appended_token else blocks

    def decode_free(self) -> int:
        """Free decode blocks, the cached prefix block (V11) not counted while unreferenced."""
        pool = self.D.kv_cache_manager.block_pool
        free = pool.get_num_free_blocks()
        if self.prefix_block is not None and pool.blocks[self.prefix_block].ref_cnt == 0:
            free -= 1
        if self.shape.appended_token:  # #50558: two vLLM blocks per model block (every request takes both)
            if free % 2:
                raise HarnessError(f"decode has {free} free blocks with two per request")
            free //= 2
        return free

    def _request(self, rid: str, params: dict, decode: bool = False):
        m = self.m
        if decode and self.shape.async_scheduling:
            # a request that stops on a sampled token (7, the token every step samples) before
            # max_tokens: the async scheduler schedules step N+1 with it (for max_tokens=1 it
            # knows the request is done and does not)
            sp = m["sampling_params"].SamplingParams(max_tokens=2, temperature=0.0, stop_token_ids=[7])
        else:
            sp = m["sampling_params"].SamplingParams(max_tokens=1, temperature=0.0)
        hasher = self.block_hasher if decode and self.shape.prefix_hit else None
        req = m["request"].Request(request_id=rid, prompt_token_ids=self._prompt(rid),
                                   sampling_params=sp, pooling_params=None, block_hasher=hasher)
        req.kv_transfer_params = params
        return req

    def _step(self, sched, finished_sending=(), finished_recving=(), after_schedule=None):
        """One engine step: ``schedule()``, a fabricated ``ModelRunnerOutput`` (one token per
        scheduled request) with the worker's ``KVConnectorOutput``, ``update_from_output``.
        ``after_schedule(so)`` sees the step's output before the update (as the workers do).
        Returns (scheduler output, engine core outputs)."""
        m = self.m
        so = sched.schedule()
        if after_schedule is not None:
            after_schedule(so)
        kv = m["outputs"].KVConnectorOutput(finished_sending=set(finished_sending) or None,
                                            finished_recving=set(finished_recving) or None)
        return so, sched.update_from_output(so, self._runner_output(so, kv))

    def _runner_output(self, so, kv=None):
        """The fabricated ``ModelRunnerOutput`` of a step: token 7 sampled for each scheduled request."""
        ids = list(so.num_scheduled_tokens)
        return self.m["outputs"].ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                                   sampled_token_ids=[[7] for _ in ids], kv_connector_output=kv)

    def _blocks(self, sched, rid: str) -> list[int]:
        if rid not in sched.requests:
            return []
        return [b for group in sched.kv_cache_manager.get_block_ids(rid) for b in group]

    def _decode_step(self, finished_recving=()):
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        return self._step(self.D, finished_recving=finished_recving, after_schedule=self._decode_meta)

    def _decode_meta(self, so) -> None:
        """What decode's worker takes from a step's metadata.  With a step N+1 in flight
        (async), a step that schedules tokens would be step N+2, processed after N+1 in the real
        batch queue: the harness cannot order that (one model step at a time) and stops."""
        if self.in_flight and so.total_num_scheduled_tokens > 0:
            raise HarnessError("a decode step schedules tokens while step N+1 is in flight (not supported)")
        meta = so.kv_connector_metadata
        for rid, rm in meta.reqs_to_recv.items():
            self.slots[self.slot_of(rid)].recv = rm
        if meta.heartbeat_by_engine:
            self.hb_packaged = True
        self._decode_worker_step(so)

    def _decode_worker_step(self, so) -> None:
        """What decode's worker does with a step's metadata (pull: nothing is run)."""

    def _prefill_worker_step(self, so) -> None:
        for w in [self.pw, *self.extra_pws]:
            w.start_load_kv(so.kv_connector_metadata)

    def _free_on_prefill(self, done: set[str], rank: int | None = None) -> None:
        """A prefill step with ``finished_sending``.  V16 (two ranks): a request goes into it once
        both ranks reported it (``rank``: which one reports ``done`` now; None: both), as
        ``KVOutputAggregator`` does."""
        if self.shape.mla:
            ready = set()
            for pid in done:
                self.rank_reported[pid].update((0, 1) if rank is None else (rank,))
                if self.rank_reported[pid] == {0, 1}:
                    ready.add(pid)
            done = ready
            if not done:
                return
        self._step(self.P, finished_sending=done, after_schedule=self._prefill_worker_step)

    # -- prefill ------------------------------------------------------------------------------
    def prefill_request_finished(self, r: int) -> None:
        """``add_request`` with ``do_remote_decode``, one step (allocation, the forward pass
        writes the tag, ``max_tokens=1`` finishes the request: ``request_finished`` keeps its
        blocks and starts the lease), one more step (``build_connector_meta`` ships
        ``reqs_to_send`` to the worker)."""
        pid = self.pid(r)
        self.P.add_request(self._request(pid, {"do_remote_decode": True}))
        so = self.P.schedule()
        if pid not in so.num_scheduled_tokens:
            raise Divergent(f"vLLM's prefill scheduler did not schedule {pid} (no free block?)")
        blocks = self._blocks(self.P, pid)
        for b in blocks:
            self.p_tag[b] = r + 1
        if self.shape.prefix_hit:  # V11: the first block holds the prefix (the model's code R + 1 + r)
            self.p_tag[blocks[0]] = self.R + 1 + r
        self._prefill_worker_step(so)
        m = self.m
        mro = m["outputs"].ModelRunnerOutput(req_ids=[pid], req_id_to_index={pid: 0}, sampled_token_ids=[[7]])
        outs = self.P.update_from_output(so, mro)
        for eco in outs.values():
            for o in eco.outputs:
                if o.request_id == pid and o.kv_transfer_params:
                    self.slots[r].params = dict(o.kv_transfer_params)
        if self.slots[r].params is None:
            raise Divergent(f"vLLM's prefill returned no kv_transfer_params for {pid}")
        if self.shape.turn2:
            # V14: the holder's request_finished exports its TTL deadline (pull_scheduler.py:266-270,
            # the is_d_node branch: blocks_expiry_time = _reqs_need_send[req]); the harness's holder
            # is a producer, so the harness copies that deadline into the parameters as it does
            self.slots[r].params["remote_blocks_expiry_time"] = \
                self.P.connector.connector_scheduler._reqs_need_send[pid]
        self._step(self.P, after_schedule=self._prefill_worker_step)

    def prefill_get_new_notifs(self, r: int) -> None:
        """Prefill's worker polls NIXL and gets ``r``'s READ notification (``_get_new_notifs``);
        a request it reports done is freed in the next prefill step."""
        msg = f"{self.pid(self.origin(r))}:1".encode()  # a replay's READ names the replayed request (V9)
        if msg not in self.agent.inbox:
            raise HarnessError(f"no notification of {self.pid(r)} is on its way")
        self.agent.inbox.remove(msg)
        self.agent.deliver = [msg]
        done = self.pw._get_new_notifs()
        if done:
            self._free_on_prefill(done, rank=0)

    def prefill_reap_expired_lease(self, r: int) -> None:
        """``_reap_expired_send_leases`` for ``r`` (the other leases are set aside for the call:
        the model reaps one request per step), then a prefill step frees what it reported."""
        pid = self.pid(r)
        aside = {k: v for k, v in self.pw._reqs_to_send.items() if k != pid}
        for k in aside:
            del self.pw._reqs_to_send[k]
        done: set[str] = set()
        try:
            self.pw._reap_expired_send_leases(done)
        finally:
            self.pw._reqs_to_send.update(aside)
        if done != {pid}:
            raise Divergent(f"vLLM's _reap_expired_send_leases reported {sorted(done)}, not {pid} "
                            f"(deadline {self.pw._reqs_to_send.get(pid)}, now {self.clock.now})")
        self._free_on_prefill(done)

    def prefill_abort_finished(self, r: int) -> None:
        """The client's abort reaches prefill after the request finished there:
        ``finish_requests(..., FINISHED_ABORTED)``."""
        self.P.finish_requests([self.pid(r)], self.m["request"].RequestStatus.FINISHED_ABORTED)

    # -- decode ---------------------------------------------------------------------------------
    def decode_on_new_request(self, r: int) -> None:
        """``add_request`` with prefill's ``kv_transfer_params`` and one decode step: the async
        load parks the request in ``WAITING_FOR_REMOTE_KVS`` with its block allocated."""
        s = self.slots[r]
        params = self.slots[self.origin(r)].params  # a replay (V9) carries another request's
        if params is None:
            raise HarnessError(f"R{r} reaches decode before prefill finished it")
        self.D.add_request(self._request(self.did(r), dict(params), decode=True))
        self._decode_step()
        status = self.D.requests[self.did(r)].status
        if status.name != "WAITING_FOR_REMOTE_KVS" or s.recv is None:
            raise Divergent(f"vLLM's decode put {self.did(r)} in {status.name}, not WAITING_FOR_REMOTE_KVS "
                            "with a reqs_to_recv entry")
        if self.cached(r):  # V13: the block decode parked it with holds its KV already (the local hit)
            for b in self.kv_blocks(self.did(r)):
                self.d_tag[b] = r + 1

    def decode_start_load_kv(self, r: int) -> None:
        """Decode's worker posts the READ of the ``reqs_to_recv`` entry (``_read_blocks``); the
        ``on_read_posted`` hooks see the entry (decode's worker is not run, so a recorder of
        ``start_load_kv`` learns of the post here).  V16: 0.33.0's own ``_read_blocks_for_req``
        runs on an MLA decode worker (:attr:`mla_dw`), whose READ is this one and whose
        notify-only notification goes to prefill's rank 1.  V14: the turn-2 expiry check runs first."""
        if self.shape.turn2 and self._turn2_read_expired(r):
            raise Divergent(f"vLLM's _is_turn2_read_expired declines the READ of {self.did(r)} "
                            f"(deadline {self.slots[r].recv.remote.blocks_expiry_time}, now {self.clock.now})")
        if self.shape.mla:
            self._mla_read_blocks_for_req(r)
        self.slots[r].read = "posted"
        for hook in self.on_read_posted:
            hook(self.did(r), self.slots[r].recv)

    def nixl_read_take_data(self, r: int) -> None:
        """The READ moves its data: each destination block gets its source block's tag now.  V11
        (pull, a prefix hit): the block lists are paired by 0.33.0's own ``_apply_prefix_caching``,
        as ``_read_blocks`` does (pull_worker.py:479-494; a non-Mamba worker, one group)."""
        s = self.slots[r]
        local, remote = s.recv.local_block_ids, s.recv.remote.block_ids
        if self.shape.prefix_hit:
            local, remote = type(self.pw)._apply_prefix_caching(
                SimpleNamespace(_has_mamba=False), decode_block_ids=local, prefill_block_ids=remote,
                decode_physical_per_logical=1, prefill_physical_per_logical=1)
        src = [b for g in remote for b in g]
        dst = [b for g in local for b in g]
        for a, b in zip(src, dst):
            self.d_tag[b] = self.p_tag[a]
        s.read = "taken"

    def nixl_read_complete(self, r: int) -> None:
        """The READ completes; its ``notif_msg`` ``"{remote_request_id}:{n}"`` is on its way."""
        s = self.slots[r]
        s.read = "done"
        self.agent.inbox.append(f"{s.recv.remote.request_id}:1".encode())

    def decode_finished_recving(self, r: int) -> None:
        """A decode step with ``finished_recving``; a loading request then runs one step (the
        harness records the tag of its block: what decode computed on) and finishes
        (``max_tokens=1``), an aborted one is freed."""
        did = self.did(r)
        req = self.D.requests.get(did)
        loading = req is not None and req.status.name == "WAITING_FOR_REMOTE_KVS"
        so, outs = self._decode_step(finished_recving=self._finished_recving(r))
        if loading and self.shape.async_scheduling:
            self._run_async(r)
        elif loading:
            blocks = self.kv_blocks(did)
            so, outs = self._decode_step()
            if did not in so.num_scheduled_tokens:
                raise Divergent(f"vLLM's decode did not run {did} after finished_recving")
            s = self.slots[r]
            s.seen = self._kind([self.d_tag[b] for b in blocks], r)
            s.outcome = "success"

    def _run_async(self, r: int) -> None:
        """Async scheduling (``AsyncScheduler``): step N is scheduled with ``r``, then step N+1
        (with an output placeholder for ``r``) before step N's output is processed; step N
        samples the stop token, so ``update_from_output`` finishes ``r`` with step N+1 still in
        flight, and ``_free_request_blocks`` decides (``_request_blocks_can_be_freed``)."""
        did, s = self.did(r), self.slots[r]
        blocks = self.kv_blocks(did)
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        step_n = self.D.schedule()
        self._decode_meta(step_n)
        if did not in step_n.num_scheduled_tokens:
            raise Divergent(f"vLLM's decode did not run {did} after finished_recving")
        step_n1 = self.D.schedule()  # the batch queue schedules the next step before N's output
        self.in_flight[r] = (step_n1, blocks)
        if did not in step_n1.num_scheduled_tokens:
            raise Divergent(f"vLLM's async scheduler did not schedule {did} again in step N+1")
        s.seen = self._kind([self.d_tag[b] for b in blocks], r)
        self.D.update_from_output(step_n, self._runner_output(step_n))
        if did in self.D.requests:
            raise Divergent(f"vLLM's decode did not finish {did} on its stop token")
        s.outcome = "success"

    def decode_update_from_output(self, r: int) -> None:
        """Step N+1's GPU write of ``r``'s KV lands in the blocks ``r`` had (the harness writes
        ``r``'s tag there, whoever holds them now), then the real ``update_from_output`` of step
        N+1 (``processed_step_seq``, ``_drain_deferred_frees``)."""
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        if r not in self.in_flight:
            raise HarnessError(f"no step N+1 of {self.did(r)} is in flight")
        step_n1, blocks = self.in_flight.pop(r)
        for b in blocks:
            self.d_tag[b] = r + 1
        self.D.update_from_output(step_n1, self._runner_output(step_n1))

    def _finished_recving(self, r: int) -> set[str]:
        """What decode's worker reports in ``finished_recving`` when ``r``'s READ is done (pull:
        ``r``, as ``_pop_done_transfers`` does once no READ handle remains).  V13: a full local
        hit's load is what the real decode worker's ``_pop_done_transfers`` reports."""
        if self.cached(r):
            done, failed = self.notify_dw._pop_done_transfers(self.notify_dw._recving_transfers)
            if self.did(r) not in done or failed:
                raise Divergent(f"vLLM's decode worker reports {sorted(done)} done, {sorted(failed)} failed: "
                                f"not {self.did(r)}'s notify-only load")
            return done
        return {self.did(r)}

    # -- V16: MLA's notify-only notification to the prefill rank decode does not READ (#36958) -----
    @property
    def mla_dw(self):
        """Decode's ``NixlPullConnectorWorker`` of an MLA model (``use_mla``) with one TP rank
        against prefill's two (``tp_ratio`` -2), created without ``__init__`` on first use: the
        attributes ``_read_blocks_for_req`` reads, a one-source-rank TP plan
        (``local_consumers`` 1), prefill's two ranks as remote agents, and ``_read_blocks``
        replaced by a recorder (the READ itself is the harness's)."""
        if getattr(self, "_mla_dw", None) is None:
            import types

            m = self.m
            harness = self

            class MlaDecodeWorker(worker_class("pull")):
                """The real class; ``_read_blocks`` records, ``__del__`` is not run."""

                def _read_blocks(self, read_spec, **kw):
                    self.reads.append((read_spec.remote_rank, kw["remote_request_id"]))
                    return True

            class Wrapper:
                """Decode's stand-in NIXL agent: ``send_notif`` reaches the named prefill rank's agent."""

                def send_notif(self, agent_name, notif_msg):
                    (harness.agent if agent_name == "p0" else harness.agent_mla).inbox.append(notif_msg)

            info = types.SimpleNamespace(remote_tp_size=2, remote_dcp_size=1, remote_block_size=BLOCK_SIZE,
                                         remote_physical_blocks_per_logical=1)
            w = object.__new__(MlaDecodeWorker)
            w.reads = []
            w.transfer_topo = types.SimpleNamespace(get_engine_info=lambda eid: info, tp_ratio=lambda tp: -tp,
                                                    block_size_ratio=lambda size: 1)
            w.tp_mappings = defaultdict(lambda: types.SimpleNamespace(all_source_ranks=[0], source_ranks_per_group=[{0}],
                                                                      local_consumers=1))
            w._remote_agents = defaultdict(lambda: {(0, 0): "p0", (0, 1): "p1"})
            w.dst_region_group_ids = defaultdict(lambda: [0])
            w.region_group_ids = [0]
            w.dst_xfer_side_handles = defaultdict(lambda: {0: 0, 1: 1})
            w.src_xfer_handles_by_block_size = {BLOCK_SIZE: 0}
            w._mixed_mem_types = False
            w._invalid_remote_engines = set()
            w._remote_registration_generations = {}
            w._engine_last_active = {}
            w._bidirectional_kv_xfer_enabled = False
            w._recving_transfers = {}
            w._physical_blocks_per_logical_kv_block = 1
            w.use_mla, w._has_mamba, w.dcp_size = True, False, 1
            w.nixl_wrapper = Wrapper()
            w.xfer_stats = m["stats"].NixlKVConnectorStats()
            self._mla_dw = w
        return self._mla_dw

    def _mla_read_blocks_for_req(self, r: int) -> None:
        """0.33.0's ``_read_blocks_for_req`` for ``r``'s ``reqs_to_recv`` entry: one READ from
        prefill's rank 0, then the notify-only ``"{meta.remote.request_id}:1"`` to rank 1."""
        meta = self.slots[r].recv
        w = self.mla_dw
        meta.local_physical_block_ids = meta.local_block_ids
        w._remote_registration_generations[meta.remote.engine_id] = meta.remote.registration_generation
        w._remote_agents[meta.remote.engine_id]  # handshake done: prefill's two ranks are known agents
        before = len(w.reads)
        w._read_blocks_for_req(self.did(r), meta)
        if [rank for rank, _ in w.reads[before:]] != [0]:
            raise Divergent(f"vLLM's _read_blocks_for_req posted READs from ranks {w.reads[before:]}, not rank 0 only")

    def prefill_get_new_notifs_mla_rank(self, r: int) -> None:
        """Prefill's rank 1 polls NIXL and gets decode's notify-only notification for ``r``
        (whatever id it names) through its real ``_get_new_notifs``; a request it reports is
        freed once rank 0 reported it too."""
        msgs = [x for x in self.agent_mla.inbox if x.decode().rsplit(":", 1)[0] in (self.pid(r), self.did(r))]
        if not msgs:
            raise HarnessError(f"no notification of {self.pid(r)} is on its way to prefill's rank 1")
        self.agent_mla.inbox.remove(msgs[0])
        self.agent_mla.deliver = [msgs[0]]
        done = self.pw_mla._get_new_notifs()
        if done:
            self._free_on_prefill(done, rank=1)

    def mla_notified(self) -> tuple[int, ...]:
        """V16: the slots whose notify-only notification to prefill's rank 1 names prefill's id."""
        if not self.shape.mla:
            return ()
        return tuple(r for r in range(self.R) if f"{self.pid(r)}:1".encode() in self.agent_mla.inbox)

    # -- V13: a full local prefix hit (#54714 -> #56640) ------------------------------------------
    def cached(self, r: int) -> bool:
        """Decode holds slot ``r``'s whole KV in its local prefix cache (V13)."""
        return bool(self.shape.cached) and self.shape.cached[r]

    @property
    def notify_dw(self):
        """Decode's ``NixlPullConnectorWorker`` for ``_read_blocks``' notify-only path (V13),
        created without ``__init__`` on first use: ``_recving_transfers``, the stand-in agent's
        ``send_notif`` (it puts the notification on its way to prefill), one remote agent for
        prefill's rank 0, and a ``transfer_topo`` that reports prefill's block size as decode's
        (``block_size_ratio`` 1)."""
        if getattr(self, "_notify_dw", None) is None:
            import types

            m = self.m
            harness = self

            DecodeWorker = worker_class("pull")

            class Wrapper:
                """Decode's stand-in NIXL agent: ``send_notif`` reaches prefill's agent's inbox."""

                def send_notif(self, agent_name, notif_msg):
                    harness.agent.inbox.append(notif_msg)

            topo = types.SimpleNamespace(get_engine_info=lambda eid: types.SimpleNamespace(remote_block_size=BLOCK_SIZE),
                                         block_size_ratio=lambda size: 1)
            w = object.__new__(DecodeWorker)
            w._recving_transfers = {}
            w._remote_agents = defaultdict(lambda: {(0, 0): "prefill"})
            w.transfer_topo = topo
            w.nixl_wrapper = Wrapper()
            w.xfer_stats = m["stats"].NixlKVConnectorStats()
            self._notify_dw = w
        return self._notify_dw

    def decode_read_blocks_notify_only(self, r: int) -> None:
        """V13: decode's worker runs 0.33.0's ``_read_blocks`` for the ``reqs_to_recv`` entry the
        real decode scheduler emitted (its ``remote.request_id``, its ``awaiting_kvs``: true,
        the request is parked) with an empty local block list (the harness's: 0.33.0's scheduler
        gives this parked request one unhashed block; #54714 saw parked requests with none):
        the notify-only path sends prefill ``"{remote_request_id}:1"`` and (#56640) records an
        empty transfer list, which ``_pop_done_transfers`` reports at
        :meth:`decode_finished_recving`."""
        s = self.slots[r]
        if s.recv is None:
            raise HarnessError(f"{self.did(r)} has no reqs_to_recv entry")
        if not s.recv.awaiting_kvs:
            raise Divergent(f"vLLM's decode scheduler did not park {self.did(r)} (awaiting_kvs false)")
        spec = self.m["tp_mapping"].ReadSpec(remote_rank=0, local_block_ids=[], remote_block_ids=[])
        posted = self.notify_dw._read_blocks(read_spec=spec, dst_engine_id=s.recv.remote.engine_id, request_id=self.did(r),
                                      remote_request_id=s.recv.remote.request_id, local_xfer_side_handle=0,
                                      local_dram_handle=None, remote_xfer_side_handle=0, expected_consumers=1,
                                      awaiting_kvs=s.recv.awaiting_kvs)
        if not posted:
            raise Divergent(f"vLLM's _read_blocks routed {self.did(r)} to failure reporting")
        if self.did(r) in self.notify_dw._recving_transfers:
            s.read = "done"

    def notify_only_reported(self) -> tuple[int, ...]:
        """V13: the full local hits whose notify-only load decode's worker recorded (an empty
        transfer list in ``_recving_transfers``, reported by the next ``_pop_done_transfers``)."""
        if getattr(self, "_notify_dw", None) is None:
            return ()
        return tuple(r for r in range(self.R) if self.cached(r) and self.did(r) in self._notify_dw._recving_transfers)

    def prefill_notified(self) -> tuple[int, ...]:
        """The slots whose notification (``"{req}:1"``) waits in prefill's agent (pull)."""
        return tuple(r for r in range(self.R) if f"{self.pid(r)}:1".encode() in self.agent.inbox)

    def stranded(self, r: int) -> bool:
        """No transfer into ``r``'s held decode block can come any more (pull: never so, decode's
        worker posts the READ of an aborted load all the same)."""
        return False

    def _kind(self, tags: list[int], r: int) -> str:
        if all(t == self.origin(r) + 1 for t in tags):
            return "own"
        owner = [(t - 1) % self.R for t in tags]  # a prefix tag R + 1 + s is slot s's too
        if any(t and self.shape.tenants[o] != self.shape.tenants[r] for t, o in zip(tags, owner)):
            return "cross_tenant"
        return "foreign"

    def decode_abort(self, r: int) -> None:
        """The client aborts on decode: ``finish_requests(..., FINISHED_ABORTED)``."""
        self.D.finish_requests([self.did(r)], self.m["request"].RequestStatus.FINISHED_ABORTED)
        self.slots[r].outcome = "aborted"

    def decode_reject_request(self, r: int) -> None:
        """Decode's serving layer rejects ``r`` before admission: ``notify_kv_transfer_request_
        rejected`` submits an ``abort_immediately`` request with prefill's
        ``kv_transfer_params``, and ``EngineCore.add_request`` (core.py:559) adds it and at once
        aborts it (``finish_requests``; the engine core object is not run, these are its two
        calls).  The next decode step ships what ``request_finished`` seeded (#41269: an empty
        recv in ``reqs_to_recv``); decode's worker, not run, would find no local block and send
        prefill the notify-only ``"{remote_request_id}:1"`` of ``_read_blocks``: the harness
        puts that notification on its way."""
        s = self.slots[r]
        if s.params is None:
            raise HarnessError(f"R{r} reaches decode before prefill finished it")
        req = self._request(self.did(r), dict(s.params), decode=True)
        req.abort_immediately = True
        self.D.add_request(req)
        self.D.finish_requests([self.did(r)], self.m["request"].RequestStatus.FINISHED_ABORTED)
        s.outcome = "aborted"
        self._decode_step()
        self._notify_rejected(s)

    def _notify_rejected(self, s: _Slot) -> None:
        """Pull: decode's worker (not run) finds the seeded recv's local block list empty and
        sends prefill the notify-only notification of ``_read_blocks``."""
        if s.recv is not None and not any(len(g) for g in s.recv.local_block_ids):
            self.agent.inbox.append(f"{s.recv.remote.request_id}:1".encode())

    def decode_send_heartbeats(self) -> None:
        """A decode step; the scheduler must have packaged heartbeats in this tick
        (``build_connector_meta``, throttled by ``kv_lease_duration // 6``).  The ``HB:``
        notification naming the requests its heartbeat tracking holds now
        (``_heartbeat_by_engine``, as ``_send_heartbeats`` formats it) reaches prefill's worker,
        whose ``_get_new_notifs`` applies it (``_handle_heartbeat``)."""
        self._decode_step()
        if not self.hb_packaged:
            raise Divergent("vLLM's decode scheduler packaged no heartbeat in this tick")
        tracking = self.D.connector.connector_scheduler._heartbeat_by_engine
        msgs = [("HB:" + ",".join(sorted(info.req_ids))).encode() for info in tracking.values()]
        if not msgs:
            raise Divergent("vLLM's decode scheduler tracks no request to heartbeat")
        self._deliver_heartbeats(msgs)

    def _deliver_heartbeats(self, msgs: list[bytes]) -> None:
        """Prefill's worker gets the ``HB:`` notifications and applies them (``_get_new_notifs``)."""
        self.agent.deliver = msgs
        done = self.pw._get_new_notifs()
        if done:
            raise HarnessError(f"a heartbeat completed {sorted(done)}")

    def decode_stall(self) -> None:
        """Decode's engine loop stops stepping."""
        self.stalled = True

    def decode_resume(self) -> None:
        """Decode's engine loop steps again."""
        self.stalled = False

    def clock_tick(self) -> None:
        """The fake clock moves one tick."""
        self.clock.now += TICK_SECONDS
        self.hb_packaged = False

    # -- V2 (#58222): the reaper before the fix; a hung READ ------------------------------------------
    def prefill_reap_expired_send_leases_in_order(self) -> None:
        """One pass of the reaper before #58222, run as 0.33.0 runs it: the real
        ``_reap_expired_send_leases`` on the whole ``_reqs_to_send``.  The model's pass reports
        the expired entries in insertion order up to the first live one (0.27.1's loop: "exit
        early"); when 0.33.0's scan reports another set, its fix acts here and the step
        diverges.  What it reports a prefill step frees."""
        now = self.clock.now
        in_order: list[str] = []
        for pid, deadline in self.pw._reqs_to_send.items():
            if now < deadline:
                break
            in_order.append(pid)
        done: set[str] = set()
        self.pw._reap_expired_send_leases(done)
        if done != set(in_order):
            raise Divergent(f"vLLM 0.33.0's _reap_expired_send_leases reported {sorted(done)}; the reaper "
                            f"before #58222 stops at the first live lease and reports {sorted(in_order)}")
        if done:
            self._free_on_prefill(done)

    def nixl_read_hangs(self, r: int) -> None:
        """The READ, its data moved, never completes: the stand-in agent never reports it done and
        never delivers its notification (decode's worker is not run: no ``finished_recving``
        will be reported for it)."""
        if self.slots[r].read != "taken":
            raise HarnessError(f"the READ of {self.did(r)} has not moved its data")
        self.hung.add(r)

    # -- V14 (#47021): the turn-2 readback's expiry check -------------------------------------------
    def _turn2_read_expired(self, r: int) -> bool:
        """The real ``_is_turn2_read_expired`` (pull_worker.py:127-136) of the reader's worker,
        run on the ``reqs_to_recv`` entry the real reader scheduler emitted (its
        ``remote.blocks_expiry_time`` parsed from the parameters, metadata.py:340), with the
        handshake's clock offset (``turn2_offset_error`` ticks later than the truth) and the fake
        clock."""
        meta = self.slots[r].recv
        if meta is None:
            raise HarnessError(f"{self.did(r)} has no reqs_to_recv entry")
        w = getattr(self, "rw", None)
        if w is None:
            w = self.rw = object.__new__(worker_class("pull"))
            w._engine_clock_offset = {}
        w._engine_clock_offset[meta.remote.engine_id] = -float(self.shape.turn2_offset_error * TICK_SECONDS)
        if not any(len(g) for g in meta.local_physical_block_ids):
            meta.local_physical_block_ids = meta.local_block_ids  # start_load_kv's, at a ratio of one
        return bool(w._is_turn2_read_expired(meta))

    def decode_decline_turn2_read(self, r: int) -> None:
        """The reader's ``_read_blocks_for_req`` declines the READ (``_is_turn2_read_expired``,
        real) and ``_handle_failed_transfer`` reports the request in ``failed_recving`` (and
        ``finished_recving``, as ``get_transfer_results`` does with ``_recv_failures``); the real
        scheduler (``_handle_failed_recving``, ``kv_load_failure_policy = "fail"``) ends it in
        ``FINISHED_ERROR``.  Nothing goes to the holder."""
        did = self.did(r)
        if not self._turn2_read_expired(r):
            raise Divergent(f"vLLM's _is_turn2_read_expired lets the READ of {did} through "
                            f"(deadline {self.slots[r].recv.remote.blocks_expiry_time}, now {self.clock.now})")
        if self.stalled:
            raise Divergent("the harness was asked to step a stalled decode engine")
        kv = self.m["outputs"].KVConnectorOutput(finished_recving={did}, failed_recving={did})
        so = self.D.schedule()
        self._decode_meta(so)
        outs = self.D.update_from_output(so, self._runner_output(so, kv))
        errors = [o for eco in outs.values() for o in eco.outputs
                  if o.request_id == did and o.finish_reason is not None]
        if did in self.D.requests or not errors:
            raise Divergent(f"vLLM's decode did not end {did} on its failed load")
        self.slots[r].read = "declined"
        self.slots[r].outcome = "error"

    # -- what the code did ------------------------------------------------------------------------
    def observe(self):
        """The code's state in the model's terms (:class:`~.observation.Observation`)."""
        from kvproof.spec.vllm.conform.observation import code_observation

        return code_observation(self)

    def close(self) -> None:
        """Undo the clock patches."""
        for p in reversed(self.patches):
            p.stop()
        self.patches.clear()
