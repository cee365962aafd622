"""My engine frees held pages as soon as prefill has *seen* the ABORT, without a drain ack."""
from kvproof.spec.sglang.protocol import D_HELD, PAB_NONE, PdProtocol


class EarlyRelease(PdProtocol):
    def decode_release_deferred(self, s, n, r):
        """Release once prefill handled the ABORT (it stopped issuing, not drained)."""
        saw_abort = s.ops.all_(s.p_abort[r, pr] != PAB_NONE for pr in self.prs)
        with s.widen((s.d_phase[r] == D_HELD) & saw_abort):
            super().decode_release_deferred(s, n, r)
