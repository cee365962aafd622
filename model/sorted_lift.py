"""The lift to sorts: a spec's own actions and claims, read once over uninterpreted sorts.

The fourth interpretation of the spec (beside the reference interpreter, the compiled engines and
the fixed-size Z3 encoding).  :func:`lift_spec` runs every action of a spec instance **once** with

* each parameter of a domain the protocol declares as a sort (:class:`SortDecl`: requests, pages,
  chunks ...) a Z3 constant of that sort, guarded to be a real element (not the sort's NONE);
* each field a function over the sorts (a fixed domain such as a rank at the scenario's size of
  one is dropped, a larger one becomes an enumeration argument); codes of a finite value domain
  are constants of an enumeration sort, codes that name elements are those elements
  (:mod:`.sorted_values`);
* each iteration of a sorted domain (``for r in self.k.req``, ``indices(self.pages(r))``) one
  bound element: ``o.all_``/``o.any_`` over it are ``∀``/``∃`` (with the element's membership:
  not NONE, one of the request's chunks), ``s.require`` inside the loop is a ``∀``, and a write
  inside it a pointwise update (through a state-valued index, ``owner[dest[r, c]]``, the update
  of every element some chunk's index names, a *choice predicate* defined in the guard);
* the engine's flags plain Python (the configuration is fixed); configuration about one element
  (:func:`~.lifting.per_element`) a rigid symbol, Python control flow on it a case split of the
  action (``prefill_bootstrap_add.over_long`` / ``.not_over_long``).

What a sort cannot say is either over-approximated, and the line saying so is kept in
:attr:`LiftedSystem.abstractions` (a guard helper marked :func:`~.lifting.over_approximated` whose
body compares elements by order; :func:`~.lifting.take_lowest_free` as any free entries), or
refused with :class:`~.lifting.LiftRefused` naming the spec's file and line (index arithmetic, a
fixed index into a sorted domain, counting over a sort, a value from a finished loop used outside
``all_``/``any_`` ...).

The result is a :class:`~.parametric.ParametricSystem`: the checker's Houdini, minimiser and
certificates take it as they take any parametric system, and the checker's link proves, at fixed
sizes, that each spec step is a step of it.  This module knows no protocol.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import z3

from kvproof.model.expr import BOOL, INT as K_INT, SpecError, SpecOps, Value, caller
from kvproof.model.framework import StaticallyDisabled
from kvproof.model.lifting import _ACTIVE, LiftRefused
from kvproof.model.ops import Ops
from kvproof.model.parametric import Action, Candidate, ParametricSystem, QState, Step, Symbol, ground
from kvproof.model.sorted_values import (INT, WIDE, Card, Code, Elem, EnumDom, IntDom, Num, Poly, RefDom, SortDom,
                                         enum_sort)

__all__ = ["SortDecl", "LiftedSystem", "LiftedCase", "RigidInfo", "lift_spec"]


@dataclass(frozen=True)
class SortDecl:
    """What a protocol says about its domains so that the lift can read it (a short declaration,
    no second model): ``sorts`` maps an index domain's name to its sort and the name of the
    sort's NONE constant (``None``: the sort has none, e.g. chunks); ``refs`` maps a value
    domain whose codes name elements to (the index domain they name, the NONE code or ``None``
    for the domain's last code, the offset of element 0's code); ``tables`` lists constant tables
    a spec looks values up in by an element, each (the table object, the index domain or ref
    value domain it is indexed by, the rigid function it stands for, that function's result
    sort); ``firsts`` names the domains whose first index is a constant of the sort."""

    sorts: dict[str, tuple[str, str | None]]
    refs: dict[str, tuple[str, int | None, int]] = field(default_factory=dict)
    tables: tuple[tuple[Any, str, str, str], ...] = ()
    firsts: dict[str, str] = field(default_factory=dict)
    """Index domains whose index 0 is a distinguished element (its constant's name): a request's
    first chunk, which a one-chunk placeholder sends.  Index 0 is all that is named; the sort
    still has no order."""


@dataclass(frozen=True)
class RigidInfo:
    """How a rigid symbol of the lifted model is read off a spec instance: ``kind`` is
    ``"condition"`` or ``"count"`` (a :func:`~.lifting.per_element` method named ``source``) or
    ``"table"`` (``source`` the table); ``domains`` the index domains of its arguments."""

    symbol: Symbol
    kind: str
    source: Any
    domains: tuple[str, ...]


@dataclass(frozen=True)
class LiftedCase:
    """One lifted action: the spec action ``spec_action``, the values of its fixed parameters,
    the decisions of its case split (rigid atom label, truth)."""

    spec_action: str
    fixed: dict[str, int]
    decisions: tuple[tuple[str, bool], ...]


class _Var:
    """A loop's bound element: its constant, its membership condition, whether the loop ended."""

    __slots__ = ("term", "member", "closed", "order")

    def __init__(self, term: Any, member: Any, order: int):
        self.term, self.member, self.closed, self.order = term, member, False, order


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or isinstance(x, z3.BoolRef)


def _has_quantifier(t: Any) -> bool:
    seen: set[int] = set()
    todo = [t]
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_quantifier(e):
            return True
        if z3.is_app(e):
            todo.extend(e.children())
    return False


class SortedOps(Ops):
    """The ops facade over sorts (see the module docstring); raw values are conditions (Z3
    Booleans), :class:`~.sorted_values.Num`, :class:`~.sorted_values.Poly`, Python ints, and
    sorted elements."""

    def __init__(self, run: "_Run"):
        self.run = run

    def native_kind(self, x: Any) -> str | None:
        if isinstance(x, (Elem, Code)):
            return "number"
        if isinstance(x, Card):
            raise LiftRefused(f"{caller()}: a per-element count ({x}) used as a value: iterate indices(...) or "
                              "compare an element with it (c < count)")
        return None

    # -- values --------------------------------------------------------------------------------
    def const(self, v):
        return z3.BoolVal(v) if isinstance(v, bool) else v

    def eq(self, a, b):
        r = self.run
        if isinstance(a, Elem) and isinstance(b, Elem):
            return a.term == b.term
        d = r.dom_of(a) or r.dom_of(b)
        if d is None:
            d = INT
        return r.coerce(a, d) == r.coerce(b, d)

    def lt(self, a, b):
        r = self.run
        d = r.dom_of(a) or r.dom_of(b) or INT
        if isinstance(d, IntDom):
            return r.coerce(a, d) < r.coerce(b, d)
        if isinstance(d, EnumDom):
            n = len(d.consts)
            if isinstance(a, int):
                tb = r.coerce(b, d)
                return z3.Or([tb == d.consts[j] for j in range(n) if j > a]) if a + 1 < n else z3.BoolVal(False)
            if isinstance(b, int):
                ta = r.coerce(a, d)
                return z3.Or([ta == d.consts[i] for i in range(min(b, n))]) if b > 0 else z3.BoolVal(False)
            ta, tb = r.coerce(a, d), r.coerce(b, d)
            return z3.Or([z3.And(ta == d.consts[i], tb == d.consts[j]) for i in range(n) for j in range(i + 1, n)])
        raise LiftRefused(f"{caller()}: order on values of {d.name} (elements of a sort have no order)")

    def add(self, a, b):
        r = self.run
        if isinstance(a, int) and not isinstance(b, int):
            a, b = b, a
        d = r.dom_of(a)
        if isinstance(d, EnumDom) and isinstance(b, int):
            ta, n = r.coerce(a, d), len(d.consts)
            out = d.consts[n - 1]
            for i in reversed(range(n)):
                out = z3.If(ta == d.consts[i], d.consts[max(0, min(i + b, n - 1))], out)
            return Num(out, d)
        if isinstance(d, IntDom) or (d is None and r.dom_of(b) is INT):
            return Num(r.coerce(a, INT) + r.coerce(b, INT), INT)
        raise LiftRefused(f"{caller()}: + on values of {getattr(d, 'name', 'unknown domain')}")

    def lookup(self, table, idx):
        return self.run.lookup(table, idx)

    def ite(self, c, a, b):
        r = self.run
        cond = r.bool_(c)
        if _is_bool(a) and _is_bool(b):
            return z3.If(cond, r.bool_(a), r.bool_(b))
        d = r.dom_of(a) or r.dom_of(b)
        if d is not None:
            return Num(z3.If(cond, r.coerce(a, d), r.coerce(b, d)), d)
        return Poly(lambda dom, cond=cond, a=a, b=b: z3.If(cond, r.coerce(a, dom), r.coerce(b, dom)))

    # -- conditions ------------------------------------------------------------------------------
    def and_(self, *xs):
        terms = self.run.joined([self.run.bool_(x) for x in xs], "and_", "o.all_")
        return z3.And(terms) if terms else z3.BoolVal(True)

    def or_(self, *xs):
        terms = self.run.joined([self.run.bool_(x) for x in xs], "or_", "o.any_")
        return z3.Or(terms) if terms else z3.BoolVal(False)

    def not_(self, x):
        return z3.Not(self.run.bool_(x))

    def all_(self, xs):
        parts = [self.run.bind(self.run.bool_(x), True) for x in xs]
        return z3.And(parts) if len(parts) != 1 else parts[0]

    def any_(self, xs):
        parts = [self.run.bind(self.run.bool_(x), False) for x in xs]
        return z3.Or(parts) if len(parts) != 1 else parts[0]

    def count(self, conds):
        terms = []
        for c in conds:
            t = self.run.bool_(c)
            if any(self.run.vars[i].closed for i in self.run.loop_vars(t)):
                raise LiftRefused(f"{caller()}: counting over a sort (o.count of conditions of a loop's element): "
                                  "a sort has no cardinality")
            terms.append(z3.If(t, z3.IntVal(1), z3.IntVal(0)))
        # no one-argument sum: SMT-LIB's + takes two or more (cvc5 refuses (+ x))
        return Num(z3.IntVal(0) if not terms else terms[0] if len(terms) == 1 else z3.Sum(terms), INT)

    def require(self, cond):
        self.run.require(cond)

    def read(self, slot):  # pragma: no cover - the sorted views never read by slot
        raise LiftRefused(f"{caller()}: a read by slot in the lift")

    read_at = write = write_at = read


class _View:
    """One array field read (pre-state or next state) or written at sorted indices."""

    __slots__ = ("_run", "_name", "_next")

    def __init__(self, run: "_Run", name: str, next_state: bool):
        self._run, self._name, self._next = run, name, next_state

    def __getitem__(self, key: Any) -> Any:
        return self._run.read(self._name, key if isinstance(key, tuple) else (key,), self._next)

    def __setitem__(self, key: Any, value: Any) -> None:
        if not self._next:
            raise SpecError(f"{caller()}: {self._name}[...] = ...: the pre-state is read-only")
        self._run.write(self._name, key if isinstance(key, tuple) else (key,), value)


class SortedPre:
    """The pre-state of a lifted step (the surface of :class:`~.framework.Pre`)."""

    _next = False

    def __init__(self, run: "_Run"):
        object.__setattr__(self, "ops", run.lang)
        object.__setattr__(self, "_run", run)

    def __getattr__(self, name: str) -> Any:
        run = self._run
        if name not in run.sys._fields:
            raise AttributeError(f"no field {name!r}")
        if not run.sys._fields[name][1]:
            return run.read(name, (), self._next)
        view = _View(run, name, self._next)
        object.__setattr__(self, name, view)
        return view

    def __setattr__(self, name: str, value: Any) -> None:
        raise SpecError(f"{caller()}: s.{name} = ...: the pre-state is read-only")

    def require(self, cond: Any) -> None:
        """As :meth:`~.framework.Pre.require`; an over-approximated helper's condition is dropped."""
        if cond is False:
            raise StaticallyDisabled
        if cond is True:
            return
        if isinstance(cond, Value) and cond.raw is WIDE:
            return
        if not (isinstance(cond, Value) and cond.kind == BOOL):
            raise SpecError(f"{caller()}: require: expected a condition, got {cond!r}")
        self.ops.require(cond)

    def widen(self, extra: Any) -> Any:
        """As :meth:`~.framework.Pre.widen`."""
        return self.ops.widen(extra)


class SortedPost(SortedPre):
    """The next state of a lifted step."""

    _next = True

    def __setattr__(self, name: str, value: Any) -> None:
        run = self._run
        if name not in run.sys._fields or run.sys._fields[name][1]:
            raise SpecError(f"{caller()}: n.{name} = ...: not a scalar field of the state")
        run.write(name, (), value)


class _Run:
    """One evaluation of an action or claim over sorts: the pre-state ``st`` (a
    :class:`~.parametric.QState`), the parameters' constants, the choice functions (``mode``
    ``"discover"``: made up and recorded; ``"step"``: given; ``"witness"``: their definitions, or
    read off ``post``), the decisions of the case split."""

    def __init__(self, system: "LiftedSystem", st: QState, mode: str, choices: dict[str, Any] | None = None,
                 decisions: Sequence[bool] = (), post: QState | None = None):
        self.sys, self.st, self.mode, self.post = system, st, mode, post
        self.choices_in = choices or {}
        self.guard: list[Any] = []
        self.next: dict[str, Callable[..., Any]] = {}
        self.vars: dict[int, _Var] = {}
        self.choice_syms: list[Symbol] = []
        self.choice_defs: dict[str, Callable[..., Any]] = {}
        self.decisions = list(decisions)
        self.taken: list[tuple[str, bool]] = []
        self.atoms: dict[Any, bool] = {}
        self.counter = 0
        self.nchoice = 0
        self._vars_memo: dict[int, tuple[Any, frozenset[int]]] = {}
        self.lang = SpecOps(SortedOps(self))

    # -- the protocol the language's hooks call (:mod:`.lifting`, ``Domain.__iter__``) ---------
    def symbolic(self, x: Any) -> bool:
        return isinstance(x, Elem)

    def first(self, domain: str) -> Any:
        """The constant of ``domain``'s index 0 (:attr:`SortDecl.firsts`), or ``None``."""
        name = self.sys.decl.firsts.get(domain)
        return None if name is None else z3.Const(name, self.sys.sorts[self.sys.decl.sorts[domain][0]])

    def iterate(self, domain: Any) -> Any:
        decl = self.sys.decl
        if domain.name not in decl.sorts:
            return iter(range(domain.size))
        sort_name, none = decl.sorts[domain.name]
        sort = self.sys.sorts[sort_name]
        none_t = z3.Const(none, sort) if none else None
        return self._loop(domain.name, sort_name, lambda v: (v != none_t) if none_t is not None else z3.BoolVal(True))

    def indices(self, n: Any, where: str) -> Any:
        if not isinstance(n, Card):
            raise LiftRefused(f"{where}: indices({n!r}): expected a count")
        return self._loop(n.domain, self.sys.decl.sorts[n.domain][0], n.member)

    def _loop(self, domain: str, sort_name: str, member: Callable[[Any], Any]):
        self.counter += 1
        term = z3.Const(f"{sort_name.lower()}!{self.counter}", self.sys.sorts[sort_name])
        var = _Var(term, member(term), self.counter)
        self.vars[term.get_id()] = var
        try:
            yield Elem(self, term, sort_name, domain, var)
        finally:
            var.closed = True

    def rigid(self, name: str, result: str, args: tuple[Any, ...], where: str) -> Any:
        elems = []
        for a in args:
            if not isinstance(a, Elem):
                raise LiftRefused(f"{where}: {name}({', '.join(map(repr, args))}): mixes sorted elements and fixed values")
            elems.append(a)
        sorts = tuple(e.sort_name for e in elems)
        domains = tuple(e.domain for e in elems)
        terms = [e.term for e in elems]
        if result == "condition" and name in self.sys.pins:
            return self.sys.pins[name]  # fixed for every element, as the scenario's own elements have it
        if result == "condition":
            sym = Symbol(name, sorts, "Bool")
            f = self.sys._rigid_symbol(RigidInfo(sym, "condition", name, domains))
            value = f(self.st)(*terms)
            return _Decided(self.lang, value, BOOL, (name, tuple(t.get_id() for t in terms)),
                            f"{name}({', '.join(str(e.domain) for e in elems)})", elems)
        dom = result.split(":", 1)[1]
        if dom not in self.sys.decl.sorts:
            raise LiftRefused(f"{where}: {name}: counts {dom}, which is not declared as a sort")
        dsort = self.sys.decl.sorts[dom][0]
        sym = Symbol(name, sorts + (dsort,), "Bool")
        f = self.sys._rigid_symbol(RigidInfo(sym, "count", name, domains + (dom,)))
        if getattr(getattr(type(self.sys.spec), name, None), "_kv_at_least_one", False):
            self.sys._at_least_one.setdefault(name, (sorts, domains, dom))
        return Card(self, name, tuple(elems), dom, lambda c, f=f, terms=terms: f(self.st)(*terms, c))

    def derived(self, fn: Callable, spec: Any, result: str, args: tuple[Any, ...], where: str) -> Any:
        """A :func:`~.lifting.per_element` fact computed from others: its body for action
        parameters (case splits allowed); for a loop's bound element, the rigid symbol the body
        defines case by case (:meth:`LiftedSystem._define`)."""
        if not any(isinstance(a, Elem) and a.var is not None for a in args):
            return fn(spec, *args)
        guard, nxt, nvars, taken = list(self.guard), dict(self.next), dict(self.vars), len(self.taken)
        try:  # the body needs no case split here: it is the value
            return fn(spec, *args)
        except LiftRefused:
            self.guard, self.next, self.vars = guard, nxt, nvars
            del self.taken[taken:]
        elems = [a for a in args if isinstance(a, Elem)]
        if len(elems) != len(args):
            raise LiftRefused(f"{where}: {fn.__name__}: mixes sorted elements and fixed values")
        self.sys._define(fn, spec, result, tuple(e.sort_name for e in elems), tuple(e.domain for e in elems))
        return self.rigid(fn.__name__, result, args, where)

    def decide(self, key: Any, label: str, value: Any, elems: Sequence[Elem]) -> bool:
        """Python control flow on a rigid condition: a case split (the same atom decides alike)."""
        if any(e.var is not None for e in elems):
            raise LiftRefused(f"{caller()}: Python control flow on {label} of a loop's bound element "
                              "(a case split needs an action parameter)")
        if key in self.atoms:
            return self.atoms[key]
        i = len(self.taken)
        b = self.decisions[i] if i < len(self.decisions) else True
        self.atoms[key] = b
        self.taken.append((label.split("(")[0], b))
        self.guard.append(value if b else z3.Not(value))
        return b

    def try_exact(self, fn: Callable, spec: Any, args: tuple[Any, ...], line: str, name: str) -> Any:
        guard, nxt, nvars = list(self.guard), dict(self.next), dict(self.vars)
        try:
            return fn(spec, *args)
        except LiftRefused as e:
            self.guard, self.next, self.vars = guard, nxt, nvars
            self.sys._abstraction(f"{line} [{name}]")
            return Value(self.lang, WIDE, BOOL)

    def take_free(self, s: Any, n: Any, owner: str, size: int, count: Any, slot_of: Callable, owned: Any, free: int,
                  content: str | None, filled: Any, where: str) -> None:
        """Any ``count`` distinct free entries of the pool (the lowest-numbered in the spec)."""
        sym, dims, odom = self.sys._fields[owner]
        if len(dims) != 1 or dims[0][0] != "sorted":
            raise LiftRefused(f"{where}: take_lowest_free: the pool {owner} is not a field over one sorted domain")
        pool = dims[0][1].name
        psort_name, pnone = self.sys.decl.sorts[pool]
        psort = self.sys.sorts[psort_name]
        self.sys._abstraction(f"allocation from {owner} takes any free entries (the spec: the lowest-numbered) "
                              f"[{caller(function=True)}]")
        if isinstance(count, int) and not isinstance(count, bool):
            self._take_fixed(owner, odom, psort_name, psort, pnone, count, slot_of, owned, free, content, filled)
            return
        if not isinstance(count, Card):
            raise LiftRefused(f"{where}: take_lowest_free of {count!r}: a count is an int or a per-element count")
        csort_name = self.sys.decl.sorts[count.domain][0]
        csort = self.sys.sorts[csort_name]
        loop = self.indices(count, where)
        c_elem = next(loop)
        fname, index = slot_of(c_elem)
        args = self.index_terms(fname, index if isinstance(index, tuple) else (index,))
        ct = c_elem.term

        def post_pick(c: Any) -> Any:
            return self.post_fn(fname)(*[z3.substitute(a, (ct, c)) for a in args])

        pick = self.choice("pick", (csort_name,), psort_name, read_post=post_pick)
        none = z3.Const(pnone, psort) if pnone else None
        own = self.fn(owner)
        free_t = self.coerce(free, odom)
        c1, c2 = z3.Const("c1!", csort), z3.Const("c2!", csort)
        m1, m2 = z3.substitute(c_elem.var.member, (ct, c1)), z3.substitute(c_elem.var.member, (ct, c2))
        ok = [own(pick(c1)) == free_t] + ([pick(c1) != none] if none is not None else [])
        self.guard.append(self.sys.forall([c1], z3.Implies(m1, z3.And(ok))))
        self.guard.append(self.sys.forall([c1, c2], z3.Implies(z3.And(m1, m2, c1 != c2), pick(c1) != pick(c2))))
        taken = self.choice("taken", (psort_name,), "Bool",
                            definition=lambda x: self.sys.exists([c1], z3.And(m1, pick(c1) == x)))
        # the table: chunk c's entry is pick(c) (pointwise over the chunks)
        self.write(fname, index if isinstance(index, tuple) else (index,), Num(pick(ct), self.sys._fields[fname][2]))
        try:
            next(loop)
        except StopIteration:
            pass
        owned_t = self.coerce(self.lang._in(owned, K_INT, "take_lowest_free"), odom)
        old_owner = self.next_fn(owner)
        self.next[owner] = lambda x, old=old_owner: z3.If(taken(x), owned_t, old(x))
        if content is not None:
            _, _, cdom = self.sys._fields[content]
            filled_t = self.coerce(self.lang._in(filled, K_INT, "take_lowest_free"), cdom)
            old_content = self.next_fn(content)
            self.next[content] = lambda x, old=old_content: z3.If(taken(x), filled_t, old(x))

    def _take_fixed(self, owner: str, odom: Any, psort_name: str, psort: Any, pnone: str | None, count: int,
                    slot_of: Callable, owned: Any, free: int, content: str | None, filled: Any) -> None:
        """:meth:`take_free` of a fixed number of entries: one nullary choice per entry."""
        picks = []
        for i in range(count):
            fname, index = slot_of(i)
            index = index if isinstance(index, tuple) else (index,)
            args = self.index_terms(fname, index)
            pick = self.choice("pick", (), psort_name, read_post=lambda fname=fname, args=args: self.post_fn(fname)(*args))
            picks.append(pick())
            self.write(fname, index, Num(pick(), self.sys._fields[fname][2]))
        own = self.fn(owner)
        free_t = self.coerce(free, odom)
        none = [z3.Const(pnone, psort)] if pnone else []
        for p in picks:
            self.guard.append(own(p) == free_t)
            self.guard += [p != x for x in none]
        if len(picks) > 1:
            self.guard.append(z3.Distinct(*picks))
        owned_t = self.coerce(self.lang._in(owned, K_INT, "take_lowest_free"), odom)
        old_owner = self.next_fn(owner)
        self.next[owner] = lambda x, old=old_owner: z3.If(z3.Or([x == p for p in picks]), owned_t, old(x))
        if content is not None:
            _, _, cdom = self.sys._fields[content]
            filled_t = self.coerce(self.lang._in(filled, K_INT, "take_lowest_free"), cdom)
            old_content = self.next_fn(content)
            self.next[content] = lambda x, old=old_content: z3.If(z3.Or([x == p for p in picks]), filled_t, old(x))

    # -- state ------------------------------------------------------------------------------------
    def fn(self, name: str) -> Callable[..., Any]:
        """The pre-state function of a state or rigid symbol."""
        try:
            return getattr(self.st, name)
        except AttributeError:
            return self.sys._function_of(name)

    def next_fn(self, name: str) -> Callable[..., Any]:
        return self.next.get(name) or self.fn(name)

    def post_fn(self, name: str) -> Callable[..., Any]:
        if self.post is None:
            return self.next_fn(name)
        return getattr(self.post, name)

    def index_terms(self, name: str, idx: tuple[Any, ...]) -> list[Any]:
        """The symbol's arguments for the field's index ``idx``."""
        sym, dims, _ = self.sys._fields[name]
        if len(idx) != len(dims):
            raise SpecError(f"{caller()}: {name} takes {len(dims)} index(es), got {len(idx)}")
        out = []
        for (kind, d, extra), i in zip(dims, idx):
            if kind == "sorted":
                sort_name, none = self.sys.decl.sorts[d.name]
                if isinstance(i, Elem):
                    if i.sort_name != sort_name:
                        raise LiftRefused(f"{caller()}: {name}[...]: an element of {i.domain} indexes {d.name}")
                    out.append(i.term)
                elif isinstance(i, Value) and isinstance(i.raw, Num) and isinstance(i.raw.dom, RefDom) \
                        and i.raw.dom.sort_name == sort_name:
                    out.append(i.raw.term)
                elif isinstance(i, int) and not isinstance(i, bool) and i == d.size and none:
                    out.append(z3.Const(none, self.sys.sorts[sort_name]))
                elif isinstance(i, int) and not isinstance(i, bool) and i == 0 and d.name in self.sys.decl.firsts:
                    out.append(z3.Const(self.sys.decl.firsts[d.name], self.sys.sorts[sort_name]))
                elif isinstance(i, int) and not isinstance(i, bool):
                    raise LiftRefused(f"{caller()}: {name}[...]: the fixed index {i} into the sorted domain {d.name} "
                                      "(iterate the domain object, not range(...))")
                else:
                    raise LiftRefused(f"{caller()}: {name}[...]: {i!r} does not name an element of {d.name}")
            else:
                if not isinstance(i, int) or isinstance(i, bool):
                    raise LiftRefused(f"{caller()}: {name}[...]: {i!r} indexes the fixed domain {d.name} "
                                      "(only a fixed index may: the domain is not a sort)")
                if kind == "one":
                    if i != 0:
                        raise LiftRefused(f"{caller()}: {name}[...]: index {i} of the one-element domain {d.name}")
                else:
                    out.append(extra.code(i, f"{caller()}: {name}"))
        return out

    def read(self, name: str, idx: tuple[Any, ...], next_state: bool) -> Value:
        sym, dims, dom = self.sys._fields[name]
        args = self.index_terms(name, idx)
        f = self.next_fn(name) if next_state else self.fn(name)
        return Value(self.lang, Num(f(*args), dom), K_INT)

    def write(self, name: str, idx: tuple[Any, ...], value: Any) -> None:
        sym, dims, dom = self.sys._fields[name]
        where = caller()
        args = self.index_terms(name, idx)
        raw = value if isinstance(value, Num) else self.lang.number(value, name)
        v = self.coerce(raw, dom)
        old = self.next_fn(name)
        arg_vars = [self.loop_vars(a) for a in args]
        v_vars = self.loop_vars(v)
        every = set(v_vars).union(*arg_vars) if arg_vars else set(v_vars)
        if any(self.vars[i].closed for i in every):
            raise LiftRefused(f"{where}: {name}[...] = ...: a value of a finished loop's element is written "
                              "(write inside the loop, or aggregate it with o.all_/o.any_)")
        if not args:
            self.next[name] = lambda v=v: v
            return
        keep = self._sentinel_guard(name)  # the spec's sentinel row (NONE) never changes
        pointwise: dict[int, _Var] = {}
        through: list[int] = []
        for i, (a, vs) in enumerate(zip(args, arg_vars)):
            if not vs:
                continue
            if len(vs) == 1 and a.get_id() in self.vars:
                var = self.vars[a.get_id()]
                if var in pointwise.values():
                    raise LiftRefused(f"{where}: {name}[...]: one loop element indexes two positions")
                pointwise[i] = var
            else:
                through.append(i)
        fixed = [i for i in range(len(args)) if i not in pointwise and i not in through]
        if through:
            if pointwise or len(through) > 1:
                raise LiftRefused(f"{where}: {name}[...]: a write through a state-valued index beside another "
                                  "loop index")
            i = through[0]
            t = args[i]
            xsort = self.sys.sort(sym.args[i])
            x = z3.Const(f"{name}!x", xsort)
            vx = z3.substitute(v, (t, x))
            tv = [self.vars[j] for j in arg_vars[i]]
            if set(self.loop_vars(vx)) & set(arg_vars[i]):
                raise LiftRefused(f"{where}: {name}[...] = ...: the value written depends on the loop's element "
                                  "beyond the index it writes at")
            if _has_quantifier(vx):
                raise LiftRefused(f"{where}: {name}[...] = ...: a quantified value written through a state-valued index")
            members = self._members(tv)
            terms = [u.term for u in self._closure(tv)]
            hit = self.choice(f"{name}_at", (sym.args[i],), "Bool",
                              definition=lambda y, t=t, terms=terms, members=members:
                              self.sys.exists(terms, z3.And(*members, t == y)))

            def upd(*xs, i=i, vx=vx, x=x, hit=hit, old=old, fixed=fixed, args=args):
                match = [hit(xs[i])] + [xs[j] == args[j] for j in fixed] + keep(xs)
                return z3.If(z3.And(match), z3.substitute(vx, (x, xs[i])), old(*xs))
            self.next[name] = upd
            return
        if pointwise:
            pw = set(id(u) for u in pointwise.values())
            for vid in v_vars:
                if id(self.vars[vid]) not in pw:
                    raise LiftRefused(f"{where}: {name}[...] = ...: the value depends on a loop element that does not "
                                      "index the write (one slot written once per iteration)")
            members = []
            for u in pointwise.values():
                for vid in self.loop_vars(u.member):
                    if id(self.vars[vid]) not in pw:
                        raise LiftRefused(f"{where}: {name}[...]: the loop over one index depends on another loop's "
                                          "element that does not index the write")
                members.append(u.member)
            if _has_quantifier(v) or any(_has_quantifier(m) for m in members):
                raise LiftRefused(f"{where}: {name}[...] = ...: a quantified value written pointwise")
            pos = list(pointwise.items())

            def upd(*xs, v=v, members=members, old=old, fixed=fixed, args=args, pos=pos):
                pairs = [(u.term, xs[i]) for i, u in pos]
                match = [z3.substitute(m, *pairs) for m in members] + [xs[j] == args[j] for j in fixed] + keep(xs)
                return z3.If(z3.And(match), z3.substitute(v, *pairs), old(*xs))
            self.next[name] = upd
            return

        def upd(*xs, v=v, old=old, args=args):
            return z3.If(z3.And([x == a for x, a in zip(xs, args)] + keep(xs)), v, old(*xs))
        self.next[name] = upd

    def _sentinel_guard(self, name: str) -> Callable[[Sequence[Any]], list[Any]]:
        """For a field with a sentinel row: the condition that a write's last argument is not
        the sort's NONE (the spec keeps that row at its initial value)."""
        sym, dims, _ = self.sys._fields[name]
        f = self.sys.spec.layout.by_name[name]
        kind, d, _ = dims[-1]
        if not f.sentinel or kind != "sorted" or not self.sys.decl.sorts[d.name][1]:
            return lambda xs: []
        none = z3.Const(self.sys.decl.sorts[d.name][1], self.sys.sorts[self.sys.decl.sorts[d.name][0]])
        last = len(sym.args) - 1
        return lambda xs: [xs[last] != none]

    # -- choices -------------------------------------------------------------------------------------
    def choice(self, base: str, args: tuple[str, ...], result: str, definition: Callable | None = None,
               read_post: Callable | None = None) -> Callable[..., Any]:
        """A choice function of the step: defined (its definition becomes a guard conjunct), or
        free (the spec's successor names it: ``read_post`` reads it there, for the link)."""
        self.nchoice += 1
        sym = Symbol(f"{base}{self.nchoice}", args, result)
        self.choice_syms.append(sym)
        if self.mode == "witness":
            f = definition if definition is not None else read_post
            self.choice_defs[sym.name] = f
            return f
        if self.mode == "discover" or sym.name not in self.choices_in:
            g = self.sys.function(sym, "!discover")
            f = (lambda g=g: g) if not args else g
        else:
            f = self.choices_in[sym.name]
        if definition is not None:
            xs = [z3.Const(f"{sym.name}!x{i}", self.sys.sort(a)) for i, a in enumerate(args)]
            call = f(*xs) if args else f()
            self.guard.append(self.sys.forall(xs, call == definition(*xs)) if xs else call == definition())
        return f

    # -- loops and binding ---------------------------------------------------------------------
    def loop_vars(self, t: Any) -> frozenset[int]:
        """The loop elements (ids of their constants) occurring free in term ``t``."""
        if not isinstance(t, z3.ExprRef):
            return frozenset()
        memo = self._vars_memo
        key = t.get_id()
        if key in memo:
            return memo[key][1]
        if z3.is_const(t):
            out = frozenset([key]) if key in self.vars else frozenset()
        elif z3.is_quantifier(t):
            out = self.loop_vars(t.body())
        elif z3.is_app(t):
            out = frozenset().union(*[self.loop_vars(c) for c in t.children()]) if t.num_args() else frozenset()
        else:
            out = frozenset()
        memo[key] = (t, out)  # the term kept alive: Z3 reuses the ids of freed terms
        return out

    def _closure(self, vs: Sequence[_Var]) -> list[_Var]:
        """``vs`` and the loop elements their memberships mention (a chunk's request), in loop order."""
        out = {id(v): v for v in vs}
        todo = list(vs)
        while todo:
            v = todo.pop()
            for i in self.loop_vars(v.member):
                u = self.vars[i]
                if id(u) not in out and u.closed == v.closed:
                    out[id(u)] = u
                    todo.append(u)
        return sorted(out.values(), key=lambda u: u.order)

    def _members(self, vs: Sequence[_Var]) -> list[Any]:
        return [u.member for u in self._closure(vs)]

    def bind(self, t: Any, universal: bool) -> Any:
        """``t`` with the finished loops' elements it mentions bound (``∀``: ``all_``, ``∃``: ``any_``)."""
        closed = [self.vars[i] for i in self.loop_vars(t) if self.vars[i].closed]
        if not closed:
            return t
        group = self._closure(closed)
        terms = [u.term for u in group]
        members = [u.member for u in group]
        if universal:
            return self.sys.forall(terms, z3.Implies(z3.And(members), t))
        return self.sys.exists(terms, z3.And(*members, t))

    def joined(self, terms: list[Any], op: str, instead: str) -> list[Any]:
        """``terms`` about to be joined by ``op``: refused when one mentions a finished loop's
        element and another (not a constant) does not, which is a fold over the loop's list
        (``o.or_(x, *[f(r) for r in ...])``: the one symbolic element stands for every iteration,
        and only ``o.all_``/``o.any_`` say how they combine), not a condition per element."""
        closed = [frozenset(i for i in self.loop_vars(t) if self.vars[i].closed) for t in terms]
        every = frozenset().union(*closed) if closed else frozenset()
        for v in every:
            if any(v not in c and not (z3.is_true(t) or z3.is_false(t)) for t, c in zip(terms, closed)):
                raise LiftRefused(f"{caller()}: {op} joins a finished loop's element with values outside the loop "
                                  f"(a fold over the loop's list): use {instead}(...) over the loop")
        return terms

    def require(self, cond: Any) -> None:
        t = self.bool_(cond)
        vs = [self.vars[i] for i in self.loop_vars(t)]
        if any(u.closed for u in vs):
            raise LiftRefused(f"{caller()}: require: a condition on a finished loop's element "
                              "(aggregate it with o.all_ / o.any_)")
        if vs:
            group = self._closure(vs)
            t = self.sys.forall([u.term for u in group], z3.Implies(z3.And([u.member for u in group]), t))
        self.guard.append(t)

    def condition(self, t: Any) -> Value:
        return Value(self.lang, t, BOOL)

    # -- values ------------------------------------------------------------------------------------
    def bool_(self, x: Any) -> Any:
        if x is WIDE:
            raise LiftRefused(f"{caller()}: an over-approximated condition used other than as a guard "
                              "(s.require(helper(...)))")
        if isinstance(x, bool):
            return z3.BoolVal(x)
        if isinstance(x, z3.BoolRef):
            return x
        raise LiftRefused(f"{caller()}: expected a condition, got {x!r}")

    def dom_of(self, x: Any) -> Any:
        return x.dom if isinstance(x, Num) else None

    def coerce(self, x: Any, dom: Any) -> Any:
        """The term of ``x`` in value domain ``dom``."""
        where = caller()
        if isinstance(x, Value):
            x = x.raw
        if isinstance(x, Num):
            d = x.dom
            if d is dom:
                return x.term
            if isinstance(d, RefDom) and isinstance(dom, RefDom) and d.compatible(dom):
                return x.term
            if isinstance(d, EnumDom) and isinstance(dom, EnumDom):
                if d.sort_name == dom.sort_name:
                    return x.term
                out = dom.consts[0]
                for i in reversed(range(len(d.consts))):
                    if i < len(dom.consts):
                        out = z3.If(x.term == d.consts[i], dom.consts[i], out)
                return out
            if isinstance(d, SortDom) and isinstance(dom, SortDom) and d.name == dom.name:
                return x.term
            raise LiftRefused(f"{where}: a value of {d.name} used as one of {dom.name}")
        if isinstance(x, Poly):
            return x.make(dom)
        if isinstance(x, bool) or isinstance(x, z3.BoolRef):
            raise LiftRefused(f"{where}: a condition used as a number of {dom.name}")
        if isinstance(x, int):
            if isinstance(dom, EnumDom):
                return dom.code(x, where)
            if isinstance(dom, RefDom):
                if x == dom.none_code:
                    return dom.none
                raise LiftRefused(f"{where}: the fixed code {x} names one element of {dom.name}; a sort has no "
                                  "numbered elements")
            if isinstance(dom, IntDom):
                return z3.IntVal(x)
            raise LiftRefused(f"{where}: the number {x} used as a value of {dom.name}")
        if isinstance(x, Elem):
            if isinstance(dom, RefDom) and dom.offset == 0 and dom.sort_name == x.sort_name:
                return x.term
            raise LiftRefused(f"{where}: the element {x} used as a value of {dom.name}")
        if isinstance(x, Code):
            if isinstance(dom, RefDom) and dom.offset == x.offset and dom.sort_name == x.elem.sort_name:
                return x.elem.term
            raise LiftRefused(f"{where}: the code {x} used as a value of {dom.name}")
        raise LiftRefused(f"{where}: {x!r} is not a value of the lift")

    def lookup(self, table: Sequence[int], idx: Any) -> Any:
        for tbl, index, fname, result in self.sys.decl.tables:
            if tbl is not table:
                continue
            if index in self.sys.decl.sorts:
                if not isinstance(idx, Elem) or idx.domain != index:
                    raise LiftRefused(f"{caller()}: lookup in the table of {fname}: expected an element of {index}")
                term, domains = idx.term, (index,)
            else:
                dom = self.sys._value_dom_named(index)
                term = self.coerce(idx, dom)
                domains = (self.sys.decl.refs[index][0],)
            sort_name = self.sys.decl.sorts[domains[0]][0]
            sym = Symbol(fname, (sort_name,), result)
            f = self.sys._rigid_symbol(RigidInfo(sym, "table", tbl if index in self.sys.decl.sorts else None, domains))
            return Num(f(self.st)(term), self.sys._result_dom(result))
        if isinstance(idx, Num) and isinstance(idx.dom, EnumDom):
            n = len(idx.dom.consts)

            def make(dom, idx=idx, table=tuple(table)):
                out = self.coerce(table[0], dom)
                for i in reversed(range(min(n, len(table)))):
                    out = z3.If(idx.term == idx.dom.consts[i], self.coerce(table[i], dom), out)
                return out
            return Poly(make)
        raise LiftRefused(f"{caller()}: lookup in a table the protocol does not declare, at a sorted value")

    # -- running ------------------------------------------------------------------------------------
    def execute_action(self, spec: Any, name: str, params: Sequence[tuple[str, Any]]) -> bool:
        """Run action ``name``: ``params`` are (domain param name, constant or fixed int)."""
        args = []
        for p, v in params:
            if isinstance(v, int):
                args.append(v)
                continue
            d = spec.domain(p)
            sort_name, none = self.sys.decl.sorts[d.name]
            if none:
                self.guard.append(v != z3.Const(none, self.sys.sorts[sort_name]))
            args.append(Elem(self, v, sort_name, d.name))
        token = _ACTIVE.set(self)
        try:
            getattr(spec, name)(SortedPre(self), SortedPost(self), *args)
        except StaticallyDisabled:
            return False
        except (TypeError, IndexError, KeyError, ValueError) as e:
            if isinstance(e, SpecError):
                raise
            # plain Python on a lifted value (range() of a symbolic size, a table indexed by an
            # element): the spec's line that did it, refused like any construct the lift lacks
            raise LiftRefused(f"{_spec_line(e)}: {type(e).__name__}: {e} (plain Python on a lifted value)") from None
        finally:
            _ACTIVE.reset(token)
        return True

    def execute_claim(self, spec: Any, name: str) -> Any:
        token = _ACTIVE.set(self)
        try:
            value = getattr(spec, name)(SortedPre(self))
        finally:
            _ACTIVE.reset(token)
        t = self.bool_(value.raw if isinstance(value, Value) else value)
        if self.loop_vars(t):
            raise LiftRefused(f"claim {name}: a loop's element is left unbound (aggregate with o.all_ / o.any_)")
        return t

    def step(self) -> Step:
        return Step(z3.And(self.guard) if self.guard else z3.BoolVal(True), dict(self.next))


class _Decided(Value):
    """A rigid condition: Python control flow on it is a case split of the lifted action."""

    __slots__ = ("key", "label", "elems")

    def __init__(self, lang: SpecOps, raw: Any, kind: str, key: Any, label: str, elems: Sequence[Elem]):
        super().__init__(lang, raw, kind)
        self.key, self.label, self.elems = key, label, elems

    def __bool__(self) -> bool:
        return self.lang.raw.run.decide(self.key, self.label, self.raw, self.elems)


class LiftedSystem(ParametricSystem):
    """The parametric system lifted from one spec instance (see the module docstring)."""

    one_goal_at_a_time = True
    """Houdini asks about one post-state candidate at a time: Z3 answers hundreds of single-goal
    queries where the one disjunctive query does not finish (the answers mean the same)."""

    def __init__(self, spec: Any, decl: SortDecl, claims: Sequence[str] | None = None,
                 pins: dict[str, bool] | None = None):
        self.spec, self.decl = spec, decl
        self.pins: dict[str, bool] = dict(pins or {})
        """Rigid conditions (:func:`~.lifting.per_element` ``"condition"`` methods, by name) fixed
        at one value for every element: each is that Python bool in the lift, no symbol and no
        case split (``over_long`` false: no request of any size is over-long)."""
        self.sorts: dict[str, Any] = {}
        self.enums: dict[str, tuple[str, ...]] = {}
        self.abstractions: list[str] = []
        self.refused: dict[str, str] = {}
        self.cases: dict[str, LiftedCase] = {}
        self._rigid: dict[str, RigidInfo] = {}
        self._definitions: dict[str, list[tuple[list[Any], list[Any], Any, str]]] = {}
        self._at_least_one: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {}
        """The counts declared ``at_least_one`` (:func:`~.lifting.per_element`): symbol name ->
        (argument sorts, their domains, the counted domain)."""
        self._doms: dict[str, Any] = {}
        uninterpreted = []
        for dom, (sort_name, none) in decl.sorts.items():
            self.sorts[sort_name] = z3.DeclareSort(sort_name)
            uninterpreted.append(sort_name)
        for _, _, _, result in decl.tables:
            if result not in self.sorts:
                self.sorts[result] = z3.DeclareSort(result)
                uninterpreted.append(result)
        self.uninterpreted = tuple(uninterpreted)
        self.constants = tuple((none, sort_name) for sort_name, none in decl.sorts.values() if none) + tuple(
            (first, decl.sorts[dom][0]) for dom, first in decl.firsts.items())
        self._fields: dict[str, tuple[Symbol, list[tuple[str, Any, Any]], Any]] = {}
        symbols = []
        for f in spec.layout.fields:
            dims, args = [], []
            for j, d in enumerate(f.dims):
                if d.name in decl.sorts:
                    dims.append(("sorted", d, None))
                    args.append(decl.sorts[d.name][0])
                elif d.size == 1 and not (f.sentinel and j == len(f.dims) - 1):
                    dims.append(("one", d, None))
                else:
                    ed = self._enum_dom(d)
                    dims.append(("fixed", d, ed))
                    args.append(ed.sort_name)
            dom = self._value_dom(f.values)
            sym = Symbol(f.name, tuple(args), self._result_name(dom))
            self._fields[f.name] = (sym, dims, dom)
            symbols.append(sym)
        self.symbols = tuple(symbols)
        self.rigid = ()
        self.actions = tuple(self._lift_actions())
        self._claims = self._lift_claims(claims)
        self.rigid = tuple(r.symbol for r in self._rigid.values())

    # -- domains --------------------------------------------------------------------------------
    def _enum_dom(self, d: Any) -> EnumDom:
        key = ("enum", d.name, d.size, d.labels)
        if key not in self._doms:
            labels = d.labels or tuple(str(i) for i in range(d.size))
            name, sort, consts = enum_sort(d.name, labels)
            self.sorts[name] = sort
            self.enums[name] = tuple(str(c) for c in consts)
            self._doms[key] = EnumDom(d.name, name, sort, tuple(consts))
        return self._doms[key]

    def _value_dom(self, d: Any) -> Any:
        if d.name in self.decl.refs:
            key = ("ref", d.name)
            if key not in self._doms:
                index, none_code, offset = self.decl.refs[d.name]
                sort_name, none = self.decl.sorts[index]
                sort = self.sorts[sort_name]
                self._doms[key] = RefDom(d.name, sort_name, sort, z3.Const(none, sort) if none else None,
                                         d.size - 1 if none_code is None else none_code, offset)
            return self._doms[key]
        return self._enum_dom(d)

    def _value_dom_named(self, name: str) -> Any:
        for key, dom in self._doms.items():
            if key[0] == "ref" and key[1] == name:
                return dom
        raise LiftRefused(f"no value domain {name} among the state's fields")

    def _result_dom(self, result: str) -> SortDom:
        return SortDom(result, self.sorts[result])

    @staticmethod
    def _result_name(dom: Any) -> str:
        return dom.sort_name

    def _rigid_symbol(self, info: RigidInfo) -> Callable[[QState], Callable[..., Any]]:
        old = self._rigid.get(info.symbol.name)
        if old is None or (old.source is None and info.source is not None and old.symbol == info.symbol):
            self._rigid[info.symbol.name] = info
        elif old.symbol != info.symbol:
            raise LiftRefused(f"the rigid symbol {info.symbol.name} is used with two signatures")
        name = info.symbol.name

        def get(st: QState) -> Callable[..., Any]:
            try:
                return getattr(st, name)
            except AttributeError:
                return self._function_of(name)
        return get

    def _function_of(self, name: str) -> Callable[..., Any]:
        sym = self._rigid[name].symbol
        f = self.function(sym)
        return (lambda: f) if not sym.args else f

    def _define(self, fn: Callable, spec: Any, result: str, sorts: tuple[str, ...], domains: tuple[str, ...]) -> None:
        """The definition of a derived per-element fact: its body run for fresh parameters under
        every case of its split, each case an axiom ``∀ args. case → (symbol(args) = value)``
        (:meth:`background`)."""
        name = fn.__name__
        if name in self._definitions:
            return
        self._definitions[name] = []
        pending: list[tuple[bool, ...]] = [()]
        while pending:
            dec = pending.pop(0)
            run = _Run(self, self.state(), "define", decisions=dec)
            terms = [z3.Const(f"{name}!{d}{i}", self.sorts[s]) for i, (s, d) in enumerate(zip(sorts, domains))]
            elems = [Elem(run, t, s, d) for t, s, d in zip(terms, sorts, domains)]
            token = _ACTIVE.set(run)
            try:
                value = fn(spec, *elems)
            finally:
                _ACTIVE.reset(token)
            for i in range(len(dec), len(run.taken)):
                pending.append(tuple(b for _, b in run.taken[:i]) + (not run.taken[i][1],))
            nones = [t != z3.Const(self.decl.sorts[d][1], self.sorts[s]) for t, s, d in zip(terms, sorts, domains)
                     if self.decl.sorts[d][1]]
            self._definitions[name].append((terms, nones + run.guard, value, result))

    def background(self, st: QState) -> Any:
        """The definitions of the derived per-element facts (:meth:`_define`), over ``st``'s
        rigid symbols (expanded in a bounded instance)."""
        axioms = []
        for name, cases in self._definitions.items():
            for terms, conds, value, result in cases:
                try:
                    f = getattr(st, name)
                except AttributeError:  # a state made before the symbol was found
                    f = self._function_of(name)
                if result == "condition":
                    v = value.raw if isinstance(value, Value) else z3.BoolVal(bool(value))
                    axioms.append(self.forall(terms, z3.Implies(z3.And(conds), f(*terms) == v)))
                    continue
                dom = result.split(":", 1)[1]
                c = z3.Const(f"{name}!c", self.sorts[self.decl.sorts[dom][0]])
                if isinstance(value, Card):
                    member = value.member(c)
                elif isinstance(value, int) and value == 0:
                    member = z3.BoolVal(False)
                elif isinstance(value, int) and value == 1 and dom in self.decl.firsts:
                    member = c == z3.Const(self.decl.firsts[dom], self.sorts[self.decl.sorts[dom][0]])
                else:
                    raise LiftRefused(f"{name}: a count of {value!r} {dom} (only 0, 1 or a per-element count lifts)")
                axioms.append(self.forall([*terms, c], z3.Implies(z3.And(conds), f(*terms, c) == member)))
        # a count that is never 0 counts its domain's first index; stated only where a derived count
        # is defined (one may name that index: a placeholder's first chunk), so that a model with no
        # derived count, and its certificates, stay as they were
        for name, (sorts, domains, dom) in (self._at_least_one.items() if self._definitions else ()):
            if dom not in self.decl.firsts:
                continue
            try:
                f = getattr(st, name)
            except AttributeError:  # a state made before the symbol was found
                f = self._function_of(name)
            terms = [z3.Const(f"{name}!{d}{i}", self.sorts[s]) for i, (s, d) in enumerate(zip(sorts, domains))]
            nones = [t != z3.Const(self.decl.sorts[d][1], self.sorts[s]) for t, s, d in zip(terms, sorts, domains)
                     if self.decl.sorts[d][1]]
            first = z3.Const(self.decl.firsts[dom], self.sorts[self.decl.sorts[dom][0]])
            axioms.append(self.forall(terms, z3.Implies(z3.And(nones), f(*terms, first))))
        return z3.And(axioms) if axioms else z3.BoolVal(True)

    def _abstraction(self, line: str) -> None:
        if line not in self.abstractions:
            self.abstractions.append(line)

    @property
    def rigid_info(self) -> dict[str, RigidInfo]:
        """The rigid symbols and how a spec instance fixes them."""
        return dict(self._rigid)

    # -- actions ----------------------------------------------------------------------------------
    def _lift_actions(self) -> list[Action]:
        spec, decl = self.spec, self.decl
        out = []
        for a in spec.actions:
            sorted_params = [(p, decl.sorts[spec.domain(p).name][0]) for p in a.params if spec.domain(p).name in decl.sorts]
            fixed = [p for p in a.params if spec.domain(p).name not in decl.sorts]
            for values in itertools.product(*[range(spec.domain(p).size) for p in fixed]):
                fixed_vals = dict(zip(fixed, values))
                base = a.name + "".join(f"@{spec.domain(p).label(v)}" for p, v in fixed_vals.items()
                                        if spec.domain(p).size > 1)
                pending: list[tuple[bool, ...]] = [()]
                while pending:
                    dec = pending.pop(0)
                    run = _Run(self, self.state(), "discover", decisions=dec)
                    params = self._params(run, a, sorted_params, fixed_vals, None)
                    try:
                        ok = run.execute_action(spec, a.name, params)
                    except LiftRefused as e:
                        raise LiftRefused(f"{e} (action {a.name})") from None
                    taken = run.taken
                    for i in range(len(dec), len(taken)):
                        pending.append(tuple(b for _, b in taken[:i]) + (not taken[i][1],))
                    if not ok:
                        continue
                    label = "".join(f".{'' if b else 'not_'}{n}" for n, b in taken)
                    name = base + label
                    case = LiftedCase(a.name, fixed_vals, tuple(taken))
                    self.cases[name] = case
                    out.append(Action(name, tuple(sorted_params), tuple(run.choice_syms),
                                      self._stepper(a.name, sorted_params, fixed_vals, tuple(b for _, b in taken)),
                                      a.doc))
        return out

    def _params(self, run: _Run, a: Any, sorted_params, fixed_vals, given: dict[str, Any] | None) -> list:
        out = []
        for p in a.params:
            if p in fixed_vals:
                out.append((p, fixed_vals[p]))
            else:
                sort = self.sorts[dict(sorted_params)[p]]
                out.append((p, given[p] if given is not None else z3.Const(f"{a.name}!{p}", sort)))
        return out

    def _stepper(self, name: str, sorted_params, fixed_vals, decisions) -> Callable:
        action = next(x for x in self.spec.actions if x.name == name)

        def step(st: QState, params: dict[str, Any], choices: dict[str, Any]) -> Step:
            run = _Run(self, st, "step", choices=choices, decisions=decisions)
            run.execute_action(self.spec, name, self._params(run, action, sorted_params, fixed_vals, params))
            return run.step()
        return step

    def witness(self, action: Action, st: QState, params: dict[str, Any], post: QState) -> dict[str, Any]:
        """The choice functions of ``action`` from pre-state ``st`` to ``post`` (the link's
        witnesses): each defined one its definition, each free one read off ``post``."""
        case = self.cases[action.name]
        spec_action = next(x for x in self.spec.actions if x.name == case.spec_action)
        run = _Run(self, st, "witness", decisions=tuple(b for _, b in case.decisions), post=post)
        run.execute_action(self.spec, case.spec_action, self._params(run, spec_action, action.params, case.fixed, params))
        return dict(run.choice_defs)

    # -- Init and claims ----------------------------------------------------------------------------
    def init(self, st: QState) -> Any:
        """Every field at its initial code, at every argument."""
        parts = []
        for f in self.spec.layout.fields:
            sym, dims, dom = self._fields[f.name]
            xs = [z3.Const(f"{f.name}!i{i}", self.sort(a)) for i, a in enumerate(sym.args)]
            run = _Run(self, st, "init")
            value = run.coerce(f.init, dom)
            fn = getattr(st, f.name)
            lhs = fn(*xs) if xs else fn()
            parts.append(self.forall(xs, lhs == value) if xs else lhs == value)
        return z3.And(parts)

    def _lift_claims(self, names: Sequence[str] | None) -> list[Candidate]:
        out = []
        for c in self.spec.claims:
            if c.kind != "invariant" or c.at != "always" or (names is not None and c.name not in names):
                continue
            try:
                run = _Run(self, self.state(), "claim")
                t = run.execute_claim(self.spec, c.name)
                if z3.is_true(t) or z3.is_false(t):
                    raise LiftRefused(f"claim {c.name}: reads no state in the lift (it decides on the lifted "
                                      "instance's own elements, e.g. for r in range(k.R) if ...: iterate the domain)")
            except LiftRefused as e:
                self.refused[c.name] = str(e)
                continue
            out.append(self._candidate(c.name, t))
        return out

    def _candidate(self, name: str, t: Any) -> Candidate:
        def formula(st: QState) -> Any:
            saved, self.universe = self.universe, None
            try:
                return _Run(self, st, "claim").execute_claim(self.spec, name)
            finally:
                self.universe = saved
        def bounded(term: Any) -> Any:  # in a bounded instance every quantifier left is expanded
            return ground(term, self.universe) if self.universe is not None else term

        if z3.is_quantifier(t) and t.is_forall():
            vars_ = tuple((t.var_name(i), t.var_sort(i).name()) for i in range(t.num_vars()))

            def body(st: QState, *xs: Any) -> Any:
                q = formula(st)
                if self.universe is None:
                    return z3.substitute_vars(q.body(), *reversed(xs))
                # ground the inner quantifiers at constants, then put the arguments back (they may
                # be de Bruijn variables, which no quantifier may capture)
                ks = [z3.FreshConst(x.sort(), "claim") for x in xs]
                b = bounded(z3.substitute_vars(q.body(), *reversed(ks)))
                return z3.substitute(b, *zip(ks, xs)) if ks else b
            return Candidate(name, vars_, body, True)
        return Candidate(name, (), lambda st: bounded(formula(st)), True)

    def claims(self) -> list[Candidate]:
        """The spec's invariants that lift (those refused are in :attr:`refused`)."""
        return list(self._claims)


def lift_spec(spec: Any, decl: SortDecl | None = None, claims: Sequence[str] | None = None,
              pins: dict[str, bool] | None = None) -> LiftedSystem:
    """The lifted model of ``spec`` (an instance of a protocol; ``decl`` by default its
    ``lift_sorts()``): every action, and the invariants named in ``claims`` (default: every
    always-invariant that lifts); the rigid conditions named in ``pins`` fixed at the value given
    for every element (:attr:`LiftedSystem.pins`).  :class:`~.lifting.LiftRefused` (one line,
    the spec's file and line) when an action cannot be lifted."""
    decl = decl if decl is not None else spec.lift_sorts()
    if decl is None:
        raise LiftRefused(f"{type(spec).__name__} declares no sorts to lift to (lift_sorts)")
    return LiftedSystem(spec, decl, claims, pins)


def _spec_line(e: BaseException) -> str:
    """``file:line`` of the innermost frame of ``e``'s traceback in the spec or variant (outside
    the language's own modules, Python's library and installed packages): where a spec's plain
    Python met a lifted value."""
    import sysconfig
    import traceback

    from kvproof.model.expr import _language_files

    inside = _language_files()
    skip = tuple(os.path.normcase(os.path.abspath(sysconfig.get_paths()[k])) for k in ("stdlib", "purelib", "platlib"))
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        path = os.path.normcase(os.path.abspath(frame.filename))
        if path in inside or path.startswith(skip) or frame.filename.startswith("<"):
            continue
        rel = os.path.relpath(frame.filename)
        return f"{frame.filename if rel.startswith('..') else rel}:{frame.lineno}"
    return "<spec>"
