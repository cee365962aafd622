"""The codes of a Dynamo spec's fields: where a request is at the router, at the prefill worker
and at the decode worker, and what the prefill worker's process is doing.

Each field holds a code of one value domain; the names below are what the actions and claims
compare against, the labels (:data:`ROUTER_LABELS`, ...) what ``show`` prints.
"""

from __future__ import annotations

__all__ = [
    "R_IDLE", "R_PREFILL", "R_HANDED", "R_DECODE", "R_DONE", "R_DROPPED", "ROUTER_LABELS",
    "P_NONE", "P_RUNNING", "P_COMMITTED", "P_FREED", "P_HELD", "PREFILL_LABELS",
    "D_NONE", "D_LOADING", "D_LOADED", "D_ENDED", "D_HELD", "DECODE_LABELS",
    "G_NONE", "G_OWN", "G_FREED", "GOT_LABELS",
    "W_UP", "W_DRAINING", "W_DOWN", "WORKER_LABELS", "R_OPEN",
]

# rt[r]: the frontend's PrefillRouter (lib/llm/src/kv_router/prefill_router/)
R_IDLE, R_PREFILL, R_HANDED, R_DECODE, R_DONE, R_DROPPED = range(6)
ROUTER_LABELS = ("idle", "prefill_stream_open", "handoff_received", "decode_dispatched", "done", "dropped")
R_OPEN = (R_PREFILL, R_HANDED, R_DECODE)  # the router still works on the request

# pf[r]: the request's KV blocks on the prefill worker
P_NONE, P_RUNNING, P_COMMITTED, P_FREED = range(4)
PREFILL_LABELS = ("none", "running", "committed", "freed")
P_HELD = (P_RUNNING, P_COMMITTED)

# dc[r]: the request on the decode worker (its blocks and its NIXL READ)
D_NONE, D_LOADING, D_LOADED, D_ENDED = range(4)
DECODE_LABELS = ("none", "loading", "loaded", "ended")
D_HELD = (D_LOADING, D_LOADED)

# got[r]: what decode's READ copied into the request's blocks
G_NONE, G_OWN, G_FREED = range(3)
GOT_LABELS = ("none", "own_kv", "freed_memory")

# worker: the prefill worker's process
W_UP, W_DRAINING, W_DOWN = range(3)
WORKER_LABELS = ("up", "draining", "down")
