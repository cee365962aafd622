"""One partition of a distributed breadth-first search: the states whose fingerprint falls to it.

A :class:`Partition` owns every state whose 64-bit xxh3 fingerprint is ``index`` modulo
``count``: its visited set, its share of the current BFS level, and each of its states' parent
and action.  A search is a sequence of levels driven by a coordinator (:mod:`.parallel`, over processes or
Ray actors): :meth:`expand` turns the partition's level into successor batches, one per
destination partition (deduplicated at the source); the coordinator hands every partition the
batches addressed to it and :meth:`absorb` counts the new states among them; :meth:`commit`
keeps the first ``allow`` of those, checks the claims on them and makes them the next level.
:meth:`step` is a commit followed by the next expand, so a level costs two round trips.

A state's global number is ``local * count + index``: the parent of a state may live in another
partition, and :meth:`record` answers for the states a partition owns.
"""

from __future__ import annotations

from array import array
from typing import Any

import time

import numpy as np

from kvproof.checker.explicit.search import claim_checks, expander
from kvproof.checker.explicit.visited import VisitedSet

__all__ = ["Partition", "Batch"]

Batch = tuple[bytes, np.ndarray, np.ndarray, np.ndarray]
"""(states joined, their fingerprints, parent global numbers, action ids)"""


class Partition:
    """The states of one partition (see the module docstring)."""

    def __init__(self, machine: Any, index: int, count: int, visited: str = "exact",
                 canonicaliser: Any = None, claims: list[int] | None = None):
        self.machine, self.index, self.count = machine, index, count
        self.cpu_start = time.process_time()
        self.width = len(machine.init)
        self.canon = canonicaliser.canon if canonicaliser is not None else None
        self.orbit = canonicaliser.orbit if canonicaliser is not None else None
        self.store = VisitedSet(visited, self.width)
        self.parent = array("q")
        self.via = array("i")
        self.frontier: list[bytes] = []
        self.lo = 0  # local number of the level's first state
        self.pending: tuple | None = None
        self.quiescent = self.transitions = self.represented = 0
        tracked = range(len(machine.claims)) if claims is None else claims
        self.quiescent_mask = sum(1 << i for i, c in enumerate(machine.claims) if c.at == "quiescent")
        self.open = sum(1 << i for i in tracked)
        self.deadline: float | None = None
        self.cut = False

    def set_deadline(self, seconds_left: float) -> None:
        """Stop expanding a level ``seconds_left`` from now (the search's time limit; relative,
        so a partition on another host needs no common clock)."""
        self.deadline = time.perf_counter() + seconds_left

    def owner(self, state: bytes) -> int:
        """The partition that owns ``state``."""
        return self.store.fingerprint(state) % self.count

    def seed(self) -> list[tuple[int, int]]:
        """Take the initial state if this partition owns it; its claim hits as (bits, number)."""
        init = self.machine.init
        if self.owner(init) != self.index:
            return []
        self.store.add(self.store.keys([init]), self.store.states(init))
        self.parent.append(-1)
        self.via.append(-1)
        self.frontier = [init]
        self.represented = self.orbit(init) if self.orbit else 1
        h = self.machine.hits(init) & self.open & ~self.quiescent_mask
        return [(h, self.index)] if h else []

    def expand(self) -> tuple[list[Batch], list[tuple[int, int]]]:
        """Successors of this partition's level, one batch per destination partition, and the
        quiescent claim hits (bits, global number) of states with no successor.  Past the
        deadline it stops part way through the level and sets ``cut``: the search must end
        with this level (its states are still found at their shortest distance)."""
        m, n = self.machine, self.count
        cand: list[bytes] = []
        codes = array("q")
        n_actions = len(m.instances)
        expand = expander(m)  # the search's own: the compiled generator, or a hand-built graph's successors
        quiet = []
        add_action, add_state = codes.append, cand.append
        qmask = self.quiescent_mask & self.open
        deadline = self.deadline
        for j, s in enumerate(self.frontier):
            if deadline is not None and j % 1024 == 1023 and time.perf_counter() > deadline:
                self.cut = True
                break
            if expand(s, j * n_actions, add_action, add_state) is None:
                self.quiescent += 1
                if qmask:
                    qh = m.quiescent_hits(s) & qmask
                    if qh:
                        quiet.append((qh, (self.lo + j) * n + self.index))
        self.transitions += len(cand)
        if self.cut:  # time is up: the level's successors are dropped, so the search ends at once
            cand, codes = [], array("q")
        if self.canon is not None:
            cand = list(map(self.canon, cand))
        fps = self.store.keys(cand)
        _, first = np.unique(fps, return_index=True)
        first.sort()
        code = np.frombuffer(codes, dtype=np.int64)[first] if cand else np.zeros(0, np.int64)
        pos, aid = np.divmod(code, n_actions)
        gid = (pos + self.lo) * n + self.index
        fps = fps[first]
        dest = (fps % np.uint64(n)).astype(np.int64)
        batches = []
        for d in range(n):
            sel = np.flatnonzero(dest == d)
            blob = b"".join([cand[k] for k in first[sel].tolist()])
            batches.append((blob, fps[sel], gid[sel], aid[sel].astype(np.int32)))
        return batches, quiet

    def step(self, allow: int | None, open_mask: int) -> tuple[list[tuple[int, int]], list[Batch], list, bool]:
        """One round trip a level: take the open claims, commit the previous grant (``None``:
        nothing is pending, as after :meth:`seed`) and expand the level it made; the commit's
        claim hits, then :meth:`expand`'s batches and quiescent hits, and whether the deadline
        cut the expansion short."""
        self.open = open_mask
        hits = self.commit(allow) if allow is not None else []
        batches, quiet = self.expand()
        return hits, batches, quiet, self.cut

    def absorb(self, batches: list[Batch]) -> int:
        """Take the batches addressed to this partition (in source order); how many of their
        states are new."""
        blob = b"".join(b[0] for b in batches)
        gids = np.concatenate([b[2] for b in batches])
        aids = np.concatenate([b[3] for b in batches])
        keys = np.concatenate([b[1] for b in batches])
        states = self.store.states(blob)
        fresh = self.store.fresh(keys, states)
        self.pending = (blob, keys, states, fresh, gids, aids)
        return int(fresh.size)

    def commit(self, allow: int) -> list[tuple[int, int]]:
        """Keep the first ``allow`` new states as the next level; their claim hits as
        (bits, global number)."""
        blob, keys, states, fresh, gids, aids = self.pending
        self.pending = None
        fresh = fresh[:allow]
        w = self.width
        new = [blob[k * w:(k + 1) * w] for k in fresh.tolist()]
        self.store.add(keys[fresh], None if states is None else states[fresh])
        base = len(self.parent)
        self.parent.extend(gids[fresh].tolist())
        self.via.extend(aids[fresh].tolist())
        self.lo = base
        self.frontier = new
        if self.orbit is not None:
            self.represented += sum(map(self.orbit, new))
        else:
            self.represented += len(new)
        always = self.open & ~self.quiescent_mask
        out = []
        if always:
            checks = claim_checks(self.machine.hits, getattr(self.machine, "hits_after", None), aids[fresh])
            for k, t in enumerate(new):
                h = checks[k](t) & always
                if h:
                    out.append((h, (base + k) * self.count + self.index))
        return out

    def record(self, gid: int) -> tuple[int, int]:
        """(parent global number, action id) of a state this partition owns."""
        local = gid // self.count
        if gid % self.count != self.index or local >= len(self.parent):
            return -1, -1
        return self.parent[local], self.via[local]

    def summary(self) -> dict[str, int]:
        """Counts and bytes for the search's statistics."""
        return {
            "states": len(self.parent),
            "transitions": self.transitions,
            "quiescent": self.quiescent,
            "represented": self.represented,
            "bytes": self.store.nbytes + self.parent.itemsize * len(self.parent) + self.via.itemsize * len(self.via),
            "level": len(self.frontier),
            "cpu": time.process_time() - self.cpu_start,
        }
