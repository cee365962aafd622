"""How reports draw a vLLM trace: what :class:`~.protocol.VllmPd` declares for its diagrams.

Six lanes (client, prefill, prefill's blocks ``q0..``, NIXL, decode's blocks ``p0..``, decode),
the two block pools, decode computing on its block (``read``), and the field changes that are
messages: the request finishing at prefill under a lease, decode taking it with prefill's
``kv_transfer_params``, the READ (pull) or WRITE (push, after decode's ``PUSH_REG``) posted and
completing, its notification, the lease expiring, what the client gets.  Reservations, releases,
data landing on a block and decode's read are derived from the pools by
:mod:`kvproof.model.narrate`, so a block that another request's KV lands on is drawn as the
hazard it is; the prose of a step stays in :mod:`.story`.
"""

from __future__ import annotations

from kvproof.model.narrate import Busy, Narration, Pool, Read, Signal
from kvproof.model.narration import Lane
from kvproof.spec.vllm.state import (
    D_ENDED, D_HELD, D_NEW, D_WAITING, OUT_ABORTED, OUT_ERROR, OUT_SUCCESS, P_ABORTED, P_EXPIRED, P_HELD, P_SENT,
    RD_DONE, RD_FAILED, RD_POSTED, WN_DONE, WN_FAIL,
)

__all__ = ["narration"]

LANES = (
    Lane("client", "client"),
    Lane("prefill", "prefill (producer)"),
    Lane("prefill_blocks", "prefill blocks"),
    Lane("nixl", "NIXL transfer"),
    Lane("decode_blocks", "decode blocks"),
    Lane("decode", "decode (consumer)"),
)
ACTORS = {"prefill": "prefill", "decode": "decode", "nixl": "nixl", "clock": None}

_REASONS = {
    "prefill_get_new_notifs": "on finished_sending",
    "prefill_get_new_notifs_part": "on finished_sending",
    "prefill_get_new_notifs_mla_rank": "on finished_sending",
    "prefill_get_transfer_results": "when its WRITE is done",
    "prefill_reap_expired_lease": "when the lease expired",
    "prefill_reap_expired_send_leases_in_order": "when the lease expired",
    "prefill_abort_finished": "on abort",
    "decode_finished_recving": "on finished_recving",
    "decode_pop_done_transfers": "on finished_recving",
    "decode_abort": "on abort",
    "decode_update_from_output": "when the last GPU step is done",
}


def narration(spec) -> Narration:
    """The declaration for ``spec`` (a :class:`~.protocol.VllmPd`): which side posts the
    transfer and which is told of its completion depend on the mode (pull: decode READs and
    prefill is notified; push: prefill WRITEs and decode is notified)."""
    pull = spec.e.mode == "pull"
    verb, poster, told = ("READ", "decode", "prefill") if pull else ("WRITE", "prefill", "decode")
    k = spec.k

    def whose(content: int) -> int:  # a request's prefix KV (V11) is that request's, in a prefill block
        return content - k.R if content > k.R else content

    def busy(pages: str) -> tuple[Busy, ...]:
        return tuple(Busy(f, (RD_POSTED,), pages, verb) for f in ("rd", "wr"))

    transfer = []
    for name, who in (("rd", "{request}"), ("wr", "{request} {prefill_rank}")):
        transfer += [
            Signal(name, (RD_POSTED,), poster, "nixl", f"{who}: {verb} posted"),
            Signal(name, (RD_DONE,), "nixl", poster, f"{who}: {verb} complete"),
            Signal(name, (RD_FAILED,), "nixl", poster, f"{who}: {verb} failed", since=(RD_POSTED,)),
        ]
    return Narration(
        lanes=LANES,
        actors=ACTORS,
        signals=(
            Signal("p_phase", (P_HELD,), "client", "prefill", "{request} prefilled (max_tokens=1): blocks kept "
                   "under a lease", "request"),
            Signal("d_phase", (D_WAITING,), "client", "decode", "{request} with prefill's kv_transfer_params",
                   "request", since=(D_NEW,)),
            Signal("reg", (1,), "decode", "prefill", "{request}: PUSH_REG"),
            *transfer,
            Signal("notif", (1,), "nixl", told, "{request}: completion notification"),
            Signal("wnotif", (WN_DONE,), "nixl", told, "{request} {prefill_rank}: completion notification"),
            Signal("wnotif", (WN_FAIL,), "nixl", told, "{request} {prefill_rank}: PUSH_FAIL"),
            Signal("p_phase", (P_EXPIRED,), "prefill", "prefill", "{request}: lease expired", "note"),
            Signal("p_phase", (P_SENT,), "prefill", "prefill", "{request}: finished_sending", "note"),
            Signal("p_phase", (P_ABORTED,), "client", "prefill", "client aborts {request} at prefill", "request"),
            Signal("d_phase", (D_HELD,), "decode", "decode", "{request} aborted: blocks held for its READ", "note"),
            Signal("d_phase", (D_ENDED,), "decode", "client", "{request} rejected", since=(D_NEW,)),
            Signal("outcome", (OUT_ABORTED,), "client", "decode", "client aborts {request}", "request"),
            Signal("outcome", (OUT_SUCCESS,), "decode", "client", "{request}: HTTP 200"),
            Signal("outcome", (OUT_ERROR,), "decode", "client", "{request}: error"),
        ),
        pools=(
            # a posted transfer whose data has not moved still reads its source block and writes its
            # destination block: freeing either then is the hazard (no_source_free_while_read)
            Pool("prefill", owner="src_owner", content="src_content", lane="prefill_blocks", whose=whose,
                 reasons=_REASONS, title="prefill blocks", busy=busy("src")),
            # decode's block is for the request's own (suffix) KV: its prefix KV there is a hazard (V11)
            Pool("decode", owner="owner", content="content", lane="decode_blocks", reasons=_REASONS,
                 title="decode blocks", busy=busy("dest")),
        ),
        reads=(Read("read", "dest", "decode", "decode"),),
    )
