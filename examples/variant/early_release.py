"""My engine frees held pages as soon as prefill has *seen* the ABORT, without a drain ack."""

from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.state import D_ENDED, D_HELD, PAB_NONE


class EarlyRelease(PdProtocol):
    def decode_release_deferred(self, s, n, r):
        """Release once prefill handled the ABORT (it stopped issuing, not drained)."""
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_HELD))
        s.require(o.all_(o.ne(s.p_abort[r, pr], PAB_NONE) for pr in self.prs))
        n.d_phase[r] = D_ENDED
        self.release_decode(s, n, r)
