"""Check scenarios: scenario -> spec instance -> explicit engine -> results -> traces.

:func:`check_scenario` is the one place that wires the data flow together; the CLI, the tests
and the benchmark all call it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..model.machine import Machine
from ..model.replay import run_actions
from ..spec.scenario import Scenario, ScenarioError
from .explicit import Exploration, Limits, Stats, explore
from .liveness import StateGraph, build_graph, find_lasso
from .parallel import explore_parallel
from .ray_backend import explore_ray
from .results import ClaimReport, Inconclusive, ScenarioReport, Verified, Violated
from .symmetry import Reduction, concrete_path, reduction_for
from .traces import Trace, write_trace

__all__ = ["check_scenario", "trace_of"]


def trace_of(scenario: Scenario, machine: Machine, exploration: Exploration, claim_index: int,
             reduction: Reduction | None = None) -> Trace:
    """The shortest trace to where claim ``claim_index`` hit, with its states re-derived by
    replaying the actions (a path found under symmetry reduction is made concrete first)."""
    claim = machine.claims[claim_index]
    actions = exploration.path(exploration.hit_at[claim_index])
    if exploration.canonical:
        actions = concrete_path(machine, reduction.canonicaliser, actions)
    states = run_actions(machine, actions)
    kind = "counterexample" if claim.kind == "invariant" else "witness"
    return Trace(scenario, machine, claim.name, kind, actions, states)


def _liveness_result(scenario: Scenario, machine: Machine, graph: StateGraph, claim: str):
    """Violated with a lasso trace, Verified on a complete graph, else Inconclusive."""
    lasso = find_lasso(machine, graph, claim)
    if lasso is not None:
        states = [graph.states[sid] for sid in lasso.states]
        return Violated(Trace(scenario, machine, claim, "lasso", lasso.actions, states, lasso.loop))
    if graph.complete:
        return Verified()
    return Inconclusive(graph.reason)


def check_scenario(
    scenario: Scenario,
    limits: Limits = Limits(),
    only: list[str] | None = None,
    traces_dir: str | Path | None = None,
    progress: Callable[[Stats], None] | None = None,
    visited: str = "exact",
    symmetry: bool = False,
    workers: int = 1,
    backend: str = "process",
    ray_address: str | None = None,
) -> ScenarioReport:
    """Check ``scenario``'s claims (or ``only`` those named) with the explicit engine.

    Safety claims and witnesses are decided by one breadth-first search; liveness claims by
    the fair-lasso search on the whole graph (:mod:`.liveness`, one process, no reduction).
    Counterexamples of violated invariants and liveness claims are written under
    ``traces_dir`` when it is given.  ``visited`` is the visited-set mode (``exact`` or
    ``fingerprint``); with ``symmetry`` the search explores one representative per orbit of the
    scenario's declared symmetry, once the declaration passed its checks (:mod:`.symmetry`);
    with ``workers`` > 1 the search runs in that many processes (:mod:`.parallel`), or with
    ``backend="ray"`` in that many Ray actors (:mod:`.ray_backend`, on the cluster at
    ``ray_address`` or a local one).
    """
    spec = scenario.build()
    expected = scenario.expectations(spec)
    if only:
        unknown = [c for c in only if c not in {x.name for x in spec.claims}]
        if unknown:
            raise ScenarioError(f"unknown invariant or witness {unknown[0]!r} (kvproof list --claims names them)")
        expected = {c: expected.get(c, "verified") for c in only}
    machine = Machine(spec)
    index = {c.name: i for i, c in enumerate(machine.claims)}
    live = [c for c in expected if machine.claims[index[c]].kind == "liveness"]
    tracked = [index[c] for c in expected if c not in live]
    reduction = reduction_for(machine) if symmetry else None
    canon = reduction.canonicaliser if reduction is not None else None
    if backend == "ray":
        exploration = explore_ray(scenario, machine, workers, limits, claims=tracked, stop_when_all_hit=bool(only),
                                  progress=progress, visited=visited, symmetric=canon is not None,
                                  address=ray_address)
    elif workers > 1:
        exploration = explore_parallel(machine, workers, limits, claims=tracked, stop_when_all_hit=bool(only),
                                       progress=progress, visited=visited, canonicaliser=canon)
    else:
        exploration = explore(machine, limits, claims=tracked, stop_when_all_hit=bool(only), progress=progress,
                              visited=visited, canon=canon and canon.canon, orbit=canon and canon.orbit)
    report = ScenarioReport(scenario, exploration.stats, exploration.complete, exploration.reason)
    report.symmetry = reduction.note if reduction is not None else ""
    graph = build_graph(machine, limits) if live else None
    for name, want in expected.items():
        i = index[name]
        claim = machine.claims[i]
        if claim.kind == "liveness":
            result = _liveness_result(scenario, machine, graph, name)
        elif i in exploration.hit_at:
            trace = trace_of(scenario, machine, exploration, i, reduction)
            result = Violated(trace) if claim.kind == "invariant" else Verified(trace)
        elif exploration.complete:
            result = Verified() if claim.kind == "invariant" else Violated()
        else:
            result = Inconclusive(exploration.reason)
        row = ClaimReport(name, claim.kind, want, result)
        if traces_dir is not None and claim.kind != "witness" and isinstance(result, Violated):
            row.trace_path = write_trace(result.trace, traces_dir)
        report.claims.append(row)
    return report
