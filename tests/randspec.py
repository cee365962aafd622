"""Random specs for the differential tests: layouts, actions, overrides and claims.

:func:`specs` draws a whole protocol as data (a :class:`Plan`): index and value domains,
fields (scalars, one- and two-dimensional arrays, rows with a NONE sentinel), actions over
parameter domains whose bodies are statements - guards, plain Python branches on parameters,
static disabling, conditional writes, two writes to one slot, writes that restore the
pre-state, writes that read back what the action wrote, writes at an index read from the state
blocks whose guards are widened (``with s.widen(c):``, nested, static disabling inside)
- an optional subclass that overrides actions around ``super()`` (possibly widening its guard),
and claims (invariants,
witnesses, a quiescent invariant, a liveness claim).  :func:`build` turns a plan into a
:class:`~kvproof.model.framework.Spec` subclass whose methods interpret the statements through
the language, choosing at random between operators (``a == b``, ``&``) and the facade's
methods (``o.eq``, ``o.and_``), which must mean the same.

Every drawn spec is well formed by construction: numbers written into a field stay within its
codes, and indices within their rows, so that every interpretation must agree on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from kvproof.model.framework import Spec, action, invariant, liveness, witness
from kvproof.model.layout import Domain, Field

__all__ = ["Plan", "specs", "build", "states"]


# -- expressions as data ------------------------------------------------------------------------
# Numbers: ("const", c) ("param", k) ("read", f, idx) ("read_at", f, lead, N) ("next", f, idx)
#   ("ite", B, N, N) ("min", N, N) ("max", N, N) ("add", N, N) ("sub", N, k) ("lookup", table, N)
#   ("count", [B...]) ("oite", B, N, N)  (o.ite spelled through the facade)
# Conditions: ("true",) ("false",) ("cmp", op, N, N, syntax) ("and", [B...], syntax)
#   ("or", [B...], syntax) ("not", B, syntax) ("implies", B, B) ("is_in", N, values)
#   ("all", [B...]) ("any", [B...]) ("beq", B, B) ("pcmp", k, c)  (a plain test on a parameter)
# Statements: ("require", B) ("write", f, idx, N) ("write_at", f, lead, N_index, N_value)
#   ("if_param", k, c, [stmts]) ("disable_if", k, c) ("widen", B, [stmts])

CMP = ("==", "!=", "<", "<=", ">", ">=")


@dataclass
class FieldPlan:
    """One field: index domain sizes, value count, initial code, sentinel."""

    name: str
    dims: tuple[int, ...]
    values: int
    init: int
    sentinel: bool


@dataclass
class ActionPlan:
    """One action: parameter domains (indices into the index domains) and statements."""

    name: str
    params: tuple[int, ...]
    body: list
    fair: bool


@dataclass
class Plan:
    """A whole random protocol; ``override`` holds, per action name, the statements a subclass
    runs before and after ``super()`` and the condition that widens ``super()``'s guard (or
    ``None``)."""

    index_sizes: tuple[int, ...]
    fields: list[FieldPlan]
    actions: list[ActionPlan]
    invariants: list[Any]
    witnesses: list[Any]
    quiescent: Any
    live: list[Any]
    override: dict[str, tuple[list, list, Any]] = field(default_factory=dict)

    def slots(self) -> int:
        """How many slots the layout has."""
        total = 0
        for f in self.fields:
            rows = 1
            for d in f.dims[:-1]:
                rows *= self.index_sizes[d]
            total += rows * ((self.index_sizes[f.dims[-1]] + f.sentinel) if f.dims else 1)
        return total


# -- drawing --------------------------------------------------------------------------------------
class _Ctx:
    def __init__(self, plan_fields, index_sizes, params, writable_next):
        self.fields = plan_fields
        self.sizes = index_sizes
        self.params = params  # index domain of each parameter
        self.next = writable_next  # may read the next state (in action bodies)


def _fixed_index(draw, ctx: _Ctx, dims: tuple[int, ...]) -> list:
    """Each index: a constant of its domain, or a parameter over the same domain."""
    out = []
    for d in dims:
        same = [k for k, p in enumerate(ctx.params) if p == d]
        if same and draw(st.booleans()):
            out.append(("p", draw(st.sampled_from(same))))
        else:
            out.append(draw(st.integers(0, ctx.sizes[d] - 1)))
    return out


def number(draw, ctx: _Ctx, hi: int, depth: int) -> Any:
    """A number expression whose value always lies in ``0..hi``."""
    options = ["const"]
    fits = [f for f in ctx.fields if f.values - 1 <= hi]
    if fits:
        options += ["read"] * 3
        if any(f.dims for f in fits):
            options.append("read_at")
        if ctx.next:
            options.append("next")
    if any(ctx.sizes[p] - 1 <= hi for p in ctx.params):
        options.append("param")
    if depth > 0:
        options += ["ite", "oite", "min", "max", "lookup"]
        if hi >= 1:
            options += ["add", "sub", "count"]
    kind = draw(st.sampled_from(options))
    if kind == "const":
        return ("const", draw(st.integers(0, hi)))
    if kind == "param":
        ks = [k for k, p in enumerate(ctx.params) if ctx.sizes[p] - 1 <= hi]
        return ("param", draw(st.sampled_from(ks)))
    if kind in ("read", "next"):
        f = draw(st.sampled_from(fits))
        return (kind, f.name, _fixed_index(draw, ctx, f.dims))
    if kind == "read_at":
        f = draw(st.sampled_from([f for f in fits if f.dims]))
        lead = _fixed_index(draw, ctx, f.dims[:-1])
        row = ctx.sizes[f.dims[-1]] + (1 if f.sentinel else 0)  # a NONE index reads the sentinel
        return ("read_at", f.name, lead, number(draw, ctx, row - 1, depth - 1))
    if kind in ("ite", "oite"):
        return (kind, cond(draw, ctx, depth - 1), number(draw, ctx, hi, depth - 1), number(draw, ctx, hi, depth - 1))
    if kind in ("min", "max"):
        return (kind, number(draw, ctx, hi, depth - 1), number(draw, ctx, hi, depth - 1))
    if kind == "add":
        a = draw(st.integers(0, hi))
        return ("add", number(draw, ctx, a, depth - 1), number(draw, ctx, hi - a, depth - 1))
    if kind == "sub":
        k = draw(st.integers(1, hi))
        return ("sub", number(draw, ctx, hi, depth - 1), k)
    if kind == "lookup":
        n = draw(st.integers(1, 4))
        table = tuple(draw(st.lists(st.integers(0, hi), min_size=n, max_size=n)))
        return ("lookup", table, number(draw, ctx, n - 1, depth - 1))
    n = draw(st.integers(0, min(hi, 3)))
    return ("count", [cond(draw, ctx, depth - 1) for _ in range(n)])


def cond(draw, ctx: _Ctx, depth: int) -> Any:
    """A condition expression."""
    options = ["cmp", "cmp", "cmp", "true", "false"]
    if ctx.params:
        options.append("pcmp")
    if depth > 0:
        options += ["and", "or", "not", "implies", "is_in", "all", "any", "beq"]
    kind = draw(st.sampled_from(options))
    d = max(depth - 1, 0)
    if kind in ("true", "false"):
        return (kind,)
    if kind == "pcmp":
        k = draw(st.integers(0, len(ctx.params) - 1))
        return ("pcmp", k, draw(st.integers(0, ctx.sizes[ctx.params[k]] - 1)))
    if kind == "cmp":
        hi = draw(st.integers(0, 4))
        return ("cmp", draw(st.sampled_from(CMP)), number(draw, ctx, hi, d), number(draw, ctx, hi, d),
                draw(st.booleans()))
    if kind in ("and", "or"):
        return (kind, [cond(draw, ctx, d) for _ in range(draw(st.integers(0, 3)))], draw(st.booleans()))
    if kind == "not":
        return ("not", cond(draw, ctx, d), draw(st.booleans()))
    if kind in ("implies", "beq"):
        return (kind, cond(draw, ctx, d), cond(draw, ctx, d))
    if kind == "is_in":
        hi = draw(st.integers(0, 4))
        return ("is_in", number(draw, ctx, hi, d), tuple(draw(st.lists(st.integers(0, hi), max_size=3))))
    return (kind, [cond(draw, ctx, d) for _ in range(draw(st.integers(0, 3)))])


def statements(draw, ctx: _Ctx, n: int, depth: int = 2) -> list:
    """``n`` statements of an action body."""
    out = []
    for _ in range(n):
        options = ["require", "write", "write", "write", "cond_write", "restore"]
        if any(f.dims for f in ctx.fields):
            options.append("write_at")
        if ctx.params:
            options += ["if_param", "disable_if"]
        if depth > 0:
            options.append("widen")
        kind = draw(st.sampled_from(options))
        if kind == "require":
            out.append(("require", cond(draw, ctx, depth)))
        elif kind in ("write", "cond_write", "restore"):
            f = draw(st.sampled_from(ctx.fields))
            idx = _fixed_index(draw, ctx, f.dims)
            if kind == "write":
                value = number(draw, ctx, f.values - 1, depth)
            elif kind == "cond_write":  # o.ite(c, v, <what the slot holds: before or after this step>)
                keep = ("next" if draw(st.booleans()) else "read", f.name, idx)
                value = ("oite", cond(draw, ctx, depth), number(draw, ctx, f.values - 1, depth), keep)
            else:  # write the slot, then put its pre-state value back
                out.append(("write", f.name, idx, number(draw, ctx, f.values - 1, depth)))
                value = ("read", f.name, idx)
            out.append(("write", f.name, idx, value))
        elif kind == "write_at":
            f = draw(st.sampled_from([f for f in ctx.fields if f.dims]))
            lead = _fixed_index(draw, ctx, f.dims[:-1])
            where = number(draw, ctx, ctx.sizes[f.dims[-1]] - 1, depth - 1)  # never the sentinel
            out.append(("write_at", f.name, lead, where, number(draw, ctx, f.values - 1, depth)))
        elif kind == "widen":
            out.append(("widen", cond(draw, ctx, depth - 1), statements(draw, ctx, draw(st.integers(1, 3)), depth - 1)))
        elif kind == "if_param":
            k = draw(st.integers(0, len(ctx.params) - 1))
            c = draw(st.integers(0, ctx.sizes[ctx.params[k]] - 1))
            out.append(("if_param", k, c, statements(draw, ctx, draw(st.integers(1, 2)), depth - 1)))
        else:
            k = draw(st.integers(0, len(ctx.params) - 1))
            out.append(("disable_if", k, draw(st.integers(0, ctx.sizes[ctx.params[k]] - 1))))
    return out


@st.composite
def specs(draw, max_slots: int = 14) -> Plan:
    """A random, well-formed protocol (see the module docstring)."""
    index_sizes = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    fields: list[FieldPlan] = []
    for i in range(draw(st.integers(1, 4))):
        ndim = draw(st.sampled_from([0, 0, 1, 1, 2]))
        dims = tuple(draw(st.integers(0, len(index_sizes) - 1)) for _ in range(ndim))
        values = draw(st.integers(1, 4))
        fields.append(FieldPlan(f"f{i}", dims, values, draw(st.integers(0, values - 1)),
                                bool(dims) and draw(st.booleans())))
    plan = Plan(index_sizes, fields, [], [], [], None, [])
    while plan.slots() > max_slots and len(plan.fields) > 1:
        plan.fields.pop()
    if plan.slots() > max_slots:
        plan.fields = [FieldPlan("f0", (), plan.fields[0].values, plan.fields[0].init, False)]
    for a in range(draw(st.integers(1, 4))):
        params = tuple(draw(st.lists(st.integers(0, len(index_sizes) - 1), max_size=2)))
        ctx = _Ctx(plan.fields, index_sizes, params, True)
        plan.actions.append(ActionPlan(f"act{a}", params, statements(draw, ctx, draw(st.integers(1, 4))),
                                       draw(st.booleans())))
    claim_ctx = _Ctx(plan.fields, index_sizes, (), False)
    plan.invariants = [cond(draw, claim_ctx, 2) for _ in range(draw(st.integers(1, 2)))]
    plan.witnesses = [cond(draw, claim_ctx, 2) for _ in range(draw(st.integers(0, 1)))]
    plan.quiescent = cond(draw, claim_ctx, 1) if draw(st.booleans()) else None
    plan.live = [cond(draw, claim_ctx, 1) for _ in range(draw(st.integers(0, 2)))]
    for a in plan.actions:
        if draw(st.integers(0, 2)) == 0:
            ctx = _Ctx(plan.fields, index_sizes, a.params, True)
            before = statements(draw, ctx, draw(st.integers(0, 1)))
            after = statements(draw, ctx, draw(st.integers(0, 2)))
            widen = cond(draw, ctx, 1) if draw(st.booleans()) else None
            plan.override[a.name] = (before, after, widen)
    return plan


def states(plan: Plan, spec: Spec):
    """A strategy of well-typed states of ``spec`` (sentinels at their initial value)."""
    layout = spec.layout
    parts = []
    for f in layout.fields:
        cols = f.row - (1 if f.sentinel else 0)
        for _ in range(f.rows):
            parts += [st.integers(0, f.values.size - 1)] * cols
            if f.sentinel:
                parts.append(st.just(f.init))
    return st.tuples(*parts)


# -- interpreting the plan through the language -------------------------------------------------
class _Eval:
    def __init__(self, s, n, args):
        self.s, self.n, self.o, self.args = s, n, s.ops, args

    def _idx(self, idx) -> tuple:
        return tuple(self.args[i[1]] if isinstance(i, tuple) else i for i in idx)

    def num(self, e) -> Any:
        k, o = e[0], self.o
        if k == "const":
            return e[1]
        if k == "param":
            return self.args[e[1]]
        if k in ("read", "next"):
            state = self.s if k == "read" else self.n
            idx = self._idx(e[2])
            view = getattr(state, e[1])
            return view if not idx else view[idx if len(idx) > 1 else idx[0]]
        if k == "read_at":
            idx = (*self._idx(e[2]), self.num(e[3]))
            view = getattr(self.s, e[1])
            return view[idx if len(idx) > 1 else idx[0]]
        if k in ("ite", "oite"):
            return o.ite(self.cond(e[1]), self.num(e[2]), self.num(e[3]))
        if k == "min":
            return o.min_(self.num(e[1]), self.num(e[2]))
        if k == "max":
            return o.max_(self.num(e[1]), self.num(e[2]))
        if k == "add":
            a, b = self.num(e[1]), self.num(e[2])
            return a + b if _is_value(a) else o.add(a, b)
        if k == "sub":
            x = self.num(e[1])
            return o.ite(o.ge(x, e[2]), _minus(o, x, e[2]), 0)
        if k == "lookup":
            return o.lookup(e[1], self.num(e[2]))
        if k == "count":
            return o.count(self.cond(c) for c in e[1])
        raise AssertionError(e)

    def cond(self, e) -> Any:
        k, o = e[0], self.o
        if k == "true":
            return True
        if k == "false":
            return False
        if k == "pcmp":
            return self.args[e[1]] == e[2]
        if k == "cmp":
            a, b = self.num(e[2]), self.num(e[3])
            if e[4] and (_is_value(a) or _is_value(b)):  # operator syntax (needs a value on one side)
                return {"==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
                        ">": lambda: a > b, ">=": lambda: a >= b}[e[1]]()
            name = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}[e[1]]
            return getattr(o, name)(a, b)
        if k in ("and", "or"):
            xs = [self.cond(x) for x in e[1]]
            if e[2] and len(xs) >= 2 and any(_is_value(x) for x in xs[:2]):
                out = xs[0] & xs[1] if k == "and" else xs[0] | xs[1]
                for x in xs[2:]:
                    out = out & x if k == "and" else out | x
                return out
            return o.and_(*xs) if k == "and" else o.or_(*xs)
        if k == "not":
            x = self.cond(e[1])
            return ~x if e[2] and _is_value(x) else o.not_(x)
        if k == "implies":
            return o.implies(self.cond(e[1]), self.cond(e[2]))
        if k == "beq":
            return o.eq(self.cond(e[1]), self.cond(e[2]))
        if k == "is_in":
            return o.is_in(self.num(e[1]), e[2])
        if k == "all":
            return o.all_(self.cond(x) for x in e[1])
        if k == "any":
            return o.any_(self.cond(x) for x in e[1])
        raise AssertionError(e)

    def run(self, body) -> None:
        for stmt in body:
            k = stmt[0]
            if k == "require":
                self.s.require(self.cond(stmt[1]))
            elif k == "write":
                idx = self._idx(stmt[2])
                value = self.num(stmt[3])
                if not idx:
                    setattr(self.n, stmt[1], value)
                else:
                    getattr(self.n, stmt[1])[idx if len(idx) > 1 else idx[0]] = value
            elif k == "write_at":
                idx = (*self._idx(stmt[2]), self.num(stmt[3]))
                getattr(self.n, stmt[1])[idx if len(idx) > 1 else idx[0]] = self.num(stmt[4])
            elif k == "if_param":
                if self.args[stmt[1]] == stmt[2]:
                    self.run(stmt[3])
            elif k == "disable_if":
                if self.args[stmt[1]] == stmt[2]:
                    self.s.require(False)
            elif k == "widen":
                with self.s.widen(self.cond(stmt[1])):
                    self.run(stmt[2])
            else:  # pragma: no cover
                raise AssertionError(stmt)


def _is_value(x) -> bool:
    return not isinstance(x, (int, bool))


def _minus(o, x, k):
    return x - k if _is_value(x) else o.add(x, -k)


def build(plan: Plan) -> Spec:
    """The spec instance of ``plan`` (the subclass with the overrides, when there are any)."""
    index = [Domain(f"i{d}", size) for d, size in enumerate(plan.index_sizes)]
    values = {}

    def vdom(n):
        return values.setdefault(n, Domain(f"v{n}", n))

    fields = [Field(f.name, tuple(index[d] for d in f.dims), vdom(f.values), f.init, sentinel=f.sentinel)
              for f in plan.fields]
    ns: dict[str, Any] = {
        "build_fields": lambda self: list(fields),
        "domain": lambda self, name: index[int(name[1:])],
    }
    for a in plan.actions:
        def act(self, s, n, *args, _body=a.body):
            _Eval(s, n, args).run(_body)
        act.__doc__ = f"random action {a.name}"
        ns[a.name] = action("rand", *[f"i{p}" for p in a.params], fair=a.fair)(act)
    for i, c in enumerate(plan.invariants):
        ns[f"inv{i}"] = invariant(_claim(c))
    for i, c in enumerate(plan.witnesses):
        ns[f"wit{i}"] = witness(_claim(c))
    if plan.quiescent is not None:
        ns["quiet"] = invariant(_claim(plan.quiescent), at="quiescent")
    if plan.live:
        def live(self, s, _conds=plan.live):
            ev = _Eval(s, None, ())
            return [(f"ob{i}", ev.cond(c)) for i, c in enumerate(_conds)]
        live.__doc__ = "random obligations"
        ns["live"] = liveness(live)
    base = type("RandomSpec", (Spec,), ns)
    if not plan.override:
        return base()
    sub: dict[str, Any] = {}
    for name, (before, after, widen) in plan.override.items():
        def over(self, s, n, *args, _name=name, _before=before, _after=after, _widen=widen):
            _Eval(s, n, args).run(_before)
            if _widen is None:
                getattr(super(derived, self), _name)(s, n, *args)
            else:
                with s.widen(_Eval(s, n, args).cond(_widen)):
                    getattr(super(derived, self), _name)(s, n, *args)
            _Eval(s, n, args).run(_after)
        sub[name] = over
    derived = type("RandomVariant", (base,), sub)
    return derived()


def _claim(c):
    def claim(self, s, _c=c):
        return _Eval(s, None, ()).cond(_c)
    claim.__doc__ = "random claim"
    return claim
