"""What a step means in the engine's terms, for rendering traces.

:meth:`PdStory.story` looks at one concrete step (pre-state, action, post-state) and returns
notes such as "decode R1 (tenant B) read p1 holding R0's KV (tenant A)".  It reads concrete
states only; it is not part of the transition relation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .pd_state import FREE, READ_NONE, UNWRITTEN, WR_FLIGHT

__all__ = ["Note", "PdStory"]


@dataclass(frozen=True)
class Note:
    """One remark on a step; ``level`` is ``info`` or ``hazard`` (rendered highlighted)."""

    level: str
    text: str


class PdStory:
    """Mixin of :class:`~kvproof.spec.pd.PdProtocol`: notes on concrete steps."""

    def _get(self, state: Sequence[int], name: str, *idx: int) -> int:
        return state[self.layout.slot(name, *idx)]

    def content_label(self, code: int) -> str:
        """Whose KV a content code stands for, with the tenant: ``R0's KV (tenant A)``."""
        k = self.k
        if code == UNWRITTEN:
            return "nothing written"
        if code <= k.R:
            r = code - 1
            return f"R{r}'s KV (tenant {k.tenants[k.tenant[r]]})"
        return f"an earlier request's KV (tenant {k.tenants[code - 1 - k.R]})"

    def story(self, pre: Sequence[int], name: str, args: dict[str, int], post: Sequence[int]) -> list[Note]:
        """Notes for the step ``name(args)`` from ``pre`` to ``post``."""
        r = args.get("req")
        if r is None:
            return []
        notes = self._admission_notes(name, r)
        if name == "decode_commit":
            notes += self._read_notes(pre, r, post)
        elif name == "kv_write_lands":
            notes += self._landing_notes(pre, r, args["chunk"])
        else:
            notes += self._release_notes(pre, r, post)
        return notes

    def _admission_notes(self, name: str, r: int) -> list[Note]:
        if not self.over_long(r):
            return []
        size = f"{self.pages(r)} pages > the {self.max_input_pages}-page input limit"
        if name == "prefill_bootstrap_add":
            if self.pending_error(r):
                return [Note("hazard", f"R{r} fails validate_input_length ({size}): pending error, "
                                       "queued anyway with a one-token placeholder")]
            return [Note("info", f"R{r} fails validate_input_length ({size}): rejected at the prefill door")]
        if name == "decode_prealloc" and not self.e.reject_at_decode_door:
            return [Note("hazard", f"decode reserves all {self.pages(r)} pages for R{r}, whose prompt was rejected")]
        if name == "decode_prealloc":
            return [Note("info", f"R{r} rejected at the decode door before any reservation")]
        if name == "prefill_transfer_done":
            return [Note("hazard", f"the placeholder's {self.send_len(r)} page is all prefill sent of the "
                                   f"{self.pages(r)} decode reserved, and the transfer reports Success")]
        if name == "prefill_forward" and self.e.retire_pending_error_prefill:
            return [Note("info", f"R{r} is retired with its pending error: no KV is sent, the transfer fails")]
        return []

    def _read_notes(self, pre: Sequence[int], r: int, post: Sequence[int]) -> list[Note]:
        k = self.k
        if self._get(post, "read", r) == READ_NONE:
            return [Note("info", f"checksum mismatch: R{r} fails instead of decoding")]
        mine = k.tenants[k.tenant[r]]
        notes = []
        for c in range(self.pages(r)):
            p = self._get(pre, "dest", r, c)
            held = self._get(pre, "content", p)
            if held != r + 1:
                notes.append(Note("hazard", f"decode R{r} (tenant {mine}) reads p{p} holding {self.content_label(held)}"))
        return notes

    def _landing_notes(self, pre: Sequence[int], r: int, c: int) -> list[Note]:
        p = self._get(pre, "dest", r, c)
        owner = self._get(pre, "owner", p)
        q = self._get(pre, "src", r, c)
        sent = self._get(pre, "src_content", q)
        notes = []
        if owner != r + 1:
            who = "free" if owner == FREE else f"reserved by R{owner - 1}"
            notes.append(Note("hazard", f"late write from R{r} lands on p{p}, now {who}"))
        if sent != r + 1:
            notes.append(Note("hazard", f"source page q{q} now holds {self.content_label(sent)}: that is what lands"))
        return notes

    def _release_notes(self, pre: Sequence[int], r: int, post: Sequence[int]) -> list[Note]:
        notes = []
        for c in range(self.send_len(r)):
            if self._get(pre, "wr", r, c) < WR_FLIGHT:
                continue
            p = self._get(pre, "dest", r, c)
            if self._get(pre, "owner", p) == r + 1 and self._get(post, "owner", p) == FREE:
                notes.append(Note("hazard", f"p{p} released while R{r}'s chunk {c} write is still in flight"))
            q = self._get(pre, "src", r, c)
            if self._get(pre, "src_owner", q) == r + 1 and self._get(post, "src_owner", q) == FREE:
                notes.append(Note("hazard", f"source page q{q} freed while R{r}'s chunk {c} write still reads it"))
        return notes
