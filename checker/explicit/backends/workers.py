"""The Python engine in forked worker processes, the states partitioned by hash among them
(:mod:`kvproof.checker.explicit.parallel`)."""

from __future__ import annotations

from kvproof.checker.explicit.backends.base import Backend, Search
from kvproof.checker.explicit.search import Exploration

__all__ = ["WorkersBackend"]


class WorkersBackend(Backend):
    """The Python engine's search in ``workers`` forked processes (numpy is imported when it
    first runs)."""

    name = "python"

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError(f"workers: expected at least 1, got {workers}")
        self.workers = workers

    def explore(self, search: Search) -> Exploration:
        from kvproof.checker.explicit.parallel import explore_parallel  # numpy: only now

        return explore_parallel(search.machine, self.workers, search.limits, **search.keywords())
