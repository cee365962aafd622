"""What every backend of the explicit engine is: :class:`Backend`, the one interface, and
:class:`Search`, what one breadth-first search is asked (the same for every backend)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

from kvproof.checker.explicit.search import Exploration, Limits, explore
from kvproof.checker.results import Stats
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario

__all__ = ["Backend", "Search"]


@dataclass(frozen=True)
class Search:
    """One breadth-first search of a scenario's safety claims and witnesses, as every backend
    takes it: the scenario and its compiled ``machine``, the ``limits``, the claim indices to
    track (``claims``; ``None``: all), whether to stop once each has hit, the ``progress``
    callback, the visited-set mode (``exact`` or ``fingerprint``) and the symmetry reduction
    (``canonicaliser``, a :class:`~kvproof.model.canon.Canonicaliser`; ``None``: none)."""

    scenario: Scenario
    machine: Machine
    limits: Limits = Limits()
    claims: list[int] | None = None
    stop_when_all_hit: bool = False
    progress: Callable[[Stats], None] | None = None
    visited: str = "exact"
    canonicaliser: Any = None
    checkpoint: Any = None
    """A :class:`~kvproof.checker.explicit.checkpoint.Checkpoint` the search resumes from and
    writes (``None``: none); a backend that cannot checkpoint refuses a search with one."""

    def keywords(self) -> dict[str, Any]:
        """The keywords every explore entry point takes for this search (not ``checkpoint``:
        only the Python engine's takes it)."""
        return dict(claims=self.claims, stop_when_all_hit=self.stop_when_all_hit, progress=self.progress,
                    visited=self.visited, canonicaliser=self.canonicaliser)


class Backend(ABC):
    """Where the explicit engine's breadth-first search runs.  Every backend has the same outcome
    for the same :class:`Search` (the same verdicts, state counts and shortest counterexample
    lengths: the differential tests of ``tests/test_native.py``, ``test_parallel.py`` and
    ``test_ray_backend.py``); they differ in speed, memory and where the work is done.

    ``name`` is what a scenario report says ran it (``python``, ``native``, ``ray``), and
    ``workers`` how many processes, threads or actors it uses."""

    name: str = ""
    workers: int = 1

    def machine(self, spec: Any) -> Machine:
        """The compiled machine this backend searches for ``spec`` (the native backend's carries
        its C code)."""
        return Machine(spec)

    @property
    def keeps_graph(self) -> bool:
        """One search of this backend can also keep the state graph liveness claims need (the
        Python engine in one process only)."""
        return False

    @property
    def checkpoints(self) -> bool:
        """This backend's search can resume from and write a checkpoint (the Python engine in
        one process only)."""
        return False

    def checkpoint_kind(self, machine: Machine) -> str | None:
        """What this backend's checkpoints are of (a checkpoint of another kind is refused):
        ``python`` (the Python engine's search), or the native backend's with a digest of its C
        code; ``None``: decided when it runs (the default backend)."""
        return "python"

    def refuse_checkpoint(self) -> None:
        """Refuse (:class:`~kvproof.checker.explicit.checkpoint.CheckpointError`, one line) a
        checkpointed search this backend cannot run."""
        if not self.checkpoints:
            from kvproof.checker.explicit.checkpoint import CheckpointError

            many = f" with {self.workers} workers" if self.workers != 1 else ""
            raise CheckpointError(f"--checkpoint: the {self.name} backend{many} cannot checkpoint its search; "
                                  "use --backend python or native in one process (--workers 1)")

    @abstractmethod
    def explore(self, search: Search) -> Exploration:
        """Run ``search``."""

    def graph_for(self, scenario: Scenario, machine: Machine, limits: Limits) -> Any:
        """The state graph liveness claims need, searched apart from the safety search (which
        ran fingerprinted, reduced, or on workers that keep no graph): exact, every edge, no
        claim tracked (:func:`~kvproof.checker.explicit.liveness.build_graph`)."""
        from kvproof.checker.explicit.liveness import build_graph  # numpy: a liveness check loads it anyway

        return build_graph(machine, limits)

    def run_graph(self, search: Search) -> tuple[Exploration, str, str]:
        """Run ``search`` (exact, unreduced) keeping the state graph liveness claims need, for a
        backend that :attr:`keeps_graph`: the exploration (its ``graph`` set), the name of the
        backend that ran it and why not the native one (``""``: no choice was made)."""
        return (explore(search.machine, search.limits, claims=search.claims, stop_when_all_hit=search.stop_when_all_hit,
                        progress=search.progress, edges=True, checkpoint=search.checkpoint), self.name, "")

    def run(self, search: Search) -> tuple[Exploration, str, str]:
        """Run ``search``: its exploration, the name of the backend that ran it, and why that is
        not the native backend when this one could have chosen it (``""`` otherwise).  A search
        with a checkpoint is refused by a backend that cannot checkpoint."""
        if search.checkpoint is not None:
            self.refuse_checkpoint()
        return self.explore(search), self.name, ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.workers})" if self.workers != 1 else f"{type(self).__name__}()"
