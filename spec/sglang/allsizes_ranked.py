"""The fixed SGLang release (``v0.5.22``'s engine) for every number of requests, pages, chunks and ranks.

**The model ``prove --all-sizes`` uses** for ``v0.5.22``'s engine (``PdProtocol.all_sizes``):
:mod:`.allsizes` is the same model with one prefill and one decode rank, kept for its tests and
as the simpler reading; this one makes prefill and decode ranks sorts.  Its Houdini asks one
post-state goal at a time (``one_goal_at_a_time``): with the disjunctive query the first
unbounded round did not finish in 57 minutes, per goal the whole Houdini took 268 s.

A parametric transition system over uninterpreted sorts (:mod:`kvproof.checker.allsizes.quantified`):
``Req`` (requests), ``Page`` (decode pages), ``PPage`` (prefill source pages), ``Chunk`` (a
request's chunks: ``ch(r, c)`` says chunk ``c`` is one of ``r``'s), ``Tenant`` and ``PRank``
(prefill ranks: ``p_abort``, ``poll``, ``abort_tx``, ``ack``, ``acked`` are per request and rank,
``wr`` per request, chunk and rank, ``content`` per rank's shard and page).  Each sort has
any number of elements; ``Req``, ``Page`` and ``PPage`` each hold one distinguished element
standing for the spec's sentinel (``rnone``: ``free`` as an owner, ``unwritten`` as a content;
``pnone``/``qnone``: a destination or source page not yet allocated).  The state symbols are the
spec's fields (:mod:`.state`) with the layer index dropped (one layer), so a write stream is its
prefill rank's; a shard stands for the prefill rank that writes it (shard ``sh`` is rank ``sh mod
PR``'s, so ``content(w, p)`` is rank ``w``'s share of page ``p``, every shard of it alike).

**Fixed** (the engine of ``spec/sglang/scenarios/18-v0.5.22.toml``, refused otherwise by
:func:`supported`): one layer, no aux slots, the release policy
``drain_ack_or_timeout`` releasing at the deadline, the deadline (``timeout``) and the write
latency bound as in the scenario (the clock's values are enumerations of that size), rejection at
both doors, deferral on every failure, source pages held until drained, client aborts and transfer
failures on; no prefill aborts, lossy messages, peer death, waiting timeout, checksum, request
streams.  **Unbounded**: requests (any tenants, any prompt lengths, any subset over-long), decode
pages, prefill pages, prefill ranks (sort ``PRank``) and decode ranks (sort ``DRank``:
``meta(r, d)``; a request waits once every decode rank published, prefill forwards it then, and
decode holds it on abort or failure if any rank published, ``hold_combine`` max).  Decode releases
a held request on every prefill rank's drain ack: ``required_acks`` every prefill rank per decode
rank, ``ready_combine`` min over the decode ranks, and every prefill rank ``pr`` is linked to a
decode rank (``pr mod gcd(PR, DR)``, the spec's :meth:`~.config.Config.linked`), so the spec's rule
is exactly "every prefill rank acked" at every size; the link checks it at each size.

**Abstractions**, each an over-approximation (every step of the spec at any size is meant to be a
step here: :func:`link_map` with :mod:`kvproof.checker.allsizes.link` *proves* it from the spec's one-hot
encoding at a given size, ``prove --all-sizes SCENARIO --link``; ``tests/test_allsizes.py``
samples it), so a safety claim proved here holds for the spec at every size where the link holds:

* allocation takes *any* free pages, distinct per chunk (the spec: the lowest-numbered free ones);
* arrival order is not enforced (the spec: request ``r`` reaches a door after ``r - 1``);
* chunks may be issued in any order (the spec: in order);
* ``over_long`` is any fixed predicate of a request (the spec: prompt pages against the context
  limit and the prefill pool);
* a clock tick need not advance anything (the spec: some timer or age must move).

Each action names the spec action (:mod:`.protocol`) it stands for and repeats its hazard.
"""

from __future__ import annotations

from typing import Any

import z3

from kvproof.checker.allsizes.quantified import Action, Candidate, ParametricSystem, QState, Step, Symbol
from kvproof.spec.sglang import ALL_SIZES_CLAIMS
from kvproof.spec.sglang.state import (
    ABT_LABELS, ACK_LABELS, D_LABELS, OUT_LABELS, P_LABELS, PAB_LABELS, POLL_LABELS, READ_LABELS,
)

__all__ = ["SglangAllSizes", "Correspondence", "FIELDS", "supported", "TARGET_CLAIMS", "FIXED_ENGINE"]

FIXED_ENGINE = {
    "reject_at_prefill_door": True, "reject_at_decode_door": True, "release_policy": "drain_ack_or_timeout",
    "timeout_action": "release", "defer_on_every_failure": True, "receipt_ack_taken_as_drain": False,
    "required_acks": "every_prefill_rank", "register_before_abort": True, "failure_clears_ack_target": False,
    "lossy_drain_acks": False, "lossy_aborts": False, "hold_source_until_drained": True, "checksum": False,
    "verify_then_read": False, "client_aborts": True, "prefill_aborts": False, "transfer_failures": True,
    "peer_death": False, "heartbeat_detection": False, "waiting_timeout": None, "request_streams": False,
    "hold_combine": "max", "ready_combine": "min",
}
"""The engine flags the parametric model describes (``ordered_arrivals`` and ``any_free_pages``
may be either: the model over-approximates both)."""

TARGET_CLAIMS = ALL_SIZES_CLAIMS
"""The spec's safety claims the parametric model states (:meth:`SglangAllSizes.claims`)."""


def supported(cfg: Any) -> str | None:
    """``None`` when ``cfg`` (a :class:`~.config.Config`) has the fixed engine and structure the
    model describes; otherwise one line saying what differs."""
    e = cfg.engine
    for key, want in FIXED_ENGINE.items():
        if getattr(e, key) != want:
            return f"engine.{key} = {getattr(e, key)!r}: the all-sizes model describes {want!r} only"
    if e.write_latency_bound is None:
        return "engine.write_latency_bound is unset: the all-sizes model needs a bound"
    if cfg.layers != 1:
        return f"layers = {cfg.layers}: the all-sizes model fixes it to 1"
    if cfg.aux_slots:
        return f"aux_slots = {cfg.aux_slots}: the all-sizes model has none"
    return None


from kvproof.spec.sglang.allsizes import FILTER_SIZES, _enum  # noqa: E402 - one enumeration sort per name in Z3's context


class SglangAllSizes(ParametricSystem):
    """The parametric model for a deadline ``timeout`` and a write latency bound ``bound`` (the
    scenario's; see the module docstring for what is fixed and what is abstracted)."""

    uninterpreted = ("Req", "Page", "PPage", "Chunk", "Tenant", "PRank", "DRank")
    one_goal_at_a_time = True  # the disjunctive Houdini query did not finish its first round in 57 min; per goal, 268 s

    def __init__(self, timeout: int, bound: int):
        self.timeout, self.bound = timeout, bound
        self.sorts = {name: z3.DeclareSort(name) for name in self.uninterpreted}
        self.enums = {}
        self.E: dict[str, list[Any]] = {}
        wr_labels = ("not_issued", "landed") + tuple(f"flight{a}" for a in range(bound + 1))
        for name, prefix, labels in (("PPhase", "pp", P_LABELS), ("DPhase", "dp", D_LABELS),
                                     ("Pab", "pab", PAB_LABELS), ("Poll", "poll", POLL_LABELS),
                                     ("Abt", "abt", ABT_LABELS), ("Ack", "ack", ACK_LABELS),
                                     ("Out", "out", OUT_LABELS), ("Read", "rd", READ_LABELS),
                                     ("Wr", f"w{bound}", wr_labels),
                                     ("Hold", f"h{timeout}", tuple(str(h) for h in range(timeout + 1)))):
            sort, consts, names = _enum(name, prefix, labels)
            self.sorts[name] = sort
            self.enums[name] = names
            self.E[name] = consts
        R, C, P, Q, W, D = "Req", "Chunk", "Page", "PPage", "PRank", "DRank"
        self.symbols = (
            Symbol("p_phase", (R,), "PPhase"), Symbol("p_abort", (R, W), "Pab"), Symbol("src", (R, C), Q),
            Symbol("d_phase", (R,), "DPhase"), Symbol("meta", (R, D), "Bool"), Symbol("dest", (R, C), P),
            Symbol("hold", (R,), "Hold"), Symbol("wr", (R, C, W), "Wr"), Symbol("poll", (R, W), "Poll"),
            Symbol("abort_tx", (R, W), "Abt"), Symbol("armed", (R,), "Bool"), Symbol("ack", (R, W), "Ack"),
            Symbol("acked", (R, W), "Bool"), Symbol("outcome", (R,), "Out"), Symbol("read", (R,), "Read"),
            Symbol("owner", (P,), R), Symbol("content", (W, P), R), Symbol("src_owner", (Q,), R),
            Symbol("src_content", (Q,), R),
        )
        self.rigid = (Symbol("ch", (R, C), "Bool"), Symbol("tenant", (R,), "Tenant"),
                      Symbol("over_long", (R,), "Bool"))
        self.constants = (("rnone", R), ("pnone", P), ("qnone", Q))
        self.actions = tuple(self._actions())

    # -- codes ---------------------------------------------------------------------------------
    def code(self, enum: str, label: str) -> Any:
        """The enumeration constant of ``label`` (a spec label such as ``"sending"``)."""
        names = self.enums[enum]
        return self.E[enum][[n.split("_", 1)[1] for n in names].index(label.replace("+", ""))]

    def flying(self, v: Any) -> Any:
        """A write value that is in flight (any age)."""
        return z3.Or([v == self.E["Wr"][2 + a] for a in range(self.bound + 1)])

    # -- Init and claims -------------------------------------------------------------------------
    def init(self, st: QState) -> Any:
        """Every request new everywhere, nothing allocated, written or sent (the spec's field
        initial values)."""
        r = z3.Const("r", self.sorts["Req"])
        c = z3.Const("c", self.sorts["Chunk"])
        p = z3.Const("p", self.sorts["Page"])
        q = z3.Const("q", self.sorts["PPage"])
        w = z3.Const("w", self.sorts["PRank"])
        d = z3.Const("d", self.sorts["DRank"])
        c_ = self.code
        per_req = z3.And(st.p_phase(r) == c_("PPhase", "new"),
                         st.d_phase(r) == c_("DPhase", "new"), st.hold(r) == self.E["Hold"][0],
                         z3.Not(st.armed(r)), st.outcome(r) == c_("Out", "none"), st.read(r) == c_("Read", "none"))
        per_rank = z3.And(st.p_abort(r, w) == c_("Pab", "none"), st.poll(r, w) == c_("Poll", "none"),
                          st.abort_tx(r, w) == c_("Abt", "none"), st.ack(r, w) == c_("Ack", "none"),
                          z3.Not(st.acked(r, w)))
        per_chunk = z3.And(st.src(r, c) == st.qnone(), st.dest(r, c) == st.pnone())
        return z3.And(self.forall([r], per_req), self.forall([r, w], per_rank), self.forall([r, c], per_chunk),
                      self.forall([r, d], z3.Not(st.meta(r, d))),
                      self.forall([r, c, w], st.wr(r, c, w) == c_("Wr", "not_issued")),
                      self.forall([p], st.owner(p) == st.rnone()),
                      self.forall([w, p], st.content(w, p) == st.rnone()),
                      self.forall([q], z3.And(st.src_owner(q) == st.rnone(), st.src_content(q) == st.rnone())))

    def claims(self) -> list[Candidate]:
        """The spec's claims (:mod:`.claims`) for every request and chunk (the write claims: and
        every prefill rank's write of it), ``r ≠ rnone``."""
        c_ = self.code
        live = lambda st, r: z3.Or([st.d_phase(r) == c_("DPhase", x) for x in ("reserved", "waiting", "verified", "held")])
        RC = (("r", "Req"), ("c", "Chunk"))
        RCW = (("r", "Req"), ("c", "Chunk"), ("w", "PRank"))
        return [
            Candidate("decode_reads_only_own_pages", (("r", "Req"),), lambda st, r: z3.Implies(
                r != st.rnone(), z3.Or(st.read(r) == c_("Read", "none"), st.read(r) == c_("Read", "own"))), True),
            Candidate("no_cross_tenant_read", (("r", "Req"),), lambda st, r: z3.Implies(
                r != st.rnone(), st.read(r) != c_("Read", "cross_tenant")), True),
            Candidate("no_write_after_release", RCW, lambda st, r, c, w: z3.Implies(
                z3.And(r != st.rnone(), st.ch(r, c), self.flying(st.wr(r, c, w))), st.owner(st.dest(r, c)) == r), True),
            Candidate("no_source_free_while_read", RCW, lambda st, r, c, w: z3.Implies(
                z3.And(r != st.rnone(), st.ch(r, c), self.flying(st.wr(r, c, w))), st.src_owner(st.src(r, c)) == r),
                True),
            Candidate("exclusive_ownership", RC, lambda st, r, c: z3.Implies(
                z3.And(r != st.rnone(), st.ch(r, c), live(st, r)), st.owner(st.dest(r, c)) == r), True),
        ]

    # -- actions -------------------------------------------------------------------------------
    def _actions(self) -> list[Action]:
        S = self.sorts
        c_ = self.code
        E = self.E
        R = (("r", "Req"),)
        RW = (("r", "Req"), ("w", "PRank"))
        RCW = (("r", "Req"), ("c", "Chunk"), ("w", "PRank"))

        def at(f, r0, new):
            """``f`` with ``f(r0) = new``."""
            return lambda x: z3.If(x == r0, new, f(x))

        def at_rank(f, r0, w0, new):
            """``f`` with ``f(r0, w0) = new`` (a per-(request, prefill rank) symbol)."""
            return lambda x, y: z3.If(z3.And(x == r0, y == w0), new, f(x, y))

        def at_ranks(f, r0, when, new):
            """``f`` with ``f(r0, w) = new`` for every prefill rank ``w`` where ``when``."""
            return lambda x, y: z3.If(z3.And(x == r0, when), new, f(x, y))

        def every_rank(prop):
            """``∀ w. prop(w)`` over the prefill ranks."""
            w = z3.Const("w!", S["PRank"])
            return self.forall([w], prop(w))

        def every_decode_rank(prop):
            """``∀ d. prop(d)`` over the decode ranks."""
            d = z3.Const("d!", S["DRank"])
            return self.forall([d], prop(d))

        def at_chunks(st, f, r0, new_of_c):
            """``f`` with ``f(r0, c) = new_of_c(c)`` for every chunk ``c`` of ``r0``."""
            return lambda x, c: z3.If(z3.And(x == r0, st.ch(r0, c)), new_of_c(c), f(x, c))

        def live(st, r):
            return z3.Or([st.d_phase(r) == c_("DPhase", x) for x in ("reserved", "waiting", "verified", "held")])

        def chunks_of(st, r, prop):
            """``∀ c. ch(r, c) → prop(c)``."""
            c = z3.Const("c!", S["Chunk"])
            return self.forall([c], z3.Implies(st.ch(r, c), prop(c)))

        def defines(rel, sort, r, st, table):
            """``rel(x) ↔ ∃ c. ch(r, c) ∧ table(c) = x``: ``rel`` is the set of pages ``r``'s
            chunks name in ``table``."""
            x = z3.Const("x!", S[sort])
            c = z3.Const("c!", S["Chunk"])
            return self.forall([x], rel(x) == self.exists([c], z3.And(st.ch(r, c), table(c) == x)))

        def allocate(st, r, pick, taken, owner, none, sort):
            """The guard of allocating ``r``'s chunks distinct free pages ``pick(c)`` (any free
            ones: the abstraction of lowest-free), ``taken`` the set picked."""
            c1, c2 = z3.Const("c1!", S["Chunk"]), z3.Const("c2!", S["Chunk"])
            return z3.And(
                chunks_of(st, r, lambda c: z3.And(pick(c) != none, getattr(st, owner)(pick(c)) == st.rnone())),
                self.forall([c1, c2], z3.Implies(z3.And(st.ch(r, c1), st.ch(r, c2), c1 != c2), pick(c1) != pick(c2))),
                defines(taken, sort, r, st, pick))

        def release_decode(st, r, when, mine, upd):
            """``release_kv_cache`` on decode where ``when``: ``r``'s pages (``mine``: the set its
            chunks name) it still owns go free; the room's ack state is forgotten."""
            upd["owner"] = lambda p: z3.If(z3.And(when, mine(p), st.owner(p) == r), st.rnone(), st.owner(p))
            upd["armed"] = at(st.armed, r, z3.If(when, False, st.armed(r)))
            upd["acked"] = at_ranks(st.acked, r, when, z3.BoolVal(False))

        def release_source(st, r, mine, upd):
            """``release_kv_cache`` on prefill: ``r``'s source pages it still owns go free."""
            upd["src_owner"] = lambda q: z3.If(z3.And(mine(q), st.src_owner(q) == r), st.rnone(), st.src_owner(q))

        def no_writes(st, r, w):
            """No write of ``r`` by prefill rank ``w`` is in flight."""
            return chunks_of(st, r, lambda c: z3.Not(self.flying(st.wr(r, c, w))))

        out = []

        def act(name, params, choices, doc):
            def deco(fn):
                out.append(Action(name, params, choices, fn, doc))
                return fn
            return deco

        @act("prefill_bootstrap_add", R, (), "PrefillBootstrapQueue.add; H1: over-long prompts rejected (PR 38935)")
        def _(st, a, ch):
            r = a["r"]
            return Step(z3.And(r != st.rnone(), st.p_phase(r) == c_("PPhase", "new")), {
                "p_phase": at(st.p_phase, r, z3.If(st.over_long(r), c_("PPhase", "ended"), c_("PPhase", "queued"))),
                "outcome": at(st.outcome, r, z3.If(z3.And(st.over_long(r), st.outcome(r) == c_("Out", "none")),
                                                   c_("Out", "error"), st.outcome(r)))})

        srcpick = Symbol("pick", ("Chunk",), "PPage")
        srctaken = Symbol("taken", ("PPage",), "Bool")

        @act("prefill_forward", R, (srcpick, srctaken), "forward pass: allocate source pages, compute KV (H8)")
        def _(st, a, ch):
            r, pick, taken = a["r"], ch["pick"], ch["taken"]
            guard = z3.And(r != st.rnone(), st.p_phase(r) == c_("PPhase", "queued"),
                           every_decode_rank(lambda d: st.meta(r, d)),
                           allocate(st, r, pick, taken, "src_owner", st.qnone(), "PPage"))
            return Step(guard, {
                "src": at_chunks(st, st.src, r, pick),
                "src_owner": lambda q: z3.If(taken(q), r, st.src_owner(q)),
                "src_content": lambda q: z3.If(taken(q), r, st.src_content(q)),
                "p_phase": at(st.p_phase, r, c_("PPhase", "sending"))})

        @act("decode_prealloc.rejected", R, (), "DecodePreallocQueue.add: over-long prompt rejected (PR 38935)")
        def _(st, a, ch):
            r = a["r"]
            return Step(z3.And(r != st.rnone(), st.d_phase(r) == c_("DPhase", "new"), st.over_long(r)), {
                "d_phase": at(st.d_phase, r, c_("DPhase", "ended")),
                "outcome": at(st.outcome, r, z3.If(st.outcome(r) == c_("Out", "none"), c_("Out", "error"), st.outcome(r)))})

        dpick = Symbol("pick", ("Chunk",), "Page")
        dtaken = Symbol("taken", ("Page",), "Bool")

        @act("decode_prealloc", R, (dpick, dtaken), "DecodePreallocQueue._pre_alloc reserves the prompt's pages (H1)")
        def _(st, a, ch):
            r, pick, taken = a["r"], ch["pick"], ch["taken"]
            guard = z3.And(r != st.rnone(), st.d_phase(r) == c_("DPhase", "new"), z3.Not(st.over_long(r)),
                           st.outcome(r) == c_("Out", "none"), allocate(st, r, pick, taken, "owner", st.pnone(), "Page"))
            return Step(guard, {
                "dest": at_chunks(st, st.dest, r, pick),
                "owner": lambda p: z3.If(taken(p), r, st.owner(p)),
                "d_phase": at(st.d_phase, r, c_("DPhase", "reserved"))})

        rest = Symbol("rest", (), "Bool")

        @act("decode_send_metadata", (("r", "Req"), ("d", "DRank")), (rest,),
             "CommonKVReceiver.send_metadata by decode rank d (H7: a writer now knows the pages); waiting once "
             "every decode rank published")
        def _(st, a, ch):
            r, d, others = a["r"], a["d"], ch["rest"]()
            x = z3.Const("d!", S["DRank"])
            guard = z3.And(r != st.rnone(), st.d_phase(r) == c_("DPhase", "reserved"), z3.Not(st.meta(r, d)),
                           others == self.forall([x], z3.Implies(x != d, st.meta(r, x))))
            return Step(guard, {
                "meta": lambda y, z: z3.If(z3.And(y == r, z == d), True, st.meta(y, z)),
                "d_phase": at(st.d_phase, r, z3.If(others, c_("DPhase", "waiting"), c_("DPhase", "reserved")))})

        @act("kv_transfer_write", RCW, (), "prefill rank w's transfer worker issues its write of a chunk (H2)")
        def _(st, a, ch):
            r, c, w = a["r"], a["c"], a["w"]
            guard = z3.And(r != st.rnone(), st.ch(r, c), st.p_phase(r) == c_("PPhase", "sending"),
                           st.p_abort(r, w) == c_("Pab", "none"), st.poll(r, w) == c_("Poll", "none"),
                           st.wr(r, c, w) == c_("Wr", "not_issued"))
            return Step(guard, {"wr": lambda x, y, z: z3.If(z3.And(x == r, y == c, z == w), E["Wr"][2], st.wr(x, y, z))})

        @act("kv_write_lands", RCW, (), "an in-flight write lands in rank w's shard with the source page's content "
                                        "now (H2, H8)")
        def _(st, a, ch):
            r, c, w = a["r"], a["c"], a["w"]
            guard = z3.And(r != st.rnone(), st.ch(r, c), self.flying(st.wr(r, c, w)))
            return Step(guard, {
                "wr": lambda x, y, z: z3.If(z3.And(x == r, y == c, z == w), c_("Wr", "landed"), st.wr(x, y, z)),
                "content": lambda u, p: z3.If(z3.And(u == w, p == st.dest(r, c)), st.src_content(st.src(r, c)),
                                              st.content(u, p))})

        mine_q = Symbol("mine", ("PPage",), "Bool")
        last = Symbol("last", (), "Bool")

        @act("prefill_transfer_done", RW, (mine_q, last), "rank w's KVPoll.Success once its writes landed; the last "
                                                          "rank to conclude frees the source pages")
        def _(st, a, ch):
            r, w, mine, lst = a["r"], a["w"], ch["mine"], ch["last"]()
            x = z3.Const("w!", S["PRank"])
            guard = z3.And(r != st.rnone(), st.p_phase(r) == c_("PPhase", "sending"),
                           st.poll(r, w) == c_("Poll", "none"), st.p_abort(r, w) == c_("Pab", "none"),
                           chunks_of(st, r, lambda c: st.wr(r, c, w) == c_("Wr", "landed")),
                           lst == self.forall([x], z3.Implies(x != w, st.poll(r, x) == c_("Poll", "success"))),
                           defines(mine, "PPage", r, st, lambda c: st.src(r, c)))
            upd = {"poll": at_rank(st.poll, r, w, c_("Poll", "success")),
                   "p_phase": at(st.p_phase, r, z3.If(lst, c_("PPhase", "ended"), c_("PPhase", "sending")))}
            upd["src_owner"] = lambda q: z3.If(z3.And(lst, mine(q), st.src_owner(q) == r), st.rnone(), st.src_owner(q))
            return Step(guard, upd)

        @act("prefill_transfer_failed", RW, (), "rank w's sender concludes KVPoll.Failed and the request stops on "
                                                "every rank; issued writes still land (H7)")
        def _(st, a, ch):
            r, w = a["r"], a["w"]
            guard = z3.And(r != st.rnone(), st.p_phase(r) == c_("PPhase", "sending"),
                           st.poll(r, w) == c_("Poll", "none"))
            return Step(guard, {"poll": at_rank(st.poll, r, w, c_("Poll", "failed")),
                                "p_phase": at(st.p_phase, r, c_("PPhase", "stopped"))})

        mine_p = Symbol("mine", ("Page",), "Bool")
        cross = Symbol("found_cross", (), "Bool")
        foreign = Symbol("found_foreign", (), "Bool")

        @act("decode_commit", R, (mine_p, cross, foreign), "pop_transferred sees Success; decode reads its pages (H1/H2/H8)")
        def _(st, a, ch):
            r, mine = a["r"], ch["mine"]
            fx, fo = ch["found_cross"](), ch["found_foreign"]()
            c = z3.Const("c!", S["Chunk"])
            u = z3.Const("u!", S["PRank"])
            held = st.content(u, st.dest(r, c))
            is_own = held == r
            is_cross = z3.And(held != st.rnone(), st.tenant(held) != st.tenant(r))
            guard = z3.And(r != st.rnone(), st.d_phase(r) == c_("DPhase", "waiting"),
                           every_rank(lambda x: st.poll(r, x) == c_("Poll", "success")),
                           defines(mine, "Page", r, st, lambda c: st.dest(r, c)),
                           fx == self.exists([c, u], z3.And(st.ch(r, c), z3.Not(is_own), is_cross)),
                           fo == self.exists([c, u], z3.And(st.ch(r, c), z3.Not(is_own), z3.Not(is_cross))))
            found = z3.If(fx, c_("Read", "cross_tenant"), z3.If(fo, c_("Read", "foreign"), c_("Read", "own")))
            upd = {"outcome": at(st.outcome, r, c_("Out", "success")), "read": at(st.read, r, found),
                   "d_phase": at(st.d_phase, r, c_("DPhase", "ended"))}
            release_decode(st, r, z3.BoolVal(True), mine, upd)
            return Step(guard, upd)

        def end_or_hold(st, r, outcome, send_always, mine, upd, hold):
            """``end_or_hold`` then ``send_abort``: held (abort armed) where some decode rank
            published its metadata (``hold``: ``hold_combine`` max of the ranks' decisions),
            released at once otherwise."""
            upd["outcome"] = at(st.outcome, r, z3.If(st.outcome(r) == c_("Out", "none"), outcome, st.outcome(r)))
            upd["d_phase"] = at(st.d_phase, r, z3.If(hold, c_("DPhase", "held"), c_("DPhase", "ended")))
            upd["hold"] = at(st.hold, r, E["Hold"][0])
            when = z3.And(z3.Not(hold), live(st, r))
            release_decode(st, r, when, mine, upd)
            upd["armed"] = at(st.armed, r, z3.If(hold, True, z3.If(when, False, st.armed(r))))
            send = z3.BoolVal(True) if send_always else hold
            upd["abort_tx"] = at_ranks(st.abort_tx, r, send, c_("Abt", "sent"))

        held = Symbol("held", (), "Bool")

        def any_meta(st, r, hold):
            """``hold ↔ ∃ d. meta(r, d)``: the group holds if any decode rank published."""
            d = z3.Const("d!", S["DRank"])
            return hold == self.exists([d], st.meta(r, d))

        @act("decode_poll_failed", RW, (mine_p, held), "pop_transferred sees Failed from some prefill rank w: held "
                                                       "with PR 41404 (H7)")
        def _(st, a, ch):
            r, w, mine, hold = a["r"], a["w"], ch["mine"], ch["held"]()
            guard = z3.And(r != st.rnone(), st.poll(r, w) == c_("Poll", "failed"),
                           z3.Or([st.d_phase(r) == c_("DPhase", x) for x in ("new", "reserved", "waiting")]),
                           defines(mine, "Page", r, st, lambda c: st.dest(r, c)), any_meta(st, r, hold))
            upd: dict = {}
            end_or_hold(st, r, c_("Out", "error"), False, mine, upd, hold)
            return Step(guard, upd)

        @act("decode_abort", R, (mine_p, held), "the client aborts at decode; pages held in _deferred_releases "
                                                "(H2, PR 35049)")
        def _(st, a, ch):
            r, mine, hold = a["r"], ch["mine"], ch["held"]()
            guard = z3.And(r != st.rnone(), st.outcome(r) == c_("Out", "none"),
                           z3.Or([st.d_phase(r) == c_("DPhase", x) for x in ("new", "reserved", "waiting", "verified")]),
                           defines(mine, "Page", r, st, lambda c: st.dest(r, c)), any_meta(st, r, hold))
            upd: dict = {}
            end_or_hold(st, r, c_("Out", "aborted"), True, mine, upd, hold)
            return Step(guard, upd)

        @act("prefill_handle_abort", RW, (), "_handle_abort_notification on prefill rank w: the request stops "
                                             "issuing on every rank (H3)")
        def _(st, a, ch):
            r, w = a["r"], a["w"]
            first = st.p_abort(r, w) == c_("Pab", "none")
            again = st.p_abort(r, w) == c_("Pab", "acked")
            ph = st.p_phase(r)
            new_ph = z3.If(z3.Or(ph == c_("PPhase", "new"), ph == c_("PPhase", "queued")), c_("PPhase", "ended"),
                           z3.If(ph == c_("PPhase", "sending"), c_("PPhase", "stopped"), ph))
            return Step(z3.And(r != st.rnone(), st.abort_tx(r, w) == c_("Abt", "sent")), {
                "abort_tx": at_rank(st.abort_tx, r, w, c_("Abt", "delivered")),
                "p_abort": at_rank(st.p_abort, r, w, z3.If(first, c_("Pab", "received"), st.p_abort(r, w))),
                "p_phase": at(st.p_phase, r, new_ph),
                "ack": at_rank(st.ack, r, w, z3.If(again, c_("Ack", "drain"), st.ack(r, w)))})

        @act("prefill_drain", R, (mine_q,), "a stopped request's writes (every rank's) landed: source pages freed "
                                            "(H8 fix)")
        def _(st, a, ch):
            r, mine = a["r"], ch["mine"]
            guard = z3.And(r != st.rnone(), st.p_phase(r) == c_("PPhase", "stopped"),
                           every_rank(lambda w: no_writes(st, r, w)),
                           defines(mine, "PPage", r, st, lambda c: st.src(r, c)))
            upd = {"p_phase": at(st.p_phase, r, c_("PPhase", "ended"))}
            release_source(st, r, mine, upd)
            return Step(guard, upd)

        @act("prefill_drain_ack", RW, (), "_maybe_ack_drained_abort on prefill rank w: its drain ack once its own "
                                          "writes landed (H3)")
        def _(st, a, ch):
            r, w = a["r"], a["w"]
            guard = z3.And(r != st.rnone(), st.p_abort(r, w) == c_("Pab", "received"),
                           z3.Or(st.p_phase(r) == c_("PPhase", "stopped"), st.p_phase(r) == c_("PPhase", "ended")),
                           no_writes(st, r, w))
            return Step(guard, {"p_abort": at_rank(st.p_abort, r, w, c_("Pab", "acked")),
                                "ack": at_rank(st.ack, r, w, c_("Ack", "drain"))})

        @act("decode_handle_abort_ack", RW, (), "note_abort_ack of prefill rank w's ack: recorded if armed and held (H3)")
        def _(st, a, ch):
            r, w = a["r"], a["w"]
            ok = z3.And(st.armed(r), st.d_phase(r) == c_("DPhase", "held"), st.ack(r, w) == c_("Ack", "drain"))
            return Step(z3.And(r != st.rnone(), st.ack(r, w) != c_("Ack", "none")), {
                "ack": at_rank(st.ack, r, w, c_("Ack", "none")),
                "acked": at_rank(st.acked, r, w, z3.If(ok, True, st.acked(r, w)))})

        def release_held(name, extra, doc):
            @act(name, R, (mine_p,), doc)
            def _(st, a, ch):
                r, mine = a["r"], ch["mine"]
                guard = z3.And(r != st.rnone(), st.d_phase(r) == c_("DPhase", "held"), extra(st, r),
                               defines(mine, "Page", r, st, lambda c: st.dest(r, c)))
                upd = {"d_phase": at(st.d_phase, r, c_("DPhase", "ended")), "hold": at(st.hold, r, E["Hold"][0])}
                release_decode(st, r, z3.BoolVal(True), mine, upd)
                return Step(guard, upd)

        release_held("decode_release_deferred", lambda st, r: every_rank(lambda w: st.acked(r, w)),
                     "resolve_deferred_releases when every prefill rank's drain ack arrived: required_acks "
                     "every_prefill_rank per decode rank, ready_combine min over them, and every prefill rank "
                     "pr is linked to decode rank pr mod gcd")
        release_held("decode_release_timeout", lambda st, r: st.hold(r) == E["Hold"][self.timeout],
                     "resolve_deferred_releases past the deadline (H6)")

        def succ(values, v, top):
            out = v
            for i in reversed(range(top)):
                out = z3.If(v == values[i], values[i + 1], out)
            return out

        @act("clock_tick", (), (), "one tick: hold timers and write ages advance; blocked by a write at the bound "
                                   "or an undelivered ABORT (H6's assumptions)")
        def _(st, a, ch):
            r, c, w = z3.Const("r!", S["Req"]), z3.Const("c!", S["Chunk"]), z3.Const("w!", S["PRank"])
            at_bound = E["Wr"][2 + self.bound]
            guard = z3.And(
                self.forall([r, c, w], z3.Implies(z3.And(r != st.rnone(), st.ch(r, c)), st.wr(r, c, w) != at_bound)),
                self.forall([r, w], z3.Implies(r != st.rnone(), st.abort_tx(r, w) != c_("Abt", "sent"))))
            ages = E["Wr"][2:]
            return Step(guard, {
                "hold": lambda x: z3.If(st.d_phase(x) == c_("DPhase", "held"),
                                        succ(E["Hold"], st.hold(x), self.timeout), st.hold(x)),
                "wr": lambda x, y, z: succ(ages, st.wr(x, y, z), self.bound) if self.bound else st.wr(x, y, z)})

        return out


# -- the correspondence with the spec's fields ------------------------------------------------------
# spec field -> (parametric symbol, its arguments from the field's index, how its values map).
# An argument is ("req", i) / ("page", i) / ("ppage", i) / ("prank", i) / ("drank", i): the field's
# i-th index names an element of that sort (a write stream is its prefill rank's: one layer);
# ("unit", i): the i-th index is a shard, standing for the prefill rank that writes it (shard sh
# is rank sh mod PR's); ("chunk", i, j): the j-th index is a chunk of the request named by the i-th.
FIELDS: dict[str, tuple[str, tuple, str]] = {
    "p_phase": ("p_phase", (("req", 0),), "enum:PPhase"),
    "p_abort": ("p_abort", (("req", 0), ("prank", 1)), "enum:Pab"),
    "src": ("src", (("req", 0), ("chunk", 0, 1)), "ppage"),
    "d_phase": ("d_phase", (("req", 0),), "enum:DPhase"),
    "meta": ("meta", (("req", 0), ("drank", 1)), "bool"),
    "dest": ("dest", (("req", 0), ("chunk", 0, 1)), "page"),
    "hold": ("hold", (("req", 0),), "enum:Hold"),
    "wr": ("wr", (("req", 0), ("chunk", 0, 2), ("prank", 1)), "enum:Wr"),
    "poll": ("poll", (("req", 0), ("prank", 1)), "enum:Poll"),
    "abort_tx": ("abort_tx", (("req", 0), ("prank", 1)), "enum:Abt"),
    "armed": ("armed", (("req", 0),), "bool"),
    "ack": ("ack", (("req", 0), ("prank", 1)), "enum:Ack"),
    "acked": ("acked", (("req", 0), ("prank", 1)), "bool"),
    "outcome": ("outcome", (("req", 0),), "enum:Out"),
    "read": ("read", (("req", 0),), "enum:Read"),
    "owner": ("owner", (("page", 0),), "req"),
    "content": ("content", (("unit", 0), ("page", 1)), "req"),
    "src_owner": ("src_owner", (("ppage", 0),), "req"),
    "src_content": ("src_content", (("ppage", 0),), "req"),
}
"""How each field of the spec's state (:mod:`.state`, with one layer, so a write stream is a
prefill rank's and a shard its writer's) is a parametric symbol applied to elements: what the
lifting of lemmas and the differential test read."""


class Correspondence:
    """The spec instance ``spec`` (a small configuration the model describes) read in the
    parametric model ``system``: a ground literal ``field[idx] = v`` as a term ``f(args) = value``
    with the indices as elements (:meth:`literal`), a ground clause lifted to a quantified
    candidate (:meth:`lift`)."""

    def __init__(self, system: SglangAllSizes, spec: Any):
        from kvproof.checker.symbolic.lift import field_slots
        problem = supported(spec.cfg)
        if problem:
            raise ValueError(problem)
        self.system, self.spec = system, spec
        self.slots = field_slots(spec.layout)
        self.k = spec.k

    def literal(self, st: QState, slot: int, v: int, term: Any) -> Any:
        """The literal ``slot = v`` over ``st``, ``term(kind, key)`` giving the element (or
        variable) of a request ``("req", r)``, page, prefill page or chunk ``("chunk", (r, c))``."""
        fname, idx = self.slots[slot]
        sym, args, kind = FIELDS[fname]
        xs = []
        for a in args:
            if a[0] == "chunk":
                xs.append(term("chunk", (idx[a[1]], idx[a[2]])))
            elif a[0] == "unit":
                xs.append(term("prank", idx[a[1]] % self.k.PR))
            else:
                xs.append(term(a[0], idx[a[1]]))
        lhs = getattr(st, sym)(*xs)
        if kind.startswith("enum:"):
            rhs = self.system.E[kind[5:]][v]
        elif kind == "bool":
            rhs = z3.BoolVal(v == 1)
        elif kind == "page":
            rhs = st.pnone() if v == self.k.D else term("page", v)
        elif kind == "ppage":
            rhs = st.qnone() if v == self.k.P else term("ppage", v)
        else:  # an owner or content code: free/unwritten or a request
            if v > self.k.R:
                raise ValueError(f"{fname}: content code {v} (old KV of a room) is not in the all-sizes model")
            rhs = st.rnone() if v == 0 else term("req", v - 1)
        return lhs == rhs

    def lift(self, clause: tuple) -> Candidate | None:
        """The ground clause "never all of these slot values" as ``∀`` distinct elements: every
        request, page, prefill page and prefill rank it names becomes a variable (pairwise distinct, none the
        sentinel), every chunk a variable of its request (distinct within a request) that is, or
        is not, one of its chunks as in the small instance.  Tenants and over-long flags are not
        assumed: the candidate speaks of any requests, and Houdini drops it if that is wrong.
        ``None`` for a clause naming a value the model does not have (``old:<tenant>`` KV)."""
        keys: dict[tuple, int] = {}

        def record(kind, key):
            keys.setdefault((kind, key), len(keys))
            return z3.BoolVal(True) if kind == "none" else z3.Const("x", self.system.sorts[_SORT[kind]])

        st0 = self.system.state()
        for slot, v in clause:
            if FIELDS[self.slots[slot][0]][2] == "req" and v > self.k.R:
                return None
            self.literal(st0, slot, v, record)
            if FIELDS[self.slots[slot][0]][2] == "req" and v:
                record("req", v - 1)
        for kind, key in list(keys):
            if kind == "chunk":
                record("req", key[0])
        order = sorted(keys, key=lambda k: (list(_SORT).index(k[0]), keys[k]))
        names = {k: f"{k[0][0]}{i}" for i, k in enumerate(order)}
        vars_ = tuple((names[k], _SORT[k[0]]) for k in order)
        pages = [self.spec.pages(r) for r in range(self.k.R)]

        def body(st, *vs):
            val = dict(zip(order, vs))
            term = lambda kind, key: val[(kind, key)]
            lits = [self.literal(st, slot, v, term) for slot, v in clause]
            prem = []
            for kind, none in (("req", st.rnone()), ("page", st.pnone()), ("ppage", st.qnone())):
                xs = [val[k] for k in order if k[0] == kind]
                if xs:
                    prem.append(z3.Distinct(*xs, none))
            for kind in ("prank", "drank"):
                ranks = [val[k] for k in order if k[0] == kind]
                if len(ranks) > 1:
                    prem.append(z3.Distinct(*ranks))
            by_req: dict[int, list] = {}
            for k in order:
                if k[0] == "chunk":
                    r, c = k[1]
                    by_req.setdefault(r, []).append(val[k])
                    has = st.ch(val[("req", r)], val[k])
                    prem.append(has if c < pages[r] else z3.Not(has))
            prem += [z3.Distinct(*xs) for xs in by_req.values() if len(xs) > 1]
            return z3.Implies(z3.And(prem), z3.Not(z3.And(lits)))

        cand = Candidate("", vars_, body)
        name = self.system.formula(cand, self.system.state()).sexpr()
        return Candidate(" ".join(name.split()), vars_, body)

    # -- templates joined through a pointer -------------------------------------------------------
    def joins(self, states: Any) -> list[Any]:
        """The small instance's reachable ``states`` (one row each) read through every pointer
        field (a field whose value names a page: ``dest``, ``src``): one row per state and per
        request chunk ``(r, c)`` whose pointer is set, holding ``r``'s own slots (its per-request
        fields and those of chunk ``c``) and the slots of the page the pointer names (``owner``,
        ``content``; ``src_owner``, ``src_content``), a request named there coded relative to
        ``r`` (0: none, 1: ``r`` itself, 2: another request, 3: an old tenant's KV).  Facts over
        such rows (:class:`~kvproof.checker.allsizes.prove.Join`) lift to ``∀ r, c`` formulas with the
        page as the term ``dest(r, c)``: the lemmas that relate a request, the page it points to
        and that page's owner or content, which no template over named slots yields without a
        page variable and four literals."""
        import numpy as np

        from itertools import product

        from kvproof.checker.allsizes.prove import Join
        lay, k = self.spec.layout, self.k
        real = [s for s, (f, _) in enumerate(self.slots) if f in FIELDS and not self._sentinel(s)]
        out = []
        for ptr, (psym, pargs, pkind) in FIELDS.items():
            if pkind not in ("page", "ppage") or [a[0] for a in pargs] != ["req", "chunk"]:
                continue
            none = k.D if pkind == "page" else k.P
            anchor_cols: list[str] = []
            target_cols: list[str] = []
            for s in real:
                fname, _ = self.slots[s]
                sym, args, kind = FIELDS[fname]
                if fname == ptr or kind in ("page", "ppage"):
                    continue
                kinds = [a[0] for a in args]
                if set(kinds) <= {"req", "chunk", "prank", "drank"} and fname not in anchor_cols:
                    anchor_cols.append(fname)
                elif kinds.count(pkind) == 1 and set(kinds) <= {pkind, "unit"} and fname not in target_cols:
                    target_cols.append(fname)
            cols = [*anchor_cols, *target_cols]
            blocks = []
            for r, c, w, d in product(range(k.R), range(k.C), range(k.PR), range(k.DR)):
                if c >= self.spec.pages(r):
                    continue
                pslot = self._slot_at(ptr, r, c, None, w, d)
                sel = states[states[:, pslot] != none]
                if not len(sel):
                    continue
                target = sel[:, pslot].astype(np.int64)
                block = np.zeros((len(sel), len(cols)), dtype=np.uint8)
                for j, fname in enumerate(cols):
                    if j < len(anchor_cols):
                        col = sel[:, self._slot_at(fname, r, c, None, w, d)]
                    else:
                        by_page = np.array([self._slot_at(fname, r, c, (pkind, e), w, d) for e in range(none)])
                        col = sel[np.arange(len(sel)), by_page[target]]
                    if FIELDS[fname][2] == "req":
                        col = np.where(col == 0, 0, np.where(col == r + 1, 1, np.where(col <= k.R, 2, 3)))
                    block[:, j] = col
                blocks.append(block)
            if not blocks:
                continue
            rows = np.unique(np.concatenate(blocks), axis=0)
            domains = tuple((0, 1, 2) if FIELDS[f][2] == "req" else tuple(range(lay.by_name[f].values.size))
                            for f in cols)
            targets = frozenset(range(len(anchor_cols), len(cols)))
            out.append(Join(ptr, tuple(cols), rows, domains, targets,
                            lambda fact, ptr=ptr, cols=tuple(cols), n=len(anchor_cols): self._lift_joined(ptr, cols, n, fact)))
        return out

    def _sentinel(self, slot: int) -> bool:
        fname, idx = self.slots[slot]
        f = self.spec.layout.by_name[fname]
        return any(i >= d.size for i, d in zip(idx, f.dims))

    def _slot_at(self, fname: str, r: int, c: int, target: tuple | None, w: int = 0, d: int = 0) -> int:
        """The slot of ``fname`` at request ``r`` / chunk ``c`` / prefill rank ``w`` (its first
        shard, shard ``w``) / decode rank ``d`` (or at the page ``target``)."""
        _, args, _ = FIELDS[fname]
        f = self.spec.layout.by_name[fname]
        idx = [0] * len(f.dims)
        for a in args:
            if a[0] == "req":
                idx[a[1]] = r
            elif a[0] == "chunk":
                idx[a[1]], idx[a[2]] = r, c
            elif a[0] in ("prank", "unit"):
                idx[a[1]] = w
            elif a[0] == "drank":
                idx[a[1]] = d
            else:
                idx[a[1]] = target[1]
        return self.spec.layout.slot(fname, *idx)

    def _lift_joined(self, ptr: str, cols: tuple, n_anchor: int, fact: tuple) -> Candidate | None:
        """A fact over the rows of :meth:`joins` (column, value pairs) as
        ``∀ r, c. r ≠ none ∧ ch(r, c) ∧ ptr(r, c) ≠ none → ¬(the values together)`` (``∀ r, c, w``
        when a column is a prefill rank's: every column's rank is that one ``w``)."""
        psym, _, pkind = FIELDS[ptr]
        if any(cols[j] and FIELDS[cols[j]][2] == "req" and v == 3 for j, v in fact):
            return None
        kinds = {a[0] for j, _ in fact for a in FIELDS[cols[j]][1]}
        ranked, dranked = bool(kinds & {"prank", "unit"}), "drank" in kinds
        vars_ = (("r", "Req"), ("c", "Chunk"), *((("w", "PRank"),) if ranked else ()),
                 *((("d", "DRank"),) if dranked else ()))
        sys_ = self.system

        def body(st, r, c, *ranks):
            w = ranks[0] if ranked else None
            d = ranks[-1] if dranked else None
            at = getattr(st, psym)(r, c)
            none = st.pnone() if pkind == "page" else st.qnone()
            lits = []
            for j, v in fact:
                sym, args, kind = FIELDS[cols[j]]
                if j >= n_anchor:  # the pointed page's column: the page is the pointer's term
                    xs = [w if a[0] == "unit" else at for a in args]
                else:
                    xs = [{"req": r, "chunk": c, "prank": w, "drank": d}[a[0]] for a in args]
                lhs = getattr(st, sym)(*xs)
                if kind == "req":
                    lits.append([lhs == st.rnone(), lhs == r, z3.And(lhs != r, lhs != st.rnone())][v])
                elif kind == "bool":
                    lits.append(lhs == z3.BoolVal(v == 1))
                else:
                    lits.append(lhs == sys_.E[kind[5:]][v])
            return z3.Implies(z3.And(r != st.rnone(), st.ch(r, c), at != none), z3.Not(z3.And(lits)))

        cand = Candidate("", vars_, body)
        name = sys_.formula(cand, sys_.state()).sexpr()
        return Candidate(" ".join(name.split()), vars_, body)


_SORT = {"req": "Req", "chunk": "Chunk", "page": "Page", "ppage": "PPage", "prank": "PRank", "drank": "DRank"}


FIXED_LINES = (
    "one layer, no aux (metadata) slots (prefill and decode ranks: any number, sorts)",
    "the engine of v0.5.22: rejection at both doors, deferred release on abort and on every failure "
    "(drain ack or deadline), source pages held until drained, client aborts and transfer failures, every "
    "prefill rank's drain ack required, hold_combine max, ready_combine min",
)
ABSTRACTION_LINES = (
    "allocation takes any free pages (the spec: the lowest-numbered)",
    "arrivals in any order (the spec: FIFO doors)",
    "a request's chunks issued in any order (the spec: in order)",
    "over-long is any fixed property of a request (the spec: pages against the context limit and pool)",
    "a clock tick need not advance a timer",
)


def small_config(cfg: Any) -> Any:
    """The first instance candidates are mined from (what relates requests): two one-page
    requests of the scenario's first tenant on two decode pages and one prefill page, one
    prefill rank (51,492 reachable states for v0.5.22's engine), the scenario's engine."""
    import dataclasses

    from kvproof.spec.sglang.config import Request
    tenant = cfg.requests[0].tenant
    return dataclasses.replace(cfg, requests=(Request(tenant, 1), Request(tenant, 1)), decode_pages=2,
                               prefill_pages=1, context_limit=max(cfg.context_limit, 1), prefill_ranks=1,
                               decode_ranks=1)


def ranks_config(cfg: Any) -> Any:
    """The second instance candidates are mined from (what relates ranks and chunks): one
    two-page request of the scenario's first tenant, two prefill ranks and two decode ranks, two
    decode pages and two prefill pages (10,852 reachable states for v0.5.22's engine; two
    requests at two prefill ranks are 1,246,073 even on one decode page), the scenario's engine."""
    import dataclasses

    from kvproof.spec.sglang.config import Request
    tenant = cfg.requests[0].tenant
    return dataclasses.replace(cfg, requests=(Request(tenant, 2),), decode_pages=2, prefill_pages=2,
                               context_limit=max(cfg.context_limit, 2), prefill_ranks=2, decode_ranks=2)


def model_for(spec: Any, protocol: type) -> Any:
    """The :class:`~kvproof.checker.allsizes.prove.AllSizesModel` of ``spec`` (an instance of the base
    protocol class ``protocol``, which builds the small instance) or ``None`` when the model does
    not describe its engine."""
    from kvproof.checker.allsizes.prove import AllSizesModel
    if supported(spec.cfg) is not None:
        return None
    e = spec.cfg.engine
    system = SglangAllSizes(e.timeout, e.write_latency_bound)
    small = protocol(small_config(spec.cfg))
    corr = Correspondence(system, small)
    ranked = protocol(ranks_config(spec.cfg))
    corr2 = Correspondence(system, ranked)
    fixed = (*FIXED_LINES, f"deadline (timeout) {e.timeout} ticks, write latency bound {e.write_latency_bound} tick(s)")
    return AllSizesModel(system, TARGET_CLAIMS, small, corr.lift, fixed, ABSTRACTION_LINES, corr.joins,
                         lambda invariant, source: link_map(spec, system, invariant, source),
                         filter_sizes=FILTER_SIZES, more=((ranked, corr2.lift, corr2.joins),))


class Pinned:
    """The small instance ``spec`` read as a *bounded* instance of the parametric model (one
    element per request, page, prefill page, chunk index and tenant, plus the sentinels): a
    concrete state becomes equalities on the model's symbols (:meth:`pins`), so a spec step can be
    asked for in the parametric transition relation (:meth:`allows`) and a spec claim compared
    with the model's (:meth:`breaks`).  What ``tests/test_allsizes.py`` checks the model with."""

    def __init__(self, system: SglangAllSizes, spec: Any):
        self.system, self.spec, self.corr, k = system, spec, Correspondence(system, spec), spec.k
        self.sizes = {"Req": k.R + 1, "Page": k.D + 1, "PPage": k.P + 1, "Chunk": k.C, "Tenant": k.T, "PRank": k.PR,
                      "DRank": k.DR}
        self.universe, self.axioms = system.bounded(self.sizes)

    def term(self, kind: str, key: Any) -> Any:
        """The element of a request, page, prefill page, prefill rank or (request, chunk)."""
        u = self.universe
        return {"req": lambda: u["Req"][1 + key], "page": lambda: u["Page"][1 + key],
                "ppage": lambda: u["PPage"][1 + key], "prank": lambda: u["PRank"][key],
                "drank": lambda: u["DRank"][key],
                "chunk": lambda: u["Chunk"][key[1]]}[kind]()

    def rigid(self, st: QState) -> list[Any]:
        """Which chunks each request has, its tenant, whether it is over-long."""
        u, k = self.universe, self.spec.k
        out = []
        for r in range(k.R):
            x = u["Req"][1 + r]
            out += [st.ch(x, c) == z3.BoolVal(i < self.spec.pages(r)) for i, c in enumerate(u["Chunk"])]
            out += [st.tenant(x) == u["Tenant"][k.tenant[r]], st.over_long(x) == z3.BoolVal(self.spec.over_long(r))]
        return out

    def pins(self, st: QState, state: bytes | tuple) -> list[Any]:
        """``state``'s every slot as an equality over ``st``."""
        return [self.corr.literal(st, slot, v, self.term) for slot, v in enumerate(state)
                if self.corr.slots[slot][0] in FIELDS and not self._sentinel(slot)]

    def _sentinel(self, slot: int) -> bool:
        fname, idx = self.corr.slots[slot]
        f = self.spec.layout.by_name[fname]
        return any(i >= d.size for i, d in zip(idx, f.dims))

    def allows(self, pre: bytes | tuple, post: bytes | tuple, only: str | None = None) -> list[str]:
        """The parametric actions (those named ``only`` or ``only.<case>``, or all) that take
        ``pre`` to ``post`` (empty: the step is not in the model's transition relation)."""
        from kvproof.checker.allsizes.quantified import _closed
        sysm = self.system
        sysm.universe = self.universe
        try:
            st = sysm.state()
            base = [self.axioms, *self.rigid(st), *self.pins(st, pre)]
            out = []
            for a in sysm.actions:
                if only is not None and a.name.split(".")[0] != only:
                    continue
                params = {p: z3.Const(f"{a.name}!{p}", sysm.sort(s)) for p, s in a.params}
                choices = {c.name: sysm.function(c, f"!{a.name}") for c in a.choices}
                wrapped = {n: (lambda f=f: f) if not isinstance(f, z3.FuncDeclRef) else f for n, f in choices.items()}
                step = a.step(st, params, wrapped)
                post_st = st.with_updates(step.updates)
                s = z3.Solver()
                s.add(*base, step.guard, *_closed(sysm, None, self.universe,
                                                  [*params.values(), *[(c, wrapped[c.name]) for c in a.choices]]),
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
SPEC_ACTION_OF = {"decode_prealloc_pick": "decode_prealloc"}
"""Spec actions whose model action has another name (with ``any_free_pages`` the spec reserves by
``decode_prealloc_pick``; the model's ``decode_prealloc`` takes any free pages already)."""


def link_map(spec: Any, system: SglangAllSizes | None = None, invariant: str | None = None,
             source: str = "") -> Any:
    """The :class:`~kvproof.checker.allsizes.link.LinkMap` of ``spec`` (an instance of the base protocol
    with the engine the model describes) and the parametric model (``system``, by default the
    model of the instance's deadline and latency bound): the bounded universe of
    :class:`Pinned` (one element per request, page, prefill page, chunk index, tenant and prefill rank, plus
    ``rnone``, ``pnone``, ``qnone``); every slot of :data:`FIELDS` observed at its elements (a
    chunk slot only for a chunk the request has; the spec's sentinel rows ``owner``/``content``
    of the page ``none`` and ``src_owner``/``src_content`` of the prefill page ``none`` at
    ``pnone``/``qnone``, where the spec keeps them free and unwritten); the rigid symbols as
    the instance has them; each spec action instance a step of the model action of the same
    name (``decode_prealloc`` also of ``decode_prealloc.rejected``) with its request, chunk and
    prefill rank (a write stream's, with one layer) as parameters, every rank tried where the
    spec's action has none (``decode_poll_failed``: some rank failed); and the witnesses of the choice functions: the pages an allocation picks are
    the ones the spec's successor names, ``taken``/``mine`` the pages the request's chunks
    name (as the model's guards define them; ``found_cross``/``found_foreign`` are left to the
    checker, which tries both values, as ``last`` of ``prefill_transfer_done``).  With ``invariant`` (the one-line invariant of an
    all-sizes certificate of this model, read from ``source``), its conjuncts are the
    hypotheses the step obligations may assume of the model state."""
    from kvproof.checker.allsizes.link import LinkMap, Observation, certified_conjuncts, ground
    from kvproof.checker.symbolic.lift import field_slots

    problem = supported(spec.cfg)
    if problem:
        raise ValueError(problem)
    e = spec.cfg.engine
    system = system if system is not None else SglangAllSizes(e.timeout, e.write_latency_bound)
    pin = Pinned(system, spec)
    k, lay, u = spec.k, spec.layout, pin.universe
    slots = field_slots(lay)

    def element(kind: str, i: int) -> Any:
        if kind == "prank":
            return u["PRank"][i]
        if kind == "drank":
            return u["DRank"][i]
        if kind == "unit":
            return u["PRank"][i % k.PR]
        return {"req": u["Req"], "page": u["Page"], "ppage": u["PPage"]}[kind][1 + i]

    def values(kind: str, size: int) -> tuple:
        if kind.startswith("enum:"):
            return tuple(system.E[kind[5:]][:size])
        if kind == "bool":
            return (z3.BoolVal(False), z3.BoolVal(True))
        if kind == "page":
            return tuple(element("page", v) if v < k.D else u["Page"][0] for v in range(size))
        if kind == "ppage":
            return tuple(element("ppage", v) if v < k.P else u["PPage"][0] for v in range(size))
        # an owner or content code: free/unwritten, a request, or old KV (no counterpart)
        return tuple(u["Req"][0] if v == 0 else element("req", v - 1) if v <= k.R else None for v in range(size))

    table: list[Any] = []
    for slot, (fname, idx) in enumerate(slots):
        if fname not in FIELDS:
            table.append(None)
            continue
        sym, args, kind = FIELDS[fname]
        f = lay.by_name[fname]
        xs, ok = [], True
        for a in args:
            if a[0] == "chunk":
                r, c = idx[a[1]], idx[a[2]]
                if r >= k.R or c >= spec.pages(r):
                    ok = False
                    break
                xs.append(u["Chunk"][c])
            else:
                i = idx[a[1]]
                size = f.dims[a[1]].size
                if i < size:
                    xs.append(element(a[0], i))
                elif a[0] in ("page", "ppage"):
                    xs.append({"page": u["Page"], "ppage": u["PPage"]}[a[0]][0])  # the sentinel row
                else:
                    ok = False
                    break
        table.append(Observation(sym, tuple(xs), values(kind, f.values.size)) if ok else None)

    actions = {a.name: a for a in system.actions}

    def options(inst: Any) -> list:
        name = SPEC_ACTION_OF.get(inst.name, inst.name)
        p = inst.params()
        params = {}
        if "req" in p:
            params["r"] = element("req", p["req"])
        if "chunk" in p:
            params["c"] = u["Chunk"][p["chunk"]]
        for key in ("prank", "stream"):  # one layer: write stream w is prefill rank w's
            if key in p:
                params["w"] = element("prank", p[key])
        if "drank" in p:
            params["d"] = element("drank", p["drank"])
        out = []
        for a in system.actions:
            if a.name.split(".")[0] != name:
                continue
            if any(n == "w" for n, _ in a.params) and "w" not in params:
                # a rank the spec's guard quantifies over (decode_poll_failed: some rank failed)
                out += [(a, {**{n: params[n] for n, _ in a.params if n != "w"}, "w": x}) for x in u["PRank"]]
            else:
                out.append((a, {n: params[n] for n, _ in a.params}))
        return out

    def pointed(st: Any, r: Any, ptr: str, sort: str) -> Any:
        """``x ↦ ∃ c. ch(r, c) ∧ ptr(r, c) = x`` over the bounded chunks."""
        return lambda x: z3.Or([z3.And(st.ch(r, c), getattr(st, ptr)(r, c) == x) for c in u["Chunk"]])

    def witness(action: Any, st: Any, params: dict, post: Any) -> dict:
        names = {c.name: c for c in action.choices}
        r = params.get("r")
        out: dict[str, Any] = {}
        if "pick" in names:
            ptr = "src" if names["pick"].result == "PPage" else "dest"
            out["pick"] = lambda c, ptr=ptr: getattr(post, ptr)(r, c)
            out["taken"] = lambda x, ptr=ptr: z3.Or([z3.And(st.ch(r, c), getattr(post, ptr)(r, c) == x) for c in u["Chunk"]])
        if "mine" in names:
            out["mine"] = pointed(st, r, "src" if names["mine"].args == ("PPage",) else "dest", "")
        return out

    hypothesis = None
    if invariant is not None:
        conjuncts = certified_conjuncts(system, invariant)
        hypothesis = lambda st: [(name, ground(t, u)) for name, t in conjuncts]  # noqa: E731
    return LinkMap(system, pin.sizes, u, pin.axioms, lambda slot: table[slot], pin.rigid, options, witness,
                   tuple(n for n in TARGET_CLAIMS if n in {c.name for c in spec.claims}), hypothesis,
                   f"the {len(conjuncts)} conjuncts of the invariant of {source or 'an all-sizes certificate'}"
                   if invariant is not None else "")
