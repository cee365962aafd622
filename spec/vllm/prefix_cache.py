"""vLLM 0.33.0's decode-side prefix cache under a KV connector: one KV block shared by live
requests with a reference count, prefix-cache hits, eviction, and the recovery of a failed KV
load (``kv_load_failure_policy``).  The spec ``vllm-prefix-cache`` of the ``vllm`` protocol
(:class:`VllmPrefixCache`), built from the same scenario tables as ``vllm`` with
``[engine] prefix_sharing = true``.

Every request of the scenario has the same prompt prefix: its KV, the same for all of them, fills
one block ``X`` of decode's pool (vLLM: the prefix's first full block, a ``KVCacheBlock`` with a
``block_hash``).  The code paths (files under ``vllm/v1/core/`` and ``vllm/distributed/kv_transfer/
kv_connector/v1/nixl/``, 0.33.0):

* ``Scheduler.schedule`` -> ``kv_cache_manager.get_computed_blocks`` looks the prefix's hash up:
  a hit ``touch``-es ``X`` (``ref_cnt += 1``, out of the free queue, block_pool.py:792-808) and
  counts its tokens as computed; a miss allocates ``X`` from the free queue
  (``_maybe_evict_cached_block`` drops the hash of whatever it cached) for the connector to
  load (``allocate_slots``); the request then loads only its unhashed blocks
  (``get_unhashed_block_ids``), never ``X`` on a hit.
* An asynchronous load (NIXL) leaves ``X`` uncached until it finished (``delay_cache_blocks``,
  kv_cache_manager.py:611-614), so no other request can hit it meanwhile; a synchronous one
  caches it at allocation and loads it in the forward, before the layer's attention.
* A failed load puts ``X`` in ``invalid_block_ids``; ``_handle_invalid_blocks``
  (scheduler.py:3703-3791) truncates the first affected request's computed tokens at it
  (``recompute``), lets every later request sharing it "still consider this block as
  computed" (3644-3651), evicts it only under ``fail`` (3755-3760), or fails them all.
* A finished request frees its blocks (``free_blocks``: ``ref_cnt -= 1``, at 0 back in the free
  queue with its hash: evictable, still a hit until evicted).

Modelling choices: a request that misses while ``X`` is held but not cached (an asynchronous
load in flight) takes a block of its own for its prefix, which the model does not track
(``private``: its own KV by construction); the first affected request by ``self.running``'s
order is the one that allocated ``X`` (it was scheduled before any request that hit it); a
request's forward and the commit of its output are one step (``max_tokens=1``), and a step whose
load failed commits nothing (``update_from_output`` skips the affected requests).  These actions
are model-only: ``kvproof conform`` does not replay them on the real code.
"""

from __future__ import annotations

from kvproof.model.framework import ConfiguredSpec, action, invariant, witness
from kvproof.model.layout import Domain, Field
from kvproof.spec.vllm.config import Config

__all__ = ["VllmPrefixCache", "PrefixCodes"]

# phase[r]: not scheduled, WAITING_FOR_REMOTE_KVS (an asynchronous load), running, finished
NEW, WAITING, RUNNING, ENDED = range(4)
PHASE_LABELS = ("new", "waiting_for_remote_kvs", "running", "ended")
# pfx[r]: how the request's prefix stands
NONE, LOADING, COMPUTED, RECOMPUTE, AWAIT, PRIVATE = range(6)
PFX_LABELS = ("none", "loading", "computed", "recompute", "await_recompute", "private")
# x_content: what block X holds
UNWRITTEN, PREFIX, OTHER = range(3)
CONTENT_LABELS = ("unwritten", "prefix_kv", "other_prompt_kv")
# x_load: the connector's load of X
IDLE, IN_FLIGHT, FAILED = range(3)
LOAD_LABELS = ("none", "in_flight", "failed")
READ_NONE, READ_OWN, READ_FOREIGN = range(3)
READ_LABELS = ("none", "own_or_identical", "foreign")
OUT_NONE, OUT_SUCCESS, OUT_ERROR = range(3)
OUT_LABELS = ("none", "success", "error")


class PrefixCodes:
    """The domains of one instance: its requests and the reference count's range."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.R = len(cfg.requests)
        self.req = Domain("request", self.R, tuple(f"R{r}" for r in range(self.R)))
        self.ref = Domain("ref_cnt", self.R + 1)


def _fields(k: PrefixCodes) -> list[Field]:
    """Per request its phase, its prefix, whether its block table holds ``X``, what it read and
    got, whether it was recovered; then block ``X``'s reference count, hash, content and load."""
    flag = Domain("flag", 2, ("no", "yes"))

    def en(name, labels):
        return Domain(name, len(labels), labels)

    req = k.req
    return [
        Field("phase", (req,), en("phase", PHASE_LABELS), NEW, "the request's status at decode"),
        Field("pfx", (req,), en("pfx", PFX_LABELS), NONE, "how the request's prefix KV stands"),
        Field("hold", (req,), flag, 0, "the request's block table holds X (one of X's references)"),
        Field("read", (req,), en("read", READ_LABELS), READ_NONE, "what the request's prefix was computed on"),
        Field("outcome", (req,), en("outcome", OUT_LABELS), OUT_NONE, "what the client got"),
        Field("recovered", (req,), flag, 0, "the request was rescheduled by a failed load's recovery"),
        Field("x_ref", (), k.ref, 0, "X's ref_cnt (KVCacheBlock.ref_cnt)"),
        Field("x_hash", (), flag, 0, "X is in the prefix cache under the prefix's hash (a lookup hits it)"),
        Field("x_content", (), en("content", CONTENT_LABELS), OTHER,
              "what X holds (at first another prompt's KV: a freed block keeps its content)"),
        Field("x_load", (), en("x_load", LOAD_LABELS), IDLE, "the connector's load of X"),
    ]


class VllmPrefixCache(ConfiguredSpec):
    """Decode's prefix block ``X`` shared by the scenario's requests (all of one prompt prefix),
    for one :class:`~.config.Config` with ``prefix_sharing``."""

    codes = PrefixCodes
    fields_of = staticmethod(_fields)

    def config_problems(self, cfg: Config) -> list[str]:
        """This spec needs ``[engine] prefix_sharing = true`` and models the pull connector's
        decode side only."""
        if not cfg.engine.prefix_sharing:
            return ["engine.prefix_sharing: the spec vllm-prefix-cache models shared prefix blocks; set it true"]
        if cfg.engine.mode != "pull":
            return ["engine.mode: the spec vllm-prefix-cache models decode's prefix cache in pull mode"]
        return []

    def domain(self, name: str) -> Domain:
        """The one parameter domain, ``req``."""
        return {"req": self.k.req}[name]

    @property
    def sync(self) -> bool:
        """The connector loads synchronously (``sync_kv_load``); else asynchronously (NIXL)."""
        return self.e.sync_kv_load

    @property
    def recompute(self) -> bool:
        """``kv_load_failure_policy = "recompute"``."""
        return self.e.kv_load_failure_policy == "recompute"

    def _holders(self, s):
        """How many requests hold ``X`` (a sum of conditions)."""
        o = s.ops
        total = o.const(0)
        for r in self.k.req:
            total = o.add(total, o.ite(o.eq(s.hold[r], 1), 1, 0))
        return total

    def _release(self, s, n, r: int, when) -> None:
        """``free_blocks`` of ``r``'s ``X`` where ``when`` holds: ``ref_cnt -= 1`` (at 0 ``X`` is
        back in the free queue, keeping its hash)."""
        o = s.ops
        held = o.and_(when, o.eq(s.hold[r], 1))
        n.hold[r] = o.ite(held, 0, s.hold[r])
        return held

    # -- the scheduler -------------------------------------------------------------------------
    @action("decode", "req", fair=True)
    def decode_schedule_new_request(self, s, n, r):
        """``Scheduler.schedule`` takes a waiting request: ``get_computed_blocks`` looks up the
        prefix's hash.  A hit ``touch``-es ``X`` (``ref_cnt += 1``) and counts it computed; a miss
        with ``X`` in the free queue allocates it (``_maybe_evict_cached_block`` drops its old
        hash) for the connector to load: a synchronous load caches it at once, an asynchronous
        one only when it finished (``delay_cache_blocks``), unless ``delay_cache_blocks = false``
        (HYPOTHETICAL); a miss while ``X`` is held uncached takes a block of its own.  An
        asynchronous load parks the request in ``WAITING_FOR_REMOTE_KVS``.  Hazards: a hit on a
        block a load or a recompute is still writing (vLLM issue #49250), a hit on a failed block
        left cached (vLLM PR #26813's poisoning).  With the HYPOTHETICAL
        ``sharers_wait_for_recompute`` a hit on a block another request is to recompute waits for
        that recompute too."""
        o = s.ops
        s.require(o.eq(s.phase[r], NEW))
        hit = o.eq(s.x_hash, 1)
        free = o.and_(o.not_(hit), o.eq(s.x_ref, 0))
        takes = o.or_(hit, free)
        n.hold[r] = o.ite(takes, 1, s.hold[r])
        n.x_ref = o.ite(takes, o.add(s.x_ref, 1), s.x_ref)
        got = COMPUTED
        if self.e.sharers_wait_for_recompute:  # the fix covers a later hit on the block to recompute too
            got = o.ite(o.any_(o.eq(s.pfx[x], RECOMPUTE) for x in self.k.req if x != r), AWAIT, COMPUTED)
        n.pfx[r] = o.ite(hit, got, o.ite(free, LOADING, PRIVATE))
        n.x_load = o.ite(free, IN_FLIGHT, s.x_load)
        cache_now = self.sync or not self.e.delay_cache_blocks
        n.x_hash = o.ite(free, 1 if cache_now else 0, s.x_hash)
        n.phase[r] = RUNNING if self.sync else WAITING

    @action("nixl", fair=True)
    def nixl_read_take_data(self, s, n):
        """Asynchronous load (NIXL): the READ of the request that allocated ``X`` moves the
        prefix's KV into it (``_read_blocks``' transfer)."""
        s.require(not self.sync)
        self._land(s, n)

    @action("connector", fair=True)
    def connector_wait_for_layer_load(self, s, n):
        """Synchronous load: the forward of the step that allocated ``X`` waits for the
        connector's load of each layer (``wait_for_layer_load``) before its attention, so the
        prefix's KV is in ``X`` before any request of that step reads it."""
        s.require(self.sync)
        self._land(s, n)

    def _land(self, s, n):
        """The load of ``X`` lands: ``X`` holds the prefix's KV, its loader counts it computed."""
        o = s.ops
        s.require(o.eq(s.x_load, IN_FLIGHT))
        n.x_load = IDLE
        n.x_content = PREFIX
        for r in self.k.req:
            n.pfx[r] = o.ite(o.eq(s.pfx[r], LOADING), COMPUTED, s.pfx[r])

    @action("nixl")
    def nixl_read_fails(self, s, n):
        """Asynchronous load: the READ of ``X`` fails before moving data; ``_handle_failed_transfer``
        puts its local blocks in ``_invalid_block_ids`` (base_worker.py:3248-3252).  ``X`` keeps
        what it held.  Only with ``kv_load_may_fail``."""
        s.require(not self.sync and self.e.kv_load_may_fail)
        s.require(s.ops.eq(s.x_load, IN_FLIGHT))
        n.x_load = FAILED

    @action("connector")
    def connector_get_block_ids_with_load_errors(self, s, n):
        """Synchronous load: the connector's load of ``X`` fails and it reports ``X``
        (``get_block_ids_with_load_errors``); the step's outputs of the requests reading ``X``
        are discarded.  Only with ``kv_load_may_fail``."""
        s.require(self.sync and self.e.kv_load_may_fail)
        s.require(s.ops.eq(s.x_load, IN_FLIGHT))
        n.x_load = FAILED

    @action("decode", fair=True)
    def decode_handle_invalid_blocks(self, s, n):
        """``update_from_output`` -> ``_handle_invalid_blocks`` with ``X`` invalid.  Affected:
        the requests whose computed blocks include ``X`` (its loader, and the requests that hit
        it).  ``recompute``: the loader's computed tokens are truncated at ``X`` (synchronous: it
        recomputes ``X`` in its next step; asynchronous: ``_update_waiting_for_remote_kv`` frees
        its blocks and it is scheduled again), and a request sharing ``X`` "can still consider
        this block as computed" (0.33.0, vLLM issue #49250) or, with the HYPOTHETICAL
        ``sharers_wait_for_recompute``, waits for that recompute; ``X`` is not evicted.
        ``fail``: every affected request ends in error and frees its blocks, and a synchronous
        load's ``X`` is evicted from the prefix cache (``evict_blocks``, vLLM PR #26813) unless
        ``evict_invalid_blocks = false`` (HYPOTHETICAL)."""
        o = s.ops
        s.require(o.eq(s.x_load, FAILED))
        n.x_load = IDLE
        released = []
        for r in self.k.req:
            loader = o.eq(s.pfx[r], LOADING)
            sharer = o.and_(o.eq(s.pfx[r], COMPUTED), o.eq(s.hold[r], 1), o.ne(s.phase[r], ENDED))
            affected = o.or_(loader, sharer)
            if self.recompute:
                n.recovered[r] = o.ite(affected, 1, s.recovered[r])
                if self.sync:
                    n.pfx[r] = o.ite(loader, RECOMPUTE,
                                     o.ite(sharer, AWAIT if self.e.sharers_wait_for_recompute else COMPUTED, s.pfx[r]))
                else:  # the retry: blocks freed, the request scheduled again (a local hit may serve it)
                    released.append(self._release(s, n, r, loader))
                    n.pfx[r] = o.ite(loader, NONE,
                                     o.ite(sharer, AWAIT if self.e.sharers_wait_for_recompute else COMPUTED, s.pfx[r]))
                    n.phase[r] = o.ite(loader, NEW, s.phase[r])
            else:
                released.append(self._release(s, n, r, affected))
                n.outcome[r] = o.ite(affected, OUT_ERROR, s.outcome[r])
                n.phase[r] = o.ite(affected, ENDED, s.phase[r])
                n.pfx[r] = o.ite(affected, NONE, s.pfx[r])
        ref = s.x_ref
        for x in released:
            ref = o.ite(x, o.add(ref, -1), ref)
        n.x_ref = ref
        if not self.recompute and self.sync and self.e.evict_invalid_blocks:
            n.x_hash = 0

    @action("decode", "req", fair=True)
    def decode_update_waiting_for_remote_kv(self, s, n, r):
        """The asynchronous load finished (``finished_recving``): ``_update_waiting_for_remote_kv``
        caches the loaded blocks (the loader's ``X``) and the request leaves
        ``WAITING_FOR_REMOTE_KVS``."""
        o = s.ops
        s.require(not self.sync)
        s.require(o.eq(s.phase[r], WAITING))
        s.require(o.ne(s.pfx[r], LOADING))  # the loader: once its READ landed (a failure is handled first)
        n.phase[r] = RUNNING
        if self.e.delay_cache_blocks:
            n.x_hash = o.ite(o.and_(o.eq(s.hold[r], 1), o.eq(s.x_content, PREFIX)), 1, s.x_hash)

    @action("decode", "req", fair=True)
    def decode_execute_model_recompute(self, s, n, r):
        """The rewound request's forward recomputes ``X`` (the attention layer's
        ``reshape_and_cache`` writes the prefix's KV into it); requests waiting for that
        recompute (HYPOTHETICAL fix of #49250) may run."""
        o = s.ops
        s.require(o.eq(s.phase[r], RUNNING))
        s.require(o.eq(s.pfx[r], RECOMPUTE))
        n.pfx[r] = COMPUTED
        n.x_content = PREFIX
        for x in self.k.req:
            if x != r:
                n.pfx[x] = o.ite(o.eq(s.pfx[x], AWAIT), COMPUTED, s.pfx[x])

    @action("decode", "req", fair=True)
    def decode_update_from_output(self, s, n, r):
        """A running request's forward reads its prefix (``X`` or its own block) and its output
        is committed (``max_tokens=1``): what it computed on is recorded in ``read``; it finishes
        and frees ``X`` (``free_blocks``: ``ref_cnt -= 1``, ``X`` stays cached in the free queue).
        A step whose load of ``X`` is in flight (synchronous) or failed commits nothing."""
        o = s.ops
        s.require(o.eq(s.phase[r], RUNNING))
        s.require(o.is_in(s.pfx[r], (COMPUTED, PRIVATE)))
        s.require(o.ne(s.x_load, FAILED))
        if self.sync:
            s.require(o.ne(s.x_load, IN_FLIGHT))
        own = o.or_(o.eq(s.pfx[r], PRIVATE), o.eq(s.x_content, PREFIX))
        n.read[r] = o.ite(own, READ_OWN, READ_FOREIGN)
        n.outcome[r] = OUT_SUCCESS
        n.phase[r] = ENDED
        n.pfx[r] = NONE
        held = self._release(s, n, r, True)
        n.x_ref = o.ite(held, o.add(s.x_ref, -1), s.x_ref)

    @action("decode")
    def decode_get_new_blocks_evicts(self, s, n):
        """Another request's ``allocate_slots`` takes ``X`` from the free queue
        (``get_new_blocks`` -> ``_maybe_evict_cached_block``): only at ``ref_cnt == 0``; its hash
        is dropped and it is overwritten with another prompt's KV."""
        o = s.ops
        s.require(o.eq(s.x_ref, 0))
        s.require(o.or_(o.eq(s.x_hash, 1), o.ne(s.x_content, OTHER)))
        n.x_hash = 0
        n.x_content = OTHER

    # -- claims ----------------------------------------------------------------------------------
    def _may_read(self, s, r: int):
        """``r`` runs with ``X`` counted computed: its next forward reads ``X``."""
        o = s.ops
        return o.and_(o.eq(s.hold[r], 1), o.eq(s.pfx[r], COMPUTED), o.eq(s.phase[r], RUNNING))

    @invariant
    def shared_block_stable_while_read(self, s):
        """A shared block is never freed, evicted or written while a holder may read it: ``X``'s
        ``ref_cnt`` is the number of block tables holding it (so eviction, which needs
        ``ref_cnt == 0``, never takes it from under a holder), and while a request runs with
        ``X`` counted computed no other request recomputes it and no asynchronous READ still
        writes it (a synchronous load lands before the step's attention).  Broken by vLLM issue
        #49250 (``recompute``: a sharer runs while the first affected request recomputes ``X``)
        and, HYPOTHETICALLY, by caching an asynchronous load's blocks at allocation."""
        o = s.ops
        parts = [o.eq(s.x_ref, self._holders(s))]
        for r in self.k.req:
            writers = [o.eq(s.pfx[x], RECOMPUTE) for x in self.k.req if x != r]
            if not self.sync:
                writers.append(o.eq(s.x_load, IN_FLIGHT))
            parts.append(o.implies(self._may_read(s, r), o.not_(o.any_(writers))))
        return o.all_(parts)

    @invariant
    def prefix_reads_identical_kv(self, s):
        """Every request, a recovered one too, computes only on its own prefix KV or KV identical
        for its prefix (the prefix's KV in ``X``), never on a failed load's leftovers or another
        prompt's KV.  Broken by vLLM issue #49250 (a sharer reads ``X`` before the recompute) and,
        HYPOTHETICALLY, without vLLM PR #26813's eviction (a later hit reads the failed block)."""
        o = s.ops
        return o.all_(o.ne(s.read[r], READ_FOREIGN) for r in self.k.req)

    @invariant(at="quiescent")
    def quiescent_releases_shared_block(self, s):
        """Where nothing can move any more, every request ended and ``X``'s ``ref_cnt`` is 0 (no
        reference leaked)."""
        o = s.ops
        return o.and_(o.all_(o.eq(s.phase[r], ENDED) for r in self.k.req), o.eq(s.x_ref, 0))

    @witness
    def sometimes_prefix_hit_served(self, s):
        """Two requests hold ``X`` at once (a live share), so the claims judge shared blocks."""
        return s.ops.ge(self._holders(s), 2)

    @witness
    def sometimes_shared_load_fails(self, s):
        """A load of ``X`` failed (so the recovery path is explored)."""
        return s.ops.eq(s.x_load, FAILED)

    @witness
    def sometimes_recovered_request_served(self, s):
        """A request rescheduled by the recovery finishes with success."""
        o = s.ops
        return o.any_(o.and_(o.eq(s.recovered[r], 1), o.eq(s.outcome[r], OUT_SUCCESS)) for r in self.k.req)
