"""The frontier search of ``kvproof validate`` with the spec's successors in C.

:class:`NativeSearch` is :class:`~kvproof.checker.logs.validate.Search` whose two moves expand a
whole batch of states in one call of the native backend's ``kv_expand``
(:mod:`kvproof.checker.explicit.native`: the spec compiled to C) and check the claims of the successors in
one call of ``kv_hits``; Python keeps the frontier dictionaries and applies the same rules in
the same order as the reference search (each BFS level's states in insertion order, each
state's successors in action order; a clean path to a state known only dirty wins; the claims
of a step from a clean state are all claims that hit after it, which is what the reference's
``hits_after`` computes exactly there).  So the frontier after every event, and the verdict,
are the reference's (``tests/test_validate_native.py`` compares them on random and mutated
logs).  The C code checks every claim where the reference checks only those a step can change:
identical from a clean state, and a dirty state keeps its mask in both.

Not covered (the reference search runs): an observation with ``unseen`` instances (a
predicate over the state that only Python knows), rebuilding a violation's path (``parents``),
machines with more claims than the C code checks at once, and wide layouts (a field of more than
256 codes: one byte a slot cannot hold it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvproof.checker.logs.validate import Event, Observation, Search

__all__ = ["BATCH", "NativeSearch", "native_search", "make_search"]

BATCH = 64
"""Levels (and frontiers to advance) of fewer states run the reference's Python steps: a C call
and its arrays cost more than they save there."""


class NativeSearch(Search):
    """:class:`~kvproof.checker.logs.validate.Search` with batched C successors (module docstring)."""

    def __init__(self, machine: Any, obs: Observation, max_states: int, code: Any):
        super().__init__(machine, obs, max_states)
        self.code = code
        self.width = code.width
        n = code.n_actions
        self.n_actions = n
        self.is_internal = np.zeros(n, bool)
        self.is_internal[list(obs.internal)] = True
        self._quiet = np.zeros(0, np.uint8)

    def _expand(self, states: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(successor rows, parent positions, action ids) of ``states``, in the reference's
        order: by parent position, then action id."""
        W = self.width
        arr = np.frombuffer(b"".join(states), np.uint8).reshape(len(states), W)
        if len(self._quiet) < len(states):
            self._quiet = np.zeros(len(states), np.uint8)
        outs, codes = self.code.expand(arr, 0, len(states), self._quiet)
        if not outs:
            return np.empty((0, W), np.uint8), np.empty(0, np.int64), np.empty(0, np.int64)
        out = np.concatenate(outs) if len(outs) > 1 else outs[0]
        code = np.concatenate(codes) if len(codes) > 1 else codes[0]
        return out, code // self.n_actions, code % self.n_actions

    def close(self, frontier: dict[bytes, int], parents: dict | None = None) -> dict[bytes, int] | None:
        """As :meth:`Search.close`, one C call per BFS level (a level of fewer than
        :data:`BATCH` states is expanded by the reference's compiled Python: the same successors,
        without the cost of a C call)."""
        if parents is not None or self.unseen:
            return super().close(frontier, parents)
        seen = dict(frontier)
        todo = list(frontier)
        cap, W, after, internal = self.max_states, self.width, self.after, self.internal
        while todo:
            nxt: list[bytes] = []
            get = seen.get
            if len(todo) < BATCH:  # the reference's steps: (successor, parent position, claims hit)
                found = [(t, p, after[aid](t)) for p, s in enumerate(todo) for aid, t in internal(s)]
            else:
                out, pos, aid = self._expand(todo)
                keep = self.is_internal[aid]
                out, pos = out[keep], pos[keep]
                hits = self.code.hits(out).tolist() if len(out) else []
                rows = out.view(f"V{W}").ravel().tolist() if W else [b""] * len(out)
                found = zip(rows, pos.tolist(), hits)
            breaks = self.breaks
            for t, p, h in found:
                mask = seen[todo[p]]  # read now: this level may have cleaned the parent
                m = mask or h
                if m and not mask and breaks is not None:
                    breaks[t] = m
                old = get(t)
                if old is None:
                    seen[t] = m
                    nxt.append(t)
                elif old and not m:
                    seen[t] = 0
                    nxt.append(t)
            if len(seen) > cap:
                return None
            todo = nxt
        self.explored += len(seen)
        return seen

    def advance(self, closed: dict[bytes, int], event: Event, parents: dict | None = None) -> dict[bytes, int]:
        """As :meth:`Search.advance`, the successors of all of ``closed`` from one C call."""
        if parents is not None or len(closed) < BATCH:
            return super().advance(closed, event, parents)
        states = list(closed)
        out, pos, aid = self._expand(states)
        order = {a: k for k, a in enumerate(event.aids) if a in self.steps}
        if not order or not len(out):
            return {}
        wanted = np.zeros(self.n_actions, bool)
        wanted[list(order)] = True
        keep = np.nonzero(wanted[aid])[0]
        if len(order) > 1:  # the reference: by the event's instances, then by state
            keep = keep[np.lexsort((pos[keep], np.array([order[a] for a in aid[keep].tolist()])))]
        sub = out[keep]
        hits = self.code.hits(sub).tolist() if len(sub) else []
        rows = sub.view(f"V{self.width}").ravel().tolist() if self.width else [b""] * len(sub)
        observe, want = self.obs.observe, event.want
        result: dict[bytes, int] = {}
        for t, p, a, h in zip(rows, pos[keep].tolist(), aid[keep].tolist(), hits):
            s = states[p]
            if observe(a, s, t) != want:
                continue
            mask = closed[s]
            m = mask or h
            if m and not mask and self.breaks is not None:
                self.breaks[t] = m
            old = result.get(t)
            if old is None or (old and not m):
                result[t] = m
        return result


def native_search(machine: Any, obs: Observation, max_states: int) -> NativeSearch:
    """A :class:`NativeSearch` over ``machine`` (a :class:`~kvproof.checker.logs.validate.Checked`):
    its spec and claims compiled to C, or found in the cache;
    :class:`~kvproof.checker.explicit.native.NativeUnavailable` when that cannot be done here."""
    from types import SimpleNamespace

    from kvproof.checker.explicit.native import NativeUnavailable, native_code

    if getattr(obs, "unseen", None):
        raise NativeUnavailable("the log's observation has unseen steps (a Python predicate)")
    code = native_code(SimpleNamespace(spec=machine.spec, claims=list(machine.claims)), "-O2")
    return NativeSearch(machine, obs, max_states, code)


def make_search(machine: Any, obs: Observation, max_states: int, backend: str = "auto") -> Search:
    """The search ``kvproof validate`` runs: ``python`` the reference :class:`Search`; ``native``
    its successors in C (:class:`NativeSearch`, the same
    frontiers; :class:`~kvproof.checker.explicit.native.NativeUnavailable` where it cannot run);
    ``factored`` the factored frontier
    (:class:`~kvproof.checker.logs.validate_factored.FactoredSearch`, the same verdicts;
    :class:`~kvproof.checker.logs.validate_factored.FactoredUnavailable` where it cannot run), with
    the native search (or the reference) for the answers it hands back; ``auto`` the factored
    search where it can run and the spec's internal steps suit it
    (:func:`~kvproof.checker.logs.validate_factored.suits`), else native where it can run, else the
    reference; ``flat`` native where it can run, else the reference."""
    if backend == "python":
        return Search(machine, obs, max_states)
    from kvproof.checker.explicit.native import NativeUnavailable

    def flat() -> Search:
        try:
            return native_search(machine, obs, max_states)
        except NativeUnavailable:
            if backend == "native":
                raise
            return Search(machine, obs, max_states)

    if backend in ("factored", "auto"):
        from kvproof.checker.logs.validate_factored import FactoredUnavailable, factored_search, suits

        try:
            if backend == "factored" or suits(machine, obs):
                return factored_search(machine, obs, max_states, flat())
        except FactoredUnavailable:
            if backend == "factored":
                raise
    return flat()
