"""Check scenarios with the symbolic engine, and compare it with the explicit one.

:func:`check_scenario_bmc` is the bounded-model-checking counterpart of
:func:`~kvproof.checker.explicit.run.check_scenario`: the same :class:`~kvproof.checker.results.ScenarioReport`, the same traces.  A
violation is reported only after its path replays on the compiled machine; a path that does not
replay makes the claim *inconclusive* with an "engine error" reason (never a violation).  A claim
that does not hit within the depth is inconclusive too: bounded model checking never verifies.

:func:`disagreements` compares an explicit report with a bounded one: same verdicts, same
shortest lengths.  :func:`cross_check` is ``kvproof check --engine both``: bounded model
checking up to the deepest explicit hit (so every hit must appear at its explicit length, and
nothing may hit earlier), and, for every claim the complete explicit search never saw hit, a
symbolic proof for all depths that it never hits (k-induction strengthened by Houdini lemmas,
:func:`~.proofs.strengthened_k_induction`) — or bounded model checking as deep as the explicit
search went, when that is asked for with ``depth``.  Either way the comparison covers every
reachable state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.checker.symbolic.bmc import EngineError, bmc, confirmed_path
from kvproof.checker.symbolic.cti import InductionFailure, from_k_induction
from kvproof.checker.symbolic.lemmas import Reachable, explore_all
from kvproof.checker.symbolic.proofs import ProofBudget, strengthened_k_induction
from kvproof.checker.results import ClaimReport, Inconclusive, ScenarioReport, Stats, expectations_of, found
from kvproof.checker.traces import Trace, write_trace
from kvproof.checker.symbolic.transition import TransitionSystem

__all__ = ["check_scenario_bmc", "disagreements", "compare", "cross_check", "Agreement"]


def check_scenario_bmc(scenario: Scenario, depth: int, only: list[str] | None = None,
                       traces_dir: str | Path | None = None, max_seconds: float | None = None,
                       deadline: float | None = None) -> ScenarioReport:
    """Check ``scenario``'s claims by bounded model checking up to ``depth`` steps, for at most
    ``max_seconds`` (counted from now, or up to ``deadline``, a ``time.perf_counter()`` reading,
    when it is given: the command's one budget)."""
    spec = scenario.build()
    expected = expectations_of(scenario, spec, only)
    if deadline is None and max_seconds is not None:
        deadline = time.perf_counter() + max_seconds

    def out_of_time() -> ScenarioReport | None:
        if deadline is None or time.perf_counter() <= deadline:
            return None
        why = f"time limit {max_seconds or 0:g} s reached"
        report = ScenarioReport(scenario, Stats(depth=-1), complete=False, reason=f"bounded model checking: {why}")
        report.claims = [ClaimReport(n, spec.claim(n).kind, w, Inconclusive(why)) for n, w in expected.items()]
        return report

    if (late := out_of_time()) is not None:
        return late
    machine = Machine(spec)
    if (late := out_of_time()) is not None:
        return late
    try:  # (the encoding takes a second or two on the largest scenarios)
        ts = TransitionSystem(spec, deadline)
    except TimeoutError:
        return out_of_time()
    claims = [spec.claim(name) for name in expected if spec.claim(name).kind in ("invariant", "witness")]
    run = bmc(ts, claims, depth, max_seconds, deadline=deadline)
    stats = Stats(states=0, transitions=0, depth=run.depth, seconds=run.seconds)
    report = ScenarioReport(scenario, stats, complete=False, reason=f"bounded model checking: {run.stopped}")
    for name, want in expected.items():
        claim = spec.claim(name)
        row_trace_path = None
        if claim.kind not in ("invariant", "witness"):
            result = Inconclusive(f"a {claim.kind} claim: checked by the explicit engine only")
        elif name in run.hits:
            actions, states = run.hits[name]
            try:
                replayed = confirmed_path(machine, name, actions, states)
            except EngineError as e:
                result = Inconclusive(f"engine error: {e}")
            else:
                kind = "counterexample" if claim.kind == "invariant" else "witness"
                trace = Trace(scenario, machine, name, kind, actions, replayed)
                result = found(claim.kind, trace)
                if traces_dir is not None and claim.kind == "invariant":
                    row_trace_path = write_trace(trace, traces_dir)
        elif run.stopped.startswith("time limit"):
            result = Inconclusive(run.stopped if run.depth < 0 else f"no hit within {run.depth} steps: {run.stopped}")
        else:
            result = Inconclusive(f"no hit within {run.depth} steps (bounded; `kvproof prove` decides all depths)")
        report.claims.append(ClaimReport(name, claim.kind, want, result, row_trace_path))
    return report


def disagreements(explicit: ScenarioReport, bounded: ScenarioReport, proved: Sequence[str] = ()) -> list[str]:
    """Where the two engines differ on one scenario, or where the comparison is incomplete
    (empty when they agree): :func:`compare`'s problems, then its gaps."""
    problems, gaps = compare(explicit, bounded, proved)
    return problems + gaps


def compare(explicit: ScenarioReport, bounded: ScenarioReport,
            proved: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(problems, gaps) of one scenario: where the engines disagree, and where agreement is
    not established.

    A claim the explicit engine decided must get the same verdict from bounded model checking,
    with a trace of the same length; a claim the explicit engine found no hit for must have no
    bounded hit either, and then the bounded search must have reached the explicit search's
    depth, or the claim be among ``proved`` (never hits, for all depths); otherwise the
    comparison is incomplete: a gap.  A claim a limit left the explicit engine undecided on
    cannot disagree: a bounded hit for it is a gap."""
    problems: list[str] = []
    gaps: list[str] = []
    name = explicit.scenario.name
    rows = {c.claim: c for c in bounded.claims}
    for c in explicit.claims:
        b = rows.get(c.claim)
        if b is None or c.kind not in ("invariant", "witness"):
            continue
        if b.verdict == "inconclusive" and str(getattr(b.result, "reason", "")).startswith("engine error"):
            problems.append(f"{name}: {c.claim}: {b.result.reason}")
            continue
        e_hit = getattr(c.result, "trace", None) is not None
        b_hit = getattr(b.result, "trace", None) is not None
        if e_hit != b_hit:
            if e_hit and bounded.stats.depth < (c.depth or 0):
                gaps.append(f"{name}: {c.claim}: bounded search stopped at depth {bounded.stats.depth}, "
                            f"before the explicit hit at {c.depth}: agreement not established")
            elif c.verdict == "inconclusive":
                gaps.append(f"{name}: {c.claim}: bounded hit at depth {b.depth}, but the explicit search stopped "
                            f"before deciding ({c.result.reason}): agreement not established")
            else:
                problems.append(f"{name}: {c.claim}: explicit {c.verdict} (hit: {e_hit}), bounded hit: {b_hit}")
        elif e_hit and c.depth != b.depth:
            problems.append(f"{name}: {c.claim}: shortest length {c.depth} (explicit) vs {b.depth} (bounded)")
        elif (not e_hit and explicit.complete and bounded.stats.depth < explicit.stats.depth
              and c.claim not in proved):
            gaps.append(f"{name}: {c.claim}: bounded search reached depth {bounded.stats.depth}, "
                        f"not the explicit search's {explicit.stats.depth}: agreement not established")
    return problems, gaps


@dataclass
class Agreement:
    """``kvproof check --engine both`` on one scenario: the ``bounded`` report, the claims never hit that were ``proved`` so for all depths (and why not, ``reason``),
    ``problems`` (the engines disagree), ``gaps`` (agreement not established) and, when the
    proof stopped on one, its counterexample to induction (``failure``)."""

    bounded: ScenarioReport
    proved: list[str] = field(default_factory=list)
    reason: str = ""
    problems: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    failure: InductionFailure | None = None


def cross_check(explicit: ScenarioReport, depth: int | None = None, only: list[str] | None = None,
                max_seconds: float | None = None, budget: ProofBudget = ProofBudget(),
                deadline: float | None = None) -> Agreement:
    """Cross-check the explicit report of one scenario with the symbolic engine (see the module
    docstring); ``depth`` instead runs bounded model checking that deep and proves nothing.
    With ``max_seconds`` every phase stops at ``deadline`` (a ``time.perf_counter()`` reading;
    default ``max_seconds`` from now); what it left unfinished is a gap."""
    sc = explicit.scenario
    if deadline is None and max_seconds is not None:
        deadline = time.perf_counter() + max_seconds
    hits = [c.depth for c in explicit.claims if getattr(c.result, "trace", None) is not None]
    prove = depth is None
    if depth is None:
        depth = max((d for d in hits if d is not None), default=0)
    bounded = check_scenario_bmc(sc, depth, only, None, max_seconds, deadline)
    out = Agreement(bounded)
    never = [c.claim for c in explicit.claims if c.kind in ("invariant", "witness")
             and getattr(c.result, "trace", None) is None]
    if prove and never and explicit.complete and bounded.stats.depth < explicit.stats.depth:
        spec = sc.build()
        ts, machine = TransitionSystem(spec), Machine(spec)
        if deadline is not None:
            budget = replace(budget, induction_seconds=min(budget.induction_seconds,
                                                           max(0.001, deadline - time.perf_counter())))
        try:
            if deadline is not None and time.perf_counter() > deadline:
                raise RuntimeError(f"time limit {max_seconds or 0:g} s reached")
            states, _ = explore_all(machine, budget.max_states, deadline)
        except RuntimeError as e:
            out.reason = str(e)
        else:
            m2 = strengthened_k_induction(ts, states, never, budget)
            if m2.outcome.status == "proved":
                out.proved = never
            elif m2.outcome.status == "refuted":
                out.problems.append(f"{sc.name}: a claim the explicit search never saw hit hits at depth "
                                    f"{m2.outcome.k} (k-induction's base case): {', '.join(never)}")
            elif m2.outcome.cti is not None:
                out.failure = from_k_induction(machine, m2.outcome.cti, Reachable(ts, states).core)
            out.reason = m2.reason
    problems, gaps = compare(explicit, bounded, out.proved)
    out.problems += problems
    out.gaps += gaps
    if out.gaps and out.reason:
        out.gaps.append(f"{sc.name}: the claims never hit are not proved: {out.reason}")
    return out
