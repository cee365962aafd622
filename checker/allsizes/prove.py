"""``kvproof prove --all-sizes SCENARIO``: safety claims for every number of requests and pages.

The parametric model is the one lifted from the scenario's own spec (:func:`all_sizes_model`:
:func:`~.sorted_allsizes.lifted_model`, the same for proving, for ``certify`` and for ``--link``;
none when the spec declares no sorts or an action cannot be lifted, the refusal's file and line
then the reason).  Then:

1. **The scenario's own size first**, with the explicit engine (:func:`~kvproof.checker.explicit.run.check_scenario`):
   a target claim broken there is reported *violated* with the shortest counterexample, replayed
   (exit 1); nothing is proved for a scenario that is unsafe at its own size.
2. **Candidates found, not written**: the reachable states of the model's small instance (and
   of each further one it names, :attr:`AllSizesModel.more`) are enumerated, the template facts of at most two slot values that no reachable state shows
   together are mined (:func:`~kvproof.checker.symbolic.lemmas.mine`), with ``arity`` 3 also the three-value facts of
   one element (:func:`one_element_triples`), and each is lifted to a ``∀``-formula over the
   sorts (:class:`~.sorted_allsizes.ClauseLifter`: its concrete requests, pages and chunks become
   distinct variables); and the facts of rows joined through a pointer (:class:`Join`: an
   element's slots beside those of the element it points to, :func:`mine_joined`), lifted with
   the pointed element as the pointer's term.
3. **Houdini** (:func:`~.quantified.houdini`) over the lifted candidates and the target claims,
   first on a bounded instance of the parametric model (:attr:`AllSizesModel.filter_sizes`: ground queries, a
   filter only), then on the parametric model itself (quantified, every size) over what the
   filter kept.  A claim that survives is **proved for every size**; one that
   is dropped is *inconclusive* (exit 2), with the counterexample to induction Z3 gave, a state
   of some small size.  Then (by default) the invariant is shrunk to the claims and the lemmas
   their unsat cores need (:func:`~.quantified.minimise`), the kept set checked from scratch.
4. A **certificate** (``<scenario>.allsizes.smt2``): the invariant and its obligations as one
   SMT-LIB script that stock z3 and cvc5 each answer ``unsat`` to, obligation by obligation
   (:mod:`~.certs.solvers`); :func:`recheck_all_sizes` (what ``certify`` runs) reads it with the
   one certificate reader and also demands that it be, term for term, what the lifted model of
   the scenario it names gives for its invariant (:func:`model_problems`).

This module knows no protocol.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kvproof.checker.atomic import write_text_atomic
from kvproof.checker.certs.limits import ResourceLimit
from kvproof.checker.certs.reader import ALL_SIZES, ALL_SIZES_SUFFIX, Certificate, CertificateError, parse_certificate, read_certificate
from kvproof.checker.certs.sexpr import free_symbols, render
from kvproof.checker.certs.solvers import run_solvers
from kvproof.checker.symbolic.lemmas import explore_all, mine
from kvproof.checker.allsizes.hook import AllSizesModel, Join
from kvproof.checker.allsizes.quantified import (Candidate, HoudiniResult, MinimiseResult, ParametricSystem, certificate_text,
                                        drop_redundant, houdini, minimise)
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario

__all__ = ["AllSizesModel", "AllSizesReport", "all_sizes_model", "AllSizesRecheck", "Join", "SUFFIX", "certificate_header", "mine_joined",
           "prove_all_sizes", "recheck_all_sizes", "LinkedReport", "prove_by_link", "model_certificate", "model_problems"]


def mine_joined(join: Join, arity: int = 3) -> list[tuple]:
    """The facts of at most ``arity`` column values that no row of ``join`` shows together
    (:func:`~kvproof.checker.symbolic.lemmas.mine` over the rows, a narrower fact implying a wider one leaving it out),
    those naming a column of the pointed element only (the others are facts of one element,
    mined without the join)."""

    class _Columns:
        pre = [dict.fromkeys(d) for d in join.domains]

    facts = mine(_Columns, join.rows, slots=range(len(join.columns)), arity=arity)
    return [f for f in facts if any(j in join.targets for j, _ in f)]


def conditioned(lift: Callable[[tuple], Candidate | None], clause: tuple) -> tuple[tuple, Candidate] | None:
    """``clause`` lifted conditioned on the per-element configuration of what it names, with its
    signature (the conditions' truth), when ``lift`` offers that (a
    :class:`~.sorted_allsizes.ClauseLifter`'s ``conditioned``); else ``None``."""
    method = getattr(lift, "conditioned", None)
    return method(clause) if method is not None else None


def add_conditioned(cands: dict[str, Candidate], variants: dict[str, dict[tuple, Candidate]]) -> int:
    """Add to ``cands`` the conditioned forms of each candidate that the mined instances showed
    under some but not every configuration of the elements it names (a fact seen for an over-long
    request only: ``over_long(r) → fact(r)`` as well as ``fact(r)``); one mined under every
    configuration is its unconditioned self.  Returns how many were added."""
    added = 0
    for base, by_signature in variants.items():
        width = len(next(iter(by_signature)))
        if len(by_signature) == 2 ** width:
            continue
        for cand in by_signature.values():
            if cand.name not in cands:
                cands[cand.name] = cand
                added += 1
    return added


@dataclass
class AllSizesReport:
    """The outcome: per target claim ``proved`` / ``violated`` / ``inconclusive``, the trace of
    each violated one (at the scenario's size), Houdini's figures and counterexamples to
    induction, the certificate, and seconds per phase."""

    scenario: Scenario
    verdicts: dict[str, str] = field(default_factory=dict)
    traces: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    small_states: int = 0
    """The reachable states of the small instances mined, summed."""
    violated_at: dict[str, tuple[str, int]] = field(default_factory=dict)
    """The target claims a small instance breaks (not at the scenario's own size): each with
    that instance's size and the length of its shortest run to the violation.  Such a claim
    does not hold for every size: it is ``violated``, not a target of Houdini."""
    mined: int = 0
    joined: dict[str, int] = field(default_factory=dict)
    candidates: int = 0
    conditioned: int = 0
    """Of :attr:`candidates`, those conditioned on per-element configuration
    (:func:`add_conditioned`)."""
    filtered: int = 0
    houdini: HoudiniResult | None = None
    certificate: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    fixed: tuple[str, ...] = ()
    abstractions: tuple[str, ...] = ()
    minimised: MinimiseResult | None = None
    """The smaller invariant :func:`~.quantified.minimise` kept (``None``: not run); when its
    ``status`` is ``"done"`` it is what the certificate states, otherwise Houdini's whole set."""
    invariant: list[Candidate] = field(default_factory=list)
    """The invariant the verdicts rest on (the certificate's conjuncts)."""
    linked: list[str] = field(default_factory=list)
    """The sizes at which the model's link with the spec was proved first (:attr:`AllSizesModel.prelink`)."""
    not_lifted: dict[str, str] = field(default_factory=dict)
    """The spec's claims the lift refuses (not targets), each with the refusal (file and line)."""
    pinned: dict[str, bool] = field(default_factory=dict)
    """The rigid conditions fixed for every element after a mined instance broke a target claim
    only where some element has them otherwise than every element of the scenario
    (:func:`~.sorted_allsizes.pins_outside`): the claims are then proved for the configurations
    that have them as the scenario has them (the certificate's ``fixed:`` lines say so), and
    :attr:`outside` keeps what lies outside."""
    outside: dict[str, tuple[str, int]] = field(default_factory=dict)
    """With :attr:`pinned`: the target claims a mined instance outside the pinned configuration
    broke, each with that instance's size and the length of its run (as :attr:`violated_at`)."""

    @property
    def exit_code(self) -> int:
        """1 when a target is violated, 2 when one is inconclusive, 0 when all are proved."""
        from kvproof.checker.outcome import Tally

        verdicts = list(self.verdicts.values())
        violated = verdicts.count("violated")
        proved = verdicts.count("proved")
        undecided = len(verdicts) - violated - proved or not verdicts  # nothing decided is inconclusive
        return Tally(proved, violated, int(undecided)).exit_code


def all_sizes_model(spec: Any, pins: dict[str, bool] | None = None) -> tuple["AllSizesModel | None", str]:
    """The all-sizes model of ``spec`` and "", or ``None`` and why there is none: the model lifted
    from the spec itself (:func:`~.sorted_allsizes.lifted_model`, with the rigid conditions of
    ``pins`` fixed for every element), the one model that :func:`prove_all_sizes`,
    :func:`recheck_all_sizes` and :func:`prove_by_link` use."""
    from kvproof.checker.allsizes.sorted_allsizes import lifted_model
    from kvproof.model.expr import SpecError

    try:
        model = lifted_model(spec, pins=pins)
    except SpecError as e:  # LiftRefused, or a construct the spec runs concretely but not lifted
        return None, f"the spec cannot be lifted to every size: {e}"
    if model is None:
        return None, f"{type(spec).__name__} declares no sorts to lift to or no small instance to mine"
    return model, ""


def prove_all_sizes(scenario: Scenario, max_seconds: float = 1800.0, arity: int = 3,
                    certificates_dir: str | Path | None = None, traces_dir: str | Path | None = None,
                    progress: Callable[[str], None] | None = None, minimise_invariant: bool = True,
                    invariant_from: str | Path | None = None, irredundant: bool = False) -> AllSizesReport:
    """Run the four steps of the module docstring on ``scenario``.  With ``minimise_invariant``
    (the default) Houdini's invariant is first shrunk to the claims and the lemmas they need
    (:func:`~.quantified.minimise`, checked from scratch; if that fails the whole set is kept).
    With ``invariant_from`` (an all-sizes certificate: data, its invariant line is read back
    with :func:`~.quantified.candidates_from`) steps 2 and 3 are skipped: the file's conjuncts
    are minimised, and only what the fresh check of the kept set finds inductive is proved
    (``ValueError``, one line, when the file is not a readable certificate).  With
    ``irredundant`` the minimised set then goes through the greedy drop pass
    (:func:`~.quantified.drop_redundant`): no single lemma of what it leaves can be removed.
    The model is :func:`all_sizes_model`'s (lifted from the spec); the spec's claims the lift
    refuses are :attr:`AllSizesReport.not_lifted`, not targets."""
    from kvproof.checker.explicit.search import Limits
    from kvproof.checker.explicit.run import check_scenario

    say = progress or (lambda text: None)
    spec = scenario.build()
    hook, no_model = all_sizes_model(spec)
    report = AllSizesReport(scenario)
    if hook is not None:
        report.not_lifted = dict(hook.system.refused)
    stored = _read_invariant(invariant_from, hook) if invariant_from is not None else None
    targets = hook.targets if hook is not None else tuple(
        n for n in scenario.family_protocol().all_sizes_claims if n in {c.name for c in Machine(spec).claims})
    t0 = time.perf_counter()
    say(f"{scenario.name}: the explicit engine at the scenario's own size")
    explicit = check_scenario(scenario, Limits(max_seconds=max_seconds), only=list(targets), traces_dir=traces_dir)
    report.seconds["explicit"] = time.perf_counter() - t0
    for c in explicit.claims:
        if c.verdict == "violated":
            report.verdicts[c.claim] = "violated"
            report.traces[c.claim] = c.result
    if report.verdicts:
        for n in targets:
            report.verdicts.setdefault(n, "inconclusive")
        report.reason = (f"violated at the scenario's own size: {', '.join(n for n, v in report.verdicts.items() if v == 'violated')}"
                         "; nothing is proved for a protocol unsafe at one size")
        return report
    if not explicit.complete:
        report.reason = f"the explicit engine did not finish at the scenario's size: {explicit.reason}"
        report.verdicts = {n: "inconclusive" for n in targets}
        return report
    if hook is None:
        report.reason = no_model
        report.verdicts = {n: "inconclusive" for n in targets}
        return report
    report.fixed, report.abstractions = hook.fixed, hook.abstractions
    if hook.prelink is not None:
        t0 = time.perf_counter()
        report.linked, problem = hook.prelink(say)
        report.seconds["link"] = time.perf_counter() - t0
        if problem:
            report.reason = problem
            report.verdicts = {n: "inconclusive" for n in targets}
            return report

    if invariant_from is not None:
        return _from_invariant(report, hook, targets, stored, max_seconds, certificates_dir, say, irredundant)

    t0 = time.perf_counter()
    cands, broke = _mine(report, hook, targets, arity, say)
    pins = _pins_for(hook, spec, broke) if broke and not report.pinned else {}
    if pins:
        # the claims a mined instance broke are broken only where an element is configured otherwise
        # than every element of the scenario (an over-long request, where the scenario has none): fix
        # those conditions at the scenario's value, and mine and link again within that configuration
        shown = ", ".join(f"{n} {'true' if v else 'false'}" for n, v in sorted(pins.items()))
        say(f"{scenario.name}: {', '.join(report.violated_at)} broken outside the scenario's configuration; "
            f"proving with {shown} for every element")
        pinned, why = all_sizes_model(spec, pins)
        if pinned is None:
            report.reason = why
            report.verdicts = {n: report.verdicts.get(n, "inconclusive") for n in targets}
            return report
        hook, report.pinned = pinned, pins
        report.fixed, report.abstractions = hook.fixed, hook.abstractions
        report.seconds["mine"] = time.perf_counter() - t0
        outside = dict(report.violated_at)
        report.violated_at, report.verdicts, report.small_states = {}, {}, 0
        if hook.prelink is not None:
            t1 = time.perf_counter()
            report.linked, problem = hook.prelink(say)
            report.seconds["link"] = report.seconds.get("link", 0.0) + time.perf_counter() - t1
            if problem:
                report.reason = problem
                report.verdicts = {n: "inconclusive" for n in targets}
                return report
        t0 = time.perf_counter()
        cands, _ = _mine(report, hook, targets, arity, say)
        report.outside = outside
    report.candidates = len(cands)
    report.seconds["mine"] = report.seconds.get("mine", 0.0) + time.perf_counter() - t0

    claims = [c for c in hook.system.claims() if c.name in targets and c.name not in report.violated_at]

    t0 = time.perf_counter()
    say(f"{scenario.name}: Houdini over {len(cands)} lifted candidates and {len(claims)} claims, bounded instance")
    budget = lambda: max(max_seconds - sum(report.seconds.values()) - (time.perf_counter() - t0), 1.0)
    pre = houdini(hook.system, [*cands.values(), *claims], budget(), say, sizes=hook.filter_sizes)
    report.filtered = len(pre.kept)
    report.seconds["bounded"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    say(f"{scenario.name}: Houdini over the {len(pre.kept)} it kept, every size (Z3, quantified)")
    res = houdini(hook.system, pre.kept, budget(), say) if pre.status == "done" else pre
    for name, why in pre.counterexamples.items():
        res.counterexamples.setdefault(name, f"(bounded instance) {why}")
    report.houdini = res
    report.seconds["houdini"] = time.perf_counter() - t0
    kept = {c.name for c in res.kept}
    for c in claims:
        report.verdicts[c.name] = "proved" if res.status == "done" and c.name in kept else "inconclusive"
    report.verdicts = {n: report.verdicts[n] for n in targets if n in report.verdicts}
    broken = "; ".join(f"{n} is violated at {size} (a run of {steps} steps)" for n, (size, steps) in report.violated_at.items())
    if res.status != "done":
        report.reason = f"Houdini stopped: {res.status}"
    elif any(v == "inconclusive" for v in report.verdicts.values()):
        report.reason = "the lifted candidates do not make " + ", ".join(
            n for n, v in report.verdicts.items() if v == "inconclusive") + " inductive"
    if broken:
        report.reason = "; ".join(x for x in (broken + ", so not for every size", report.reason) if x)
    report.invariant = list(res.kept)
    if res.status == "done" and minimise_invariant and any(c.claim for c in res.kept):
        _minimise(report, hook, res.kept, budget(), say, irredundant)
    _write_certificate(report, hook, certificates_dir)
    return report


def _mine(report: AllSizesReport, hook: AllSizesModel, targets: Sequence[str], arity: int,
          say: Callable[[str], None]) -> tuple[dict[str, Candidate], set[int]]:
    """Step 2 of the module docstring over ``hook``'s small instances: the lifted candidates (the
    conditioned ones added), and which instances (by position) broke a target claim (recorded
    in ``report.violated_at``, its verdict ``violated``)."""
    cands: dict[str, Candidate] = {}
    variants: dict[str, dict[tuple, Candidate]] = {}  # a candidate's conditioned forms, by signature
    broke: set[int] = set()
    report.mined = 0
    report.joined = {}
    for i, (small, lift, joins, *own) in enumerate(((hook.small, hook.lift, hook.joins, hook.triples), *hook.more)):
        triples = own[0] if own else hook.triples
        say(f"{report.scenario.name}: mining small instance {i + 1} of {1 + len(hook.more)}")
        states, hits = explore_all(Machine(small))
        report.small_states += len(states)
        if any(name in hits for name in targets):
            broke.add(i)
        for name in targets:
            if name in hits and name not in report.violated_at:
                report.violated_at[name] = (small.size_label(), hits[name])
                report.verdicts[name] = "violated"
        small_ts = TransitionSystem(small)
        clauses = list(mine(small_ts, states, arity=min(arity, 2)))
        if arity == 3:
            three = mine(small_ts, states, arity=3)
            clauses += triples(three) if triples is not None else one_element_triples(small, three)
        for cl in clauses:
            cand = lift(cl)
            if cand is not None:
                cands.setdefault(cand.name, cand)
                got = conditioned(lift, cl)
                if got is not None:
                    variants.setdefault(cand.name, {}).setdefault(*got)
        for join in (joins(states) if joins is not None else ()):
            facts = mine_joined(join, arity)
            report.joined[join.name] = report.joined.get(join.name, 0) + len(facts)
            clauses += facts
            for fact in facts:
                cand = join.lift(fact)
                if cand is not None:
                    cands.setdefault(cand.name, cand)
        report.mined += len(clauses)
    report.conditioned = add_conditioned(cands, variants)
    return cands, broke


def _pins_for(hook: AllSizesModel, spec: Any, broke: set[int]) -> dict[str, bool]:
    """The rigid conditions to fix (:func:`~.sorted_allsizes.pins_outside`) so that every mined
    instance that broke a target claim (by position in ``hook``'s instances) lies outside the
    configuration proved; ``{}`` when some such instance has every condition as the scenario
    has it (the claim is broken within the scenario's configuration: no pin can help)."""
    from kvproof.checker.allsizes.sorted_allsizes import pins_outside
    from kvproof.model.sorted_lift import LiftedSystem

    if not isinstance(hook.system, LiftedSystem):
        return {}
    smalls = [hook.small, *[m[0] for m in hook.more]]
    pins: dict[str, bool] = {}
    for i in sorted(broke):
        got = pins_outside(hook.system, spec, smalls[i])
        if not got:
            return {}
        pins.update(got)
    return pins


def _minimise(report: AllSizesReport, hook: AllSizesModel, invariant: list[Candidate], seconds: float,
              say: Callable[[str], None], irredundant: bool = False) -> None:
    """Shrink ``invariant`` (inductive) with :func:`~.quantified.minimise` (and, with
    ``irredundant``, :func:`~.quantified.drop_redundant`); the report's invariant becomes the
    kept set only when its fresh check passed."""
    t0 = time.perf_counter()
    say(f"{report.scenario.name}: minimising the invariant ({len(invariant)} conjuncts)")
    m = minimise(hook.system, invariant, seconds, say)
    report.minimised = m
    report.seconds["minimise"] = time.perf_counter() - t0
    if irredundant and m.status == "done":
        t0 = time.perf_counter()
        say(f"{report.scenario.name}: the drop pass over the {len(m.kept)} kept")
        drop_redundant(hook.system, m, max(seconds - report.seconds["minimise"], 1.0), say)
        report.seconds["drop"] = time.perf_counter() - t0
    if m.status == "done":
        report.invariant = list(m.kept)


def _write_certificate(report: AllSizesReport, hook: AllSizesModel, certificates_dir: str | Path | None) -> None:
    """``<scenario>.allsizes.smt2`` of the report's invariant, if a claim is proved."""
    proved = [n for n, v in report.verdicts.items() if v == "proved"]
    if not proved or certificates_dir is None:
        return
    t0 = time.perf_counter()
    header = certificate_header(report.scenario.name, proved, hook)
    path = Path(certificates_dir) / f"{report.scenario.name}{SUFFIX}"
    write_text_atomic(path, certificate_text(hook.system, report.invariant, header))
    report.certificate = path
    report.seconds["certificate"] = time.perf_counter() - t0


def _read_invariant(source: str | Path, hook: AllSizesModel | None) -> tuple[Path, list[Candidate]]:
    """The conjuncts of the invariant an all-sizes certificate states (none without a model to
    read them over), read by the one certificate reader; ``ValueError`` (one line) when the file
    is not one."""
    from kvproof.checker.allsizes.quantified import candidates_from
    source = Path(source)
    cert = read_certificate(source, ALL_SIZES)
    if cert.problems:
        raise ValueError(f"{source}: {cert.problems[0]}")
    try:
        return source, [] if hook is None else candidates_from(hook.system, cert.invariant_text)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


def _from_invariant(report: AllSizesReport, hook: AllSizesModel, targets: Sequence[str],
                    stored: tuple[Path, list[Candidate]], max_seconds: float, certificates_dir: str | Path | None,
                    say: Callable[[str], None], irredundant: bool = False) -> AllSizesReport:
    """Steps 2-3 replaced by a stored invariant: its conjuncts minimised and the kept set
    checked from scratch; the target claims in a set that passes are proved."""
    source, cands = stored
    cands = [c for c in cands if not c.claim or c.name in targets]
    report.candidates = len(cands)
    report.invariant = []
    spent = sum(report.seconds.values())
    if any(c.claim for c in cands):
        _minimise(report, hook, cands, max(max_seconds - spent, 1.0), say, irredundant)
    m = report.minimised
    ok = m is not None and m.status == "done"
    kept = {c.name for c in report.invariant if c.claim} if ok else set()
    for n in targets:
        report.verdicts[n] = "proved" if n in kept else "inconclusive"
    if not ok:
        report.reason = (f"the invariant of {source} states no target claim" if m is None
                         else f"the invariant of {source}, minimised, did not check: {m.status}")
    elif any(v != "proved" for v in report.verdicts.values()):
        report.reason = f"the invariant of {source} does not state " + ", ".join(
            n for n, v in report.verdicts.items() if v != "proved")
    _write_certificate(report, hook, certificates_dir)
    return report


SUFFIX = ALL_SIZES_SUFFIX
"""The file name ending of an all-sizes certificate (``<scenario>.allsizes.smt2``)."""


def certificate_header(scenario: str, proved: Sequence[str], hook: AllSizesModel) -> list[str]:
    """The comment lines an all-sizes certificate starts with: the scenario, the claims it
    proves, what is fixed and what over-approximated."""
    return [f"kvproof all-sizes certificate: scenario {scenario}", "proves: " + " ".join(proved),
            *[f"fixed: {line}" for line in hook.fixed], *[f"abstraction: {line}" for line in hook.abstractions],
            "every (check-sat) below must answer unsat"]


@dataclass
class AllSizesRecheck:
    """What :func:`recheck_all_sizes` found: the scenario the file names, the claims it proves,
    each solver's answer per obligation, and one line per problem (none: the certificate
    checks)."""

    path: Path
    scenario: str
    proves: list[str]
    answers: dict[str, dict[str, str]]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """Both solvers answered ``unsat`` to every obligation and the file is the model's."""
        return not self.problems


def model_problems(cert: Certificate, hook: AllSizesModel, scenario: str) -> list[str]:
    """Where ``cert`` (read by the one reader) is not, term for term, the certificate the
    lifted model ``hook`` demands for the invariant it states (:func:`~.quantified.certificate_from`:
    the same header, sorts, Init, guards, updates and claims; only the invariant is the file's
    own); empty when it is.  ``scenario`` is the name its first line must give."""
    from kvproof.checker.allsizes.quantified import certificate_from

    claims = [o.name[len("claim "):] for o in cert.obligations if o.name.startswith("claim ")]
    bare = sorted(free_symbols(cert.invariant) & {s.name for s in hook.system.symbols if not s.args})
    if bare:  # a changed symbol of no arguments would not be renamed in Inv' (none today)
        return [f"the invariant mentions {', '.join(bare)}, a state symbol without arguments"]
    try:
        want_text = certificate_from(hook.system, cert.invariant_text, claims,
                                     certificate_header(scenario, claims, hook))
        want = parse_certificate(want_text, f"the lifted model of {scenario}", ALL_SIZES)
    except ValueError as e:
        return [f"the lifted model of {scenario} cannot state this invariant: {e}"]
    differs = f"differs from the lifted model of {scenario}"
    if cert.scenario_name != scenario:
        return [f"the certificate is of scenario {cert.scenario_name}, not of {scenario}"]
    for key in ("proves", "fixed", "abstraction"):
        if cert.header.get(key, []) != want.header.get(key, []):
            return [f"its '; {key}:' lines {differs} (re-prove with prove --all-sizes)"]
    if cert.prelude != want.prelude:
        k = next((i for i, (a, b) in enumerate(zip(cert.prelude, want.prelude)) if a != b),
                 min(len(cert.prelude), len(want.prelude)))
        return [f"its declarations {differs} (declaration {k + 1}: {render(cert.prelude[k])[:60] if k < len(cert.prelude) else 'missing'}); "
                "re-prove with prove --all-sizes"]
    got = [o.name for o in cert.obligations]
    exp = [o.name for o in want.obligations]
    if got != exp:
        return [f"its obligations ({len(got)}) {differs} ({len(exp)}: "
                + ", ".join(exp[:3]) + (" ..." if len(exp) > 3 else "") + "); re-prove with prove --all-sizes"]
    for mine, theirs in zip(cert.obligations, want.obligations):
        if mine.body != theirs.body:
            return [f"obligation {mine.name} (line {mine.line}) {differs}: the stored obligations are not the "
                    "model's; re-prove with prove --all-sizes"]
    return []


def recheck_all_sizes(path: str | Path, scenario: Scenario | None = None, seconds: float = 600.0,
                      solve: bool = True, limit: ResourceLimit | None = None) -> AllSizesRecheck:
    """Re-check an all-sizes certificate: read by the one certificate reader (bad input:
    :class:`~.certs.reader.CertificateError`, one line), it must be, term for term, the
    certificate the lifted model of the scenario it names (or of ``scenario``) demands
    for the invariant it states (:func:`model_problems`), and fresh z3 and cvc5 processes must
    answer ``unsat`` to each of its obligations, each answer bound to its obligation
    (:mod:`~.certs.solvers`), each check-sat within ``limit``'s resource units when given.
    With ``solve`` false they are not run: ``answers`` stays empty
    and the result says the file is the lifted model's, nothing more; they are not run either on a
    file that already fails (not the lifted model's, misnamed, proving no claim)."""
    from kvproof.model.scenario import builtin

    path = Path(path)
    cert = read_certificate(path, ALL_SIZES)
    name = cert.scenario_name
    problems: list[str] = list(cert.problems)
    try:
        sc = scenario if scenario is not None else builtin(name)
    except Exception as e:  # an unknown name: the catalogue's own message
        return AllSizesRecheck(path, name, cert.proves, {}, problems + [f"scenario {name}: {e}"])
    hook, no_model = all_sizes_model(sc.build(), _pins_of(cert))
    if hook is None:
        return AllSizesRecheck(path, name, cert.proves, {}, problems + [f"scenario {sc.name}: {no_model}"])
    if path.name != f"{sc.name}{SUFFIX}":
        problems.append(f"file name {path.name}: expected {sc.name}{SUFFIX}")
    model = model_problems(cert, hook, sc.name)
    problems += model
    if not solve:
        return AllSizesRecheck(path, sc.name, cert.proves, {}, problems)
    if problems:  # already failed: the solvers (minutes for a large certificate) would change nothing
        problems.append("z3 and cvc5 not run: " + ("the file is not the lifted model's certificate" if model
                                                   else "the certificate already fails"))
        return AllSizesRecheck(path, sc.name, cert.proves, {}, problems)
    runs = run_solvers(cert, seconds, limit)
    for run in runs:
        problems += run.problems
    return AllSizesRecheck(path, sc.name, cert.proves, {r.solver: r.answers for r in runs}, problems)


def one_element_triples(spec: Any, clauses: Sequence[tuple]) -> list[tuple]:
    """The facts of three slot values that all belong to one element: every slot's field is
    indexed first by the same sort (the protocol's :meth:`~kvproof.model.framework.Spec.index_sorts`)
    at the same element, e.g. three fields of one request.  What ``--template-arity 3`` adds to
    the pairs: the full three-value template is too many candidates for the quantified Houdini."""
    from kvproof.checker.symbolic.lift import field_slots
    sorts = {s.domain.name for s in spec.index_sorts()}
    slots = field_slots(spec.layout)
    owner = []
    for fname, idx in slots:
        f = spec.layout.by_name[fname]
        owner.append((f.dims[0].name, idx[0]) if f.dims and f.dims[0].name in sorts else None)
    out = []
    for c in clauses:
        if len(c) == 3:
            heads = {owner[s] for s, _ in c}
            if len(heads) == 1 and None not in heads:
                out.append(c)
    return out


def proved_lemmas(report: AllSizesReport) -> Sequence[Candidate]:
    """The invariant's conjuncts (lemmas and claims) of a finished run: the minimised set when
    the minimiser's check passed, else Houdini's."""
    return report.invariant


# -- at one size, through the link (no enumeration) ---------------------------------------------------

@dataclass
class LinkedReport:
    """What :func:`prove_by_link` found for one scenario: per target claim ``holds`` (at the
    scenario's size: the link is proved and the certificate, the lifted model's, proves it) or
    ``inconclusive``; the link's report; the certificate it rests on and whether its obligations
    were re-solved now; ``mismatch`` lines (a claim the scenario expects violated); ``reason``."""

    scenario: Scenario
    verdicts: dict[str, str] = field(default_factory=dict)
    link: Any = None
    certificate: Path | None = None
    certificate_claims: list[str] = field(default_factory=list)
    solved: dict[str, list[str]] | None = None
    reason: str = ""
    mismatch: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """1 when the link is refuted (a spec step that is no model step, or a claim on which
        they disagree) or a claim the scenario expects violated holds; 2 when a claim is
        inconclusive; 0 when every target claim holds."""
        from kvproof.checker.outcome import Tally

        refuted = len(self.mismatch) + int(self.link is not None and bool(self.link.refuted))
        held = sum(v == "holds" for v in self.verdicts.values())
        undecided = len(self.verdicts) - held or not self.verdicts  # nothing said to hold is inconclusive
        return Tally(held, refuted, int(undecided)).exit_code


def _pins_of(cert: "Certificate | Path") -> dict[str, bool]:
    """The rigid conditions an all-sizes certificate's ``; fixed:`` lines say its lift fixed
    (:func:`~.sorted_allsizes.pins_from`; ``{}`` for a file that cannot be read)."""
    from kvproof.checker.allsizes.sorted_allsizes import pins_from
    if isinstance(cert, Path):
        try:
            cert = read_certificate(cert, ALL_SIZES)
        except CertificateError:
            return {}
    return pins_from(cert.header.get("fixed", []))


def model_certificate(hook: AllSizesModel, path: Path) -> tuple[str, list[str]] | str:
    """``(invariant, claims)`` of the all-sizes certificate at ``path`` when it is, term for
    term, the certificate ``hook``'s parametric model demands for the invariant it states (the
    scenario its first line names may be any: the model is what is compared); otherwise one
    line saying why not."""
    try:
        cert = read_certificate(path, ALL_SIZES)
    except CertificateError as e:
        return str(e)
    why = cert.problems or model_problems(cert, hook, cert.scenario_name)
    if why:
        return f"{path}: {why[0]}"
    return cert.invariant_text, [o.name[len("claim "):] for o in cert.obligations if o.name.startswith("claim ")]


def prove_by_link(scenario: Scenario, certificate: str | Path | None = None,
                  certificates_dir: str | Path = "traces/proofs", seconds: float = 600.0,
                  solve: bool = False, progress: Callable[[str], None] | None = None) -> LinkedReport:
    """The target claims of ``scenario`` at its own size, with no enumeration: the all-sizes
    certificate of the scenario's parametric model (``certificate``, or the first
    ``*.allsizes.smt2`` under ``certificates_dir`` that is, line for line, that model's: see
    :func:`model_certificate`; with ``solve`` its obligations are re-solved by z3 and cvc5 too)
    proves them for the model at every size, and the link (:func:`~.link.check_link` on the
    lifted model's derived link map, no hypothesis) carries them to the spec at this size."""
    from kvproof.checker.allsizes.link import check_link

    say = progress or (lambda text: None)
    report = LinkedReport(scenario)
    spec = scenario.build()
    hook, no_model = all_sizes_model(spec)
    if hook is None or hook.link is None:
        report.reason = no_model or f"{type(spec).__name__}'s all-sizes model has no link at a fixed size"
        return report
    report.verdicts = {n: "inconclusive" for n in hook.targets}
    t0 = time.perf_counter()
    paths = [Path(certificate)] if certificate is not None else sorted(Path(certificates_dir).glob(f"*{SUFFIX}"))
    why = [] if paths else [f"no *{SUFFIX} file under {certificates_dir}"]
    found = None
    for path in paths:
        pins = _pins_of(path)
        if pins:  # a certificate of the configuration with those conditions fixed: that model's
            hook, _ = all_sizes_model(spec, pins)
            if hook is None:
                continue
        got = model_certificate(hook, path)
        if isinstance(got, str):
            why.append(got)
            continue
        found = (path, *got)
        break
    report.seconds["certificate"] = time.perf_counter() - t0
    if found is None:
        report.reason = "no all-sizes certificate of this model: " + "; ".join(why[:3])
        return report
    report.certificate, inv, report.certificate_claims = found
    say(f"{scenario.name}: certificate {report.certificate} is the model's")
    if solve:
        t0 = time.perf_counter()
        runs = run_solvers(read_certificate(report.certificate, ALL_SIZES), seconds)
        report.solved = {r.solver: r.answers for r in runs}
        report.seconds["solve"] = time.perf_counter() - t0
        failures = [p for r in runs for p in r.problems]
        if failures:
            report.reason = "the certificate's obligations: " + "; ".join(failures[:3])
            return report
    t0 = time.perf_counter()
    say(f"{scenario.name}: the link at its size (Z3)")
    report.link = check_link(spec, hook.link(inv, str(report.certificate)), seconds=seconds, progress=say)
    report.seconds["link"] = time.perf_counter() - t0
    if not report.link.proved:
        bad = [r for r in report.link.results if r.verdict != "proved"]
        report.reason = "the link is not proved: " + "; ".join(f"{r.kind} {r.name}: {r.verdict} ({r.offending})" for r in bad[:3])
        return report
    expect = getattr(scenario, "expect", {}) or {}
    agreed = {r.name for r in report.link.results if r.kind == "claim" and r.verdict == "proved"}
    for name in hook.targets:
        if name in report.certificate_claims and name in agreed:
            report.verdicts[name] = "holds"
            if expect.get(name) == "violated":
                report.mismatch.append(f"{name}: holds at this size, but the scenario expects it violated")
    if any(v != "holds" for v in report.verdicts.values()):
        report.reason = "the certificate does not prove " + ", ".join(n for n, v in report.verdicts.items() if v != "holds")
    return report
