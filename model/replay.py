"""Replay: re-execute a list of actions on the compiled spec and compare with stored states.

A trace stores actions *and* states; the states are derived by replay, and replay must
reproduce them, which also shows the engine is deterministic.  :func:`replay` reports the first
step that does not fit: an action that is disabled there, or a state that differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .machine import Machine

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
    """Run ``actions`` and compare every state with ``stored``; ``None`` when all match."""
    if len(stored) != len(actions) + 1:
        return Divergence(0, f"{len(stored)} states for {len(actions)} actions")
    if stored[0] != machine.init:
        return Divergence(0, "the initial state differs from the spec's")
    state = machine.init
    for k, aid in enumerate(actions, start=1):
        nxt = machine.step(state, aid)
        if nxt is None:
            return Divergence(k, f"{machine.label(aid)} is not enabled there")
        if nxt != stored[k]:
            fields = _differing_fields(machine, nxt, stored[k])
            return Divergence(k, f"{machine.label(aid)} gives a different state ({fields})")
        state = nxt
    return None


def _differing_fields(machine: Machine, a: bytes, b: bytes) -> str:
    da, db = machine.spec.layout.decode(a), machine.spec.layout.decode(b)
    names = [k for k in da if da[k] != db.get(k)]
    return "differs in " + ", ".join(names) if names else "same fields"
