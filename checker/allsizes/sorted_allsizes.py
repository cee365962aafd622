"""``prove --all-sizes``: the all-sizes pipeline on the model lifted from the spec.

:func:`lifted_model` hands :func:`~.allsizes.prove_all_sizes` an :class:`~.allsizes.AllSizesModel`
built with no protocol-specific code beyond the protocol's sort declaration and its small
instances (``Spec.lift_sorts()``, ``Spec.small_instances()``):

* the system is :func:`~kvproof.model.sorted_lift.lift_spec` of the scenario's own instance,
  its targets the invariants that lift;
* a ground clause mined from a small instance ("never these slot values together") is lifted
  through the same reading of slots the link uses (:func:`~.sorted_link.link_map`): each request,
  page or chunk the clause names becomes a variable (pairwise distinct, none of them a sort's
  NONE), each chunk one of each request's chunks or not as in the small instance (the rigid count,
  e.g. ``pages(r, c)``), nothing else assumed;
* the facts of rows joined through a pointer field (:func:`joins`: a request's chunk beside the
  page its ``dest`` names) are lifted with the page as the pointer's term;
* before anything is mined, the link with the spec is proved at the protocol's link instances
  and the scenario's own size (:func:`link_at_sizes`): a lifted model that is not the spec's is
  never used;
* the lines it prints are the lift's: what stays fixed (the engine's flags, the domains that are not
  sorts at the scenario's size), the per-element configuration left free, and every
  abstraction the lift derived.

This module knows no protocol.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Sequence

import numpy as np
import z3

from kvproof.checker.allsizes.hook import AllSizesModel, Join
from kvproof.checker.allsizes.quantified import Candidate
from kvproof.checker.allsizes.sorted_link import check_lifted_link, link_map
from kvproof.model.lifting import LiftRefused
from kvproof.model.sorted_lift import LiftedSystem, lift_spec
from kvproof.model.sorted_values import RefDom

__all__ = ["lifted_model", "ClauseLifter", "lift_lines", "joins", "link_at_sizes", "one_element_triples", "PINNED",
           "pins_from", "fits_pins", "pins_outside"]


class ClauseLifter:
    """Ground clauses of the small instance ``small`` read as quantified candidates of
    ``system`` (see the module docstring)."""

    def __init__(self, system: LiftedSystem, small: Any):
        self.system, self.small = system, small
        self.link = link_map(system, small)
        # a sort's NONE stays itself; every other element (a first chunk too) becomes a variable
        self.nones = {z3.Const(none, system.sorts[sort]).get_id() for sort, none in system.decl.sorts.values() if none}
        self.real = {}  # element id -> (sort, element)
        for sort, elems in self.link.universe.items():
            for e in elems:
                if e.get_id() not in self.nones:
                    self.real[e.get_id()] = (sort, e)
        # the count rigids (a request's chunks) and the rigid conditions (a request's over-long
        # flag): the per-element configuration, read off the instance's pins f(args) == BoolVal(b)
        self.counts = [info for info in system.rigid_info.values() if info.kind == "count"]
        self.conditions = [info for info in system.rigid_info.values() if info.kind == "condition"]
        self.informative: set[str] = {i.symbol.name for i in self.conditions}
        """The rigid conditions :meth:`conditioned` may state (:func:`lifted_model` narrows it to
        those that take both values over the instances it mines)."""
        self._truth: dict[tuple, bool] = {}
        st = system.state()
        pinned = {i.symbol.name for i in (*self.counts, *self.conditions)}
        for c in self.link.rigid(st):
            lhs, rhs = c.arg(0), c.arg(1)
            if z3.is_app(lhs) and lhs.decl().name() in pinned:
                self._truth[(lhs.decl().name(), tuple(a.get_id() for a in lhs.children()))] = z3.is_true(rhs)

    def condition_values(self) -> dict[str, set[bool]]:
        """Each rigid condition's values over this instance's elements (``over_long``: {False}
        when no request of the instance is over-long)."""
        names = {i.symbol.name for i in self.conditions}
        out: dict[str, set[bool]] = {n: set() for n in names}
        for (name, _), truth in self._truth.items():
            if name in names:
                out[name].add(truth)
        return out

    def __call__(self, clause: tuple) -> Candidate | None:
        """The clause as a candidate, the elements it names pinned by their counts only."""
        got = self._lift(clause, conditioned=False)
        return got[1] if got else None

    def conditioned(self, clause: tuple) -> tuple[tuple[bool, ...], Candidate] | None:
        """The clause as a candidate conditioned on the per-element configuration of the
        elements it names, as this instance has it (each :attr:`informative` rigid condition of
        each, e.g. ``over_long(r0) → ¬(poll(r0) = success)``), and the truth of those conditions
        (its signature); ``None`` when the clause is not expressible or names no element a
        condition applies to.  Weaker than :meth:`__call__`'s candidate: it holds where that one
        fails only for elements configured otherwise."""
        return self._lift(clause, conditioned=True)

    def _lift(self, clause: tuple, conditioned: bool) -> tuple[tuple[bool, ...], Candidate] | None:
        lits = []
        elems: dict[int, Any] = {}
        for slot, v in clause:
            ob = self.link.observe(slot)
            if ob is None:
                return None
            value = ob.values[v] if v < len(ob.values) else None
            if value is None:
                return None  # a code the model has no counterpart for (old KV of a room)
            for t in (*ob.args, value):
                if isinstance(t, z3.ExprRef) and t.get_id() in self.real:
                    elems.setdefault(t.get_id(), t)
            lits.append((ob.symbol, ob.args, value))
        order = sorted(elems.values(), key=lambda e: (list(self.link.universe).index(e.sort().name()), str(e)))
        vars_ = tuple((f"{e.sort().name()[0].lower()}{i}", e.sort().name()) for i, e in enumerate(order))
        system = self.system
        pins = []
        rigid = [*self.counts, *(i for i in self.conditions if conditioned and i.symbol.name in self.informative)]
        for info in rigid:
            sorts = info.symbol.args
            for combo in itertools.product(*[[e for e in order if e.sort().name() == s] for s in sorts]):
                key = (info.symbol.name, tuple(e.get_id() for e in combo))
                if key in self._truth:
                    pins.append((info.symbol.name, combo, self._truth[key]))
        signature = tuple(truth for name, _, truth in pins if name in self.informative)
        if conditioned and not signature:
            return None

        def body(st: Any, *xs: Any) -> Any:
            sub = list(zip(order, xs))
            put = (lambda t: z3.substitute(t, *sub)) if sub else (lambda t: t)
            ts = [getattr(st, sym)(*[put(a) for a in args]) == put(value) if args else getattr(st, sym)() == put(value)
                  for sym, args, value in lits]
            prem = []
            for sort in dict.fromkeys(e.sort().name() for e in order):
                same = [x for e, x in sub if e.sort().name() == sort]
                none = [n for s, n in system.decl.sorts.values() if s == sort and n]
                if none:
                    same = same + [getattr(st, none[0])()]
                if len(same) > 1:
                    prem.append(z3.Distinct(*same))
            for name, combo, truth in pins:
                term = getattr(st, name)(*[put(e) for e in combo])
                prem.append(term if truth else z3.Not(term))
            return z3.Implies(z3.And(prem), z3.Not(z3.And(ts)))

        cand = Candidate("", vars_, body)
        name = system.formula(cand, system.state()).sexpr()
        return signature, Candidate(" ".join(name.split()), vars_, body)


def joins(system: LiftedSystem, small: Any, states: Any) -> list[Join]:
    """The small instance's reachable ``states`` read through every pointer field (a field over
    sorted domains whose values name elements of another sort, ``dest[r, c]``): one row per state
    and per index whose pointer is set (and, over a counted domain, within the count), holding the
    fields indexed by (part of) that index and the fields of the element it names (``owner``,
    ``content`` of the page), a value naming a request coded relative to the index's request (0:
    NONE, 1: itself, 2: another, 3: no counterpart).  Each :class:`~.allsizes.Join` lifts a fact
    to ``∀ index. real ∧ pointer ≠ NONE → ¬(the values together)``, the pointed element being the
    pointer's term."""
    decl, lay = system.decl, small.layout
    doms = {d.name: d for f in lay.fields for d in f.dims}
    counts: dict[tuple, list[str]] = {}
    for info in system.rigid_info.values():
        if info.kind == "count":
            counts.setdefault(info.domains, []).append(info.symbol.name)
    out = []
    for pname, (psym, pdims, pdom) in system._fields.items():
        if not isinstance(pdom, RefDom) or any(k == "fixed" for k, _, _ in pdims):
            continue
        pidx = [d.name for k, d, _ in pdims if k == "sorted"]
        target = decl.refs[pdom.name][0]
        if not pidx or target in pidx or "request" not in pidx:
            continue
        anchors, targets = [], []
        for fname, (sym, dims, dom) in system._fields.items():
            if fname == pname:
                continue
            fidx = [d.name for k, d, _ in dims if k == "sorted"]
            if isinstance(dom, RefDom) and decl.refs[dom.name][0] != "request":
                continue  # another pointer
            if fidx and set(fidx) <= set(pidx) and fidx == [x for x in pidx if x in fidx]:
                anchors.extend(_columns(fname, dims))
            elif fidx == [target]:
                targets.extend(_columns(fname, dims))
        if not targets:
            continue
        cols = anchors + targets
        req_cols = {j for j, (f, _) in enumerate(cols) if isinstance(system._fields[f][2], RefDom)}
        count = _pointer_count(small, lay, system, pname, pidx, counts.get(tuple(pidx), []), states, doms[target].size)
        blocks = []
        psize = doms[target].size
        for combo in itertools.product(*[range(doms[d].size) for d in pidx]):
            at = dict(zip(pidx, combo))
            if count is not None and combo[-1] >= getattr(small, count)(*combo[:-1]):
                continue
            r = at["request"]
            pslot = lay.slot(pname, *_index(system, pname, at))
            sel = states[states[:, pslot] != psize]
            if not len(sel):
                continue
            tgt = sel[:, pslot].astype(np.int64)
            block = np.zeros((len(sel), len(cols)), dtype=np.uint8)
            for j, (fname, fix) in enumerate(cols):
                if j < len(anchors):
                    col = sel[:, lay.slot(fname, *_index(system, fname, at, fix))]
                else:
                    by = np.array([lay.slot(fname, *_index(system, fname, {target: e}, fix)) for e in range(psize)])
                    col = sel[np.arange(len(sel)), by[tgt]]
                if j in req_cols:
                    dom = system._fields[fname][2]
                    rcount = doms["request"].size
                    col = np.where(col == dom.none_code, 0, np.where(col == r + dom.offset, 1,
                                   np.where((col >= dom.offset) & (col < rcount + dom.offset), 2, 3)))
                block[:, j] = col
            blocks.append(block)
        if not blocks:
            continue
        rows = np.unique(np.concatenate(blocks), axis=0)
        domains = tuple((0, 1, 2) if j in req_cols else tuple(range(lay.by_name[f].values.size))
                        for j, (f, _) in enumerate(cols))
        out.append(Join(pname, tuple(_label(f, fix) for f, fix in cols), rows, domains,
                        frozenset(range(len(anchors), len(cols))),
                        _JoinLift(system, pname, pidx, tuple(cols), len(anchors), count)))
    return out


def _columns(fname: str, dims: Sequence[tuple[str, Any, Any]]) -> list[tuple[str, tuple[tuple[int, int], ...]]]:
    """A field's columns in a join: one per value of its fixed (enumerated) dimensions, e.g.
    ``content`` over (write rank, page) at two ranks is ``content[0]`` and ``content[1]`` of the
    pointed page; each as (field, ((dimension position, value), ...))."""
    fixed = [(j, d.size) for j, (k, d, _) in enumerate(dims) if k == "fixed"]
    return [(fname, tuple(zip([j for j, _ in fixed], vals)))
            for vals in itertools.product(*[range(n) for _, n in fixed])]


def _label(fname: str, fix: tuple[tuple[int, int], ...]) -> str:
    """A join column's name: the field, and its fixed indices if it has any (``content[1]``)."""
    return fname + "".join(f"[{v}]" for _, v in fix)


def _pointer_count(small: Any, lay: Any, system: LiftedSystem, pname: str, pidx: list[str], names: list[str],
                   states: Any, none: int) -> str | None:
    """Which count rigid over the pointer's index bounds where ``small`` sets the pointer: of
    ``names`` (e.g. a request's reserved pages and its sent chunks), those outside of which no
    reachable state sets it, the one counting fewest indices (the last such on a tie, as the
    declaration order gives them); the last name when none does (``None`` without a name).
    Decode's ``dest`` is set for every reserved page, prefill's ``src`` only for the chunks it
    sends: an instance whose request sends fewer chunks than it reserved tells them apart."""
    if not names:
        return None
    doms = {d.name: d for f in lay.fields for d in f.dims}
    fits = []
    for name in names:
        inside, ok = 0, True
        for combo in itertools.product(*[range(doms[d].size) for d in pidx]):
            if combo[-1] < getattr(small, name)(*combo[:-1]):
                inside += 1
                continue
            slot = lay.slot(pname, *_index(system, pname, dict(zip(pidx, combo))))
            if (states[:, slot] != none).any():
                ok = False
                break
        if ok:
            fits.append((inside, name))
    if not fits:
        return names[-1]
    fewest = min(n for n, _ in fits)
    return [name for n, name in fits if n == fewest][-1]


def _index(system: LiftedSystem, fname: str, at: dict[str, int], fix: Sequence[tuple[int, int]] = ()
           ) -> tuple[int, ...]:
    """A field's index at the named sorted indices and the fixed ones ``fix`` (dimension
    position, value; 0 for a one-element domain)."""
    fixed = dict(fix)
    return tuple(at[d.name] if k == "sorted" else fixed.get(j, 0)
                 for j, (k, d, _) in enumerate(system._fields[fname][1]))


class _JoinLift:
    """A joined fact (column, value pairs) as a candidate quantified over the pointer's index."""

    def __init__(self, system: LiftedSystem, ptr: str, pidx: list[str], cols: tuple[str, ...], n_anchor: int,
                 count: str | None):
        self.system, self.ptr, self.pidx, self.cols, self.n, self.count = system, ptr, pidx, cols, n_anchor, count

    def __call__(self, fact: tuple) -> Candidate | None:
        system, decl = self.system, self.system.decl
        if any(isinstance(system._fields[self.cols[j][0]][2], RefDom) and v == 3 for j, v in fact):
            return None
        vars_ = tuple((f"{d[0]}{i}", decl.sorts[d][0]) for i, d in enumerate(self.pidx))
        psym, pdims, pdom = system._fields[self.ptr]
        tnone = decl.sorts[decl.refs[pdom.name][0]][1]

        def body(st: Any, *xs: Any) -> Any:
            at = dict(zip(self.pidx, xs))
            r = at["request"]
            rnone = getattr(st, decl.sorts["request"][1])()
            pointer = getattr(st, self.ptr)(*xs)
            lits = []
            for j, v in fact:
                fname, fix = self.cols[j]
                sym, dims, dom = system._fields[fname]
                fixed = dict(fix)
                args = [(pointer if j >= self.n else at[d.name]) if k == "sorted" else ed.consts[fixed[i]]
                        for i, (k, d, ed) in enumerate(dims) if k != "one"]
                lhs = getattr(st, fname)(*args)
                if isinstance(dom, RefDom):
                    lits.append([lhs == rnone, lhs == r, z3.And(lhs != r, lhs != rnone)][v])
                else:
                    lits.append(lhs == dom.consts[v])
            prem = [r != rnone, pointer != getattr(st, tnone)()]
            if self.count is not None:
                prem.append(getattr(st, self.count)(*xs))
            return z3.Implies(z3.And(prem), z3.Not(z3.And(lits)))

        cand = Candidate("", vars_, body)
        name = system.formula(cand, system.state()).sexpr()
        return Candidate(" ".join(name.split()), vars_, body)


def one_element_triples(system: LiftedSystem, small: Any) -> Callable[[Sequence[tuple]], list[tuple]]:
    """Which three-value facts of ``small`` ``--template-arity 3`` keeps: those whose slots all
    belong to one element (the same index of the same sorted domain first; a request's lease,
    age and phases), as the lifted model's fields say."""
    from kvproof.checker.symbolic.lift import field_slots
    heads = []
    for fname, idx in field_slots(small.layout):
        dims = system._fields[fname][1]
        first = next(((d.name, i) for (k, d, _), i in zip(dims, idx) if k == "sorted"), None)
        heads.append(first)

    def keep(clauses: Sequence[tuple]) -> list[tuple]:
        out = []
        for c in clauses:
            if len(c) == 3:
                hs = {heads[s] for s, _ in c}
                if len(hs) == 1 and None not in hs:
                    out.append(c)
        return out
    return keep


def lift_lines(system: LiftedSystem) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(fixed, abstractions): what the lifted model keeps at the scenario's values, and what it
    over-approximates (each abstraction the lift derived, with the line that needed it)."""
    spec = system.spec
    fixed = ["the engine's flags as the scenario sets them (Python constants of the lift)"]
    kept = sorted({(d.name, d.size) for f in spec.layout.fields for kind, d, _ in system._fields[f.name][1]
                   if kind != "sorted"})
    if kept:
        fixed.append("at the scenario's size: " + ", ".join(f"{n} ({s})" for n, s in kept))
    enums = sorted({(d.name, d.size) for f in spec.layout.fields for d in [f.values]
                    if d.name not in system.decl.refs and d.size > 2 and any(ch.isdigit() for ch in (d.labels or ("0",))[-1])})
    if enums:
        fixed.append("clocks and counters bounded as in the scenario: " + ", ".join(f"{n} (0..{s - 1})" for n, s in enums))
    free = [f"{info.symbol.name}({', '.join(info.domains)})" for info in system.rigid_info.values()]
    if free:
        fixed.append("configuration per element, any value: " + ", ".join(free))
    if system.pins:
        fixed.append(PINNED + ", ".join(f"{name} {'true' if v else 'false'}" for name, v in sorted(system.pins.items())))
    return tuple(fixed), tuple(system.abstractions)


PINNED = "configuration per element, fixed as in the scenario (every element alike): "
"""How :func:`lift_lines` states the rigid conditions a lift fixes (:attr:`LiftedSystem.pins`),
each ``name true|false``; :func:`pins_from` reads them back."""


def pins_from(fixed: Sequence[str]) -> dict[str, bool]:
    """The rigid conditions a lift fixed, read back from its ``fixed`` lines (a certificate's
    ``; fixed:`` header): ``{}`` when none says so."""
    out: dict[str, bool] = {}
    for line in fixed:
        if line.startswith(PINNED):
            for item in line[len(PINNED):].split(", "):
                name, _, value = item.partition(" ")
                out[name] = value == "true"
    return out


def fits_pins(system: LiftedSystem, inst: Any, pins: dict[str, bool]) -> bool:
    """Every element of instance ``inst`` has each rigid condition of ``pins`` at its pinned
    value (``system``: a lift that has those conditions as symbols, i.e. without the pins)."""
    values = ClauseLifter(system, inst).condition_values()
    return all(values.get(name, {v}) <= {v} for name, v in pins.items())


def pins_outside(system: LiftedSystem, spec: Any, inst: Any) -> dict[str, bool]:
    """The rigid conditions that every element of the scenario ``spec`` has alike and that some
    element of the instance ``inst`` has otherwise, each with the scenario's value: what fixing
    them at the scenario's value leaves ``inst`` out of (an over-long request of a small instance
    mined for an engine whose scenario has none)."""
    own = ClauseLifter(system, spec).condition_values()
    there = ClauseLifter(system, inst).condition_values()
    return {name: next(iter(vs)) for name, vs in own.items() if len(vs) == 1 and there.get(name, set()) - vs}


def link_at_sizes(system: LiftedSystem, spec: Any, say: Callable[[str], None] = lambda text: None,
                  fits: Callable[[Any], bool] = lambda inst: True) -> tuple[list[str], str]:
    """The link of ``system`` with the spec at each of ``spec.link_instances()`` that ``fits``
    (the instances of the pinned configuration, :attr:`LiftedSystem.pins`) and at ``spec``
    itself (:func:`~.sorted_link.check_lifted_link`, no hypothesis): one line per size,
    and "" or the first refutation (a lifted model not linked to its spec is not used)."""
    lines = []
    for inst in (*[i for i in spec.link_instances() if fits(i)], spec):
        size = inst.size_label()
        t0 = time.perf_counter()
        rep = check_lifted_link(system, inst)
        steps = sum(r.instances for r in rep.results if r.kind == "step")
        if not rep.proved:
            bad = next(r for r in rep.results if r.verdict != "proved")
            return lines, (f"the lifted model is not linked to the spec at {size}: {bad.kind} {bad.name} {bad.verdict}"
                           f" ({bad.offending})")
        lines.append(f"{size}: Init, {steps} action instances and {sum(r.kind == 'claim' for r in rep.results)} "
                     f"claims proved, no hypothesis ({time.perf_counter() - t0:.1f} s)")
        say(f"link proved at {size}")
    return lines, ""


def lifted_model(spec: Any, targets: Sequence[str] | None = None, pins: dict[str, bool] | None = None
                 ) -> AllSizesModel | None:
    """The all-sizes model lifted from ``spec`` (``None`` when its protocol declares no sorts or
    no small instance to mine; :class:`~kvproof.model.lifting.LiftRefused` when an action cannot
    be lifted).  With ``pins`` (rigid conditions fixed at one value for every element, as every
    element of the scenario has it: :func:`pins_outside`) the lift has no symbol for them, and
    only the small and link instances whose every element has them so are mined and linked."""
    if spec.lift_sorts() is None:
        return None
    try:
        smalls = list(spec.small_instances())
    except ValueError as e:  # a small instance the protocol's own checks refuse for this engine
        raise LiftRefused(f"the small instances to mine could not be built: {e}") from None
    fits: Callable[[Any], bool] = lambda inst: True
    if pins:
        free = lift_spec(spec, claims=targets)
        fits = lambda inst, free=free: fits_pins(free, inst, pins)
        smalls = [s for s in smalls if fits(s)]
    if not smalls:
        return None
    system = lift_spec(spec, claims=targets, pins=pins)
    names = tuple(c.name for c in system.claims())
    fixed, abstractions = lift_lines(system)
    lifters = [ClauseLifter(system, s) for s in smalls]
    # a rigid condition is a column candidates may be conditioned on where the mined instances
    # show it both ways (an over-long request beside one that is not); one no instance varies
    # says nothing the unconditioned candidate does not
    seen: dict[str, set[bool]] = {}
    for lf in lifters:
        for name, values in lf.condition_values().items():
            seen.setdefault(name, set()).update(values)
    for lf in lifters:
        lf.informative = {name for name, values in seen.items() if len(values) == 2}
    more = tuple((s, lf, lambda states, s=s: joins(system, s, states), one_element_triples(system, s))
                 for s, lf in zip(smalls[1:], lifters[1:]))
    # the bounded filter: three real elements and NONE of a sort with one, two of any other sort
    filter_sizes = {sort: 4 if any(s == sort and none for s, none in system.decl.sorts.values()) else 2
                    for sort in system.uninterpreted}
    return AllSizesModel(system, names, smalls[0], lifters[0], fixed, abstractions,
                         lambda states: joins(system, smalls[0], states),
                         lambda invariant, source: link_map(system, spec), more=more,
                         prelink=lambda say: link_at_sizes(system, spec, say, fits), filter_sizes=filter_sizes,
                         triples=one_element_triples(system, smalls[0]))
