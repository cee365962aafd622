"""The data of a parametric transition system over uninterpreted sorts (what every size needs).

A :class:`ParametricSystem` has sorts (uninterpreted, so a model may have any number of elements
of each, and enumerations), state symbols (Z3 functions over the sorts), rigid symbols (fixed for
a run), ``Init``, actions (:class:`Action`: a guard over the pre-state and, per changed symbol,
its new value, with existentially chosen parameters and choice functions) and claims
(:class:`Candidate`).  Protocols write one by hand, or the lift (:mod:`.sorted_lift`) derives one
from a spec; the engines that prove things about it (Houdini, the minimiser, certificates) live in
the checker and read only what is defined here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import itertools

import z3

__all__ = ["Symbol", "QState", "Step", "Action", "Candidate", "ParametricSystem", "ground"]


@dataclass(frozen=True)
class Symbol:
    """A state or rigid symbol: ``name`` over argument sorts ``args`` (names) to sort ``result``."""

    name: str
    args: tuple[str, ...]
    result: str


class QState:
    """One state of the parametric system: ``st.owner(p)`` is the term of ``owner`` at ``p``.
    Built from Z3 functions (a pre-state) or from update closures over another state."""

    def __init__(self, funcs: dict[str, Callable[..., Any]]):
        self._funcs = funcs

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self.__dict__["_funcs"][name]
        except KeyError:
            raise AttributeError(name) from None

    def with_updates(self, updates: dict[str, Callable[..., Any]]) -> "QState":
        """This state with ``updates`` in place of the symbols they name (the frame is the rest)."""
        return QState({**self._funcs, **updates})


@dataclass
class Step:
    """One action from a pre-state: its ``guard`` (a condition, which may constrain the choice
    functions) and the new value of each symbol it changes."""

    guard: Any
    updates: dict[str, Callable[..., Any]]


@dataclass(frozen=True)
class Action:
    """An action: parameters ``params`` (name, sort), choice functions ``choices`` (symbols whose
    value the step picks freely, subject to the guard), and ``step(state, params, choices)``."""

    name: str
    params: tuple[tuple[str, str], ...]
    choices: tuple[Symbol, ...]
    step: Callable[[QState, dict[str, Any], dict[str, Any]], Step]
    doc: str = ""


@dataclass(frozen=True)
class Candidate:
    """``∀ vars. body(state, *vars)``; ``name`` identifies it (a claim's name, or the lemma's text)."""

    name: str
    vars: tuple[tuple[str, str], ...]
    body: Callable[..., Any]
    claim: bool = False


class ParametricSystem:
    """What a protocol provides (see the module docstring); subclasses fill the attributes."""

    sorts: dict[str, Any]
    """Sort name to Z3 sort: uninterpreted sorts and enumeration datatypes."""
    uninterpreted: tuple[str, ...]
    """The names of the uninterpreted sorts (any number of elements)."""
    enums: dict[str, tuple[str, ...]]
    """Enumeration sort name to its constant names (in code order)."""
    symbols: tuple[Symbol, ...]
    rigid: tuple[Symbol, ...]
    constants: tuple[tuple[str, str], ...]
    """Rigid constants (name, sort), e.g. the ``none`` element of a sort."""
    actions: tuple[Action, ...]
    one_goal_at_a_time: bool = False
    """When true, :func:`houdini` and :func:`minimise` ask each action about one post-state
    candidate at a time (an incremental solver, the pre-state behind assumption literals) rather
    than about the disjunction of all of them: for some models Z3 answers hundreds of
    single-goal queries in a second where the one disjunctive query does not finish.  The
    answers mean the same: a candidate is kept only when every query about it is unsat."""
    universe: dict[str, list[Any]] | None = None
    """Set while a bounded instance is checked: :meth:`forall` and :meth:`exists` then expand
    over these elements (no quantifier reaches the solver)."""

    def elements(self, sort: Any, universe: dict[str, list[Any]] | None = None) -> list[Any]:
        """The values a bounded instance gives the Z3 sort ``sort``: the elements of an
        uninterpreted sort in ``universe`` (default: :attr:`universe`), every value of a finite
        one (an enumeration, such as a domain kept at the scenario's size)."""
        name = sort.name()
        universe = self.universe if universe is None else universe
        if universe is not None and name in universe:
            return universe[name]
        if isinstance(sort, z3.DatatypeSortRef):
            return [sort.constructor(i)() for i in range(sort.num_constructors())]
        raise KeyError(f"{name}: a sort with no elements in the bounded instance")

    def forall(self, xs: Sequence[Any], body: Any) -> Any:
        """``∀ xs. body`` (Z3 constants ``xs``), expanded over :attr:`universe` when it is set."""
        if self.universe is None:
            return z3.ForAll(list(xs), body)
        import itertools
        return z3.And([z3.substitute(body, *zip(xs, es)) for es in itertools.product(*[self.elements(x.sort()) for x in xs])])

    def exists(self, xs: Sequence[Any], body: Any) -> Any:
        """``∃ xs. body``, expanded over :attr:`universe` when it is set."""
        if self.universe is None:
            return z3.Exists(list(xs), body)
        import itertools
        return z3.Or([z3.substitute(body, *zip(xs, es)) for es in itertools.product(*[self.elements(x.sort()) for x in xs])])

    def init(self, st: QState) -> Any:  # pragma: no cover - abstract
        """``Init`` over state ``st``."""
        raise NotImplementedError

    def background(self, st: QState) -> Any:
        """Axioms over the rigid symbols (default: none)."""
        return z3.BoolVal(True)

    def claims(self) -> list[Candidate]:  # pragma: no cover - abstract
        """The safety claims, as candidates marked ``claim``."""
        raise NotImplementedError

    # -- built from the above ------------------------------------------------------------------
    def sort(self, name: str) -> Any:
        """The Z3 sort named ``name`` (``Bool`` included)."""
        return z3.BoolSort() if name == "Bool" else self.sorts[name]

    def function(self, sym: Symbol, suffix: str = "") -> Any:
        """The Z3 function (or constant) of ``sym``, its name suffixed."""
        sorts = tuple([self.sort(a) for a in sym.args] + [self.sort(sym.result)])
        made = self.__dict__.setdefault("_functions", {})  # the same declaration, built once (states are
        key = (sym.name + suffix, sorts)                   # built per action and per claim)
        if key not in made:
            made[key] = z3.Const(key[0], sorts[-1]) if not sym.args else z3.Function(key[0], *sorts)
        return made[key]

    def state(self, suffix: str = "") -> QState:
        """A state of Z3 functions named after the symbols (rigid ones and constants unsuffixed)."""
        funcs: dict[str, Callable[..., Any]] = {}
        for sym in (*self.symbols, *self.rigid):
            f = self.function(sym, suffix if sym in self.symbols else "")
            funcs[sym.name] = (lambda f=f: f) if not sym.args else f
        for name, sort in self.constants:
            c = z3.Const(name, self.sort(sort))
            funcs[name] = lambda c=c: c
        return QState(funcs)

    def instantiate(self, cand: Candidate, st: QState, prefix: str) -> tuple[Any, list[Any]]:
        """``cand``'s body at fresh constants named ``prefix``+var (its Skolemized negation's
        witnesses) and those constants."""
        consts = [z3.Const(f"{prefix}{v}", self.sort(s)) for v, s in cand.vars]
        return cand.body(st, *consts), consts

    def formula(self, cand: Candidate, st: QState, universe: dict[str, list[Any]] | None = None) -> Any:
        """``∀ vars. body`` over ``st``; with ``universe`` (sort name to its elements, a bounded
        instance), the conjunction of ``body`` at every tuple of elements instead."""
        if not cand.vars:
            return cand.body(st)
        if universe is not None:
            import itertools
            body = cand.body(st, *[z3.Var(i, self.sort(s)) for i, (_, s) in enumerate(cand.vars)])
            return z3.And([z3.substitute_vars(body, *xs)
                           for xs in itertools.product(*[universe[s] for _, s in cand.vars])])
        consts = [z3.Const(v, self.sort(s)) for v, s in cand.vars]
        return z3.ForAll(consts, cand.body(st, *consts))

    def bounded(self, sizes: dict[str, int]) -> tuple[dict[str, list[Any]], Any]:
        """A bounded instance: ``sizes[sort]`` distinct elements of each uninterpreted sort (the
        rigid constants among them) and the axioms saying they are all of it."""
        universe, axioms = {}, []
        named = {}
        for name, sort in self.constants:
            named.setdefault(sort, []).append(z3.Const(name, self.sort(sort)))
        for name in self.uninterpreted:
            own = named.get(name, [])
            extra = [z3.Const(f"{name}!e{i}", self.sorts[name]) for i in range(max(sizes.get(name, 1) - len(own), 0))]
            elems = own + extra
            universe[name] = elems
            x = z3.Const(f"{name}!x", self.sorts[name])
            if len(elems) > 1:
                axioms.append(z3.Distinct(*elems))
        return universe, z3.And(axioms)


def ground(term: Any, universe: dict[str, list[Any]]) -> Any:
    """``term`` with every quantifier over an uninterpreted sort expanded over that sort's
    elements in ``universe`` (``∀``: a conjunction, ``∃``: a disjunction): a bounded instance's
    reading of a quantified formula.  A quantifier is instantiated before its body is walked, so
    a nested quantifier never sees a loose variable of the one around it (whose de Bruijn index
    would not be shifted)."""
    cache: dict[int, Any] = {}

    def walk(t: Any) -> Any:
        key = t.get_id()
        if key in cache:
            return cache[key][1]
        if z3.is_quantifier(t):
            n = t.num_vars()
            elems = [universe[t.var_sort(i).name()] for i in range(n)]
            parts = [walk(z3.substitute_vars(t.body(), *reversed(es))) for es in itertools.product(*elems)]
            out = z3.And(parts) if t.is_forall() else z3.Or(parts)
        elif z3.is_app(t) and t.num_args():
            out = t.decl()(*[walk(a) for a in t.children()])
        else:
            out = t
        cache[key] = (t, out)  # the term kept alive: Z3 reuses the ids of freed terms
        return out
    return walk(term)
