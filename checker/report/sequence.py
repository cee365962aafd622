"""A trace as messages between the actors of a protocol: the data behind sequence diagrams.

Every step of a trace becomes zero or more :class:`~kvproof.model.narration.Message` s between
the lanes the protocol names (:meth:`~kvproof.model.framework.Spec.lanes`); the protocol
derives them from the step (:meth:`~kvproof.model.framework.Spec.messages`).  In a
counterexample, the hazards of the last step (the step after which the claim fails) are the
*violation*; a read among them is the violating read the diagrams mark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvproof.checker.traces import Trace
from kvproof.model.narration import Lane, Message, Note

__all__ = ["Lane", "Message", "StepStory", "trace_story", "trace_lanes"]


@dataclass(frozen=True)
class StepStory:
    """One step: its number, action label and actor, the spec's notes, and its messages."""

    step: int
    label: str
    actor: str
    notes: tuple[Note, ...]
    messages: tuple[Message, ...] = field(default_factory=tuple)


def trace_lanes(trace: Trace) -> tuple[Lane, ...]:
    """The lanes of ``trace``'s protocol, left to right."""
    return tuple(trace.machine.spec.lanes())


def trace_story(trace: Trace) -> list[StepStory]:
    """Every step of ``trace`` (1..n) as messages; the last step's hazards are marked as the
    violation when the trace is a counterexample.  Labels, notes and messages name what the
    protocol renames as renderings show it (:meth:`~kvproof.checker.traces.Trace.shown`)."""
    spec = trace.machine.spec
    out = []
    for k in range(1, len(trace.states)):
        inst = trace.machine.instances[trace.actions[k - 1]]
        args = dict(zip(inst.action.params, inst.args))
        pre, post = trace.states[k - 1], trace.states[k]
        label = trace.machine.label(inst.aid)
        notes = tuple(Note(n.level, trace.shown(n.text, k)) for n in spec.story(pre, inst.name, args, post))
        msgs = [_with(m, text=trace.shown(m.text, k)) for m in spec.messages(k, pre, inst, post, label)]
        out.append(StepStory(k, trace.shown(label, k), inst.action.actor, notes, tuple(msgs)))
    if out and trace.kind == "counterexample":
        last = out[-1]
        marked = [m for m in last.messages if m.hazard] or list(last.messages)
        msgs = tuple(_with(m, violation=True) if m in marked else m for m in last.messages)
        out[-1] = StepStory(last.step, last.label, last.actor, last.notes, msgs)
    return out


def _with(m: Message, **kw) -> Message:
    return Message(**{**m.__dict__, **kw})
