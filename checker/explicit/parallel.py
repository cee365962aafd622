"""Level-synchronised BFS over several partitions: processes on this machine, or Ray actors.

The coordinator drives :class:`~kvproof.checker.explicit.partition.Partition` objects one BFS level at a
time: every partition expands its share of the level; the coordinator routes each successor
batch to the partition that owns it; every partition counts its new states; the coordinator
grants them (all, or the first ones up to ``--max-states``, in partition order) and each
partition commits and checks the claims.  A level ends on every partition before the next
starts, so every state is found at its shortest distance and counterexamples stay shortest;
verdicts and complete state counts equal the one-process engine's (the counterexample may be
another one of the same length, and a search stopped early stops at a level boundary).

Two transports drive the same partitions: worker processes forked from this one
(``--workers N``), and Ray actors (``--backend ray``, :mod:`.ray_backend`).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from typing import Any, Callable

from kvproof.checker.explicit.search import Exploration, Limits
from kvproof.checker.results import Stats
from kvproof.checker.explicit.partition import Partition
from kvproof.checker.explicit.visited import collision_probability

__all__ = ["explore_parallel", "coordinate", "ProcessPool", "WorkerLost"]


class WorkerLost(Exception):
    """A transport lost a partition mid-search (a Ray actor or its node died): ``what`` names
    the worker (``"a Ray worker"``), ``kind`` the error that said so (``"ActorDiedError"``).
    :func:`coordinate` ends the search inconclusive on it, never with a verdict."""

    def __init__(self, what: str, kind: str, detail: str = ""):
        super().__init__(f"{what} was lost ({kind})" + (f": {detail}" if detail else ""))
        self.what, self.kind, self.detail = what, kind, detail


class ProcessPool:
    """Partitions living in forked worker processes, called by method name over pipes."""

    def __init__(self, machine: Any, count: int, visited: str, canonicaliser: Any, claims: list[int] | None):
        ctx = mp.get_context("fork")
        self.conns, self.procs = [], []
        for i in range(count):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(child, machine, i, count, visited, canonicaliser, claims),
                            daemon=True)
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)

    def call(self, method: str, args_per_worker: list[tuple] | None = None) -> list[Any]:
        """Call ``method`` on every partition at once (with its own arguments), and gather."""
        for i, c in enumerate(self.conns):
            c.send((method, args_per_worker[i] if args_per_worker else ()))
        out = []
        for i, c in enumerate(self.conns):
            try:
                ok, value = c.recv()
            except EOFError:  # the worker died: the kernel's out-of-memory killer, most likely
                self.procs[i].join(timeout=1)
                if self.procs[i].exitcode == -signal.SIGKILL:
                    raise MemoryError(f"partition worker {i} was killed (out of memory?)") from None
                raise RuntimeError(f"partition worker {i} exited (code {self.procs[i].exitcode})") from None
            if not ok:
                if value == _OUT_OF_MEMORY:
                    raise MemoryError(f"partition worker {i} ran out of memory")
                raise RuntimeError(f"partition worker failed: {value}")
            out.append(value)
        return out

    def exchange(self, allow: list[int] | None, open_mask: int) -> tuple[list, list[int], list, bool]:
        """One level in two round trips: every partition commits its grant ``allow`` and
        expands (:meth:`~.partition.Partition.step`), batches are routed, every partition
        absorbs.  The commit's claim hits, the new states per partition, the quiescent
        claim hits, and whether the deadline cut some partition's expansion short.  Batches
        travel through this process."""
        n = len(self.conns)
        stepped = self.call("step", [(None if allow is None else allow[w], open_mask) for w in range(n)])
        hits = [h for r in stepped for h in r[0]]
        quiet = [q for r in stepped for q in r[2]]
        cut = any(r[3] for r in stepped)
        inbox = [[stepped[w][1][d] for w in range(n)] for d in range(n)]
        del stepped
        return hits, self.call("absorb", [(inbox[d],) for d in range(n)]), quiet, cut

    def terminate(self) -> None:
        """Stop the workers now, whatever they are doing (after an interrupt or an error)."""
        for p in self.procs:
            if p.is_alive():
                p.terminate()

    def close(self) -> None:
        """Stop the workers."""
        for c in self.conns:
            try:
                c.send(("stop", ()))
            except (BrokenPipeError, OSError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()


_OUT_OF_MEMORY = "out of memory"


def _serve(conn, machine, index, count, visited, canonicaliser, claims) -> None:
    # Ctrl-C reaches the whole process group: the coordinator alone answers it (it stops the
    # workers and exits 130), so a worker prints no traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        part = Partition(machine, index, count, visited, canonicaliser, claims)
        while True:
            method, args = conn.recv()
            if method == "stop":
                return
            try:
                conn.send((True, getattr(part, method)(*args)))
            except MemoryError:
                part = None  # free what can be freed, then tell the coordinator
                conn.send((False, _OUT_OF_MEMORY))
            except Exception as e:  # pragma: no cover - reported to the coordinator
                conn.send((False, f"{type(e).__name__}: {e}"))
    except (KeyboardInterrupt, EOFError, BrokenPipeError):  # an interrupt before SIG_IGN; the coordinator went away
        return


def explore_parallel(machine: Any, workers: int, limits: Limits = Limits(), claims: list[int] | None = None,
                     stop_when_all_hit: bool = False, progress: Callable[[Stats], None] | None = None,
                     visited: str = "exact", canonicaliser: Any = None) -> Exploration:
    """:func:`~kvproof.checker.explicit.search.explore` with ``workers`` forked processes."""
    pool = ProcessPool(machine, workers, visited, canonicaliser, claims)
    try:
        return coordinate(pool, machine, workers, limits, claims, stop_when_all_hit, progress, visited,
                          canonicaliser is not None)
    except BaseException:  # Ctrl-C, out of memory: do not wait for the workers to finish a level
        pool.terminate()
        raise
    finally:
        pool.close()


def coordinate(transport: Any, machine: Any, count: int, limits: Limits, claims: list[int] | None,
               stop_when_all_hit: bool, progress: Callable[[Stats], None] | None, visited: str,
               canonical: bool) -> Exploration:
    """Drive ``count`` partitions to the end of the search through a transport: its
    ``call(method, per-partition args)`` calls every partition and gathers the answers, its
    ``exchange(allow, open_mask)`` commits the last grant and runs one level's expand, routing
    and absorb (shared by every transport).  With a time limit the partitions stop expanding
    at the deadline too, and the level they were in is the search's last.

    A transport that raises :class:`WorkerLost` (a partition died) ends the search incomplete,
    with the reason "WHAT was lost at depth D (KIND): the search is cut short", and with no
    claim hit: a hit found before the loss is dropped too (its counterexample's states may have
    lived on the lost partition and cannot be read back), so every claim is inconclusive."""
    start = time.perf_counter()
    progress_at = [0, 0]  # states granted and depth reached, as the search goes (read on a loss)
    try:
        return _coordinate(transport, machine, count, limits, claims, stop_when_all_hit, progress, visited,
                           canonical, start, progress_at)
    except WorkerLost as lost:
        n_states, depth = progress_at
        stats = Stats(visited=visited, workers=count)
        stats.states, stats.depth, stats.seconds = n_states, depth, time.perf_counter() - start
        reason = f"{lost.what} was lost at depth {depth} ({lost.kind}): the search is cut short"
        return _Found(stats, False, reason, {}, canonical=canonical, paths={})


def _coordinate(transport: Any, machine: Any, count: int, limits: Limits, claims: list[int] | None,
                stop_when_all_hit: bool, progress: Callable[[Stats], None] | None, visited: str,
                canonical: bool, start: float, progress_at: list[int]) -> Exploration:
    call = transport.call
    tracked = range(len(machine.claims)) if claims is None else claims
    open_mask = sum(1 << i for i in tracked)
    hit_at: dict[int, int] = {}

    def record(found: list[tuple[int, int]]) -> None:
        nonlocal open_mask
        best: dict[int, int] = {}
        for bits, gid in found:
            for i in range(len(machine.claims)):
                if bits >> i & 1 and open_mask >> i & 1:
                    best[i] = min(best.get(i, gid), gid)
        for i, gid in best.items():
            hit_at[i] = gid
            open_mask &= ~(1 << i)

    record([h for hs in call("seed") for h in hs])
    stats = Stats(visited=visited, workers=count)
    complete, reason = True, ""
    n_states, depth = 1, 0
    progress_at[:] = n_states, depth
    deadline = limits.deadline(start)
    if deadline is not None:
        call("set_deadline", [(deadline - time.perf_counter(),)] * count)
    allow: list[int] | None = None  # granted, to be committed by the next exchange

    def commit_now(grant: list[int]) -> None:  # when the search ends with a grant pending
        record([h for hs in call("commit", [(a,) for a in grant]) for h in hs])

    while True:
        hits, fresh, quiet, cut = transport.exchange(allow, open_mask)
        record(hits)
        if stop_when_all_hit and not open_mask:
            complete, reason = False, "stopped once every claim asked for had hit"
            break
        record(quiet)
        if cut:  # some partition stopped part way through the level: this level is the last
            complete, reason = False, limits.time_reason
        total = sum(fresh)
        if not total:
            break
        grant = list(fresh)
        if limits.max_depth is not None and depth >= limits.max_depth:
            complete, reason = False, f"depth limit {limits.max_depth} reached"
            break
        if limits.max_states is not None and n_states + total > limits.max_states:
            complete, reason = False, f"state limit {limits.max_states} reached"
            room = limits.max_states - n_states
            for d in range(count):
                grant[d] = min(grant[d], room)
                room -= grant[d]
        n_states += sum(grant)
        depth += 1 if sum(grant) else 0
        progress_at[:] = n_states, depth
        now = time.perf_counter()
        if complete and deadline is not None and (cut or now > deadline):
            complete, reason = False, limits.time_reason
        if not complete:
            commit_now(grant)
            break
        if progress is not None:
            stats.states, stats.depth, stats.seconds = n_states, depth, now - start
            progress(stats)
        allow = grant

    paths = {i: _path(call, count, gid) for i, gid in hit_at.items()}
    summaries = call("summary")
    stats.states = sum(s["states"] for s in summaries)
    stats.transitions = sum(s["transitions"] for s in summaries)
    stats.quiescent = sum(s["quiescent"] for s in summaries)
    stats.represented = sum(s["represented"] for s in summaries)
    stats.depth = depth
    stats.worker_cpu = tuple(round(s["cpu"], 3) for s in summaries)
    stats.bytes_per_state = sum(s["bytes"] for s in summaries) / max(stats.states, 1)
    if visited == "fingerprint":
        stats.collision_probability = collision_probability(stats.states)
    stats.seconds = time.perf_counter() - start
    return _Found(stats, complete, reason, hit_at, canonical=canonical, paths=paths)


def _path(call: Callable, count: int, gid: int) -> list[int]:
    out = []
    while True:
        owner = gid % count
        args = [(gid,) if w == owner else None for w in range(count)]
        parent, aid = _ask_one(call, owner, args)
        if parent < 0:
            break
        out.append(aid)
        gid = parent
    out.reverse()
    return out


def _ask_one(call: Callable, owner: int, args: list) -> tuple[int, int]:
    # every partition answers a call; the others look up their own first state harmlessly
    answers = call("record", [a if a is not None else (0,) for a in args])
    return answers[owner]


class _Found(Exploration):
    """An exploration whose paths were fetched from the partitions before they stopped."""

    def __init__(self, *args, paths: dict[int, list[int]], **kwargs):
        super().__init__(*args, **kwargs)
        self._paths = {self.hit_at[i]: p for i, p in paths.items()}

    def path(self, state_id: int) -> list[int]:
        """Action ids from the initial state to state ``state_id`` (shortest)."""
        return list(self._paths[state_id])
