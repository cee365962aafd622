"""Replay: re-execute a list of actions and compare with stored states.

A trace stores actions *and* states.  :func:`run_actions` derives the states with the compiled
engine (the one that found the path); :func:`replay` is a second opinion: it re-executes every
step with the reference interpreter (:func:`~.machine.reference_step`, the definition of the
spec's meaning), not the compiled code, so a compiler bug cannot confirm its own trace.  It
reports the first step that does not fit: an action that is disabled there, or a state that
differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kvproof.model.machine import Machine, reference_step

__all__ = ["ReplayError", "Divergence", "run_actions", "replay"]


class ReplayError(ValueError):
    """The actions cannot be run at all (an unknown action id)."""


@dataclass(frozen=True)
class Divergence:
    """Where replay left the stored trace: ``step`` is 0 for the initial state."""

    step: int
    reason: str


def run_actions(machine: Machine, actions: Sequence[int]) -> list[bytes]:
    """The states visited by running ``actions`` from the initial state.

    Raises :class:`ReplayError` for an unknown action id, or one disabled where it is taken.
    """
    states = [machine.init]
    for k, aid in enumerate(actions, start=1):
        if not 0 <= aid < len(machine.instances):
            raise ReplayError(f"step {k}: no action instance {aid}")
        nxt = machine.step(states[-1], aid)
        if nxt is None:
            raise ReplayError(f"step {k}: {machine.label(aid)} is not enabled there")
        states.append(nxt)
    return states


def replay(machine: Machine, actions: Sequence[int], stored: Sequence[bytes]) -> Divergence | None:
    """Run ``actions`` with the reference interpreter and compare every state with
    ``stored``; ``None`` when all match."""
    if len(stored) != len(actions) + 1:
        return Divergence(0, f"{len(stored)} states for {len(actions)} actions")
    init = bytes(machine.spec.init_state())
    if stored[0] != init:
        return Divergence(0, "the initial state differs from the spec's")
    state = init
    for k, aid in enumerate(actions, start=1):
        if not 0 <= aid < len(machine.instances):
            return Divergence(k, f"no action instance {aid}")
        ref = reference_step(machine.spec, state, aid)
        if ref is None:
            return Divergence(k, f"{machine.label(aid)} is not enabled there")
        nxt = bytes(ref)
        if nxt != stored[k]:
            fields = _differing_fields(machine, nxt, stored[k])
            return Divergence(k, f"{machine.label(aid)} gives a different state ({fields})")
        state = nxt
    return None


def _differing_fields(machine: Machine, a: bytes, b: bytes) -> str:
    da, db = machine.spec.layout.decode(a), machine.spec.layout.decode(b)
    names = [k for k in da if da[k] != db.get(k)]
    return "differs in " + ", ".join(names) if names else "same fields"
