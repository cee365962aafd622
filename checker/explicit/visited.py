"""The explicit engine's visited set: sorted runs of 64-bit state fingerprints in numpy arrays.

Every state gets a 64-bit xxh3 fingerprint.  In ``fingerprint`` mode the fingerprint is all
that is kept (8 bytes a state), with a small, reported probability that two distinct states
share one, in which case the second is wrongly taken as visited.  In ``exact`` mode the state
itself is kept beside its fingerprint (as many bytes as the layout has slots, plus 8), and
every fingerprint match is confirmed by comparing the states, so nothing is ever mistaken for
visited.  Fingerprints live in a few sorted numpy arrays ("runs", merged as they grow, as in a
log-structured merge tree), so a whole BFS level of candidate successors is deduplicated with
vectorised sorts, binary searches and comparisons instead of one Python set operation per
transition.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import xxhash

from kvproof.checker.explicit.visited_small import MODES, SmallVisitedSet, collision_probability, default_fingerprint

__all__ = ["MODES", "VisitedSet", "collision_probability"]


class VisitedSet:
    """Fingerprints (and in ``exact`` mode the states) of the states seen so far."""

    def __init__(self, mode: str, width: int, fingerprint: Callable[[bytes], int] = xxhash.xxh3_64_intdigest):
        if mode not in MODES:
            raise ValueError(f"visited-set mode {mode!r}: expected one of {', '.join(MODES)}")
        self.mode = mode
        self.exact = mode == "exact"
        self.width = width
        self.fingerprint = fingerprint
        self.sdtype = np.dtype(f"V{max(width, 1)}")
        self.runs: list[tuple[np.ndarray, np.ndarray | None]] = []  # (sorted fingerprints, states)
        self.size = 0

    def keys(self, states: list[bytes]) -> np.ndarray:
        """The fingerprint of every state, in order."""
        return np.fromiter(map(self.fingerprint, states), dtype=np.uint64, count=len(states))

    def states(self, blob: bytes) -> np.ndarray | None:
        """The states joined in ``blob`` as an array (``exact`` mode; ``None`` otherwise)."""
        if not self.exact:
            return None
        if len(blob) % max(self.width, 1):
            raise ValueError(f"exact visited set: every state must have {self.width} slots")
        return np.frombuffer(blob, dtype=self.sdtype)

    def fresh(self, keys: np.ndarray, states: np.ndarray | None = None) -> np.ndarray:
        """Positions of the first occurrence of every state not yet in the set, in ascending
        order (so states keep their discovery order).  ``states`` (exact mode) are the states
        themselves, aligned with ``keys``."""
        if keys.size == 0:
            return np.zeros(0, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        start = np.ones(sk.size, dtype=bool)
        start[1:] = sk[1:] != sk[:-1]
        first = order[start]  # stable: the earliest position of each fingerprint
        if self.exact and not self._groups_agree(order, start, first, states):
            return self._fresh_slowly(keys, states)
        uniq = keys[first]
        seen = np.zeros(first.size, dtype=bool)
        for run, run_states in self.runs:
            at = np.searchsorted(run, uniq)
            at[at == run.size] = run.size - 1
            hit = run[at] == uniq
            if self.exact and hit.any():
                same = run_states[at] == states[first]
                for i in np.flatnonzero(hit & ~same).tolist():  # a fingerprint collision: look closer
                    hit[i] = self._in_run(run, run_states, uniq[i], states[first[i]])
            seen |= hit
        return np.sort(first[~seen])

    @staticmethod
    def _groups_agree(order, start, first, states) -> bool:
        """Every state shares its fingerprint only with copies of itself (no collision)."""
        group = np.cumsum(start) - 1
        return bool((states[order] == states[first[group]]).all())

    def _fresh_slowly(self, keys: np.ndarray, states: np.ndarray) -> np.ndarray:
        """``fresh`` when two distinct states of one level share a fingerprint (exact mode)."""
        local: dict[bytes, int] = {}
        for i, s in enumerate(states.tolist()):
            local.setdefault(bytes(s), i)
        out = [i for s, i in local.items()
               if not any(self._in_run(run, rs, keys[i], states[i]) for run, rs in self.runs)]
        return np.array(sorted(out), dtype=np.int64)

    @staticmethod
    def _in_run(run: np.ndarray, run_states: np.ndarray, key, state) -> bool:
        lo, hi = np.searchsorted(run, key, "left"), np.searchsorted(run, key, "right")
        return bool((run_states[lo:hi] == state).any())

    def add(self, keys: np.ndarray, states: np.ndarray | None = None) -> None:
        """Insert states (distinct, and not yet in the set) by their fingerprints and, in exact
        mode, themselves."""
        if keys.size == 0:
            return
        order = np.argsort(keys, kind="stable")
        self.runs.append((keys[order], states[order] if self.exact else None))
        self.size += keys.size
        while len(self.runs) > 1 and self.runs[-2][0].size <= 2 * self.runs[-1][0].size:
            (kb, sb), (ka, sa) = self.runs.pop(), self.runs.pop()
            k = np.concatenate((ka, kb))
            order = np.argsort(k, kind="stable")
            self.runs.append((k[order], np.concatenate((sa, sb))[order] if self.exact else None))

    @classmethod
    def holding(cls, small: SmallVisitedSet) -> "VisitedSet":
        """A visited set of ``small``'s mode and fingerprint holding every key ``small`` holds
        (what a search's Python set becomes once the search is large)."""
        big = cls(small.mode, small.width, small.fingerprint or default_fingerprint())
        items = list(small.seen)
        if big.exact:
            big.add(big.keys(items), big.states(b"".join(items)))
        else:
            big.add(np.fromiter(items, dtype=np.uint64, count=len(items)))
        return big

    def level(self, cand: list[bytes]) -> tuple[np.ndarray, tuple]:
        """``(fresh, keys)`` as :meth:`SmallVisitedSet.level
        <kvproof.checker.explicit.visited_small.SmallVisitedSet.level>` gives them (``fresh`` an array
        here): the positions of the first occurrence of every unseen state in ``cand``,
        ascending, and what :meth:`add_level` needs to insert some of them."""
        keys = self.keys(cand)
        states = self.states(b"".join(cand))
        return self.fresh(keys, states), (keys, states)

    def add_level(self, keys: tuple, fresh) -> None:
        """Insert the states at positions ``fresh`` (a prefix of what :meth:`level` answered,
        or any positions of that level)."""
        at = np.asarray(fresh, dtype=np.int64)
        self.add(keys[0][at], None if keys[1] is None else keys[1][at])

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        """Bytes the stored fingerprints and states take."""
        return sum(k.nbytes + (0 if s is None else s.nbytes) for k, s in self.runs)
