"""vLLM 0.33.0's push mode with several prefill ranks WRITing into one decode rank (TP/PP fan-in,
``write_fan_in``) and WRITE posts that may fail (V6), driven one kvproof event at a time: the
push harness (:class:`~.push.PushHarness`) with one real ``NixlPushConnectorWorker`` per prefill
rank.

What runs as real vLLM code, beyond what :mod:`.push` lists:

* one prefill worker per rank (``world_size`` = the fan-in, ``tp_rank`` = the rank), each with
  its own lease bookkeeping (``_reqs_to_send``), writer loop, matching and
  ``get_transfer_results``; decode's ``_do_send_reg_notif`` sends the ``PUSH_REG`` to every
  prefill rank's agent (``_remote_agents``);
* prefill's ``_xfer_blocks`` (push_worker.py:651-763): the descriptor ids, ``notif_msg =
  "{D_req}:{world_size}"``, ``make_prepped_xfer("WRITE", ...)`` and ``transfer``, and -- when the
  stand-in agent's ``make_prepped_xfer`` raises -- its except-branch (``_log_failure``,
  ``_send_failures``, ``_handle_failed_transfer``, no handle, no notification): V6;
* decode's ``_get_new_notifs`` counting each rank's notification toward ``pp_size *
  producers_per_consumer`` (``producers_per_consumer`` = the notification's ``world_size`` over
  decode's), and ``_pop_done_transfers`` reporting ``finished_recving`` when the count is
  complete.

What the harness stands in for, beyond :mod:`.push`:

* ``_xfer_blocks_for_req``'s TP plan: each prefill rank WRITEs its part (its heads) of its block
  into decode's one rank, calling the real ``_xfer_blocks`` once and publishing the handle as
  the real method does; a WRITE copies the source block's tag into that rank's part of the
  destination block when its data moves (``nixl_write_land_part``);
* the post failure itself: the stand-in agent's ``make_prepped_xfer`` raises (the error a NIXL
  backend raises) for the event ``prefill_xfer_blocks_fails``;
* ``KVOutputAggregator``: prefill's scheduler gets a request in ``finished_sending`` once every
  rank reported it (the harness polls the ranks at the model's prefill steps).
"""

from __future__ import annotations

from kvproof.spec.vllm.conform.harness import Divergent, Harness, HarnessError
from kvproof.spec.vllm.conform.push import PushHarness, _PushAgent

__all__ = ["RankedPushHarness"]


class _RankAgent(_PushAgent):
    """A prefill rank's stand-in agent: ``make_prepped_xfer`` records the WRITE (descriptor ids
    are block ids: one region, no region-group mapping) or raises when a failure is armed."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.fail_next = False
        self.posted: dict[int, tuple[list[int], list[int], bytes]] = {}

    def make_prepped_xfer(self, op, local_handle, local_descs, remote_handle, remote_descs, notif_msg=b""):
        """Prepare a WRITE (``PROC`` until completed), or raise: the armed post failure."""
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("NIXL_ERR_BACKEND: stand-in agent failed the post")
        if op != "WRITE":
            raise HarnessError(f"prefill posted a {op}")
        handle = 100 + len(self.state)
        self.state[handle] = "PROC"
        self.posted[handle] = ([int(x) for x in local_descs], [int(x) for x in remote_descs], bytes(notif_msg))
        return handle

    def transfer(self, handle: int) -> str:
        """Start the prepared WRITE (its data moves at ``nixl_write_land_part``)."""
        return "PROC"


class RankedPushHarness(PushHarness):
    """vLLM 0.33.0's push mode with ``fan_in`` prefill ranks; the push harness's events plus the
    per-rank ones (``prefill_xfer_blocks``, ``prefill_xfer_blocks_fails``,
    ``nixl_write_land_part``, ``nixl_write_complete_part``, ``decode_get_new_notifs``)."""

    def __init__(self, shape, fan_in: int):
        self.F = fan_in
        super().__init__(shape)
        self.d_part = [[0] * (shape.decode_blocks + 1) for _ in range(fan_in)]  # rank -> block -> tag
        self.d_tag = _Parts(self.d_part)  # a block's tag: the tuple of its parts' tags
        self.part_read: dict[tuple[int, int], str] = {}  # (slot, rank) -> posted | taken | done | failed
        self.part_writes: dict[tuple[int, int], tuple[int, list[int], list[int], bytes]] = {}
        self.expired_slots: set[int] = set()
        self.reported: dict[int, set[int]] = {}  # slot -> prefill ranks that reported finished_sending

    # -- construction ------------------------------------------------------------------------
    def _workers(self, lease: int) -> None:
        self.dagent = _PushAgent("decode")
        self.agents = [_RankAgent(f"prefill{w}") for w in range(self.F)]
        self.dagent.peers = {a.name: a for a in self.agents}
        self.dagent.peer = self.agents[0]  # replaced by _remote_agents below
        for a in self.agents:
            a.peer = self.dagent
        self.dagent.send_notif = self._decode_send_notif
        self.pws = [self._rank_worker(w, lease) for w in range(self.F)]
        self.pw, self.agent = self.pws[0], self.agents[0]
        self.dw = self._push_worker("kv_consumer", self.dagent, "kv_producer", lease)
        self.dw._remote_agents = {"kv_producer": {w: a.name for w, a in enumerate(self.agents)}}
        self.regs: dict[int, tuple] = {}
        self.writes: dict[int, tuple] = {}

    def _decode_send_notif(self, agent_name: str, notif_msg: bytes) -> None:
        self.dagent.peers[agent_name].inbox.append(notif_msg)

    def _rank_worker(self, w: int, lease: int):
        pw = self._push_worker("kv_producer", self.agents[w], "kv_consumer", lease)
        pw.world_size, pw.tp_rank = self.F, w
        harness = self
        # the real _xfer_blocks' descriptor plumbing: one region, descriptor ids = block ids
        blocks = self.shape.decode_blocks + 1, self.shape.prefill_blocks + 1
        pw.dst_num_blocks = {"kv_consumer": blocks[0], "kv_producer": blocks[1]}
        pw.dst_region_num_blocks = {"kv_consumer": None, "kv_producer": None}
        pw.dst_region_group_ids = {"kv_consumer": [], "kv_producer": []}
        pw.dst_uses_region_group_mapping = {"kv_consumer": False, "kv_producer": False}
        pw.region_group_ids, pw._uses_region_group_mapping = [], False
        pw._transfer_layer_group_ids, pw.num_regions, pw.block_len_per_layer = [], 1, [1]

        def xfer_blocks_for_req(req_id, meta, _w=w, _pw=pw):
            harness._rank_write(_w, _pw, req_id, meta)

        pw._xfer_blocks_for_req = xfer_blocks_for_req
        return pw

    # -- the stand-ins the real code calls ----------------------------------------------------------
    def _rank_write(self, w: int, pw, req_id: str, meta) -> None:
        """``_xfer_blocks_for_req`` of rank ``w``: one real ``_xfer_blocks`` of this rank's part
        into decode's one rank; a handle it returns is published in ``_sending_transfers``."""
        m = self.m
        r = next(r for r in range(self.R) if self.pid(r) == req_id)
        spec = m["tp_mapping"].ReadSpec(remote_rank=0, local_block_ids=meta.local_physical_block_ids,
                                        remote_block_ids=meta.remote.block_ids)
        handle = pw._xfer_blocks(read_spec=spec, dst_engine_id=meta.remote.engine_id, request_id=req_id,
                                 remote_request_id=meta.remote.request_id, local_xfer_side_handle=0,
                                 remote_xfer_side_handle=0)
        if handle is None:
            self.part_read[(r, w)] = "failed"
            return
        src, dst, msg = self.agents[w].posted[handle]
        self.part_writes[(r, w)] = (handle, src, dst, msg)
        self.part_read[(r, w)] = "posted"
        with pw._sending_transfers_lock:
            pw._sending_transfers[req_id].append(handle)

    # -- prefill: every rank -----------------------------------------------------------------------
    def _prefill_worker_step(self, so) -> None:
        for pw in self.pws:
            pw.start_load_kv(so.kv_connector_metadata)

    def prefill_request_finished(self, r: int) -> None:
        """As in push; every rank's writer takes the finished blocks."""
        Harness.prefill_request_finished(self, r)
        for pw in self.pws:
            self._writer_pass(pw)
            if self.pid(r) not in pw._push_finished_blocks:
                raise Divergent(f"vLLM's prefill rank {pw.tp_rank} writer holds no finished blocks of {self.pid(r)}")

    def _prefill_results(self, r: int) -> set[str]:
        """Every rank's ``get_transfer_results`` with only ``r`` in view (as in push); the
        scheduler frees ``r`` once every rank reported it (``KVOutputAggregator``)."""
        pid = self.pid(r)
        got = self.reported.setdefault(r, set())
        for w, pw in enumerate(self.pws):
            leases = {k: v for k, v in pw._reqs_to_send.items() if k != pid}
            handles = {k: v for k, v in pw._sending_transfers.items() if k != pid and k in leases}
            for k in leases:
                del pw._reqs_to_send[k]
            for k in handles:
                del pw._sending_transfers[k]
            before = len(pw.xfer_stats.data.get("num_kv_expired_reqs", ()))
            try:
                done = set(pw.get_transfer_results().finished_sending)
            finally:
                pw._reqs_to_send.update(leases)
                pw._sending_transfers.update(handles)
            if len(pw.xfer_stats.data.get("num_kv_expired_reqs", ())) > before:
                self.expired_slots.add(r)
            if done - {pid}:
                raise Divergent(f"vLLM's prefill rank {w} reported {sorted(done)} for {pid}")
            if done:
                got.add(w)
        if len(got) < self.F:
            return set()
        self._free_on_prefill({pid})
        for pw in self.pws:
            self._writer_pass(pw)
        return {pid}

    def prefill_reap_expired_lease(self, r: int) -> None:
        """Every rank's ``get_transfer_results``: the ranks still holding ``r`` reap its lease."""
        done = self._prefill_results(r)
        if done != {self.pid(r)} or r not in self.expired_slots:
            raise Divergent(f"vLLM's prefill ranks reported {sorted(done)}, not an expired {self.pid(r)} "
                            f"(ranks reported: {sorted(self.reported.get(r, ()))}, now {self.clock.now})")

    def prefill_get_transfer_results(self, r: int) -> None:
        """Every rank's ``get_transfer_results`` finds its WRITE handle of ``r`` done."""
        done = self._prefill_results(r)
        if done != {self.pid(r)}:
            raise Divergent(f"vLLM's prefill ranks reported {sorted(self.reported.get(r, ()))} of {self.F} "
                            f"for {self.pid(r)}")

    def _deliver_heartbeats(self, msgs: list[bytes]) -> None:
        for a, pw in zip(self.agents, self.pws):
            a.deliver = list(msgs)
            self._writer_pass(pw)
            done = pw._get_new_notifs()
            if done:
                raise HarnessError(f"a heartbeat completed {sorted(done)}")

    def _post(self, r: int, w: int, fail: bool) -> None:
        self._deliver_push_reg(r, self.agents[w], f" to prefill rank {w}")
        self.agents[w].fail_next = fail
        failures = len(self.pws[w].xfer_stats.data.get("num_failed_transfers", ()))
        self._writer_pass(self.pws[w])
        self.agents[w].fail_next = False
        want = "failed" if fail else "posted"
        if self.part_read.get((r, w)) != want:
            raise Divergent(f"vLLM's prefill rank {w} writer did not post {self.pid(r)}'s WRITE "
                            f"({self.part_read.get((r, w), 'nothing')}, {want} expected)")
        if fail and (self.pid(r) not in self.pws[w]._send_failures
                     or len(self.pws[w].xfer_stats.data.get("num_failed_transfers", ())) != failures + 1):
            raise Divergent(f"vLLM's prefill rank {w} did not record the failed post of {self.pid(r)}")

    def prefill_xfer_blocks(self, r: int, w: int) -> None:
        """Prefill rank ``w``'s agent delivers the ``PUSH_REG``; a writer pass matches it and
        posts the rank's WRITE through the real ``_xfer_blocks``."""
        self._post(r, w, fail=False)

    def prefill_xfer_blocks_fails(self, r: int, w: int) -> None:
        """As :meth:`prefill_xfer_blocks`, with the stand-in agent's ``make_prepped_xfer``
        raising: 0.33.0's except-branch records the failure (``_send_failures``,
        ``num_failed_transfers``) and posts nothing."""
        self._post(r, w, fail=True)

    # -- the NIXL WRITEs ----------------------------------------------------------------------------
    def nixl_write_land_part(self, r: int, w: int) -> None:
        """Rank ``w``'s WRITE moves its data: its part of each decode block gets the prefill
        block's tag now."""
        _, src, dst, _ = self.part_writes[(r, w)]
        for a, b in zip(src, dst):
            self.d_part[w][b] = self.p_tag[a]
        self.part_read[(r, w)] = "taken"

    def nixl_write_complete_part(self, r: int, w: int) -> None:
        """Rank ``w``'s WRITE completes: its handle is ``DONE``, its notification on its way."""
        handle, _, _, msg = self.part_writes[(r, w)]
        self.agents[w].state[handle] = "DONE"
        self.dagent.inbox.append(msg)
        self.part_read[(r, w)] = "done"

    # -- decode ------------------------------------------------------------------------------------
    def decode_send_push_reg(self, r: int) -> None:
        """Decode's writer sends ``r``'s registration to every prefill rank."""
        if r not in self.regs:
            raise Divergent(f"vLLM's decode worker got no registration of {self.did(r)}")
        self.dw._reg_send_inbox.put(self.regs.pop(r))
        before = [len(a.inbox) for a in self.agents]
        self._writer_pass(self.dw)
        if [len(a.inbox) for a in self.agents] != [n + 1 for n in before]:
            raise Divergent(f"vLLM's decode writer did not send {self.did(r)}'s PUSH_REG to every prefill rank")

    def decode_get_new_notifs(self, r: int, w: int) -> None:
        """Decode's agent delivers rank ``w``'s notification; ``get_transfer_results`` counts it
        (``_get_new_notifs``) and, once the count is complete, reports ``finished_recving``,
        which a decode step then applies as in :meth:`decode_finished_recving`."""
        if (r, w) not in self.part_writes or self.part_read.get((r, w)) != "done":
            raise HarnessError(f"no notification of rank {w} for {self.did(r)} is on its way")
        msg = self.part_writes[(r, w)][3]
        self.dagent.inbox.remove(msg)
        self.part_read[(r, w)] = "counted"
        self.dagent.deliver = [msg]
        self._writer_pass(self.dw)
        res = self.dw.get_transfer_results()
        if res.finished_sending or (res.finished_recving and set(res.finished_recving) != {self.did(r)}):
            raise Divergent(f"vLLM's decode worker reported finished_recving {sorted(res.finished_recving)}")
        if res.finished_recving:
            self._counted = set(res.finished_recving)
            self.decode_finished_recving(r)

    def _finished_recving(self, r: int) -> set[str]:
        return self._counted

    def _kind(self, tags: list, r: int) -> str:
        """As the base harness, over every rank's part of every block."""
        return super()._kind([t for parts in tags for t in parts], r)

    def stranded(self, r: int) -> bool:
        """No rank holds ``r`` any more (no lease, no finished blocks in its writer)."""
        pid = self.pid(r)
        return all(pid not in pw._reqs_to_send and pid not in pw._push_finished_blocks for pw in self.pws)


class _Parts:
    """``d_tag`` seen through every rank's part: block ``b``'s tag is the tuple of its parts'."""

    def __init__(self, parts: list[list[int]]) -> None:
        self.parts = parts

    def __getitem__(self, b: int) -> tuple[int, ...]:
        return tuple(p[b] for p in self.parts)
