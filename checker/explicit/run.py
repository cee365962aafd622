"""Check scenarios: scenario -> spec instance -> explicit engine -> results -> traces.

:class:`Checker` (a scenario, a backend object, limits, symmetry, the claims to decide) and
:func:`check_scenario`, what it runs, are the one place that wires the data flow together; the
CLI, the tests and the benchmark all call them.
"""

from __future__ import annotations

import time
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import Callable

from kvproof.model.machine import Machine
from kvproof.model.registry import builtin_ancestor
from kvproof.model.replay import run_actions
from kvproof.model.scenario import Scenario
from kvproof.checker.explicit.backends import AutoBackend, Backend, Search
from kvproof.checker.explicit.search import Exploration, Limits, StateGraph, explore
from kvproof.checker.results import (ClaimReport, Inconclusive, ScenarioReport, Stats, Verified, Violated, expectations_of,
                                     found, not_found)
from kvproof.checker.explicit.symmetry import Reduction, concrete_path, reduction_for
from kvproof.checker.traces import Trace, write_trace

__all__ = ["Checker", "check_scenario", "trace_of"]


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


@dataclass(frozen=True)
class Checker:
    """A check of one scenario with the explicit engine, built as Stateright's ``CheckerBuilder``
    is: the scenario, the backend object that searches (:mod:`.backends`; default
    :class:`~.backends.AutoBackend`), the ``limits``, whether to reduce by the scenario's declared
    ``symmetry``, the claims to decide (``claims``; ``None``: every claim of the scenario) and
    the visited-set mode (``exact`` or ``fingerprint``).  Each ``with_*`` method returns a new
    checker with one thing changed; :meth:`check` runs it::

        Checker(builtin("incident")).with_backend(NativeBackend(2)).with_limits(Limits(max_states=10**6)).check()
    """

    scenario: Scenario
    backend: Backend = field(default_factory=AutoBackend)
    limits: Limits = Limits()
    symmetry: bool = False
    claims: tuple[str, ...] | None = None
    visited: str = "exact"
    checkpoint: tuple[str | Path, float | None] | None = None
    """``(folder, seconds)``: resume from and write the search's checkpoint there (:meth:`with_checkpoint`)."""

    def with_backend(self, backend: Backend) -> "Checker":
        """This check on ``backend``."""
        return replace(self, backend=backend)

    def with_limits(self, limits: Limits) -> "Checker":
        """This check within ``limits``."""
        return replace(self, limits=limits)

    def with_symmetry(self, symmetry: bool = True) -> "Checker":
        """This check reduced (or not) by the scenario's declared symmetry."""
        return replace(self, symmetry=symmetry)

    def with_claims(self, claims: list[str] | tuple[str, ...] | None) -> "Checker":
        """This check deciding only ``claims`` (``None``: every claim)."""
        return replace(self, claims=None if claims is None else tuple(claims))

    def with_visited(self, visited: str) -> "Checker":
        """This check with the visited-set mode ``visited`` (``exact`` or ``fingerprint``)."""
        return replace(self, visited=visited)

    def with_checkpoint(self, folder: str | Path | None, every: float | None = None) -> "Checker":
        """This check resuming from and writing its checkpoint in ``folder`` every ``every``
        seconds (``None``: no checkpoint; see :func:`check_scenario`)."""
        return replace(self, checkpoint=None if folder is None else (folder, every))

    def check(self, traces_dir: str | Path | None = None,
              progress: Callable[[Stats], None] | None = None) -> ScenarioReport:
        """Decide the claims: :func:`check_scenario`."""
        return check_scenario(self.scenario, self.limits, list(self.claims) if self.claims is not None else None,
                              traces_dir, progress, self.visited, self.symmetry, self.backend,
                              *(self.checkpoint or (None, None)))


def check_scenario(
    scenario: Scenario,
    limits: Limits = Limits(),
    only: list[str] | None = None,
    traces_dir: str | Path | None = None,
    progress: Callable[[Stats], None] | None = None,
    visited: str = "exact",
    symmetry: bool = False,
    backend: Backend | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: float | None = None,
) -> ScenarioReport:
    """Check ``scenario``'s claims (or ``only`` those named) with the explicit engine on
    ``backend`` (a :mod:`.backends` object; default :class:`~.backends.AutoBackend`).

    Safety claims and witnesses are decided by one breadth-first search; liveness claims by
    the fair-lasso search on the whole graph (:mod:`.liveness`, one process, no reduction).
    When the backend keeps the graph (the Python engine in one process), exact and unreduced
    (the default), it is one search that also keeps the graph's edges; a parallel, Ray, native,
    fingerprinted or reduced search is followed by a second, exact one for the graph when a
    liveness claim is asked for.  Every limit applies to both; ``max_seconds`` is one budget
    for all phases (compiling the machine, both searches, the components, the traces), started
    by ``limits.started`` when set (the command line: one budget for the whole command), else
    when this call starts.  A claim a limit left undecided is inconclusive; what the explored
    part establishes (a violation with its trace, a witness reached, a fair lasso through
    expanded states) stands.  Counterexamples of violated invariants and liveness claims are
    written under ``traces_dir`` when it is given.  ``visited`` is the visited-set mode
    (``exact`` or ``fingerprint``); with ``symmetry`` the search explores one representative
    per orbit of the scenario's declared symmetry, once the declaration passed its checks
    (:mod:`.symmetry`).  ``report.backend`` says which backend ran and ``report.backend_note``
    why not the native one, where the backend chose (:class:`~.backends.AutoBackend`).  Every
    backend has the same outcome.

    With ``checkpoint`` (a folder) the safety search resumes from the scenario's checkpoint
    there, when there is one, and writes it every ``checkpoint_every`` seconds (default
    :data:`~.checkpoint.DEFAULT_EVERY`; :mod:`.checkpoint`): the Python engine's search only (a
    backend that cannot checkpoint raises :class:`~.checkpoint.CheckpointError`, as does a
    checkpoint of another scenario, spec or search).  The one search that also keeps the graph
    liveness claims need is checkpointed with it; a graph searched apart (with fingerprints or
    symmetry reduction) is not, and a note says so.  ``report.checkpoint`` says what was resumed
    and written.
    """
    backend = AutoBackend() if backend is None else backend
    limits = limits.shared()
    spec = scenario.build()
    expected = expectations_of(scenario, spec, only)
    if limits.expired():
        return _out_of_time(scenario, spec, expected, limits)
    if checkpoint is not None:
        backend.refuse_checkpoint()  # before building a machine (the native backend's compiles C)
    machine = backend.machine(spec)
    index = {c.name: i for i, c in enumerate(machine.claims)}
    live = [c for c in expected if machine.claims[index[c]].kind == "liveness"]
    used, why = backend.name, ""
    tracked = [index[c] for c in expected if c not in live]
    base = builtin_ancestor(type(spec))
    unlisted = [] if only or base is None or base is type(spec) else [
        i for i, c in enumerate(machine.claims) if c.kind == "witness" and c.name not in expected]
    tracked += unlisted
    reduction = reduction_for(machine) if symmetry else None
    canon = reduction.canonicaliser if reduction is not None else None
    one = bool(live) and canon is None and visited == "exact" and backend.keeps_graph
    saver = None
    if checkpoint is not None:
        kind = backend.checkpoint_kind(machine)
        saver = checkpointer(scenario, machine, limits, tracked, bool(only), visited, canon is not None, one,
                             checkpoint, checkpoint_every, kind)
        if kind is not None:  # (else the backend decides whose search it is, and the search checks it)
            saver.validate()  # refuse another search's checkpoint before searching
    exploration = graph = None
    if one:
        # one search decides the safety claims and keeps the graph the liveness claims need
        both, used, chose = backend.run_graph(Search(scenario, machine, limits, tracked, bool(only), progress,
                                                     checkpoint=saver))
        why = chose
        exploration, graph = (both if tracked else None), both.graph
    else:
        if tracked or not live:  # with only liveness claims asked for, the graph's search is the one
            search = Search(scenario, machine, limits, tracked, bool(only), progress, visited, canon, saver)
            exploration, used, chose = backend.run(search)
            why = chose
        graph = backend.graph_for(scenario, machine, limits) if live and not limits.expired() else None
    if exploration is not None:
        report = ScenarioReport(scenario, exploration.stats, exploration.complete, exploration.reason)
    elif graph is not None:
        report = ScenarioReport(scenario, graph.stats, graph.complete, graph.reason)
    else:
        report = ScenarioReport(scenario, Stats(), False, limits.time_reason)
    report.symmetry = reduction.note if reduction is not None else ""
    report.backend, report.backend_note = used, why
    if saver is not None:
        report.checkpoint = {"file": str(saver.path), "resumed_from": saver.resumed_from, "written": saver.saves,
                             "kept": saver.path.exists()}
        if saver.resumed_from is not None:
            report.notes.append(f"resumed from its checkpoint {saver.path} (depth {saver.resumed_from['depth']}, "
                                f"{saver.resumed_from['n_states']:,} states)")
        if report.checkpoint["kept"]:
            report.notes.append(f"its checkpoint {saver.path} is kept: run the check again to go on from it")
        if live and not one:
            report.notes.append("the search for the liveness claims' graph is not checkpointed: "
                                "it starts over when the check is run again")
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


def checkpointer(scenario: Scenario, machine: Machine, limits: Limits, tracked: list[int], stop: bool,
                 visited: str, symmetry: bool, graph: bool, folder: str | Path, every: float | None = None,
                 engine: str | None = "python"):
    """The :class:`~.checkpoint.Checkpoint` of this search of ``scenario`` in ``folder``: its
    description (limits but the time limit, claims, visited set, symmetry) is what a checkpoint
    must match to be resumed from (the time limit is each run's own); ``graph``: the search keeps
    the state graph too; ``engine``: whose search it is (the Python engine's, or the native
    backend's with a digest of its C code: :meth:`~.backends.Backend.checkpoint_kind`; ``None``:
    the backend sets it when it runs)."""
    from kvproof.checker.explicit.checkpoint import DEFAULT_EVERY, Checkpoint

    names = sorted(machine.claims[i].name for i in set(tracked))
    search = {"max_states": limits.max_states, "max_depth": limits.max_depth, "visited": visited,
              "symmetry": symmetry, "claims": names, "stop_when_all_hit": stop, "graph": graph, "engine": engine}
    return Checkpoint(folder, scenario.name, machine.fingerprint, search, DEFAULT_EVERY if every is None else every)


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
