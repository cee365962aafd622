"""A certificate held against the catalogue: is it a proof of *today's* scenario of its name?

The solvers of :mod:`.solvers` check that the stored text is a proof of *something*; this
module checks that the something is the catalogue's scenario as kvproof encodes it today:

* the stored scenario (JSON data, never built) equals the catalogue scenario of the same name
  (its ``[expect]`` entries compared only for the invariants the certificate proves: a claim it
  does not prove may gain or change its expectation, which the coverage check below holds
  against today's), and the file is named after it (``<scenario>.smt2``);
* ``proves`` names invariants of that scenario, none it expects violated, and covers every
  invariant it expects verified;
* the declared state bits are the scenario's, and the stored ``init``, ``typed``, ``trans`` and
  ``safe`` are each equivalent to today's encoding (:class:`~.transition.TransitionSystem` of
  the catalogue scenario; ``safe`` the conjunction of the safety predicates of ``proves``): one
  SMT query each, "stored ≠ today's", which must be unsat.

Only the catalogue scenario is built; the stored one stays data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import z3

from kvproof.model.registry import ProtocolError, canonical
from kvproof.model.scenario import Scenario, ScenarioError, builtin
from kvproof.checker.symbolic.certificate import certificate_filename
from kvproof.checker.certs.reader import TAG, Certificate
from kvproof.checker.certs.sexpr import render
from kvproof.checker.symbolic.transition import TransitionSystem

__all__ = ["CatalogueMatch", "match_catalogue", "scenario_differences", "COMPARED"]

COMPARED = ("init", "typed", "trans", "safe")


@dataclass
class CatalogueMatch:
    """``equivalence``: per compared definition, the answer to "stored ≠ today's" (``unsat``:
    equal, ``sat``: they differ, ``not compared`` when an earlier check already failed);
    ``problems``: one line per failure."""

    scenario: Scenario | None = None
    equivalence: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def scenario_differences(stored: Any, today: dict[str, Any]) -> list[str]:
    """The keys (``engine.checksum``, ``title``) where ``stored`` and ``today`` differ."""
    today = json.loads(json.dumps(today))  # tuples as lists, as stored
    if not isinstance(stored, dict):
        return ["(the whole scenario)"]
    stored, today = _named(stored), _named(today)
    out = []
    for key in sorted(set(stored) | set(today)):
        a, b = stored.get(key), today.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{key}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        else:
            out.append(key)
    return out


def _named(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its protocol by its stable name (an older spelling of a registered
    protocol's name stands for the same protocol; anything else is kept as stored)."""
    ref = data.get("protocol")
    if not isinstance(ref, str):
        return data
    try:
        name = canonical(ref)
    except ProtocolError:
        return data
    return {**data, "protocol": name}


def _listed(names: list[str], n: int = 4) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def match_catalogue(cert: Certificate, scenario: Scenario | None = None) -> CatalogueMatch:
    """Hold ``cert`` against the catalogue scenario of its stored name (or ``scenario``)."""
    out = CatalogueMatch(equivalence={name: "not compared" for name in COMPARED})
    name = cert.name
    if cert.path.name != certificate_filename(name):
        out.problems.append(f"the file is named {cert.path.name}, but the certificate is of scenario {name} "
                            f"(expected {certificate_filename(name)})")
    where = f"the catalogue's {name}"
    if scenario is None:
        try:
            scenario = builtin(name)
        except ScenarioError:
            out.problems.append(f"no catalogue scenario is named {name!r} (kvproof list shows the catalogue)")
            return out
    else:
        where = f"{scenario.name} ({scenario.origin})"
        if scenario.name != name:
            out.problems.append(f"the certificate is of scenario {name}, not of {scenario.name}")
    out.scenario = scenario
    # The expected verdict of a claim the certificate does not prove is no part of the proof:
    # coverage and the claims it proves are held against today's expectations below.
    diff = [d for d in scenario_differences(cert.scenario, scenario.to_data())
            if not (d.startswith("expect.") and d[len("expect."):] not in cert.proves)]
    if diff:
        out.problems.append(f"the stored scenario differs from {where} in {_listed(diff)}")
    spec = scenario.build()
    ts = TransitionSystem(spec)
    expected = scenario.expectations(spec)
    invariants = ts.invariants()
    unknown = [n for n in cert.proves if n not in invariants]
    if unknown:
        out.problems.append(f"proves {_listed(unknown)}, not invariants of {scenario.name}")
    violated = [n for n in cert.proves if expected.get(n) == "violated"]
    if violated:
        out.problems.append(f"proves {_listed(violated)}, which {scenario.name} expects violated")
    uncovered = [n for n in invariants if expected.get(n) == "verified" and n not in cert.proves]
    if uncovered:
        out.problems.append(f"does not prove {_listed(uncovered)}, which {scenario.name} expects verified")
    bits = [f"|{b.decl().name()}|" for b in ts.bits(ts.pre)]
    if set(cert.pre) != set(bits):
        extra, lacking = sorted(set(cert.pre) - set(bits)), sorted(set(bits) - set(cert.pre))
        out.problems.append(f"declares {len(cert.pre)} state bits, {scenario.name} has {len(bits)}"
                            + (f"; no such bit: {extra[0]}" if extra else "")
                            + (f"; not declared: {lacking[0]}" if lacking else ""))
        return out
    try:
        stored = _parse(cert)
    except z3.Z3Exception as e:
        out.problems.append(f"the stored definitions do not parse: {' '.join(str(e).split())[:160]}")
        return out
    today = {
        "init": ts.init(ts.pre),
        "typed": ts.typed(ts.pre),
        "trans": ts.step(ts.pre, ts.state("post"), ts.tag("pre")),
    }
    if not unknown:
        today["safe"] = z3.And(*[ts.safe(n, ts.pre) for n in cert.proves]) if cert.proves else z3.BoolVal(True)
    for what, term in today.items():
        s = z3.SolverFor("QF_LIA")  # Booleans and the integer action tag
        s.add(z3.Xor(stored[what], term))
        answer = s.check()
        out.equivalence[what] = str(answer)
        if answer == z3.sat:
            out.problems.append(f"{what} is not today's encoding of {scenario.name} (a state where they differ exists)")
        elif answer != z3.unsat:
            out.problems.append(f"{what}: could not decide whether it is today's encoding ({' '.join(s.reason_unknown().split())[:120]})")
    return out


def _parse(cert: Certificate) -> dict[str, Any]:
    """The stored definitions as Z3 terms over the declared constants (text to z3's parser)."""
    decls = [f"(declare-const {b} Bool)" for b in cert.pre + cert.post] + [f"(declare-const {TAG} Int)"]
    defs = [f"(define-fun {n} () Bool {render(body)})" for n, body in cert.defs.items()]
    asserts = [f"(assert {n})" for n in COMPARED]
    terms = z3.parse_smt2_string("\n".join(decls + defs + asserts))
    return dict(zip(COMPARED, terms))
