"""The claims of a Dynamo spec: the names the other protocols use where the meaning is the same
(``decode_reads_only_own_pages``, ``no_source_free_while_read``, ``quiescent_holds_nothing``,
``held_pages_are_released``, ``requests_end``), and one of Dynamo's own, the availability claim
``no_orphaned_blocks``.  A mixin of :class:`~.protocol.DynamoPd`."""

from __future__ import annotations

from kvproof.model.framework import invariant, liveness, witness
from kvproof.spec.dynamo.state import (
    D_ENDED, D_HELD, D_LOADED, D_LOADING, G_OWN, P_COMMITTED, P_HELD, R_DROPPED, R_OPEN, W_DOWN, W_UP,
)

__all__ = ["DynamoClaims"]


class DynamoClaims:
    """What Dynamo's orchestration must keep, over the fields of :mod:`.state`."""

    def _prefill_holds(self, s, r):
        """Request ``r``'s prefill blocks are held (the worker's memory not yet freed)."""
        return s.ops.is_in(s.pf[r], P_HELD) & (s.worker != W_DOWN)

    # -- isolation -----------------------------------------------------------------------------
    @invariant
    def decode_reads_only_own_pages(self, s):
        """Every request decode loaded read the KV prefill computed for it, never memory the
        prefill worker had freed.  Broken by a shutdown that frees the GPU memory under a READ
        (ai-dynamo/dynamo#4917, ai-dynamo/dynamo#9344; ai-dynamo/dynamo#7319 and ai-dynamo/dynamo#9345: decode crashed or read garbage)."""
        return s.ops.all_(s.ops.implies(s.ops.is_in(s.dc[r], (D_LOADED, D_ENDED)), s.got[r] == G_OWN)
                          for r in self.req)

    @invariant
    def no_source_free_while_read(self, s):
        """The prefill blocks a decode READ is reading are never freed under it: while the READ is
        pending they are committed and the worker's memory is there.  Broken by a prefill
        worker's shutdown that does not drain its transfers (``drain = "none"``, or a drain
        whose budget a transfer outlasts)."""
        return s.ops.all_(s.ops.implies(s.dc[r] == D_LOADING, (s.pf[r] == P_COMMITTED) & (s.worker != W_DOWN))
                          for r in self.req)

    # -- availability ----------------------------------------------------------------------------
    @invariant
    def no_orphaned_blocks(self, s):
        """No prefill blocks are held for a request the router dropped: committed KV always has a
        decode worker coming to collect it, so it is freed by the transfer, not by a timeout
        (or never).  Broken by a cancel that reaches the prefill request after its commit
        (ai-dynamo/dynamo#7489, ai-dynamo/dynamo#14507) and by a dropped decode dispatch (before
        ai-dynamo/dynamo#13855)."""
        return s.ops.all_(~((s.rt[r] == R_DROPPED) & self._prefill_holds(s, r)) for r in self.req)

    @invariant(at="quiescent")
    def quiescent_holds_nothing(self, s):
        """Where nothing can move any more, no request holds blocks on either worker (the leak of
        ai-dynamo/dynamo#7489: blocks of an interrupted transfer never freed)."""
        return s.ops.all_(~self._prefill_holds(s, r) & ~s.ops.is_in(s.dc[r], D_HELD) for r in self.req)

    # -- liveness --------------------------------------------------------------------------------
    @liveness
    def held_pages_are_released(self, s):
        """Every held block (prefill or decode) is eventually freed, on every fair path."""
        out = [(f"R{r} prefill blocks held", self._prefill_holds(s, r)) for r in self.req]
        out += [(f"R{r} decode blocks held", s.ops.is_in(s.dc[r], D_HELD)) for r in self.req]
        return out

    @liveness
    def requests_end(self, s):
        """Every request the router took on is eventually answered, failed or dropped, on every
        fair path."""
        return [(f"R{r} open at the router", s.ops.is_in(s.rt[r], R_OPEN)) for r in self.req]

    # -- witnesses -------------------------------------------------------------------------------
    @witness
    def sometimes_request_succeeds(self, s):
        """Some request is answered on its own KV by a client that stayed (the path is live)."""
        return s.ops.any_((s.dc[r] == D_ENDED) & (s.got[r] == G_OWN) & (s.cancel[r] == 0) for r in self.req)

    @witness
    def sometimes_cancel_after_commit(self, s):
        """A client leaves a request whose KV prefill already committed (the window of ai-dynamo/dynamo#7489)."""
        return s.ops.any_((s.cancel[r] == 1) & (s.pf[r] == P_COMMITTED) for r in self.req)

    @witness
    def sometimes_shutdown_mid_transfer(self, s):
        """The prefill worker is shutting down (or down) while a READ is pending."""
        return (s.worker != W_UP) & s.ops.any_(s.dc[r] == D_LOADING for r in self.req)
