"""The search of ``kvproof validate`` over a *factored* frontier: possible states kept as blocks,
each a product of independent components, never enumerated.

Why: where a log cannot show when an internal step happened (a transfer that moves its data and
completes unseen), every request with such a step outstanding may be in several internal phases,
and the reference search (:class:`~kvproof.checker.logs.validate.Search`) holds the product of those
phases: 2 x 3^7 = 4,374 states with 8 requests in flight, re-closed at every event.  Here a
*block* is one state (its *core*) and a few *groups*: disjoint sets of state slots, each with a
list of alternative values; the block stands for every state that takes the core and, in each
group, one of its alternatives.  A READ's phases are one group of three alternatives, so eight
requests cost 8 x 3 values, not 3^8 states.

How a step acts on a block, exactly.  Every step (and every claim conjunct) is compiled with its
*footprint*: the slots it read while it ran on a state and the slots it wrote (the compiled code
of :mod:`kvproof.model.compiler`, with each indexed read recorded).  Two states that agree on
the slots a step read at one of them take the same path through the step: the same guard, the
same writes.  So a step whose footprint at the block's core misses every group acts on the whole
block at once; one that touches one group is run once per alternative of that group; one that
touches several groups first *joins* them (their alternatives become one group of combinations:
the product, built only there).  The observation of a visible step is a Python function; it is
given the states as a :class:`bytes` that records the indices it reads, and those count as the
step's footprint too.

* Closing a block under the internal steps extends it: a step that touches no group makes a new
  group of the slots it writes (their value before and after); one that touches a group adds the
  alternatives it leads to (the group takes in the core slots it also writes).  So a block stays
  one block while it closes, and its states are exactly the reference's closure of its states.
* An event maps a block to the blocks of the states it leads to (one per distinct value of the
  slots outside the touched group).
* Claims.  The reference keeps a state that breaks an always-invariant *dirty*; the log is a
  violation at the first event after which every explanation is dirty.  A state is clean exactly
  when some path of clean states leads to it, which does not depend on the order of the search,
  so this search keeps the clean states only, checking each claim conjunct by conjunct (an
  invariant ``o.all_(...)`` is split into its parts, each with its own footprint; a part that
  depends on one group drops that group's alternatives where it fails).  While some clean state
  explains the log the reference's verdict is "explained so far" too.  At the first event with no
  clean explanation (or an event the log contradicts, or a frontier past the cap) this search
  hands the log up to that event to the reference search, whose verdict it returns: whether any
  dirty explanation remains (violation) or none (unexplained), which claims, which states were
  possible - exactly the reference's answer, at the cost of the reference's search once.
* Possible violations (:class:`~kvproof.checker.logs.validate.Maybe`).  The reference's first dirty
  state: before it every state is clean, so it is a successor of a clean state (by an internal
  step of a closure or the event's step) that breaks a claim - and such a state is always
  dirty (its mask is every claim it breaks).  This search runs the same steps on the same clean
  states, so it meets that state and ``_purge`` drops it; a step it skips as quiet was run on
  the states its block came from and commutes with what changed since (conjuncts included, by
  :meth:`FootprintCode.dependent` and the footprints kept), so its successors break the same
  conjuncts as those it dropped then (and before the first drop, it dropped none).  So the
  first drop is attributed to the same event, and the claims broken by the states dropped in
  that event's searches (each noted with every claim it breaks: ``_dropped``) are those the
  reference's successors of clean states there break - the same claims, though not always the
  same states (``bad`` may differ; it is one of the reference's dirty states there, which the
  tests check by rebuilding it).  Where this search hands the log over, the reference's answer
  is returned.

Not covered (``NativeUnavailable``-style: :func:`factored_search` raises
:class:`FactoredUnavailable` and ``kvproof validate`` runs the other searches): observations with
``unseen`` steps (a Python predicate over the state), claims other than invariants, and wide
layouts (a field of more than 256 codes: :attr:`~kvproof.model.layout.Layout.wide`).
"""

from __future__ import annotations

import re
from itertools import product
from typing import Any, Callable, Iterable, Iterator

from kvproof.checker.logs.validate import DEFAULT_MAX_STATES, Event, Observation, Search, Verdict, _MaybeTracker
from kvproof.model.compiler import CodegenOps, _c, _emit_checks, _Emitter, _value_sizes

__all__ = ["FactoredUnavailable", "Block", "FootprintCode", "FactoredSearch", "factored_search", "suits",
           "MIN_INTERNAL"]

MIN_INTERNAL = 12
"""``auto`` runs the factored search where the spec has at least this many live internal action
instances (fewer: few requests in flight, a small flat frontier, which the flat search closes
faster: measured on the catalogue's pull-mode streams, the factored search is slower at 4 slots, 9 internal
instances, and 11 times faster at 8, 17) and no internal step reads what more than two others write (a step that depends on every
request's internal phase, like a clock that stops at a READ's latency bound, joins every group
back into the product)."""


class FactoredUnavailable(Exception):
    """The factored search cannot run for this machine or observation (the message says why)."""


# -- compiling steps and claim conjuncts with their footprints ---------------------------------------
_SUB = re.compile(r"\bs\[")
_BIND = re.compile(r"^\s*(v\d+) = (.*)$")
_VAR = re.compile(r"\bv\d+\b")


def _instrument(src: str, ranges: dict[int, int], literal: bool = False) -> tuple[str, set[int], set[int]]:
    """``src`` with every indexed state read ``s[EXPR]`` (EXPR not a literal; with ``literal``,
    every read) recording its slot in the local list ``F``; the literal slots it reads; and every
    slot an indexed read may reach (``ranges``: array base -> size, as the compiler knows them),
    for a static bound."""
    out: list[str] = []
    static: set[int] = set()
    reach: set[int] = set()
    i = 0
    while True:
        m = _SUB.search(src, i)
        if not m:
            out.append(src[i:])
            break
        out.append(src[i:m.start()])
        j = k = m.end()
        depth = 1
        while depth:
            ch = src[k]
            depth += (ch == "[") - (ch == "]")
            k += 1
        inner = src[j:k - 1]
        if inner.isdigit():
            static.add(int(inner))
            out.append(f"s[_i(F, {inner})]" if literal else f"s[{inner}]")
        else:
            inner2, st, rc = _instrument(inner, ranges, literal)
            static |= st
            reach |= rc
            base = re.match(r"\s*(\d+)\s*\+", inner)
            if base and int(base.group(1)) in ranges:
                b = int(base.group(1))
                reach.update(range(b, b + ranges[b]))
            else:
                reach.add(-1)  # unknown reach: relevant to everything
            out.append(f"s[_i(F, {inner2})]")
        i = k
    return "".join(out), static, reach


class _RangeOps(CodegenOps):
    """:class:`CodegenOps` that remembers every array it indexes at run time (base -> size) and
    the parts of the last ``all_`` (an invariant's conjuncts)."""

    def __init__(self, em, sizes):
        super().__init__(em, sizes)
        self.ranges: dict[int, int] = {}
        self.last: tuple[Any, list] | None = None

    def read_at(self, base, size, idx):
        self.ranges[base] = size
        return super().read_at(base, size, idx)

    def write_at(self, base, size, idx, value):
        self.ranges[base] = size
        return super().write_at(base, size, idx, value)

    def all_(self, xs):
        xs = list(xs)
        value = super().all_(xs)
        self.last = (value, xs)
        return value


_HELPER = "def _i(F, i):\n    F.append(i)\n    return i\n"


class FootprintCode:
    """The spec's steps and its invariants' conjuncts, compiled with footprints.

    ``step[aid](s)`` is ``(t, F, W)``: the successor (``None`` where disabled), the indexed slots
    read on the way, the slots written; ``sreads[aid]`` the literal slots its code reads (all
    of them, whichever path runs).  ``conj[j](s)`` is ``(ok, F)`` for conjunct ``j``
    (``conj_reads[j]`` its literal slots, ``conj_claim[j]`` the claim's position), and
    ``relevant[aid]`` the conjuncts instance ``aid`` can change (those reading a slot it may
    write)."""

    def __init__(self, spec: Any, claims: list, aids: Iterable[int]):
        tables: dict[tuple, str] = {}
        sizes = _value_sizes(spec)
        body: list[str] = []
        self.sreads: dict[int, frozenset[int]] = {}
        self.reach: dict[int, frozenset[int]] = {}
        written: dict[int, set[int]] = {}
        for aid in aids:
            inst = spec.instances[aid]
            em = _Emitter(tables)
            ops = _RangeOps(em, sizes)
            lines = [f"def step_{aid}(s):", "    F = []"]
            if spec.run_action(inst, ops) and not ops.dead:
                _emit_checks(em, ops, f"{inst.name}{inst.args}")
                em.line("t = bytearray(s)")
                for slot, value in ops.writes:
                    em.line(f"t[{slot}] = {value.src}")
                em.line("return bytes(t), F, (" + "".join(f"{slot}, " for slot, _ in ops.writes) + ")")
                lines += em.lines
            lines.append("    return None, F, ()")
            static: set[int] = set()
            rc: set[int] = set()
            for line in lines:
                text, st, r = _instrument(line, ops.ranges)
                body.append(text)
                static |= st
                rc |= r
            self.sreads[aid] = frozenset(static)
            self.reach[aid] = frozenset(rc | static)
            written[aid] = set(ops.written)
        # invariants, split into conjuncts
        self.conj_reads: list[frozenset[int]] = []
        self.conj_claim: list[int] = []
        reach: list[set[int]] = []
        for ci, claim in enumerate(claims):
            if claim.kind != "invariant":
                raise FactoredUnavailable(f"claim {claim.name} is a {claim.kind}, not an invariant")
            em = _Emitter(tables)
            ops = _RangeOps(em, sizes)
            value = _c(spec.eval_claim(claim.name, ops))
            ops.checks.clear()
            parts = ops.last[1] if ops.last is not None and ops.last[0] is value else [value]
            binds = {}
            for line in em.lines:
                m = _BIND.match(line)
                if m:
                    binds[m.group(1)] = m.group(2)
            for part in map(_c, parts):
                if part.const is True:
                    continue
                need: set[str] = set()
                todo = _VAR.findall(part.src)
                while todo:
                    v = todo.pop()
                    if v in binds and v not in need:
                        need.add(v)
                        todo += _VAR.findall(binds[v])
                j = len(self.conj_claim)
                src = [f"def conj_{j}(s):", "    F = []"]
                src += [f"    {v} = {binds[v]}" for v in sorted(need, key=lambda x: int(x[1:]))]
                src.append(f"    return bool({part.src}), F")
                static: set[int] = set()
                rc: set[int] = set()
                for line in src:  # every read recorded: a conjunct short-circuits, so it reads few slots
                    text, st, r = _instrument(line, ops.ranges, literal=True)
                    body.append(text)
                    rc |= r | st
                self.conj_reads.append(frozenset())
                self.conj_claim.append(ci)
                reach.append(rc)
        src = "\n".join([f"{name} = {values!r}" for values, name in tables.items()] + [_HELPER] + body)
        namespace: dict[str, Any] = {}
        from kvproof.model.compiler import RangeCheckFailed

        namespace["RangeCheckFailed"] = RangeCheckFailed
        exec(compile(src, "<kvproof-footprints>", "exec"), namespace)
        self.step = {aid: namespace[f"step_{aid}"] for aid in self.sreads}
        self.conj = [namespace[f"conj_{j}"] for j in range(len(self.conj_claim))]
        self.relevant = {aid: tuple(j for j, rc in enumerate(reach) if -1 in rc or rc & w)
                         for aid, w in written.items()}
        self.written = {aid: frozenset(w) for aid, w in written.items()}
        self.conj_reach = [frozenset(r) for r in reach]
        self.conj_by_slot: dict[int, tuple[int, ...]] = {}  # slot -> the conjuncts that may read it
        every = self.conj_every = tuple(j for j, r in enumerate(reach) if -1 in r)
        for x in set().union(*reach) - {-1} if reach else ():
            self.conj_by_slot[x] = tuple(sorted({j for j, r in enumerate(reach) if x in r} | set(every)))

    def dependent(self, aid: int, others: Iterable[int]) -> frozenset[int]:
        """The instances of ``others`` that may not commute with ``aid``: one writes a slot the
        other may read, or a slot a conjunct the other can change may read (static bounds: every
        slot an indexed read or write may reach)."""
        out = set()
        wa, ra = self.written[aid], self.reach[aid]
        ca = set().union(*[self.conj_reach[j] for j in self.relevant[aid]]) if self.relevant[aid] else set()
        for b in others:
            wb, rb = self.written[b], self.reach[b]
            cb = set().union(*[self.conj_reach[j] for j in self.relevant[b]]) if self.relevant[b] else set()
            if -1 in ra or -1 in rb or -1 in ca or -1 in cb or wa & rb or wb & ra or wa & cb or wb & ca:
                out.add(b)
        return frozenset(out)


class _Rec(bytes):
    """A state that records which indices are read (an observation's footprint)."""

    def __getitem__(self, i):  # noqa: D105
        rec = _Rec.seen
        if isinstance(i, slice):
            rec.update(range(*i.indices(len(self))))
        else:
            rec.add(i if i >= 0 else len(self) + i)
        return bytes.__getitem__(self, i)

    def _all(self):
        _Rec.seen.update(range(len(self)))

    def __iter__(self):  # noqa: D105
        self._all()
        return bytes.__iter__(self)

    def __eq__(self, other):  # noqa: D105
        self._all()
        return bytes.__eq__(self, other)

    def __ne__(self, other):  # noqa: D105
        self._all()
        return bytes.__ne__(self, other)

    def __hash__(self):  # noqa: D105
        self._all()
        return bytes.__hash__(self)

    def __contains__(self, x):  # noqa: D105
        self._all()
        return bytes.__contains__(self, x)

    seen: set[int] = set()


def _split(slots: tuple, alts: set, cuts: tuple) -> list | None:
    """Groups whose product is ``alts`` (over ``slots``, cut into atoms of ``cuts`` slots), one
    atom peeled off where the alternatives are that atom's values times the rest's; ``None``
    where no atom comes off."""
    n = len(alts)
    start = 0
    for k, size in enumerate(cuts):
        lo, hi = start, start + size
        start = hi
        mine = {a[lo:hi] for a in alts}
        rest = {a[:lo] + a[hi:] for a in alts}
        if len(mine) * len(rest) == n:
            return [(slots[lo:hi], mine, (size,)), (slots[:lo] + slots[hi:], rest, cuts[:k] + cuts[k + 1:])]
    return None


# -- blocks -------------------------------------------------------------------------------------------
class Block:
    """A set of states: ``core`` (a state) and ``groups``, each ``(slots, alts)``: disjoint
    slots and the alternative values they take; the states are the core with, in every group,
    one alternative.  The core holds each group's first alternative; alternatives are sorted
    and distinct, and a group has at least two (one is folded into the core)."""

    __slots__ = ("core", "groups", "gslots", "where", "_key", "_alt_states", "_size")

    _WHERE: dict = {}
    """``groups`` (their slots) -> ``(where, gslots)``: shared by the blocks of the same groups."""

    def __init__(self, core: bytes, groups: tuple):
        self.core = core
        self.groups = groups
        shape = tuple(slots for slots, _, _ in groups)
        hit = Block._WHERE.get(shape)
        if hit is None:
            where = {}
            for g, slots in enumerate(shape):
                for x in slots:
                    where[x] = g
            if len(Block._WHERE) > 4096:
                Block._WHERE.clear()
            hit = Block._WHERE[shape] = (where, frozenset(where))
        self.where, self.gslots = hit
        self._key = None
        self._alt_states: dict = {}
        self._size = 0

    @staticmethod
    def make(core: bytes | bytearray, groups: Iterable[tuple], split: bool = True) -> "Block":
        """The block of ``core`` and ``groups``, normalized (alternatives sorted and distinct,
        single ones folded into the core, groups ordered by their first slot)."""
        c = bytearray(core)
        out = []
        todo = list(groups)
        while todo:
            slots, alts, cuts = todo.pop()
            alts = set(alts)
            if not alts:
                raise ValueError("a group without alternatives")
            if split and len(cuts) > 1 and len(alts) > 1:  # a join whose alternatives are a product again: split
                parts = _split(slots, alts, cuts)
                if parts is not None:
                    todo += parts
                    continue
            alts = sorted(alts)
            for x, v in zip(slots, alts[0]):
                c[x] = v
            if len(alts) > 1:
                out.append((slots, tuple(alts), cuts))
        out.sort(key=lambda g: g[0][0])
        return Block(bytes(c), tuple(out))

    @staticmethod
    def regroup(core: bytes | bytearray, groups: tuple, g: int | None, group: tuple, split: bool = True) -> "Block":
        """:meth:`make` where only ``group`` is new (it replaces group ``g``, or is added where
        ``g`` is ``None``): the other groups, already normal, are kept as they are."""
        nb = Block.make(core, [group], split)
        rest = [grp for k, grp in enumerate(groups) if k != g]
        return Block(nb.core, tuple(sorted(rest + list(nb.groups), key=lambda grp: grp[0][0])))

    def key(self) -> tuple:
        """Equal for equal normal forms."""
        if self._key is None:
            self._key = (self.core, self.groups)
        return self._key

    def size(self) -> int:
        """How many states the block stands for."""
        n = self._size
        if not n:
            n = 1
            for _, alts, _ in self.groups:
                n *= len(alts)
            self._size = n
        return n

    def states(self) -> Iterator[bytes]:
        """Every state of the block (the product: for answers and tests only)."""
        if not self.groups:
            yield self.core
            return
        slots = [x for s, _, _ in self.groups for x in s]
        for combo in product(*[alts for _, alts, _ in self.groups]):
            c = bytearray(self.core)
            for x, v in zip(slots, (v for alt in combo for v in alt)):
                c[x] = v
            yield bytes(c)

    def alt_states(self, g: int) -> list[tuple[tuple, bytes]]:
        """``(alt, state)`` for every alternative of group ``g`` (the others at their first)."""
        out = self._alt_states.get(g)
        if out is None:
            slots, alts, _ = self.groups[g]
            core = self.core
            out = [(alts[0], core)]  # the core holds the first alternative
            for alt in alts[1:]:
                c = bytearray(core)
                for x, v in zip(slots, alt):
                    c[x] = v
                out.append((alt, bytes(c)))
            self._alt_states[g] = out
        return out

    def with_alt(self, g: int, alt: tuple) -> bytes:
        """The core with group ``g`` at ``alt``."""
        c = bytearray(self.core)
        for x, v in zip(self.groups[g][0], alt):
            c[x] = v
        return bytes(c)

    def join(self, gs: Iterable[int]) -> tuple["Block", int]:
        """The same states with groups ``gs`` joined into one (their product); and its index."""
        gs = sorted(set(gs))
        if len(gs) == 1:
            return self, gs[0]
        slots = tuple(x for g in gs for x in self.groups[g][0])
        alts = tuple(tuple(v for a in combo for v in a) for combo in product(*[self.groups[g][1] for g in gs]))
        cuts = tuple(c for g in gs for c in self.groups[g][2])
        rest = [grp for g, grp in enumerate(self.groups) if g not in gs]
        b = Block(self.core, tuple(sorted(rest + [(slots, alts, cuts)], key=lambda g: g[0][0])))
        return b, b.where[slots[0]]


class FactoredSearch(Search):
    """The factored frontier search (module docstring); :meth:`explain` is what
    :func:`~kvproof.checker.logs.validate.explain` runs for it.  ``fallback`` is the search the
    reference's answer comes from (the reference, or its steps in C: the same frontiers)."""

    def __init__(self, machine: Any, obs: Observation, max_states: int, fallback: Search | None = None):
        if getattr(obs, "unseen", None):
            raise FactoredUnavailable("the log's observation has unseen steps (a Python predicate)")
        too_wide = machine.spec.layout.too_wide()
        if too_wide:
            raise FactoredUnavailable(f"the factored search keeps one byte a state slot: {too_wide}")
        super().__init__(machine, obs, max_states)
        spec = machine.spec
        internal = list(obs.internal)
        self.internal_aids = internal
        self.code = FootprintCode(spec, list(machine.claims), [i.aid for i in spec.instances])
        self.fallback = fallback
        self.replay: Callable[[], Iterable[Event]] | None = None
        self.watch: Callable[[Event, list[Block]], None] | None = None
        self.blocks_peak = 0
        self.order = {aid: k for k, aid in enumerate(internal)}
        self.dep = {i.aid: self.code.dependent(i.aid, internal) for i in spec.instances}
        # the internal steps that may write what an instance writes, and those that may write a slot
        written = self.code.written
        self.ww = {i.aid: frozenset(a for a in internal if written[a] & written[i.aid]) for i in spec.instances}
        self.writers: dict[int, tuple[int, ...]] = {}
        for a in internal:
            for x in written[a]:
                self.writers[x] = self.writers.get(x, ()) + (a,)
        self.near = {aid: self.dep[aid] | self.ww[aid] for aid in self.dep}
        # what a step that adds states wakes in :meth:`_close`: itself and its dependents (positions)
        self.wake = {aid: frozenset(self.order[a] for a in self.dep[aid] | {aid}) for aid in internal}
        self._obs_reads: set[int] = set()

    # -- a step over a block ------------------------------------------------------------------
    @staticmethod
    def _touched(b: Block, slots: Iterable[int]) -> set[int]:
        """The groups of ``b`` that ``slots`` meet."""
        gs = b.gslots
        if not gs:
            return set()
        where = b.where
        return {where[x] for x in gs.intersection(slots)}

    def _run(self, b: Block, aid: int, visible: bool = False):
        """``(b', g, results, reads, writes)``: step ``aid`` over block ``b`` (joined where it
        needs it).  ``g`` is ``None`` when the step acts on every state alike (``results`` then
        one ``(None, pre, t, W, seen)``), else the group it depends on, one result per
        alternative; ``seen`` is the observation (visible steps; ``None`` where disabled);
        ``reads`` and ``writes`` every slot the step (and its observation) read or wrote."""
        fn, static = self.code.step[aid], self.code.sreads[aid]
        observe = self.obs.observe
        g = None
        gs = b.gslots
        if gs and not gs.isdisjoint(static):  # every run reads these: join their groups first
            where = b.where
            b, g = b.join({where[x] for x in gs.intersection(static)})
        while True:
            states = [(None, b.core)] if g is None else b.alt_states(g)
            results = []
            reads, writes = set(static), set()
            for alt, pre in states:
                t, F, W = fn(pre)
                seen = None
                reads.update(F)
                writes.update(W)
                if visible and t is not None:
                    _Rec.seen = rec = set()
                    seen = observe(aid, _Rec(pre), _Rec(t))
                    reads |= rec
                    self._obs_reads |= rec
                results.append((alt, pre, t, W, seen))
            gs = b.gslots
            if gs and not (gs.isdisjoint(reads) and gs.isdisjoint(writes)):
                where = b.where
                touch = {where[x] for x in gs.intersection(reads)}
                touch.update(where[x] for x in gs.intersection(writes))
            else:
                touch = set()
            if g is not None:
                touch.discard(g)
                if not touch:
                    return b, g, results, reads, writes
                touch.add(g)
            elif not touch:
                return b, None, results, reads, writes
            b, g = b.join(touch)

    def _purge(self, b: Block, conjs: Iterable[int], reads: set[int], cmemo: dict) -> Block | None:
        """``b`` without its states that break a conjunct of ``conjs`` (``None`` if none is
        left); the slots the conjuncts read are added to ``reads``, and each conjunct's to
        ``cmemo`` (its footprint over the block: while a step writes none of them, the
        conjunct keeps its value)."""
        code = self.code
        touched = self._touched
        for j in conjs:
            fn, static = code.conj[j], code.conj_reads[j]
            rj = set(static)
            g = None
            while True:
                if g is None:
                    ok, F = fn(b.core)
                    rj.update(F)
                    gs = b.gslots
                    touch = touched(b, F) | touched(b, static) \
                        if gs and not (gs.isdisjoint(F) and gs.isdisjoint(static)) else None
                    if not touch:
                        if not ok:
                            if self.breaks is not None:
                                self._dropped(b.states())
                            return None
                        break
                    b, g = b.join(touch)
                    continue
                keep, touch = [], set()
                slots, alts, cuts = b.groups[g]
                for alt, state in b.alt_states(g):
                    ok, F = fn(state)
                    rj.update(F)
                    touch |= touched(b, F)
                    if ok:
                        keep.append(alt)
                touch |= touched(b, static)
                touch.discard(g)
                if touch:
                    b, g = b.join(touch | {g})
                    continue
                if len(keep) < len(alts) and self.breaks is not None:
                    kept = set(keep)
                    gone = [alt for alt in alts if alt not in kept]
                    self._dropped(Block.regroup(b.core, b.groups, g, (slots, gone, cuts), split=False).states())
                if not keep:
                    return None
                if len(keep) < len(alts):
                    b = Block.regroup(b.core, b.groups, g, (slots, keep, cuts))
                break
            reads |= rj
            cmemo[j] = rj
        return b

    def _dropped(self, states: Iterable[bytes]) -> None:
        """Note ``states`` (dropped by :meth:`_purge`: successors of clean states that break a
        claim) in ``breaks``, each with every claim it breaks (the reference's dirty states)."""
        hits, breaks = self.hits, self.breaks
        assert breaks is not None
        for t in states:
            if t not in breaks:
                m = hits(t)
                if m:
                    breaks[t] = m

    def _extend(self, b: Block, aid: int, cmemo: dict) -> tuple[Block, tuple | None]:
        """``b`` with the clean states internal step ``aid`` leads to from it; and, where it
        leads to none that ``b`` lacks, the step's footprint there (``(reads, writes)``: the
        slots it, its observation and the conjuncts checked on its successors read, and the
        slots it wrote), else ``None``."""
        b0 = b
        b, g, results, reads, writes = self._run(b, aid)
        if g is None:
            _, pre, t, W, _ = results[0]
            if t is None or t == pre:
                return b0, (reads, writes)
            slots = tuple(sorted(set(W)))
            new = Block.regroup(b.core, b.groups, None,
                                (slots, [tuple(pre[x] for x in slots), tuple(t[x] for x in slots)], (len(slots),)))
        else:
            old_slots, alts, cuts = b.groups[g]
            extra = sorted(writes.difference(old_slots)) if not writes.issubset(old_slots) else ()
            if extra:
                slots = old_slots + tuple(extra)
                core = b.core
                tail = tuple(core[x] for x in extra)
                have = {alt + tail for alt in alts}
            else:
                slots, have = old_slots, set(alts)
            fresh = {tuple(t[x] for x in slots) for _, pre, t, _, _ in results if t is not None and t != pre}
            fresh -= have
            if not fresh:
                return b0, (reads, writes)
            cuts = cuts + ((len(extra),) if extra else ())
            new = Block.regroup(b.core, b.groups, g, (slots, have | fresh, cuts), split=False)
        new = self._purge(new, self.code.relevant.get(aid, ()), reads, cmemo)
        # ``new`` holds ``b`` (whose states are clean) and the fresh clean states, if any
        if new is None or new.size() == b0.size():
            return b0, (reads, writes)
        return new, None

    def close_block(self, b: Block) -> Block:
        """``b`` closed under the internal steps (its clean states' clean successors)."""
        return self._close(b, range(len(self.internal_aids)), {}, {})[0]

    def _close(self, b: Block, active: Iterable[int], memo: dict, cmemo: dict) -> tuple[Block, dict]:
        """``b`` closed, where only the internal steps ``active`` (their positions in
        ``internal_aids``) may add states to it (the
        others add none: they were run on the states ``b`` came from and commute with what
        happened since); ``memo`` (updated) holds each quiet step's footprint.  A step that
        adds states wakes itself and the steps that may not commute with it."""
        internal, wake = self.internal_aids, self.wake
        todo = set(active)  # positions in ``internal``: the least runs first
        memo = dict(memo)
        while todo:
            k = min(todo)
            todo.discard(k)
            aid = internal[k]
            b, quiet = self._extend(b, aid, cmemo)
            if quiet is None:
                todo |= wake[aid]
                memo.pop(aid, None)
            else:
                memo[aid] = quiet
        return b, memo

    def advance_block(self, b: Block, event: Event) -> list[Block]:
        """The blocks of the clean states ``event`` leads to from ``b``."""
        return [d for d, _, _, _, _ in self._advance(b, event, {})]

    def _advance(self, b: Block, event: Event, cmemo: dict) -> list[tuple[Block, set, set, set, dict]]:
        """``(block, reads, writes, changed, cmemo)`` per block ``event`` leads to from ``b``:
        what the step read (with its observation), wrote, and changed, and the conjuncts'
        footprints there (``cmemo``: those of ``b``, where the step changed none of their
        slots)."""
        out = []
        for aid in event.aids:
            if aid not in self.code.step:
                continue
            bb, g, results, reads, writes = self._run(b, aid, visible=True)
            ok = [r for r in results if r[2] is not None and r[4] == event.want]
            if not ok:
                continue
            if g is None:  # the groups as they were (or joined: normalized again)
                cands = [Block(ok[0][2], bb.groups) if bb is b else Block.make(ok[0][2], bb.groups)]
            else:
                slots, _, cuts = bb.groups[g]
                buckets: dict[bytes, list] = {}
                for _, _, t, _, _ in ok:
                    k = bytearray(t)
                    for x in slots:
                        k[x] = 0
                    buckets.setdefault(bytes(k), []).append(tuple(t[x] for x in slots))
                cands = [Block.regroup(k, bb.groups, g, (slots, alts, cuts)) for k, alts in buckets.items()]
            # the slots whose value the step changed (a write of the value a slot holds changes
            # nothing a read sees)
            changed = {x for _, pre, t, W, _ in ok for x in W if pre[x] != t[x]}
            keep = dict(cmemo)
            by_slot = self.code.conj_by_slot
            every = self.code.conj_every
            for j in {j for x in changed for j in by_slot.get(x, every)}:
                r = keep.get(j)
                if r is not None and not changed.isdisjoint(r):
                    del keep[j]
            check = [j for j in self.code.relevant.get(aid, ()) if j not in keep]
            for c in cands:
                cm = dict(keep)
                c = self._purge(c, check, set(), cm)
                if c is not None:
                    out.append((c, reads, writes, changed, cm))
        return out

    # -- the log ----------------------------------------------------------------------------------
    def explain(self, machine: Any, obs: Observation, events: Iterable[Event], max_states: int) -> Verdict:
        """The reference's verdict on ``events`` (module docstring): the factored frontier while
        some clean state explains the log, the reference search (``fallback``) on the log up to
        the first event where none does."""
        self.obs = obs
        init = machine.init
        seen: list[Event] | None = [] if self.replay is None else None
        internal = self.internal_aids
        # each block with the internal steps to run on it and the footprints of the quiet ones
        frontier = [(Block(init, ()), range(len(internal)), {}, {})] if machine.hits(init) == 0 else []
        peak, count = 1, 0
        stop = None
        tracker = _MaybeTracker(machine, self)  # the first state _purge drops: the first possible violation
        for event in events:
            count += 1
            if seen is not None:
                seen.append(event)
            why = obs.admit(event)
            if why is not None or not frontier:
                stop = event
                break
            closed: dict = {}
            size = 0
            for b, active, memo, cmemo in frontier:
                cmemo = dict(cmemo)
                c, memo = self._close(b, active, memo, cmemo)
                k = c.key() if len(frontier) > 1 else None  # one block: nothing to deduplicate
                if k not in closed:
                    closed[k] = (c, memo, cmemo)
                    size += c.size()
            tracker.closed(event)
            out = []
            self._obs_reads = set()
            for c, memo, cmemo in closed.values():
                for d, reads, writes, changed, cm in self._advance(c, event, cmemo):
                    # a quiet step stays quiet unless the event changed what it read, wrote what
                    # it writes, or read what it writes
                    keep = dict(memo)
                    # the steps the event may disturb: statically, or by a slot its observation read
                    cand = self.near.get(event.aids[0], internal) if len(event.aids) == 1 else internal
                    if self._obs_reads:
                        cand = set(cand).union(*[self.writers.get(x, ()) for x in self._obs_reads])
                    for a in cand:
                        fw = keep.get(a)
                        if fw is not None and not (changed.isdisjoint(fw[0]) and writes.isdisjoint(fw[1])
                                                   and reads.isdisjoint(fw[1])):
                            del keep[a]
                    out.append((d, keep, cm))
            tracker.advanced(event)
            nxt: dict = {}
            for d, keep, cm in out:
                k = d.key() if len(out) > 1 else None
                if k in nxt:  # the same states from two blocks: what either needs
                    _, _, m0, c0 = nxt[k]
                    keep = {a: fw for a, fw in keep.items() if a in m0}
                    cm = {j: r | c0[j] for j, r in cm.items() if j in c0}
                nxt[k] = (d, [i for i, a in enumerate(internal) if a not in keep], keep, cm)
            if self.watch is not None:  # tests: the clean frontier after each event
                self.watch(event, [d for d, _, _, _ in nxt.values()])
            nsize = sum(d.size() for d, _, _, _ in nxt.values())
            self.explored += size
            peak = max(peak, size, nsize)
            self.blocks_peak = max(self.blocks_peak, len(closed), len(nxt))
            held = sum(len(g[1]) for d, _, _, _ in nxt.values() for g in d.groups) + len(nxt)
            if not nxt:
                stop, why = event, "stop"
                break
            if held > max_states:  # the flat search takes the whole log over
                stop, why = event, "cap"
                break
            frontier = list(nxt.values())
        if stop is None:
            if tracker.pending():  # the closure after the last event belongs to it
                for b, active, memo, cmemo in frontier:
                    self._close(b, active, memo, dict(cmemo))
                tracker.closed(None)
            return Verdict("explained", count, peak=peak, explored=self.explored, maybe=tracker.done())
        self.breaks = None
        # the reference's answer on the log up to ``stop`` (admit's answers as they were), or on
        # the whole log where this search held too many alternatives
        return self._reference(machine, obs, seen, stop, why, events)

    def _reference(self, machine: Any, obs: Observation, seen: list[Event] | None, stop: Event, why: Any,
                   rest: Iterable[Event]) -> Verdict:
        from itertools import chain

        from kvproof.checker.logs.validate import explain

        if why == "cap":
            events = chain(seen, rest) if seen is not None else self.replay()
            proxy = _Admitted(obs, stop, None, cap=True)
        else:
            whole = seen if seen is not None else self.replay()

            def upto() -> Iterator[Event]:
                for e in whole:
                    yield e
                    if e.line == stop.line:
                        return

            events = upto()
            proxy = _Admitted(obs, stop, why if why != "stop" else None)
        search = self.fallback or Search(machine, proxy, self.max_states)
        search.obs = proxy
        return explain(machine, proxy, events, self.max_states, search)


class _Admitted:
    """``obs`` whose ``admit`` answers as the first pass did: ``None`` before ``stop``, ``why``
    at it (the log's own checks were made once, in order)."""

    def __init__(self, obs: Observation, stop: Event, why: str | None, cap: bool = False):
        self._obs, self._stop, self._why, self._cap = obs, stop, why, cap
        self.internal = obs.internal
        self.unseen = getattr(obs, "unseen", {})

    def admit(self, event: Event) -> str | None:
        """The first pass's answer (past ``stop`` where the flat search takes the log over: the
        observation's)."""
        if self._cap and event.line > self._stop.line:
            return self._obs.admit(event)
        return self._why if event.line == self._stop.line else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._obs, name)


def suits(machine: Any, obs: Observation) -> bool:
    """Whether ``auto`` should run the factored search for ``machine`` and ``obs``
    (:data:`MIN_INTERNAL`): judged from the static footprints of the internal steps."""
    if getattr(obs, "unseen", None) or machine.spec.layout.wide:
        return False
    internal = list(obs.internal)
    from kvproof.model.compiler import CodegenOps, _Emitter

    spec = machine.spec
    reads, writes = {}, {}
    for aid in internal:
        ops = CodegenOps(_Emitter({}))
        if not spec.run_action(spec.instances[aid], ops) or ops.dead:
            continue
        reads[aid], writes[aid] = ops.footprint, ops.written
    if len(reads) < MIN_INTERNAL:  # instances the configuration rules out do not count
        return False
    return all(sum(1 for b in writes if b != a and writes[b] & r) <= 2 for a, r in reads.items())


def factored_search(machine: Any, obs: Observation, max_states: int = DEFAULT_MAX_STATES,
                    fallback: Search | None = None) -> FactoredSearch:
    """A :class:`FactoredSearch` over ``machine`` (a :class:`~kvproof.checker.logs.validate.Checked`);
    :class:`FactoredUnavailable` where it cannot run."""
    return FactoredSearch(machine, obs, max_states, fallback)
