"""Check scenarios: scenario -> spec instance -> explicit engine -> results -> traces.

:func:`check_scenario` is the one place that wires the data flow together; the CLI, the tests
and the benchmark all call it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from kvproof.model.machine import Machine
from kvproof.model.registry import builtin_ancestor
from kvproof.model.replay import run_actions
from kvproof.model.scenario import Scenario
from kvproof.checker.explicit.search import Exploration, Limits, StateGraph, explore
from kvproof.checker.results import (ClaimReport, Inconclusive, ScenarioReport, Stats, Verified, Violated, expectations_of,
                                     found, not_found)
from kvproof.checker.explicit.symmetry import Reduction, concrete_path, reduction_for
from kvproof.checker.traces import Trace, write_trace

__all__ = ["check_scenario", "trace_of", "BACKENDS", "PROBE_STATES"]

BACKENDS = ("auto", "native", "python", "process", "ray")
"""Where the explicit search runs: ``auto`` (the default) the native backend where it applies,
else the Python engine; ``native`` the C backend or an error; ``python`` (``process``, its
earlier name: with ``--workers``, forked processes) the Python engine; ``ray`` Ray actors."""

PROBE_STATES = 20_000
"""Under ``auto``, the Python engine searches first with this state limit: a search that ends
within it (about 0.15 s) is done without compiling C (the C compiler takes 0.5-1 s on a cold
cache); a larger one is searched again by the native backend, from the start."""


def explore_parallel(*args, **kwargs) -> Exploration:
    """:func:`kvproof.checker.explicit.parallel.explore_parallel`, imported when a search first needs it
    (it brings numpy: a small check in one process imports none)."""
    from kvproof.checker.explicit.parallel import explore_parallel as search

    return search(*args, **kwargs)


def explore_ray(*args, **kwargs) -> Exploration:
    """:func:`kvproof.checker.explicit.ray_backend.explore_ray`, imported when a search first needs it."""
    from kvproof.checker.explicit.ray_backend import explore_ray as search

    return search(*args, **kwargs)


def build_graph(machine: Machine, limits: Limits) -> StateGraph:
    """:func:`kvproof.checker.explicit.liveness.build_graph`, imported when a liveness claim first needs it."""
    from kvproof.checker.explicit.liveness import build_graph as build

    return build(machine, limits)


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


def _liveness_result(scenario: Scenario, machine: Machine, graph: StateGraph | None, claim: str, limits: Limits):
    """Violated with a lasso trace (on an incomplete graph too: its loop states are expanded),
    Verified on a complete graph, else Inconclusive (no graph: time ran out before it)."""
    if graph is None:
        return Inconclusive(limits.time_reason)
    deadline = limits.deadline()
    if deadline is not None and time.perf_counter() > deadline:  # find_lasso would stop at once; its imports take long
        return Inconclusive(limits.time_reason)
    from kvproof.checker.explicit.liveness import OutOfTime, find_lasso  # numpy: only a liveness claim needs it

    try:
        lasso = find_lasso(machine, graph, claim, limits.deadline(), limits.time_reason)
    except OutOfTime as e:
        return Inconclusive(str(e))
    if lasso is not None:
        states = [graph.states[sid] for sid in lasso.states]
        return Violated(Trace(scenario, machine, claim, "lasso", lasso.actions, states, lasso.loop))
    if graph.complete:
        return Verified()
    return Inconclusive(graph.reason)


def _out_of_time(scenario: Scenario, spec, expected: dict[str, str], limits: Limits) -> ScenarioReport:
    """The report of a scenario the time budget ran out before: every claim inconclusive."""
    kinds = {c.name: c.kind for c in spec.claims}
    report = ScenarioReport(scenario, Stats(), False, limits.time_reason)
    report.claims = [ClaimReport(name, kinds[name], want, Inconclusive(limits.time_reason))
                     for name, want in expected.items()]
    return report


def _auto(machine, limits: Limits, tracked, stop, progress, visited, canon,
          workers: int = 1) -> tuple[Exploration, str, str]:
    """``backend="auto"``: the Python engine (in ``workers`` processes) up to
    :data:`PROBE_STATES` states, then, if the search goes on, the native backend (with
    ``workers`` threads) from the start (the Python engine again when the native backend is
    unavailable here); the exploration, the backend that ran it and why not native."""
    args = dict(claims=tracked, stop_when_all_hit=stop, progress=progress, visited=visited)

    def python(lim: Limits) -> Exploration:
        if workers > 1:
            return explore_parallel(machine, workers, lim, canonicaliser=canon, **args)
        return explore(machine, lim, canon=canon and canon.canon, orbit=canon and canon.orbit, **args)

    cap = PROBE_STATES
    if limits.max_states is not None and limits.max_states <= cap:
        return python(limits), "python", f"--max-states {limits.max_states:,}: small enough for the Python engine"
    ex = python(Limits(cap, limits.max_seconds, limits.max_depth, limits.started))
    if ex.complete or ex.reason != f"state limit {cap} reached":
        return ex, "python", f"the search ended within {cap:,} states: small enough for the Python engine"
    from kvproof.checker.explicit.native import NativeUnavailable, explore_native, native_code  # numpy, ctypes: only now

    try:
        code = native_code(machine, deadline=limits.deadline())
    except NativeUnavailable as e:
        return python(limits), "python", f"native backend unavailable: {e}"
    return (explore_native(machine, limits, code=code, workers=workers, canon=canon and canon.canon,
                           orbit=canon and canon.orbit, **args), "native", "")


def _explore(scenario, machine, limits, tracked, stop, progress, visited, canon, workers, backend, ray_address):
    """The breadth-first search of the safety claims and witnesses, on the engine asked for."""
    if backend == "ray":
        return explore_ray(scenario, machine, workers, limits, claims=tracked, stop_when_all_hit=stop,
                           progress=progress, visited=visited, symmetric=canon is not None, address=ray_address)
    if workers > 1 and backend == "native":
        from kvproof.checker.explicit.native import explore_native

        return explore_native(machine, limits, claims=tracked, stop_when_all_hit=stop, progress=progress,
                              visited=visited, canon=canon and canon.canon, orbit=canon and canon.orbit,
                              workers=workers)
    if workers > 1:
        return explore_parallel(machine, workers, limits, claims=tracked, stop_when_all_hit=stop,
                                progress=progress, visited=visited, canonicaliser=canon)
    return explore(machine, limits, claims=tracked, stop_when_all_hit=stop, progress=progress, visited=visited,
                   canon=canon and canon.canon, orbit=canon and canon.orbit)


def check_scenario(
    scenario: Scenario,
    limits: Limits = Limits(),
    only: list[str] | None = None,
    traces_dir: str | Path | None = None,
    progress: Callable[[Stats], None] | None = None,
    visited: str = "exact",
    symmetry: bool = False,
    workers: int = 1,
    backend: str = "auto",
    ray_address: str | None = None,
) -> ScenarioReport:
    """Check ``scenario``'s claims (or ``only`` those named) with the explicit engine.

    Safety claims and witnesses are decided by one breadth-first search; liveness claims by
    the fair-lasso search on the whole graph (:mod:`.liveness`, one process, no reduction).
    When the search runs in one process, exact and unreduced (the default), it is one search
    that also keeps the graph's edges; a parallel, Ray, fingerprinted or reduced search is
    followed by a second, exact one for the graph when a liveness claim is asked for.
    Every limit applies to both; ``max_seconds`` is one budget for all phases (compiling the
    machine, both searches, the components, the traces), started by ``limits.started`` when
    set (the command line: one budget for the whole command), else when this call starts.  A
    claim a limit left undecided is inconclusive; what the explored part establishes (a
    violation with its trace, a witness reached, a fair lasso through expanded states) stands.
    Counterexamples of violated invariants and liveness claims are written under
    ``traces_dir`` when it is given.  ``visited`` is the visited-set mode (``exact`` or
    ``fingerprint``); with ``symmetry`` the search explores one representative per orbit of the
    scenario's declared symmetry, once the declaration passed its checks (:mod:`.symmetry`);
    with ``workers`` > 1 the search runs in that many processes (:mod:`.parallel`), or with
    ``backend="ray"`` in that many Ray actors (:mod:`.ray_backend`, on the cluster at
    ``ray_address`` or a local one); ``backend="native"`` runs the search in C compiled from
    the spec (:mod:`.native`; with ``workers`` > 1 in that many threads,
    :mod:`.native_workers`), and the graph liveness claims need is then searched
    apart, by the Python engine.  ``backend="auto"`` (the default) is the native
    backend where it applies (no liveness claim asked for, a C
    compiler found, more than :data:`PROBE_STATES` states) and the Python engine elsewhere
    (``"python"``, or its earlier name ``"process"``, always); ``report.backend`` says which ran
    and ``report.backend_note`` why not the native one.  Every backend has the same outcome.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    limits = limits.shared()
    spec = scenario.build()
    expected = expectations_of(scenario, spec, only)
    if limits.expired():
        return _out_of_time(scenario, spec, expected, limits)
    if backend == "native":
        from kvproof.checker.explicit.native import NativeMachine

        machine = NativeMachine(spec)
    else:
        machine = Machine(spec)
    index = {c.name: i for i, c in enumerate(machine.claims)}
    live = [c for c in expected if machine.claims[index[c]].kind == "liveness"]
    used, why = {"auto": "python", "process": "python"}.get(backend, backend), ""
    if backend == "auto":
        why = "liveness claims: one Python search keeps the graph they need" if live else ""
        if not why:
            used = "auto"
    tracked = [index[c] for c in expected if c not in live]
    base = builtin_ancestor(type(spec))
    unlisted = [] if only or base is None or base is type(spec) else [
        i for i, c in enumerate(machine.claims) if c.kind == "witness" and c.name not in expected]
    tracked += unlisted
    reduction = reduction_for(machine) if symmetry else None
    canon = reduction.canonicaliser if reduction is not None else None
    exploration = graph = None
    if live and canon is None and visited == "exact" and workers <= 1 and used == "python":
        # one search decides the safety claims and keeps the graph the liveness claims need
        both = explore(machine, limits, claims=tracked, stop_when_all_hit=bool(only), progress=progress, edges=True)
        exploration, graph = (both if tracked else None), both.graph
    else:
        if tracked or not live:  # with only liveness claims asked for, the graph's search is the one
            if used == "auto":
                exploration, used, why = _auto(machine, limits, tracked, bool(only), progress, visited, canon,
                                               workers)
            else:
                exploration = _explore(scenario, machine, limits, tracked, bool(only), progress, visited, canon,
                                       workers, used, ray_address)
        graph = build_graph(machine, limits) if live and not limits.expired() else None
    if exploration is not None:
        report = ScenarioReport(scenario, exploration.stats, exploration.complete, exploration.reason)
    elif graph is not None:
        report = ScenarioReport(scenario, graph.stats, graph.complete, graph.reason)
    else:
        report = ScenarioReport(scenario, Stats(), False, limits.time_reason)
    report.symmetry = reduction.note if reduction is not None else ""
    report.backend, report.backend_note = ("python" if used == "auto" else used), why
    for name, want in expected.items():
        i = index[name]
        claim = machine.claims[i]
        if claim.kind == "liveness":
            result = _liveness_result(scenario, machine, graph, name, limits)
        elif i in exploration.hit_at:  # (exploration is None only when every claim is a liveness claim)
            result = found(claim.kind, trace_of(scenario, machine, exploration, i, reduction))
        elif exploration.complete:
            result = not_found(claim.kind)
        else:
            result = Inconclusive(exploration.reason)
        row = ClaimReport(name, claim.kind, want, result)
        if traces_dir is not None and isinstance(result, Violated) and result.trace is not None:
            row.trace_path = write_trace(result.trace, traces_dir)
        report.claims.append(row)
        if report.complete and isinstance(result, Inconclusive):  # the liveness graph stopped short
            report.complete, report.reason = False, result.reason
    if unlisted and exploration is not None and exploration.complete:
        report.notes += _vacuous_witnesses(scenario, spec, base, machine,
                                           [i for i in unlisted if i not in exploration.hit_at], limits)
    return report


def _vacuous_witnesses(scenario: Scenario, spec, base: type, machine: Machine, missed: list[int],
                       limits: Limits) -> list[str]:
    """One note per witness in ``missed`` (unlisted, never reached by the variant ``spec``'s
    complete search) that the spec class the variant subclasses reaches on the same
    configuration: the variant made it unreachable.  A witness the base cannot reach either
    (a dimension the scenario leaves off) is not the variant's doing and gets no note."""
    if not missed or limits.expired():
        return []
    names = [machine.claims[i].name for i in missed]
    base_machine = Machine(base(scenario.config))
    where = {c.name: i for i, c in enumerate(base_machine.claims)}
    ids = [where[n] for n in names if n in where]
    found = explore(base_machine, limits, claims=ids, stop_when_all_hit=True)
    variant = type(spec).__name__
    return [f"witness {base_machine.claims[i].name} is unreachable in this variant ({variant}) but reachable in "
            f"{base.__name__}: a verified invariant may be vacuous" for i in ids if i in found.hit_at]
