"""SGLang's event log (schema version 1) and its observation of the spec's actions.

An event log is JSONL.  The first line is the header::

    {"v": 1, "log": "kvproof-events", "scenario": "v0.5.22", "slots": 8, "pages": 64}

``scenario`` is a built-in scenario's name or its data inline (as traces store it); with
``slots`` and/or ``pages`` the scenario's engine runs that many request slots over that many
decode pages, as ``kvproof simulate`` runs it.  Every other line is one event::

    {"v": 1, "t": 0.012, "actor": "decode", "rank": 0, "event": "decode_prealloc",
     "room": 3, "rid": "req-17", "gen": 0, "pages": [4, 5]}

* ``event`` is the name of the spec action it is the trace of (:data:`FIELDS` lists the
  observable ones and what each adds); ``decode_prealloc`` also covers ``decode_prealloc_pick``.
  The other actions (:data:`INTERNAL`: the clock, lost messages, the prefill's death, its drain
  of a stopped request, ...) are never logged: the search takes them between events.
* ``t`` the time in seconds (a number; informational), ``actor`` the process that logs it
  (``prefill``, ``decode`` or ``client``; the transfer's writes are the prefill's), ``rank``
  its rank: the prefill rank of a per-rank prefill event, the decode rank of
  ``decode_send_metadata``, else 0 (the group's rank 0 logs for the group).
* ``room`` the request slot (the bootstrap room, ``0..slots-1``), ``rid`` the request's id,
  ``gen`` the room's request number (0 for its first request; each ``client_send`` opens the
  next).  A log whose request ids or generations contradict its own ``client_send`` events is
  unexplained at the first event that does.
* per event: ``rank``/``layer``/``chunk`` name the write stream and chunk; ``page`` the decode
  page a write targets, ``pages`` the pages an event reserves, reads or releases (prefill's
  source pages for ``prefill_forward``; ``[]`` where the request was rejected or retired), ``slot`` the
  metadata slot of an aux write, ``status`` what decode concluded at ``decode_commit``
  (``success``, ``error`` or ``verified``).
* ``decode_prealloc`` and ``prefill_forward`` may leave ``pages`` out (:data:`PAGES_OPTIONAL`:
  any pages match; a recorder does not see them there).
* a header with ``"failed_writes_land_unseen": true`` (:data:`UNSEEN_KEY`) says the log does
  not show when the writes of a prefill rank whose transfer failed land: the search may take
  those ``kv_write_lands`` steps between events, unlogged.
* a header with ``"unarmed_acks_unseen": true`` (:data:`ACKS_UNSEEN_KEY`) says the log does not
  show a ``prefill_drain_ack`` or ``decode_handle_abort_ack`` while decode has not armed the
  room for acks (SGLang sends no ``ABORT_ACK`` for an ABORT it did not arm for): the search may
  take those steps there unlogged.
* ``v`` on an event is optional; where present it must be 1.  Unknown keys are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvproof.checker.logs.validate import Event, log_text
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.spec.sglang.state import (
    D_LABELS, D_RESERVED, D_VERIFIED, OUT_LABELS, P_LABELS, P_SENDING, POLL_FAILED,
)

__all__ = ["FIELDS", "INTERNAL", "PAGES_OPTIONAL", "ANY_PAGES", "UNSEEN_KEY", "ACKS_UNSEEN_KEY", "log_scenario", "observation", "SglangObservation", "to_events", "log_text",
           "random_run"]

FIELDS: dict[str, tuple[str, ...]] = {
    "client_send": (),
    "prefill_bootstrap_add": (),
    "prefill_forward": ("pages",),
    "prefill_abort": (),
    "decode_prealloc": ("pages",),
    "decode_send_metadata": ("rank",),
    "kv_transfer_write": ("rank", "layer", "chunk", "page"),
    "kv_write_lands": ("rank", "layer", "chunk", "page"),
    "kv_transfer_aux": ("slot",),
    "kv_aux_lands": ("slot",),
    "prefill_transfer_done": ("rank",),
    "prefill_transfer_failed": ("rank",),
    "decode_commit": ("pages", "status"),
    "decode_forward": ("pages", "status"),
    "decode_poll_failed": (),
    "decode_waiting_timeout": (),
    "decode_abort": (),
    "decode_register_abort_room": (),
    "prefill_handle_abort": ("rank",),
    "prefill_drain_ack": ("rank",),
    "decode_handle_abort_ack": ("rank",),
    "decode_release_deferred": ("pages",),
    "decode_release_timeout": ("pages",),
    "decode_peer_dead_release": ("pages",),
    "decode_retry_abort": (),
}
"""The observable actions, each logged under its own name, and the fields it carries besides
``t``, ``actor``, ``rank``, ``room``, ``rid`` and ``gen``."""

PAGES_OPTIONAL = ("decode_prealloc", "prefill_forward")
"""Events whose ``pages`` may be left out (any pages, or none, then match): the recorder cannot
see them where it logs these events (``kvproof.spec.sglang.record``); the pages are compared
from the request's ``decode_commit`` or release on."""


class _AnyPages:
    """What an event without ``pages`` wants: equal to every observation."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "ANY_PAGES"


ANY_PAGES = _AnyPages()
"""The ``pages`` of an event that leaves them out."""

INTERNAL = ("clock_tick", "net_drop_ack", "net_drop_abort", "prefill_dies", "prefill_drain")
"""The actions no log shows."""

_ACTOR = {"client": "client", "prefill": "prefill", "transfer": "prefill", "decode": "decode"}
_STATUS = ("success", "error", "verified")


def log_scenario(base: Scenario, header: dict) -> Scenario:
    """The scenario a log's header names: ``base``, or with ``slots``/``pages`` the simulation
    scenario ``kvproof simulate`` would run."""
    from kvproof.spec.sglang.simulate import simulation_scenario

    if "slots" not in header and "pages" not in header:
        return base
    slots = header.get("slots", len(base.config.requests))
    pages = header.get("pages", base.config.decode_pages)
    for key, v in (("slots", slots), ("pages", pages)):
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 255:
            raise ValueError(f"{key}: expected a whole number in 1..255, got {v!r}")
    return simulation_scenario(base, pages, slots)


UNSEEN_KEY = "failed_writes_land_unseen"
"""The header key of a log that does not show when a failed transfer's writes land (a recorded
log: SGLang's transfer call has returned failure by then, so no process sees the bytes arrive)."""
ACKS_UNSEEN_KEY = "unarmed_acks_unseen"
"""The header key of a log that does not show a drain ack, or its receipt, while decode has no
room armed for acks (a recorded log: SGLang sends no ``ABORT_ACK`` for an ABORT it did not arm
for, where the model's ack is a message that carries nothing)."""


def observation(machine: Any, header: dict | None = None) -> "SglangObservation":
    """The observation of ``machine``'s actions (the protocol's ``validate`` command) for a log
    with ``header``; ``ValueError`` for a header key of the wrong type."""
    flags = {}
    for key in (UNSEEN_KEY, ACKS_UNSEEN_KEY):
        flags[key] = (header or {}).get(key, False)
        if not isinstance(flags[key], bool):
            raise ValueError(f"{key}: expected true or false, got {flags[key]!r}")
    return SglangObservation(machine, failed_writes_land_unseen=flags[UNSEEN_KEY],
                             unarmed_acks_unseen=flags[ACKS_UNSEEN_KEY])


@dataclass
class _Room:
    gen: int = 0
    rid: str | None = None


class SglangObservation:
    """What SGLang's event log shows of each action instance (see the module docstring)."""

    def __init__(self, machine: Any, failed_writes_land_unseen: bool = False, unarmed_acks_unseen: bool = False):
        """``machine``: anything with the ``spec`` (a :class:`~kvproof.model.machine.Machine`,
        a :class:`~kvproof.checker.logs.validate.Checked`); ``failed_writes_land_unseen``: the log
        does not show when the writes of a rank whose transfer failed land (:data:`UNSEEN_KEY`);
        ``unarmed_acks_unseen``: nor a drain ack sent or taken while the room is not armed
        (:data:`ACKS_UNSEEN_KEY`)."""
        self.machine = machine
        spec = self.spec = machine.spec
        self.k = spec.k
        lay = spec.layout
        self.internal = [i.aid for i in spec.instances if i.name in INTERNAL]
        self.unseen = {i.aid: self._failed_rank(i.args[0], self.k.rank_of_stream(i.args[1]))
                       for i in spec.instances if i.name == "kv_write_lands" and failed_writes_land_unseen}
        if unarmed_acks_unseen:
            self.unseen.update({i.aid: self._unarmed(i.args[0]) for i in spec.instances
                                if i.name in ("prefill_drain_ack", "decode_handle_abort_ack")})
        self.aid = {(i.name, i.args): i.aid for i in spec.instances}
        self.params = {i.name: i.action.params for i in spec.instances}
        self.actor = {i.name: _ACTOR.get(i.action.actor, i.action.actor) for i in spec.instances}
        k = self.k
        self.dest = [[lay.slot("dest", r, c) for c in range(k.C)] for r in range(k.R)]
        self.src = [[lay.slot("src", r, c) for c in range(k.C)] for r in range(k.R)]
        self.d_phase = [lay.slot("d_phase", r) for r in range(k.R)]
        self.p_phase = [lay.slot("p_phase", r) for r in range(k.R)]
        self.outcome = [lay.slot("outcome", r) for r in range(k.R)]
        self.aux = [lay.slot("aux", r) for r in range(k.R)] if k.M else []
        self.npages = [spec.pages(r) for r in range(k.R)]
        self.nsend = [spec.send_len(r) for r in range(k.R)]
        self.rooms: dict[int, _Room] = {}
        self._picks: dict[int, dict[tuple[int, ...], int]] = {}
        self.observers = {i.aid: self._observer(i.name, i.args) for i in spec.instances
                          if i.name in FIELDS or i.name == "decode_prealloc_pick"}
        self._plans = {name: self._plan(name) for name in FIELDS if name in self.params or name == "decode_prealloc"}

    def _failed_rank(self, r: int, pr: int):
        """A write whose rank's transfer failed (``poll`` Failed) may land unseen: its transfer
        call already returned failure, so no process sees when its bytes arrive."""
        slot = self.spec.layout.slot("poll", r, pr)
        return lambda s: s[slot] == POLL_FAILED

    def _unarmed(self, r: int):
        """A drain ack (sent or taken) while decode has not armed ``r``'s room for acks may be
        unseen: SGLang sends none for an ABORT it did not arm for (the model's ack then carries
        nothing; ``spec/sglang/conform/harness.py``, ``prefill_drain_ack``)."""
        slot = self.spec.layout.slot("armed", r)
        return lambda s: s[slot] == 0

    # -- what an action shows ------------------------------------------------------------------
    def _observer(self, name: str, args: tuple[int, ...]):
        r = args[0]
        dest, src, n, nsend = self.dest[r], self.src[r], self.npages[r], self.nsend[r]
        dph, pph, out = self.d_phase[r], self.p_phase[r], self.outcome[r]
        if name in ("decode_prealloc", "decode_prealloc_pick"):
            return lambda pre, post: (tuple(post[dest[c]] for c in range(n)) if post[dph] == D_RESERVED else (),)
        if name == "prefill_forward":
            return lambda pre, post: (tuple(post[src[c]] for c in range(nsend)) if post[pph] == P_SENDING else (),)
        if name in ("kv_transfer_write", "kv_write_lands"):
            slot = dest[args[2]]
            return lambda pre, post: (pre[slot],)
        if name in ("kv_transfer_aux", "kv_aux_lands"):
            if not self.aux:
                return lambda pre, post: (None,)
            slot = self.aux[r]
            return lambda pre, post: (pre[slot],)
        if name in ("decode_commit", "decode_forward"):
            return lambda pre, post: (tuple(pre[dest[c]] for c in range(n)),
                                      "verified" if post[dph] == D_VERIFIED else OUT_LABELS[post[out]])
        if name in ("decode_release_deferred", "decode_release_timeout", "decode_peer_dead_release"):
            return lambda pre, post: (tuple(pre[dest[c]] for c in range(n)),)
        return lambda pre, post: ()

    def observe(self, aid: int, pre: bytes, post: bytes) -> Any:
        """What the log shows of instance ``aid`` from ``pre`` to ``post`` (the fields after
        ``rank``/``layer``/``chunk``: pages, page, slot, status)."""
        return self.observers[aid](pre, post)

    # -- reading an event --------------------------------------------------------------------------
    def _plan(self, name: str) -> tuple:
        """How an event of action ``name`` is read: its actor, the bound of its rank, its
        shape (``stream``: room, stream and chunk; ``pair``: room and a rank; ``prealloc``;
        ``room``) and the fields its observation shows."""
        params = self.params.get(name, ("req",))
        k = self.k
        bound = k.PR if ("prank" in params or "stream" in params) else k.DR if "drank" in params else 1
        if "stream" in params:
            shape = "stream"
        elif len(params) == 2 and params[1] in ("prank", "drank"):
            shape = "pair"
        elif name == "decode_prealloc":
            shape = "prealloc"
        else:
            shape = "room"
        shown = tuple(f for f in FIELDS[name] if f not in ("rank", "layer", "chunk"))
        return self.actor.get(name, "decode"), bound, shape, shown

    def decode(self, line: int, raw: dict) -> Event:
        """The event of one parsed line; ``ValueError`` names the first field that is wrong."""
        name = raw.get("event")
        plan = self._plans.get(name) if isinstance(name, str) else None
        if plan is None:
            if not isinstance(name, str):
                raise ValueError(f"event: expected an action's name, got {name!r}")
            if name in INTERNAL or name == "decode_prealloc_pick":
                how = "internal" if name in INTERNAL else "logged as decode_prealloc"
                raise ValueError(f"event {name!r} is not logged ({how})")
            from kvproof.model.scenario import did_you_mean

            raise ValueError(f"unknown event {name!r}{did_you_mean(name, list(FIELDS))}")
        want_actor, bound, shape, shown = plan
        t = raw.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            raise ValueError(f"t: expected the time in seconds (a number), got {t!r}")
        actor = raw.get("actor")
        if actor != want_actor:
            raise ValueError(f"actor: {name} is logged by {want_actor!r}, got {actor!r}")
        _int = self._int
        room = _int(raw, "room", self.k.R)
        rid = raw.get("rid")
        if not isinstance(rid, str) or not rid:
            raise ValueError(f"rid: expected the request's id (a non-empty string), got {rid!r}")
        _int(raw, "gen", None)
        rank = _int(raw, "rank", bound)
        want: list[Any] = []
        for f in shown:
            if f == "pages" and "pages" not in raw and name in PAGES_OPTIONAL:
                want.append(ANY_PAGES)
            elif f == "pages":
                pages = raw.get("pages")
                if not isinstance(pages, list) or not all(type(p) is int for p in pages):
                    raise ValueError(f"pages: expected a list of page numbers, got {pages!r}")
                want.append(tuple(pages))
            elif f == "status":
                status = raw.get("status")
                if status not in _STATUS:
                    raise ValueError(f"status: expected one of {', '.join(_STATUS)}, got {status!r}")
                want.append(status)
            else:  # page, slot
                want.append(_int(raw, f, None))
        if shape == "stream":
            layer = _int(raw, "layer", self.k.L, default=0)
            chunk = _int(raw, "chunk", self.k.C)
            aids: tuple[int, ...] = (self.aid[(name, (room, rank * self.k.L + layer, chunk))],)
        elif shape == "pair":
            aids = (self.aid[(name, (room, rank))],)
        elif shape == "prealloc":
            aids = self._prealloc(room, want[0])
        else:
            aids = (self.aid[(name, (room,))],)
        return Event(line, aids, tuple(want), raw)

    def _prealloc(self, r: int, pages: tuple[int, ...]) -> tuple[int, ...]:
        aids = []
        if ("decode_prealloc", (r,)) in self.aid:
            aids.append(self.aid[("decode_prealloc", (r,))])
        if self.spec.e.any_free_pages:
            if r not in self._picks:
                self._picks[r] = {p: i for i, p in enumerate(self.spec.picks(self.npages[r]))}
            picks = self._picks[r].values() if pages is ANY_PAGES else [self._picks[r].get(pages)]
            for pick in picks:
                if pick is not None and ("decode_prealloc_pick", (r, pick)) in self.aid:
                    aids.append(self.aid[("decode_prealloc_pick", (r, pick))])
        return tuple(aids)

    @staticmethod
    def _int(raw: dict, key: str, bound: int | None, default: int | None = None) -> int:
        v = raw.get(key, default)
        if type(v) is int and v >= 0 and (bound is None or v < bound):
            return v
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or (bound is not None and v >= bound):
            what = "a whole number" + (f" in 0..{bound - 1}" if bound is not None else " >= 0")
            if key not in raw and default is None:
                raise ValueError(f"missing field {key!r} ({what})")
            raise ValueError(f"{key}: expected {what}, got {v!r}")
        return v

    # -- the log against itself ---------------------------------------------------------------------
    def admit(self, event: Event) -> str | None:
        """Request ids and generations must agree with the log's own ``client_send`` events."""
        raw = event.raw
        room = self.rooms.setdefault(raw["room"], _Room())
        gen, rid = raw["gen"], raw["rid"]
        if raw["event"] == "client_send":
            if gen != room.gen + 1:
                return f"client_send opens generation {room.gen + 1} of room {raw['room']}, the event names {gen}"
            room.gen, room.rid = gen, rid
            return None
        if gen != room.gen:
            return f"room {raw['room']} is at generation {room.gen}, the event names generation {gen}"
        if room.rid is None:
            room.rid = rid
        elif rid != room.rid:
            return f"room {raw['room']} generation {gen} is request {room.rid!r}, the event names {rid!r}"
        return None

    def describe(self, state: bytes, event: Event) -> str:
        """The room's phases, pages and writes in ``state``."""
        r = event.raw["room"]
        values = self.spec.layout.decode(state)
        parts = [f"p_phase={P_LABELS[state[self.p_phase[r]]]}", f"d_phase={D_LABELS[state[self.d_phase[r]]]}"]
        for name in ("dest", "src", "wr", "poll", "p_abort", "abort_tx", "ack", "acked", "outcome", "hold", "gen"):
            if name in values and name not in ("dest", "src"):
                parts.append(f"{name}={_compact(values[name][r])}")
            elif name in values:
                parts.append(f"{name}={_compact([p for p in values[name][r] if p != 'none'])}")
        return f"room {r}: " + " ".join(parts)


def _compact(v: Any) -> str:
    return json.dumps(v, separators=(",", ":")).replace('"', "")


# -- writing logs from runs of the spec -------------------------------------------------------------
def to_events(machine: Machine, actions: list[int], dt: float = 0.001) -> list[dict]:
    """The event log of a run of ``machine`` (action ids from the initial state): each visible
    step as the engine would log it, the internal ones left out."""
    obs = SglangObservation(machine)
    spec = machine.spec
    state = machine.init
    gens = [0] * spec.k.R
    out = []
    for i, aid in enumerate(actions):
        nxt = machine.step(state, aid)
        if nxt is None:
            raise ValueError(f"step {i}: {machine.label(aid)} is not enabled")
        inst = spec.instances[aid]
        if aid in obs.observers:
            r = inst.args[0]
            name = "decode_prealloc" if inst.name == "decode_prealloc_pick" else inst.name
            if name == "client_send":
                gens[r] += 1
            ev: dict[str, Any] = {"t": round(i * dt, 6), "actor": obs.actor[inst.name], "rank": 0,
                                  "event": name, "room": r, "rid": f"r{r}.{gens[r]}", "gen": gens[r]}
            params = inst.action.params
            if "stream" in params:
                ev["rank"], ev["layer"] = divmod(inst.args[1], spec.k.L)
                ev["chunk"] = inst.args[2]
            elif len(params) == 2 and params[1] in ("prank", "drank"):
                ev["rank"] = inst.args[1]
            seen = list(obs.observe(aid, state, nxt))
            for f in FIELDS[name]:
                if f not in ("rank", "layer", "chunk"):
                    v = seen.pop(0)
                    ev[f] = list(v) if isinstance(v, tuple) else v
            out.append(ev)
        state = nxt
    return out


def random_run(machine: Machine, requests: int, seed: int, fault_weight: float = 0.02,
               max_steps: int | None = None) -> list[int]:
    """The action ids of a random run of ``machine`` (a :func:`.simulate.simulation_scenario`),
    chosen as :func:`.simulate.simulate` chooses them: a fault with weight ``fault_weight``,
    any other enabled action with weight 1, until ``requests`` requests have been sent and
    nothing is enabled (or ``max_steps``)."""
    import random

    from kvproof.spec.sglang.simulate import FAULTS, _pick

    rng = random.Random(seed)
    names = [i.name for i in machine.instances]
    weight = [fault_weight if n in FAULTS else 1.0 for n in names]
    state, run, sent = machine.init, [], min(requests, machine.spec.k.R)
    limit = max_steps if max_steps is not None else 200 * requests + 1000
    while len(run) < limit:
        succ = machine.successors(state)
        if sent >= requests:
            succ = [x for x in succ if names[x[0]] != "client_send"]
        if not succ:
            break
        aid, state = _pick(succ, weight, rng)
        sent += names[aid] == "client_send"
        run.append(aid)
    return run
