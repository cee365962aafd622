"""Replay: run a kvproof trace's events on SGLang 0.5.23's code and compare every step.

After each event the model's state and the harness are reduced to the same
:class:`~.observation.Observation` (held entries, decode page owners and every shard's content,
finish reasons, reads, ABORTs sent with or without an armed generation, the drain acks decode
recorded per prefill rank, metadata slots, a page released under an in-flight write); the first
step where they differ, or where the code cannot take the step, is the divergence.  A drain ack
SGLang sends must also be one the model allows at that point.  A trace whose every step
matches *reproduces* on the real code.
"""

from __future__ import annotations

import os
import traceback
from typing import Sequence

from kvproof.checker.conform import Conformance, StepResult
from kvproof.model.machine import Machine
from kvproof.spec.sglang.state import ABT_SENT, ACK_NONE, D_NEW, PAB_ACKED, WR_FLIGHT
from kvproof.model.scenario import Scenario
from kvproof.spec.sglang.conform.errors import ConformError
from kvproof.spec.sglang.conform.harness import Divergent, Harness, HarnessError, Options, Shape
from kvproof.spec.sglang.conform.observation import model_observation

__all__ = ["ConformError", "StepResult", "Conformance", "harness_for", "run_on_code", "UNSUPPORTED",
           "CHOICE_FLAGS"]

UNSUPPORTED = {
    "receipt_ack_taken_as_drain": (True, "SGLang 0.5.23 releases only on a generation-matched drain ack"),
    "checksum": (True, "the transfer checksum needs a GPU digest kernel"),
    "verify_then_read": (True, "decode's running batch (the read after verification) is not driven"),
    "peer_death": (True, "the harness does not run the heartbeat checker thread, so a dead prefill is not staged"),
    "prefill_aborts": (True, "prefill-side client aborts are not driven"),
    "failure_clears_ack_target": (True, "SGLang 0.5.23 keeps the ack target until writes drain (PR 40645)"),
    "register_before_abort": (False, "SGLang 0.5.23 arms the room before it sends ABORT"),
    "acks_carry_generation": (False, "SGLang 0.5.23's drain acks carry the generation"),
    "aux_held_with_pages": (False, "SGLang 0.5.23 keeps the metadata slot in _deferred_releases"),
}
"""Engine flag values the harness has no counterpart of: flag -> (value, why)."""

CHOICE_FLAGS = {
    "timeout_action": ("release", "SGLang 0.5.23 releases at the deadline"),
    "required_acks": ("every_prefill_rank", "SGLang 0.5.23 waits for len(bootstrap_infos) acks"),
    "hold_combine": ("max", "SGLang 0.5.23 MAX-reduces the hold decision"),
    "ready_combine": ("min", "SGLang 0.5.23 MIN-reduces readiness"),
}
"""String flags whose value must be 0.5.23's: flag -> (value, why)."""


def harness_for(scenario: Scenario, spec) -> Harness:
    """A harness configured like ``scenario``'s engine; :class:`ConformError` for flags and
    sizes the real code (or the harness) has no counterpart of."""
    cfg, e = scenario.config, scenario.config.engine
    for flag, (value, why) in UNSUPPORTED.items():
        if getattr(e, flag) == value:
            raise ConformError(f"scenario {scenario.name} sets engine.{flag} = {str(value).lower()}: {why}")
    for flag, (value, why) in CHOICE_FLAGS.items():
        if getattr(e, flag) != value:
            raise ConformError(f"scenario {scenario.name} sets engine.{flag} = {getattr(e, flag)}: {why}")
    if e.waiting_timeout is not None:
        raise ConformError(f"scenario {scenario.name} sets engine.waiting_timeout: the waiting timeout is not driven")
    if e.release_policy == "drain_ack":
        raise ConformError(f"scenario {scenario.name}: release_policy drain_ack has no deadline; "
                           "SGLang 0.5.23 always has one (drain_ack_or_timeout)")
    if cfg.layers != 1:
        raise ConformError(f"scenario {scenario.name}: layers = {cfg.layers}: Mooncake sends every layer of a "
                           "chunk in one transfer call")
    if cfg.aux_slots > 1:
        raise ConformError(f"scenario {scenario.name}: aux_slots = {cfg.aux_slots}: ReqToMetadataIdxAllocator "
                           "hands out slots first-in first-out, the model the lowest free one")
    if cfg.aux_slots and e.request_streams:
        raise ConformError(f"scenario {scenario.name}: aux slots with request streams: the model's old "
                           "content does not name its room, which SGLang's metadata check compares")
    if cfg.aux_slots and max(cfg.prefill_ranks, cfg.decode_ranks) > 1:
        raise ConformError(f"scenario {scenario.name}: aux slots with several ranks: every prefill rank's worker "
                           "sends the metadata to every decode rank it serves, the model one write by rank 0")
    if e.transfer_failures and cfg.decode_ranks > cfg.prefill_ranks:
        raise ConformError(f"scenario {scenario.name}: transfer failures with a prefill rank serving several decode "
                           "ranks: the worker stops at the failed destination, the model's write covers them all")
    if max(cfg.prefill_ranks, cfg.decode_ranks) > 2:
        raise ConformError(f"scenario {scenario.name}: more than two ranks a side: the model pairs ranks modulo "
                           "their gcd, SGLang's _resolve_rank_mapping in contiguous blocks")
    opts = Options(deferred_release=e.release_policy != "immediate", timeout_ticks=e.timeout,
                   allocation_policy=e.decode_allocation_policy)
    reqs = tuple((spec.k.tenant[r], spec.pages(r), spec.over_long(r)) for r in range(spec.k.R))
    rooms = instances = None
    if e.room_policy == "client":
        rooms = tuple(cfg.room_of(r) for r in range(spec.k.R))
        instances = tuple(q.prefill_instance for q in cfg.requests)
    shape = Shape(reqs, cfg.decode_pages, cfg.prefill_pages, cfg.prefill_ranks, cfg.decode_ranks, cfg.aux_slots,
                  rooms, instances)
    return Harness(shape, opts)


def _write_after_release(machine: Machine, state: bytes) -> bool:
    spec, lay, k = machine.spec, machine.spec.layout, machine.spec.k
    for r in range(k.R):
        for w in range(k.S):
            for c in range(spec.send_len(r)):
                if state[lay.slot("wr", r, w, c)] >= WR_FLIGHT:
                    name, idx = spec.write_dest(r, w, c)
                    if state[lay.slot("owner", state[lay.slot(name, *idx)])] != r + 1:
                        return True
        if k.M and state[lay.slot("aux_wr", r)] >= WR_FLIGHT:
            if state[lay.slot("aux_owner", state[lay.slot("aux", r)])] != r + 1:
                return True
    return False


def _has_receiver(lay, state: bytes, r: int) -> bool:
    """Request ``r`` has a decode receiver without pages (``prefill_complete``: ``d_boot``)."""
    return "d_boot" in lay.by_name and state[lay.slot("d_boot", r)] == 1


def _instance(machine: Machine, name: str, *args: int) -> int | None:
    for inst in machine.instances:
        if inst.name == name and tuple(inst.args) == args:
            return inst.aid
    return None


def run_on_code(machine: Machine, harness: Harness, actions: Sequence[int]) -> Conformance:
    """Run ``actions`` from the model's initial state on both the model and ``harness``,
    comparing after every step; stops at the first divergence."""
    lay, k = machine.spec.layout, machine.spec.k
    out = Conformance()
    state = machine.init
    aborts: list[tuple[int, int, bool]] = []
    acks_checked: set[tuple[int, int]] = set()
    war = False

    def diverge(step: int, label: str, why: str) -> Conformance:
        out.diverged_at, out.reason = step, f"{label}: {why}"
        out.steps.append(StepResult(step, label, (why,)))
        return out

    for n, aid in enumerate(actions, start=1):
        inst = machine.instances[aid]
        label = machine.label(aid)
        nxt = machine.step(state, aid)
        if nxt is None:
            out.diverged_at, out.reason = n, f"{label} is not enabled in the model there"
            return out
        if inst.name == "client_send":
            r = inst.args[0]
            for pr in range(k.PR):
                if state[lay.slot("ack", r, pr)] == ACK_NONE:
                    harness.forget_unsent_ack(r, pr)
            acks_checked = {(x, pr) for x, pr in acks_checked if x != r}
        event = getattr(harness, inst.name, None)
        if event is None:
            return diverge(n, label, f"the harness has no counterpart of {inst.name}")
        try:
            event(*inst.args)
        except (Divergent, HarnessError) as e:
            return diverge(n, label, str(e))
        except Exception as e:  # SGLang itself raised: that is what the code did
            if os.environ.get("KVPROOF_CONFORM_DEBUG"):
                traceback.print_exc()
            return diverge(n, label, f"SGLang raised {type(e).__name__}: {e}")
        for r in range(k.R):
            # an abort before decode had the request reaches prefill directly, not as an ABORT
            # (prefill_complete: a receiver waiting for prefill has no pages yet but sends one)
            if state[lay.slot("d_phase", r)] == D_NEW and not _has_receiver(lay, state, r):
                continue
            for pr in range(k.PR):
                if state[lay.slot("abort_tx", r, pr)] != ABT_SENT and nxt[lay.slot("abort_tx", r, pr)] == ABT_SENT:
                    aborts.append((r, pr, nxt[lay.slot("armed", r)] == 1))
        war = war or _write_after_release(machine, nxt)
        diffs = model_observation(machine, nxt, tuple(aborts), war).differences(harness.observe())
        diffs += harness.anomalies()
        for r, pr in sorted(harness.acks_sent() - acks_checked):
            acks_checked.add((r, pr))
            ack = _instance(machine, "prefill_drain_ack", r, pr)
            allowed = nxt[lay.slot("p_abort", r, pr)] == PAB_ACKED or (
                ack is not None and machine.step(nxt, ack) is not None)
            if not allowed:
                diffs.append(f"SGLang's P{pr} sent its drain ack for R{r} where the model does not allow one "
                             "(a write of that rank may still be in flight)")
        out.steps.append(StepResult(n, label, tuple(diffs)))
        if diffs:
            out.diverged_at, out.reason = n, f"{label}: " + "; ".join(diffs)
            return out
        state = nxt
    return out
