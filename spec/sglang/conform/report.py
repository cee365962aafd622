"""Verdicts of conformance runs on SGLang 0.5.23: a stored counterexample replayed by the core's
:func:`~kvproof.checker.conform.replay_stored` with SGLang's harness and :data:`REAL_CLAIMS`, the
table of how each claim's failure shows in what SGLang's code did."""

from __future__ import annotations

from pathlib import Path

from kvproof.checker.conform import Diverged, Reproduced, replay_stored
from kvproof.spec.sglang.conform.replay import harness_for, run_on_code

__all__ = ["Reproduced", "Diverged", "replay_trace", "REAL_CLAIMS"]

REAL_CLAIMS = {
    "decode_reads_only_own_pages": lambda o, t: "" if any(x in ("foreign", "cross_tenant") for x in o.read) else None,
    "no_cross_tenant_read": lambda o, t: "" if "cross_tenant" in o.read else None,
    "no_write_after_release": lambda o, t: "" if o.write_after_release else None,
}
"""How each claim's failure shows in what SGLang's code did (``""``: it fails, no detail), or
``None`` when it does not; a claim not named reproduces when every step's observation is equal."""


def replay_trace(path: str | Path) -> Reproduced | Diverged:
    """Replay a stored counterexample on SGLang's code (raises ``TraceError``/``ConformError``
    for input it cannot use)."""
    return replay_stored(path, harness_for, run_on_code, REAL_CLAIMS)
