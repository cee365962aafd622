"""Verdicts of conformance runs on vLLM 0.33.0: a stored counterexample replayed by the core's
:func:`~kvproof.checker.conform.replay_stored` with vLLM's harness and :data:`REAL_CLAIMS`, the
table of how each claim's failure shows in what vLLM's code did."""

from __future__ import annotations

from pathlib import Path

from kvproof.checker.conform import Diverged, Reproduced, replay_stored
from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

__all__ = ["Reproduced", "Diverged", "replay_trace", "REAL_CLAIMS"]


def _reads(o, trace) -> str | None:
    return "decode read " + ", ".join(f"R{r}: {x}" for r, x in enumerate(o.read))


def _xfer(trace) -> str:
    return "READ" if trace.scenario.config.engine.mode == "pull" else "WRITE"


def _requests(rs) -> str:
    return ", ".join(f"R{r}" for r in rs)


def _stranded(o, trace) -> str | None:
    if not o.stranded:
        return None
    return (f"decode holds the aborted load of {_requests(o.stranded)} while prefill's writer dropped its "
            "blocks: no WRITE will come")


def _rejected_held(o, trace) -> str | None:
    held = [r for r in range(len(o.prefill)) if o.prefill[r] == "held" and o.decode[r] == "ended"
            and o.outcome[r] == "aborted" and r not in o.prefill_notified]
    if not held:
        return None
    return (f"prefill holds the blocks of {_requests(held)}, which decode rejected, and no notification "
            "is on its way")


def _short(o, trace) -> str | None:
    if not o.count_short:
        return None
    return (f"decode holds {_requests(o.count_short)} with its notification count short: a prefill rank's "
            "WRITE failed to post and sent nothing")


def _hung(o, trace) -> str | None:
    held = [r for r in o.hung if o.decode[r] in ("waiting_for_remote_kvs", "held")]
    if not held:
        return None
    return (f"decode holds {_requests(held)} whose READ hung (no completion, no error): no finished_recving "
            "will come")


def _quiescent(o, trace) -> str | None:
    return _stranded(o, trace) or _rejected_held(o, trace) or _hung(o, trace)


def _held(o, trace) -> str | None:
    return _quiescent(o, trace) or _short(o, trace)


REAL_CLAIMS = {
    "decode_reads_only_own_pages": lambda o, t: _reads(o, t) if any(x in ("foreign", "cross_tenant") for x in o.read)
    else None,
    "no_cross_tenant_read": lambda o, t: _reads(o, t) if "cross_tenant" in o.read else None,
    "no_source_free_while_read": lambda o, t: (f"prefill freed the source of the posted {_xfer(t)} of "
                                               f"{_requests(o.source_freed_under_read)}"
                                               if o.source_freed_under_read else None),
    "no_write_after_release": lambda o, t: (f"decode freed the destination of the posted {_xfer(t)} of "
                                            f"{_requests(o.dest_freed_under_read)}"
                                            if o.dest_freed_under_read else None),
    "held_pages_are_released": _held,
    "requests_end": _held,
    "quiescent_holds_nothing": _quiescent,
}
"""How each claim's failure shows in what vLLM's code did (the detail of the verdict line), or
``None`` when it does not; a claim not named reproduces when every step's observation is equal."""


def replay_trace(path: str | Path) -> Reproduced | Diverged:
    """Replay a stored counterexample on vLLM's code (raises ``TraceError``/``ConformError``
    for input it cannot use)."""
    return replay_stored(path, harness_for, run_on_code, REAL_CLAIMS)
