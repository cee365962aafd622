"""One fixed vLLM 0.33.0 pull-mode engine for every number of requests and blocks.

A parametric transition system over uninterpreted sorts (:mod:`kvproof.checker.allsizes.quantified`):
``Req`` (requests), ``Block`` (decode's blocks), ``PBlock`` (prefill's blocks) and ``Tenant``.
Each sort has any number of elements; ``Req``, ``Block`` and ``PBlock`` each hold one
distinguished element standing for the spec's sentinel (``rnone``: ``free`` as an owner,
``unwritten`` as a content; ``bnone``/``qnone``: a destination or source block not yet
allocated, the spec's sentinel row).  One KV block per request (the spec's modelling choice),
so a request has no chunks.  The state symbols are the spec's fields (:mod:`.state`) one for
one.

**Fixed** (the engine of ``spec/vllm/scenarios/07-vllm-pull-abort-32255.toml``, refused
otherwise by :func:`supported`): pull mode (``NixlPullConnector``) with one READ per request (no
per-rank READs, no MLA ranks), one prefill and one decode rank, no heartbeats, leases that expire
(the reaper scanning every lease, after #58222), client aborts on decode held until
``finished_recving`` (#32255's ``delay_free_blocks``), no prefill aborts, rejections, replays,
local prefix hits, async scheduling, prefix blocks, hanging READs, stalls or turn-2 readbacks.
The lease duration and the two latency bounds (arrival, READ) are the scenario's: the clocks are
enumerations of those sizes.  **Unbounded**: requests (any tenants), decode blocks, prefill blocks.

**Abstractions**, each an over-approximation (every step of the spec at any size is a step
here: :func:`link_map` with :mod:`kvproof.checker.allsizes.link` *proves* it from the spec's one-hot
encoding at a given size, ``prove --all-sizes SCENARIO --link``; ``tests/test_vllm_allsizes.py``
samples it and proves it at 3 requests on 4 + 4 blocks), so a safety claim proved here holds for
the spec at every size where the link holds:

* allocation takes *any* free block (the spec: the lowest-numbered free one), in both pools;
* requests reach prefill in any order (the spec: in request order);
* a clock tick need not advance anything (the spec: some lease or age must move).

Each action names the spec action (:mod:`.protocol`) and the vLLM code path it stands for and
repeats the hazard it takes part in (V1: lease expiry under a READ; V4: an aborted load's READ
landing in a freed block, fixed by #32255).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import z3

from kvproof.checker.allsizes.quantified import Action, Candidate, ParametricSystem, QState, Step, Symbol
from kvproof.spec.vllm.state import D_LABELS, OUT_LABELS, P_LABELS, RD_LABELS, READ_LABELS

__all__ = ["VllmAllSizes", "Correspondence", "FIELDS", "supported", "TARGET_CLAIMS", "FIXED_ENGINE", "Pinned",
           "model_for", "small_config", "FILTER_SIZES", "link_map"]

FIXED_ENGINE: dict[str, Any] = {
    "mode": "pull", "heartbeat_interval": None, "decode_may_stall": False, "client_aborts": True,
    "delay_free_aborted_load": True, "prefill_aborts": False, "abort_of_finished_frees": False,
    "decode_rejects": False, "reject_notifies_prefill": True, "kv_lease_expires": True, "async_scheduling": False,
    "defer_block_free": True, "decode_prefix_hit": False, "prefix_end_trim": True, "decode_appended_token": False,
    "remote_token_cap": False, "write_fan_in": 1, "write_post_may_fail": False, "push_handshake_may_defer": False,
    "decode_refuses_replayed_params": False, "report_notify_only_recv": True, "mla_prefill_ranks": 1,
    "mla_notif_remote_id": True, "reaper_scans_every_lease": True, "read_may_hang": False, "push_fail_notif": False,
    "read_fan_in": 1, "read_may_fail": False, "failure_waits_for_siblings": True, "read_post_may_fail": False,
    "read_release_may_fail": False, "retains_unreleased_handle": True, "prefill_reregisters": False,
    "registration_generation_check": True, "turn2_read": False,
}
"""The engine flags the parametric model describes (vLLM 0.33.0 pull mode with #32255, client
aborts on, no heartbeats); ``kv_lease_duration``, ``arrival_latency_bound`` and
``read_latency_bound`` are the model's parameters (both bounds must be set)."""

TARGET_CLAIMS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
                 "no_source_free_while_read", "exclusive_ownership", "pages_conserved")
"""The spec's safety claims the parametric model states (:meth:`VllmAllSizes.claims`)."""

FILTER_SIZES = {"Req": 4, "Block": 3, "PBlock": 3, "Tenant": 2}
"""The bounded instance Houdini filters on first (each sort's size, its sentinel included)."""


def supported(cfg: Any) -> str | None:
    """``None`` when ``cfg`` (a :class:`~.config.Config`) has the fixed engine the model
    describes; otherwise one line saying what differs."""
    e = cfg.engine
    for key, want in FIXED_ENGINE.items():
        if getattr(e, key, want) != want:
            return f"engine.{key} = {getattr(e, key)!r}: the all-sizes model describes {want!r} only"
    known = set(FIXED_ENGINE) | {"kv_lease_duration", "arrival_latency_bound", "read_latency_bound"}
    for f in dataclasses.fields(e):
        if f.name not in known and getattr(e, f.name) != f.default:
            return f"engine.{f.name} = {getattr(e, f.name)!r}: the all-sizes model describes {f.default!r} only"
    for key in ("arrival_latency_bound", "read_latency_bound"):
        if getattr(e, key) is None:
            return f"engine.{key} is unset: the all-sizes model needs a bound"
    if e.kv_lease_duration < 1:
        return "engine.kv_lease_duration: the all-sizes model needs a lease of at least one tick"
    for i, r in enumerate(cfg.requests):
        if r.replays is not None or r.cached:
            return f"requests[{i}]: replays and cached requests are not in the all-sizes model"
    return None


_ENUMS: dict[tuple, tuple] = {}


def _enum(name: str, prefix: str, labels: tuple[str, ...]) -> tuple[Any, list[Any], tuple[str, ...]]:
    """An enumeration sort, declared once per (name, labels) in Z3's context (a clock of another
    size gets a sort of its own, named with its size)."""
    names = tuple(f"{prefix}_{x}" for x in labels)
    key = (name, names)
    if key not in _ENUMS:
        taken = sum(k[0] == name for k in _ENUMS)
        sort, consts = z3.EnumSort(name if not taken else f"{name}{len(names)}", names)
        _ENUMS[key] = (sort, consts)
    sort, consts = _ENUMS[key]
    return sort, consts, names


class VllmAllSizes(ParametricSystem):
    """The parametric model for a lease of ``lease`` ticks, an arrival latency bound ``arrival``
    and a READ latency bound ``read`` (the scenario's; see the module docstring for what is fixed
    and what is abstracted)."""

    uninterpreted = ("Req", "Block", "PBlock", "Tenant")
    one_goal_at_a_time = True  # the disjunctive Houdini query does not finish here; single goals take ms

    def __init__(self, lease: int, arrival: int, read: int):
        self.L, self.X, self.Y = lease, arrival, read
        self.A = max(arrival, read)
        self.sorts = {name: z3.DeclareSort(name) for name in self.uninterpreted}
        self.enums: dict[str, tuple[str, ...]] = {}
        self.E: dict[str, list[Any]] = {}
        for name, prefix, labels in (("VPPhase", "vp", P_LABELS), ("VDPhase", "vd", D_LABELS),
                                     ("Xfer", "xf", RD_LABELS), ("VOut", "vo", OUT_LABELS),
                                     ("VRead", "vr", READ_LABELS),
                                     ("Lease", f"l{lease}", tuple(str(i) for i in range(lease + 1))),
                                     ("Age", f"a{self.A}", tuple(str(i) for i in range(self.A + 1)))):
            sort, consts, names = _enum(name, prefix, labels)
            self.sorts[name] = sort
            self.enums[name] = names
            self.E[name] = consts
        R, B, Q = "Req", "Block", "PBlock"
        self.symbols = (
            Symbol("p_phase", (R,), "VPPhase"), Symbol("src", (R,), Q), Symbol("lease", (R,), "Lease"),
            Symbol("late", (R,), "Bool"), Symbol("d_phase", (R,), "VDPhase"), Symbol("dest", (R,), B),
            Symbol("rd", (R,), "Xfer"), Symbol("notif", (R,), "Bool"), Symbol("outcome", (R,), "VOut"),
            Symbol("read", (R,), "VRead"), Symbol("age", (R,), "Age"),
            Symbol("owner", (B,), R), Symbol("content", (B,), R), Symbol("src_owner", (Q,), R),
            Symbol("src_content", (Q,), R),
        )
        self.rigid = (Symbol("tenant", (R,), "Tenant"),)
        self.constants = (("rnone", R), ("bnone", B), ("qnone", Q))
        self.actions = tuple(self._actions())

    # -- codes ---------------------------------------------------------------------------------
    def code(self, enum: str, label: str) -> Any:
        """The enumeration constant of ``label`` (a spec label such as ``"held"``)."""
        return self.E[enum][[n.split("_", 1)[1] for n in self.enums[enum]].index(label)]

    def is_(self, term: Any, enum: str, *labels: str) -> Any:
        """``term`` is one of ``labels``."""
        return z3.Or([term == self.code(enum, x) for x in labels])

    def live(self, st: QState, r: Any) -> Any:
        """Decode holds a block for ``r`` (the spec's ``D_LIVE``)."""
        return self.is_(st.d_phase(r), "VDPhase", "waiting_for_remote_kvs", "reading", "held")

    # -- Init and claims -------------------------------------------------------------------------
    def init(self, st: QState) -> Any:
        """Every request new on both sides, nothing allocated, written or read (the spec's field
        initial values)."""
        r = z3.Const("r", self.sorts["Req"])
        b = z3.Const("b", self.sorts["Block"])
        q = z3.Const("q", self.sorts["PBlock"])
        c_ = self.code
        per_req = z3.And(st.p_phase(r) == c_("VPPhase", "new"), st.src(r) == st.qnone(),
                         st.lease(r) == self.E["Lease"][0], z3.Not(st.late(r)),
                         st.d_phase(r) == c_("VDPhase", "new"), st.dest(r) == st.bnone(),
                         st.rd(r) == c_("Xfer", "none"), z3.Not(st.notif(r)), st.outcome(r) == c_("VOut", "none"),
                         st.read(r) == c_("VRead", "none"), st.age(r) == self.E["Age"][0])
        return z3.And(self.forall([r], per_req),
                      self.forall([b], z3.And(st.owner(b) == st.rnone(), st.content(b) == st.rnone())),
                      self.forall([q], z3.And(st.src_owner(q) == st.rnone(), st.src_content(q) == st.rnone())))

    def claims(self) -> list[Candidate]:
        """The spec's claims (:mod:`.claims`) for every request ``r ≠ rnone`` and every block
        that is not a sentinel."""
        c_ = self.code
        R = (("r", "Req"),)
        posted = lambda st, r: st.rd(r) == c_("Xfer", "posted")  # noqa: E731
        return [
            Candidate("decode_reads_only_own_pages", R, lambda st, r: z3.Implies(
                r != st.rnone(), self.is_(st.read(r), "VRead", "none", "own")), True),
            Candidate("no_cross_tenant_read", R, lambda st, r: z3.Implies(
                r != st.rnone(), st.read(r) != c_("VRead", "cross_tenant")), True),
            Candidate("no_write_after_release", R, lambda st, r: z3.Implies(
                z3.And(r != st.rnone(), posted(st, r)), st.owner(st.dest(r)) == r), True),
            Candidate("no_source_free_while_read", R, lambda st, r: z3.Implies(
                z3.And(r != st.rnone(), posted(st, r)), st.src_owner(st.src(r)) == r), True),
            Candidate("exclusive_ownership", R, lambda st, r: z3.Implies(r != st.rnone(), z3.And(
                z3.Implies(self.live(st, r), st.owner(st.dest(r)) == r),
                z3.Implies(st.p_phase(r) == c_("VPPhase", "held"), st.src_owner(st.src(r)) == r))), True),
            Candidate("pages_conserved", (("b", "Block"), ("q", "PBlock")), lambda st, b, q: z3.And(
                z3.Implies(z3.And(b != st.bnone(), st.owner(b) != st.rnone()),
                           z3.And(self.live(st, st.owner(b)), st.dest(st.owner(b)) == b)),
                z3.Implies(z3.And(q != st.qnone(), st.src_owner(q) != st.rnone()),
                           z3.And(st.p_phase(st.src_owner(q)) == c_("VPPhase", "held"),
                                  st.src(st.src_owner(q)) == q))), True),
        ]

    # -- actions -------------------------------------------------------------------------------
    def _actions(self) -> list[Action]:
        c_ = self.code
        E = self.E
        R = (("r", "Req"),)
        out: list[Action] = []

        def at(f, r0, new):
            """``f`` with ``f(r0) = new``."""
            return lambda x: z3.If(x == r0, new, f(x))

        def free(st, r, owner, table, when=z3.BoolVal(True)):
            """``_free``: ``r``'s block of a pool (``table(r)``) goes free where ``when`` holds and
            ``r`` still owns it; its content stays."""
            own = getattr(st, owner)
            b0 = getattr(st, table)(r)
            return lambda b: z3.If(z3.And(b == b0, when, own(b) == r), st.rnone(), own(b))

        def act(name, params, doc):
            def deco(fn):
                out.append(Action(name, params, (), fn, doc))
                return fn
            return deco

        @act("prefill_request_finished", (("r", "Req"), ("q", "PBlock")),
             "request_finished (pull_scheduler.py:191-293): prefill computes the KV into a free block, "
             "keeps it (delay_free_blocks) and starts the lease: the block decode will READ (V1)")
        def _(st, a, ch):
            r, q = a["r"], a["q"]
            guard = z3.And(r != st.rnone(), st.p_phase(r) == c_("VPPhase", "new"), q != st.qnone(),
                           st.src_owner(q) == st.rnone())
            return Step(guard, {"src": at(st.src, r, q), "src_owner": at(st.src_owner, q, r),
                                "src_content": at(st.src_content, q, r),
                                "p_phase": at(st.p_phase, r, c_("VPPhase", "held")),
                                "lease": at(st.lease, r, E["Lease"][self.L])})

        @act("prefill_get_new_notifs", R,
             "_get_new_notifs (pull_worker.py:650-701): the READ's notification frees a held request's "
             "block (finished_sending, a drain proof); after the lease it is dropped as late (V1)")
        def _(st, a, ch):
            r = a["r"]
            held = st.p_phase(r) == c_("VPPhase", "held")
            return Step(z3.And(r != st.rnone(), st.notif(r)), {
                "notif": at(st.notif, r, z3.BoolVal(False)),
                "p_phase": at(st.p_phase, r, z3.If(held, c_("VPPhase", "sent"), st.p_phase(r))),
                "lease": at(st.lease, r, z3.If(held, E["Lease"][0], st.lease(r))),
                "late": at(st.late, r, z3.If(held, st.late(r), z3.BoolVal(True))),
                "src_owner": free(st, r, "src_owner", "src", held)})

        @act("prefill_reap_expired_lease", R,
             "_reap_expired_send_leases (base_worker.py:3352-3378): the lease ran out, the block is freed "
             "whether or not a READ still reads it (V1)")
        def _(st, a, ch):
            r = a["r"]
            guard = z3.And(r != st.rnone(), st.p_phase(r) == c_("VPPhase", "held"), st.lease(r) == E["Lease"][0])
            return Step(guard, {"p_phase": at(st.p_phase, r, c_("VPPhase", "expired")),
                                "src_owner": free(st, r, "src_owner", "src")})

        @act("decode_on_new_request", (("r", "Req"), ("b", "Block")),
             "on_new_request + get_num_new_matched_tokens: decode allocates a free block and parks the "
             "request in WAITING_FOR_REMOTE_KVS (scheduler.py:1523); the parameters may be stale (V1)")
        def _(st, a, ch):
            r, b = a["r"], a["b"]
            guard = z3.And(r != st.rnone(), st.d_phase(r) == c_("VDPhase", "new"),
                           st.p_phase(r) != c_("VPPhase", "new"), b != st.bnone(), st.owner(b) == st.rnone())
            return Step(guard, {"dest": at(st.dest, r, b), "owner": at(st.owner, b, r),
                                "d_phase": at(st.d_phase, r, c_("VDPhase", "waiting_for_remote_kvs")),
                                "age": at(st.age, r, E["Age"][0])})

        @act("decode_start_load_kv", R,
             "start_load_kv -> _read_blocks (pull_worker.py:49-125, 450-567): the READ is posted, also for "
             "a request aborted since (held by delay_free_blocks, V4)")
        def _(st, a, ch):
            r = a["r"]
            waiting = st.d_phase(r) == c_("VDPhase", "waiting_for_remote_kvs")
            guard = z3.And(r != st.rnone(), z3.Or(waiting, z3.And(st.d_phase(r) == c_("VDPhase", "held"),
                                                                  st.rd(r) == c_("Xfer", "none"))))
            return Step(guard, {"d_phase": at(st.d_phase, r, z3.If(waiting, c_("VDPhase", "reading"),
                                                                   c_("VDPhase", "held"))),
                                "rd": at(st.rd, r, c_("Xfer", "posted"))})

        @act("decode_finished_recving", R,
             "_pop_done_transfers -> _update_from_kv_xfer_finished (scheduler.py:3569-3582): a loading "
             "request runs on its block (what it computes on is recorded: V1, V4), a held one is freed")
        def _(st, a, ch):
            r = a["r"]
            loading = st.d_phase(r) == c_("VDPhase", "reading")
            held = st.content(st.dest(r))
            own = held == r
            cross = z3.And(held != st.rnone(), st.tenant(held) != st.tenant(r))
            found = z3.If(own, c_("VRead", "own"), z3.If(cross, c_("VRead", "cross_tenant"), c_("VRead", "foreign")))
            guard = z3.And(r != st.rnone(), st.rd(r) == c_("Xfer", "complete"),
                           self.is_(st.d_phase(r), "VDPhase", "reading", "held"))
            return Step(guard, {
                "outcome": at(st.outcome, r, z3.If(loading, c_("VOut", "success"), st.outcome(r))),
                "read": at(st.read, r, z3.If(loading, found, st.read(r))),
                "d_phase": at(st.d_phase, r, c_("VDPhase", "ended")),
                "owner": free(st, r, "owner", "dest")})

        @act("decode_abort", R,
             "finish_requests (scheduler.py:3014-3027) in WAITING_FOR_REMOTE_KVS: with #32255 the block is "
             "held (delay_free_blocks) until finished_recving, READ posted or not (V4's fix)")
        def _(st, a, ch):
            r = a["r"]
            guard = z3.And(r != st.rnone(), self.is_(st.d_phase(r), "VDPhase", "waiting_for_remote_kvs", "reading"))
            return Step(guard, {"outcome": at(st.outcome, r, c_("VOut", "aborted")),
                                "d_phase": at(st.d_phase, r, c_("VDPhase", "held"))})

        @act("nixl_read_take_data", R,
             "the one-sided READ moves its data: decode's block gets what prefill's block holds now, whoever "
             "owns either (V1: a reused source; V4: a freed destination)")
        def _(st, a, ch):
            r = a["r"]
            return Step(z3.And(r != st.rnone(), st.rd(r) == c_("Xfer", "posted")), {
                "rd": at(st.rd, r, c_("Xfer", "data_taken")),
                "content": at(st.content, st.dest(r), st.src_content(st.src(r)))})

        @act("nixl_read_complete", R,
             "check_xfer_state DONE: the READ completes and NIXL delivers its notif_msg to prefill (V1's drain proof)")
        def _(st, a, ch):
            r = a["r"]
            return Step(z3.And(r != st.rnone(), st.rd(r) == c_("Xfer", "data_taken")), {
                "rd": at(st.rd, r, c_("Xfer", "complete")), "notif": at(st.notif, r, z3.BoolVal(True))})

        def succ(values, v):
            out_ = v
            for i in reversed(range(len(values) - 1)):
                out_ = z3.If(v == values[i], values[i + 1], out_)
            return out_

        def pred(values, v):
            out_ = v
            for i in range(1, len(values)):
                out_ = z3.If(v == values[i], values[i - 1], out_)
            return out_

        def ge(v, bound):
            return z3.Or([v == E["Age"][i] for i in range(bound, self.A + 1)])

        def clocks(st, x):
            """``x``'s arrival and loading conditions (the spec's ``clock_tick``)."""
            arriving = z3.And(st.p_phase(x) != c_("VPPhase", "new"), st.d_phase(x) == c_("VDPhase", "new"))
            tracked = self.is_(st.d_phase(x), "VDPhase", "waiting_for_remote_kvs", "reading")
            loading = z3.Or(z3.And(tracked, st.rd(x) != c_("Xfer", "complete")),
                            self.is_(st.rd(x), "Xfer", "posted", "data_taken"),
                            z3.And(st.d_phase(x) == c_("VDPhase", "held"), st.rd(x) == c_("Xfer", "none")))
            return arriving, loading

        @act("clock_tick", (),
             "one tick: leases (_reqs_to_send expiries, V1) count down, arrival and READ ages count up; "
             "blocked by a request at its arrival or READ latency bound (V1's benign timing)")
        def _(st, a, ch):
            x = z3.Const("x!", self.sorts["Req"])
            arriving, loading = clocks(st, x)
            guard = self.forall([x], z3.Implies(x != st.rnone(), z3.Not(z3.Or(
                z3.And(arriving, ge(st.age(x), self.X)), z3.And(loading, ge(st.age(x), self.Y))))))

            def age(y):
                arr, lo = clocks(st, y)
                move = z3.Or(z3.And(arr, z3.Not(ge(st.age(y), self.X))), z3.And(lo, z3.Not(ge(st.age(y), self.Y))))
                return z3.If(move, succ(E["Age"], st.age(y)), st.age(y))

            def lease(y):
                move = z3.And(st.p_phase(y) == c_("VPPhase", "held"), st.lease(y) != E["Lease"][0])
                return z3.If(move, pred(E["Lease"], st.lease(y)), st.lease(y))

            return Step(guard, {"lease": lease, "age": age})

        return out


# -- the correspondence with the spec's fields ------------------------------------------------------
# spec field -> (parametric symbol, the sort its one index names, how its values map)
FIELDS: dict[str, tuple[str, str, str]] = {
    "p_phase": ("p_phase", "req", "enum:VPPhase"),
    "src": ("src", "req", "pblock"),
    "lease": ("lease", "req", "enum:Lease"),
    "late": ("late", "req", "bool"),
    "d_phase": ("d_phase", "req", "enum:VDPhase"),
    "dest": ("dest", "req", "block"),
    "rd": ("rd", "req", "enum:Xfer"),
    "notif": ("notif", "req", "bool"),
    "outcome": ("outcome", "req", "enum:VOut"),
    "read": ("read", "req", "enum:VRead"),
    "age": ("age", "req", "enum:Age"),
    "owner": ("owner", "block", "req"),
    "content": ("content", "block", "req"),
    "src_owner": ("src_owner", "pblock", "req"),
    "src_content": ("src_content", "pblock", "req"),
}
"""How each field of the spec's state (:mod:`.state`, pull mode, one READ per request) is a
parametric symbol applied to one element: what the lifting of lemmas and the differential test
read."""

_SORT = {"req": "Req", "block": "Block", "pblock": "PBlock"}


class Correspondence:
    """The spec instance ``spec`` (a small configuration the model describes) read in the
    parametric model ``system``: a ground literal ``field[i] = v`` as ``f(element) = value``
    (:meth:`literal`), a ground clause lifted to a quantified candidate (:meth:`lift`), the
    templates joined through ``dest`` and ``src`` (:meth:`joins`)."""

    def __init__(self, system: VllmAllSizes, spec: Any):
        from kvproof.checker.symbolic.lift import field_slots
        problem = supported(spec.cfg)
        if problem:
            raise ValueError(problem)
        self.system, self.spec = system, spec
        self.slots = field_slots(spec.layout)
        self.k = spec.k
        self.size = {"req": self.k.R, "block": self.k.D, "pblock": self.k.P}

    def sentinel(self, slot: int) -> bool:
        """The slot is a sentinel row (the spec's hidden block ``none``)."""
        fname, idx = self.slots[slot]
        return bool(idx) and idx[0] >= self.size[FIELDS[fname][1]]

    def literal(self, st: QState, slot: int, v: int, term: Any) -> Any:
        """The literal ``slot = v`` over ``st``, ``term(kind, i)`` giving the element (or
        variable) of request, block or prefill block ``i`` (kinds ``req``, ``block``, ``pblock``)."""
        fname, idx = self.slots[slot]
        sym, kind_of_index, kind = FIELDS[fname]
        lhs = getattr(st, sym)(term(kind_of_index, idx[0]))
        if kind.startswith("enum:"):
            rhs = self.system.E[kind[5:]][v]
        elif kind == "bool":
            rhs = z3.BoolVal(v == 1)
        elif kind == "block":
            rhs = st.bnone() if v == self.k.D else term("block", v)
        elif kind == "pblock":
            rhs = st.qnone() if v == self.k.P else term("pblock", v)
        else:  # an owner or content code: free/unwritten or a request
            rhs = st.rnone() if v == 0 else term("req", v - 1)
        return lhs == rhs

    def lift(self, clause: tuple) -> Candidate | None:
        """The ground clause "never all of these slot values" as ``∀`` distinct elements: every
        request, block and prefill block it names becomes a variable (pairwise distinct, none the
        sentinel).  Tenants are not assumed: the candidate speaks of any requests, and Houdini
        drops it if that is wrong.  ``None`` for a clause on a sentinel row."""
        if any(self.sentinel(s) for s, _ in clause):
            return None
        keys: dict[tuple, int] = {}

        def record(kind, i):
            keys.setdefault((kind, i), len(keys))
            return z3.Const("x", self.system.sorts[_SORT[kind]])

        st0 = self.system.state()
        for slot, v in clause:
            self.literal(st0, slot, v, record)
        order = sorted(keys, key=lambda k: (list(_SORT).index(k[0]), keys[k]))
        vars_ = tuple((f"{k[0][0]}{i}", _SORT[k[0]]) for i, k in enumerate(order))

        def body(st, *vs):
            val = dict(zip(order, vs))
            lits = [self.literal(st, slot, v, lambda kind, i: val[(kind, i)]) for slot, v in clause]
            prem = []
            for kind, none in (("req", st.rnone()), ("block", st.bnone()), ("pblock", st.qnone())):
                xs = [val[k] for k in order if k[0] == kind]
                if xs:
                    prem.append(z3.Distinct(*xs, none))
            return z3.Implies(z3.And(prem), z3.Not(z3.And(lits)))

        return self._named(vars_, body)

    def _named(self, vars_: tuple, body: Any) -> Candidate:
        cand = Candidate("", vars_, body)
        name = self.system.formula(cand, self.system.state()).sexpr()
        return Candidate(" ".join(name.split()), vars_, body)

    # -- templates joined through a pointer -------------------------------------------------------
    def joins(self, states: Any) -> list[Any]:
        """The small instance's reachable ``states`` read through ``dest`` and ``src``: one row
        per state and per request ``r`` whose pointer is set, holding ``r``'s own slots and those
        of the block it names (``owner``, ``content``; ``src_owner``, ``src_content``), a request
        named there coded relative to ``r`` (0: none, 1: ``r`` itself, 2: another request).
        Facts over such rows lift to ``∀ r`` formulas with the block as the term ``dest(r)``:
        e.g. "a reading request whose READ completed has its own KV in its block"."""
        import numpy as np

        from kvproof.checker.allsizes.prove import Join
        lay, k = self.spec.layout, self.k
        anchor = [f for f, (_, ix, kind) in FIELDS.items() if ix == "req" and kind not in ("block", "pblock")]
        out = []
        for ptr, pkind, tcols in (("dest", "block", ("owner", "content")), ("src", "pblock", ("src_owner", "src_content"))):
            none = self.size[pkind]
            cols = [*anchor, *tcols]
            blocks = []
            for r in range(k.R):
                pslot = lay.slot(ptr, r)
                sel = states[states[:, pslot] != none]
                if not len(sel):
                    continue
                target = sel[:, pslot].astype(np.int64)
                block = np.zeros((len(sel), len(cols)), dtype=np.uint8)
                for j, fname in enumerate(cols):
                    if j < len(anchor):
                        col = sel[:, lay.slot(fname, r)]
                    else:
                        by = np.array([lay.slot(fname, e) for e in range(none)])
                        col = sel[np.arange(len(sel)), by[target]]
                        col = np.where(col == 0, 0, np.where(col == r + 1, 1, 2))
                    block[:, j] = col
                blocks.append(block)
            if not blocks:
                continue
            rows = np.unique(np.concatenate(blocks), axis=0)
            domains = tuple((0, 1, 2) if FIELDS[f][2] == "req" else tuple(range(lay.by_name[f].values.size))
                            for f in cols)
            targets = frozenset(range(len(anchor), len(cols)))
            out.append(Join(ptr, tuple(cols), rows, domains, targets,
                            lambda fact, ptr=ptr, cols=tuple(cols), n=len(anchor): self._lift_joined(ptr, cols, n, fact)))
        return out

    def _lift_joined(self, ptr: str, cols: tuple, n_anchor: int, fact: tuple) -> Candidate:
        """A fact over the rows of :meth:`joins` as ``∀ r. r ≠ none ∧ ptr(r) ≠ none → ¬(the values
        together)``, the block being the term ``ptr(r)``."""
        sys_ = self.system

        def body(st, r):
            at = getattr(st, ptr)(r)
            none = st.bnone() if ptr == "dest" else st.qnone()
            lits = []
            for j, v in fact:
                sym, _, kind = FIELDS[cols[j]]
                lhs = getattr(st, sym)(at if j >= n_anchor else r)
                if kind == "req":
                    lits.append([lhs == st.rnone(), lhs == r, z3.And(lhs != r, lhs != st.rnone())][v])
                elif kind == "bool":
                    lits.append(lhs == z3.BoolVal(v == 1))
                else:
                    lits.append(lhs == sys_.E[kind[5:]][v])
            return z3.Implies(z3.And(r != st.rnone(), at != none), z3.Not(z3.And(lits)))

        return self._named((("r", "Req"),), body)

    def triples(self, clauses: Any) -> list[tuple]:
        """The three-value facts whose slots all belong to one request (its lease, age and
        phases: the timing lemmas)."""
        out = []
        for c in clauses:
            if len(c) != 3:
                continue
            heads = set()
            for s, _ in c:
                fname, idx = self.slots[s]
                heads.add(idx[0] if FIELDS[fname][1] == "req" else None)
            if len(heads) == 1 and None not in heads:
                out.append(c)
        return out


FIXED_LINES = (
    "pull mode (NixlPullConnector), one READ per request, one prefill rank, one decode rank, one KV block per request",
    "the engine of vllm-pull-abort-32255 (0.33.0): client aborts held until finished_recving (#32255), "
    "leases that expire (reaper scanning every lease), no heartbeats, no prefill aborts, rejections, replays, "
    "prefix hits, async scheduling, stalls, hanging READs or turn-2 readbacks",
)
ABSTRACTION_LINES = (
    "allocation takes any free block (the spec: the lowest-numbered), in both pools",
    "requests reach prefill in any order (the spec: in request order)",
    "a clock tick need not advance a lease or an age",
)


def small_config(cfg: Any) -> Any:
    """The instance candidates are mined from: two requests of the scenario's two first tenants
    (one if it has one) on two decode blocks and two prefill blocks, the scenario's engine."""
    from kvproof.spec.vllm.config import Request
    tenants = [r.tenant for r in cfg.requests]
    second = tenants[1] if len(tenants) > 1 else tenants[0]
    return dataclasses.replace(cfg, requests=(Request(tenants[0]), Request(second)), decode_blocks=2,
                               prefill_blocks=2)


def model_for(spec: Any, protocol: type) -> Any:
    """The :class:`~kvproof.checker.allsizes.prove.AllSizesModel` of ``spec`` (an instance of the base
    protocol class ``protocol``, which builds the small instance) or ``None`` when the model does
    not describe its engine."""
    from kvproof.checker.allsizes.prove import AllSizesModel
    if supported(spec.cfg) is not None:
        return None
    e = spec.cfg.engine
    system = VllmAllSizes(e.kv_lease_duration, e.arrival_latency_bound, e.read_latency_bound)
    small = protocol(small_config(spec.cfg))
    corr = Correspondence(system, small)
    fixed = (*FIXED_LINES, f"lease {e.kv_lease_duration} ticks, arrival latency bound {e.arrival_latency_bound}, "
                           f"READ latency bound {e.read_latency_bound} tick(s)")
    return AllSizesModel(system, TARGET_CLAIMS, small, corr.lift, fixed, ABSTRACTION_LINES, corr.joins,
                         lambda invariant, source: link_map(spec, system, invariant, source),
                         filter_sizes=FILTER_SIZES, triples=corr.triples)


class Pinned:
    """The instance ``spec`` read as a *bounded* instance of the parametric model (one element
    per request, block, prefill block and tenant, plus the sentinels): a concrete state becomes
    equalities on the model's symbols (:meth:`pins`), so a spec step can be asked for in the
    parametric transition relation (:meth:`allows`) and a spec claim compared with the model's
    (:meth:`breaks`).  What ``tests/test_vllm_allsizes.py`` checks the model with."""

    def __init__(self, system: VllmAllSizes, spec: Any):
        self.system, self.spec, self.corr, k = system, spec, Correspondence(system, spec), spec.k
        self.sizes = {"Req": k.R + 1, "Block": k.D + 1, "PBlock": k.P + 1, "Tenant": len(k.tenants)}
        self.universe, self.axioms = system.bounded(self.sizes)

    def term(self, kind: str, i: int) -> Any:
        """The element of request, block or prefill block ``i`` (``i`` at the size: the sentinel)."""
        u = self.universe[_SORT[kind]]
        return u[0] if i >= self.corr.size[kind] else u[1 + i]

    def rigid(self, st: QState) -> list[Any]:
        """Each request's tenant."""
        u, k = self.universe, self.spec.k
        return [st.tenant(u["Req"][1 + r]) == u["Tenant"][k.tenant[r]] for r in range(k.R)]

    def pins(self, st: QState, state: bytes | tuple) -> list[Any]:
        """``state``'s every slot as an equality over ``st`` (the sentinel rows included: the
        spec keeps them free and unwritten, as the model's ``bnone``/``qnone`` rows)."""
        return [self.corr.literal(st, slot, v, self.term) for slot, v in enumerate(state)
                if self.corr.slots[slot][0] in FIELDS]

    def allows(self, pre: bytes | tuple, post: bytes | tuple, only: str | None = None) -> list[str]:
        """The parametric actions (those named ``only``, or all) that take ``pre`` to ``post``
        (empty: the step is not in the model's transition relation)."""
        from kvproof.checker.allsizes.quantified import _closed
        sysm = self.system
        sysm.universe = self.universe
        try:
            st = sysm.state()
            base = [self.axioms, *self.rigid(st), *self.pins(st, pre)]
            out = []
            for a in sysm.actions:
                if only is not None and a.name != only:
                    continue
                params = {p: z3.Const(f"{a.name}!{p}", sysm.sort(s)) for p, s in a.params}
                step = a.step(st, params, {})
                post_st = st.with_updates(step.updates)
                s = z3.Solver()
                s.add(*base, step.guard, *_closed(sysm, None, self.universe, list(params.values())),
                      *self.pins(post_st, post))
                if s.check() == z3.sat:
                    out.append(a.name)
            return out
        finally:
            sysm.universe = None

    def breaks(self, claim: str, state: bytes | tuple) -> bool:
        """Whether ``state`` breaks the model's ``claim`` (at these elements)."""
        sysm = self.system
        cand = next(c for c in sysm.claims() if c.name == claim)
        st = sysm.state()
        s = z3.Solver()
        s.add(self.axioms, *self.rigid(st), *self.pins(st, state), z3.Not(sysm.formula(cand, st, self.universe)))
        return s.check() == z3.sat


# -- the link, proved at one size (checker/allsizes/link.py) -------------------------------------------------
def link_map(spec: Any, system: VllmAllSizes | None = None, invariant: str | None = None, source: str = "") -> Any:
    """The :class:`~kvproof.checker.allsizes.link.LinkMap` of ``spec`` (an instance of the base protocol
    with the engine the model describes) and the parametric model (``system``, by default the
    model of the instance's lease and latency bounds): the bounded universe of :class:`Pinned`
    (one element per request, block, prefill block and tenant, plus ``rnone``, ``bnone``,
    ``qnone``); every slot of :data:`FIELDS` observed at its element (the spec's sentinel rows of
    ``owner``/``content`` and ``src_owner``/``src_content`` at ``bnone``/``qnone``, where the spec
    keeps them free and unwritten); the tenants as the instance has them; each spec action
    instance a step of the model action of the same name with its request as parameter, and for
    an allocation with any block of the pool as the block parameter (the checker asks that one of
    them match the spec's successor).  No choice functions, so no witnesses.  With
    ``invariant`` (the one-line invariant of an all-sizes certificate of this model, read from
    ``source``), its conjuncts are the hypotheses the step obligations may assume."""
    from kvproof.checker.allsizes.link import LinkMap, Observation, certified_conjuncts, ground

    problem = supported(spec.cfg)
    if problem:
        raise ValueError(problem)
    e = spec.cfg.engine
    system = system if system is not None else VllmAllSizes(e.kv_lease_duration, e.arrival_latency_bound,
                                                            e.read_latency_bound)
    pin = Pinned(system, spec)
    corr, u = pin.corr, pin.universe

    def values(kind: str, size: int) -> tuple:
        if kind.startswith("enum:"):
            return tuple(system.E[kind[5:]][:size])
        if kind == "bool":
            return (z3.BoolVal(False), z3.BoolVal(True))
        if kind in ("block", "pblock"):
            return tuple(pin.term(kind, v) for v in range(size))
        return tuple(u["Req"][0] if v == 0 else pin.term("req", v - 1) for v in range(size))

    table: list[Any] = []
    for fname, idx in corr.slots:
        if fname not in FIELDS:
            table.append(None)
            continue
        sym, ix, kind = FIELDS[fname]
        table.append(Observation(sym, (pin.term(ix, idx[0]),), values(kind, spec.layout.by_name[fname].values.size)))

    by_name = {a.name: a for a in system.actions}
    pool = {"q": [pin.term("pblock", q) for q in range(spec.k.P)], "b": [pin.term("block", b) for b in range(spec.k.D)]}

    def options(inst: Any) -> list:
        a = by_name.get(inst.name)
        if a is None:
            return []
        p = inst.params()
        base = {"r": pin.term("req", p["req"])} if "req" in p else {}
        extra = [n for n, _ in a.params if n != "r"]
        if not extra:
            return [(a, base)]
        return [(a, {**base, extra[0]: x}) for x in pool[extra[0]]]

    hypothesis, conjuncts = None, []
    if invariant is not None:
        conjuncts = certified_conjuncts(system, invariant)
        hypothesis = lambda st: [(name, ground(t, u)) for name, t in conjuncts]  # noqa: E731
    return LinkMap(system, pin.sizes, u, pin.axioms, lambda slot: table[slot], pin.rigid, options,
                   lambda action, st, params, post: {},
                   tuple(n for n in TARGET_CLAIMS if n in {c.name for c in spec.claims}), hypothesis,
                   f"the {len(conjuncts)} conjuncts of the invariant of {source or 'an all-sizes certificate'}"
                   if invariant is not None else "")
