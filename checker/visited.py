"""The explicit engine's visited set: sorted runs of state keys in numpy arrays.

A state's *key* is either the state itself (``exact``: a fixed-width byte string, as many bytes
as the layout has slots) or a 64-bit xxh3 fingerprint of it (``fingerprint``: 8 bytes, with a
small, reported probability that two distinct states share one, in which case the second is
wrongly taken as visited).  Keys live in a few sorted numpy arrays ("runs", merged as they grow,
as in a log-structured merge tree), so a whole BFS level of candidate successors is deduplicated
with vectorised sorts and binary searches instead of one Python set operation per transition,
and a stored state costs its key's bytes and nothing else.
"""

from __future__ import annotations

import numpy as np
import xxhash

__all__ = ["MODES", "VisitedSet", "collision_probability"]

MODES = ("exact", "fingerprint")

_fingerprint = xxhash.xxh3_64_intdigest


def collision_probability(states: int, bits: int = 64) -> float:
    """Upper bound on the chance that two of ``states`` distinct states share a ``bits``-bit
    fingerprint (the birthday bound ``n(n-1)/2 / 2**bits``)."""
    return min(1.0, states * (states - 1) / 2 / 2.0**bits)


class VisitedSet:
    """Keys of the states seen so far, in sorted numpy runs."""

    def __init__(self, mode: str, width: int):
        if mode not in MODES:
            raise ValueError(f"visited-set mode {mode!r}: expected one of {', '.join(MODES)}")
        self.mode = mode
        self.width = width
        self.dtype = np.dtype(np.uint64) if mode == "fingerprint" else np.dtype(f"S{max(width, 1)}")
        self.runs: list[np.ndarray] = []
        self.size = 0

    def keys(self, states: list[bytes]) -> np.ndarray:
        """The key of every state, in order."""
        if self.mode == "fingerprint":
            return np.fromiter(map(_fingerprint, states), dtype=np.uint64, count=len(states))
        blob = b"".join(states)
        if len(blob) != self.width * len(states):
            raise ValueError(f"exact visited set: every state must have {self.width} slots")
        return np.frombuffer(blob, dtype=self.dtype)

    def fresh(self, keys: np.ndarray) -> np.ndarray:
        """Positions in ``keys`` of the first occurrence of every key not yet in the set, in
        ascending order (so states keep their discovery order)."""
        if keys.size == 0:
            return np.zeros(0, dtype=np.int64)
        uniq, first = np.unique(keys, return_index=True)
        seen = np.zeros(uniq.size, dtype=bool)
        for run in self.runs:
            at = np.searchsorted(run, uniq)
            at[at == run.size] = run.size - 1
            seen |= run[at] == uniq
        return np.sort(first[~seen])

    def add(self, keys: np.ndarray) -> None:
        """Insert keys (distinct, and not yet in the set)."""
        if keys.size == 0:
            return
        self.runs.append(np.sort(keys.astype(self.dtype, copy=False)))
        self.size += keys.size
        while len(self.runs) > 1 and self.runs[-2].size <= 2 * self.runs[-1].size:
            b, a = self.runs.pop(), self.runs.pop()
            self.runs.append(np.sort(np.concatenate((a, b)), kind="stable"))

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        """Bytes the stored keys take."""
        return sum(r.nbytes for r in self.runs)
