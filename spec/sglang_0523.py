"""SGLang 0.5.23 as shipped, with one prefill rank and one decode rank (Mooncake backend).

Three behaviours of the release that the base protocol does not have, each an override of one
action (paths under ``python/sglang/srt/disaggregation/``):

* ``mooncake/conn.py`` ``add_transfer_request`` shards chunks by destination session and
  ``transfer_worker`` sends them one synchronous ``batch_transfer_sync`` at a time, so with one
  prefill instance a write starts only when no other transfer call is still running
  (:meth:`Sglang0523.kv_transfer_write`);
* a prefill-side failure is a send that failed while its batch may still be writing
  (``batch_transfer_sync`` returning -1 on its timeout): the worker calls
  ``_poison_unsettled_send`` and ``conclude_failure`` and goes on with the next chunk
  (:meth:`Sglang0523.prefill_transfer_failed`);
* a poisoned room never gets its drain ack (``_maybe_ack_drained_abort`` drops the target), so
  decode's hold can end only by its deadline (:meth:`Sglang0523.prefill_drain_ack`).

Everything else is an engine flag of the scenarios (``spec/scenarios/2*-sglang-0.5.23-*.toml``):
both admission doors reject pending-error placeholders (``is_unadmitted_reject``), deferred
release is on for backends that declare ``supports_deferred_decode_kv_release`` and holds until
the drain ack or the 30 s deadline, every failure after the metadata was published defers.
Several ranks, room generations and aux slots are not modelled here (see the README).
"""

from __future__ import annotations

from .pd import PdProtocol
from .pd_state import P_SENDING, POLL_FAILED, WR_FLIGHT

__all__ = ["Sglang0523"]


class Sglang0523(PdProtocol):
    """SGLang 0.5.23's Mooncake prefill worker on top of the base protocol."""

    def _transfer_call_running(self, s, r: int, c: int):
        """Chunk ``c`` of ``r`` is in flight and its transfer call has not returned: every in-flight
        write except those of a failed send (``poll`` Failed from the prefill side)."""
        o = s.ops
        return o.and_(o.ge(s.wr[r, c], WR_FLIGHT), o.ne(s.poll[r], POLL_FAILED))

    def kv_transfer_write(self, s, n, r, c):
        """``transfer_worker`` dequeues chunk ``c`` and starts its synchronous
        ``batch_transfer_sync``: only when no other transfer call to this decode instance is
        running (one worker thread per destination session)."""
        o = s.ops
        others = [
            self._transfer_call_running(s, r2, c2)
            for r2 in range(self.k.R)
            for c2 in range(self.send_len(r2))
            if (r2, c2) != (r, c)
        ]
        s.require(o.not_(o.any_(others)))
        super().kv_transfer_write(s, n, r, c)

    def prefill_transfer_failed(self, s, n, r):
        """A send fails while its batch may still write (``batch_transfer_sync`` returns -1 on
        its timeout): ``_poison_unsettled_send`` then ``conclude_failure``; the write stays in
        flight and lands whenever it lands."""
        o = s.ops
        s.require(o.eq(s.p_phase[r], P_SENDING))
        s.require(self._writes_in_flight(s, r))
        super().prefill_transfer_failed(s, n, r)

    def prefill_drain_ack(self, s, n, r):
        """``_maybe_ack_drained_abort``: never for a poisoned room (a failed send), so decode
        falls back to its release timeout."""
        o = s.ops
        s.require(o.ne(s.poll[r], POLL_FAILED))
        super().prefill_drain_ack(s, n, r)
