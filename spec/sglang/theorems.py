"""Parametric theorems: proved for all values of a parameter, not for one scenario's value.

* **Timeout release** (H6): with the deferred-release deadline ``T`` and the write-latency bound
  ``W`` left symbolic, the spec's own actions are evaluated with Z3 integer terms standing for
  ``T`` and ``W`` (an engine proxy whose ``timeout`` and ``write_latency_bound`` are Z3
  constants; the spec compares against them through the ops facade, so nothing is re-encoded).
  *If*: Spacer proves ``no_write_after_release`` (and the two read claims) for every ``T > W``
  with unbounded clocks.  *Only if*: for every ``T <= W`` a violation is reachable, proved by
  Spacer on the spec restricted to one schedule (the shortest counterexample of the
  ``timeout-equals-latency`` scenario, its run of clock ticks turned into "tick until the hold
  reaches T"): from every such ``(T, W)`` the schedule never gets stuck and ends in the
  violation.
* **Admission** (H1): with the context limit, the prefill pool and the prompt length symbolic,
  the spec's admission predicate :func:`~kvproof.spec.sglang.protocol.exceeds_input_limit` and the engine's
  admission flags decide what prefill sends and what decode reserves; under the fixed admission
  (PR 38935) every prompt is admitted with full coverage or rejected before any reservation.
  Under the incident's admission the smallest prompt that reaches the unsafe path is found by
  Z3's optimizer, in tokens, with SGLang's ``max_req_len = min(context_len - 1, pool - 1)`` and
  ``max_req_input_len = max_req_len - 5`` (``validate_input_length`` rejects ``len >=
  max_req_input_len``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import z3

from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Engine
from kvproof.model.ops import ConcreteOps
from kvproof.spec.sglang.protocol import PdProtocol, exceeds_input_limit
from kvproof.model.scenario import builtin
from kvproof.checker.explicit.run import check_scenario
from kvproof.checker.symbolic.z3ops import Z3Ops, claim_term
from kvproof.spec.sglang.parametric import int_system as _int_system
from kvproof.spec.sglang.parametric import parametric_spec as _parametric_spec

__all__ = ["Theorem", "timeout_theorem", "admission_theorem", "all_theorems", "admission",
           "smallest_unsafe_prompt"]

INCIDENT_CONTEXT = 1_048_576
INCIDENT_POOL = 681_280
PAGE_TOKENS = 64


@dataclass
class Theorem:
    """A statement, its verdict (``proved``, ``refuted``, ``inconclusive``) and what backs it."""

    name: str
    statement: str
    verdict: str
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def holds(self) -> bool:
        """The theorem was proved."""
        return self.verdict == "proved"


# -- timeout release ------------------------------------------------------------------------------
def _verdict(result, proved, refuted) -> str:
    if result == proved:
        return "proved"
    if result == refuted:
        return "refuted"
    return "inconclusive"


def _timeout_if(max_seconds: float) -> tuple[str, str]:
    """T > W ⇒ safe for every T and W: lemmas over parametric atoms (:mod:`.timeout_lemmas`),
    then Spacer if they fall short."""
    from kvproof.spec.sglang.timeout_lemmas import timeout_if_by_lemmas
    verdict, why, _ = timeout_if_by_lemmas(max(max_seconds, 300.0))
    if verdict != "inconclusive":  # proved or refuted: decided
        return verdict, why
    v2, why2 = _timeout_if_spacer(max_seconds)
    return v2, f"parametric lemmas: {why}; Spacer: {why2 or v2}"


def _timeout_if_spacer(max_seconds: float) -> tuple[str, str]:
    T, W = z3.Ints("T W")
    spec = _parametric_spec(T, W)
    pre, typed, steps = _int_system(spec, T, W)
    claims = ["no_write_after_release", "decode_reads_only_own_pages", "no_cross_tenant_read"]
    sorts = [z3.IntSort()] * (2 + len(pre))
    inv = z3.Function("Inv", *sorts, z3.BoolSort())
    s = z3.SolverFor("HORN")
    s.set("timeout", int(max_seconds * 1000))
    init = z3.And(*[x == v for x, v in zip(pre, spec.init_state())])
    s.add(z3.ForAll([T, W, *pre], z3.Implies(z3.And(T > W, W >= 0, init), inv(T, W, *pre))))
    for inst, guard, nxt in steps:
        s.add(z3.ForAll([T, W, *pre], z3.Implies(z3.And(inv(T, W, *pre), typed(pre), guard), inv(T, W, *nxt))))
    safe = z3.And(*[claim_term(spec, c, pre) for c in claims])
    s.add(z3.ForAll([T, W, *pre], z3.Implies(z3.And(inv(T, W, *pre), z3.Not(safe)), False)))
    r = s.check()
    return _verdict(r, z3.sat, z3.unsat), s.reason_unknown() if r == z3.unknown else ""


def _schedule() -> tuple[list, int, int]:
    """The shortest counterexample of ``timeout-equals-latency`` as a schedule: (action instances,
    index of the first clock tick of its last run of ticks, request whose hold it waits on)."""
    sc = builtin("timeout-equals-latency")
    report = check_scenario(sc, only=["no_write_after_release"])
    trace = report.claims[0].result.trace
    insts = [trace.machine.instances[a] for a in trace.actions]
    release = max(i for i, inst in enumerate(insts) if inst.name == "decode_release_timeout")
    first = release
    while first > 0 and insts[first - 1].name == "clock_tick":
        first -= 1
    return insts, first, insts[release].args[0]


def _valid(assumptions, goal) -> bool:
    s = z3.Solver()
    s.add(*assumptions, z3.Not(goal))
    return s.check() == z3.unsat


def _run(spec, inst, state):
    ops = Z3Ops(state)
    if spec.run_action(inst, ops) is False:
        return z3.BoolVal(False), list(state)
    return (z3.And(*ops.guard) if ops.guard else z3.BoolVal(True)), [z3.simplify(t) for t in ops.next]


def _timeout_only_if() -> tuple[str, str, list]:
    """For every ``1 <= T <= W``, the schedule runs and ends in a violation: checked by
    induction on the number of ticks ``h`` with Z3 terms in ``T``, ``W`` and ``h``."""
    T, W, h = z3.Ints("T W h")
    spec = _parametric_spec(T, W)
    insts, loop, r = _schedule()
    tick = next(i for i in spec.instances if i.name == "clock_tick")
    suffix = [i for i in insts[loop:] if i.name != "clock_tick"]
    labels = [Machine.label(_LabelOnly(spec), i.aid) for i in insts[:loop]] + ["tick until hold ≥ T"] + \
             [Machine.label(_LabelOnly(spec), i.aid) for i in suffix]
    params = [T >= 1, W >= T]
    state = [z3.IntVal(v) for v in spec.init_state()]
    for k, inst in enumerate(insts[:loop], start=1):
        guard, state = _run(spec, inst, state)
        if not _valid(params, guard):
            return "refuted", f"step {k} ({inst.name}) is not enabled for every T <= W", labels
    # the loop: sigma(h) = sigma(0) + h * delta, delta found per slot (0 or 1) and then proved
    _, after_one = _run(spec, tick, state)
    delta = []
    for x0, x1 in zip(state, after_one):
        d = next((d for d in (0, 1) if _valid(params, x1 == x0 + d)), None)
        if d is None:
            return "inconclusive", "a clock tick changes a slot by something other than 0 or 1", labels
        delta.append(d)

    def sigma(n):
        return [x + d * n for x, d in zip(state, delta)]

    hold = spec.layout.slot("hold", r)
    guard, nxt = _run(spec, tick, sigma(h))
    loop_ok = z3.And(guard, *[a == b for a, b in zip(nxt, sigma(h + 1))])
    if not _valid(params + [h >= 0, h < T], loop_ok):
        return "inconclusive", "the tick loop is not the induction step sigma(h) -> sigma(h + 1)", labels
    if not _valid(params, sigma(0)[hold] == 0):
        return "inconclusive", "the hold timer does not start at 0", labels
    state = sigma(T)
    for inst in suffix:
        guard, state = _run(spec, inst, state)
        if not _valid(params, guard):
            return "refuted", f"{inst.name} is not enabled after T ticks for every T <= W", labels
    if not _valid(params, z3.Not(claim_term(spec, "no_write_after_release", state))):
        return "refuted", "the schedule does not end in a violation for every T <= W", labels
    return "proved", "", labels


class _LabelOnly:
    """Just enough of a machine for :meth:`Machine.label`."""

    def __init__(self, spec):
        self.spec = spec
        self.instances = spec.instances


def _explicit_pairs(n: int) -> list[tuple[int, int]]:
    """(T, W) pairs with 1 <= W < T <= n where the explicit engine finds a violation (bounded
    evidence for the *if* direction, printed beside Spacer's answer; never a proof)."""
    base = builtin("timeout-bounded-latency")
    bad = []
    for t in range(1, n + 1):
        for w in range(0, t):
            cfg = replace(base.config, engine=replace(base.config.engine, timeout=t, write_latency_bound=w))
            rep = check_scenario(replace(base, config=cfg),
                                 only=["no_write_after_release", "decode_reads_only_own_pages", "no_cross_tenant_read"])
            if any(c.verdict != "verified" for c in rep.claims):
                bad.append((t, w))
    return bad


def timeout_theorem(max_seconds: float = 120.0, explicit_up_to: int = 4) -> Theorem:
    """Release after the timeout is safe iff the timeout exceeds the write-latency bound."""
    start = time.perf_counter()
    v_if, why_if = _timeout_if(max_seconds)
    v_only, why_only, schedule = _timeout_only_if()
    details = [
        f"if (T > W ⇒ no_write_after_release, decode_reads_only_own_pages, no_cross_tenant_read "
        f"in every reachable state, all T ≥ 1, W ≥ 0): {v_if}" + (f" ({why_if})" if why_if else ""),
        f"only if (T ≤ W ⇒ no_write_after_release is violated, for every T ≥ 1, W ≥ T): {v_only}"
        + (f" ({why_only})" if why_only else ""),
        "counterexample for T ≤ W: " + " → ".join(schedule),
    ]
    if v_if != "proved":
        bad = _explicit_pairs(explicit_up_to)
        details.append(f"bounded evidence only (not a proof): the explicit engine verifies all three claims for "
                       f"every 0 ≤ W < T ≤ {explicit_up_to}" if not bad else f"explicit engine finds violations "
                       f"for T > W at {bad}")
    both = "proved" if v_if == v_only == "proved" else ("refuted" if "refuted" in (v_if, v_only) else "inconclusive")
    return Theorem("timeout_release_safe_iff_timeout_exceeds_latency",
                   "deadline release (PR 35049) is safe for every deadline T and latency bound W "
                   "if and only if T > W", both, details, time.perf_counter() - start)


# -- admission ---------------------------------------------------------------------------------------
def admission(o, e: Engine, pages, context_limit, prefill_pool) -> dict[str, Any]:
    """What the engine does with a prompt of ``pages`` pages, through the ops facade ``o``:
    ``over_long`` (fails ``validate_input_length``), ``pending_error`` (queued with a one-token
    placeholder), ``sent`` (pages prefill sends), ``reserved`` (pages decode reserves), the same
    decisions :class:`~kvproof.spec.sglang.protocol.PdProtocol` makes per request (``over_long``,
    ``pending_error``, ``send_len``, ``decode_prealloc``); the tests hold the two together."""
    over = exceeds_input_limit(o, pages, context_limit, prefill_pool)
    pending = o.and_(over, not e.reject_at_prefill_door)
    sent = o.ite(pending, o.const(1), pages)
    reserved = o.ite(o.and_(over, e.reject_at_decode_door), o.const(0), pages)
    return {"over_long": over, "pending_error": pending, "sent": sent, "reserved": reserved}


def _z3(x):
    return z3.BoolVal(x) if isinstance(x, bool) else (z3.IntVal(x) if isinstance(x, int) else x)


def smallest_unsafe_prompt(e: Engine, context_tokens: int, pool_tokens: int, page: int = PAGE_TOKENS) -> int | None:
    """The smallest prompt, in tokens, that SGLang's admission lets reach the unsafe path
    (queued with a placeholder while decode reserves more than prefill sends), or ``None``."""
    n = z3.Int("prompt_tokens")
    o = Z3Ops([])
    max_req_len = z3.If(context_tokens - 1 < pool_tokens - 1, context_tokens - 1, pool_tokens - 1)
    max_req_input_len = max_req_len - 5
    # in tokens: the longest accepted prompt is max_req_input_len - 1 (validate_input_length
    # rejects len >= max_req_input_len); the placeholder is one token
    longest = max_req_input_len - 1
    a = admission(o, e, n, longest, longest)
    opt = z3.Optimize()
    opt.add(n >= 1, n < context_tokens, _z3(a["pending_error"]), _z3(a["reserved"]) > _z3(a["sent"]))
    opt.minimize(n)
    if opt.check() != z3.sat:
        return None
    return opt.model()[n].as_long()


def admission_theorem() -> Theorem:
    """Fixed admission: admitted with full coverage or rejected before any reservation, for all
    context limits and pool sizes; incident admission: the smallest unsafe prompt."""
    start = time.perf_counter()
    fixed = replace(Engine(), reject_at_prefill_door=True, reject_at_decode_door=True,
                    retire_pending_error_prefill=True)
    pages, ctx, pool = z3.Ints("pages context_limit prefill_pool")
    a = admission(Z3Ops([]), fixed, pages, ctx, pool)
    ok = z3.Or(z3.And(z3.Not(_z3(a["over_long"])), _z3(a["sent"]) == pages, _z3(a["reserved"]) == pages),
               z3.And(_z3(a["over_long"]), _z3(a["reserved"]) == 0))
    s = z3.Solver()
    s.add(pages >= 1, ctx >= 1, pool >= 1, z3.Not(ok))
    verdict = _verdict(s.check(), z3.unsat, z3.sat)
    details = [f"fixed admission (PR 38935, both doors), all pages ≥ 1, context_limit ≥ 1, prefill_pool ≥ 1: {verdict}"]
    if verdict == "refuted":
        details.append(f"counterexample: {s.model()}")
    # the incident's admission, with the incident's numbers
    incident = Engine()
    smallest = smallest_unsafe_prompt(incident, INCIDENT_CONTEXT, INCIDENT_POOL)
    max_req_len = min(INCIDENT_CONTEXT - 1, INCIDENT_POOL - 1)
    details.append(f"incident admission, context {INCIDENT_CONTEXT:,} tokens, pool {INCIDENT_POOL:,} tokens: "
                   f"max_req_len = {max_req_len:,}, max_req_input_len = {max_req_len - 5:,}")
    if smallest is None:
        details.append("no prompt reaches the unsafe path")
    else:
        details.append(f"smallest prompt reaching the unsafe path: {smallest:,} tokens "
                       f"({-(-smallest // PAGE_TOKENS):,} pages of {PAGE_TOKENS}); decode reserves all of them, "
                       f"prefill sends 1")
    fixed_smallest = smallest_unsafe_prompt(fixed, INCIDENT_CONTEXT, INCIDENT_POOL)
    details.append("fixed admission, same numbers: " + ("no prompt reaches the unsafe path" if fixed_smallest is None
                                                        else f"{fixed_smallest:,} tokens reach it"))
    if fixed_smallest is not None:
        verdict = "refuted"
    return Theorem("admission_full_coverage_or_early_reject",
                   "under the fixed admission every prompt is admitted with full coverage or rejected "
                   "before any reservation, for every context limit and pool size", verdict, details,
                   time.perf_counter() - start)


def concrete_admission(e: Engine, pages: int, context_limit: int, prefill_pool: int) -> dict[str, Any]:
    """:func:`admission` evaluated on plain values (what the tests compare with the spec)."""
    return admission(ConcreteOps(()), e, pages, context_limit, prefill_pool)


def all_theorems(max_seconds: float = 120.0) -> list[Theorem]:
    """Every parametric theorem, in order (``max_seconds`` is Spacer's budget)."""
    return [timeout_theorem(max_seconds), admission_theorem()]
