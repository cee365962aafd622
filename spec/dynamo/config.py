"""A Dynamo scenario's ``[config]`` table: the deployment the router and the workers run in.

Each setting is one of Dynamo's code paths before or after a public fix (or a setting of the
engine under it), named in its comment; :class:`DynamoConfig` is the configuration every spec
class of :mod:`kvproof.spec.dynamo` is built from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DynamoConfig"]


@dataclass(frozen=True)
class DynamoConfig:
    """How Dynamo (``ai-dynamo`` 1.6.1, or a release before one of its fixes) orchestrates one
    prefill worker and one decode worker for ``requests`` requests.

    * ``cancel_reaches_prefill``: a client's disconnect kills the prefill request's context while
      the prefill response stream is still open (before ai-dynamo/dynamo#7489 ``link_child`` tied
      the prefill context to the client's; ai-dynamo/dynamo#14507 proposes to link it again for
      workers that declare ``PreCommit``, revoked only when the handoff reaches the router).
    * ``dispatch_decode_after_cancel``: the router still routes decode for a request whose client
      left after prefill (ai-dynamo/dynamo#13855; before it ``cancel_on_stop`` dropped the
      dispatch).
    * ``kv_transfer_timeout``: the engine frees committed prefill blocks that no transfer
      collected after a timeout (TensorRT-LLM's ``kv_transfer_timeout_ms``, 60 s by default
      since TensorRT-LLM PR 12249; ``null`` turns it off).
    * ``shutdown``: the operator may stop the prefill worker (SIGTERM) while requests are in
      flight (``graceful_shutdown_with_discovery``).
    * ``drain``: what the prefill worker waits for between the grace period and freeing its GPU
      memory: ``none`` (``dynamo/vllm/main.py`` of 1.6.1 installs its signal handlers with no
      ``drain_callback``; the unified backend's ``drain()`` was a no-op for vLLM,
      ai-dynamo/dynamo#9344) or ``until_idle`` (``dynamo/trtllm/main.py``'s
      ``_make_drain_callback``: no active or queued request left in the engine).
    * ``transfer_outlasts_drain``: a transfer can outlast the drain's 30 s budget
      (``_DEFAULT_DRAIN_TIMEOUT_SECS``), after which shutdown proceeds anyway.
    """

    requests: int = 2
    cancel_reaches_prefill: bool = False
    dispatch_decode_after_cancel: bool = True
    kv_transfer_timeout: bool = True
    shutdown: bool = False
    drain: Literal["none", "until_idle"] = "none"
    transfer_outlasts_drain: bool = False

    def __post_init__(self):
        """Refuse sizes the explicit search is not meant for, and a drain without a shutdown."""
        if not 1 <= self.requests <= 3:
            raise ValueError(f"requests: expected a whole number in 1..3, got {self.requests}")
        if not self.shutdown and (self.drain != "none" or self.transfer_outlasts_drain):
            raise ValueError("drain, transfer_outlasts_drain: only with shutdown = true (no shutdown, nothing drains)")
