"""The search in C compiled from the spec (:mod:`kvproof.checker.explicit.native`), in this
thread or in several (:mod:`kvproof.checker.explicit.native_workers`)."""

from __future__ import annotations

from typing import Any

from kvproof.checker.explicit.backends.base import Backend, Search
from kvproof.checker.explicit.search import Exploration
from kvproof.model.machine import Machine

__all__ = ["NativeBackend"]


class NativeBackend(Backend):
    """The search in C, with ``workers`` threads (1: this thread); building its machine compiles
    the C code, :class:`~kvproof.checker.explicit.native.NativeUnavailable` when no C compiler
    is found.  Liveness claims' graph is searched apart: in C (in one thread) when no state or
    depth limit, stop once the claims hit or checkpoint is asked for, else by the Python engine's
    functions.  In
    one thread its search can be checkpointed (``--checkpoint``)."""

    name = "native"

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise ValueError(f"workers: expected at least 1, got {workers}")
        self.workers = workers

    def machine(self, spec: Any) -> Machine:
        from kvproof.checker.explicit.native import NativeMachine  # numpy, ctypes: only now

        return NativeMachine(spec)

    @property
    def checkpoints(self) -> bool:
        return self.workers == 1

    def checkpoint_kind(self, machine: Machine) -> str:
        from kvproof.checker.explicit.native import checkpoint_kind

        return checkpoint_kind(machine.native)

    def explore(self, search: Search) -> Exploration:
        from kvproof.checker.explicit.native import explore_native

        return explore_native(search.machine, search.limits, workers=self.workers, checkpoint=search.checkpoint,
                              **search.keywords())
