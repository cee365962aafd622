"""The link of a lifted model (:mod:`kvproof.model.sorted_lift`) with a spec instance, derived.

A parametric model written apart from the spec would need a correspondence with the spec's slots
written too; a lifted one does not: every field of the spec is a symbol of the lifted model, every sorted
index an element, every code of a value domain a constant or an element.  :func:`link_map`
builds the :class:`~.link.LinkMap` of :mod:`.link` from that alone, for any instance of the
protocol with the engine the model was lifted from (other numbers of requests, pages, prompt
lengths, tenants): the bounded universe (one element per request, page, prefill page, chunk
index and tenant, plus each sort's NONE), the observation of every slot, the rigid symbols as
the instance fixes them (its :func:`~kvproof.model.lifting.per_element` methods and declared
tables, evaluated on the instance), each spec action instance a step of the lifted actions of
the same name and fixed parameters (every case of its split), and the witnesses of the choice
functions (their definitions, or read off the spec's successor).  :func:`check_lifted_link`
then proves the three obligations of :mod:`.link` at that size.

This module knows no protocol.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import z3

from kvproof.checker.symbolic.lift import field_slots
from kvproof.checker.allsizes.link import LinkMap, LinkReport, Observation, check_link
from kvproof.model.sorted_lift import LiftedSystem
from kvproof.model.sorted_values import EnumDom, RefDom

__all__ = ["link_map", "check_lifted_link"]


def _domains(spec: Any) -> dict[str, Any]:
    """The instance's index domains by name (those of its fields and action parameters)."""
    out: dict[str, Any] = {}
    for f in spec.layout.fields:
        for d in f.dims:
            out.setdefault(d.name, d)
    for a in spec.actions:
        for p in a.params:
            d = spec.domain(p)
            out.setdefault(d.name, d)
    return out


def link_map(system: LiftedSystem, spec: Any) -> LinkMap:
    """The :class:`~.link.LinkMap` of ``system`` and ``spec`` (an instance of the protocol the
    system was lifted from, with the same engine; see the module docstring)."""
    decl = system.decl
    doms = _domains(spec)
    sizes: dict[str, int] = {}
    for name, (sort, none) in decl.sorts.items():
        sizes[sort] = doms[name].size + (1 if none else 0) if name in doms else (1 if none else 0)
    tables: dict[str, tuple[Any, tuple[int, ...]]] = {}
    own = spec.lift_sorts()  # the instance's own tables (the lifted spec's are of another size)
    for name, info in system.rigid_info.items():
        if info.kind == "table" and info.source is not None:
            source = next(t for t, index, fn, _ in own.tables if fn == name and index == info.domains[0])
            values = tuple(sorted(set(source)))
            tables[name] = (source, values)
            sizes[info.symbol.result] = max(len(values), 1)
    universe, axioms = system.bounded(sizes)

    def element(domain: str, i: int) -> Any:
        sort, none = decl.sorts[domain]
        return universe[sort][i + (1 if none else 0)]

    def none_of(domain: str) -> Any:
        sort, none = decl.sorts[domain]
        return universe[sort][0] if none else None

    def value(dom: Any, v: int, size: int) -> Any:
        if isinstance(dom, EnumDom):
            return dom.consts[v] if v < len(dom.consts) else None
        if isinstance(dom, RefDom):
            index, none_code, _ = decl.refs[dom.name]
            if v == (size - 1 if none_code is None else none_code):  # the instance's NONE code
                return none_of(index)
            i = v - dom.offset
            return element(index, i) if 0 <= i < doms[index].size else None
        return None

    table: list[Observation | None] = []
    for fname, idx in field_slots(spec.layout):
        sym, dims, dom = system._fields[fname]
        f = spec.layout.by_name[fname]
        xs, ok = [], True
        for (kind, d, extra), i in zip(dims, idx):
            size = doms[d.name].size  # the instance's, not the lifted spec's
            if kind == "sorted":
                if i < size:
                    xs.append(element(d.name, i))
                elif none_of(d.name) is not None:
                    xs.append(none_of(d.name))
                else:
                    ok = False
            elif kind == "one":
                ok = ok and i == 0
            elif i < size:
                xs.append(extra.consts[i])
            else:
                ok = False
        table.append(Observation(sym.name, tuple(xs), tuple(value(dom, v, f.values.size) for v in range(f.values.size)))
                     if ok else None)

    def rigid(st: Any) -> list[Any]:
        out = []
        for name, info in system.rigid_info.items():
            f = getattr(st, name)
            if info.kind == "table":
                if name not in tables:
                    continue
                source, values = tables[name]
                res = universe[info.symbol.result]
                for i in range(doms[info.domains[0]].size):
                    out.append(f(element(info.domains[0], i)) == res[values.index(source[i])])
                continue
            args_doms = info.domains if info.kind == "condition" else info.domains[:-1]
            method = getattr(spec, info.source)
            for ints in itertools.product(*[range(doms[d].size) for d in args_doms]):
                els = [element(d, i) for d, i in zip(args_doms, ints)]
                got = method(*ints)
                if info.kind == "condition":
                    out.append(f(*els) == z3.BoolVal(bool(got)))
                else:
                    counted = info.domains[-1]
                    for c in range(doms[counted].size):
                        out.append(f(*els, element(counted, c)) == z3.BoolVal(c < got))
        return out

    def options(inst: Any) -> list:
        p = inst.params()
        out = []
        for a in system.actions:
            case = system.cases[a.name]
            if case.spec_action != inst.name or any(p[q] != v for q, v in case.fixed.items()):
                continue
            out.append((a, {q: element(spec.domain(q).name, p[q]) for q, _ in a.params}))
        return out

    names = {c.name for c in spec.claims}
    return LinkMap(system, sizes, universe, axioms, lambda slot: table[slot], rigid, options, system.witness,
                   tuple(c.name for c in system.claims() if c.name in names))


def check_lifted_link(system: LiftedSystem, spec: Any, seconds: float = 600.0, only: Sequence[str] | None = None,
                      claims: bool = True, progress: Callable[[str], None] | None = None) -> LinkReport:
    """Prove at ``spec``'s size that the lifted ``system`` over-approximates it (every spec step
    is a step of the model, Init, and the shared claims agree): :func:`~.link.check_link` on
    :func:`link_map`."""
    return check_link(spec, link_map(system, spec), claims=claims, seconds=seconds, only=only, progress=progress)
