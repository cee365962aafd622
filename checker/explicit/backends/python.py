"""The Python engine in this process: :func:`~kvproof.checker.explicit.search.explore`, the
reference search every other backend is checked against."""

from __future__ import annotations

from kvproof.checker.explicit.backends.base import Backend, Search
from kvproof.checker.explicit.search import Exploration, explore

__all__ = ["PythonBackend"]


class PythonBackend(Backend):
    """The breadth-first search in Python, in this process; with no reduction and an exact
    visited set, one search of it also keeps the graph liveness claims need."""

    name = "python"

    @property
    def keeps_graph(self) -> bool:
        return True

    @property
    def checkpoints(self) -> bool:
        return True

    def explore(self, search: Search) -> Exploration:
        return explore(search.machine, search.limits, checkpoint=search.checkpoint, **search.keywords())
