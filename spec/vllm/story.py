"""What a step means in vLLM's terms, for rendering traces: notes such as "the READ for R0
takes q0, which now holds R1's KV (tenant B)".  Reads concrete states only; not part of the
transition relation.
"""

from __future__ import annotations

from typing import Sequence

from kvproof.model.narration import Note
from kvproof.spec.vllm.state import (
    D_ENDED, D_HELD, P_HELD, RD_NONE, RD_POSTED, RD_RETAINED, RD_TAKEN, READ_CROSS_TENANT, READ_FOREIGN, UNWRITTEN,
)

__all__ = ["VllmStory"]


class VllmStory:
    """Mixin of :class:`~kvproof.spec.vllm.protocol.VllmPd`: notes on concrete steps."""

    def _get(self, state: Sequence[int], name: str, *idx: int) -> int:
        return state[self.layout.slot(name, *idx)]

    def _xfer_values(self, state: Sequence[int], r: int) -> list[int]:
        """The states of ``r``'s transfers (one, or one per prefill rank with per-rank WRITEs)."""
        if self.k.ranked:
            return [self._get(state, "wr", r, w) for w in range(self.k.F)]
        return [self._get(state, "rd", r)]

    def content_label(self, code: int) -> str:
        """Whose KV a content code stands for, with the tenant: ``R0's KV (tenant A)``."""
        if code == UNWRITTEN:
            return "nothing written"
        if code > self.k.R:  # V11: a request's prefix block
            r = code - self.k.R - 1
            return f"R{r}'s prefix KV (tenant {self.k.tenants[self.k.tenant[r]]})"
        r = code - 1
        return f"R{r}'s KV (tenant {self.k.tenants[self.k.tenant[r]]})"

    def story(self, pre: Sequence[int], name: str, args: dict[str, int], post: Sequence[int]) -> list[Note]:
        """Notes for the step ``name(args)`` from ``pre`` to ``post``, in vLLM's words."""
        r = args.get("req")
        g = self._get
        if name == "prefill_reap_expired_lease":
            q = g(pre, "src", r)
            xs = self._xfer_values(pre, r)
            reading = RD_POSTED in xs or (RD_NONE in xs and g(pre, "d_phase", r) != D_ENDED)
            text = (f"prefill: \"Releasing expired KV blocks for request R{r}\" (lease of "
                    f"{self.e.kv_lease_duration} ticks ran out): q{q} is free; decode is not told")
            return [Note("hazard" if reading else "info", text)]
        if name == "prefill_get_new_notifs" and g(pre, "p_phase", r) != P_HELD:
            return [Note("hazard", f"prefill: \"Potentially invalid KV blocks for unrecognized request R{r} ... "
                                   "retrieved by a decode worker\" (num_notifications_after_expiry); dropped, "
                                   "nothing reaches decode")]
        if name == "prefill_get_new_notifs" and self.k.cached[r]:  # V13: no READ was posted
            return [Note("info", f"prefill: finished_sending R{r}: q{g(pre, 'src', r)} freed on decode's "
                                 "notify-only notification (a full local prefix hit: no READ)")]
        if name == "prefill_get_new_notifs" and self.k.mla and not g(pre, "r1_sent", r):
            return [Note("info", f"prefill rank 0: finished_sending R{r} (the READ's notification); "
                                 f"q{g(pre, 'src', r)} stays held until rank 1 reports R{r} too")]
        if name == "prefill_get_new_notifs":
            return [Note("info", f"prefill: finished_sending R{r}: q{g(pre, 'src', r)} freed after the READ")]
        if name == "decode_read_blocks_notify_only":
            text = (f"decode: R{r} is a full local prefix hit; _read_blocks sends prefill \"R{r}:1\" and posts no READ")
            if self.e.report_notify_only_recv:
                return [Note("info", text + "; the empty transfer list is reported in finished_recving (#56640)")]
            return [Note("hazard", text + " and records nothing: no finished_recving will ever name R"
                                          f"{r}, which holds p{g(pre, 'dest', r)} in WAITING_FOR_REMOTE_KVS (#54714)")]
        if name == "prefill_get_new_notifs_mla_rank" and not self.e.mla_notif_remote_id:
            return [Note("hazard", f"prefill rank 1: \"Potentially invalid KV blocks for unrecognized request d-R{r}\": "
                                   "the MLA notify-only notification names decode's request id; dropped, so only "
                                   f"rank 1's lease would report R{r} (before #36958)")]
        if name == "prefill_get_new_notifs_mla_rank":
            return [Note("info", f"prefill rank 1: finished_sending R{r} on the MLA notify-only notification")]
        if name in ("nixl_read_take_data", "nixl_write_land"):
            xfer = "READ" if name == "nixl_read_take_data" else "WRITE"
            q, p = g(pre, "src", r), g(pre, "dest", r)
            held = g(pre, "src_content", q)
            notes = []
            if self.e.suffix_slot_gets_prefix and self.e.prefix_end_trim:  # #50558: pull, appended token
                q = g(pre, "src_prefix", r)
                notes.append(Note("hazard", f"the {xfer} pairs decode's first uncached (suffix) slot p{p} with "
                                            f"prefill's first block q{q}, R{r}'s prefix: decode allocated one more "
                                            "block for the proxy-appended token, so _apply_prefix_caching trims nothing"))
            elif self.e.suffix_slot_gets_prefix:
                q = g(pre, "src_prefix", r)
                notes.append(Note("hazard", f"the {xfer} pairs decode's one (suffix) slot p{p} with prefill's first "
                                            f"block q{q}, R{r}'s prefix: the lists are not end-trimmed"))
            t = self.k.origin[r]
            whose = f"R{r}" if t == r else f"R{r} (carrying R{t}'s kv_transfer_params)"
            if g(pre, "src_owner", q) != t + 1:
                notes.append(Note("hazard", f"the {xfer} for {whose} takes q{q}, which R{t} no longer holds: it holds "
                                            f"{self.content_label(held)}"))
            if g(pre, "owner", p) != r + 1:
                notes.append(Note("hazard", f"the {xfer} for R{r} lands in p{p}, which decode freed"
                                            + (f" and gave to R{g(pre, 'owner', p) - 1}" if g(pre, "owner", p) else "")))
            return notes
        if name == "decode_finished_recving" and g(post, "read", r) in (READ_FOREIGN, READ_CROSS_TENANT):
            p = g(pre, "dest", r)
            return [Note("hazard", f"decode runs R{r} (tenant {self.k.tenants[self.k.tenant[r]]}) on p{p} holding "
                                   f"{self.content_label(g(pre, 'content', p))}: served with HTTP 200")]
        if name == "decode_reject_request":
            told = g(post, "notif", r) == 1
            text = (f"decode rejects R{r} before admission (abort_immediately): "
                    + ("request_finished seeds an empty recv, the worker sends prefill the notify-only "
                       f"\"R{r}:1\"" if told else f"nothing tells prefill, q{g(pre, 'src', r)} waits for the timeout"))
            return [Note("info" if told else "hazard", text)]
        if name == "decode_finished_recving" and self.e.async_scheduling and g(post, "inflight", r):
            p = g(pre, "dest", r)
            if g(post, "owner", p) == r + 1:
                return [Note("info", f"R{r} finished with step N+1 still writing p{p}: deferred_frees until it is processed")]
            return [Note("hazard", f"R{r} finished with step N+1 still writing p{p}: p{p} is back in the pool at once")]
        if name == "decode_update_from_output":
            p = g(pre, "dest", r)
            owner = g(pre, "owner", p)
            if owner not in (0, r + 1):
                return [Note("hazard", f"step N+1's write of R{r}'s KV lands in p{p}, which R{owner - 1} holds now")]
            return [Note("info", f"step N+1 processed: R{r}'s write to p{p} done"
                                 + (f", p{p} freed (_drain_deferred_frees)" if owner == r + 1 else ""))]
        if name == "decode_send_heartbeats":
            return [Note("info", f"HB: leases extended to at least {self.k.X} ticks")]
        if name == "decode_abort" and g(post, "d_phase", r) == D_HELD:
            return [Note("info", f"R{r} aborted in WAITING_FOR_REMOTE_KVS: delay_free_blocks until finished_recving")]
        if name == "prefill_deferred_push_write" and g(pre, "p_phase", r) != P_HELD:
            return [Note("hazard", f"prefill's writer posts R{r}'s deferred WRITE of q{g(pre, 'src', r)} after R{r}'s "
                                   "lease was reaped: nothing checks it (#55470)")]
        if name == "prefill_defer_push":
            return [Note("info", f"prefill: the P->D handshake is pending, R{r}'s WRITE waits in _deferred_push_inbox")]
        if name == "prefill_get_transfer_results":
            return [Note("info", f"prefill: finished_sending R{r}: its WRITE is done, q{g(pre, 'src', r)} freed")]
        if name == "prefill_xfer_blocks_fails":
            w = args["wrank"]
            sent = "PUSH_FAIL goes to decode (#50754, hypothetical)" if self.e.push_fail_notif else \
                "no notification goes to decode, whose count cannot complete (V6)"
            return [Note("hazard" if not self.e.push_fail_notif else "info",
                         f"prefill rank w{w}: \"Push WRITE submission failed; releasing handle\" for R{r}: "
                         f"_send_failures; {sent}")]
        if name == "nixl_write_land_part":
            w, q = args["wrank"], g(pre, "src", r)
            if g(pre, "src_owner", q) != r + 1:
                return [Note("hazard", f"rank w{w}'s WRITE for R{r} takes q{q}, which R{r} no longer holds: it holds "
                                       f"{self.content_label(g(pre, 'src_content', q))}")]
            return []
        if name == "decode_get_new_notifs":
            c = g(post, "counted", r)
            if c < self.k.F:
                return [Note("info", f"decode: R{r} counted {c} of {self.k.F} notifications")]
            if g(post, "read", r) in (READ_FOREIGN, READ_CROSS_TENANT):
                return [Note("hazard", f"decode runs R{r} (tenant {self.k.tenants[self.k.tenant[r]]}) on a block "
                                       "holding another request's KV: served with HTTP 200")]
            return []
        if name == "prefill_reap_expired_send_leases_in_order":  # V2, the reaper before #58222
            held = [x for x in self.reqs if g(pre, "p_phase", x) == P_HELD]
            reaped = [x for x in held if g(post, "p_phase", x) != P_HELD]
            head = next((x for x in held if g(pre, "lease", x) > 0), None)
            stranded = [x for x in held if x not in reaped and g(pre, "lease", x) == 0]
            notes = [Note("info", f"prefill: \"Releasing expired KV blocks for request R{x}\"") for x in reaped]
            if stranded:
                notes.append(Note("hazard", f"the reaper stops at R{head}, whose lease is live (heartbeated): "
                                            + ", ".join(f"R{x}" for x in stranded) + " expired behind it, not reaped"))
            return notes
        if name == "nixl_read_hangs":
            if g(pre, "d_phase", r) == D_HELD:
                return [Note("hazard", f"R{r}'s READ never completes (no completion, no error): decode holds the "
                                       f"aborted R{r} until a finished_recving that never comes")]
            return [Note("hazard", f"R{r}'s READ never completes (no completion, no error): decode keeps R{r} "
                                   "loading and heartbeats it, prefill's lease for it never runs out")]
        if name == "decode_decline_turn2_read":
            return [Note("info", f"the turn-2 reader: \"Declining expired remote read for R{r}\" "
                                 "(_is_turn2_read_expired): FINISHED_ERROR, the holder is not told")]
        if name == "nixl_read_fails_part":
            return [Note("info", f"R{r}'s READ of prefill rank w{args['wrank']}'s part fails (check_xfer_state: ERR); "
                                 "no notification goes to that rank")]
        if name == "decode_try_release_xfer_handle_fails":
            kept = self.e.retains_unreleased_handle
            return [Note("info" if kept else "hazard",
                         f"R{r}'s READ of rank w{args['wrank']}'s part reports an error, but its DMA was not stopped "
                         "and _try_release_xfer_handle fails: "
                         + (f"decode retains the handle, R{r}'s failure waits" if kept
                            else "decode drops the handle (HYPOTHETICAL): the failure can be reported "
                                 "while the DMA still moves data"))]
        if name == "nixl_read_lands_after_error_part":
            return [Note("info", f"R{r}'s failed, unreleased READ of rank w{args['wrank']} still lands its data")]
        if name == "decode_retry_release_xfer_handle":
            return [Note("info", f"a later poll releases R{r}'s retained handle (rank w{args['wrank']}): its DMA stopped")]
        if name == "decode_read_blocks_post_fails":
            w = args["wrank"]
            later = [x for x in range(self.k.F) if x > w and self._get(post, "wr", r, x) != RD_NONE]
            text = (f"decode fails to post R{r}'s READ of rank w{w}'s part (_read_blocks raises): "
                    + (f"the loop posts rank(s) {', '.join(f'w{x}' for x in later)} all the same" if later
                       else "no later sibling is posted"))
            return [Note("info", text)]
        if name == "prefill_reregister_kv_caches":
            return [Note("info", "prefill sleeps and wakes up: its KV cache is registered again at new memory "
                                 "(_registration_generation bumped); decode's cached descriptors name the old one")]
        if name == "nixl_read_take_data_part" and self.e.prefill_reregisters and \
                g(pre, "rgen", r) != g(pre, "p_gen"):
            return [Note("hazard", f"R{r}'s READ goes through decode's cached descriptors of prefill's old "
                                   f"registration: p{g(pre, 'dest', r)} gets released memory, not R{r}'s KV")]
        if name == "nixl_read_take_data_part":
            w, q, p = args["wrank"], g(pre, "src", r), g(pre, "dest", r)
            notes = []
            if g(pre, "src_owner", q) != r + 1:
                notes.append(Note("hazard", f"R{r}'s READ of rank w{w}'s part takes q{q}, which R{r} no longer holds: "
                                            f"it holds {self.content_label(g(pre, 'src_content', q))}"))
            if g(pre, "owner", p) != r + 1:
                notes.append(Note("hazard", f"R{r}'s sibling READ (rank w{w}) lands in p{p}, which decode freed"
                                            + (f" and gave to R{g(pre, 'owner', p) - 1}" if g(pre, "owner", p) else "")))
            return notes
        if name == "decode_pop_done_transfers":
            xs = self._xfer_values(pre, r)
            if g(post, "outcome", r) == 3:  # OUT_ERROR
                busy = [w for w, x in enumerate(xs) if x in (RD_POSTED, RD_TAKEN)]
                if busy:
                    return [Note("hazard", f"decode reports R{r}'s load failed (failed_recving, FINISHED_ERROR) with "
                                           f"sibling READ(s) of rank(s) {', '.join(f'w{w}' for w in busy)} still in "
                                           f"progress: p{g(pre, 'dest', r)} is freed under them")]
                live = [w for w, x in enumerate(xs) if x == RD_RETAINED]
                if live:  # V8's third path, HYPOTHETICAL: the unreleased handle was dropped
                    return [Note("hazard", f"decode reports R{r}'s load failed (failed_recving, FINISHED_ERROR) with the "
                                           f"unreleased READ(s) of rank(s) {', '.join(f'w{w}' for w in live)} dropped, "
                                           f"their DMA not stopped: p{g(pre, 'dest', r)} is freed under them")]
                return [Note("info", f"decode reports R{r}'s load failed once no READ handle remains (#56104): "
                                     f"FINISHED_ERROR, p{g(pre, 'dest', r)} freed")]
            if g(post, "read", r) in (READ_FOREIGN, READ_CROSS_TENANT):
                return [Note("hazard", f"decode runs R{r} (tenant {self.k.tenants[self.k.tenant[r]]}) on a block "
                                       "holding KV that is not its own: served with HTTP 200")]
            return []
        if name == "decode_abort" and any(x in (RD_POSTED, RD_TAKEN) for x in self._xfer_values(pre, r)):
            return [Note("hazard", f"R{r} aborted with its READ in flight: p{g(pre, 'dest', r)} freed at once")]
        return []
