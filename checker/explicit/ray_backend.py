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

A lost worker never gives a verdict: when an actor, its worker process or its node dies
mid-search (any :class:`ray.exceptions.RayError`, or a node that the cluster marks dead), the
search ends inconclusive with "a Ray worker was lost at depth D (KIND): the search is cut
short" (:class:`~.parallel.WorkerLost`), and claims that had hit before the loss are dropped to
inconclusive as well (their counterexamples cannot be read back from a lost partition).  The
lost partition is not redone.  The driver never waits blindly: it polls its results every
``KVPROOF_RAY_POLL_SECONDS`` (default 1) and checks that every actor's node is still alive, so
a loss is noticed as soon as the cluster's health checks declare the node dead (Ray's
``health_check_*`` settings of the head node bound that).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, Iterator

from kvproof.model.canon import Canonicaliser
from kvproof.model.machine import Machine
from kvproof.model.registry import trust_variant, trusted_files
from kvproof.model.scenario import Scenario
from kvproof.checker.explicit.search import Exploration, Limits
from kvproof.checker.results import Stats
from kvproof.checker.explicit.parallel import WorkerLost, coordinate
from kvproof.checker.explicit.partition import Partition

__all__ = ["explore_ray", "ray_session", "RayUnavailable"]


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

    def node(self) -> str:
        """The id of the Ray node this actor runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def step_split(self, allow: int | None, open_mask: int) -> tuple:
        hits, batches, quiet, cut = self.part.step(allow, open_mask)
        return (hits, quiet, cut, *batches)

    def absorb_from(self, *batches: Any) -> int:
        return self.part.absorb(list(batches))


_WHAT = "a Ray worker"


class _RayTransport:
    """The coordinator's transport over Ray actors; every wait is :meth:`get`, which turns a
    lost actor or node into :class:`~.parallel.WorkerLost`."""

    def __init__(self, ray: Any, actors: list, poll: float | None = None):
        self.ray, self.actors = ray, actors
        self.poll = poll if poll is not None else float(os.environ.get("KVPROOF_RAY_POLL_SECONDS", "1"))
        self.nodes: set[str] = set()
        self.nodes = set(self.get([a.node.remote() for a in actors]))

    def get(self, refs: Any) -> Any:
        """``ray.get(refs)``, polling: between polls the actors' nodes must still be alive."""
        ray = self.ray
        flat = refs if isinstance(refs, list) else [refs]
        try:
            pending = list(flat)
            while pending:
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=self.poll)
                if pending:
                    self._check_nodes()
            return ray.get(refs)
        except ray.exceptions.RayError as e:
            lost = _lost_kind(ray, e)
            if lost is None:  # the partition's own code failed: not a loss, say it as it is
                raise
            raise WorkerLost(_WHAT, type(lost).__name__, _first_line(lost)) from None

    def _check_nodes(self) -> None:
        if not self.nodes:
            return
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        dead = self.nodes - alive
        if dead:
            raise WorkerLost(_WHAT, "NodeDiedError", f"node {sorted(dead)[0][:12]} is dead")

    def call(self, method: str, args_per_worker: list[tuple] | None = None) -> list[Any]:
        refs = [a.call.remote(method, *(args_per_worker[i] if args_per_worker else ()))
                for i, a in enumerate(self.actors)]
        return self.get(refs)

    def exchange(self, allow: list[int] | None, open_mask: int) -> tuple[list, list[int], list, bool]:
        n = len(self.actors)
        parts = [a.step_split.options(num_returns=n + 3).remote(None if allow is None else allow[w], open_mask)
                 for w, a in enumerate(self.actors)]
        fresh_refs = [self.actors[d].absorb_from.remote(*[parts[w][3 + d] for w in range(n)]) for d in range(n)]
        fresh = self.get(fresh_refs)  # waits for every expand and absorb of the level
        heads = self.get([parts[w][k] for w in range(n) for k in range(3)])
        hits = [h for w in range(n) for h in heads[3 * w]]
        quiet = [q for w in range(n) for q in heads[3 * w + 1]]
        cut = any(heads[3 * w + 2] for w in range(n))
        return hits, fresh, quiet, cut


def _lost_kind(ray: Any, e: BaseException) -> BaseException | None:
    """The Ray error under ``e`` that says a worker, object or node was lost, else None (a task
    that failed on its own: ``RayTaskError`` of an ordinary exception).  A task whose argument
    came from a dead actor fails as ``RayTaskError(ActorDiedError)``: its cause is the loss."""
    task_error = ray.exceptions.RayTaskError
    while isinstance(e, task_error):
        cause = getattr(e, "cause", None)
        if cause is None or cause is e:
            return None
        e = cause
    return e if isinstance(e, ray.exceptions.RayError) else None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


def explore_ray(scenario: Scenario, machine: Machine, workers: int, limits: Limits = Limits(),
                claims: list[int] | None = None, stop_when_all_hit: bool = False,
                progress: Callable[[Stats], None] | None = None, visited: str = "exact",
                canonicaliser: Canonicaliser | None = None, address: str | None = None) -> Exploration:
    """:func:`~kvproof.checker.explicit.search.explore` with ``workers`` partitions as Ray actors (each
    actor builds the scenario's machine, and with ``canonicaliser`` its own canonicaliser of the
    scenario's declared symmetry: the function is not sent)."""
    symmetric = canonicaliser is not None
    with ray_session(workers, address) as ray:
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < workers:  # an actor that can never be placed would wait for ever
            raise RayUnavailable(f"--workers {workers} needs {workers} CPUs on the Ray cluster, which has "
                                 f"{cpus:g}")
        host = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Host)
        variants = tuple(str(f) for f in trusted_files())
        actors = [host.remote(scenario, i, workers, visited, symmetric, claims, variants) for i in range(workers)]
        try:
            try:
                transport = _RayTransport(ray, actors)
            except WorkerLost as lost:  # lost before the search began: nothing was explored
                return coordinate(_Lost(lost), machine, workers, limits, claims, stop_when_all_hit, None,
                                  visited, symmetric)
            return coordinate(transport, machine, workers, limits, claims, stop_when_all_hit, progress, visited,
                              symmetric)
        finally:
            for a in actors:
                with contextlib.suppress(Exception):  # a lost actor is already gone
                    ray.kill(a)


class _Lost:
    """A transport whose worker was lost before the search began: every call says so."""

    def __init__(self, lost: WorkerLost):
        self.lost = lost

    def call(self, *args: Any) -> Any:
        raise self.lost

    exchange = call


@contextlib.contextmanager
def ray_session(workers: int, address: str | None = None) -> Iterator[Any]:
    """The ``ray`` module, connected: joined to the cluster at ``address`` (or ``RAY_ADDRESS``),
    else a local cluster of ``workers`` CPUs started on this machine (and shut down at the end);
    an already initialised Ray is used as it is.  :class:`RayUnavailable` without Ray or a cluster."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--backend ray needs Ray: pip install 'kvproof[ray]'") from None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reports to Ray's servers
    started = False
    quiet = contextlib.ExitStack()
    if not ray.is_initialized():
        # Ray's driver prints the cluster's error messages ("(raylet) The node ... has been marked
        # dead") on stdout, where they would break --json: they go to stderr instead
        quiet.enter_context(contextlib.redirect_stdout(sys.stderr))
        address = address or os.environ.get("RAY_ADDRESS")
        try:
            if address:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR",
                         log_to_driver=False, object_store_memory=_store_bytes())
        except Exception as e:  # pragma: no cover - depends on the cluster
            quiet.close()
            raise RayUnavailable(f"cannot start or reach a Ray cluster: {e}") from None
        started = True
    with quiet:
        try:
            yield ray
        finally:
            if started:
                ray.shutdown()


def _store_bytes() -> int:
    """A modest object store for a local cluster (Ray's default takes 30% of memory)."""
    return int(os.environ.get("KVPROOF_RAY_STORE_BYTES", 2 * 1024**3))
