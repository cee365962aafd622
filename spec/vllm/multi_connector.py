"""vLLM 0.33.0's ``MultiConnector`` composing two KV connectors on decode: NIXL loads a request's
KV from prefill (an asynchronous receive) while LMCache's multi-process connector saves it (an
asynchronous send).  The spec ``vllm-multi-connector`` of the ``vllm`` protocol
(:class:`VllmMultiConnector`), built from the same scenario tables as ``vllm`` with
``[engine] multi_connector = true``.

The hazard is vLLM issue #46240 (open; reported on 0.28.0 with ``MultiConnector(NixlConnector,
LMCacheMPConnector)``): a request aborted while both transfers are pending has its blocks freed
by whichever completion the scheduler sees first, and the second one hits ``assert req_id in
self.requests`` and kills EngineCore.  The code paths (vLLM 0.33.0; files under ``vllm/v1/core/
sched/`` and ``vllm/distributed/kv_transfer/kv_connector/v1/``), read for this model:

* ``Scheduler.finish_requests`` (scheduler.py:2964-3029), the client's abort: a request in
  ``WAITING_FOR_REMOTE_KVS`` whose receive is not yet in ``finished_recving_kv_req_ids`` gets
  ``delay_free_blocks = True`` (3017-3024); ``_free_request`` (3031-3062) then asks
  ``_connector_finished`` (3349-3405) -> ``MultiConnector.request_finished`` ->
  ``_aggregate_request_finished`` (multi_connector.py:559-588): NIXL's decode side returns
  ``False`` (pull_scheduler.py:191-230, not bidirectional), ``LMCacheMPConnector.request_finished``
  returns ``True`` for every request (lmcache_mp_connector.py:910-952).  One boolean,
  ``delay_free_blocks``, now stands for two pending completions.
* ``MultiConnector.get_transfer_results`` (multi_connector.py:375-393) unions the children's
  ``finished_recving`` and passes ``finished_sending`` on after ``_extra_async_saves`` counted
  down: it counts only the *saves* (several connectors saving one request), not a receive beside
  a save, so both completions reach the scheduler.
* ``Scheduler._update_from_kv_xfer_finished`` (scheduler.py:3556-3582) handles one step's
  output, receives first: a receive of a finished request ``_free_blocks`` it (3575-3577:
  blocks back to the pool, ``del self.requests[req_id]``, 3064-3067); a send does the same
  (3579-3582); both begin with ``assert req_id in self.requests`` (3571, 3581).  So the first
  completion, in either order or in the same step, frees the blocks while the other transfer
  is still pending, and the second asserts.  0.33.0 still has this code.

Two fixes are modelled by ``engine.completion_tracking``: ``"skip_untracked"`` replaces the
asserts by skipping a completion for a request no longer tracked (vLLM PR #48821, closed
unmerged): the engine lives, but the first completion still frees the blocks under the other
transfer; ``"counted"`` (HYPOTHETICAL, the direction vLLM issue #46240's report proposes) keeps,
per finished request, the number of completions still owed (a receive pending at the abort, one
per connector that returned ``True`` from ``request_finished``) and frees the blocks at zero.

Modelling choices: one request ``R`` with one KV block ``B`` on decode; its NIXL READ is posted
(``R`` is in ``WAITING_FOR_REMOTE_KVS``) at the start; a worker completion and its appearance in
that step's ``KVConnectorOutput`` are one step (``get_finished``); the scheduler handles one
output at a time (receives, then sends, as the code does), so "the same step" is both completions
in one output; LMCache's store may read ``B`` until it reports ``finished_sending`` (for a request
aborted before any forward the MP connector reports a send it never submitted, LMCache issue
#4938: the claim over-approximates that case); another request's ``allocate_slots`` may take a
freed ``B``.  These actions are model-only: ``kvproof conform`` does not replay them (vLLM's
``lmcache_mp_connector.py`` imports the ``lmcache`` package, line 11, which kvproof does not
install, and its worker talks to an LMCache server process).
"""

from __future__ import annotations

from kvproof.model.framework import ConfiguredSpec, action, invariant, witness
from kvproof.model.layout import Domain, Field
from kvproof.spec.vllm.config import Config

__all__ = ["VllmMultiConnector", "MultiCodes"]

# phase: R's status in Scheduler.requests (GONE: deleted by _free_blocks)
WAITING, RUNNING, FINISHED, GONE = range(4)
PHASE_LABELS = ("waiting_for_remote_kvs", "running", "finished", "gone")
# recv: NIXL's receive of R's KV into B
IN_FLIGHT, REPORTED, CONSUMED = range(3)
RECV_LABELS = ("in_flight", "in_finished_recving", "handled")
# save: LMCache's store of R's blocks
NO_SAVE, PENDING, SAVE_REPORTED, SAVED = range(4)
SAVE_LABELS = ("none", "pending", "in_finished_sending", "handled")
# block: who holds B
OWN, FREE, OTHER = range(3)
BLOCK_LABELS = ("R", "free", "another_request")


class MultiCodes:
    """The domains of one instance: the number of completions a finished request still owes."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.owed = Domain("owed", 3)


def _fields(k: MultiCodes) -> list[Field]:
    """R's scheduler status, its two transfers, the completions owed (``counted``), whether it
    was aborted, block ``B``'s holder and whether EngineCore died."""
    flag = Domain("flag", 2, ("no", "yes"))

    def en(name, labels):
        return Domain(name, len(labels), labels)

    return [
        Field("phase", (), en("phase", PHASE_LABELS), WAITING, "R's status in Scheduler.requests"),
        Field("recv", (), en("recv", RECV_LABELS), IN_FLIGHT, "NIXL's receive (READ) of R's KV into B"),
        Field("save", (), en("save", SAVE_LABELS), NO_SAVE, "LMCache's asynchronous store of R's blocks"),
        Field("owed", (), k.owed, 0, "completions R still owes before its blocks are freed (counted only)"),
        Field("aborted", (), flag, 0, "R was aborted by the client (finish_requests)"),
        Field("block", (), en("block", BLOCK_LABELS), OWN, "who holds decode block B"),
        Field("dead", (), flag, 0, "EngineCore died on assert req_id in self.requests"),
    ]


class VllmMultiConnector(ConfiguredSpec):
    """Decode's ``MultiConnector(NixlConnector, LMCacheMPConnector)``: one request's NIXL receive
    and LMCache send and the scheduler's handling of their completions, for one
    :class:`~.config.Config` with ``multi_connector``."""

    codes = MultiCodes
    fields_of = staticmethod(_fields)

    def config_problems(self, cfg: Config) -> list[str]:
        """This spec needs ``[engine] multi_connector = true``, pull mode and one request."""
        if not cfg.engine.multi_connector:
            return ["engine.multi_connector: the spec vllm-multi-connector models MultiConnector's two "
                    "connectors; set it true"]
        if cfg.engine.mode != "pull":
            return ["engine.mode: the spec vllm-multi-connector models NIXL's receive on decode (pull mode)"]
        if len(cfg.requests) != 1:
            return ["requests: the spec vllm-multi-connector models one request (its two transfers)"]
        return []

    def domain(self, name: str) -> Domain:
        """No action takes a parameter."""
        raise KeyError(name)

    @property
    def tracking(self) -> str:
        """``engine.completion_tracking``: ``boolean`` (0.33.0), ``skip_untracked``, ``counted``."""
        return self.e.completion_tracking

    def _free_blocks(self, s, n, phase, block, when):
        """``Scheduler._free_blocks`` where ``when`` holds: ``B`` back to the pool and ``R``
        deleted from ``self.requests``; returns the new ``(phase, block)``."""
        o = s.ops
        return o.ite(when, GONE, phase), o.ite(when, FREE, block)

    def _complete(self, s, n, phase, block, owed, dead, here):
        """One completion of ``R`` handled by ``_update_from_kv_xfer_finished`` where ``here``
        holds, on a finished ``R``: ``assert req_id in self.requests`` (``boolean``, ``counted``)
        or a skip (``skip_untracked``) if ``R`` is gone, else ``_free_blocks`` (``counted``: only
        at the last owed completion).  Returns the new ``(phase, block, owed, dead)``."""
        o = s.ops
        gone = o.and_(here, o.eq(phase, GONE))
        live = o.and_(here, o.ne(phase, GONE))
        if self.tracking != "skip_untracked":
            dead = o.ite(gone, 1, dead)
        if self.tracking == "counted":
            last = o.and_(live, o.le(owed, 1))
            owed = o.ite(live, o.ite(o.le(owed, 1), 0, o.add(owed, -1)), owed)
            phase, block = self._free_blocks(s, n, phase, block, last)
        else:
            phase, block = self._free_blocks(s, n, phase, block, live)
        return phase, block, owed, dead

    # -- the workers -----------------------------------------------------------------------------
    @action("nixl", fair=True)
    def nixl_get_finished(self, s, n):
        """NIXL's READ of ``R``'s KV into ``B`` completes and the worker's ``get_finished``
        reports ``R`` in this step's ``finished_recving`` (``MultiConnector.get_transfer_results``
        passes it on).  Hazard (vLLM issue #46240): the scheduler may have freed ``B`` already."""
        o = s.ops
        s.require(o.eq(s.dead, 0))
        s.require(o.eq(s.recv, IN_FLIGHT))
        n.recv = REPORTED

    @action("lmcache", fair=True)
    def lmcache_get_finished(self, s, n):
        """LMCache's store of ``R`` completes and ``LMCacheMPConnector.get_finished`` reports it in
        ``finished_sending`` (``_extra_async_saves`` holds no count for ``R``: only one connector
        saves it).  Hazard (vLLM issue #46240): the second completion of an aborted request."""
        o = s.ops
        s.require(o.eq(s.dead, 0))
        s.require(o.eq(s.save, PENDING))
        n.save = SAVE_REPORTED

    # -- the scheduler ---------------------------------------------------------------------------
    @action("scheduler", fair=True)
    def scheduler_update_from_kv_xfer_finished(self, s, n):
        """``Scheduler._update_from_kv_xfer_finished`` handles one step's ``KVConnectorOutput``:
        first ``finished_recving`` (a waiting ``R`` joins ``finished_recving_kv_req_ids``; a
        finished one is freed), then ``finished_sending`` (freed); each begins with ``assert
        req_id in self.requests``, which kills EngineCore for the second completion of an aborted
        request (vLLM issue #46240); ``skip_untracked`` (vLLM PR #48821) skips it, ``counted``
        (HYPOTHETICAL) frees only at the last completion owed."""
        o = s.ops
        s.require(o.eq(s.dead, 0))
        got_recv, got_send = o.eq(s.recv, REPORTED), o.eq(s.save, SAVE_REPORTED)
        s.require(o.or_(got_recv, got_send))
        n.recv = o.ite(got_recv, CONSUMED, s.recv)
        n.save = o.ite(got_send, SAVED, s.save)
        waiting = o.and_(got_recv, o.eq(s.phase, WAITING))  # joins finished_recving_kv_req_ids
        phase, block, owed, dead = s.phase, s.block, s.owed, s.dead
        phase, block, owed, dead = self._complete(s, n, phase, block, owed, dead,
                                                  o.and_(got_recv, o.not_(waiting)))
        phase, block, owed, dead = self._complete(s, n, phase, block, owed, dead, got_send)
        n.phase, n.block, n.owed, n.dead = phase, block, owed, dead

    @action("scheduler", fair=True)
    def scheduler_update_waiting_for_remote_kv(self, s, n):
        """``Scheduler.schedule`` -> ``_handle_blocked_waiting_request`` ->
        ``_update_waiting_for_remote_kv``: ``R``'s receive is in ``finished_recving_kv_req_ids``,
        its blocks are cached and it leaves ``WAITING_FOR_REMOTE_KVS`` to run."""
        o = s.ops
        s.require(o.eq(s.dead, 0))
        s.require(o.and_(o.eq(s.phase, WAITING), o.eq(s.recv, CONSUMED)))
        n.phase = RUNNING

    @action("scheduler", fair=True)
    def scheduler_update_from_output(self, s, n):
        """``R``'s forward reads ``B`` and its output finishes it (``max_tokens=1``):
        ``_free_request`` -> ``MultiConnector.request_finished``: LMCache returns ``True`` (an
        asynchronous save), so the blocks wait for ``finished_sending`` (``counted``: one owed)."""
        o = s.ops
        s.require(o.eq(s.dead, 0))
        s.require(o.eq(s.phase, RUNNING))
        n.phase = FINISHED
        n.save = PENDING
        if self.tracking == "counted":
            n.owed = 1

    @action("client")
    def scheduler_finish_requests(self, s, n):
        """The client aborts ``R`` (``Scheduler.finish_requests``): a request in
        ``WAITING_FOR_REMOTE_KVS`` whose receive the scheduler has not handled keeps its blocks
        for ``finished_recving`` (``delay_free_blocks``, from vLLM PR #32255); ``_free_request``
        -> ``MultiConnector.request_finished``: NIXL returns ``False``, LMCache ``True``, so one
        boolean now waits for two completions (vLLM issue #46240); ``counted`` records both."""
        o = s.ops
        s.require(o.eq(s.dead, 0))
        s.require(o.is_in(s.phase, (WAITING, RUNNING)))
        recv_owed = o.and_(o.eq(s.phase, WAITING), o.ne(s.recv, CONSUMED))
        n.phase = FINISHED
        n.aborted = 1
        n.save = PENDING
        if self.tracking == "counted":
            n.owed = o.ite(recv_owed, 2, 1)

    @action("scheduler")
    def scheduler_allocate_slots(self, s, n):
        """Another request's ``allocate_slots`` takes ``B`` from the free block queue (its KV
        is written there next)."""
        o = s.ops
        s.require(o.eq(s.dead, 0))
        s.require(o.eq(s.block, FREE))
        n.block = OTHER

    # -- claims ----------------------------------------------------------------------------------
    @invariant
    def no_engine_core_assert(self, s):
        """Availability: no legal completion order kills the engine: the scheduler never handles
        a completion of a request it no longer tracks (``assert req_id in self.requests``,
        scheduler.py:3571, 3581).  Broken by vLLM issue #46240 (0.33.0: an aborted request's NIXL
        receive and LMCache send, in either order or in one step)."""
        return s.ops.eq(s.dead, 0)

    @invariant
    def no_read_into_freed_block(self, s):
        """NIXL's READ writes only blocks its request holds: while ``R``'s receive is in flight,
        ``B`` is ``R``'s (not back in the pool, not another request's).  Broken by vLLM issue
        #46240 when LMCache's send is handled first, with or without the engine's death (vLLM
        PR #48821's skip)."""
        o = s.ops
        return o.implies(o.eq(s.recv, IN_FLIGHT), o.eq(s.block, OWN))

    @invariant
    def no_save_from_freed_block(self, s):
        """LMCache's store reads only blocks its request holds: while ``R``'s save is pending,
        ``B`` is ``R``'s.  Broken by vLLM issue #46240 when NIXL's receive is handled first (the
        same with vLLM PR #48821's skip)."""
        o = s.ops
        return o.implies(o.eq(s.save, PENDING), o.eq(s.block, OWN))

    @invariant(at="quiescent")
    def quiescent_releases_blocks(self, s):
        """Where nothing can move any more and the engine lives, ``R`` left ``self.requests`` and
        ``B`` is back in the pool or another request's (no completion was lost, no block
        leaked)."""
        o = s.ops
        return o.implies(o.eq(s.dead, 0), o.and_(o.eq(s.phase, GONE), o.ne(s.block, OWN)))

    @witness
    def sometimes_abort_owes_two_completions(self, s):
        """``R`` was aborted with both its receive and its save pending (the case of vLLM issue
        #46240), so the claims judge it."""
        o = s.ops
        return o.and_(o.eq(s.aborted, 1), o.eq(s.phase, FINISHED), o.ne(s.recv, CONSUMED), o.eq(s.save, PENDING))

    @witness
    def sometimes_request_served(self, s):
        """``R`` ran to its end unaborted and its blocks were freed."""
        o = s.ops
        return o.and_(o.eq(s.aborted, 0), o.eq(s.phase, GONE))
