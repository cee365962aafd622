"""Every interpretation of one spec, side by side on concrete states.

The reference interpreter (:class:`~kvproof.model.ops.ConcreteOps`) defines what a spec means.
:class:`Interpretations` builds the others once - the compiled engine (``successors``,
``expand``, ``hits``, ``quiescent_hits``, ``hits_after``, ``pending``), Z3 over integers
(:class:`~kvproof.checker.symbolic.z3ops.Z3Ops`) and Z3 over one-hot bits (the
:class:`~kvproof.checker.symbolic.transition.TransitionSystem` the symbolic engines use) - and
:meth:`Interpretations.disagreements` lists every way one of them differs from the reference at
a state: the set of ``(action, next state)`` pairs, and every claim's value.
"""

from __future__ import annotations

from typing import Any, Sequence

import z3

from kvproof.checker.symbolic.z3ops import Z3Ops, claim_term, state_vars
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.compiler import compile_pending
from kvproof.model.machine import Machine, reference_claim, reference_hits, reference_successors
from kvproof.model.framework import Spec

__all__ = ["Interpretations"]


def _model(pairs: list) -> Any:
    """A Z3 model giving each variable its constant."""
    m = z3.Model()
    for var, val in pairs:
        m.update_value(var, val)
    return m


def _value(term: Any, model: Any) -> Any:
    """A Z3 term's value in ``model`` (every variable it mentions has a value there)."""
    if isinstance(term, bool):
        return term
    t = model.eval(term, model_completion=True)
    if z3.is_true(t):
        return True
    if z3.is_false(t):
        return False
    if z3.is_int_value(t):
        return t.as_long()
    raise AssertionError(f"not a constant in the model: {t}")


class Interpretations:
    """The compiled and the two symbolic interpretations of ``spec``, built once."""

    def __init__(self, spec: Spec, symbolic: bool = True):
        self.spec = spec
        self.machine = Machine(spec)
        self.claims = self.machine.claims
        self.live = [c for c in self.claims if c.kind == "liveness"]
        self.pending = {c.name: compile_pending(spec, c)[0] for c in self.live}
        self.symbolic = symbolic
        if not symbolic:
            return
        self.ivars = state_vars(spec, "pre")
        self.int_steps = []
        for inst in spec.instances:
            ops = Z3Ops(self.ivars)
            if spec.run_action(inst, ops):
                self.int_steps.append((inst.aid, z3.And(*ops.guard) if ops.guard else z3.BoolVal(True), ops.next))
        self.int_claims = {c.name: claim_term(spec, c.name, self.ivars) for c in self.claims}
        self.ts = TransitionSystem(spec)
        self.hot_claims = {}
        for c in self.claims:
            if c.kind == "invariant":
                self.hot_claims[c.name] = z3.Not(self.ts.safe(c.name, self.ts.pre))
            elif c.kind == "witness":
                self.hot_claims[c.name] = self.ts.holds(c.name, self.ts.pre)
        from kvproof.checker.symbolic.onehot import OneHotOps
        self.hot_live = {c.name: spec.eval_claim(c.name, OneHotOps(self.ts.pre)) for c in self.live}

    # -- each interpretation's answer at one state ------------------------------------------------
    def reference(self, state: Sequence[int]) -> tuple[set, dict]:
        """(successor pairs, claim values) by the reference interpreter."""
        succ = {(a, bytes(t)) for a, t in reference_successors(self.spec, state)}
        values: dict[str, Any] = {}
        for c in self.claims:
            if c.kind == "liveness":
                values[c.name] = [bool(v) for _, v in reference_claim(self.spec, c.name, state)]
            else:
                values[c.name] = reference_hits(self.spec, c, state, enabled=bool(succ))
        return succ, values

    def compiled(self, state: bytes) -> list[tuple[str, Any]]:
        """(what, answer) of every compiled function at ``state``."""
        m = self.machine
        succ = set(m.successors(state))
        codes, found = [], []
        last = m.expand(state, 0, codes.append, found.append)
        expanded = {(c, t) for c, t in zip(codes, found)}
        out: list[tuple[str, Any]] = [("successors", succ), ("expand", expanded), ("expand returns", last is not None)]
        for c in self.claims:
            if c.kind == "liveness":
                mask = self.pending[c.name](state)
                n = len(reference_claim(self.spec, c.name, state))
                out.append((c.name, [bool(mask >> i & 1) for i in range(n)]))
            else:
                out.append((c.name, m.claim_hits(c.name, state)))
        h = m.hits(state)
        for a, t in succ:  # the restricted claim checks agree where the state before hit nothing
            if m.hits_after[a] is not None:
                out.append((f"hits_after[{m.label(a)}]", (m.hits_after[a](t) & ~h, m.hits(t) & ~h)))
        return out

    def batched(self, state: Sequence[int]) -> tuple[set, dict]:
        """(successor pairs, claim values) by the batched reference (:mod:`.batch`) on one row."""
        import numpy as np

        from .batch import batch_claim, batch_step

        arr = np.asarray([state], dtype=np.int32)
        succ = set()
        for inst in self.spec.instances:
            mask, ops = batch_step(self.spec, inst.aid, arr)
            if mask[0]:
                succ.add((inst.aid, bytes(ops.next_states(np.array([0]))[0])))
        values: dict[str, Any] = {}
        for c in self.claims:
            v = batch_claim(self.spec, c.name, arr)
            if c.kind == "liveness":
                values[c.name] = [bool(col[0]) for _, col in v]
            elif c.kind == "witness":
                values[c.name] = bool(v[0])
            elif c.at == "quiescent":
                values[c.name] = not succ and not bool(v[0])
            else:
                values[c.name] = not bool(v[0])
        return succ, values

    def integers(self, state: Sequence[int]) -> tuple[set, dict]:
        """(successor pairs, claim values) by Z3 over integers."""
        pairs = _model([(v, z3.IntVal(x)) for v, x in zip(self.ivars, state)])
        succ = set()
        for aid, guard, nxt in self.int_steps:
            if _value(guard, pairs):
                succ.add((aid, bytes(_value(t, pairs) for t in nxt)))
        values: dict[str, Any] = {}
        for c in self.claims:
            term = self.int_claims[c.name]
            if c.kind == "liveness":
                values[c.name] = [_value(t, pairs) for _, t in term]
            elif c.kind == "witness":
                values[c.name] = _value(term, pairs)
            elif c.at == "quiescent":
                values[c.name] = not succ and not _value(term, pairs)
            else:
                values[c.name] = not _value(term, pairs)
        return succ, values

    def one_hot(self, state: Sequence[int]) -> tuple[set, dict]:
        """(successor pairs, claim values) by Z3 over one-hot bits (the engines' encoding)."""
        pairs = []
        for slot, vals in enumerate(self.ts.pre):
            for v, b in vals.items():
                if not isinstance(b, bool):
                    pairs.append((b, z3.BoolVal(state[slot] == v)))
        pairs = _model(pairs)
        succ = set()
        for st in self.ts.steps:
            if not _value(st.guard, pairs):
                continue
            nxt = []
            for vals in st.next:
                chosen = [v for v, c in vals.items() if _value(c, pairs)]
                nxt.append(chosen[0] if len(chosen) == 1 else 256 + len(chosen))  # 256+: not one value
            succ.add((st.aid, bytes(min(x, 255) for x in nxt) if max(nxt, default=0) < 256 else tuple(nxt)))
        values: dict[str, Any] = {name: _value(t, pairs) for name, t in self.hot_claims.items()}
        for c in self.live:
            values[c.name] = [_value(t, pairs) for _, t in self.hot_live[c.name]]
        return succ, values

    # -- the comparison ---------------------------------------------------------------------------
    def disagreements(self, state: Sequence[int]) -> list[str]:
        """Every difference from the reference interpreter at ``state`` (empty when all agree)."""
        state = tuple(state)
        ref_succ, ref_values = self.reference(state)
        out = []
        for what, got in self.compiled(bytes(state)):
            if what in ("successors", "expand"):
                want: Any = ref_succ
            elif what == "expand returns":
                want = bool(ref_succ)
            elif what.startswith("hits_after"):
                want = got[1]
                got = got[0]
            else:
                want = ref_values[what]
            if got != want:
                out.append(f"compiled {what}: {got!r}, reference {want!r}")
        others = [("batched reference", self.batched(state))]
        if self.symbolic:
            others += [("z3 integers", self.integers(state)), ("z3 one-hot", self.one_hot(state))]
        for name, (succ, values) in others:
            if True:
                if succ != ref_succ:
                    out.append(f"{name} successors: {sorted(succ - ref_succ)} extra, {sorted(ref_succ - succ)} missing")
                for claim, want in ref_values.items():
                    if values.get(claim) != want:
                        out.append(f"{name} {claim}: {values.get(claim)!r}, reference {want!r}")
        return out


# -- every reachable state of a scenario at once ----------------------------------------------------
def all_states_disagreements(spec: Spec, states: Sequence[bytes], symbolic: bool = True, most: int = 10) -> list[str]:
    """The differences from the reference semantics on every state of ``states`` at once:
    the compiled engine (successors and claim hits), and with ``symbolic`` the integer and
    one-hot Z3 encodings (guards, next states and claims), each evaluated over whole columns
    (:mod:`.batch`).  At most ``most`` differences are listed."""
    import numpy as np

    from kvproof.checker.symbolic.onehot import OneHotOps

    from .batch import batch_claim, batch_step, z3_values

    m = Machine(spec)
    n, size = len(states), spec.layout.size
    arr8 = np.frombuffer(b"".join(states), dtype=np.uint8).reshape(n, size)
    arr = arr8.astype(np.int32)
    out: list[str] = []

    def note(msg: str) -> None:
        if len(out) < most:
            out.append(msg)

    # the compiled engine, state by state, gathered per action instance
    by_aid: dict[int, tuple[list[int], list[bytes]]] = {}
    hits = np.zeros(n, dtype=np.int64)
    quiet_hits = np.zeros(n, dtype=np.int64)
    compiled_enabled = np.zeros(n, dtype=bool)
    for i, s in enumerate(states):
        succ = m.successors(s)
        for aid, t in succ:
            rows, nxt = by_aid.setdefault(aid, ([], []))
            rows.append(i)
            nxt.append(t)
        hits[i] = m.hits(s)
        if succ:
            compiled_enabled[i] = True
        else:
            quiet_hits[i] = m.quiescent_hits(s)
    enabled_any = np.zeros(n, dtype=bool)
    # reference (batched) against compiled, then against the two Z3 encodings
    if symbolic:
        ivars = state_vars(spec, "pre")
        icols = {v.get_id(): arr[:, k].astype(np.int32) for k, v in enumerate(ivars)}
        ts = TransitionSystem(spec)
        hcols = {}
        for slot, vals in enumerate(ts.pre):
            for v, b in vals.items():
                if not isinstance(b, bool):
                    hcols[b.get_id()] = arr[:, slot] == v
        hot_steps = {st.aid: st for st in ts.steps}
        imemo: dict = {}
        hmemo: dict = {}
    for inst in spec.instances:
        aid = inst.aid
        mask, bops = batch_step(spec, aid, arr)
        enabled_any |= mask
        rows, got = by_aid.get(aid, ([], []))
        want_rows = np.flatnonzero(mask)
        ref_next = bops.next_states(want_rows)
        if want_rows.tolist() != rows:
            extra = sorted(set(rows) - set(want_rows.tolist()))[:1]
            missing = sorted(set(want_rows.tolist()) - set(rows))[:1]
            note(f"compiled {m.label(aid)}: enabled on {len(rows)} states, reference on {len(want_rows)} "
                 f"(first extra {extra}, first missing {missing})")
        else:
            got_next = np.frombuffer(b"".join(got), dtype=np.uint8).reshape(-1, size) if got else ref_next[:0]
            bad = np.flatnonzero(np.any(ref_next != got_next, axis=1))
            if bad.size:
                note(f"compiled {m.label(aid)}: next state differs on {bad.size} states (first: state {rows[bad[0]]})")
        if not symbolic:
            continue
        ops = Z3Ops(ivars)
        if spec.run_action(inst, ops):
            guard = z3.And(*ops.guard) if ops.guard else z3.BoolVal(True)
            values = z3_values([guard, *ops.next], icols, n, imemo)
            if not np.array_equal(values[0], mask):
                note(f"z3 integers {m.label(aid)}: guard differs on {int(np.sum(values[0] != mask))} states")
            else:
                for slot, col in enumerate(values[1:]):
                    if np.any(col[want_rows] != ref_next[:, slot]):
                        note(f"z3 integers {m.label(aid)}: slot {slot} of the next state differs")
                        break
        elif mask.any():
            note(f"z3 integers {m.label(aid)}: ruled out, reference enables it")
        st = hot_steps.get(aid)
        if st is None:
            if mask.any():
                note(f"z3 one-hot {m.label(aid)}: left out, reference enables it on {int(mask.sum())} states")
            continue
        (g,) = z3_values([st.guard], hcols, n, hmemo)
        if not np.array_equal(g, mask):
            note(f"z3 one-hot {m.label(aid)}: guard differs on {int(np.sum(g != mask))} states")
            continue
        for slot in st.writes:
            vals = st.next[slot]
            conds = z3_values(list(vals.values()), hcols, n, hmemo)
            chosen = np.zeros(n, dtype=np.int32)
            count = np.zeros(n, dtype=np.int32)
            for v, c in zip(vals, conds):
                chosen = np.where(c, v, chosen)
                count += c
            if np.any(count[want_rows] != 1) or np.any(chosen[want_rows] != ref_next[:, slot]):
                note(f"z3 one-hot {m.label(aid)}: slot {slot} differs")
                break
        unwritten = [k for k in range(size) if k not in set(st.writes)]
        if unwritten and np.any(ref_next[:, unwritten] != arr8[want_rows][:, unwritten]):
            note(f"z3 one-hot {m.label(aid)}: the reference writes a slot the encoding keeps")
    # claims
    for i, c in enumerate(m.claims):
        if c.kind == "liveness":
            pending, _ = compile_pending(spec, c)
            ref = batch_claim(spec, c.name, arr)
            got = np.array([pending(s) for s in states], dtype=np.int64)
            for k, (label, col) in enumerate(ref):
                if not np.array_equal((got >> k) & 1 == 1, col):
                    note(f"compiled {c.name}: obligation {label} differs")
            if symbolic:
                iterm = claim_term(spec, c.name, ivars)
                hterm = spec.eval_claim(c.name, OneHotOps(ts.pre))
                for (label, col), (_, it), (_, ht) in zip(ref, iterm, hterm):
                    if not np.array_equal(z3_values([it], icols, n, imemo)[0], col):
                        note(f"z3 integers {c.name}: obligation {label} differs")
                    if not np.array_equal(z3_values([ht], hcols, n, hmemo)[0], col):
                        note(f"z3 one-hot {c.name}: obligation {label} differs")
            continue
        truth = batch_claim(spec, c.name, arr)
        hit = ~truth if c.kind == "invariant" else truth
        if c.at == "quiescent":
            hit = hit & ~enabled_any
            got = ((quiet_hits >> i) & 1 == 1) & ~compiled_enabled
        else:
            got = (hits >> i) & 1 == 1
        if not np.array_equal(got, hit):
            note(f"compiled {c.name}: hits on {int(got.sum())} states, reference on {int(hit.sum())}")
        if symbolic:
            (itruth,) = z3_values([claim_term(spec, c.name, ivars)], icols, n, imemo)
            if not np.array_equal(itruth, truth):
                note(f"z3 integers {c.name}: differs on {int(np.sum(itruth != truth))} states")
            term = ts.safe(c.name, ts.pre) if c.kind == "invariant" else ts.holds(c.name, ts.pre)
            (htruth,) = z3_values([term], hcols, n, hmemo)
            want = truth | enabled_any if c.at == "quiescent" else truth
            if not np.array_equal(htruth, want):
                note(f"z3 one-hot {c.name}: differs on {int(np.sum(htruth != want))} states")
    return out


# -- the native backend (C compiled from the spec) -----------------------------------------------------
def native_disagreements(machine: Any, states: Sequence[bytes], batched: bool = False, most: int = 10) -> list[str]:
    """The differences between a :class:`~kvproof.checker.explicit.native.NativeMachine`'s C code and
    the reference semantics on ``states``, all expanded and checked in one call each: the set
    of ``(action, next state)`` pairs per state, the flag of a state without successors, every
    safety claim's hit (quiescent ones where nothing is enabled), every liveness claim's pending
    obligations (with ``batched``, on the first 200 states) and the fingerprints (equal states,
    equal keys).  The reference is the plain interpreter state by state, or with
    ``batched`` the batched reference (:mod:`.batch`) over whole columns (the whole catalogue)."""
    import numpy as np

    spec, code = machine.spec, machine.native
    n, size = len(states), spec.layout.size
    arr = np.frombuffer(b"".join(states), dtype=np.uint8).reshape(n, size).copy()
    quiet = np.zeros(n, np.uint8)
    outs, codes = code.expand(arr, 0, n, quiet)
    nxt = np.concatenate(outs) if outs else np.zeros((0, size), np.uint8)
    codes = np.concatenate(codes) if codes else np.zeros(0, np.int64)
    pos, aids = np.divmod(codes, code.n_actions)
    hits, qhits = code.hits(arr), code.quiescent_hits(arr)
    out: list[str] = []

    def note(msg: str) -> None:
        if len(out) < most:
            out.append(msg)

    if batched:  # per action instance over whole columns: the rows it is enabled on, its next states
        from .batch import batch_claim, batch_step

        wide = arr.astype(np.int32)
        enabled = np.zeros(n, bool)
        order = np.argsort(aids, kind="stable")  # successors grouped by action, rows ascending in each
        bounds = np.searchsorted(aids[order], np.arange(code.n_actions + 1))
        for inst in spec.instances:
            mask, bops = batch_step(spec, inst.aid, wide)
            enabled |= mask
            rows = np.flatnonzero(mask)
            mine = order[bounds[inst.aid]:bounds[inst.aid + 1]]
            if not np.array_equal(pos[mine], rows):
                note(f"native {machine.label(inst.aid)}: enabled on {mine.size} states, reference on {rows.size}")
            elif rows.size and not np.array_equal(nxt[mine], bops.next_states(rows)):
                note(f"native {machine.label(inst.aid)}: next state differs")
        want_quiet = ~enabled
        truths = {c.name: batch_claim(spec, c.name, wide) for c in machine.claims if c.kind != "liveness"}
        if not np.array_equal(quiet.astype(bool), want_quiet):
            note(f"native quiescence differs on {int(np.sum(quiet.astype(bool) != want_quiet))} states")
    else:
        got: list[set] = [set() for _ in range(n)]
        for p, a, t in zip(pos.tolist(), aids.tolist(), nxt):
            got[p].add((a, t.tobytes()))
        want = [{(a, bytes(t)) for a, t in reference_successors(spec, s)} for s in states]
        want_quiet = np.array([not w for w in want], bool)
        for k in range(n):
            if got[k] != want[k]:
                note(f"native successors at state {k}: {sorted(got[k] - want[k])[:2]} extra, "
                     f"{sorted(want[k] - got[k])[:2]} missing")
            if bool(quiet[k]) != want_quiet[k]:
                note(f"native quiescence at state {k}: {bool(quiet[k])}, reference {want_quiet[k]}")
    for i, c in enumerate(machine.claims):
        if c.kind == "liveness":  # the obligations pending at each state (kv_pending), against the reference's
            got_pending = code.pending(i, arr)
            if got_pending is None:
                note(f"native {c.name}: obligations not compiled")
                continue
            masks, labels = got_pending
            for k, s in enumerate(states[:200] if batched else states):
                ref_pending = reference_claim(spec, c.name, s)
                if labels != [label for label, _ in ref_pending]:
                    note(f"native {c.name}: obligations {labels[:3]}, reference {[x for x, _ in ref_pending][:3]}")
                    break
                want = sum(1 << j for j, (_, v) in enumerate(ref_pending) if v)
                if int(masks[k]) != want:
                    note(f"native {c.name} at state {k}: pending {int(masks[k]):b}, reference {want:b}")
            continue
        if batched:
            truth = truths[c.name]
            ref = ~truth if c.kind == "invariant" else truth
            if c.at == "quiescent":
                ref = ref & want_quiet
        else:
            ref = np.array([reference_hits(spec, c, s, enabled=not q) for s, q in zip(states, want_quiet)], bool)
        bits = (hits if c.at == "always" else qhits) >> np.uint64(i) & np.uint64(1)
        mine = bits.astype(bool) & (quiet.astype(bool) if c.at == "quiescent" else True)
        if not np.array_equal(mine, ref):
            note(f"native {c.name}: hits on {int(mine.sum())} states, reference on {int(ref.sum())}")
    keys = code.keys(arr)
    same: dict[bytes, int] = {}
    for s, key in zip(states, keys.tolist()):
        if same.setdefault(bytes(s), key) != key:
            note(f"native fingerprints differ for equal states {bytes(s)!r}")
    return out
