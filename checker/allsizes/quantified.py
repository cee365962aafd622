"""Quantified inductive invariants over uninterpreted sorts: proofs for every size.

A protocol hands this module a :class:`ParametricSystem`: sorts (uninterpreted, so a model may
have any number of elements of each), state symbols (Z3 functions over the sorts), rigid symbols
(fixed for a run: a request's tenant, which chunks a request has), ``Init``, actions (a guard over
the pre-state and, per changed symbol, its new value as a function of its arguments, with
existentially chosen action parameters and *choice functions* such as "which free pages"), and
claims.  A *candidate* is a universally quantified formula ``∀ vars. body``.

:func:`houdini` keeps the greatest subset of candidates that is inductive for the system (every
survivor holds in ``Init`` and is preserved by every action from any state satisfying all the
survivors): one incremental solver per action, pre-state candidates behind assumption literals,
and the negation of each post-state candidate Skolemized (fresh constants for its variables), so
that a model names exactly which candidates the step breaks; those are dropped and the loop runs
until every action answers **unsat**.  A solver that answers *unknown* stops the loop: nothing is
proved then.  Claims are candidates too: a claim that survives is proved for every size of every
sort, since the survivors' conjunction is an inductive invariant implying it.

:func:`certificate_text` writes the invariant and the obligations (Init ⇒ Inv, one
Inv ∧ guard ∧ update ⇒ Inv′ per action, Inv ⇒ claim per claim) as a standalone SMT-LIB script
that stock z3 and cvc5 each answer with one ``unsat`` per obligation (``kvproof certify``, through
the one certificate reader and :mod:`~.certs.solvers`).

:func:`minimise` shrinks an inductive invariant to its claims and the conjuncts their unsat
cores need (checked from scratch before it is trusted): a smaller certificate the solvers check
in seconds.  :func:`candidates_from` reads a certificate's invariant back as candidates.

This module knows no protocol.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import z3

# the system's data types live in the model layer (the lift derives systems there); re-exported
from kvproof.model.parametric import Action, Candidate, ParametricSystem, QState, Step, Symbol

__all__ = ["Symbol", "QState", "Step", "Action", "Candidate", "ParametricSystem", "HoudiniResult",
           "houdini", "certificate_text", "certificate_from", "render_model",
           "candidates_from", "minimise", "MinimiseResult", "inductive_problems", "drop_redundant", "preserved"]


@dataclass
class HoudiniResult:
    """What :func:`houdini` kept, what it dropped and why (the first counterexample to induction
    of each dropped claim), and its seconds."""

    kept: list[Candidate]
    dropped: dict[str, str] = field(default_factory=dict)
    counterexamples: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    seconds: float = 0.0
    status: str = "done"  # "done" or "unknown: <reason>"


def _solver(seconds: float) -> Any:
    s = z3.Solver()
    s.set("timeout", max(1, int(seconds * 1000)))
    return s


def updated(system: ParametricSystem, step: Step) -> Callable[[Any], Any]:
    """A term over the pre-state rewritten to the state after ``step``: each updated function
    replaced by its update (``substitute_funs``), each updated constant (a scalar field such as
    a heartbeat age: a symbol without arguments) by its new value (``substitute``)."""
    funs, consts = [], []
    for sym in system.symbols:
        if sym.name in step.updates:
            if sym.args:
                xs = [z3.Var(i, system.sort(t)) for i, t in enumerate(sym.args)]
                funs.append((system.function(sym), step.updates[sym.name](*xs)))
            else:
                consts.append((system.function(sym), step.updates[sym.name]()))

    def move(term: Any) -> Any:
        if funs:
            term = z3.substitute_funs(term, *funs)
        return z3.substitute(term, *consts) if consts else term

    return move


def houdini(system: ParametricSystem, candidates: Sequence[Candidate], max_seconds: float = 600.0,
            progress: Callable[[str], None] | None = None, sizes: dict[str, int] | None = None) -> HoudiniResult:
    """The greatest inductive subset of ``candidates`` (see the module docstring).  With
    ``sizes``, of the bounded instance of those sizes instead (:meth:`ParametricSystem.bounded`):
    a fast filter only, never a proof for every size."""
    say = progress or (lambda text: None)
    pre = system.state()
    universe, axioms = system.bounded(sizes) if sizes else (None, z3.BoolVal(True))
    system.universe = universe
    try:
        return _houdini(system, candidates, max_seconds, say, universe, axioms, pre)
    finally:
        system.universe = None


def _houdini(system, candidates, max_seconds, say, universe, axioms, pre) -> HoudiniResult:
    t0 = time.perf_counter()
    deadline = t0 + max_seconds
    res = HoudiniResult(kept=[])
    alive = {c.name: c for c in candidates}
    bg = z3.And(system.background(pre), axioms, *_closed(system, pre, universe, []))
    claims = {c.name for c in candidates if c.claim}
    post_of: dict[str, QState] = {}

    def record(name: str, why: str, model: Any, where: str) -> None:
        alive.pop(name, None)
        res.dropped[name] = why
        if model is not None and name in claims:
            res.counterexamples.setdefault(name, f"{where}\n{render_model(system, model, pre, post_of.get(where))}")

    # each candidate's body built once over the pre-state: the formula (assumed in the pre-state)
    # and its Skolemized instance (negated in the post-state, after substituting the updates)
    pre_formula = {c.name: system.formula(c, pre, universe) for c in candidates}
    instance = {c.name: pre_formula[c.name] if universe is not None else system.instantiate(c, pre, f"k{i}!")[0]
                for i, c in enumerate(candidates)}

    def after(step: Step) -> Callable[[Any], Any]:
        return updated(system, step)

    # Init: drop what Init breaks
    s = _solver(max(deadline - time.perf_counter(), 1))
    s.add(bg, system.init(pre))
    goals = {}
    for c in candidates:
        goals[c.name] = instance[c.name]
    while alive:
        lit = z3.FreshBool("round")
        s.add(z3.Implies(lit, z3.Or([z3.Not(goals[n]) for n in alive])))
        r = s.check(lit)
        if r == z3.unsat:
            break
        if r != z3.sat:
            res.status = f"unknown: {s.reason_unknown()} (Init)"
            res.seconds = time.perf_counter() - t0
            return res
        m = s.model()
        broken = [n for n in alive if z3.is_false(m.eval(goals[n], model_completion=True))]
        if not broken:
            res.status = "unknown: Init model breaks no candidate"
            res.seconds = time.perf_counter() - t0
            return res
        for n in broken:
            record(n, "Init breaks it", m, "Init")
    say(f"Init keeps {len(alive)} of {len(candidates)}")

    # one solver per action
    solvers = []
    assume = {c.name: z3.Bool(f"assume!{i}") for i, c in enumerate(candidates)}
    for a in system.actions:
        s = _solver(max(deadline - time.perf_counter(), 1))
        params = {p: z3.Const(f"{a.name}!{p}", system.sort(sort)) for p, sort in a.params}
        choices = {c.name: system.function(c, f"!{a.name}") for c in a.choices}
        choices = {k: (lambda f=f: f) if not isinstance(f, z3.FuncDeclRef) else f for k, f in choices.items()}
        step = a.step(pre, params, choices)
        post = pre.with_updates(step.updates)
        post_of[a.name] = post
        s.add(bg, step.guard, *_closed(system, None, universe, [*params.values(), *[
            (sym, choices[sym.name]) for sym in a.choices]]))
        for c in candidates:
            if c.name in alive:
                s.add(z3.Implies(assume[c.name], pre_formula[c.name]))
        move = after(step)
        goal = {c.name: move(instance[c.name]) for c in candidates if c.name in alive}
        solvers.append((a, s, goal))
    changed = True
    while changed:
        changed = False
        res.rounds += 1
        for a, s, goal in solvers:
            if system.one_goal_at_a_time and universe is None:
                status = _one_by_one(system, a, s, goal, alive, assume, deadline, record)
                if status is None:
                    continue
                if status:
                    res.status = status
                    res.seconds = time.perf_counter() - t0
                    return res
                say(f"round {res.rounds}: {a.name} breaks some, {len(alive)} left")
                changed = True
                continue
            while alive:
                if time.perf_counter() > deadline:
                    res.status = f"unknown: time limit of {max_seconds:.0f} s"
                    res.seconds = time.perf_counter() - t0
                    return res
                lit = z3.FreshBool("round")
                s.add(z3.Implies(lit, z3.Or([z3.Not(goal[n]) for n in alive])))
                s.set("timeout", max(1, int((deadline - time.perf_counter()) * 1000)))
                r = s.check(lit, *[assume[n] for n in alive])
                if r == z3.unsat:
                    break
                if r != z3.sat:
                    res.status = f"unknown: {s.reason_unknown()} ({a.name})"
                    res.seconds = time.perf_counter() - t0
                    return res
                m = s.model()
                broken = [n for n in alive if z3.is_false(m.eval(goal[n], model_completion=True))]
                if not broken:
                    res.status = f"unknown: {a.name}: a model breaking no candidate"
                    res.seconds = time.perf_counter() - t0
                    return res
                for n in broken:
                    record(n, f"not preserved by {a.name}", m, a.name)
                say(f"round {res.rounds}: {a.name} breaks {len(broken)}, {len(alive)} left")
                changed = True
        say(f"round {res.rounds}: {len(alive)} kept")
    res.kept = [c for c in candidates if c.name in alive]
    res.seconds = time.perf_counter() - t0
    return res


def _one_by_one(system: ParametricSystem, a: Action, s: Any, goal: dict[str, Any], alive: dict[str, Any],
                assume: dict[str, Any], deadline: float, record: Callable[..., None]) -> str | None:
    """One pass of :func:`houdini` over action ``a`` asking about one alive candidate at a time
    (:attr:`ParametricSystem.one_goal_at_a_time`): each query assumes the alive candidates in
    the pre-state and negates one in the post-state; a model drops every alive candidate it
    breaks.  Returns ``None`` when every query answered unsat (nothing dropped), ``""`` when
    something was dropped, or the reason the pass stopped (time, *unknown*)."""
    dropped = False
    for name in list(goal):
        if name not in alive:
            continue
        if time.perf_counter() > deadline:
            return "unknown: time limit"
        s.push()
        s.add(z3.Not(goal[name]))
        s.set("timeout", max(1, int((deadline - time.perf_counter()) * 1000)))
        r = s.check(*[assume[n] for n in alive])
        if r == z3.sat:
            m = s.model()
            broken = [n for n in alive if n in goal and z3.is_false(m.eval(goal[n], model_completion=True))]
            for n in broken or [name]:
                record(n, f"not preserved by {a.name}", m, a.name)
            dropped = True
        s.pop()
        if r not in (z3.sat, z3.unsat):
            return f"unknown: {s.reason_unknown()} ({a.name})"
    return "" if dropped else None


def _closed(system: ParametricSystem, st: QState | None, universe: dict[str, list[Any]] | None,
            extra: list[Any]) -> list[Any]:
    """In a bounded instance: every value of a state symbol of ``st`` at elements, every action
    parameter and every choice function's value (``extra``) is one of the elements."""
    import itertools
    if universe is None:
        return []
    out = []

    def member(term: Any, sort: str) -> None:
        if sort in universe:
            out.append(z3.Or([term == e for e in universe[sort]]))

    def values(sort: str) -> list[Any]:
        return system.elements(system.sort(sort), universe)

    if st is not None:
        for sym in system.symbols:
            f = getattr(st, sym.name)
            for args in itertools.product(*[values(s) for s in sym.args]):
                member(f(*args), sym.result)
    for x in extra:
        if isinstance(x, tuple):
            sym, f = x
            for args in itertools.product(*[values(s) for s in sym.args]):
                member(f(*args), sym.result)
        else:
            member(x, x.sort().name())
    return out


def render_model(system: ParametricSystem, model: Any, pre: QState, post: QState | None) -> str:
    """A model (a counterexample to induction) as a concrete state: each uninterpreted sort's
    elements, then every state symbol's value at every argument tuple, and what the step changes."""
    import itertools
    universes = {}
    for name in system.uninterpreted:
        u = model.get_universe(system.sorts[name])
        universes[name] = list(u) if u is not None else []
    lines = ["  " + "  ".join(f"{n}: {len(u)} element(s)" for n, u in universes.items())]

    def show(v: Any) -> str:
        return str(model.eval(v, model_completion=True))

    for sym in (*system.rigid, *system.symbols):
        f = getattr(pre, sym.name)
        cells = []
        for args in itertools.product(*[universes.get(a, []) for a in sym.args]):
            before = show(f(*args))
            cell = f"{','.join(str(x) for x in args) or '-'}={before}"
            if post is not None and sym in system.symbols:
                after = show(getattr(post, sym.name)(*args))
                if after != before:
                    cell += f" -> {after}"
            cells.append(cell)
        lines.append(f"    {sym.name:14s} " + "  ".join(cells))
    return "\n".join(lines)


# -- certificates ---------------------------------------------------------------------------------

def _decl(system: ParametricSystem, name: str, args: Sequence[str], result: str) -> str:
    sort = lambda s: system.sort(s).name()
    return f"(declare-fun {name} ({' '.join(sort(a) for a in args)}) {sort(result)})"


def _one_line(term: Any) -> str:
    """A term's SMT-LIB text on one line."""
    return " ".join(term.sexpr().split())


def _next_names(text: str, names: Sequence[str]) -> str:
    """``text`` with every application of a symbol in ``names`` renamed ``<name>!next``: an
    invariant over the pre-state read over the post-state of a step that changes ``names``."""
    if not names:
        return text
    pat = re.compile(r"\((" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?=[ )])")
    return pat.sub(lambda m: f"({m.group(1)}!next", text)


def certificate_text(system: ParametricSystem, invariant: Sequence[Candidate], header: Sequence[str] = ()) -> str:
    """The standalone SMT-LIB script: sorts, rigid symbols and the pre-state declared once; then
    one ``(push)``/``(check-sat)``/``(pop)`` per obligation: Init ⇒ Inv, per action
    Inv ∧ guard ∧ (post-state defined by the updates) ⇒ Inv′, per claim of ``invariant``
    Inv ⇒ claim.  Every answer must be ``unsat``.  The invariant is one line (``Inv``), and
    ``Inv′`` is that line with the changed symbols renamed, so that the one certificate
    reader (:mod:`~.certs.reader`) can read it back and :func:`certificate_from` rebuild the whole file from the model."""
    pre = system.state()
    inv = _one_line(z3.And([system.formula(c, pre) for c in invariant]))
    return certificate_from(system, inv, [c.name for c in invariant if c.claim], header)


def certificate_from(system: ParametricSystem, inv: str, claims: Sequence[str], header: Sequence[str] = ()) -> str:
    """The certificate of :func:`certificate_text` for the invariant ``inv`` (its one-line
    SMT-LIB text over the pre-state) and the claims named ``claims`` (the system's own
    formulas): every line but the invariant's comes from the model, so a stored certificate
    equal to this text has exactly the model's sorts, Init, guards, updates and claims."""
    pre = system.state()
    out = [f"; {line}" for line in header]
    out.append("(set-logic ALL)")
    for name in system.uninterpreted:
        out.append(f"(declare-sort {name} 0)")
    for name, labels in system.enums.items():
        out.append(f"(declare-datatypes (({system.sort(name).name()} 0)) (({' '.join(f'({c})' for c in labels)})))")
    for name, sort in system.constants:
        out.append(_decl(system, name, (), sort))
    for sym in (*system.rigid, *system.symbols):
        out.append(_decl(system, sym.name, sym.args, sym.result))
    bg = _one_line(system.background(pre))
    out.append("; obligation init")
    out += ["(push 1)", f"(assert {bg})", f"(assert {_one_line(system.init(pre))})",
            f"(assert (not {inv}))", "(check-sat)", "(pop 1)"]
    for a in system.actions:
        params = {p: z3.Const(f"{a.name}!{p}", system.sort(sort)) for p, sort in a.params}
        choices = {c.name: system.function(c, f"!{a.name}") for c in a.choices}
        wrapped = {k: (lambda f=f: f) if not isinstance(f, z3.FuncDeclRef) else f for k, f in choices.items()}
        step = a.step(pre, params, wrapped)
        # the post-state: a define-fun per changed symbol, from its update
        defs, changed = [], []
        for sym in system.symbols:
            if sym.name not in step.updates:
                continue
            changed.append(sym.name)
            formals = [z3.Const(f"{sym.name}!arg{i}", system.sort(s)) for i, s in enumerate(sym.args)]
            body = step.updates[sym.name](*formals)
            sig = " ".join(f"({x.sexpr()} {system.sort(s).name()})" for x, s in zip(formals, sym.args))
            defs.append(f"(define-fun {sym.name}!next ({sig}) {system.sort(sym.result).name()} {_one_line(body)})")
        out.append(f"; obligation step {a.name}")
        out.append("(push 1)")
        out += [_decl(system, f"{a.name}!{p}", (), sort) for p, sort in a.params]
        out += [_decl(system, f"{c.name}!{a.name}", c.args, c.result) for c in a.choices]
        out += defs
        out += [f"(assert {bg})", f"(assert {inv})", f"(assert {_one_line(step.guard)})",
                f"(assert (not {_next_names(inv, changed)}))", "(check-sat)", "(pop 1)"]
    by_name = {c.name: c for c in system.claims()}
    for name in claims:
        if name not in by_name:
            raise ValueError(f"claim {name}: not a claim of the model")
        out.append(f"; obligation claim {name}")
        out += ["(push 1)", f"(assert {inv})", f"(assert (not {_one_line(system.formula(by_name[name], pre))}))",
                "(check-sat)", "(pop 1)"]
    return "\n".join(out) + "\n"


# -- a smaller invariant ---------------------------------------------------------------------------

def candidates_from(system: ParametricSystem, inv: str) -> list[Candidate]:
    """The conjuncts of an invariant's one-line SMT-LIB text (a certificate's, as the one reader reads it)
    as candidates over ``system``'s symbols, read with Z3's SMT-LIB parser: a conjunct that is,
    as text, one of the system's claims becomes that claim (so it stays marked ``claim``); the
    others are named by their text.  ``ValueError`` (one line) when the text does not parse over
    the system's sorts and symbols."""
    sorts = {system.sort(n).name(): system.sort(n) for n in (*system.uninterpreted, *system.enums)}
    decls: dict[str, Any] = {sym.name: system.function(sym) for sym in (*system.symbols, *system.rigid)}
    decls.update({n: z3.Const(n, system.sort(s)) for n, s in system.constants})
    try:
        parsed = z3.parse_smt2_string(f"(assert {inv})", sorts=sorts, decls=decls)
    except z3.Z3Exception as e:
        raise ValueError(f"the invariant does not parse over the model's symbols: {e}") from None
    conj: list[Any] = []
    for f in parsed:
        conj += f.children() if z3.is_and(f) else [f]
    pre = system.state()
    claims = {_one_line(system.formula(c, pre)): c for c in system.claims()}
    out: list[Candidate] = []
    seen: set[str] = set()
    for f in conj:
        text = _one_line(f)
        if text in seen:
            continue
        seen.add(text)
        out.append(claims[text] if text in claims else _as_candidate(system, f, text))
    return out


def _as_candidate(system: ParametricSystem, f: Any, name: str) -> Candidate:
    """A parsed formula over the pre-state symbols as a candidate whose body may be read over any
    state (its symbols replaced by the state's)."""
    if z3.is_quantifier(f) and f.is_forall():
        n = f.num_vars()
        names = tuple((f.var_name(i), f.var_sort(i).name()) for i in range(n))
        matrix = f.body()
    else:
        names, matrix = (), f
    nullary = [sym for sym in system.symbols if not sym.args]
    funs = [sym for sym in system.symbols if sym.args]

    def body(st: QState, *xs: Any) -> Any:
        e = z3.substitute_vars(matrix, *reversed(xs)) if xs else matrix
        pairs = []
        for sym in funs:
            mine = getattr(st, sym.name)
            if isinstance(mine, z3.FuncDeclRef) and mine.eq(system.function(sym)):
                continue
            args = [z3.Var(i, system.sort(s)) for i, s in enumerate(sym.args)]
            pairs.append((system.function(sym), mine(*args)))
        if pairs:
            e = z3.substitute_funs(e, *pairs)
        consts = [(system.function(sym), getattr(st, sym.name)()) for sym in nullary]
        consts = [(a, b) for a, b in consts if not a.eq(b)]
        return z3.substitute(e, *consts) if consts else e

    return Candidate(name, names, body)


@dataclass
class MinimiseResult:
    """What :func:`minimise` kept of an inductive invariant: ``kept`` (the claims and the lemmas
    they need, in the given order), how many it was given (``found``), the rounds of the
    backward closure (over all passes), the passes, seconds, and ``status``: ``"done"`` only when a fresh check of ``kept``
    alone (:func:`inductive_problems`) found it inductive; otherwise why not."""

    kept: list[Candidate]
    found: int
    rounds: int = 0
    passes: int = 0
    seconds: float = 0.0
    status: str = "done"
    checked_seconds: float = 0.0
    dropped: int = 0
    """Lemmas :func:`drop_redundant` removed after the closure (0: not run or none removable)."""
    irredundant: bool = False
    """:func:`drop_redundant` ran to a pass that removed nothing: no single lemma of ``kept`` can
    be left out with the rest still inductive (a local minimum, not a smallest invariant)."""
    drop_checks: int = 0
    drop_seconds: float = 0.0
    drop_note: str = ""
    """Why the drop pass stopped early or was undone ("" when it ran to an irredundant set)."""


def _cores(system: ParametricSystem, invariant: Sequence[Candidate], goals: Sequence[str],
           deadline: float, trace: Callable[[str], None] | None = None,
           minimize_core: bool = True) -> tuple[set[str], str]:
    """One query per action (and one for Init): the whole ``invariant`` assumed in the pre-state,
    each conjunct behind an assumption literal, and the Skolemized negation of one of ``goals``
    in the post-state; every answer must be unsat, and the conjuncts in its unsat core are what
    the goals need.  Returns (the conjuncts named in some core, "" or the reason it failed)."""
    pre = system.state()
    bg = system.background(pre)
    names = [c.name for c in invariant]
    pre_formula = {c.name: system.formula(c, pre) for c in invariant}
    instance = {c.name: system.instantiate(c, pre, f"k{i}!")[0] for i, c in enumerate(invariant)}
    assume = {n: z3.Bool(f"assume!{i}") for i, n in enumerate(names)}
    need: set[str] = set()
    for a in system.actions:
        s = z3.Solver()
        s.set("core.minimize", minimize_core)
        s.set("timeout", max(1, int((deadline - time.perf_counter()) * 1000)))
        params = {p: z3.Const(f"{a.name}!{p}", system.sort(sort)) for p, sort in a.params}
        choices = {c.name: system.function(c, f"!{a.name}") for c in a.choices}
        choices = {k: (lambda f=f: f) if not isinstance(f, z3.FuncDeclRef) else f for k, f in choices.items()}
        step = a.step(pre, params, choices)
        move = updated(system, step)
        s.add(bg, step.guard, *[z3.Implies(assume[n], pre_formula[n]) for n in names])
        got = set()
        # one query for all goals (the disjunction of their negations), or with
        # one_goal_at_a_time one per goal, each in its own push/pop scope
        for group in ([[g] for g in goals] if system.one_goal_at_a_time else [list(goals)]):
            if system.one_goal_at_a_time:
                s.push()
            s.add(z3.Or([z3.Not(move(instance[g])) for g in group]))
            r = s.check(*assume.values())
            if r != z3.unsat:
                why = s.reason_unknown() if r == z3.unknown else "sat: the invariant given is not inductive"
                return need, f"{a.name}: {why}"
            core = {str(x) for x in s.unsat_core()}
            got |= {n for n in names if str(assume[n]) in core}
            if system.one_goal_at_a_time:
                s.pop()
        if trace is not None:
            trace(f"{a.name}: core of {len(got)}")
        need |= got
    return need, ""


def minimise(system: ParametricSystem, invariant: Sequence[Candidate], max_seconds: float = 1800.0,
             progress: Callable[[str], None] | None = None,
             cores: Callable[..., tuple[set[str], str]] | None = None) -> MinimiseResult:
    """A smaller inductive invariant inside ``invariant`` (an inductive one: e.g. what
    :func:`houdini` kept) that still has every claim of it: the backward closure of the claims
    under unsat cores.  Starting from the claims, each round asks every action, with the
    invariant assumed behind one assumption literal per conjunct, to break one of the conjuncts
    added last (:func:`_cores`: unsat, as the invariant is inductive) and adds the conjuncts in
    the unsat cores; a pass stops when a round adds nothing, so each kept conjunct is preserved
    from states satisfying the kept ones.  Passes repeat over what the last one kept (fewer
    assumptions, smaller cores) until one keeps everything it was given.  The result is then
    checked from scratch (:func:`inductive_problems`: Init and every action over ``kept`` alone),
    and ``status`` is ``"done"`` only when that check passes.  ``cores`` replaces :func:`_cores`
    (tests)."""
    say = progress or (lambda text: None)
    cores = cores or _cores
    t0 = time.perf_counter()
    deadline = t0 + max_seconds
    res = MinimiseResult([], len(invariant))
    current = list(invariant)
    if not any(c.claim for c in current):
        res.status = "no claim in the invariant: nothing to keep it for"
        return res
    while True:
        res.passes += 1
        kept = {c.name for c in current if c.claim}
        todo = sorted(kept)
        while todo:
            res.rounds += 1
            need, why = cores(system, current, todo, deadline, say)
            if why:
                res.status = f"unknown: {why}"
                res.seconds = time.perf_counter() - t0
                return res
            todo = sorted(need - kept)
            kept |= need
            say(f"minimise pass {res.passes} round {res.rounds}: {len(kept)} of {len(current)} kept, {len(todo)} new")
        if len(kept) == len(current):
            break
        current = [c for c in current if c.name in kept]
    res.kept = current
    res.seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    problems = inductive_problems(system, res.kept, max(deadline - t1, 1.0))
    res.checked_seconds = time.perf_counter() - t1
    if problems:
        res.status = "the kept set is not inductive: " + "; ".join(problems)
    return res


def preserved(system: ParametricSystem, invariant: Sequence[Candidate], deadline: float) -> str:
    """``""`` when every action, from a state satisfying every conjunct of ``invariant``, leads to
    one that satisfies them all (one query per action, stopping at the first that is not unsat);
    otherwise the action and why ("sat: ..." or Z3's reason for unknown).  Init is not asked:
    :func:`drop_redundant` only removes conjuncts from an invariant Init already implies."""
    _, why = _cores(system, invariant, [c.name for c in invariant], deadline, minimize_core=False)
    return why


def drop_redundant(system: ParametricSystem, result: MinimiseResult, max_seconds: float = 1800.0,
                   progress: Callable[[str], None] | None = None,
                   check: Callable[..., str] | None = None) -> MinimiseResult:
    """The greedy drop pass after :func:`minimise` (``result.status`` must be ``"done"``): each
    lemma of ``result.kept`` in turn (the longest first: the certificate shrinks most), the
    rest asked whether they are still preserved by every action (:func:`preserved`; Init implies
    every subset of an inductive invariant's conjuncts, and the claims are never removed); a
    lemma whose removal leaves an inductive set is dropped for good.  Passes repeat until one
    drops nothing, so no single lemma of the result can be removed (``irredundant``).  Out of
    time (or on an ``unknown``) the set reached so far is kept, ``irredundant`` stays false and
    ``drop_note`` says why.  The result is checked from scratch again (:func:`inductive_problems`);
    should that fail, the closure's set is restored and ``drop_note`` says so, so ``status``
    stays ``"done"`` and ``kept`` is always a checked inductive set.  ``check`` replaces
    :func:`preserved` (tests)."""
    say = progress or (lambda text: None)
    check = check or preserved
    if result.status != "done":
        return result
    t0 = time.perf_counter()
    deadline = t0 + max_seconds
    before = list(result.kept)
    current = list(before)
    probe = system.state()
    order = sorted((c for c in current if not c.claim), key=lambda c: -len(str(system.formula(c, probe))))
    stop = ""
    sat = tuple(f"{a.name}: sat" for a in system.actions)
    while not stop:
        removed = 0
        for lemma in order:
            if time.perf_counter() >= deadline:
                stop = "out of time"
                break
            if lemma not in current:
                continue
            rest = [c for c in current if c is not lemma]
            result.drop_checks += 1
            why = check(system, rest, deadline)
            if not why:
                current = rest
                removed += 1
                say(f"drop pass: {lemma.name[:60]} removed; {len(current)} left")
            elif not why.startswith(sat):
                stop = f"unknown: {why}"
                break
        if not stop and removed == 0:
            result.irredundant = True
            break
        order = [c for c in order if c in current]
    result.drop_seconds = time.perf_counter() - t0
    result.drop_note = stop
    t1 = time.perf_counter()
    problems = inductive_problems(system, current, max(deadline - t1, 1.0)) if len(current) < len(before) else []
    result.checked_seconds += time.perf_counter() - t1
    if problems:
        result.drop_note = "undone: the set it left is not inductive: " + "; ".join(problems)
        result.irredundant = False
        current = before
    result.kept = current
    result.dropped = len(before) - len(current)
    return result


def inductive_problems(system: ParametricSystem, invariant: Sequence[Candidate], max_seconds: float = 600.0) -> list[str]:
    """From scratch (a fresh :func:`houdini` over ``invariant`` alone): one line per conjunct
    that Init or some action breaks, or the reason the check did not finish; none when the
    conjunction is an inductive invariant."""
    r = houdini(system, invariant, max_seconds)
    if r.status != "done":
        return [r.status]
    return [f"{n[:80]}: {why}" for n, why in r.dropped.items()]
