"""Verdicts of conformance runs on vLLM 0.33.0, as nouns: a trace is :class:`Reproduced` on the
real code or :class:`Diverged` at a step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvproof.checker.traces import Trace, read_trace
from kvproof.spec.vllm.conform.replay import Conformance, harness_for, run_on_code

__all__ = ["Reproduced", "Diverged", "replay_trace", "REAL_CLAIMS"]

# how each claim's failure shows in what the code did (the rest: observations equal at every step)
REAL_CLAIMS = {
    "decode_reads_only_own_pages": lambda o: any(x in ("foreign", "cross_tenant") for x in o.read),
    "no_cross_tenant_read": lambda o: "cross_tenant" in o.read,
    "no_source_free_while_read": lambda o: bool(o.source_freed_under_read),
    "no_write_after_release": lambda o: bool(o.dest_freed_under_read),
    "held_pages_are_released": lambda o: bool(o.stranded),
    "requests_end": lambda o: bool(o.stranded),
    "quiescent_holds_nothing": lambda o: bool(o.stranded),
}


@dataclass(frozen=True)
class Reproduced:
    """Every step matched and the claim fails in the code too (``how`` says how that was seen)."""

    path: Path
    claim: str
    steps: int
    how: str
    verdict: str = "reproduced"


@dataclass(frozen=True)
class Diverged:
    """The code differs from the model at ``step`` (1-based); ``reason`` names what differed."""

    path: Path
    claim: str
    step: int
    reason: str
    verdict: str = "diverged"


def replay_trace(path: str | Path) -> Reproduced | Diverged:
    """Replay a stored counterexample on vLLM's code (raises ``TraceError``/``ConformError``
    for input it cannot use)."""
    trace: Trace = read_trace(path)
    harness = harness_for(trace.scenario, trace.machine.spec)
    try:
        result: Conformance = run_on_code(trace.machine, harness, trace.actions)
        observed = harness.observe()
    finally:
        harness.close()
    p = Path(path)
    if not result.agrees:
        return Diverged(p, trace.claim, result.diverged_at, result.reason)
    check = REAL_CLAIMS.get(trace.claim)
    if check is None:
        return Reproduced(p, trace.claim, len(trace), "every step's observation equal")
    if not check(observed):
        return Diverged(p, trace.claim, len(trace), f"{trace.claim} does not fail in the code at the last step")
    xfer = "READ" if trace.scenario.config.engine.mode == "pull" else "WRITE"
    detail = {"decode_reads_only_own_pages": f"decode read {_reads(observed)}",
              "no_cross_tenant_read": f"decode read {_reads(observed)}",
              "no_source_free_while_read": f"prefill freed the source of the posted {xfer} of "
              + ", ".join(f"R{r}" for r in observed.source_freed_under_read),
              "no_write_after_release": f"decode freed the destination of the posted {xfer} of "
              + ", ".join(f"R{r}" for r in observed.dest_freed_under_read)}.get(trace.claim)
    if detail is None:  # a liveness or quiescence claim: an aborted push load nothing will answer
        detail = ("decode holds the aborted load of " + ", ".join(f"R{r}" for r in observed.stranded)
                  + " while prefill's writer dropped its blocks: no WRITE will come")
    return Reproduced(p, trace.claim, len(trace), f"{trace.claim} fails in the code ({detail})")


def _reads(o) -> str:
    return ", ".join(f"R{r}: {x}" for r, x in enumerate(o.read))
