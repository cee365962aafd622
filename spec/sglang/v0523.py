"""SGLang 0.5.23 as shipped on the Mooncake backend: the behaviours of the release that the base
protocol does not have, each an override of one action (paths under
``python/sglang/srt/disaggregation/``).

* ``mooncake/conn.py`` ``add_transfer_request`` shards a prefill rank's chunks by the room's
  destination sessions and ``transfer_worker`` sends them one synchronous
  ``batch_transfer_sync`` at a time, so a prefill rank starts a write only when none of its own
  transfer calls is still running (:meth:`Sglang0523.kv_transfer_write`).  Prefill ranks are
  separate processes with their own workers: their calls run side by side.
* The worker sends a request's metadata with ``send_aux`` right after the last chunk's call
  returned, in the same thread, whether or not an ABORT arrived meanwhile
  (:meth:`Sglang0523.kv_write_lands`, :meth:`Sglang0523.kv_transfer_aux`).
* A prefill-side failure is a send that failed while its batch may still be writing
  (``batch_transfer_sync`` returning -1 on its timeout): the worker calls
  ``_poison_unsettled_send`` and ``conclude_failure`` and goes on with the next chunk
  (:meth:`Sglang0523.prefill_transfer_failed`).
* A poisoned room never gets that rank's drain ack (``_maybe_ack_drained_abort`` drops the
  target), so decode's hold can end only by its deadline (:meth:`Sglang0523.prefill_drain_ack`).
* The metadata slot: ``_apply_metadata_gate`` treats a slot whose bootstrap room is still 0
  as not yet transferred, ``_commit_transfer_to_req`` aborts the request when the slot names
  another room ("Metadata corruption detected"), and every release clears the slot
  (``MetadataBuffers.clear_slot``) (:meth:`Sglang0523.decode_commit`,
  :meth:`Sglang0523.release_aux`).
* The decode ranks of an attention-TP group process a client's abort in the same scheduler
  iteration (the request is broadcast to the group) and publish a request's metadata in the
  same ``pop_preallocated`` iteration, so an abort never falls between two ranks' publications
  (:meth:`Sglang0523.decode_abort`).

Everything else is an engine flag of the scenarios (``spec/sglang/scenarios/*-sglang-0.5.23-*.toml``):
both admission doors reject pending-error placeholders (``is_unadmitted_reject``); deferred
release is on for backends that declare ``supports_deferred_decode_kv_release`` and holds until
``is_abort_release_safe(room, required_acks)`` with ``required_acks = len(bootstrap_infos)``
(``required_acks = "every_prefill_rank"``) or the 30 s deadline; the hold decision is
MAX-all-reduced and the readiness MIN-all-reduced over the attention-TP group; every failure
after the metadata was published defers (``ensure_abort_notified(force_arm=True)``); the room's
generation is armed before ABORT is sent (``register_before_abort``) and acks carry it
(``acks_carry_generation``); the metadata slot is held with the pages (``aux_held_with_pages``).
"""

from __future__ import annotations

from kvproof.model.lifting import indices
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.state import (
    D_ENDED, D_WAITING, OUT_ERROR, OUT_SUCCESS, POLL_FAILED, POLL_SUCCESS, READ_NONE, UNWRITTEN, WR_FLIGHT,
    WR_NOT_ISSUED, kv_of, owned_by,
)

from kvproof.spec.sglang.v0523_rooms import RS_LABELS, _ClientRooms, update_status

__all__ = ["Sglang0523", "update_status", "RS_LABELS"]


class _Sglang0523Base(PdProtocol):
    """SGLang 0.5.23's Mooncake prefill worker and decode scheduler on top of the base protocol
    (the behaviours listed in the module docstring)."""

    def _calls_running(self, s, pr: int, but=None):
        """Transfer calls of prefill rank ``pr``'s worker that have not returned: its in-flight
        writes (and, rank 0, aux writes) of requests whose send did not fail on this rank, except
        the write ``but`` = (request, stream, chunk)."""
        o = s.ops
        k = self.k
        out = []
        for r in k.req:
            returned = s.poll[r, pr] == POLL_FAILED
            for w in k.streams_of(pr):
                for c in indices(self.send_len(r)):
                    running = o.and_(s.wr[r, w, c] >= WR_FLIGHT, o.not_(returned))
                    if but is not None and w == but[1]:  # not the write ``but`` itself (a condition: r, c may be lifted)
                        running = o.and_(running, o.or_(o.ne(r, but[0]), o.ne(c, but[2])))
                    out.append(running)
            if k.M and pr == 0:
                out.append((s.aux_wr[r] >= WR_FLIGHT) & ~returned)
        return o.any_(out)

    def kv_transfer_write(self, s, n, r, w, c):
        """``transfer_worker`` dequeues chunk ``c`` and starts its synchronous
        ``batch_transfer_sync``: only when no other transfer call of this prefill rank is
        running (one worker thread serves the destination sessions)."""
        o = s.ops
        pr = self.k.rank_of_stream(w)
        s.require(o.not_(self._calls_running(s, pr, but=(r, w, c))))
        super().kv_transfer_write(s, n, r, w, c)

    def kv_write_lands(self, s, n, r, w, c):
        """The write lands and its transfer call returns.  When it was rank 0's last chunk and
        the call did not fail, the same worker thread goes straight on to ``send_aux`` (with aux
        slots): the metadata write is issued in this step, ABORT or not."""
        super().kv_write_lands(s, n, r, w, c)
        k = self.k
        if not k.M or k.rank_of_stream(w) != 0 or c != self.send_len(r) - 1:
            return
        o = s.ops
        others = [s.wr[r, w2, c] != WR_NOT_ISSUED for w2 in k.streams_of(0) if w2 != w]
        last = o.and_(s.poll[r, 0] != POLL_FAILED, s.aux_wr[r] == WR_NOT_ISSUED, *others)
        n.aux_wr[r] = o.ite(last, WR_FLIGHT, s.aux_wr[r])

    def kv_transfer_aux(self, s, n, r):
        """Never a step of its own: ``send_aux`` follows the last chunk's call in the same
        worker thread (see :meth:`kv_write_lands`)."""
        s.require(False)

    def prefill_transfer_failed(self, s, n, r, pr):
        """A send of prefill rank ``pr`` fails while its batch may still write
        (``batch_transfer_sync`` returns -1 on its timeout): ``_poison_unsettled_send`` then
        ``conclude_failure``; the write stays in flight and lands whenever it lands."""
        s.require(self.rank_writes_in_flight(s, r, pr))
        super().prefill_transfer_failed(s, n, r, pr)

    def prefill_drain_ack(self, s, n, r, pr):
        """``_maybe_ack_drained_abort``: never for a room this rank poisoned (a failed send), so
        decode falls back to its release timeout."""
        s.require(s.poll[r, pr] != POLL_FAILED)
        super().prefill_drain_ack(s, n, r, pr)

    def decode_abort(self, s, n, r):
        """``Scheduler.abort_request`` on every decode rank of the group in the same iteration:
        either no rank or every rank has published the request's metadata (``pop_preallocated``
        publishes on all ranks in one iteration)."""
        o = s.ops
        metas = [s.meta[r, d] == 1 for d in range(self.k.DR)]
        s.require(o.all_(metas) | ~o.any_(metas))
        super().decode_abort(s, n, r)

    def release_aux(self, s, n, r: int, when=True):
        """``_do_release`` / ``pop_transferred`` free the metadata slot and clear it
        (``clear_slot``: its bootstrap room reads 0 again, "not yet written")."""
        super().release_aux(s, n, r, when)
        if not self.k.M:
            return
        o = s.ops
        m = s.aux[r]
        n.aux_content[m] = o.ite(when & (s.aux_owner[m] == owned_by(r)), UNWRITTEN, s.aux_content[m])

    def decode_commit(self, s, n, r):
        """``pop_transferred``'s Success branch with a metadata slot: the gate
        (``_apply_metadata_gate``) waits while the slot's bootstrap room is 0, and
        ``_commit_transfer_to_req`` aborts the request with an error when the slot names another
        room ("Metadata corruption detected") instead of reading its pages; either way the
        pages are released.  Without aux slots, or with the checksum or ``verify_then_read``
        flags (no scenario of the family sets them), the base commit runs unchanged."""
        if not self.k.M or self.e.checksum or self.e.verify_then_read:
            super().decode_commit(s, n, r)
            return
        o = s.ops
        slot = s.aux_content[s.aux[r]]
        s.require(s.d_phase[r] == D_WAITING)
        s.require(o.all_(s.poll[r, pr] == POLL_SUCCESS for pr in self.prs))
        s.require(slot != UNWRITTEN)
        found, _ = self.classify_read(s, r)
        mine = slot == kv_of(r)
        n.outcome[r] = o.ite(mine, OUT_SUCCESS, OUT_ERROR)
        n.read[r] = o.ite(mine, found, READ_NONE)
        n.d_phase[r] = D_ENDED
        self.release_decode(s, n, r)


class Sglang0523(_ClientRooms, _Sglang0523Base):
    """SGLang 0.5.23's Mooncake prefill worker and decode scheduler on top of the base protocol,
    with its room-keyed bookkeeping when the scenario's rooms are the client's."""
