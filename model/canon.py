"""Symmetry reduction's hot path: a compiled canonicaliser for a declared :class:`Symmetry`.

The canonical form of a state is the member of its orbit whose interchangeable elements appear
in sorted order of their *keys*.  An element's key is its row (every slot indexed by it) and,
for every slot whose value may refer to an element, whether it refers to this one.  Keys are
intrinsic (a permutation moves an element's key with it), so sorting them picks one arrangement
per orbit; two elements with equal keys are unreferenced and have equal rows, so swapping them
changes nothing and the tie does not matter.  That makes the form canonical: two states get the
same representative exactly when they are in the same orbit.

Like the successor function, the key computation is compiled into one straight-line Python
function per spec; applying a permutation is a byte gather plus a translation of the slots that
refer to elements, cached per permutation.
"""

from __future__ import annotations

from math import factorial
from itertools import permutations, product
from operator import itemgetter
from typing import Callable

from kvproof.model.framework import Spec
from kvproof.model.symmetry import Symmetry

__all__ = ["Canonicaliser", "SymmetryUnsupported"]


class SymmetryUnsupported(ValueError):
    """A declaration this canonicaliser cannot reduce soundly (the message says why)."""


class _Perms:
    """Permutations of one sort's elements acting on states: rows moved, references rewritten."""

    def __init__(self, layout, symmetry: Symmetry):
        sort = symmetry.sort
        n = sort.domain.size
        self.size = layout.size
        self.label = sort.domain.label
        rows: list[list[int]] = [[] for _ in range(n)]
        self.ref_fields = []  # (base, slots, code map entries, has a sentinel)
        for f in layout.fields:
            base = layout.base[f.name]
            refs = symmetry.refs.get(f.values.name)
            if refs is not None and len(refs) != f.values.size:
                raise SymmetryUnsupported(f"{f.values.name}: {len(refs)} reference entries for {f.values.size} codes")
            if sort.domain in f.dims:
                if refs is not None:
                    raise SymmetryUnsupported(f"field {f.name}: a field indexed by {sort.domain.name} whose values "
                                              f"also name a {sort.domain.name} cannot be permuted")
                pos = f.dims.index(sort.domain)  # the element's slots: every index with it there
                for idx in product(*(range(d.size) for d in f.dims)):
                    rows[idx[pos]].append(layout.slot(f.name, *idx))
            elif refs is not None:
                body = f.width - (1 if f.sentinel else 0)
                if f.sentinel and refs[f.init] is not None:
                    raise SymmetryUnsupported(f"field {f.name}: its sentinel value names an element")
                self.ref_fields.append((base, body, refs, f.sentinel))
        self.rows = rows
        self.classes = sort.nontrivial
        self.order = Symmetry(sort).order
        self.codes = {}  # (element, role) -> code, per value domain
        for _, _, refs, _ in self.ref_fields:
            if id(refs) not in self.codes:
                self.codes[id(refs)] = {ref: c for c, ref in enumerate(refs) if ref is not None}
        self.cache: dict[tuple[int, ...], Callable[[bytes], bytes]] = {}
        self.identity = tuple(range(n))

    def apply(self, perm: tuple[int, ...], s: bytes) -> bytes:
        """The state with element ``perm[e]``'s data moved to element ``e``."""
        f = self.cache.get(perm)
        if f is None:
            f = self.cache[perm] = self.permuter(perm)
        return f(s)

    def permuter(self, perm: tuple[int, ...]) -> Callable[[bytes], bytes]:
        """``apply`` for one permutation, as a function."""
        new_of = {old: e for e, old in enumerate(perm)}
        fixes: list[tuple[int, int, bytes]] = []
        for base, count, refs, sentinel in self.ref_fields:
            codes = self.codes[id(refs)]
            table = bytearray(range(256))
            for c, ref in enumerate(refs):
                if ref is not None:
                    table[c] = codes[(new_of[ref[0]], ref[1])]
            # a sentinel slot holds a code no permutation changes (checked above): include it,
            # so that neighbouring fields with the same translation merge into one slice
            end = base + count + (1 if sentinel else 0)
            if fixes and fixes[-1][1] == base and fixes[-1][2] == table:
                fixes[-1] = (fixes[-1][0], end, fixes[-1][2])
            else:
                fixes.append((base, end, bytes(table)))
        moves = self._moves(perm)
        if moves is None:
            gather = list(range(self.size))
            for e, old in enumerate(perm):
                for a, b in zip(self.rows[e], self.rows[old]):
                    gather[a] = b
            get = itemgetter(*gather)

            def permute(s: bytes) -> bytes:
                t = bytearray(get(s))
                for a, b, table in fixes:
                    t[a:b] = t[a:b].translate(table)
                return bytes(t)

            return permute

        def permute_runs(s: bytes) -> bytes:
            t = bytearray(s)
            for dst, src in moves:
                t[dst] = s[src]
            for a, b, table in fixes:
                t[a:b] = t[a:b].translate(table)
            return bytes(t)

        return permute_runs

    def _moves(self, perm: tuple[int, ...]) -> list[tuple[slice, slice]] | None:
        """Row moves of ``perm`` as (destination, source) slices, when rows are a few evenly
        spaced runs of slots (then a move is one C-level slice copy); else ``None``."""
        moves = []
        for e, old in enumerate(perm):
            if e == old:
                continue
            dst, src = _arithmetic_runs(self.rows[e]), _arithmetic_runs(self.rows[old])
            if len(dst) > 4 or [(b - a, k) for a, b, k in dst] != [(b - a, k) for a, b, k in src]:
                return None
            moves += [(slice(a, b + 1, k), slice(c, d + 1, k)) for (a, b, k), (c, d, _) in zip(dst, src)]
        return moves

    def swaps(self) -> list[tuple[str, tuple[int, ...]]]:
        """Swaps of neighbours within each class (they generate the group), described."""
        out = []
        for c in self.classes:
            for a, b in zip(c, c[1:]):
                p = list(self.identity)
                p[a], p[b] = b, a
                out.append((f"{self.label(a)} and {self.label(b)}", tuple(p)))
        return out

    def every(self) -> list[tuple[int, ...]]:
        """Every permutation of the group (for the sorts that are searched, not sorted)."""
        out = [()]
        for c in self.classes:
            out = [done + (c, image) for done in out for image in permutations(c)]
        perms = []
        for choice in out:
            p = list(self.identity)
            for k in range(0, len(choice), 2):
                for e, old in zip(choice[k], choice[k + 1]):
                    p[e] = old
            perms.append(tuple(p))
        return perms


class Canonicaliser:
    """``canon(s)`` (the orbit's representative), ``orbit(s)`` (the orbit's size) and the
    generating swaps, for one spec and its symmetry declaration.

    The declaration's first sort is *sorted* (its elements are put in key order); each further
    sort (``Symmetry.also``: decode pages, say) is *searched*: the canonical form is the least,
    over every permutation of those sorts, of the sorted form.  That stays exact, at the price
    of one sorted form per such permutation.
    """

    def __init__(self, spec: Spec, symmetry: Symmetry):
        self.spec, self.symmetry = spec, symmetry
        layout = spec.layout
        self.size = layout.size
        self.main = _Perms(layout, symmetry)
        self.rows, self.classes, self.identity = self.main.rows, self.main.classes, self.main.identity
        self._ref_fields, self._cache, self.order = self.main.ref_fields, self.main.cache, self.main.order
        self.extra = [_Perms(layout, x) for x in symmetry.also]
        self.searched: list[Callable[[bytes], bytes]] = [lambda s: s]
        for x in self.extra:
            self.searched = [_then(f, x.permuter(p)) for f in self.searched for p in x.every() if p != x.identity] \
                + self.searched
        self.extra_order = len(self.searched)
        main_canon, main_orbit, self.source = self._compile()
        if len(self.searched) == 1:
            self.canon, self.orbit = main_canon, main_orbit
        else:
            self.canon, self.orbit = self._searched(main_canon, main_orbit)

    def _searched(self, main_canon, main_orbit):
        perms = self.searched
        order = self.extra_order

        def canon(s: bytes) -> bytes:
            return min([main_canon(f(s)) for f in perms])

        def orbit(s: bytes) -> int:
            forms = [main_canon(f(s)) for f in perms]
            return main_orbit(s) * order // forms.count(main_canon(s))

        return canon, orbit

    def apply(self, perm: tuple[int, ...], s: bytes) -> bytes:
        """The state with element ``perm[e]`` of the first sort moved to element ``e``."""
        return self.main.apply(perm, s)

    def generators(self) -> list[tuple[str, Callable[[bytes], bytes]]]:
        """(description, function) of swaps that generate every allowed permutation."""
        out = []
        for perms in [self.main] + self.extra:
            out += [(text, perms.permuter(p)) for text, p in perms.swaps()]
        return out

    # -- compiled key, canonical form, orbit size --------------------------------------------
    def _row_src(self, e: int) -> str:
        """An expression for element ``e``'s row: bytes sliced out of the state with steps
        (``s[0:61:5]``: one C-level slice, compared with ``memcmp``) when its slots fall into a
        few arithmetic runs, else an ``itemgetter`` tuple."""
        runs = _arithmetic_runs(self.rows[e])
        if len(runs) <= 4:
            return " + ".join(f"s[{a}:{b + 1}:{k}]" if k > 1 else f"s[{a}:{b + 1}]" for a, b, k in runs)
        return f"ROW{e}(s)"

    def _key_src(self, e: int) -> str:
        parts = [self._row_src(e)]
        for base, count, refs, _ in self._ref_fields:
            for role_code, (el, _role) in ((c, r) for c, r in enumerate(refs) if r is not None):
                if el == e:
                    parts.extend(f"s[{base + i}] == {role_code}" for i in range(count))
        return "(" + ", ".join(parts) + ",)"

    def _compile(self):
        n = len(self.rows)
        members = sorted({e for c in self.classes for e in c})
        rows = [f"    r{e} = {self._row_src(e)}" for e in members]
        keys = [f"    k{e} = {self._key_src(e)}" for e in members]
        strict = " and ".join(" < ".join(f"r{e}" for e in c) for c in self.classes)
        # canon: rows in strictly ascending order decide alone (the common case); rows that are
        # all distinct give the permutation by sorting them; only equal rows need the full keys
        # (rows, then which referring slots name the element)
        lines = ["def canon(s):"] + rows + [f"    if {strict}:", "        return s"]
        perm = [str(e) for e in range(n)]
        for ci, c in enumerate(self.classes):
            pairs = ", ".join(f"(r{e}, {e})" for e in c)
            lines.append(f"    o{ci} = sorted(({pairs}))")
            ties = " or ".join(f"o{ci}[{i}][0] == o{ci}[{i + 1}][0]" for i in range(len(c) - 1))
            lines += [f"    if {ties}:", "        return SLOW(s)"]
            for pos, e in enumerate(c):
                perm[e] = f"o{ci}[{pos}][1]"
        lines.append(f"    p = ({', '.join(perm)},)")
        lines.append("    f = CACHE.get(p)")
        lines.append("    return APPLY(p, s) if f is None else f(s)")
        lines += ["def slow(s):"] + keys
        in_order = " and ".join(" <= ".join(f"k{e}" for e in c) for c in self.classes)
        lines += [f"    if {in_order}:", "        return s"]
        perm = [str(e) for e in range(n)]
        for ci, c in enumerate(self.classes):
            pairs = ", ".join(f"(k{e}, {e})" for e in c)
            lines.append(f"    o{ci} = sorted(({pairs}))")
            for pos, e in enumerate(c):
                perm[e] = f"o{ci}[{pos}][1]"
        lines.append(f"    return APPLY(({', '.join(perm)},), s)")
        # orbit: the group's order over the arrangements that leave the state unchanged
        lines += ["def orbit(s):"] + rows + [f"    if {strict}:", "        return ORDER"] + keys
        groups = []
        for c in self.classes:
            if len(c) == 2:
                groups.append(f"(2 if k{c[0]} == k{c[1]} else 1)")
            else:
                groups.append(f"TIES(({', '.join(f'k{e}' for e in c)},))")
        lines.append(f"    return ORDER // ({' * '.join(groups)})")
        src = "\n".join(lines)
        ns = {"APPLY": self.apply, "ORDER": self.order, "TIES": _ties, "CACHE": self._cache}
        for e in members:
            ns[f"ROW{e}"] = _getter(self.rows[e])
        exec(compile(src, "<kvproof-canon>", "exec"), ns)
        ns["SLOW"] = ns["slow"]
        return ns["canon"], ns["orbit"], src


def _arithmetic_runs(slots: list[int]) -> list[tuple[int, int, int]]:
    """``slots`` as maximal runs ``(first, last, step)`` of evenly spaced slots, in order."""
    runs: list[tuple[int, int, int]] = []
    for x in slots:
        if runs:
            a, b, k = runs[-1]
            if a == b and x > b:
                runs[-1] = (a, x, x - b)
                continue
            if x - b == k:
                runs[-1] = (a, x, k)
                continue
        runs.append((x, x, 1))
    return runs


def _getter(slots: list[int]) -> Callable[[bytes], tuple]:
    """``itemgetter`` that always returns a tuple (also for one slot)."""
    if len(slots) == 1:
        (k,) = slots
        return lambda s: (s[k],)
    return itemgetter(*slots)


def _then(first: Callable[[bytes], bytes], second: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    return lambda s: second(first(s))


def _ties(keys: tuple) -> int:
    """How many arrangements of these keys leave the state unchanged: the product of the
    factorials of the multiplicities of equal keys."""
    counts: dict = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    out = 1
    for m in counts.values():
        out *= factorial(m)
    return out
