"""The native backend's visited set and row helpers, below both :mod:`.native` and :mod:`.native_workers`.

:class:`NativeVisited` is the open-addressing visited set the compiled C (``kv_insert``) fills;
:func:`grown_table` rehashes one of its tables; :class:`Scratch` holds one thread's buffers
for the C calls; :func:`take_rows` and :func:`join_rows` gather and join successor pieces.
The ``code`` they take is a loaded :class:`~kvproof.checker.explicit.native.NativeCode`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_LOAD", "Scratch", "grown_table", "NativeVisited", "take_rows", "join_rows"]


class Scratch:
    """One thread's buffers for :class:`~.native.NativeCode`'s calls: successors, their codes, counts, errors."""

    def __init__(self, cap: int, width: int):
        self.err = np.zeros(2, np.int64)
        self.made = np.zeros(1, np.int64)
        self.out = np.empty((cap, width), np.uint8)
        self.codes = np.empty(cap, np.int64)

    def grow(self, keep: int) -> None:
        """Twice the room for successors, the first ``keep`` kept."""
        out, codes = np.empty((2 * len(self.out), self.out.shape[1]), np.uint8), np.empty(2 * len(self.codes), np.int64)
        out[:keep], codes[:keep] = self.out[:keep], self.codes[:keep]
        self.out, self.codes = out, codes


MAX_LOAD = (3, 4)
"""An open-addressing table is at most this full (3/4; between 3/8 and 3/4 as it doubles):
linear probing stays short at that load (a new key's probes run through a cache line or two),
and a table at most half full took a third more memory at the 6 M-state benchmark."""


def grown_table(code: Any, tkeys: np.ndarray, tidx: np.ndarray | None, need: int) -> tuple:
    """An open-addressing table (``tkeys``, and ``tidx`` in exact mode) rehashed to hold ``need``
    keys at most :data:`MAX_LOAD` full (the same arrays when they already can)."""
    num, den = MAX_LOAD
    if need * den <= len(tkeys) * num:
        return tkeys, tidx
    cap = len(tkeys)
    while need * den > cap * num:
        cap *= 2
    keys, idx = np.zeros(cap, np.uint64), (None if tidx is None else np.zeros(cap, np.int32))
    code.rehash(tkeys.ctypes.data, None if tidx is None else tidx.ctypes.data, len(tkeys), keys.ctypes.data,
                None if idx is None else idx.ctypes.data, cap - 1)
    return keys, idx


class NativeVisited:
    """The visited set in C (``kv_insert``): an open-addressing table of 64-bit fingerprints,
    at most three quarters full (:data:`MAX_LOAD`), and in ``exact`` mode the states themselves in ``store``, packed
    (:meth:`NativeCode.unpack`) and numbered in discovery order (``store[i]`` is state ``i``;
    every fingerprint match is confirmed by comparing the states)."""

    def __init__(self, code: Any, mode: str, width: int):
        if mode not in ("exact", "fingerprint"):
            raise ValueError(f"visited-set mode {mode!r}: expected one of exact, fingerprint")
        self.code, self.exact, self.width = code, mode == "exact", width
        self.tkeys = np.zeros(1 << 12, np.uint64)
        self.tidx = np.zeros(len(self.tkeys) if self.exact else 0, np.int32)
        self.pw = code.packed_width or width
        self.store = np.empty((1 << 12 if self.exact else 0, self.pw), np.uint8)
        self.size = 0  # keys in the table (and, exact, states in the store)

    def _grow(self, incoming: int) -> None:
        need = self.size + incoming
        self.tkeys, tidx = grown_table(self.code, self.tkeys, self.tidx if self.exact else None, need)
        if self.exact:
            self.tidx = tidx
        self._grow_store(need)

    def _grow_store(self, need: int) -> None:
        """Room in ``store`` (exact mode) for ``need`` states."""
        if self.exact and need > len(self.store):
            cap = len(self.store)
            while need > cap:
                cap += cap // 2  # by half: at most a third of the store is free
            store = np.empty((cap, self.pw), np.uint8)
            store[: self.size] = self.store[: self.size]
            self.store = store

    def restore(self, tkeys: Any, tidx: Any, packed: Any, size: int) -> None:
        """Hold what a checkpoint saved of a set of this mode and width: the table's keys (and,
        exact, state numbers: ``tidx``) and the ``size`` packed states in number order;
        ``ValueError`` when they do not fit together."""
        keys = np.frombuffer(tkeys, np.uint64).copy()
        if len(keys) < 1 or len(keys) & (len(keys) - 1):
            raise ValueError("the visited table's size is not a power of two")
        if self.exact:
            idx = np.frombuffer(tidx, np.int32).copy()
            rows = np.frombuffer(packed, np.uint8)
            if len(idx) != len(keys) or len(rows) != size * self.pw:
                raise ValueError("the visited table and states do not fit together")
            self.tidx = idx
            self.store = np.empty((max(size + size // 2, 1 << 12), self.pw), np.uint8)
            self.store[:size] = rows.reshape(size, self.pw)
        self.tkeys, self.size = keys, size

    def add(self, cand: np.ndarray, packed: np.ndarray | None = None, ids: np.ndarray | None = None) -> np.ndarray:
        """Insert the states ``cand`` (keyed in C: by :meth:`NativeCode.keys` with fingerprints, by
        the hash of the packed state in exact mode) in order; the positions of
        those that were not in the set (first occurrences, ascending).  In exact mode they are
        appended to ``store`` in that order, and ``ids`` (``len(cand)`` int32, when given) gets
        every candidate's state number, new or not; with fingerprints, ``packed`` (``(len(cand),
        packed_width)`` uint8, when given) gets them packed, in that order."""
        n = len(cand)
        fresh = np.empty(n, np.int64)
        if not n:
            return fresh
        if self.exact and self.size + n >= 1 << 31:
            raise MemoryError("the native exact visited set holds at most 2**31 states")
        self._grow(n)
        m = self.code.insert(self.tkeys.ctypes.data, self.tidx.ctypes.data if self.exact else None,
                             len(self.tkeys) - 1, self.store.ctypes.data if self.exact else None, self.size,
                             cand.ctypes.data, n, fresh.ctypes.data,
                             None if packed is None or self.exact else packed.ctypes.data,
                             ids.ctypes.data if ids is not None and self.exact else None)
        if m < 0:
            raise RuntimeError("the native backend's packed states do not hold a value: a bug, please report it "
                               "(--backend python searches without packing)")
        self.size += m
        return fresh[:m]

    def add_packed(self, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`add` with fingerprints: the positions of the new states and those states
        packed (:meth:`NativeCode.pack`'s form), packed in C as they are inserted."""
        packed = np.empty((len(cand), self.pw), np.uint8)
        fresh = self.add(cand, packed)
        return fresh, packed[: len(fresh)].copy() if len(fresh) < len(cand) // 2 else packed[: len(fresh)]

    def add_all(self, pieces: list[np.ndarray]) -> np.ndarray:
        """:meth:`add` of the pieces joined, in order: positions among them all."""
        out, at = [], 0
        for o in pieces:
            out.append(self.add(o) + at)
            at += len(o)
        return np.concatenate(out) if len(out) != 1 else out[0]

    @property
    def nbytes(self) -> int:
        """Bytes the table and the stored states take (allocated, free slots included)."""
        return self.tkeys.nbytes + self.tidx.nbytes + self.store.nbytes


def take_rows(pieces: list[np.ndarray], positions: np.ndarray) -> np.ndarray:
    """The rows at ``positions`` (ascending) of the pieces joined, without joining them."""
    if len(pieces) == 1:
        return pieces[0][positions]
    ends = np.cumsum([len(p) for p in pieces])
    cut = np.searchsorted(positions, ends).tolist()
    parts, lo, at = [], 0, 0
    for p, hi, end in zip(pieces, cut, ends.tolist()):
        parts.append(p[positions[lo:hi] - at])
        lo, at = hi, end
    return np.concatenate(parts)


def join_rows(arrays: list[np.ndarray], keep: int) -> np.ndarray:
    """The first ``keep`` rows of the arrays joined."""
    return np.concatenate(arrays)[:keep]
