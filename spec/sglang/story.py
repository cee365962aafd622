"""What a step means in the engine's terms, for rendering traces.

:meth:`PdStory.story` looks at one concrete step (pre-state, action, post-state) and returns
notes such as "decode R1 (tenant B) read p1 holding R0's KV (tenant A)".  It reads concrete
states only; it is not part of the transition relation.
"""

from __future__ import annotations

from typing import Sequence

from kvproof.model.narration import Note
from kvproof.spec.sglang.state import D_VERIFIED, FREE, READ_NONE, UNWRITTEN, WR_FLIGHT, kv_of, owned_by, owner_request

__all__ = ["Note", "PdStory"]


class PdStory:
    """Mixin of :class:`~kvproof.spec.sglang.protocol.PdProtocol`: notes on concrete steps."""

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
        if name in ("decode_commit", "decode_forward"):
            notes += self._read_notes(pre, r, post)
        elif name == "kv_write_lands":
            notes += self._landing_notes(pre, r, args["stream"], args["chunk"])
        elif name == "kv_aux_lands":
            notes += self._aux_landing_notes(pre, r)
        elif name == "decode_handle_abort_ack":
            notes += self._ack_notes(pre, r, args["prank"], post)
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
        if self._get(post, "d_phase", r) == D_VERIFIED:
            return [Note("info", f"checksum verified for R{r}; the read comes later, in the batch")]
        if self._get(post, "read", r) == READ_NONE:
            return [Note("info", f"checksum mismatch: R{r} fails instead of decoding")]
        mine = k.tenants[k.tenant[r]]
        notes = []
        for c in range(self.pages(r)):
            p = self._get(pre, "dest", r, c)
            for u in range(k.U):
                held = self._get(pre, "content", u, p)
                if held != kv_of(r):
                    where = f"p{p}" if k.U == 1 else f"shard {k.unit.label(u)} of p{p}"
                    notes.append(Note("hazard", f"decode R{r} (tenant {mine}) reads {where} holding {self.content_label(held)}"))
        if k.M:
            m = self._get(pre, "aux", r)
            held = self._get(pre, "aux_content", m)
            if held != kv_of(r):
                what = self.content_label(held).replace("KV", "aux data")
                notes.append(Note("hazard", f"decode R{r} reads aux slot m{m} holding {what}"))
        return notes

    def _landing_notes(self, pre: Sequence[int], r: int, w: int, c: int) -> list[Note]:
        name, idx = self.write_dest(r, w, c)
        p = self._get(pre, name, *idx)
        owner = self._get(pre, "owner", p)
        q = self._get(pre, "src", r, c)
        sent = self._get(pre, "src_content", q)
        notes = []
        who_writes = f"R{r}" if self.k.S == 1 else f"R{r} ({self.k.stream.label(w)})"
        if owner != owned_by(r):
            who = "free" if owner == FREE else f"reserved by R{owner_request(owner)}"
            notes.append(Note("hazard", f"late write from {who_writes} lands on p{p}, now {who}"))
        if sent != kv_of(r):
            notes.append(Note("hazard", f"source page q{q} now holds {self.content_label(sent)}: that is what lands"))
        return notes

    def _aux_landing_notes(self, pre: Sequence[int], r: int) -> list[Note]:
        m = self._get(pre, "aux", r)
        owner = self._get(pre, "aux_owner", m)
        if owner == owned_by(r):
            return []
        who = "free" if owner == FREE else f"reserved by R{owner_request(owner)}"
        return [Note("hazard", f"late aux write from R{r} lands in slot m{m}, now {who}")]

    def _ack_notes(self, pre: Sequence[int], r: int, pr: int, post: Sequence[int]) -> list[Note]:
        counted = self._get(post, "acked", r, pr) and not self._get(pre, "acked", r, pr)
        if not counted:
            return [Note("info", f"ack from P{pr} for R{r}'s room is dropped")]
        if self.e.request_streams and self._get(pre, "ack_gen", r, pr) != self._get(pre, "gen", r):
            return [Note("hazard", f"an ack of the room's earlier request is counted for R{r}")]
        return []

    def _release_notes(self, pre: Sequence[int], r: int, post: Sequence[int]) -> list[Note]:
        notes = []
        for w in range(self.k.S):
            for c in range(self.send_len(r)):
                if self._get(pre, "wr", r, w, c) < WR_FLIGHT:
                    continue
                rank = "" if self.k.S == 1 else f" ({self.k.stream.label(w)})"
                name, idx = self.write_dest(r, w, c)
                p = self._get(pre, name, *idx)
                if self._get(pre, "owner", p) == owned_by(r) and self._get(post, "owner", p) == FREE:
                    notes.append(Note("hazard", f"p{p} released while R{r}'s chunk {c} write{rank} is still in flight"))
                q = self._get(pre, "src", r, c)
                if self._get(pre, "src_owner", q) == owned_by(r) and self._get(post, "src_owner", q) == FREE:
                    notes.append(Note("hazard", f"source page q{q} freed while R{r}'s chunk {c} write{rank} still reads it"))
        if self.k.M and self._get(pre, "aux_wr", r) >= WR_FLIGHT:
            m = self._get(pre, "aux", r)
            if self._get(pre, "aux_owner", m) == owned_by(r) and self._get(post, "aux_owner", m) == FREE:
                notes.append(Note("hazard", f"aux slot m{m} released while R{r}'s aux write is still in flight"))
        return notes
