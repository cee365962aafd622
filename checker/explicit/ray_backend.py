"""The partitioned search on Ray: the same partitions as ``--workers``, as Ray actors.

For state spaces that outgrow one machine, ``kvproof check --backend ray --workers N`` places
``N`` :class:`~kvproof.checker.explicit.partition.Partition` actors on a Ray cluster (an existing
distributed engine, not a home-made one) and drives them level by level with the coordinator
of :mod:`.parallel`.  Successor batches go from the expanding actor to the owning actor as Ray
objects, without passing through the driver.  Each actor builds the scenario's machine itself
(a scenario naming a variant file needs that file at the same path on every node, or a
Ray ``runtime_env`` that ships it; each actor trusts the variant files the driver trusted).

Without ``address`` a local cluster with one CPU per partition is started on this machine (the
CI test runs two); with ``address`` (or ``RAY_ADDRESS``) the driver joins an existing cluster.
Ray is an optional extra: ``pip install 'kvproof[ray]'``.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from kvproof.model.canon import Canonicaliser
from kvproof.model.machine import Machine
from kvproof.model.registry import trust_variant, trusted_files
from kvproof.model.scenario import Scenario
from kvproof.checker.explicit.search import Exploration, Limits
from kvproof.checker.results import Stats
from kvproof.checker.explicit.parallel import coordinate
from kvproof.checker.explicit.partition import Partition

__all__ = ["explore_ray", "RayUnavailable"]


class RayUnavailable(RuntimeError):
    """Ray is not installed (the ``ray`` extra) or the cluster cannot be reached."""


class _Host:
    """What runs inside a Ray actor: the scenario's machine and one partition of it."""

    def __init__(self, scenario: Scenario, index: int, count: int, visited: str, symmetric: bool,
                 claims: list[int] | None, variants: tuple[str, ...] = ()):
        for v in variants:  # the variant files the driver's user passed (--variant)
            trust_variant(v)
        machine = Machine(scenario.build())
        canon = Canonicaliser(machine.spec, machine.spec.symmetry()) if symmetric else None
        self.part = Partition(machine, index, count, visited, canon, claims)

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.part, method)(*args)

    def step_split(self, allow: int | None, open_mask: int) -> tuple:
        hits, batches, quiet, cut = self.part.step(allow, open_mask)
        return (hits, quiet, cut, *batches)

    def absorb_from(self, *batches: Any) -> int:
        return self.part.absorb(list(batches))


class _RayTransport:
    def __init__(self, ray: Any, actors: list):
        self.ray, self.actors = ray, actors

    def call(self, method: str, args_per_worker: list[tuple] | None = None) -> list[Any]:
        refs = [a.call.remote(method, *(args_per_worker[i] if args_per_worker else ()))
                for i, a in enumerate(self.actors)]
        return self.ray.get(refs)

    def exchange(self, allow: list[int] | None, open_mask: int) -> tuple[list, list[int], list, bool]:
        n = len(self.actors)
        parts = [a.step_split.options(num_returns=n + 3).remote(None if allow is None else allow[w], open_mask)
                 for w, a in enumerate(self.actors)]
        fresh_refs = [self.actors[d].absorb_from.remote(*[parts[w][3 + d] for w in range(n)]) for d in range(n)]
        hits = [h for w in range(n) for h in self.ray.get(parts[w][0])]
        quiet = [q for w in range(n) for q in self.ray.get(parts[w][1])]
        cut = any(self.ray.get(parts[w][2]) for w in range(n))
        return hits, self.ray.get(fresh_refs), quiet, cut


def explore_ray(scenario: Scenario, machine: Machine, workers: int, limits: Limits = Limits(),
                claims: list[int] | None = None, stop_when_all_hit: bool = False,
                progress: Callable[[Stats], None] | None = None, visited: str = "exact",
                canonicaliser: Canonicaliser | None = None, address: str | None = None) -> Exploration:
    """:func:`~kvproof.checker.explicit.search.explore` with ``workers`` partitions as Ray actors (each
    actor builds the scenario's machine, and with ``canonicaliser`` its own canonicaliser of the
    scenario's declared symmetry: the function is not sent)."""
    symmetric = canonicaliser is not None
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--backend ray needs Ray: pip install 'kvproof[ray]'") from None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reports to Ray's servers
    started = False
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        try:
            if address:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR",
                         log_to_driver=False, object_store_memory=_store_bytes())
        except Exception as e:  # pragma: no cover - depends on the cluster
            raise RayUnavailable(f"cannot start or reach a Ray cluster: {e}") from None
        started = True
    try:
        host = ray.remote(num_cpus=1)(_Host)
        variants = tuple(str(f) for f in trusted_files())
        actors = [host.remote(scenario, i, workers, visited, symmetric, claims, variants) for i in range(workers)]
        transport = _RayTransport(ray, actors)
        try:
            return coordinate(transport, machine, workers, limits, claims, stop_when_all_hit, progress, visited,
                              symmetric)
        finally:
            for a in actors:
                ray.kill(a)
    finally:
        if started:
            ray.shutdown()


def _store_bytes() -> int:
    """A modest object store for a local cluster (Ray's default takes 30% of memory)."""
    return int(os.environ.get("KVPROOF_RAY_STORE_BYTES", 2 * 1024**3))
