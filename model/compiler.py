"""Compile a spec into straight-line Python: the explicit engine's hot path.

:class:`CodegenOps` is the third interpretation of the operations facade: its values are Python
source text.  Running every action instance of a spec through it once yields one function,
``successors(s)``, whose body is a sequence of nested ``if`` blocks (one per action instance,
one ``if`` per ``require``) that build successor states as ``bytes``.  Claims compile the same
way into ``hits(s)``, a bitmask of the claims that "hit" in a state (an invariant that fails, a
witness that holds).  Constants fold at compile time, so scenario flags cost nothing at run
time, and every sizeable subexpression is bound to a local once, so the text stays linear.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Sequence

from kvproof.model.codecache import code_of
from kvproof.model.framework import Claim, Spec, SpecError
from kvproof.model.ops import Ops

__all__ = ["CodegenOps", "compile_successors", "compile_expand", "compile_hits", "compile_hits_after",
           "compile_pending", "compile_steps", "compile_successors_of"]

_BIND_OVER = 400  # bind a subexpression to a local when its text is longer than this (shorter ones
# stay inline, so Python's ``and``/``or`` short-circuit them; measured in bench/bench_engine.py)
_SLOT = re.compile(r"\bs\[(\d+)\]")


class E:
    """A compiled value: Python source, its value when known at compile time, and the range
    ``lo..hi`` it can take (numbers; a condition is 0..1), so that a write whose range fits its
    field needs no run-time check."""

    __slots__ = ("src", "const", "lo", "hi")

    def __init__(self, src: str, const: Any = None, lo: int = 0, hi: int = 1):
        self.src = src
        self.const = const
        if const is not None:
            lo = hi = int(const)
        self.lo, self.hi = lo, hi

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"E({self.src!r})"


def _c(v: Any) -> E:
    if isinstance(v, E):
        return v
    if isinstance(v, bool):
        return E("True" if v else "False", v)
    if isinstance(v, int):
        return E(str(v), v)
    raise TypeError(f"cannot compile value {v!r}")


class RangeCheckFailed(SpecError):
    """Raised by compiled code when a write (or an index) would leave its field's codes: a
    spec bug that the static ranges could not rule out when it was compiled."""

    def __init__(self, what: str, value: int):
        super().__init__(f"{what}: the value {value} lies outside the field's codes")


class CodegenOps(Ops):
    """Emits Python source for guards, effects and claims (see the module docstring)."""

    # the target language's syntax; the folding and value ranges of the methods below are shared (the C
    # backend, :class:`~kvproof.model.ccompiler.COps`, changes only these)
    AND, OR, NOT = " and ", " or ", "not "
    ITE = "({a} if {c} else {b})"
    MIN, MAX = "min", "max"

    def __init__(self, emitter: "_Emitter", value_sizes: Sequence[int] = ()):
        self.em = emitter
        self.writes: list[tuple[str, E]] = []
        self.checks: list[tuple[str, int, str]] = []  # (source, size, what): codes to check at run time
        self.dead = False
        self.footprint: set[int] = set()  # slots read
        self.written: set[int] = set()  # slots written
        self.sizes = value_sizes  # per slot, how many codes its field has (for static ranges)

    # -- values -------------------------------------------------------------------------------
    def _bind(self, src: str, lo: int = 0, hi: int = 1) -> E:
        if len(src) <= _BIND_OVER:
            return E(src, None, lo, hi)
        return E(self.em.bind(src), None, lo, hi)

    def _hi_of_slot(self, slot: int) -> int:
        return self.sizes[slot] - 1 if slot < len(self.sizes) else 255

    def const(self, v):
        return _c(v)

    def eq(self, a, b):
        a, b = _c(a), _c(b)
        if a.const is not None and b.const is not None:
            return _c(a.const == b.const)
        if a.src == b.src:
            return _c(True)
        return self._bind(f"({a.src} == {b.src})")

    def lt(self, a, b):
        a, b = _c(a), _c(b)
        if a.const is not None and b.const is not None:
            return _c(a.const < b.const)
        return self._bind(f"({a.src} < {b.src})")

    def add(self, a, b):
        a, b = _c(a), _c(b)
        if a.const is not None and b.const is not None:
            return _c(a.const + b.const)
        if a.const == 0 and not isinstance(a.const, bool):
            return b
        if b.const == 0 and not isinstance(b.const, bool):
            return a
        return self._bind(f"({a.src} + {b.src})", a.lo + b.lo, a.hi + b.hi)

    def and_(self, *xs):
        parts = []
        for x in map(_c, xs):
            if x.const is not None:
                if not x.const:
                    return _c(False)
                continue
            parts.append(x.src)
        if not parts:
            return _c(True)
        if len(parts) == 1:
            return E(parts[0])
        return self._bind("(" + self.AND.join(parts) + ")")

    def or_(self, *xs):
        parts = []
        for x in map(_c, xs):
            if x.const is not None:
                if x.const:
                    return _c(True)
                continue
            parts.append(x.src)
        if not parts:
            return _c(False)
        if len(parts) == 1:
            return E(parts[0])
        return self._bind("(" + self.OR.join(parts) + ")")

    def not_(self, x):
        x = _c(x)
        if x.const is not None:
            return _c(not x.const)
        return self._bind(f"({self.NOT}{x.src})")

    def ite(self, c, a, b):
        c, a, b = _c(c), _c(a), _c(b)
        if c.const is not None:
            return a if c.const else b
        if a.src == b.src:
            return a
        return self._bind(self.ITE.format(c=c.src, a=a.src, b=b.src), min(a.lo, b.lo), max(a.hi, b.hi))

    def lookup(self, table, idx):
        idx = _c(idx)
        if idx.const is not None:
            return _c(table[idx.const])
        return self._bind(f"{self.em.table(tuple(table))}[{idx.src}]", min(table), max(table))

    def min_(self, a, b):
        a, b = _c(a), _c(b)
        if a.const is not None and b.const is not None:
            return _c(min(a.const, b.const))
        return self._bind(f"{self.MIN}({a.src}, {b.src})", min(a.lo, b.lo), min(a.hi, b.hi))

    def max_(self, a, b):
        a, b = _c(a), _c(b)
        if a.const is not None and b.const is not None:
            return _c(max(a.const, b.const))
        return self._bind(f"{self.MAX}({a.src}, {b.src})", max(a.lo, b.lo), max(a.hi, b.hi))

    # -- state --------------------------------------------------------------------------------
    def read(self, slot):
        self.footprint.add(slot)
        return E(f"s[{slot}]", None, 0, self._hi_of_slot(slot))

    def read_at(self, base, size, idx):
        idx = _c(idx)
        if idx.const is not None:
            if not 0 <= idx.const < size:
                raise IndexError(f"index {idx.const} outside an array of {size}")
            return self.read(base + idx.const)
        self.footprint.update(range(base, base + size))
        if idx.lo < 0 or idx.hi >= size:
            self.checks.append((idx.src, size, "an index"))
        hi = max(self._hi_of_slot(base + k) for k in range(size))
        return self._bind(f"s[{base} + {idx.src}]", 0, hi)

    def require(self, cond):
        cond = _c(cond)
        if self.dead or cond.const is True:
            return
        if cond.const is not None:
            self.dead = True
            return
        self.em.open(f"if {cond.src}:")

    def bound(self, value, size, what):
        value = _c(value)
        if value.lo < 0 or value.hi >= size:
            self.checks.append((value.src, size, what))

    def write(self, slot, value):
        value = _c(value)
        # a write of the slot's own pre-state value changes nothing - unless this action wrote
        # the slot before (an override restoring what its base class changed)
        if value.src != f"s[{slot}]" or slot in self.written:
            self.writes.append((str(slot), value))
            self.written.add(slot)

    def write_at(self, base, size, idx, value):
        idx = _c(idx)
        if idx.const is not None:
            return self.write(base + idx.const, value)
        if idx.lo < 0 or idx.hi >= size:
            self.checks.append((idx.src, size, "an index"))
        self.writes.append((f"{base} + {idx.src}", _c(value)))
        self.written.update(range(base, base + size))


class _Emitter:
    """Collects lines of one generated function, with indentation, locals and constant tables."""

    def __init__(self, tables: dict[tuple, str]):
        self.lines: list[str] = []
        self.depth = 1
        self.base_depth = 1
        self.n = 0
        self.tables = tables

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def open(self, header: str) -> None:
        self.line(header)
        self.depth += 1

    def reset(self) -> None:
        self.depth = self.base_depth

    def bind(self, src: str) -> str:
        self.n += 1
        name = f"v{self.n}"
        self.line(f"{name} = {src}")
        return name

    def table(self, values: tuple) -> str:
        if values not in self.tables:
            self.tables[values] = f"K{len(self.tables)}"
        return self.tables[values]


def _localize(header: str, lines: list[str], size: int) -> list[str]:
    """Read every fixed slot once, into a local: ``s[12]`` becomes ``s12`` after one unpacking
    of the state at the top (a local load is several times cheaper than a subscript)."""
    body = _SLOT.sub(r"s\1", "\n".join(lines))  # one pass over the whole text (no slot reference spans lines)
    unpack = "    " + ", ".join(f"s{i}" for i in range(size)) + (", = s" if size == 1 else " = s")
    return [header, unpack, body] if lines else [header, unpack]


def _emit_checks(em: "_Emitter", ops: CodegenOps, where: str) -> None:
    """The run-time range checks ``ops`` collected, at the current position."""
    for src, size, what in ops.checks:
        em.line(f"if not 0 <= {src} < {size}: raise RangeCheckFailed({f'{where}: {what}'!r}, {src})")
    ops.checks.clear()


def _value_sizes(spec: Spec) -> tuple[int, ...]:
    """How many codes each slot's field has, slot by slot (:attr:`~kvproof.model.layout.Layout.value_sizes`)."""
    return spec.layout.value_sizes


def _module(tables: dict[tuple, str], body: list[str]) -> dict[str, Any]:
    src = "\n".join([f"{name} = {values!r}" for values, name in tables.items()] + body)
    namespace: dict[str, Any] = {"RangeCheckFailed": RangeCheckFailed}
    exec(code_of(src, "<kvproof-compiled>"), namespace)
    namespace["__source__"] = src
    return namespace


def _state_types(spec: Spec) -> tuple[str, str]:
    """The mutable copy and the frozen form of a successor in generated code: ``bytearray`` and
    ``bytes``, or for a wide layout (:attr:`~kvproof.model.layout.Layout.wide`) ``list`` and
    ``tuple``."""
    return ("list", "tuple") if spec.layout.wide else ("bytearray", "bytes")


def _successor_lines(spec: Spec, em: "_Emitter", append: str) -> None:
    """Emit every action instance's guard and effect; ``append`` is the statement that hands
    over successor ``t``, with ``{aid}`` for the instance's id and ``{frozen}`` for the frozen
    form of a state (:func:`_state_types`)."""
    for inst in spec.instances:
        em.reset()
        mark = len(em.lines)
        em.line(f"# {inst.name}{inst.args}")
        ops = CodegenOps(em, _value_sizes(spec))
        if not spec.run_action(inst, ops) or ops.dead:
            del em.lines[mark:]
            continue
        _emit_checks(em, ops, f"{inst.name}{inst.args}")
        em.line(f"t = {_state_types(spec)[0]}(s)")
        for slot, value in ops.writes:
            em.line(f"t[{slot}] = {value.src}")
        em.line(append.format(aid=inst.aid, frozen=_state_types(spec)[1]))
    em.reset()


def compile_successors(spec: Spec) -> tuple[Any, str]:
    """``successors(s: bytes) -> list[(aid, bytes)]`` for every enabled action instance of
    ``spec``, and its source text."""
    tables: dict[tuple, str] = {}
    em = _Emitter(tables)
    em.line("out = []")
    em.line("append = out.append")
    _successor_lines(spec, em, "append(({aid}, {frozen}(t)))")
    em.line("return out")
    ns = _module(tables, _localize("def successors(s):", em.lines, spec.layout.size))
    return ns["successors"], ns["__source__"]


def compile_expand(spec: Spec) -> tuple[Any, str]:
    """``expand(s, base, add_action, add_state)``: the engine's form of ``successors``.  It hands
    each successor to ``add_state`` and ``base + aid`` to ``add_action`` (the ``append`` methods
    of a whole BFS level's arrays; the engine passes ``base = position * len(instances)``, so one
    integer carries both the parent and the action), and returns ``None`` when no action is
    enabled.  No per-state list or pair is built."""
    tables: dict[tuple, str] = {}
    em = _Emitter(tables)
    em.line("t = None")
    _successor_lines(spec, em, "add_action(base + {aid}); add_state({frozen}(t))")
    em.line("return t")
    header = "def expand(s, base, add_action, add_state):"
    ns = _module(tables, _localize(header, em.lines, spec.layout.size))
    return ns["expand"], ns["__source__"]


def compile_hits_after(spec: Spec, claims: Sequence[Claim | None]) -> list[Any]:
    """``hits_after[aid](t)``: :func:`compile_hits` restricted to the claims that action
    instance ``aid`` can change, i.e. those reading a slot it writes (``None`` where it is never
    enabled).  Where the previous state hit none of the open claims - what the engine knows of
    every state it expands - the restricted check gives the same answer as the full one."""
    reads = []
    for claim in claims:
        if claim is None:
            reads.append(set())
            continue
        ops = CodegenOps(_Emitter({}))
        spec.eval_claim(claim.name, ops)
        reads.append(ops.footprint)
    by_mask: dict[tuple[bool, ...], Any] = {}
    out: list[Any] = []
    for inst in spec.instances:
        ops = CodegenOps(_Emitter({}))
        if not spec.run_action(inst, ops) or ops.dead:
            out.append(None)
            continue
        mask = tuple(bool(r & ops.written) for r in reads)
        if mask not in by_mask:
            by_mask[mask] = compile_hits(spec, [c if m else None for c, m in zip(claims, mask)])[0]
        out.append(by_mask[mask])
    return out


def compile_hits(spec: Spec, claims: Sequence[Claim | None]) -> tuple[Any, str]:
    """``hits(s: bytes) -> int``: bit ``i`` is set where ``claims[i]`` hits (an invariant is
    false, a witness is true); ``None`` entries keep their bit position and never hit."""
    tables: dict[tuple, str] = {}
    em = _Emitter(tables)
    em.line("h = 0")
    for i, claim in enumerate(claims):
        if claim is None:
            continue
        em.reset()
        ops = CodegenOps(em, _value_sizes(spec))
        value = _c(spec.eval_claim(claim.name, ops))
        _emit_checks(em, ops, claim.name)
        test = value.src if claim.kind == "witness" else f"not {value.src}"
        if value.const is not None:
            hit = bool(value.const) == (claim.kind == "witness")
            if hit:
                em.line(f"h |= {1 << i}")
            continue
        em.open(f"if {test}:")
        em.line(f"h |= {1 << i}")
    em.reset()
    em.line("return h")
    ns = _module(tables, _localize("def hits(s):", em.lines, spec.layout.size))
    return ns["hits"], ns["__source__"]


def compile_pending(spec: Spec, claim: Claim) -> tuple[Any, list[str]]:
    """``pending(s: bytes) -> int`` for a liveness claim: bit ``i`` is set where obligation ``i``
    is still pending; and the obligations' labels."""
    tables: dict[tuple, str] = {}
    em = _Emitter(tables)
    em.line("h = 0")
    ops = CodegenOps(em, _value_sizes(spec))
    obligations = spec.eval_claim(claim.name, ops)
    _emit_checks(em, ops, claim.name)
    labels = []
    for i, (label, value) in enumerate(obligations):
        labels.append(label)
        em.reset()
        value = _c(value)
        if value.const is not None:
            if value.const:
                em.line(f"h |= {1 << i}")
            continue
        em.open(f"if {value.src}:")
        em.line(f"h |= {1 << i}")
    em.reset()
    em.line("return h")
    ns = _module(tables, _localize("def pending(s):", em.lines, spec.layout.size))
    return ns["pending"], labels


def compile_steps(spec: Spec, aids: Iterable[int]) -> dict[int, Callable[[bytes], bytes | None]]:
    """``{aid: step}``: ``step(s)`` is the successor of ``s`` by instance ``aid``, ``None`` where
    it is disabled - one instance's guard and effect, compiled as the engine compiles them."""
    tables: dict[tuple, str] = {}
    body: list[str] = []
    names: dict[int, str] = {}
    copy, frozen = _state_types(spec)
    for aid in aids:
        inst = spec.instances[aid]
        em = _Emitter(tables)
        ops = CodegenOps(em, _value_sizes(spec))
        body.append(f"def step_{aid}(s):")
        names[aid] = f"step_{aid}"
        if spec.run_action(inst, ops) and not ops.dead:
            _emit_checks(em, ops, f"{inst.name}{inst.args}")
            em.line(f"t = {copy}(s)")
            for slot, value in ops.writes:
                em.line(f"t[{slot}] = {value.src}")
            em.line(f"return {frozen}(t)")
            body.extend(em.lines)
        body.append("    return None")
    ns = _module(tables, body)
    return {aid: ns[name] for aid, name in names.items()}


def compile_successors_of(spec: Spec, aids: Iterable[int]) -> Callable[[bytes], list[tuple[int, bytes]]]:
    """``successors(s)`` restricted to the instances ``aids``: one function, guards inline."""
    tables: dict[tuple, str] = {}
    lines = ["def successors(s):", "    out = []"]
    copy, frozen = _state_types(spec)
    for aid in aids:
        inst = spec.instances[aid]
        em = _Emitter(tables)
        ops = CodegenOps(em, _value_sizes(spec))
        if not spec.run_action(inst, ops) or ops.dead:
            continue
        _emit_checks(em, ops, f"{inst.name}{inst.args}")
        em.line(f"t = {copy}(s)")
        for slot, value in ops.writes:
            em.line(f"t[{slot}] = {value.src}")
        em.line(f"out.append(({aid}, {frozen}(t)))")
        lines.extend(em.lines)
    lines.append("    return out")
    return _module(tables, lines)["successors"]
