"""Replay: run a kvproof trace's events on SGLang 0.5.23's code and compare every step.

After each event the model's state and the harness are reduced to the same
:class:`~.harness.Observation` (held entries, decode page owners and contents, finish reasons,
reads, ABORTs sent with or without a generation, a page released under an in-flight write);
the first step where they differ, or where the code cannot take the step, is the divergence.
A trace whose every step matches *reproduces* on the real code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ...model.machine import Machine
from ...spec.pd_state import D_HELD, D_NEW, OUT_LABELS, READ_LABELS, WR_FLIGHT
from ...spec.scenario import Scenario
from .harness import Divergent, Harness, HarnessError, Observation, Options

__all__ = ["ConformError", "StepResult", "Conformance", "harness_for", "model_observation", "run_on_code",
           "UNSUPPORTED_FLAGS"]

UNSUPPORTED_FLAGS = {
    "receipt_ack_taken_as_drain": "SGLang 0.5.23 releases only on a generation-matched drain ack",
    "checksum": "the transfer checksum needs a GPU digest kernel",
    "request_streams": "the harness serves each request slot once",
}


class ConformError(ValueError):
    """A trace or scenario the harness cannot run (one line: which flag and why)."""


@dataclass(frozen=True)
class StepResult:
    """One step: its label, and what differed (empty when model and code agree)."""

    step: int
    label: str
    differences: tuple[str, ...] = ()


@dataclass
class Conformance:
    """The outcome of running a sequence of events on the code: ``diverged_at`` is the first
    step that differs (``None`` when every step matched)."""

    steps: list[StepResult] = field(default_factory=list)
    diverged_at: int | None = None
    reason: str = ""

    @property
    def agrees(self) -> bool:
        """Every step matched."""
        return self.diverged_at is None


def harness_for(scenario: Scenario, spec) -> Harness:
    """A harness configured like ``scenario``'s engine; :class:`ConformError` for flags the
    real code has no counterpart of."""
    e = scenario.config.engine
    for flag, why in UNSUPPORTED_FLAGS.items():
        if getattr(e, flag):
            raise ConformError(f"scenario {scenario.name} sets engine.{flag}: {why}")
    if e.release_policy == "drain_ack":
        raise ConformError(f"scenario {scenario.name}: release_policy drain_ack has no deadline; "
                           "SGLang 0.5.23 always has one (drain_ack_or_timeout)")
    opts = Options(deferred_release=e.release_policy != "immediate", timeout_ticks=e.timeout)
    reqs = [(spec.k.tenant[r], spec.pages(r), spec.over_long(r)) for r in range(spec.k.R)]
    return Harness(reqs, scenario.config.decode_pages, scenario.config.prefill_pages, opts)


def model_observation(machine: Machine, state: bytes, aborts: tuple, war: bool) -> Observation:
    """The model's state in the harness's terms (``aborts`` and ``war`` carry history)."""
    spec = machine.spec
    lay = spec.layout
    s = state
    R, D = spec.k.R, spec.k.D

    def get(name, *idx):
        return s[lay.slot(name, *idx)]

    return Observation(
        held=frozenset(r for r in range(R) if get("d_phase", r) == D_HELD),
        owner=tuple(get("owner", p) for p in range(D)),
        content=tuple(get("content", p) for p in range(D)),
        outcome=tuple(OUT_LABELS[get("outcome", r)] for r in range(R)),
        aborts=aborts,
        read=tuple(READ_LABELS[get("read", r)] for r in range(R)),
        write_after_release=war,
    )


def _write_after_release(machine: Machine, state: bytes) -> bool:
    spec, lay = machine.spec, machine.spec.layout
    for r in range(spec.k.R):
        for c in range(spec.send_len(r)):
            if state[lay.slot("wr", r, c)] >= WR_FLIGHT:
                p = state[lay.slot("dest", r, c)]
                if state[lay.slot("owner", p)] != r + 1:
                    return True
    return False


def run_on_code(machine: Machine, harness: Harness, actions: Sequence[int]) -> Conformance:
    """Run ``actions`` from the model's initial state on both the model and ``harness``,
    comparing after every step; stops at the first divergence."""
    spec, lay = machine.spec, machine.spec.layout
    out = Conformance()
    state = machine.init
    aborts: list[tuple[int, bool]] = []
    war = False
    for k, aid in enumerate(actions, start=1):
        inst = machine.instances[aid]
        label = machine.label(aid)
        nxt = machine.step(state, aid)
        if nxt is None:
            out.diverged_at, out.reason = k, f"{label} is not enabled in the model there"
            return out
        try:
            getattr(harness, inst.name)(*inst.args)
        except Divergent as e:
            out.diverged_at, out.reason = k, f"{label}: {e}"
            out.steps.append(StepResult(k, label, (str(e),)))
            return out
        except HarnessError as e:
            out.diverged_at, out.reason = k, f"{label}: {e}"
            out.steps.append(StepResult(k, label, (str(e),)))
            return out
        except Exception as e:  # SGLang itself raised: that is what the code did
            import traceback, os
            if os.environ.get("KVPROOF_CONFORM_DEBUG"):
                traceback.print_exc()
            out.diverged_at, out.reason = k, f"{label}: SGLang raised {type(e).__name__}: {e}"
            out.steps.append(StepResult(k, label, (out.reason,)))
            return out
        for r in range(spec.k.R):
            # an abort before decode had the request reaches prefill directly, not as an ABORT
            if state[lay.slot("d_phase", r)] == D_NEW:
                continue
            if state[lay.slot("abort_tx", r)] == 0 and nxt[lay.slot("abort_tx", r)] == 1:
                aborts.append((r, nxt[lay.slot("d_phase", r)] == D_HELD))
        war = war or _write_after_release(machine, nxt)
        model = model_observation(machine, nxt, tuple(aborts), war)
        code = harness.observe()
        code_aborts = tuple((r, gen is not None) for r, gen in code.aborts)
        code = Observation(code.held, code.owner, code.content, code.outcome, code_aborts, code.read,
                           code.write_after_release)
        diffs = model.differences(code)
        if model.aborts != code.aborts:
            diffs.append(f"ABORTs (request, generation armed): model {_aborts(model.aborts)}, "
                         f"SGLang {_aborts(code.aborts)}")
        diffs += harness.anomalies()
        out.steps.append(StepResult(k, label, tuple(diffs)))
        if diffs:
            out.diverged_at, out.reason = k, f"{label}: " + "; ".join(diffs)
            return out
        state = nxt
    return out


def _aborts(items) -> str:
    return "[" + ", ".join(f"R{r} {'with' if g else 'without'} generation" for r, g in items) + "]"
