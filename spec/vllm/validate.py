"""vLLM's event log (schema version 1) and its observation of the vLLM spec's actions.

An event log is JSONL.  The first line is the header::

    {"v": 1, "log": "kvproof-events", "scenario": "vllm-pull-heartbeat-stall"}

``scenario`` is a built-in ``vllm-*`` scenario's name or its data inline (as traces store it).
With ``slots`` (and optionally ``prefill_blocks``, ``decode_blocks``) the scenario's engine runs
as a stream: that many request slots, each reused by a new request once its previous one ended
on both sides (:class:`VllmStream`: the reuse is part of the next ``prefill_request_finished``),
over the given block pools: the sliding window that keeps a long log's search bounded.  Every other line is one
event::

    {"v": 1, "t": 0.012, "actor": "decode", "event": "decode_start_load_kv", "req": 0,
     "rid": "cmpl-17", "gen": 0, "src": 0, "dest": 1}

* ``event`` is the name of the spec action it is the trace of (:data:`FIELDS`: the observable
  ones and what each adds).  The other actions (:data:`INTERNAL`) are never logged: the clock,
  decode's engine loop stalling and resuming, NIXL's one-sided data movement and completion
  (nobody sees them; decode learns of a completed READ at ``decode_finished_recving``, prefill
  at ``prefill_get_new_notifs``).
* ``t`` the time in seconds (a number; informational), ``actor`` ``prefill`` or ``decode``.
* ``req`` the request slot (``0..slots-1``), ``rid`` the request's id, ``gen`` the slot's
  request number (0 for its first; each ``prefill_request_finished`` after the first opens the
  next).  ``decode_send_heartbeats`` names no request: its ``reqs`` lists the slots the ``HB:``
  message names.
* per event: ``block`` the block it allocates or frees (prefill's ``q`` numbers for prefill's
  events, decode's ``p`` for decode's), ``src``/``dest`` a transfer's prefill and decode block,
  ``status`` what happened: ``finished_sending`` or ``late`` (a notification after the lease
  expired: "Potentially invalid KV blocks for unrecognized request") for
  ``prefill_get_new_notifs``; ``loaded`` or ``released`` (an aborted load's blocks freed) for
  ``decode_finished_recving``; ``held`` (#32255) or ``freed`` for ``decode_abort``.
* ``v`` on an event is optional; where present it must be 1.  Unknown keys are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvproof.checker.logs.validate import Event, log_text
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.spec.vllm.config import Request
from kvproof.spec.vllm.protocol import VllmPd
from kvproof.spec.vllm.state import (
    D_ENDED, D_HELD, D_LABELS, D_NEW, D_READING, D_TRACKED, P_FREED, P_HELD, P_LABELS, P_NEW, RD_DONE, RD_LABELS,
    RD_NONE,
)

__all__ = ["FIELDS", "INTERNAL", "STATUS", "VllmStream", "log_scenario", "stream_scenario", "observation",
           "VllmObservation", "to_events", "log_text", "random_run"]

FIELDS: dict[str, tuple[str, ...]] = {
    "prefill_request_finished": ("block",),
    "prefill_get_new_notifs": ("status",),
    "prefill_reap_expired_lease": ("block",),
    "prefill_abort_finished": ("block",),
    "prefill_push_write": ("src", "dest"),
    "prefill_get_transfer_results": ("block",),
    "decode_on_new_request": ("block",),
    "decode_start_load_kv": ("src", "dest"),
    "decode_send_push_reg": ("block",),
    "decode_finished_recving": ("block", "status"),
    "decode_abort": ("block", "status"),
    "decode_send_heartbeats": ("reqs",),
}
"""The observable actions, each logged under its own name, and the fields it carries besides
``t``, ``actor``, ``req``, ``rid`` and ``gen``."""

INTERNAL = ("clock_tick", "decode_stall", "decode_resume", "nixl_read_take_data", "nixl_read_complete",
            "nixl_write_land", "nixl_write_complete")
"""The actions no log shows."""

STATUS = {"prefill_get_new_notifs": ("finished_sending", "late"),
          "decode_finished_recving": ("loaded", "released"),
          "decode_abort": ("held", "freed")}
"""The values of ``status`` per event."""


class VllmStream(VllmPd):
    """The vLLM spec as a stream of requests through a fixed number of slots: the next request
    takes a slot whose request ended on both sides (decode ended it, prefill freed its block, no
    transfer or notification outstanding) in the same step as prefill finishes it
    (``prefill_request_finished``, the log's next generation), and requests reach prefill in any
    order.  Within a slot the generations share one content code, which loses nothing: decode
    only ever computes on a block a transfer filled, and a transfer carries what the source
    block holds when it moves (the slot's own KV, or another slot's)."""

    def _reusable(self, s, r):
        o = s.ops
        return o.and_(o.eq(s.d_phase[r], D_ENDED), o.is_in(s.p_phase[r], P_FREED),
                      o.is_in(s.rd[r], (RD_NONE, RD_DONE)), o.eq(s.notif[r], 0))

    def prefill_request_finished(self, s, n, r):
        """As :meth:`VllmPd.prefill_request_finished`, in any slot that is new or reusable, in
        any order; reusing a slot resets it first."""
        o = s.ops
        new = o.eq(s.p_phase[r], P_NEW)
        s.require(o.or_(new, self._reusable(s, r)))
        n.d_phase[r] = o.ite(new, s.d_phase[r], D_NEW)
        n.rd[r] = o.ite(new, s.rd[r], RD_NONE)
        for name in ("outcome", "read", "late"):
            getattr(n, name)[r] = o.ite(new, getattr(s, name)[r], 0)
        n.dest[r] = o.ite(new, s.dest[r], self.k.D)
        if not self.pull:
            n.reg[r] = o.ite(new, s.reg[r], 0)
        if self.k.A is not None:
            n.age[r] = o.ite(new, s.age[r], 0)
        self._allocate(s, n, r, "src_owner", "src", self.k.P, content="src_content")
        n.p_phase[r] = P_HELD
        n.lease[r] = self.k.L


MAX_SLOTS = 1024
"""The most request slots (and blocks in each pool) a log's header may name.  An owner or a block is one of
these or none, so past 255 the state's layout is wide (a field of more than 256 codes:
:attr:`~kvproof.model.layout.Layout.wide`) and the reference search checks the log (the C steps and the
factored search keep one byte a slot)."""


def stream_scenario(base: Scenario, slots: int, prefill_blocks: int, decode_blocks: int) -> Scenario:
    """``base``'s engine as a stream over ``slots`` request slots (tenants as ``base`` has them,
    in turn) and the given block pools."""
    cfg = base.config
    reqs = tuple(Request(cfg.requests[i % len(cfg.requests)].tenant) for i in range(slots))
    sim = replace(cfg, requests=reqs, prefill_blocks=prefill_blocks, decode_blocks=decode_blocks)
    return Scenario(f"{base.name}-stream", f"stream of {base.name}", base.title, sim, {}, "vllm-stream",
                    base.origin, "vllm")


def log_scenario(base: Scenario, header: dict) -> Scenario:
    """The scenario a log's header names: ``base``, or with ``slots`` its stream."""
    keys = ("slots", "prefill_blocks", "decode_blocks")
    if not any(k in header for k in keys):
        return base
    cfg = base.config
    slots = header.get("slots", len(cfg.requests))
    pb = header.get("prefill_blocks", cfg.prefill_blocks)
    db = header.get("decode_blocks", cfg.decode_blocks)
    for key, v in zip(keys, (slots, pb, db)):
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_SLOTS:
            raise ValueError(f"{key}: expected a whole number in 1..{MAX_SLOTS}, got {v!r}")
    return stream_scenario(base, slots, pb, db)


def observation(machine: Any, header: dict | None = None) -> "VllmObservation":
    """The observation of ``machine``'s actions (the protocol's ``validate`` command) for a log
    with ``header`` (no header key changes what a vLLM log shows)."""
    return VllmObservation(machine)


@dataclass
class _Slot:
    gen: int = -1
    rid: str | None = None


class VllmObservation:
    """What vLLM's event log shows of each action instance (see the module docstring)."""

    def __init__(self, machine: Any):
        """``machine``: anything with the ``spec`` (a :class:`~kvproof.model.machine.Machine`,
        a :class:`~kvproof.checker.logs.validate.Checked`)."""
        self.machine = machine
        spec = self.spec = machine.spec
        self.k = spec.k
        lay = spec.layout
        self.internal = [i.aid for i in spec.instances if i.name in INTERNAL]
        self.aid = {(i.name, i.args): i.aid for i in spec.instances}
        self.actor = {i.name: i.action.actor for i in spec.instances}
        R = self.k.R
        self.slot = {f: [lay.slot(f, r) for r in range(R)] for f in ("src", "dest", "p_phase", "d_phase")}
        self.observers = {i.aid: self._observer(i.name, i.args) for i in spec.instances if i.name in FIELDS}
        self.slots: dict[int, _Slot] = {}

    # -- what an action shows ------------------------------------------------------------------
    def _observer(self, name: str, args: tuple[int, ...]):
        if name == "decode_send_heartbeats":
            dph = self.slot["d_phase"]
            return lambda pre, post: (tuple(r for r in range(self.k.R) if pre[dph[r]] in D_TRACKED),)
        r = args[0]
        src, dest = self.slot["src"][r], self.slot["dest"][r]
        pph, dph = self.slot["p_phase"][r], self.slot["d_phase"][r]
        if name == "prefill_request_finished":
            return lambda pre, post: (post[src],)
        if name == "decode_on_new_request":
            return lambda pre, post: (post[dest],)
        if name in ("prefill_reap_expired_lease", "prefill_abort_finished", "prefill_get_transfer_results"):
            return lambda pre, post: (pre[src],)
        if name == "decode_send_push_reg":
            return lambda pre, post: (pre[dest],)
        if name in ("decode_start_load_kv", "prefill_push_write"):
            return lambda pre, post: (pre[src], pre[dest])
        if name == "prefill_get_new_notifs":
            return lambda pre, post: ("finished_sending" if pre[pph] == P_HELD else "late",)
        if name == "decode_finished_recving":
            return lambda pre, post: (pre[dest], "loaded" if pre[dph] == D_READING else "released")
        if name == "decode_abort":
            return lambda pre, post: (pre[dest], "held" if post[dph] == D_HELD else "freed")
        raise AssertionError(name)

    def observe(self, aid: int, pre: bytes, post: bytes) -> Any:
        """What the log shows of instance ``aid`` from ``pre`` to ``post``."""
        return self.observers[aid](pre, post)

    # -- reading an event --------------------------------------------------------------------------
    def decode(self, line: int, raw: dict) -> Event:
        """The event of one parsed line; ``ValueError`` names the first field that is wrong."""
        name = raw.get("event")
        if not isinstance(name, str) or name not in FIELDS or name not in self.actor:
            if not isinstance(name, str):
                raise ValueError(f"event: expected an action's name, got {name!r}")
            if name in INTERNAL:
                raise ValueError(f"event {name!r} is not logged (internal)")
            if name in FIELDS:
                raise ValueError(f"event {name!r} does not happen in this scenario's mode")
            from kvproof.model.scenario import did_you_mean

            raise ValueError(f"unknown event {name!r}{did_you_mean(name, list(FIELDS))}")
        t = raw.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            raise ValueError(f"t: expected the time in seconds (a number), got {t!r}")
        want_actor = self.actor[name]
        if raw.get("actor") != want_actor:
            raise ValueError(f"actor: {name} is logged by {want_actor!r}, got {raw.get('actor')!r}")
        want: list[Any] = []
        for f in FIELDS[name]:
            if f == "reqs":
                reqs = raw.get("reqs")
                if not isinstance(reqs, list) or not all(type(x) is int and 0 <= x < self.k.R for x in reqs) \
                        or sorted(set(reqs)) != reqs:
                    raise ValueError(f"reqs: expected the request slots the heartbeat names, ascending, in "
                                     f"0..{self.k.R - 1}, got {reqs!r}")
                want.append(tuple(reqs))
            elif f == "status":
                status = raw.get("status")
                if status not in STATUS[name]:
                    raise ValueError(f"status: expected one of {', '.join(STATUS[name])}, got {status!r}")
                want.append(status)
            else:  # block, src, dest
                pool = self.k.P if f == "src" or (f == "block" and want_actor == "prefill") else self.k.D
                want.append(self._int(raw, f, pool))
        if name == "decode_send_heartbeats":
            return Event(line, (self.aid[(name, ())],), tuple(want), raw)
        req = self._int(raw, "req", self.k.R)
        rid = raw.get("rid")
        if not isinstance(rid, str) or not rid:
            raise ValueError(f"rid: expected the request's id (a non-empty string), got {rid!r}")
        self._int(raw, "gen", None)
        return Event(line, (self.aid[(name, (req,))],), tuple(want), raw)

    @staticmethod
    def _int(raw: dict, key: str, bound: int | None) -> int:
        v = raw.get(key)
        if type(v) is int and v >= 0 and (bound is None or v < bound):
            return v
        what = "a whole number" + (f" in 0..{bound - 1}" if bound is not None else " >= 0")
        if key not in raw:
            raise ValueError(f"missing field {key!r} ({what})")
        raise ValueError(f"{key}: expected {what}, got {v!r}")

    # -- the log against itself ---------------------------------------------------------------------
    def admit(self, event: Event) -> str | None:
        """Request ids and generations must agree with the log's own
        ``prefill_request_finished`` events (each opens its slot's next generation)."""
        raw = event.raw
        if raw["event"] == "decode_send_heartbeats":
            return None
        slot = self.slots.setdefault(raw["req"], _Slot())
        gen, rid = raw["gen"], raw["rid"]
        if raw["event"] == "prefill_request_finished":
            if gen != slot.gen + 1:
                return f"prefill_request_finished opens generation {slot.gen + 1} of slot {raw['req']}, " \
                       f"the event names {gen}"
            slot.gen, slot.rid = gen, rid
            return None
        if gen != slot.gen:
            return f"slot {raw['req']} is at generation {slot.gen}, the event names generation {gen}"
        if rid != slot.rid:
            return f"slot {raw['req']} generation {gen} is request {slot.rid!r}, the event names {rid!r}"
        return None

    def describe(self, state: bytes, event: Event) -> str:
        """The request's phases, blocks and transfer in ``state``."""
        values = self.spec.layout.decode(state)
        if event.raw.get("event") == "decode_send_heartbeats":
            return "decode: " + " ".join(f"R{r}={D_LABELS[state[self.slot['d_phase'][r]]]}" for r in range(self.k.R))
        r = event.raw["req"]
        parts = [f"p_phase={P_LABELS[state[self.slot['p_phase'][r]]]}",
                 f"d_phase={D_LABELS[state[self.slot['d_phase'][r]]]}"]
        for name in ("src", "dest", "lease", "rd", "notif", "outcome"):
            if name in values:
                v = values[name][r]
                parts.append(f"{name}={RD_LABELS[v] if name == 'rd' and isinstance(v, int) else v}")
        return f"R{r}: " + " ".join(str(p) for p in parts)


# -- writing logs from runs of the spec -------------------------------------------------------------
def to_events(machine: Machine, actions: list[int], dt: float = 0.001) -> list[dict]:
    """The event log of a run of ``machine`` (action ids from the initial state): each visible
    step as the engine would log it, the internal ones left out."""
    obs = VllmObservation(machine)
    spec = machine.spec
    state = machine.init
    gens = [-1] * spec.k.R
    out = []
    for i, aid in enumerate(actions):
        nxt = machine.step(state, aid)
        if nxt is None:
            raise ValueError(f"step {i}: {machine.label(aid)} is not enabled")
        inst = spec.instances[aid]
        if aid in obs.observers:
            ev: dict[str, Any] = {"t": round(i * dt, 6), "actor": obs.actor[inst.name], "event": inst.name}
            if inst.args:
                r = inst.args[0]
                if inst.name == "prefill_request_finished":
                    gens[r] += 1
                ev.update(req=r, rid=f"r{r}.{gens[r]}", gen=gens[r])
            for f, v in zip(FIELDS[inst.name], obs.observe(aid, state, nxt)):
                ev[f] = list(v) if isinstance(v, tuple) else v
            out.append(ev)
        state = nxt
    return out


def random_run(machine: Machine, requests: int, seed: int, fault_weight: float = 0.02,
               max_steps: int | None = None) -> list[int]:
    """The action ids of a random run of ``machine``: any enabled action with weight 1, the
    faults (a stall, an abort) with ``fault_weight``, until ``requests`` requests reached
    prefill and nothing is enabled (or ``max_steps``)."""
    import random

    rng = random.Random(seed)
    names = [i.name for i in machine.instances]
    faults = ("decode_stall", "decode_abort", "prefill_abort_finished")
    weight = [fault_weight if n in faults else 1.0 for n in names]
    state, run, sent = machine.init, [], 0
    limit = max_steps if max_steps is not None else 60 * requests + 1000
    while len(run) < limit:
        succ = machine.successors(state)
        if sent >= requests:
            succ = [x for x in succ if names[x[0]] != "prefill_request_finished"]
        if not succ:
            break
        total = sum(weight[a] for a, _ in succ)
        pick = rng.random() * total
        for aid, nxt in succ:
            pick -= weight[aid]
            if pick <= 0:
                break
        sent += names[aid] == "prefill_request_finished"
        run.append(aid)
        state = nxt
    return run
