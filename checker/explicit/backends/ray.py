"""The Python engine's partitions as Ray actors, on a cluster or a local one
(:mod:`kvproof.checker.explicit.ray_backend`; the ``ray`` extra)."""

from __future__ import annotations

from kvproof.checker.explicit.backends.base import Backend, Search
from kvproof.checker.explicit.search import Exploration

__all__ = ["RayBackend"]


class RayBackend(Backend):
    """The search in ``workers`` Ray actors, on the cluster at ``address`` (default: the
    ``RAY_ADDRESS`` environment variable, else a local cluster of ``workers`` CPUs)."""

    name = "ray"

    def __init__(self, workers: int = 1, address: str | None = None):
        if workers < 1:
            raise ValueError(f"workers: expected at least 1, got {workers}")
        self.workers, self.address = workers, address

    def explore(self, search: Search) -> Exploration:
        from kvproof.checker.explicit.ray_backend import explore_ray

        return explore_ray(search.scenario, search.machine, self.workers, search.limits, address=self.address,
                           **search.keywords())
