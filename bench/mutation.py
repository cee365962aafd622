"""Mutation gate: single-point mutants of the protocol (``spec/``) against the catalogue.

Each mutant changes one expression or statement of ``spec/pd.py``, ``spec/pd_claims.py`` or
``spec/sglang_0523.py``: a comparison flipped, a constant changed, a guard or a conjunct
dropped, a write dropped or redirected, a ``not`` removed.  A mutant is applied to a temporary
copy of the package (never to this tree), and the catalogue gate runs on that copy in a child
process: every built-in scenario is checked with the explicit engine, and the mutant is
*caught* when some verdict differs from the scenario's expectation - exactly when
``kvproof check`` on the whole catalogue would exit 1.  The child checks the scenarios from the
smallest up and stops at the first difference; a mutant that survives has been through the
whole catalogue.  With ``--full`` the child runs ``kvproof check --quiet --no-traces`` itself.

A mutant that survives is either argued equivalent (its ``equivalent`` line says why no
verdict of any configuration can change) or a gap in the catalogue, and the script exits 1.

Run it (one mutant at a time; about 15 minutes of CPU for the whole list)::

    nice python bench/mutation.py                 # every mutant, the score at the end
    python bench/mutation.py --list               # the mutants (file, line, what changed)
    python bench/mutation.py --only H8,pd-alloc-ge # some of them

Mutants are located by the function they are in and the exact text they replace (the first
occurrence inside that function), so the list survives edits elsewhere in a file; the line
printed is where the text is in this tree.  A mutant whose text is no longer found is reported
as stale (exit 3).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Mutant", "MUTANTS", "Located", "locate", "apply", "mutated_tree", "run_gate", "main"]

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"kvproof": "kvproof", "spec": "kvproof/spec", "model": "kvproof/model", "checker": "kvproof/checker"}
"""Source folders of this tree and where they go in the temporary package (the layout
``pyproject.toml``'s ``package-dir`` gives the installed one)."""


@dataclass(frozen=True)
class Mutant:
    """One single-point change: in ``function`` of ``file``, the first ``old`` becomes ``new``."""

    id: str
    file: str
    function: str
    old: str
    new: str
    what: str
    equivalent: str = ""
    """Why no verdict can change (one line), for a mutant argued equivalent; empty otherwise."""


P, C, S = "spec/pd.py", "spec/pd_claims.py", "spec/sglang_0523.py"

MUTANTS: list[Mutant] = [
    # -- spec/pd.py: the transfer --------------------------------------------------------------
    Mutant("H8", P, "kv_write_lands", "n.content[u, p] = s.src_content[s.src[r, c]]", "n.content[u, p] = r + 1",
           "a landing carries the writer's own KV, not the source page's content at landing time (H8's data effect)"),
    Mutant("pd-lands-no-status", P, "kv_write_lands", "n.wr[r, w, c] = WR_LANDED", "pass",
           "a landing leaves the write in flight (write dropped)"),
    Mutant("pd-write-after-abort", P, "kv_transfer_write", "s.require(o.eq(s.p_abort[r, pr], PAB_NONE))", "pass",
           "writes are still issued after the rank received ABORT (guard dropped)",
           equivalent="p_abort leaves none only in prefill_handle_abort and prefill_transfer_failed, which move p_phase off sending for good, and a write needs sending"),
    Mutant("pd-chunks-out-of-order", P, "kv_transfer_write", "s.require(o.ne(s.wr[r, w, c - 1], WR_NOT_ISSUED))",
           "pass", "chunks are issued in any order (guard dropped)",
           equivalent="a request's chunks differ only in their page: no claim or guard reads one chunk's progress but the last one's (0.5.23's send_aux), which the order does not change (argued, not proved)"),
    Mutant("pd-aux-lands-as-r0", P, "kv_aux_lands", "n.aux_content[s.aux[r]] = r + 1",
           "n.aux_content[s.aux[r]] = 1", "the aux data always lands as R0's (constant)"),
    # -- allocation and release ------------------------------------------------------------------
    Mutant("pd-alloc-ge", P, "_allocate", "s.require(o.ge(seen, k))", "s.require(o.gt(seen, k))",
           "an allocation needs one free entry more than it takes (>= to >)"),
    Mutant("pd-alloc-takes-one-more", P, "_allocate", "o.lt(ranks[p], k)", "o.le(ranks[p], k)",
           "an allocation marks one entry more as taken (< to <=)"),
    Mutant("pd-release-any-owner", P, "_release_decode", "o.and_(when, o.eq(s.owner[p], r + 1))", "when",
           "decode release frees its pages even when another request owns them now (conjunct dropped)",
           equivalent="release runs only for a live request, whose reserved pages are its own (pages leave free only by allocation and come back only by their owner's release), so the test is always true"),
    Mutant("pd-release-keeps-armed", P, "_release_decode", "n.armed[r] = o.ite(when, 0, s.armed[r])", "pass",
           "decode release leaves the room armed for acks (write dropped)",
           equivalent="armed is read only while the request is held, a released request is never held again, and client_send resets it for the room's next request"),
    Mutant("pd-source-release-any-owner", P, "_release_source", "o.and_(when, o.eq(s.src_owner[q], r + 1))", "when",
           "prefill frees source pages another request owns now (conjunct dropped)"),
    Mutant("pd-in-flight-age0", P, "_rank_writes_in_flight", "o.ge(s.wr[r, w, c], WR_FLIGHT)",
           "o.eq(s.wr[r, w, c], WR_FLIGHT)", "a write that has aged no longer counts as in flight (>= to ==)"),
    # -- decode: hold, readiness, abort ------------------------------------------------------------
    Mutant("pd-ready-one-ack", P, "_ready", 'need = len(linked) if self.e.required_acks == "every_prefill_rank" else 1',
           "need = 1", "one prefill rank's ack is always enough (constant)"),
    Mutant("pd-hold-unpublished", P, "_holds", "o.eq(s.meta[r, d], 1)", "o.eq(s.meta[r, d], 0)",
           "a decode rank holds when it has NOT published its metadata (constant)"),
    Mutant("pd-combine-swapped", P, "_combine", 'o.any_(per_rank) if how == "max" else o.all_(per_rank)',
           'o.all_(per_rank) if how == "max" else o.any_(per_rank)', "MAX and MIN all-reduce swapped"),
    Mutant("pd-abort-not-armed", P, "_send_abort", "n.armed[r] = o.ite(arm, 1, s.armed[r])", "pass",
           "ABORT is sent without registering the room (write dropped)"),
    Mutant("pd-release-while-held", P, "_end_or_hold", "when=o.and_(o.not_(hold), live)", "when=live",
           "a held request's pages are released anyway (conjunct dropped)"),
    Mutant("pd-outcome-overwritten", P, "_end_or_hold",
           "n.outcome[r] = o.ite(o.eq(s.outcome[r], OUT_NONE), outcome, s.outcome[r])", "n.outcome[r] = outcome",
           "ending overwrites an outcome already given (guarded write made unconditional)",
           equivalent="the guard only keeps an aborted or error outcome set by prefill (never success); no claim tells those two apart, and the aborted state the abort witness reads comes before the overwrite"),
    Mutant("pd-fail-defers-always", P, "_fail", "self.e.defer_on_every_failure and self.deferred", "self.deferred",
           "every failure defers, PR 41404 or not (conjunct dropped)"),
    Mutant("pd-abort-hold-negated", P, "decode_abort", "hold = self._holds(s, r, self.deferred)",
           "hold = self._holds(s, r, not self.deferred)", "a client abort holds exactly when deferral is off"),
    Mutant("pd-poll-failed-not-waiting", P, "decode_poll_failed", "(D_NEW, D_RESERVED, D_WAITING)",
           "(D_NEW, D_RESERVED)", "decode stops polling Failed once it is waiting (phase dropped)"),
    Mutant("pd-waiting-timeout-gt", P, "decode_waiting_timeout", "o.ge(s.wait[r], self.e.waiting_timeout or 0)",
           "o.gt(s.wait[r], self.e.waiting_timeout or 0)", "the waiting timeout needs one tick more than it counts"),
    Mutant("pd-register-rearms", P, "decode_register_abort_room", "s.require(o.eq(s.armed[r], 0))", "pass",
           "registering is enabled on a room already armed (guard dropped)"),
    Mutant("pd-ack-unarmed", P, "decode_handle_abort_ack", "ok = [o.eq(s.armed[r], 1), ", "ok = [",
           "an ack counts before the room is registered (conjunct dropped)"),
    Mutant("pd-ack-wrong-generation", P, "decode_handle_abort_ack", "ok.append(o.eq(s.ack_gen[r, pr], s.gen[r]))",
           "ok.append(o.ne(s.ack_gen[r, pr], s.gen[r]))", "only acks of another generation count (== to !=)"),
    Mutant("pd-release-unready", P, "decode_release_deferred", "s.require(self._ready(s, r))", "pass",
           "held pages are released without the acks (guard dropped)"),
    Mutant("pd-timeout-early", P, "decode_release_timeout", "o.ge(s.hold[r], self.e.timeout)",
           "o.ge(s.hold[r], self.e.timeout - 1)", "the deferred-release deadline fires a tick early (constant)"),
    Mutant("pd-retry-acked", P, "decode_retry_abort", "o.eq(s.acked[r, pr], 0)", "o.eq(s.acked[r, pr], 1)",
           "ABORT is re-sent to the ranks that acked, not to the others (constant)",
           equivalent="a re-sent ABORT matters only after one was lost, and a loss is an unfair environment step: every path a retry rescues has a twin on which the re-sent ABORT is lost again"),
    Mutant("pd-dead-without-heartbeats", P, "decode_peer_dead_release", "s.require(o.ge(s.hb, self.e.heartbeat_timeout))",
           "pass", "decode declares the prefill dead without missed heartbeats (guard dropped)"),
    Mutant("pd-pick-taken-page", P, "decode_prealloc_pick", "s.require(o.eq(s.owner[p], FREE))", "pass",
           "the unsorted allocator may hand out a page in use (guard dropped)"),
    Mutant("pd-prealloc-after-outcome", P, "decode_prealloc", "s.require(o.eq(s.outcome[r], OUT_NONE))", "pass",
           "decode reserves for a request that already has an outcome (guard dropped)"),
    Mutant("pd-metadata-any-rank", P, "decode_send_metadata", "o.ite(o.all_(others), D_WAITING, D_RESERVED)",
           "o.ite(o.any_(others), D_WAITING, D_RESERVED)", "decode waits once any other rank published (all to any)"),
    # -- decode: commit and read -----------------------------------------------------------------
    Mutant("pd-checksum-never", P, "decode_commit", "ok = intact if self.checksum_active else o.const(True)",
           "ok = o.const(True)", "the checksum is never compared"),
    Mutant("pd-read-recorded-own", P, "decode_commit", "n.read[r] = o.ite(ok, found, READ_NONE)",
           "n.read[r] = o.ite(ok, READ_OWN, READ_NONE)", "the commit records its read as own, whatever it found"),
    Mutant("pd-forward-read-own", P, "decode_forward", "n.read[r] = found", "n.read[r] = READ_OWN",
           "the running batch records its read as own, whatever it found"),
    Mutant("pd-intact-ignores-landing", P, "_classify_read",
           "intact = o.and_(intact, *[o.eq(s.wr[r, w, c], WR_LANDED) for w in range(k.S)])", "pass",
           "the checksum no longer needs every write landed (write dropped)"),
    Mutant("pd-unwritten-cross-tenant", P, "_classify_read", "o.and_(o.ne(held, UNWRITTEN), ", "o.and_(",
           "an unwritten page counts as another tenant's KV (conjunct dropped)"),
    Mutant("pd-read-last-shard", P, "_classify_read", "found = o.max_(found, kind)", "found = kind",
           "a read is classified by its last shard only (max dropped)"),
    # -- prefill ---------------------------------------------------------------------------------
    Mutant("pd-door-rejects-all", P, "prefill_bootstrap_add", "if self.over_long(r) and self.e.reject_at_prefill_door:",
           "if self.e.reject_at_prefill_door:", "the prefill door rejects every prompt (conjunct dropped)"),
    Mutant("pd-forward-any-meta", P, "prefill_forward", "o.all_(o.eq(s.meta[r, d], 1) for d in range(self.k.DR))",
           "o.any_(o.eq(s.meta[r, d], 1) for d in range(self.k.DR))", "prefill runs once any decode rank published"),
    Mutant("pd-retired-succeeds", P, "prefill_forward", "n.poll[r, pr] = POLL_FAILED", "n.poll[r, pr] = POLL_SUCCESS",
           "a retired placeholder's transfer concludes Success (constant)"),
    Mutant("pd-prefill-abort-propagation-negated", P, "prefill_abort", "if self.e.propagate_prefill_abort:",
           "if not self.e.propagate_prefill_abort:", "a prefill abort reaches decode exactly when it should not"),
    Mutant("pd-done-any-rank", P, "prefill_transfer_done",
           "o.all_(o.eq(s.poll[r, x], POLL_SUCCESS) for x in self.prs if x != pr)",
           "o.any_(o.eq(s.poll[r, x], POLL_SUCCESS) for x in self.prs if x != pr)",
           "the source is freed when any other rank concluded (all to any)"),
    Mutant("pd-done-without-aux", P, "prefill_transfer_done", "s.require(o.eq(s.aux_wr[r], WR_LANDED))", "pass",
           "rank 0 concludes before its aux write landed (guard dropped)"),
    Mutant("pd-failed-ends", P, "prefill_transfer_failed", "n.p_phase[r] = P_STOPPED", "n.p_phase[r] = P_ENDED",
           "a failed request ends on prefill with its writes in flight (constant)"),
    Mutant("pd-failed-source-negated", P, "prefill_transfer_failed", "if not self.e.hold_source_until_drained:",
           "if self.e.hold_source_until_drained:", "failure frees the source exactly when the fix is on (not removed)"),
    Mutant("pd-clear-keeps-target", P, "prefill_transfer_failed", "PAB_CLEARED", "PAB_NONE",
           "clear() keeps the ack target, H4's bug or not (constant)"),
    Mutant("pd-abort-acked-at-once", P, "prefill_handle_abort", "o.ite(first, PAB_RECEIVED, s.p_abort[r, pr])",
           "o.ite(first, PAB_ACKED, s.p_abort[r, pr])", "a rank takes ABORT as already drain-acked (constant)"),
    Mutant("pd-receipt-is-drain", P, "prefill_handle_abort", "o.ite(first, ACK_RECEIPT, s.ack[r, pr])",
           "o.ite(first, ACK_DRAIN, s.ack[r, pr])", "the legacy receipt ack is sent as a drain ack (constant)",
           equivalent="only the legacy engine sends a receipt ack and it counts one as a drain ack; that a drain ack can be lost and a receipt cannot changes nothing, since the drain ack overwrites a pending receipt"),
    Mutant("pd-drain-needs-flight", P, "prefill_drain", "s.require(o.not_(self._writes_in_flight(s, r)))",
           "s.require(self._writes_in_flight(s, r))", "drain needs a write in flight instead of none (not removed)"),
    Mutant("pd-drain-ack-while-sending", P, "prefill_drain_ack", "s.require(o.is_in(s.p_phase[r], (P_STOPPED, P_ENDED)))",
           "pass", "a rank may drain-ack before it stopped sending (guard dropped)",
           equivalent="p_abort becomes received only in prefill_handle_abort, which moves p_phase to stopped or "
                      "ended, and neither returns to sending (client_send resets p_abort too)"),
    Mutant("pd-acks-always-lost", P, "net_drop_ack", "s.require(self.e.lossy_drain_acks)", "pass",
           "drain acks can be lost in every scenario (guard dropped)"),
    Mutant("pd-aborts-always-lost", P, "net_drop_abort", "s.require(self.e.lossy_aborts)", "pass",
           "ABORTs can be lost in every scenario (guard dropped)"),
    # -- time and request streams ------------------------------------------------------------------
    Mutant("pd-latency-unbounded", P, "clock_tick", "blocks.append(o.eq(w, WR_FLIGHT + bound))", "pass",
           "time passes a write's latency bound (write dropped)"),
    Mutant("pd-clock-passes-abort", P, "clock_tick",
           "blocks.append(o.and_(o.eq(s.abort_tx[r, pr], ABT_SENT), self._alive(s)))", "pass",
           "time passes while an ABORT to a live prefill is undelivered (write dropped)"),
    Mutant("pd-generation-kept", P, "client_send", "new_gen = o.ite(o.eq(s.gen[r], 0), 1, 0)",
           "new_gen = o.ite(o.eq(s.gen[r], 0), 0, 1)", "a reused room keeps its generation (constants swapped)"),
    Mutant("pd-old-kv-keeps-owner", P, "client_send",
           "n.content[u, p] = o.ite(o.eq(s.content[u, p], r + 1), old, s.content[u, p])", "pass",
           "the room's old KV keeps the code of the room's next request (write dropped)",
           equivalent="a room's next request reads a page it did not write only as a pending-error placeholder, and the room's first placeholder has already read a never-written page (same tenant, same verdicts)"),
    # -- spec/pd_claims.py ------------------------------------------------------------------------
    Mutant("cl-foreign-read-allowed", C, "decode_reads_only_own_pages", "o.le(s.read[r], READ_OWN)",
           "o.le(s.read[r], READ_OWN + 1)", "reading another request's KV of the same tenant is allowed (constant)"),
    Mutant("cl-cross-tenant-eq", C, "no_cross_tenant_read", "o.ne(s.read[r], READ_CROSS_TENANT)",
           "o.ne(s.read[r], READ_CROSS_TENANT - 1)", "the claim forbids foreign reads, not cross-tenant ones (constant)"),
    Mutant("cl-write-into-owned", C, "no_write_after_release", "o.eq(s.owner[s.dest[r, c]], r + 1)",
           "o.ne(s.owner[s.dest[r, c]], FREE)", "a write into a page anyone owns counts as safe",
           equivalent="kv_transfer_write reads no decode page owner, so a write into a reallocated page can be issued one step earlier, while the page is free, where the weakened claim flags it too"),
    Mutant("cl-source-owned-by-anyone", C, "no_source_free_while_read", "o.eq(s.src_owner[s.src[r, c]], r + 1)",
           "o.ne(s.src_owner[s.src[r, c]], FREE)", "a source page owned by anyone counts as held",
           equivalent="a source page is reallocated only from free, and a write still reading it was issued while "
                      "it was owned, so every state it flags follows one flagged by the original"),
    Mutant("cl-exclusive-held-only", C, "exclusive_ownership", "o.is_in(s.d_phase[r], D_LIVE)",
           "o.eq(s.d_phase[r], D_HELD)", "exclusive ownership is checked for held requests only",
           equivalent="no configuration of the shipped protocols breaks exclusive ownership (pages leave free only by allocation), so the claim and its weakening are verified everywhere"),
    Mutant("cl-conserved-any-phase", C, "pool_ok", "o.is_in(getattr(s, phase)[r], live_phases),", "",
           "an owned page counts as accounted for whatever its owner's phase (conjunct dropped)",
           equivalent="no configuration of the shipped protocols leaks a page (every release frees all of its request's pages), so the claim and its weakening are verified everywhere"),
    Mutant("cl-rejected-negated", C, "rejected_never_succeeds", "if self.over_long(r)", "if not self.over_long(r)",
           "the claim is about the admitted requests instead (not added)"),
    Mutant("cl-reserves-off-by-one", C, "rejected_never_reserves", "o.ne(s.owner[p], r + 1)", "o.ne(s.owner[p], r)",
           "the owner code is off by one"),
    Mutant("cl-coverage-of-sent", C, "success_implies_full_coverage", "for c in range(self.pages(r))",
           "for c in range(self.send_len(r))", "coverage of the chunks sent, not of the pages reserved (H1's blind spot)"),
    Mutant("cl-quiescent-source-negated", C, "quiescent_holds_nothing", "if not self.e.peer_death:",
           "if self.e.peer_death:", "source pages must be free at quiescence only when prefill may die (not removed)"),
    Mutant("cl-dead-prefill-not-done", C, "_prefill_done", "o.or_(ended, o.eq(s.p_dead, 1))", "ended",
           "a dead prefill does not count as done (disjunct dropped)"),
    Mutant("cl-held-means-free", C, "held_pages_are_released", 'o.ne(s.owner[p], FREE)', 'o.eq(s.owner[p], FREE)',
           "a page is pending while free instead of while held"),
    Mutant("cl-unanswered-means-held", C, "requests_end", "o.ne(s.d_phase[r], D_ENDED)", "o.eq(s.d_phase[r], D_HELD)",
           "a request is pending only while held, not until it ended"),
    Mutant("cl-succeeds-is-error", C, "sometimes_request_succeeds", "o.eq(s.outcome[r], OUT_SUCCESS)",
           "o.eq(s.outcome[r], OUT_ERROR)", "the success witness looks for an error (constant)"),
    Mutant("cl-abort-mid-transfer-error", C, "sometimes_abort_mid_transfer", "o.eq(s.outcome[r], OUT_ABORTED)",
           "o.eq(s.outcome[r], OUT_ERROR)", "the abort witness looks for an error (constant)"),
    Mutant("cl-timeout-gt", C, "sometimes_timeout_release", "o.ge(s.hold[r], self.e.timeout)",
           "o.gt(s.hold[r], self.e.timeout)", "the deadline witness needs a tick past the deadline (>= to >)"),
    Mutant("cl-mismatch-succeeds", C, "sometimes_checksum_mismatch", "o.eq(s.outcome[r], OUT_ERROR)",
           "o.eq(s.outcome[r], OUT_SUCCESS)", "the mismatch witness looks for a success (constant)"),
    Mutant("cl-partial-acks-all", C, "sometimes_partial_acks",
           "o.not_(o.all_(o.eq(s.acked[r, pr], 1) for pr in range(self.k.PR)))",
           "o.all_(o.eq(s.acked[r, pr], 1) for pr in range(self.k.PR))", "partial acks means every ack (not removed)"),
    Mutant("cl-stale-ack-same-gen", C, "sometimes_stale_ack_meets_next_request", "o.ne(s.ack_gen[r, pr], s.gen[r])",
           "o.eq(s.ack_gen[r, pr], s.gen[r])", "the stale ack witness looks for a current ack (!= to ==)"),
    Mutant("cl-dies-while-ended", C, "sometimes_prefill_dies_while_held", "o.eq(s.d_phase[r], D_HELD)",
           "o.eq(s.d_phase[r], D_ENDED)", "the death witness looks for an ended request (constant)"),
    # -- spec/sglang_0523.py -------------------------------------------------------------------------
    Mutant("sg-failed-call-running", S, "_calls_running", "returned = o.eq(s.poll[r, pr], POLL_FAILED)",
           "returned = o.eq(s.poll[r, pr], POLL_SUCCESS)", "a failed send's call counts as running (constant)"),
    Mutant("sg-calls-side-by-side", S, "kv_transfer_write", "s.require(o.not_(self._calls_running(s, pr, but=(r, w, c))))",
           "pass", "one worker runs several transfer calls at once (guard dropped)"),
    Mutant("sg-aux-after-failure", S, "kv_write_lands", "o.ne(s.poll[r, 0], POLL_FAILED), ", "",
           "send_aux follows the last chunk even after the send failed (conjunct dropped)"),
    Mutant("sg-aux-own-step", S, "kv_transfer_aux", "s.require(False)", "super().kv_transfer_aux(s, n, r)",
           "send_aux is also a step of its own (guard replaced)",
           equivalent="send_aux as a step of its own only adds aux writes issued while the last chunk's call still runs, never after ABORT or a failure, so none lands later than the worker's (argued, not proved)"),
    Mutant("sg-fail-without-flight", S, "prefill_transfer_failed", "s.require(self._rank_writes_in_flight(s, r, pr))",
           "pass", "a send may fail with no write in flight (guard dropped)",
           equivalent="it adds only failures of a rank with nothing in flight, after which nothing of that rank can land: decode's hold and release are safe on every added path and no witness looks for such a failure"),
    Mutant("sg-poisoned-acks", S, "prefill_drain_ack", "s.require(s.ops.ne(s.poll[r, pr], POLL_FAILED))", "pass",
           "a poisoned room still gets the drain ack (guard dropped)"),
    Mutant("sg-abort-between-publications", S, "decode_abort", "o.or_(o.all_(metas), o.not_(o.any_(metas)))",
           "o.or_(o.all_(metas), o.any_(metas))", "an abort may fall between two ranks' publications (not removed)"),
    Mutant("sg-slot-not-cleared", S, "_release_aux",
           "n.aux_content[m] = o.ite(o.and_(when, o.eq(s.aux_owner[m], r + 1)), UNWRITTEN, s.aux_content[m])",
           "pass", "release does not clear the metadata slot (write dropped)",
           equivalent="decode commits only once rank 0 concluded Success, which needs the request's own aux write landed in its slot, so what the slot held before is never read"),
    Mutant("sg-room-check-any", S, "decode_commit", "mine = o.eq(slot, r + 1)", "mine = o.ne(slot, UNWRITTEN)",
           "any written slot passes the bootstrap-room check (== r+1 to != unwritten)"),
    Mutant("sg-gate-does-not-wait", S, "decode_commit", "s.require(o.ne(slot, UNWRITTEN))", "pass",
           "the metadata gate does not wait for the slot (guard dropped)",
           equivalent="every prefill rank concludes Success only after rank 0's aux write landed in the request's slot, and only the slot's owner clears it, so the slot is never unwritten at commit"),
    Mutant("sg-read-despite-room", S, "decode_commit", "n.read[r] = o.ite(mine, found, READ_NONE)",
           "n.read[r] = found", "the pages are read even when the slot names another room",
           equivalent="the slot names another room only when that room's late aux write landed after ours; landing ours after it instead (both were in flight) reaches the same pages with our own slot, where the read is recorded too"),
]


@dataclass(frozen=True)
class Located:
    """Where a mutant applies in this tree: 1-based line, the mutated file text and the mutated
    function's source."""

    line: int
    text: str
    function: str


class Stale(ValueError):
    """A mutant's function or text is not in the tree any more."""


def locate(m: Mutant, root: Path = ROOT) -> Located:
    """Find ``m.old`` in ``m.function`` of ``m.file`` (first occurrence in the function body)
    and return the line and the file's text with the mutation applied."""
    src = (root / m.file).read_text()
    lines = src.splitlines(keepends=True)
    heads = [i for i, t in enumerate(lines) if re.match(rf"\s*def {re.escape(m.function)}\(", t)]
    if len(heads) != 1:
        raise Stale(f"{m.id}: {m.file}: expected one 'def {m.function}(', found {len(heads)}")
    start = heads[0]
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = len(lines)
    for j in range(start + 1, len(lines)):
        t = lines[j]
        if t.strip() and len(t) - len(t.lstrip()) <= indent and not t.lstrip().startswith((")", "]")):
            end = j
            break
    for j in range(start + 1, end):
        if m.old in lines[j]:
            if m.new == "pass" and lines[j].strip() != m.old:
                raise Stale(f"{m.id}: {m.file}:{j + 1}: 'pass' replaces whole statements only")
            lines[j] = lines[j].replace(m.old, m.new, 1)
            return Located(j + 1, "".join(lines), "".join(lines[start:end]))
    raise Stale(f"{m.id}: {m.file}: {m.old!r} is not in {m.function}")


def mutated_tree(m: Mutant | None, dest: Path, root: Path = ROOT) -> Path:
    """Lay out the package ``kvproof`` under ``dest`` from this tree, with ``m`` applied (none:
    the tree as it is); returns the folder to put on ``PYTHONPATH``."""
    for src, to in PACKAGES.items():
        shutil.copytree(root / src, dest / to, ignore=shutil.ignore_patterns("__pycache__"))
    traces = dest / "kvproof" / "traces"
    traces.mkdir()
    shutil.copy(root / "traces" / "__init__.py", traces / "__init__.py")
    if m is not None:
        target = dest / "kvproof" / "spec" / Path(m.file).relative_to("spec")
        target.write_text(locate(m, root).text)
    return dest


# The child process: check the catalogue on the mutated copy, smallest scenarios first, and stop
# at the first verdict that differs from its expectation (kvproof check's exit 1).
_CHILD = r"""
import json, sys
import kvproof.spec
if not kvproof.spec.__file__.startswith(sys.argv[1]):
    print(json.dumps({"error": "the installed kvproof shadows the mutated copy: " + kvproof.spec.__file__}))
    sys.exit(3)
from kvproof.checker.results import exit_code
from kvproof.checker.run import check_scenario
from kvproof.spec.scenario import builtins
only = [n for n in sys.argv[3].split(",") if n]
order = json.loads(sys.argv[2])
scenarios = [s for s in builtins() if not only or s.name in only]
scenarios.sort(key=lambda s: (order.get(s.name, 10**9), s.name))
for sc in scenarios:
    rep = check_scenario(sc)
    code = exit_code([rep])
    if code != 0:
        wrong = [f"{c.claim} expected {c.expected}, found {c.verdict}" for c in rep.claims if c.verdict != c.expected]
        print(json.dumps({"caught": sc.name, "code": code, "claims": wrong}))
        sys.exit(1)
print(json.dumps({"survived": len(scenarios)}))
"""


def _order(root: Path = ROOT) -> dict[str, int]:
    """Scenario name -> distinct states, from ``traces/expected.toml`` (cheapest first)."""
    import tomllib

    path = root / "traces" / "expected.toml"
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text())
    return {name: int(t.get("states", 0)) for name, t in data.items() if isinstance(t, dict)}


@dataclass
class Outcome:
    """What the gate said about one mutant."""

    mutant: Mutant
    line: int
    result: str  # caught | equivalent | survived | error | timeout
    detail: str
    cpu: float


def run_gate(m: Mutant | None, scenarios: list[str] | None = None, full: bool = False, timeout: float = 1800,
             root: Path = ROOT) -> tuple[str, str, float]:
    """Run the catalogue gate on a copy of the tree with ``m`` applied (``None``: unmutated).
    Returns (``caught`` | ``survived`` | ``error`` | ``timeout``, detail, child CPU seconds)."""
    with tempfile.TemporaryDirectory(prefix="kvproof-mutant-") as tmp:
        path = mutated_tree(m, Path(tmp), root)
        env = dict(os.environ, PYTHONPATH=str(path), PYTHONDONTWRITEBYTECODE="1")
        if full:
            cmd = [sys.executable, "-m", "kvproof", "check", "--quiet", "--no-traces", *(scenarios or [])]
        else:
            cmd = [sys.executable, "-c", _CHILD, str(path), json.dumps(_order(root)), ",".join(scenarios or [])]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", f"no answer within {timeout:.0f} s", timeout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if full:
        if done.returncode == 0:
            return "survived", "kvproof check exited 0", cpu
        if done.returncode == 1:
            return "caught", "kvproof check exited 1", cpu
        return "error", f"kvproof check exited {done.returncode}: {_last_line(done)}", cpu
    try:
        said = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return "error", f"exit {done.returncode}: {_last_line(done)}", cpu
    if "caught" in said:
        return "caught", f"{said['caught']}: {'; '.join(said['claims'])}", cpu
    if "survived" in said:
        return "survived", f"all {said['survived']} scenarios as expected", cpu
    return "error", said.get("error", "?"), cpu


def _last_line(done: subprocess.CompletedProcess) -> str:
    text = (done.stderr or done.stdout or "").strip().splitlines()
    return text[-1] if text else "(no output)"


def main(argv: list[str] | None = None) -> int:
    """Run the gate on the mutants; print one row each and the score.  Exit 0 when every mutant is
    caught or argued equivalent, 1 when some survive unargued (or error), 3 on a stale list."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", action="store_true", help="print the mutants (id, file:line, what changed) and exit")
    p.add_argument("--only", help="comma-separated mutant ids")
    p.add_argument("--full", action="store_true", help="run `kvproof check` itself (no early stop)")
    p.add_argument("--scenarios", help="comma-separated scenarios to check instead of the whole catalogue (to try a "
                                       "killing scenario; the score needs the whole catalogue)")
    p.add_argument("--no-baseline", action="store_true", help="skip the check that the unmutated tree passes")
    p.add_argument("--json", metavar="FILE", help="also write the outcomes as JSON")
    args = p.parse_args(argv)
    chosen = MUTANTS
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in {m.id for m in MUTANTS}]
        if unknown:
            print(f"mutation: no mutant {unknown[0]!r} (--list names them)", file=sys.stderr)
            return 3
        chosen = [m for m in MUTANTS if m.id in wanted]
    try:
        where = {m.id: locate(m) for m in chosen}
    except Stale as e:
        print(f"mutation: stale mutant: {e}", file=sys.stderr)
        return 3
    if args.list:
        for m in chosen:
            tag = "  [argued equivalent]" if m.equivalent else ""
            print(f"{m.id:<38} {m.file}:{where[m.id].line:<5} {m.what}{tag}")
            print(f"{'':<38}   {m.old!r} -> {m.new!r}")
        return 0
    scenarios = args.scenarios.split(",") if args.scenarios else None
    if not args.no_baseline:
        result, detail, cpu = run_gate(None, scenarios, full=args.full)
        print(f"baseline (unmutated tree): {result}, {detail} ({cpu:.0f} s CPU)", flush=True)
        if result != "survived":
            print("mutation: the unmutated tree does not pass the gate", file=sys.stderr)
            return 1
    outcomes: list[Outcome] = []
    for m in chosen:
        result, detail, cpu = run_gate(m, scenarios, full=args.full)
        if result == "survived" and m.equivalent:
            result, detail = "equivalent", m.equivalent
        outcomes.append(Outcome(m, where[m.id].line, result, detail, cpu))
        print(f"{m.id:<38} {m.file}:{where[m.id].line:<5} {result:<10} {cpu:6.1f} s  {detail}", flush=True)
    counts = {k: sum(o.result == k for o in outcomes) for k in ("caught", "equivalent", "survived", "error", "timeout")}
    print(f"\nmutation score: {counts['caught']} caught, {counts['equivalent']} argued equivalent, "
          f"{counts['survived']} survived, of {len(outcomes)} mutants"
          + (f" ({counts['error']} errors, {counts['timeout']} timeouts)" if counts['error'] + counts['timeout'] else "")
          + f"; {sum(o.cpu for o in outcomes):.0f} s CPU")
    if args.json:
        Path(args.json).write_text(json.dumps([
            {"id": o.mutant.id, "file": o.mutant.file, "line": o.line, "old": o.mutant.old, "new": o.mutant.new,
             "what": o.mutant.what, "result": o.result, "detail": o.detail, "cpu_seconds": round(o.cpu, 1)}
            for o in outcomes], indent=2) + "\n")
    return 0 if counts["survived"] + counts["error"] + counts["timeout"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
