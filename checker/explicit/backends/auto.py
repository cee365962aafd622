"""The default backend: the Python engine for a small search, the native backend for a large
one, chosen by searching (no guess from the scenario's size), or by the size an earlier complete
search of the same model found (:mod:`~kvproof.checker.explicit.sizes`)."""

from __future__ import annotations

from dataclasses import replace

from kvproof.checker.explicit.backends.base import Backend, Search
from kvproof.checker.explicit.backends.python import PythonBackend
from kvproof.checker.explicit.backends.workers import WorkersBackend
from kvproof.checker.explicit.search import Exploration, Limits, graph_searchable

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
    liveness claims keeps the graph they need in the same way (:meth:`run_graph`); with
    ``workers`` the safety search runs on them as above and the graph is searched apart in the
    same way (:meth:`graph_for`: forked processes keep no graph).  With a checkpoint (one process only)
    the probe runs without it; the search that
    goes on past the probe checkpoints on the native backend in one thread (on the Python engine
    when there is no C compiler), and a search the probe finished removes the scenario's
    checkpoint (a stale one is never resumed later).  A model an earlier complete search found
    larger than the probe's limit (:mod:`~kvproof.checker.explicit.sizes`) is searched natively
    at once, unless a state or depth limit, stopping once the claims hit or symmetry reduction
    may end this search sooner."""

    name = "auto"

    def __init__(self, workers: int = 1, probe_states: int | None = None):
        if workers < 1:
            raise ValueError(f"workers: expected at least 1, got {workers}")
        self.workers = workers
        self.probe_states = PROBE_STATES if probe_states is None else probe_states
        self.small: Backend = PythonBackend() if workers == 1 else WorkersBackend(workers)

    @property
    def keeps_graph(self) -> bool:
        return self.workers == 1

    def graph_for(self, scenario, machine, limits: Limits):
        """The graph searched apart (with ``workers``, whose processes keep none; or after a
        fingerprinted or reduced safety search) as :meth:`run_graph` searches it: the Python
        engine up to the probe's limit, then the native backend in one thread."""
        return self.run_graph(Search(scenario, machine, limits, claims=[]))[0].graph

    def run_graph(self, search: Search) -> tuple[Exploration, str, str]:
        """The search keeping the graph: on the Python engine up to :attr:`probe_states` states,
        then, if it goes on, by the native backend from the start (its graph and outcome are the
        Python engine's); on the Python engine throughout under a state or depth limit, stopping
        once the claims hit, or a checkpoint (which the native search keeping the graph does not
        take), or when there is no C compiler."""
        limits, cap = search.limits, self.probe_states
        if not graph_searchable(limits, search.stop_when_all_hit, search.checkpoint):
            if search.checkpoint is not None:
                search.checkpoint.of_engine("python")  # a checkpoint of the native search is refused
            return (self.small.run_graph(search)[0], "python",
                    "liveness claims under a state or depth limit, chosen claims or a checkpoint: "
                    "the Python engine keeps the graph")
        if not self._known_large(search):
            probe = replace(search, limits=Limits(cap, limits.max_seconds, None, limits.started))
            ex = self.small.run_graph(probe)[0]
            if ex.complete or ex.reason != f"state limit {cap} reached":
                return ex, "python", f"the search ended within {cap:,} states: small enough for the Python engine"
        from kvproof.checker.explicit.native import NativeUnavailable, explore_native_graph, native_code

        try:
            code = native_code(search.machine, deadline=limits.deadline())
        except NativeUnavailable as e:
            return self.small.run_graph(search)[0], "python", f"native backend unavailable: {e}"
        ex = explore_native_graph(search.machine, limits, search.claims, search.progress, code=code)
        self._remember(search, ex)
        return ex, "native", ""

    @staticmethod
    def _whole(search: Search) -> bool:
        """``search`` goes on until every state is found: no state or depth limit, no stop once
        the claims hit, no symmetry reduction (the sizes :mod:`~kvproof.checker.explicit.sizes`
        keeps are of such searches)."""
        limits = search.limits
        return (limits.max_states is None and limits.max_depth is None and not search.stop_when_all_hit
                and search.canonicaliser is None)

    def _known_large(self, search: Search) -> bool:
        """An earlier complete search of this model found more states than the probe's limit
        (:mod:`~kvproof.checker.explicit.sizes`), and nothing asked can end this one sooner: the
        probe would only repeat work, so the native backend searches at once."""
        if not self._whole(search):
            return False
        from kvproof.checker.explicit import sizes

        found = sizes.known(search.machine)
        return found is not None and found > self.probe_states

    @staticmethod
    def _remember(search: Search, ex: Exploration) -> None:
        """Keep the size of a complete search that was to find every state (:meth:`_whole`)."""
        if ex.complete and AutoBackend._whole(search):
            from kvproof.checker.explicit import sizes

            sizes.remember(search.machine, ex.stats.states)

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
        if not self._known_large(search):
            probe = Search(search.scenario, search.machine,
                           Limits(cap, limits.max_seconds, limits.max_depth, limits.started), search.claims,
                           search.stop_when_all_hit, search.progress, search.visited, search.canonicaliser)
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
        ex = explore_native(search.machine, limits, code=code, workers=self.workers, checkpoint=saver,
                            **search.keywords())
        self._remember(search, ex)
        return ex, "native", ""
