"""The default backend: the Python engine for a small search, the native backend for a large
one, chosen by searching (no guess from the scenario's size)."""

from __future__ import annotations

from dataclasses import replace

from kvproof.checker.explicit.backends.base import Backend, Search
from kvproof.checker.explicit.backends.python import PythonBackend
from kvproof.checker.explicit.backends.workers import WorkersBackend
from kvproof.checker.explicit.search import Exploration, Limits

__all__ = ["AutoBackend", "PROBE_STATES"]

PROBE_STATES = 20_000
"""The Python engine searches first with this state limit: a search that ends within it (about
0.15 s) is done without compiling C (the C compiler takes 0.5-1 s on a cold cache); a larger one
is searched again by the native backend, from the start."""


class AutoBackend(Backend):
    """The Python engine (in ``workers`` processes) up to ``probe_states`` states (default
    :data:`PROBE_STATES`), then, if the
    search goes on, the native backend (with ``workers`` threads) from the start; the Python
    engine again when the native backend is unavailable here (no C compiler).  A check with
    liveness claims runs on the Python engine (:meth:`settle`): one search there keeps the graph
    they need.  With a checkpoint (one process only) the probe runs without it; the search that
    goes on past the probe checkpoints on the native backend in one thread (on the Python engine
    when there is no C compiler), and a search the probe finished removes the scenario's
    checkpoint (a stale one is never resumed later)."""

    name = "auto"

    def __init__(self, workers: int = 1, probe_states: int | None = None):
        if workers < 1:
            raise ValueError(f"workers: expected at least 1, got {workers}")
        self.workers = workers
        self.probe_states = PROBE_STATES if probe_states is None else probe_states
        self.small: Backend = PythonBackend() if workers == 1 else WorkersBackend(workers)

    def settle(self, liveness: bool) -> tuple[Backend, str]:
        if liveness:
            return self.small, "liveness claims: one Python search keeps the graph they need"
        return self, ""

    @property
    def checkpoints(self) -> bool:
        return self.small.checkpoints

    def checkpoint_kind(self, machine) -> str | None:
        return None  # the Python engine's or the native backend's: decided by the probe

    def explore(self, search: Search) -> Exploration:
        return self.run(search)[0]

    def run(self, search: Search) -> tuple[Exploration, str, str]:
        limits, cap = search.limits, self.probe_states
        saver = search.checkpoint
        if saver is not None:
            self.small.refuse_checkpoint()
            saver.validate(any_engine=True)  # before the probe: it may end the search and remove the file
            search = replace(search, checkpoint=None)  # the probe is not checkpointed

        def on_python() -> Search:  # the whole search on the Python engine, checkpointed if asked
            if saver is None:
                return search
            saver.of_engine("python")
            return replace(search, checkpoint=saver)

        if limits.max_states is not None and limits.max_states <= cap:
            return (self.small.explore(on_python()), "python",
                    f"--max-states {limits.max_states:,}: small enough for the Python engine")
        probe = Search(search.scenario, search.machine, Limits(cap, limits.max_seconds, limits.max_depth, limits.started),
                       search.claims, search.stop_when_all_hit, search.progress, search.visited, search.canonicaliser)
        ex = self.small.explore(probe)
        if ex.complete or ex.reason != f"state limit {cap} reached":
            if saver is not None and not limits.expired():
                saver.finish()  # a checkpoint of this search, if any, is done with
            return ex, "python", f"the search ended within {cap:,} states: small enough for the Python engine"
        from kvproof.checker.explicit.native import (NativeUnavailable, checkpoint_kind, explore_native,  # numpy,
                                                     native_code)  # ctypes

        try:
            code = native_code(search.machine, deadline=limits.deadline())
        except NativeUnavailable as e:
            return self.small.explore(on_python()), "python", f"native backend unavailable: {e}"
        if saver is not None:
            saver.of_engine(checkpoint_kind(code))
        return explore_native(search.machine, limits, code=code, workers=self.workers, checkpoint=saver,
                              **search.keywords()), "native", ""
