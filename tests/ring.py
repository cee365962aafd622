"""A tiny hand-built spec with known answers, for the symbolic engines' tests.

``x`` counts 0, 2, 4, 6, 0, ... (a step adds 2 modulo 8); ``y`` is a flag set once ``x`` has
reached 4.  Known answers: ``x_never_6`` fails at length 3 (0 -> 2 -> 4 -> 6); ``x_never_7``
holds but is not inductive: odd states 1 -> 3 -> 5 -> 7 make it 4-inductive, not less.
"""

from kvproof.model.framework import Spec, action, invariant, witness
from kvproof.model.layout import Domain, Field

X = Domain("x", 8)
FLAG = Domain("flag", 2)

__all__ = ["Ring"]


class Ring(Spec):
    """x += 2 (mod 8); y := 1 once x = 4."""

    def build_fields(self):
        return [Field("x", (), X), Field("y", (), FLAG)]

    def domain(self, name):  # pragma: no cover - no parameters
        raise KeyError(name)

    @action("ring")
    def advance(self, s, n):
        """x moves on by two."""
        o = s.ops
        n.x = o.ite(o.lt(s.x, 6), o.add(s.x, 2), o.const(0))

    @action("ring")
    def mark(self, s, n):
        """The flag goes up at 4."""
        o = s.ops
        s.require(o.and_(o.eq(s.x, 4), o.eq(s.y, 0)))
        n.y = 1

    @invariant
    def x_never_6(self, s):
        """Fails at length 3."""
        return s.ops.ne(s.x, 6)

    @invariant
    def x_never_7(self, s):
        """Holds; 4-inductive."""
        return s.ops.ne(s.x, 7)

    @invariant
    def flag_only_after_4(self, s):
        """y = 1 only once x has been 4: holds (x = 0, 2 with y = 1 are reachable after a wrap)."""
        o = s.ops
        return o.implies(o.eq(s.y, 1), o.is_in(s.x, (4, 6, 0, 2)))

    @witness
    def sometimes_flag(self, s):
        """The flag goes up (length 3: advance, advance, mark)."""
        return s.ops.eq(s.y, 1)
