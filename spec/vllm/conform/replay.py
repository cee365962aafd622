"""Replay: run a kvproof event sequence on vLLM 0.33.0's code and compare every step.

After each event the model's state and the harness are reduced to the same
:class:`~.observation.Observation`; the first step where they differ, or where the code cannot
take the step (or raises), is the divergence, reported with both sides.  A sequence whose every
step matches *agrees* with the real code.
"""

from __future__ import annotations

import os
import traceback
from typing import Sequence

from kvproof.checker.conform import Conformance, StepResult
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.spec.vllm.conform.harness import TICK_SECONDS, Divergent, Harness, HarnessError, Shape
from kvproof.spec.vllm.conform.observation import model_observation

__all__ = ["ConformError", "StepResult", "Conformance", "harness_for", "run_on_code", "FIXED_IN_0_33", "NOT_IN_0_33"]


class ConformError(ValueError):
    """A trace or scenario the harness cannot run (one line: which knob, and why)."""


FIXED_IN_0_33 = {
    "delay_free_aborted_load": (False, "#32255 (0.33.0 holds an aborted load's blocks until finished_recving)"),
    "abort_of_finished_frees": (True, "#25067 (0.33.0's finish_requests skips a finished request)"),
    "defer_block_free": (False, "#45357 (0.33.0 defers a finished request's block free on a KV consumer with "
                                "async scheduling until the step in flight is processed)"),
    "prefix_end_trim": (False, "#48758 (0.33.0's push _xfer_blocks end-trims prefill's blocks with "
                               "_apply_prefix_caching)"),
    "report_notify_only_recv": (False, "#56640 (0.33.0's _read_blocks records a parked full local hit's "
                                       "notify-only load, so _pop_done_transfers reports it)"),
    "mla_notif_remote_id": (False, "#36958 (0.33.0's _read_blocks_for_req names prefill's request id in the MLA "
                                   "notify-only notification)"),
    "reaper_scans_every_lease": (False, "#58222 (0.33.0's _reap_expired_send_leases scans every _reqs_to_send "
                                        "entry instead of stopping at the first live lease)"),
    "turn2_declines_near_expiry": (False, "#47021 (0.33.0's reader declines a turn-2 READ with "
                                          "_is_turn2_read_expired)"),
    "reject_notifies_prefill": (False, "#41269 (0.33.0's request_finished seeds an empty recv for a rejected "
                                       "request, and decode's worker notifies prefill)"),
    "registration_generation_check": (False, "the registration check (0.33.0's decode compares a request's "
                                             "remote_registration_generation and handshakes again when it is newer)"),
    "failure_waits_for_siblings": (False, "#56104 (0.33.0's decode worker reports a failed READ only once no "
                                          "sibling handle of the request is in progress)"),
    "retains_unreleased_handle": (False, "0.33.0's _try_release_xfer_handle (HYPOTHETICAL before: a decode worker "
                                         "that drops a failed READ's handle whose release failed)"),
}
"""Engine knobs whose value describes a vLLM before a fix 0.33.0 has: knob -> (value, fix).
Their traces replay on 0.33.0 (and diverge where the fix acts); random sequences refuse them."""


NOT_IN_0_33 = {
    "push_fail_notif": (True, "#50754's PUSH_FAIL (an open PR, not in 0.33.0)"),
    "decode_refuses_replayed_params": (True, "a fail-closed decode refusing replayed references (not in 0.33.0)"),
    "remote_token_cap": (True, "a decode that caps its remote token count at remote_num_tokens (#50558 was "
                               "closed unmerged; not in 0.33.0)"),
}
"""Engine knobs whose value describes a hypothetical fix 0.33.0 does not have: knob -> (value,
fix).  Neither its traces nor random sequences can run on 0.33.0."""


def harness_for(scenario: Scenario, spec, random: bool = False) -> Harness:
    """A harness configured like ``scenario``'s engine (push mode: :class:`~.push.PushHarness`);
    :class:`ConformError` for knobs the
    harness has no counterpart of (``random``: also for knobs of a vLLM before 0.33.0's fixes)."""
    e, k = scenario.config.engine, spec.k
    if e.prefix_sharing:  # the spec vllm-prefix-cache: decode's shared prefix block, model-only
        raise ConformError(f"scenario {scenario.name}: the spec vllm-prefix-cache (prefix_sharing) is model-only; "
                           "the harness has no counterpart of decode's shared prefix block")
    if e.multi_connector:  # the spec vllm-multi-connector: NIXL beside LMCache, model-only
        raise ConformError(f"scenario {scenario.name}: the spec vllm-multi-connector (multi_connector) is model-only; "
                           "vLLM's LMCacheMPConnector imports the lmcache package, which kvproof does not install")
    for knob, (value, fix) in NOT_IN_0_33.items():
        if getattr(e, knob) == value:
            raise ConformError(f"scenario {scenario.name} sets engine.{knob} = {str(value).lower()}: {fix}; "
                               "0.33.0's code cannot run it")
    if random:
        for knob, (value, fix) in FIXED_IN_0_33.items():
            if getattr(e, knob) == value:
                raise ConformError(f"scenario {scenario.name} sets engine.{knob} = {str(value).lower()}: the "
                                   f"behaviour before {fix}; replay its traces instead")
    if k.I is not None and k.X * TICK_SECONDS != (k.L * TICK_SECONDS) * 2 // 3:
        raise ConformError(f"scenario {scenario.name}: kv_lease_duration = {k.L} ticks: a heartbeat extends "
                           f"0.33.0's lease by {k.L * TICK_SECONDS * 2 // 3} s, the model's by {k.X} ticks")
    if k.I is not None and k.I != 1:
        raise ConformError(f"scenario {scenario.name}: heartbeat_interval = {k.I} ticks: 0.33.0 heartbeats "
                           "every kv_lease_duration // 6 s, within every tick")
    if e.async_scheduling and e.mode != "pull":
        raise ConformError(f"scenario {scenario.name}: async_scheduling is replayed in pull mode only")
    if e.decode_prefix_hit and e.mode != "push" and not e.decode_appended_token:
        raise ConformError(f"scenario {scenario.name}: decode_prefix_hit is replayed in push mode, and in pull "
                           "mode with decode_appended_token (#50558)")
    shape = Shape(tuple(k.tenant), scenario.config.prefill_blocks, scenario.config.decode_blocks, k.L,
                  async_scheduling=e.async_scheduling, prefix_hit=e.decode_prefix_hit,
                  appended_token=e.decode_appended_token, origin=k.origin,
                  cached=k.cached if any(k.cached) else (), mla=k.mla,
                  turn2=e.turn2_read, turn2_offset_error=e.turn2_clock_offset_error,
                  ids=scenario.config.request_ids())
    if k.pull_ranked:
        from kvproof.spec.vllm.conform.ranked_pull import RankedPullHarness

        return RankedPullHarness(shape, k.F, reregisters=e.prefill_reregisters, post_may_fail=e.read_post_may_fail)
    if k.ranked:
        from kvproof.spec.vllm.conform.ranked import RankedPushHarness

        return RankedPushHarness(shape, k.F)
    if e.mode == "push":
        from kvproof.spec.vllm.conform.push import PushHarness

        return PushHarness(shape)
    return Harness(shape)


def run_on_code(machine: Machine, harness: Harness, actions: Sequence[int]) -> Conformance:
    """Run ``actions`` from the model's initial state on both the model and ``harness``,
    comparing after every step; stops at the first divergence."""
    out = Conformance()
    state = machine.init
    for n, aid in enumerate(actions, 1):
        label = machine.label(aid)
        nxt = machine.step(state, aid)
        if nxt is None:
            raise ConformError(f"step {n} ({label}) is not enabled in the model")
        inst = machine.instances[aid]
        event = getattr(harness, inst.name, None)
        if event is None:
            out.diverged_at, out.reason = n, f"{label}: the harness has no counterpart of {inst.name}"
            return out
        try:
            event(*inst.args)
        except (Divergent, HarnessError) as e:
            out.diverged_at, out.reason = n, f"{label}: {e}"
            return out
        except Exception as e:  # vLLM itself raised: that is what the code did
            if os.environ.get("KVPROOF_CONFORM_DEBUG"):
                traceback.print_exc()
            out.diverged_at, out.reason = n, f"{label}: vLLM raised {type(e).__name__}: {e}"
            return out
        diffs = model_observation(machine, nxt).differences(harness.observe())
        out.steps.append(StepResult(n, label, tuple(diffs)))
        if diffs:
            out.diverged_at, out.reason = n, f"{label}: " + "; ".join(diffs)
            return out
        state = nxt
    return out
