"""A transfer engine that assumes its writes complete in order: a rank counts as drained as
soon as its last posted write has landed, and acks ABORT then."""
from kvproof.spec.sglang.protocol import WR_FLIGHT, PdProtocol


class InOrderCompletion(PdProtocol):
    def rank_writes_in_flight(self, s, r, pr):
        """Only the last chunk's write is checked."""
        return s.wr[r, pr, self.send_len(r) - 1] >= WR_FLIGHT


SCENARIO = {
    "name": "in-order-completion",
    "title": "Drain ack once the last write landed, assuming in-order completion",
    "sizes": {"decode_pages": 2, "prefill_pages": 4, "context_limit": 2},
    "requests": [{"tenant": "A", "pages": 2}, {"tenant": "B", "pages": 2}],
    "engine": {"release_policy": "drain_ack"},
    "expect": {
        "no_write_after_release": "violated",
        "decode_reads_only_own_pages": "violated",
        "no_cross_tenant_read": "violated",
        "no_source_free_while_read": "violated", "default": "verified",  # the rest hold
    },
}
