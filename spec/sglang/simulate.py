"""Seeded random simulation of long workloads on the compiled spec.

Exhaustive search covers a handful of requests; a simulation runs thousands through the same
spec.  The scenario's engine flags are kept; its requests become the shapes of ``slots``
concurrent request slots (cycled), each slot taking the client's next request when its last
one has fully ended (``client_send``, request streams).  Every step picks uniformly among the
enabled actions, so aborts, failures, message losses and write latencies happen as often as the
scenario allows.  A response that read another request's data is counted, in the incident's
terms; the run up to the first such response is kept as a trace.  Held requests' releases are
counted by what justified them: a drain proof or a deadline (``release_justified``'s two paths).
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, replace
from typing import Callable

from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.state import (
    D_ENDED, OUT_ABORTED, OUT_ERROR, OUT_SUCCESS, READ_CROSS_TENANT, READ_FOREIGN, owned_by,
)
from kvproof.model.scenario import Scenario
from kvproof.model.machine import Machine

__all__ = ["Exposure", "CLAIM", "scenario_of", "setting", "simulation_scenario", "simulate",
           "slice_exposure", "RELEASES_ON_PROOF", "RELEASES_ON_DEADLINE"]

CLAIM = "decode_reads_only_own_pages"
"""The claim an exposure breaks: the trace of the run up to the first one is written under it."""


def scenario_of(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """:func:`simulation_scenario` with the command's ``--pages`` and ``--slots``."""
    return simulation_scenario(scenario, args.pages, args.slots)


def setting(args: argparse.Namespace) -> str:
    """How the run's first line names what it ran over (``over 64 decode pages (8 at a time``,
    the command adding the seed)."""
    return f"over {args.pages} decode pages ({args.slots} at a time"


@dataclass
class Exposure:
    """What a simulation saw, counted per finished request (``responses`` are successes, of which
    ``foreign_reads`` read another request's data and ``cross_tenant_reads`` another tenant's).
    ``first_bad_run`` holds the action ids up to the first such response (``None``: none).
    ``held_releases`` counts the releases that need a drain proof (:data:`RELEASES_ON_PROOF`) or
    are made without one on a deadline (:data:`RELEASES_ON_DEADLINE`: a held request's timeout, a
    live request's on the heartbeat deadline), ``deadline_releases`` the latter."""

    requests: int = 0
    responses: int = 0
    foreign_reads: int = 0
    cross_tenant_reads: int = 0
    errors: int = 0
    aborted: int = 0
    steps: int = 0
    stuck: bool = False
    first_bad_run: list[int] | None = None
    first_bad_pre: bytes | None = None
    held_releases: int = 0
    deadline_releases: int = 0

    @property
    def deadline_share(self) -> float | None:
        """The share of held requests' releases made on a deadline (``None``: no release)."""
        return self.deadline_releases / self.held_releases if self.held_releases else None

    def lines(self) -> list[str]:
        """What the run saw, a line each, as ``kvproof simulate`` prints them after its first line:
        the responses, the exposures, the held requests' releases and whether the run got stuck."""
        def s(n: int, word: str) -> str:
            return word if n == 1 else word + "s"

        out = [f"  {self.responses:,} successful responses, {self.errors:,} errors, {self.aborted:,} aborted",
               f"  {self.foreign_reads:,} {s(self.foreign_reads, 'response')} read another request's KV; "
               f"{self.cross_tenant_reads:,} read another tenant's"]
        if self.held_releases:
            out.append(f"  {self.held_releases:,} held {s(self.held_releases, 'release')}: {self.deadline_releases:,} "
                       f"on a deadline ({self.deadline_releases / self.held_releases:.0%}), the rest on drain acks")
        if self.stuck:
            out.append("  the run got stuck: requests left unfinished with nothing enabled")
        return out


def simulation_scenario(scenario: Scenario, pages: int, slots: int) -> Scenario:
    """The scenario's engine over ``pages`` decode pages and ``slots`` request slots."""
    cfg = scenario.config
    reqs = tuple(cfg.requests[i % len(cfg.requests)] for i in range(slots))
    engine = replace(cfg.engine, request_streams=True, ordered_arrivals=False)
    sim_cfg = replace(cfg, requests=tuple(Request(r.tenant, r.pages) for r in reqs), decode_pages=pages,
                      engine=engine)  # every other dimension (ranks, metadata slots, layers) as the scenario has it
    return Scenario(f"{scenario.name}-sim", f"simulation of {scenario.name}", scenario.title, sim_cfg,
                    {}, scenario.protocol, scenario.origin)


FAULTS = ("decode_abort", "prefill_transfer_failed", "net_drop_ack", "net_drop_abort", "prefill_abort",
          "prefill_dies")
READS = ("decode_commit", "decode_forward")  # the actions that read a request's pages
RELEASES_ON_PROOF = ("decode_release_deferred",)
"""Releases of a held request justified by its drain acks (``is_abort_release_safe``)."""
RELEASES_ON_DEADLINE = ("decode_release_timeout", "decode_peer_dead_release")
"""Releases of a held request on a deadline: the release timeout, or the heartbeat deadline that
declares the prefill dead (``release_justified`` fails on both)."""
"""Actions that are faults rather than progress: they get ``fault_weight`` in the random choice."""


def simulate(
    machine: Machine,
    requests: int,
    seed: int,
    fault_weight: float = 0.02,
    max_steps: int | None = None,
    progress: Callable[[Exposure], None] | None = None,
) -> Exposure:
    """Run ``requests`` requests through ``machine`` (built from :func:`simulation_scenario`).

    Each step picks an enabled action at random, a fault (:data:`FAULTS`) with weight
    ``fault_weight`` and any other action with weight 1.
    """
    spec = machine.spec
    rng = random.Random(seed)
    k = spec.k
    layout = spec.layout
    read_slot = [layout.slot("read", r) for r in range(k.R)]
    phase_slot = [layout.slot("d_phase", r) for r in range(k.R)]
    outcome_slot = [layout.slot("outcome", r) for r in range(k.R)]
    names = [inst.name for inst in machine.instances]
    args = [inst.args for inst in machine.instances]
    out = Exposure(requests=min(requests, k.R))
    limit = max_steps if max_steps is not None else 200 * requests + 1000
    state = machine.init
    run: list[int] = []
    successors = machine.successors
    weight = [fault_weight if n in FAULTS else 1.0 for n in names]
    def tally(st: bytes, r: int) -> None:
        outcome, read = st[outcome_slot[r]], st[read_slot[r]]
        out.responses += outcome == OUT_SUCCESS
        out.errors += outcome == OUT_ERROR
        out.aborted += outcome == OUT_ABORTED
        out.foreign_reads += read in (READ_FOREIGN, READ_CROSS_TENANT)
        out.cross_tenant_reads += read == READ_CROSS_TENANT

    while out.steps < limit:
        succ = successors(state)
        if out.requests >= requests:
            succ = [x for x in succ if names[x[0]] != "client_send"]
        if not succ:
            out.stuck = any(state[phase_slot[r]] != D_ENDED for r in range(k.R))
            break
        aid, nxt = _pick(succ, weight, rng)
        out.steps += 1
        if out.first_bad_run is None:
            run.append(aid)
        if names[aid] in RELEASES_ON_PROOF or names[aid] in RELEASES_ON_DEADLINE:
            out.held_releases += 1
            out.deadline_releases += names[aid] in RELEASES_ON_DEADLINE
        if names[aid] == "client_send":
            out.requests += 1
            tally(state, args[aid][0])
        elif names[aid] in READS and out.first_bad_run is None:
            if nxt[read_slot[args[aid][0]]] in (READ_FOREIGN, READ_CROSS_TENANT):
                out.first_bad_run = list(run)
                out.first_bad_pre = state
        state = nxt
        if progress is not None and out.steps % 4096 == 0:
            progress(out)
    for r in range(k.R):
        tally(state, r)
    return out


def _pick(succ: list[tuple[int, bytes]], weight: list[float], rng: random.Random) -> tuple[int, bytes]:
    x = rng.random() * sum(weight[a] for a, _ in succ)
    for item in succ:
        x -= weight[item[0]]
        if x < 0:
            return item
    return succ[-1]


def slice_exposure(machine: Machine, exposure: Exposure) -> list[int] | None:
    """A short run that still ends in the same kind of exposure, or ``None``.

    A long simulation reaches its first foreign read after thousands of steps, most of them
    other requests' business.  Keep only the two requests involved - the reader, from the start
    of its request, and the request whose late write it read, from the start of that request to
    the write's landing - plus the clock; replay that from the initial state, skipping steps
    that are not enabled there; and keep the result only if it ends in a read of the same kind
    (foreign, or another tenant's).  The slice is a run of the same spec, checked by replay, not
    an excerpt of the simulated one.
    """
    spec = machine.spec
    run = exposure.first_bad_run
    if not run or machine.instances[run[-1]].name not in READS:
        return None
    victim = machine.instances[run[-1]].args[0]
    windows = {victim: [_episode_start(machine, run, victim, len(run) - 1), len(run) - 1]}
    culprit = _last_foreign_landing(machine, run, victim)
    if culprit is None:
        return None
    r, landed = culprit
    windows[r] = [_episode_start(machine, run, r, landed), landed]
    begin = min(w[0] for w in windows.values())
    sliced, state = [], machine.init
    for i, aid in enumerate(run[begin:], start=begin):
        if _kept(machine.instances[aid], windows, i):
            nxt = machine.step(state, aid)
            if nxt is not None:
                sliced.append(aid)
                state = nxt
    wanted = machine.step(exposure.first_bad_pre, run[-1])[spec.layout.slot("read", victim)]
    ok = sliced and sliced[-1] == run[-1] and state[spec.layout.slot("read", victim)] == wanted
    return sliced if ok else None


def _episode_start(machine: Machine, run: list[int], r: int, upto: int) -> int:
    """Index just after the last ``client_send(r)`` before ``upto`` (0 if none)."""
    for i in range(upto, -1, -1):
        inst = machine.instances[run[i]]
        if inst.name == "client_send" and inst.args[0] == r:
            return i + 1
    return 0


def _last_foreign_landing(machine: Machine, run: list[int], victim: int) -> tuple[int, int] | None:
    """(request, index) of the last write by another request that landed on a page the victim
    then held, found by replaying the run."""
    spec = machine.spec
    lay = spec.layout
    state, found = machine.init, None
    for i, aid in enumerate(run):
        inst = machine.instances[aid]
        if inst.name == "kv_write_lands" and inst.args[0] != victim:
            r, _, c = inst.args
            page = state[lay.slot("dest", r, c)]
            if state[lay.slot("owner", page)] == owned_by(victim):
                found = (r, i)
        state = machine.step(state, aid)
    return found


def _kept(inst, windows: dict[int, list[int]], i: int) -> bool:
    if not inst.action.params or inst.action.params[0] != "req":
        return True  # the clock and other global actions
    r = inst.args[0]
    return r in windows and windows[r][0] <= i <= windows[r][1] and inst.name != "client_send"
