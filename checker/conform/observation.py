"""What is compared between the model and SGLang's code after every step, in the model's
terms: one :class:`Observation` from each side."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["Observation"]


@dataclass(frozen=True)
class Observation:
    """One side's state after a step.

    ``held``: request slots in ``_deferred_releases``; ``owner``: decode page -> slot + 1 (0
    free); ``content``: per (shard, page), whose KV it holds (the model's content codes);
    ``outcome`` and ``read`` per slot; ``aborts``: (slot, prefill rank, armed) of every ABORT
    sent so far, sorted; ``acked``: per (slot, prefill rank), decode recorded that rank's drain
    ack for the armed generation; ``aux_owner`` / ``aux_content`` per metadata slot (only with
    aux slots); ``write_after_release``: a page (or slot) was released under an in-flight write.
    """

    held: frozenset[int] = frozenset()
    owner: tuple[int, ...] = ()
    content: tuple[int, ...] = ()
    outcome: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    aborts: tuple[tuple[int, int, bool], ...] = ()
    acked: tuple[int, ...] = ()
    aux_owner: tuple[int, ...] = ()
    aux_content: tuple[int, ...] = ()
    write_after_release: bool = False

    def differences(self, other: "Observation") -> list[str]:
        """What differs, one phrase per field (``self`` is the model, ``other`` the code)."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                out.append(f"{f.name}: model {_show(f.name, a)}, SGLang {_show(f.name, b)}")
        return out


def _show(name: str, v: Any) -> str:
    if name == "held":
        return "{" + ", ".join(f"R{r}" for r in sorted(v)) + "}"
    if name == "aborts":
        return "[" + ", ".join(f"R{r}->P{pr} {'armed' if g else 'unarmed'}" for r, pr, g in v) + "]"
    if isinstance(v, tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)
