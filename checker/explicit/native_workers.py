"""Several workers for the native backend: threads running the compiled level functions at once.

:mod:`ctypes` releases the interpreter lock for the length of every C call, so threads of one
process run the compiled successor function, claim checks and visited set in parallel over
shared arrays, with nothing copied between processes.  :class:`Crew` splits a run of states
(a chunk of a BFS level, the new states of a level) into contiguous ranges, one per thread, and
joins the results in order; :class:`ShardedVisited` splits the visited set by key into one
open-addressing table per thread, so each table is written by one thread only, and numbers the
new states in discovery order as :class:`~.native.NativeVisited` does.  A search with several
workers therefore numbers every state as the one-thread search does: the same states, parents,
claim hits and paths, not only the same counts and path lengths.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable

import numpy as np

from kvproof.checker.explicit.native_store import NativeVisited, grown_table, join_rows, take_rows

__all__ = ["Crew", "ShardedVisited", "SMALL"]

SMALL = 4096
"""Rows (states or successors) under which a crew's tasks run one after the other in the
calling thread: handing work to threads costs more than that much of it."""


class Crew:
    """``workers`` threads calling ``code``'s functions at once, each with its own buffers;
    ``cpu[i]`` sums the CPU seconds of the tasks given thread slot ``i``."""

    def __init__(self, code: Any, workers: int):
        self.code, self.workers = code, workers
        self.pool = ThreadPoolExecutor(workers - 1, thread_name_prefix="kvproof-native")
        self.scratch = [code.scratch() for _ in range(workers)]
        self.cpu = [0.0] * workers
        self._lock = threading.Lock()

    def run(self, task: Callable[[int], Any], rows: int = SMALL) -> list:
        """``task(i)`` for every slot ``i``, at once (slot 0 in this thread) unless the work is
        small (``rows`` under :data:`SMALL`: one after the other, here); the answers in slot
        order (when some raise, the exception of the first such slot, once every task ended)."""
        if rows < SMALL:
            return [task(i) for i in range(self.workers)]

        def timed(i: int) -> Any:
            began = time.thread_time()
            try:
                return task(i)
            finally:
                spent = time.thread_time() - began
                with self._lock:
                    self.cpu[i] += spent

        futures = [self.pool.submit(timed, i) for i in range(1, self.workers)]
        try:
            first = timed(0)
        finally:
            wait(futures)
        return [first] + [f.result() for f in futures]

    def bounds(self, start: int, stop: int) -> list[tuple[int, int]]:
        """``[start, stop)`` cut into one contiguous range per slot, in order."""
        n, k = stop - start, self.workers
        cuts = [start + n * i // k for i in range(k + 1)]
        return list(zip(cuts[:-1], cuts[1:]))

    def expand(self, states: np.ndarray, start: int, stop: int, quiet: np.ndarray) -> tuple[list, list]:
        """:meth:`~.native.NativeCode.expand` of ``states[start:stop]``, the ranges in parallel:
        the successor arrays and code arrays of every range, in expansion order."""
        parts = self.bounds(start, stop)
        got = self.run(lambda i: self.code.expand(states, *parts[i], quiet, self.scratch[i]), stop - start)
        return [o for r in got for o in r[0]], [c for r in got for c in r[1]]

    def take(self, pieces: list[np.ndarray], positions: np.ndarray) -> np.ndarray:
        """The rows at ``positions`` (ascending) of the pieces joined (as
        :func:`~.native_store.take_rows`), each piece's rows gathered by one thread."""
        n = sum(map(len, pieces))
        if len(positions) < SMALL or len(pieces) < 2:
            return take_rows(pieces, positions)
        ends = np.cumsum([len(p) for p in pieces]).tolist()
        cut = np.searchsorted(positions, ends).tolist()
        starts, lo_rows = [0] + cut[:-1], [0] + ends[:-1]
        out = np.empty((len(positions),) + pieces[0].shape[1:], pieces[0].dtype)

        def gather(i: int) -> None:
            for k in range(i, len(pieces), self.workers):
                np.take(pieces[k], positions[starts[k]:cut[k]] - lo_rows[k], axis=0, out=out[starts[k]:cut[k]])

        self.run(gather, n)
        return out

    def join(self, arrays: list[np.ndarray], keep: int) -> np.ndarray:
        """The first ``keep`` rows of the arrays joined, the copies spread over the threads."""
        if keep < SMALL or len(arrays) < 2:
            return join_rows(arrays, keep)
        out = np.empty((keep,) + arrays[0].shape[1:], arrays[0].dtype)
        at = np.cumsum([0] + [len(a) for a in arrays]).tolist()

        def copy(i: int) -> None:
            for k in range(i, len(arrays), self.workers):
                if at[k] < keep:
                    out[at[k]:min(at[k + 1], keep)] = arrays[k][:keep - at[k]]

        self.run(copy, keep)
        return out

    def _per_row(self, f: Callable, states: np.ndarray, out: np.ndarray) -> np.ndarray:
        parts = self.bounds(0, len(states))
        self.run(lambda i: f(states[parts[i][0]:parts[i][1]], out[parts[i][0]:parts[i][1]], self.scratch[i]),
                 len(states))
        return out

    def hits(self, states: np.ndarray) -> np.ndarray:
        """:meth:`~.native.NativeCode.hits`, the rows in parallel."""
        return self._per_row(self.code.hits, states, np.zeros(len(states), np.uint64))

    def quiescent_hits(self, states: np.ndarray) -> np.ndarray:
        """:meth:`~.native.NativeCode.quiescent_hits`, the rows in parallel."""
        return self._per_row(self.code.quiescent_hits, states, np.zeros(len(states), np.uint64))

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        """:meth:`~.native.NativeCode.unpack`, the rows in parallel."""
        out = np.empty((len(packed), max(self.code.width, 1)), np.uint8)
        packed = np.ascontiguousarray(packed)
        return self._per_row(lambda p, o, _: self.code.unpack(p, o), packed, out)

    def pack(self, states: np.ndarray) -> np.ndarray:
        """:meth:`~.native.NativeCode.pack`, the rows in parallel."""
        out = np.empty((len(states), self.code.packed_width), np.uint8)
        states = np.ascontiguousarray(states)
        return self._per_row(lambda s, o, _: self.code.pack(s, o), states, out)

    def close(self) -> None:
        """Stop the threads."""
        self.pool.shutdown(wait=True)


def _segments(pieces: list[np.ndarray], parts: list[tuple[int, int]]) -> list[list[tuple]]:
    """Per range ``[lo, hi)`` of the pieces joined, its parts as ``(piece, lo, hi, at)``: rows
    ``lo`` to ``hi`` of ``piece``, the first of them row ``at`` of the whole."""
    out = []
    for lo, hi in parts:
        segs, start = [], 0
        for p in pieces:
            end = start + len(p)
            a, b = max(lo, start), min(hi, end)
            if a < b:
                segs.append((p, a - start, b - start, a))
            start = end
        out.append(segs)
    return out


class ShardedVisited(NativeVisited):
    """:class:`~.native.NativeVisited` split by key into one table per thread of ``crew`` (the
    exact store stays one array, ``store[i]`` state ``i``): :meth:`add` has the same answer."""

    def __init__(self, code: Any, mode: str, width: int, crew: Crew):
        super().__init__(code, mode, width)
        self.crew = crew
        n = crew.workers
        self.tables = [(np.zeros(1 << 10, np.uint64), np.zeros(1 << 10, np.int32) if self.exact else None)
                       for _ in range(n)]
        self.sizes = [0] * n
        self.tkeys = self.tidx = np.zeros(0, np.uint64)  # the one-table arrays are not used

    def add(self, cand: np.ndarray) -> np.ndarray:
        """:meth:`~.native.NativeVisited.add`, in parallel (:meth:`add_all`)."""
        return self.add_all([cand])

    def add_all(self, pieces: list[np.ndarray]) -> np.ndarray:
        """:meth:`~.native.NativeVisited.add_all`: keys computed by ranges, then each shard's
        candidates inserted in order by its own thread, then the new states numbered."""
        n, code, crew = sum(map(len, pieces)), self.code, self.crew
        if not n:
            return np.empty(0, np.int64)
        if self.exact and self.size + n >= 1 << 31:
            raise MemoryError("the native exact visited set holds at most 2**31 states")
        keys, shard = np.empty(n, np.uint64), np.empty(n, np.uint8)
        pk = np.empty((n, self.pw), np.uint8) if self.exact else None
        pk_at = pk.ctypes.data if pk is not None else None
        parts = crew.bounds(0, n)
        segments = _segments(pieces, parts)
        per_range = np.zeros((crew.workers, crew.workers), np.int64)  # candidates per shard, per range

        def prep(i: int) -> bool:
            for piece, lo, hi, at in segments[i]:
                if code.prep(piece.ctypes.data, lo, hi, None if pk_at is None else pk_at + (at - lo) * self.pw,
                             keys.ctypes.data + (at - lo) * 8, shard.ctypes.data + at - lo, crew.workers,
                             per_range[i].ctypes.data) < 0:
                    return False
            return True

        if not all(crew.run(prep, n)):
            raise RuntimeError("the native backend's packed states do not hold a value: a bug, please report it "
                               "(--backend python searches without packing)")
        counts = per_range.sum(axis=0).tolist()
        flags = np.zeros(n, np.uint8)
        slot = np.empty(n, np.int64) if self.exact else None
        store_at = self.store.ctypes.data if self.exact else None

        def insert(s: int) -> None:
            tkeys, tidx = self.tables[s] = grown_table(code, *self.tables[s], self.sizes[s] + counts[s])
            self.sizes[s] += code.insert_shard(tkeys.ctypes.data, None if tidx is None else tidx.ctypes.data,
                                               len(tkeys) - 1, store_at, pk_at, keys.ctypes.data,
                                               shard.ctypes.data, n, s, flags.ctypes.data,
                                               None if slot is None else slot.ctypes.data)

        crew.run(insert, n)
        found = crew.run(lambda i: np.flatnonzero(flags[parts[i][0]:parts[i][1]]) + parts[i][0], n)
        fresh = np.concatenate(found) if len(found) > 1 else found[0]
        if self.exact:
            self._grow_store(self.size + fresh.size)
            crew.run(lambda s: code.number_shard(self.tables[s][1].ctypes.data, slot.ctypes.data, shard.ctypes.data,
                                                 fresh.ctypes.data, fresh.size, self.size, s,
                                                 self.store.ctypes.data, pk_at), n)
        self.size += fresh.size
        return fresh

    @property
    def nbytes(self) -> int:
        """Bytes the tables and the stored states take (allocated, free slots included)."""
        return sum(k.nbytes + (0 if i is None else i.nbytes) for k, i in self.tables) + self.store.nbytes
