"""The symbolic transition system of one spec instance, built from the one spec.

:class:`TransitionSystem` is what the Z3 engines (bounded model checking, k-induction, Horn
clauses) share.  It holds nothing hand-written about the protocol: every term comes from running
the spec's actions and claims through the one-hot interpretation of :mod:`.onehot`.

* one set of variables per step: the bits ``field[i]=v@t`` of every slot
  (:meth:`TransitionSystem.state`), and an action tag per step, ``action@t``, so that a model
  decodes straight into a trace (:meth:`TransitionSystem.decode_path`);
* the *type invariant* (:meth:`TransitionSystem.typed`): exactly one value per slot (so every
  slot lies within its field's domain); sentinel slots are constants, fixed at their initial
  value;
* the transition relation (:meth:`TransitionSystem.step`): the disjunction over every action
  instance of ``tag = aid`` and its guard and its next-state terms, the frame included (a slot
  an action does not write keeps its value);
* claims as *safety predicates* (:meth:`TransitionSystem.safe`): an invariant's own predicate,
  or, for an invariant checked at quiescence, "some action is enabled, or the claim holds".

Instances whose guard folds to false (a flag switched off, a chunk a request does not send) are
left out; their ids are never taken, as in the compiled engine.
"""

from __future__ import annotations

import time

from functools import cached_property
from typing import Any, Sequence

import z3

from kvproof.model.framework import Spec
from kvproof.checker.symbolic.onehot import OneHotOps, Values, conj, disj

__all__ = ["TransitionSystem", "SymbolicStep", "as_term", "rename"]


def _asts(xs: Sequence[Any]) -> Any:
    return (z3.Ast * len(xs))(*[x.as_ast() for x in xs])


def rename(term: Any, froms: Sequence[Any] | Any, tos: Sequence[Any]) -> Any:
    """``z3.substitute(term, *zip(froms, tos))``: each constant of ``froms`` replaced by the term
    of ``tos`` at its place (``froms`` may be an array from an earlier call's :func:`_asts`).

    Straight to Z3's C API: ``z3.substitute`` first checks every pair's two sorts in Python (two
    ``sort()`` objects and a comparison per pair), which took most of bounded model checking's
    time on a large spec; Z3 itself still refuses a pair of two sorts (an exception, as before)."""
    n = len(tos)
    if not isinstance(froms, z3.Ast * n):
        froms = _asts(froms)
    ctx = term.ctx
    return z3.z3._to_expr_ref(z3.Z3_substitute(ctx.ref(), term.as_ast(), n, froms, _asts(tos)), ctx)


def as_term(x: Any) -> Any:
    """A Z3 Boolean for a folded condition (Python ``bool`` or Z3 term)."""
    return z3.BoolVal(x) if isinstance(x, bool) else x


class SymbolicStep:
    """One action instance over the template pre-state: ``aid``, ``guard``, ``next`` (a value
    set per slot) and ``writes`` (the slots it may change)."""

    __slots__ = ("aid", "guard", "next", "writes")

    def __init__(self, aid: int, guard: Any, nxt: list[Values], writes: list[int]):
        self.aid, self.guard, self.next, self.writes = aid, guard, nxt, writes


class TransitionSystem:
    """The spec as Init, Next and safety predicates over one-hot Boolean state variables.

    Terms are built once over a template pre-state (``@pre``) and substituted into each step's
    variables.
    """

    def __init__(self, spec: Spec, deadline: float | None = None):
        """Encode ``spec``; past ``deadline`` (a ``time.perf_counter()`` reading: the encoding
        of a large spec takes seconds) it stops with :class:`TimeoutError`."""
        self.spec = spec
        self.layout = spec.layout
        self.size = spec.layout.size
        self.n_instances = len(spec.instances)
        sentinels = dict(spec.layout.sentinel_slots())
        self._sentinels = sentinels
        self._slots: list[tuple[str, int, int]] = []  # (name, flat index, domain size) per slot
        for f in self.layout.fields:
            for k in range(f.width):
                self._slots.append((f.name, k, f.values.size))
        self._states: dict[str, list[Values]] = {}
        self.pre = self.state("pre")
        self._pre_bits = self.bits(self.pre)
        self._pre_from = _asts(self._pre_bits)
        steps = []
        for inst in spec.instances:
            if deadline is not None and time.perf_counter() > deadline:
                raise TimeoutError("the time limit was reached while the spec was encoded for Z3")
            ops = OneHotOps(self.pre)
            if spec.run_action(inst, ops) is False:  # ruled out by the configuration
                continue
            guard = conj(ops.guard)
            if guard is False:
                continue
            writes = [slot for slot, v in enumerate(ops.next) if v is not self.pre[slot]]
            steps.append(SymbolicStep(inst.aid, guard, ops.next, writes))
        self.steps = steps

    # -- variables ---------------------------------------------------------------------------
    def state(self, t: int | str) -> list[Values]:
        """The state of step ``t``: per slot, ``{value: bit}`` (sentinels: ``{init: True}``)."""
        key = str(t)
        if key not in self._states:
            out: list[Values] = []
            for slot, (name, k, size) in enumerate(self._slots):
                if slot in self._sentinels:
                    out.append({self._sentinels[slot]: True})
                else:
                    out.append({v: z3.Bool(f"{name}[{k}]={v}@{key}") for v in range(size)})
            self._states[key] = out
        return self._states[key]

    @staticmethod
    def bits(xs: Sequence[Values]) -> list[Any]:
        """Every Boolean variable of a state, in slot and value order."""
        return [b for vals in xs for b in vals.values() if not isinstance(b, bool)]

    @staticmethod
    def tag(t: int | str) -> Any:
        """The action tag of the step from ``t`` to ``t + 1``."""
        return z3.Int(f"action@{t}")

    def sub(self, term: Any, xs: Sequence[Values]) -> Any:
        """``term`` over the template pre-state, moved onto the state ``xs``."""
        if isinstance(term, bool):
            return z3.BoolVal(term)
        return rename(term, self._pre_from, self.bits(xs))

    def sub_post(self, term: Any) -> Any:
        """``term`` over the template pre-state, moved onto ``@post``."""
        return rename(term, self._pre_from, self.bits(self.state("post")))

    # -- the system ----------------------------------------------------------------------------
    def typed(self, xs: Sequence[Values]) -> Any:
        """The type invariant over ``xs``: every slot holds exactly one value of its domain."""
        parts = []
        for vals in xs:
            bits = [b for b in vals.values() if not isinstance(b, bool)]
            if not bits:
                continue
            parts.append(z3.Or(*bits))
            for i in range(len(bits)):
                for j in range(i + 1, len(bits)):
                    parts.append(z3.Not(z3.And(bits[i], bits[j])))
        return z3.And(*parts)

    def init(self, xs: Sequence[Values]) -> Any:
        """``xs`` is the initial state."""
        parts = []
        for vals, v0 in zip(xs, self.spec.init_state()):
            for v, b in vals.items():
                if not isinstance(b, bool):
                    parts.append(b if v == v0 else z3.Not(b))
        return z3.And(*parts)

    def tag_range(self, tag: Any) -> Any:
        """``tag`` names an action instance."""
        return z3.And(tag >= 0, tag < self.n_instances)

    @cached_property
    def _step_from(self) -> Any:
        """What :meth:`step` renames: the template pre-state's bits, ``@post``'s, ``action@pre``."""
        return _asts(self._pre_bits + self.bits(self.state("post")) + [self.tag("pre")])

    @cached_property
    def _relation(self) -> Any:
        """The transition relation from the template pre-state to ``@post`` by ``action@pre``."""
        xs, ys, tag = self.pre, self.state("post"), self.tag("pre")
        parts = [self.tag_range(tag),
                 as_term(disj([conj([tag == st.aid, st.guard]) for st in self.steps]))]
        writers: dict[int, list[SymbolicStep]] = {}
        for st in self.steps:
            for slot in st.writes:
                writers.setdefault(slot, []).append(st)
        for slot, (x, y) in enumerate(zip(xs, ys)):
            for v, yb in y.items():
                if isinstance(yb, bool):
                    continue
                value = as_term(x[v])
                for st in writers.get(slot, ()):
                    value = z3.If(tag == st.aid, as_term(st.next[slot].get(v, False)), value)
                parts.append(yb == value)
        return z3.And(*parts)

    def step(self, xs: Sequence[Values], ys: Sequence[Values], tag: Any) -> Any:
        """The transition relation from ``xs`` to ``ys`` by the action instance ``tag``.

        Encoded per slot: the tag is an instance whose guard holds, and each bit of the next
        state is a choice over the instances that write its slot (any other instance leaves
        it as it was).  This is the disjunction of ``tag = aid & guard & next == terms`` over
        the instances, in a shape solvers propagate through well."""
        return rename(self._relation, self._step_from, self.bits(xs) + self.bits(ys) + [tag])

    def successor(self, aid: int, xs: Sequence[Values]) -> tuple[Any, list[Values]]:
        """(guard, next-state value sets) of action instance ``aid`` over ``xs``."""
        for st in self.steps:
            if st.aid == aid:
                nxt = [{v: self.sub(c, xs) for v, c in vals.items()} for vals in st.next]
                return self.sub(st.guard, xs), nxt
        return z3.BoolVal(False), list(xs)

    def enabled(self, xs: Sequence[Values]) -> Any:
        """Some action instance is enabled in ``xs``."""
        return as_term(disj([self.sub(st.guard, xs) for st in self.steps]))

    def _claim(self, name: str, xs: Sequence[Values]) -> Any:
        return self.sub(self._claims[name], xs)

    @cached_property
    def _claims(self) -> dict[str, Any]:
        return {c.name: self.spec.eval_claim(c.name, OneHotOps(self.pre))
                for c in self.spec.claims if c.kind in ("invariant", "witness")}

    def safe(self, name: str, xs: Sequence[Values]) -> Any:
        """The safety predicate of invariant ``name`` over ``xs`` (quiescent claims: an action
        is enabled, or the claim holds)."""
        claim = self.spec.claim(name)
        if claim.kind != "invariant":
            raise ValueError(f"{name} is a witness, not an invariant")
        term = self._claim(name, xs)
        if claim.at == "quiescent":
            return z3.Or(self.enabled(xs), term)
        return term

    def never_hits(self, name: str, xs: Sequence[Values]) -> Any:
        """The predicate that holds in every reachable state exactly when claim ``name`` never
        hits: an invariant's safety predicate (:meth:`safe`), or "not reached" for a witness."""
        if self.spec.claim(name).kind == "witness":
            return z3.Not(self.holds(name, xs))
        return self.safe(name, xs)

    def holds(self, name: str, xs: Sequence[Values]) -> Any:
        """A witness's predicate over ``xs`` (the state it asks to reach)."""
        return self._claim(name, xs)

    def invariants(self) -> list[str]:
        """Names of the spec's invariants, in declaration order."""
        return [c.name for c in self.spec.claims if c.kind == "invariant"]

    def equal(self, xs: Sequence[Values], ys: Sequence[Values]) -> Any:
        """``xs`` and ``ys`` are the same state."""
        return z3.And(*[as_term(x[v]) == as_term(y.get(v, False))
                        for x, y in zip(xs, ys) for v in x if not isinstance(x[v], bool)])

    # -- models back to concrete values ----------------------------------------------------------
    def decode_state(self, model: z3.ModelRef, xs: Sequence[Values]) -> bytes:
        """The concrete state ``xs`` takes in ``model``."""
        out = []
        for vals in xs:
            chosen = [v for v, b in vals.items()
                      if b is True or (not isinstance(b, bool) and z3.is_true(model.eval(b, model_completion=True)))]
            out.append(chosen[0] if len(chosen) == 1 else 255)
        return bytes(out)

    def decode_path(self, model: z3.ModelRef, length: int) -> tuple[list[int], list[bytes]]:
        """(action ids, states) of the path of ``length`` steps in ``model``."""
        actions = [model.eval(self.tag(t), model_completion=True).as_long() for t in range(length)]
        states = [self.decode_state(model, self.state(t)) for t in range(length + 1)]
        return actions, states
