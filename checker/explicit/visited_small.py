"""The visited set of a small search: a Python set, so a small check imports no numpy.

A search starts with a :class:`SmallVisitedSet` (the states themselves in ``exact`` mode, their
64-bit xxh3 fingerprints in ``fingerprint`` mode, in a Python ``set``) and hands its content
to the numpy :class:`~kvproof.checker.explicit.visited.VisitedSet` once it holds more than
:data:`SMALL_STATES` states (:meth:`VisitedSet.holding
<kvproof.checker.explicit.visited.VisitedSet.holding>`), where a Python set's 100-odd bytes
a state would start to count.  Both answer a level the same way: the positions of the first
occurrence of every candidate not seen yet, ascending, deduplicating by the state (``exact``)
or by its fingerprint (``fingerprint``: two states sharing one count as one, in both); so a
search finds the same states in the same order whichever holds them (``tests/test_visited.py``
holds the two to each other, ``tests/test_explicit.py`` a search that grows to one that does
not).
"""

from __future__ import annotations

import sys
from typing import Callable

__all__ = ["MODES", "SMALL_STATES", "SmallVisitedSet", "collision_probability", "default_fingerprint"]

MODES = ("exact", "fingerprint")
"""The visited-set modes: the states themselves, or their 64-bit fingerprints."""

SMALL_STATES = 1 << 16
"""A search's visited set stays a Python set up to this many states (about 6 MB at the
catalogue's widths); past it the numpy visited set takes over."""


def collision_probability(states: int, bits: int = 64) -> float:
    """Upper bound on the chance that two of ``states`` distinct states share a ``bits``-bit
    fingerprint (the birthday bound ``n(n-1)/2 / 2**bits``)."""
    return min(1.0, states * (states - 1) / 2 / 2.0**bits)


def default_fingerprint() -> Callable[[bytes], int]:
    """Both visited sets' fingerprint: a state's 64-bit xxh3 digest."""
    import xxhash  # imported when a set first needs it

    return xxhash.xxh3_64_intdigest


class SmallVisitedSet:
    """The states seen so far (``exact``) or their fingerprints (``fingerprint``), in a Python set."""

    def __init__(self, mode: str, width: int, fingerprint: Callable[[bytes], int] | None = None):
        if mode not in MODES:
            raise ValueError(f"visited-set mode {mode!r}: expected one of {', '.join(MODES)}")
        self.mode = mode
        self.exact = mode == "exact"
        self.width = width
        self.fingerprint = fingerprint if fingerprint is not None or self.exact else default_fingerprint()
        self.seen: set = set()

    def level(self, cand: list[bytes]) -> tuple[list[int], list]:
        """``(fresh, keys)``: the positions in ``cand`` of the first occurrence of every state
        not yet in the set, ascending, and the candidates' keys (the states, or their
        fingerprints) to pass to :meth:`add_level`."""
        if self.exact:
            keys: list = cand
        else:
            keys = list(map(self.fingerprint, cand))
        n = len(keys)
        first = dict(zip(reversed(keys), range(n - 1, -1, -1)))  # the last write wins: the first position
        seen = self.seen
        return sorted(i for k, i in first.items() if k not in seen), keys

    def add_level(self, keys: list, fresh: list[int]) -> None:
        """Insert the keys at positions ``fresh`` (distinct, and not yet in the set)."""
        seen = self.seen
        for i in fresh:
            seen.add(keys[i])

    def __len__(self) -> int:
        return len(self.seen)

    @property
    def nbytes(self) -> int:
        """Bytes the set takes: its table and the objects it holds."""
        return sys.getsizeof(self.seen) + sum(map(sys.getsizeof, self.seen))
