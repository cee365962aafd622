"""The link between a spec instance and a parametric model, proved at that instance's size.

``prove --all-sizes`` proves claims of a *parametric model* (:mod:`.quantified`: uninterpreted
sorts, any number of elements).  That the model over-approximates the spec is what makes those
claims the spec's.  This module proves it, at one fixed size, from the spec's own Z3 encoding
(the one-hot transition system of :mod:`~kvproof.checker.symbolic.transition`, which the bounded model checker and
``prove`` use) and the model's own formulas, with no sampling and no enumeration.

The protocol supplies a :class:`LinkMap`: a bounded universe of the model's sorts (one element
per request, page, prefill page, chunk index and tenant of the instance, plus the model's
sentinels), and for every spec slot the model term it stands for and the model value of each of
its values (:attr:`LinkMap.observe`; ``None``: the slot is not observed, e.g. a chunk the
request does not have).  That defines the abstraction relation ``R(x, X)`` between a typed spec
state ``x`` (its one-hot bits) and a model state ``X`` (Z3 functions over the sorts): every
observed slot's bit for value ``v`` is true exactly when ``X``'s term equals the value of ``v``.
Model positions no slot observes (``X`` at the sentinel request, at chunks a request lacks) are
left free: every obligation holds for *every* such ``X``.

The three obligations, each the unsatisfiability of its negation over fresh symbolic states
(never samples):

(a) **Init**: every model state that satisfies the model's ``Init`` (with the rigid symbols fixed
    as the instance has them) is related to the spec's initial state, and one exists;
(b) **Step**: for every spec action instance, every typed state ``x`` in which its guard holds,
    its successor ``y`` if ``y`` is typed (a write outside a field's codes is no step of the
    spec: the Z3 engines' runs are typed at every step, and the explicit engine stops there with
    an error, a spec bug; an unreachable typed ``x`` may still step there, e.g. a counter one past
    its last code), and every ``X`` related to ``x`` (and satisfying the hypothesis, if the
    protocol names one: :attr:`LinkMap.hypothesis`), some model action the protocol lists for
    that instance (:attr:`LinkMap.options`) is enabled in ``X`` with the instance's parameters and
    the protocol's witnesses for its choice functions (:attr:`LinkMap.witness`), and its
    successor is related to ``y``.  The frame is included: every observed slot of ``y`` is
    compared;
(c) **Claims**: for every typed ``x`` and related ``X``, each model claim holds in ``X`` exactly when
    the spec's claim of the same name holds in ``x``.

With (a) and (b), every reachable spec state is related to a reachable model state (induction
on the run; the hypothesis must hold in every reachable model state, which its proof — e.g. the
all-sizes certificate's invariant — establishes), so by (c) a claim that holds in every
reachable model state holds in every reachable spec state: the parametric proof applies to
this instance without enumerating it.

This module knows no protocol.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import z3

from kvproof.checker.symbolic.onehot import Values
from kvproof.checker.allsizes.quantified import Action, ParametricSystem, QState, _closed
from kvproof.checker.symbolic.transition import TransitionSystem, as_term
from kvproof.model.parametric import ground  # re-exported: it lives beside the systems it grounds

__all__ = ["LinkMap", "Observation", "LinkResult", "LinkReport", "check_link", "related", "view", "ground",
           "certified_conjuncts"]


@dataclass(frozen=True)
class Observation:
    """What one spec slot stands for in the model: the symbol ``symbol`` at the universe
    elements ``args``, and per spec value the model value (``None``: a value the model has no
    counterpart for, so a related state never shows it)."""

    symbol: str
    args: tuple[Any, ...]
    values: tuple[Any, ...]


@dataclass
class LinkMap:
    """What a protocol hands :func:`check_link` for one spec instance (see the module docstring)."""

    system: ParametricSystem
    sizes: dict[str, int]
    """Each uninterpreted sort's number of elements (the model's sentinels included)."""
    universe: dict[str, list[Any]]
    """Sort name to its elements (:meth:`~.quantified.ParametricSystem.bounded`)."""
    axioms: Any
    """The elements are pairwise distinct."""
    observe: Callable[[int], Observation | None]
    """Per spec slot: its :class:`Observation`, or ``None`` when no model position stands for it."""
    rigid: Callable[[QState], list[Any]]
    """Constraints fixing the model's rigid symbols as the instance has them."""
    options: Callable[[Any], list[tuple[Action, dict[str, Any]]]]
    """The model actions (with parameters as elements) a spec action instance may be a step of."""
    witness: Callable[[Action, QState, dict[str, Any], QState], dict[str, Any]]
    """The value of each choice function of a model action, from the pre-state, the parameters
    and the view of the spec's successor (:func:`view`): the existential of the step made
    explicit, so every obligation is quantifier-free."""
    claims: tuple[str, ...]
    """The claim names the model and the spec share (compared by obligation (c))."""
    hypothesis: Callable[[QState], list[tuple[str, Any]]] | None = None
    """Optional named facts (ground, at the universe) that (b) may assume of the related model
    state: each must hold in every reachable model state (e.g. the conjuncts of a certified
    inductive invariant, :func:`certified_conjuncts`).  Each is assumed behind a literal, and
    the report names those the solver's unsat cores used."""
    hypothesis_name: str = ""
    """What the hypotheses are, for the report (e.g. the certificate they come from)."""


@dataclass
class LinkResult:
    """One obligation: ``kind`` (``init``, ``step`` or ``claim``), its ``name`` (a spec action or
    a claim), how many instances were checked, ``verdict`` (``proved``, ``refuted`` or
    ``unknown``), the first offending instance's label and a few lines of its counterexample."""

    kind: str
    name: str
    instances: int = 0
    verdict: str = "proved"
    offending: str = ""
    detail: list[str] = field(default_factory=list)
    seconds: float = 0.0
    used: set[str] = field(default_factory=set)
    """The hypotheses the unsat cores of this obligation's queries named."""
    needed: int = 0
    """How many of its instances needed the hypotheses (the others are proved without)."""


@dataclass
class LinkReport:
    """Every obligation's result, and the seconds to build and to solve."""

    results: list[LinkResult]
    seconds: dict[str, float]
    hypotheses: int = 0
    """How many hypotheses were offered (:attr:`LinkMap.hypothesis`)."""

    @property
    def used(self) -> set[str]:
        """The hypotheses some proved obligation used."""
        return set().union(*[r.used for r in self.results]) if self.results else set()

    @property
    def proved(self) -> bool:
        """Every obligation is proved."""
        return bool(self.results) and all(r.verdict == "proved" for r in self.results)

    @property
    def refuted(self) -> list[LinkResult]:
        """The obligations a model of the negation broke."""
        return [r for r in self.results if r.verdict == "refuted"]


def _bit(b: Any) -> Any:
    """A one-hot condition (a Python ``bool`` or a Z3 term) as a Z3 term."""
    return as_term(b)


def related(link: LinkMap, xs: Sequence[Values], st: QState) -> list[Any]:
    """``R(xs, st)``: per observed slot and value, the one-hot condition of the value holds
    exactly when ``st``'s term equals the value's model counterpart (a value without one: its
    condition is false), and the term is one of the listed values' counterparts (a successor's
    value set lists only the values it may take)."""
    out = []
    for slot, vals in enumerate(xs):
        ob = link.observe(slot)
        if ob is None:
            continue
        term = getattr(st, ob.symbol)(*ob.args)
        listed = []
        for v, cond in vals.items():
            want = ob.values[v] if 0 <= v < len(ob.values) else None
            c = _bit(cond)
            out.append(z3.Not(c) if want is None else c == (term == want))
            if want is not None:
                listed.append(term == want)
        # the term takes one of the listed values: a value set missing the true one is no relation
        out.append(z3.Or(listed) if listed else z3.BoolVal(False))
    return out


def view(link: LinkMap, xs: Sequence[Values], default: dict[str, Any]) -> QState:
    """The model state ``R`` assigns to ``xs`` at the observed positions, as terms over ``xs``'s
    bits (elsewhere ``default[sort]``): what witnesses read the spec's successor through."""
    table: dict[str, list[tuple[tuple, Any]]] = {}
    for slot, vals in enumerate(xs):
        ob = link.observe(slot)
        if ob is None:
            continue
        sym = next(s for s in link.system.symbols if s.name == ob.symbol)
        value = default[sym.result]
        for v, cond in vals.items():
            want = ob.values[v] if 0 <= v < len(ob.values) else None
            if want is not None:
                value = z3.If(_bit(cond), want, value)
        table.setdefault(ob.symbol, []).append((ob.args, value))
    funcs: dict[str, Callable[..., Any]] = {}
    base = link.system.state()
    elements = {e.get_id() for es in link.universe.values() for e in es}
    for sym in link.system.symbols:
        rows = table.get(sym.name, [])
        by_ids = {tuple(k.get_id() for k in key): value for key, value in rows}

        def f(*args, rows=rows, sym=sym, by_ids=by_ids):
            ids = tuple(a.get_id() for a in args)
            if all(i in elements for i in ids):  # at elements (distinct): the row itself
                return by_ids.get(ids, default[sym.result])
            out = default[sym.result]
            for key, value in rows:
                out = z3.If(z3.And([a == k for a, k in zip(args, key)]), value, out) if key else value
            return out
        funcs[sym.name] = f
    return base.with_updates(funcs)


def _defaults(system: ParametricSystem, universe: dict[str, list[Any]]) -> dict[str, Any]:
    """A value of each sort (the first element, the first enumeration constant, false): what
    :func:`view` shows at positions no slot observes."""
    out = {"Bool": z3.BoolVal(False)}
    for name, sort in system.sorts.items():
        out[name] = universe[name][0] if name in universe else sort.constructor(0)()
    return out


def check_link(spec: Any, link: LinkMap, claims: bool = True, steps: bool = True,
               seconds: float = 600.0, only: Sequence[str] | None = None,
               progress: Callable[[str], None] | None = None) -> LinkReport:
    """Prove the obligations (a), (b) and (c) of the module docstring for ``spec`` (one instance
    of a protocol) and ``link``; ``only`` restricts (b) to the named spec actions.  A sat answer
    is a refutation, reported with the first offending instance; *unknown* (the time limit
    ``seconds`` per query) proves nothing."""
    say = progress or (lambda text: None)
    t0 = time.perf_counter()
    ts = TransitionSystem(spec)
    system = link.system
    system.universe = link.universe
    timings: dict[str, float] = {"encode": time.perf_counter() - t0}
    results: list[LinkResult] = []
    try:
        X = system.state()
        xs = ts.pre
        base = [link.axioms, *link.rigid(X), *_closed(system, X, link.universe, []), system.background(X)]
        defaults = _defaults(system, link.universe)

        def solver() -> Any:
            s = z3.Solver()
            s.set("timeout", max(1, int(seconds * 1000)))
            s.set("core.minimize", True)
            return s

        def settle(res: LinkResult, s: Any, label: str, explain: Callable[[Any], list[str]],
                   assumptions: Sequence[Any] = ()) -> bool:
            r = s.check(*assumptions)
            if r == z3.unsat:
                return True
            if r == z3.sat:
                res.verdict, res.offending = "refuted", label
                res.detail = explain(s.model())
            else:
                res.verdict, res.offending = "unknown", f"{label}: {s.reason_unknown()}"
            return False

        hyps = link.hypothesis(X) if link.hypothesis is not None else []
        lits = {z3.Bool(f"hypothesis!{i}"): name for i, (name, _) in enumerate(hyps)}
        guarded = [z3.Implies(lit, h) for lit, (_, h) in zip(lits, hyps)]
        timings["hypotheses"] = time.perf_counter() - t0 - timings["encode"]
        # the hypotheses are satisfiable (else every step obligation would hold vacuously)
        s = solver()
        s.add(*base, ts.typed(xs), *related(link, xs, X), *guarded)
        answer = s.check(*lits)
        if answer == z3.unknown:  # a resource or time limit: not a refutation
            results.append(LinkResult("init", "hypotheses", 0, "unknown", f"hypotheses: {s.reason_unknown()}"))
            return LinkReport(results, timings, len(hyps))
        if answer != z3.sat:
            results.append(LinkResult("init", "hypotheses", 0, "refuted",
                                      "no typed spec state is related to a model state: every obligation would be vacuous"))
            return LinkReport(results, timings, len(hyps))

        # (a) Init
        t = time.perf_counter()
        res = LinkResult("init", "Init", 1)
        s = solver()
        s.add(*base, ts.init(xs), system.init(X))
        r = s.check()
        if r != z3.sat:
            res.verdict = "refuted" if r == z3.unsat else "unknown"
            res.offending = "no model state satisfies Init with the instance's rigid symbols"
        else:
            s.add(z3.Not(z3.And(related(link, xs, X))))
            settle(res, s, "a model Init state is not the spec's initial state",
                   lambda m: _differences(link, ts, m, xs, X))
        res.seconds = time.perf_counter() - t
        results.append(res)
        say(f"link: Init {res.verdict}")

        # (b) steps, grouped by spec action
        if steps:
            t = time.perf_counter()
            s = solver()
            s.add(*base, ts.typed(xs), *related(link, xs, X), *guarded)
            by_name: dict[str, LinkResult] = {}
            for st in ts.steps:
                inst = spec.instances[st.aid]
                if only is not None and inst.name not in only:
                    continue
                res = by_name.get(inst.name)
                if res is None:
                    res = by_name[inst.name] = LinkResult("step", inst.name)
                    results.append(res)
                res.instances += 1
                if res.verdict != "proved":
                    continue
                q = time.perf_counter()
                # the successor as the transition relation has it: a sentinel slot keeps its value
                nxt = [xs[i] if i in ts._sentinels else v for i, v in enumerate(st.next)]
                post_view = view(link, nxt, defaults)
                moves, posts = [], []
                for action, params in link.options(inst):
                    for choices in _choices(action, link.witness(action, X, params, post_view)):
                        step = action.step(X, params, choices)
                        post = X.with_updates(step.updates)
                        posts.append((action.name, step.guard, post))
                        moves.append(z3.And(step.guard, *related(link, nxt, post)))
                s.push()
                s.add(as_term(st.guard), *_in_codes(ts, nxt), z3.Not(z3.Or(moves)) if moves else z3.BoolVal(True))
                label = _label(spec, inst)
                # first with no hypothesis; only where that fails, with them (and their core named)
                bare = s.check() if lits else None
                if bare == z3.unsat:
                    pass
                elif settle(res, s, label, lambda m: _step_detail(link, ts, m, xs, X, nxt, posts), list(lits)) and lits:
                    res.used |= {lits[c] for c in s.unsat_core() if c in lits}
                    res.needed += 1  # with no hypothesis offered, the one check above needed none
                s.pop()
                res.seconds += time.perf_counter() - q
            timings["steps"] = time.perf_counter() - t
            say(f"link: {len(by_name)} spec actions, {sum(r.instances for r in by_name.values())} instances")

        # (c) claims
        if claims:
            t = time.perf_counter()
            s = solver()
            s.add(*base, ts.typed(xs), *related(link, xs, X))
            cands = {c.name: c for c in system.claims()}
            for name in link.claims:
                q = time.perf_counter()
                res = LinkResult("claim", name, 1)
                s.push()
                s.add(system.formula(cands[name], X, link.universe) != ts.safe(name, xs))
                settle(res, s, f"a state where the model's {name} and the spec's disagree",
                       lambda m: _differences(link, ts, m, xs, X))
                s.pop()
                res.seconds = time.perf_counter() - q
                results.append(res)
            timings["claims"] = time.perf_counter() - t
    finally:
        system.universe = None
    timings["total"] = time.perf_counter() - t0
    return LinkReport(results, timings, len(hyps))


def _in_codes(ts: TransitionSystem, xs: Sequence[Values]) -> list[Any]:
    """``xs`` (a successor's value sets) is typed: no slot takes a value outside its field's codes
    (a spec's ``add`` past a field's last code has a key with no bit; in a typed pre-state the
    conditions of a value set are exclusive and exhaustive, so these are the whole of it)."""
    out = []
    for (_, _, size), vals in zip(ts._slots, xs):
        out.extend(z3.Not(_bit(c)) for v, c in vals.items() if not 0 <= v < size and c is not False)
    return out


def _choices(action: Action, given: dict[str, Any]) -> list[dict[str, Any]]:
    """The choice functions of ``action``: those ``given`` (a callable, or a term for a nullary
    one), and every combination of values of the nullary Boolean ones not given (a finite
    existential, expanded)."""
    fixed = {k: (v if callable(v) else (lambda v=v: v)) for k, v in given.items()}
    free = [c.name for c in action.choices if c.name not in given]
    for c in action.choices:
        if c.name not in given and (c.args or c.result != "Bool"):
            raise ValueError(f"{action.name}: no witness for its choice function {c.name}")
    out = []
    for values in itertools.product((False, True), repeat=len(free)):
        out.append({**fixed, **{n: (lambda b=b: z3.BoolVal(b)) for n, b in zip(free, values)}})
    return out


def _label(spec: Any, inst: Any) -> str:
    """``name(param=label, ...)`` of a spec action instance, every parameter shown."""
    args = ", ".join(f"{p}={spec.domain(p).label(v)}" for p, v in zip(inst.action.params, inst.args))
    return f"{inst.name}({args})"


def _slot_name(ts: TransitionSystem, slot: int) -> str:
    """``field[flat index]`` of a slot."""
    name, k, _ = ts._slots[slot]
    return f"{name}[{k}]"


def _differences(link: LinkMap, ts: TransitionSystem, m: Any, xs: Sequence[Values], X: QState) -> list[str]:
    """The spec state of the model ``m`` (its slots off their initial value) and, per observed
    slot, where the model state differs from it (a dozen lines at most)."""
    out = []
    state = ts.decode_state(m, xs)
    init = ts.spec.init_state()
    shown = [f"{_slot_name(ts, i)}={v}" for i, v in enumerate(state) if v != init[i]]
    out.append("spec state (slots off their initial value): " + (", ".join(shown) or "the initial state"))
    for slot, v, ob, got in _unrelated(link, m, X, state):
        out.append(f"  {_slot_name(ts, slot)} = {v} but the model's {ob.symbol}{tuple(str(a) for a in ob.args)} = {got}")
    return out[:12]


def _unrelated(link: LinkMap, m: Any, X: QState, state: Sequence[int]) -> list[tuple[int, int, Any, Any]]:
    """The observed slots where the model state ``X`` is not related to the spec's decoded
    ``state`` in ``m``: ``(slot, the spec's value, the slot's observation, the model's value)``."""
    out = []
    for slot, v in enumerate(state):
        ob = link.observe(slot)
        if ob is None:
            continue
        got = m.eval(getattr(X, ob.symbol)(*ob.args), model_completion=True)
        want = ob.values[v] if 0 <= v < len(ob.values) else None
        if want is None or not z3.is_true(m.eval(got == want, model_completion=True)):
            out.append((slot, v, ob, got))
    return out


def _step_detail(link: LinkMap, ts: TransitionSystem, m: Any, xs: Sequence[Values], X: QState,
                 nxt: Sequence[Values], posts: Sequence[tuple[str, Any, QState]]) -> list[str]:
    """The offending spec state, what the spec step changes, and per model action tried:
    disabled, or the observed slots where its successor differs from the spec's."""
    out = _differences(link, ts, m, xs, X)
    pre = ts.decode_state(m, xs)
    post = ts.decode_state(m, nxt)
    changes = [f"{_slot_name(ts, i)} {a} -> {b}" for i, (a, b) in enumerate(zip(pre, post)) if a != b]
    out.append("the spec step changes: " + (", ".join(changes) or "nothing"))
    if not posts:
        out.append("no model action stands for it")
    for name, guard, Y in posts[:4]:
        if not z3.is_true(m.eval(guard, model_completion=True)):
            out.append(f"model {name}: disabled (its guard is false here)")
            continue
        diff = [f"{_slot_name(ts, slot)}: spec {v}, model {ob.symbol} = {got}"
                for slot, v, ob, got in _unrelated(link, m, Y, post)]
        out.append(f"model {name}: enabled, its successor differs at " + ("; ".join(diff[:4]) or "?"))
    return out


def certified_conjuncts(system: ParametricSystem, inv: str) -> list[tuple[str, Any]]:
    """The conjuncts of an all-sizes certificate's invariant (its one-line SMT-LIB text over the
    pre-state, :attr:`~.certs.reader.Certificate.invariant_text`), parsed over ``system``'s own sorts and
    pre-state symbols, each named by its one-line text.  ``ValueError`` when it does not parse."""
    decls: dict[str, Any] = {}
    for sym in (*system.symbols, *system.rigid):
        f = system.function(sym)
        decls[sym.name] = f if sym.args else f.decl()
    for name, sort in system.constants:
        decls[name] = z3.Const(name, system.sort(sort)).decl()
    try:
        parsed = z3.parse_smt2_string(f"(assert {inv})", sorts=dict(system.sorts), decls=decls)
    except z3.Z3Exception as e:
        raise ValueError(f"the certificate's invariant does not parse: {e}") from None
    term = parsed[0]
    parts = term.children() if z3.is_and(term) else [term]
    return [(" ".join(p.sexpr().split()), p) for p in parts]
