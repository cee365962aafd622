"""Proof certificates: an inductive invariant and its three obligations, as SMT-LIB text.

A certificate is a plain SMT-LIB 2 script that any solver can run (``z3 FILE`` prints
``unsat`` three times): the state bits are declared, ``init``, ``trans``, ``typed``, ``safe``
and ``inv`` are defined, and three obligations are asserted one at a time::

    init & typed & not inv                       (Init => Inv)
    inv & typed & trans & typed' & not inv'      (Inv & Next => Inv')
    inv & typed & not safe                       (Inv => Safe)

Comment lines in front carry the scenario (JSON) and the invariants proved, so
:func:`recheck` can do two things with a fresh solver: run the file's own obligations, and
rebuild Init, Next and Safe from today's spec and check the stored invariant against *those*
(a certificate of an older spec fails with the obligation that broke).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import z3

from ..spec.scenario import Scenario, ScenarioError, parse_scenario
from .transition import TransitionSystem

__all__ = ["write_certificate", "recheck", "Recheck", "CertificateError", "certificate_filename"]

MAGIC = "; kvproof certificate 1"
OBLIGATIONS = ("init_implies_inv", "inv_is_inductive", "inv_implies_safe")


class CertificateError(ValueError):
    """A file that is not a readable certificate (one line)."""


@dataclass
class Recheck:
    """What re-checking one certificate found: per obligation, ``unsat`` (discharged) or not."""

    path: Path
    scenario: str
    invariants: list[str]
    stored: dict[str, str]
    against_spec: dict[str, str]

    @property
    def ok(self) -> bool:
        """Every obligation is discharged, both as stored and against today's spec."""
        return all(v == "unsat" for v in [*self.stored.values(), *self.against_spec.values()])


def certificate_filename(scenario: str) -> str:
    """``<scenario>.smt2``."""
    return f"{scenario}.smt2"


def _obligations(ts: TransitionSystem, inv_pre: Any, invariants: Sequence[str]) -> dict[str, Any]:
    xs, ys, tag = ts.pre, ts.state("post"), ts.tag("pre")
    inv_post = _to_post(ts, inv_pre)
    safe = z3.And(*[ts.safe(n, xs) for n in invariants])
    return {
        "init_implies_inv": z3.And(ts.init(xs), ts.typed(xs), z3.Not(inv_pre)),
        "inv_is_inductive": z3.And(inv_pre, ts.typed(xs), ts.step(xs, ys, tag), ts.typed(ys), z3.Not(inv_post)),
        "inv_implies_safe": z3.And(inv_pre, ts.typed(xs), z3.Not(safe)),
    }


def _to_post(ts: TransitionSystem, term: Any) -> Any:
    return z3.substitute(term, *zip(ts.bits(ts.pre), ts.bits(ts.state("post"))))


def write_certificate(directory: str | Path, scenario: Scenario, ts: TransitionSystem, invariant: Any,
                      invariants: Sequence[str], method: str = "spacer") -> Path:
    """Write the certificate of ``invariant`` (a term over the template pre-state) atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    xs, ys, tag = ts.pre, ts.state("post"), ts.tag("pre")
    lines = [
        MAGIC,
        f"; scenario: {json.dumps(scenario.to_data(), sort_keys=True)}",
        f"; method: {method}",
        f"; proves: {' '.join(invariants)}",
        "; Run it with any SMT-LIB solver: each (check-sat) must answer unsat.",
        "(set-logic ALL)",
    ]
    for b in ts.bits(xs) + ts.bits(ys):
        lines.append(f"(declare-const {b.sexpr()} Bool)")
    lines.append(f"(declare-const {tag.sexpr()} Int)")
    defs = {
        "init": ts.init(xs),
        "typed": ts.typed(xs),
        "typed_next": ts.typed(ys),
        "trans": ts.step(xs, ys, tag),
        "safe": z3.And(*[ts.safe(n, xs) for n in invariants]),
        "inv": invariant,
        "inv_next": _to_post(ts, invariant),
    }
    for name, term in defs.items():
        lines.append(f"(define-fun {name} () Bool {_one_line(term)})")
    asserts = {
        "init_implies_inv": "(and init typed (not inv))",
        "inv_is_inductive": "(and inv typed trans typed_next (not inv_next))",
        "inv_implies_safe": "(and inv typed (not safe))",
    }
    for name, body in asserts.items():
        lines += [f"; obligation: {name}", "(push 1)", f"(assert {body})", "(check-sat)", "(pop 1)"]
    path = directory / certificate_filename(scenario.name)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".smt2")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _one_line(term: Any) -> str:
    return " ".join(term.sexpr().split())


def _read(path: Path) -> tuple[Scenario, list[str], str, dict[str, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise CertificateError(f"{path}: not UTF-8 text (byte {e.start}): expected an SMT-LIB certificate") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise CertificateError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not text.startswith(MAGIC):
        raise CertificateError(f"{path}: not a kvproof certificate (first line is not {MAGIC!r})")
    meta: dict[str, str] = {}
    body: list[str] = []
    asserts: dict[str, str] = {}
    pending = None
    for line in text.splitlines()[1:]:
        if line.startswith("; obligation: "):
            pending = line.split(": ", 1)[1]
        elif line.startswith("(assert ") and pending:
            asserts[pending] = line
            pending = None
        elif line.startswith("; ") and ": " in line and not body:
            k, v = line[2:].split(": ", 1)
            meta[k] = v
        elif line.startswith(("(declare-const", "(define-fun", "(set-logic")):
            body.append(line)
    try:
        scenario = parse_scenario(json.loads(meta["scenario"]), f"{path}#scenario")
    except (KeyError, json.JSONDecodeError, RecursionError) as e:
        raise CertificateError(f"{path}: no readable scenario line: {type(e).__name__}: {e}") from None
    except ScenarioError as e:
        raise CertificateError(f"{path}: stored scenario: {e}") from None
    if set(asserts) != set(OBLIGATIONS):
        raise CertificateError(f"{path}: expected the obligations {', '.join(OBLIGATIONS)}")
    return scenario, meta.get("proves", "").split(), "\n".join(body), asserts


def recheck(path: str | Path) -> Recheck:
    """Re-check a certificate with fresh solvers: its own three obligations, then the stored
    invariant against Init, Next and Safe rebuilt from today's spec."""
    path = Path(path)
    scenario, invariants, prelude, asserts = _read(path)
    stored = {}
    for name in OBLIGATIONS:
        s = z3.SolverFor("QF_FD")  # finite domains: a SAT solver decides every obligation
        try:
            s.from_string(prelude + "\n" + asserts[name])
        except z3.Z3Exception as e:
            raise CertificateError(f"{path}: obligation {name} does not parse: {e}") from None
        stored[name] = str(s.check())
    spec = scenario.build()
    unknown = [n for n in invariants if n not in {c.name for c in spec.claims if c.kind == "invariant"}]
    if unknown:
        raise CertificateError(f"{path}: {unknown[0]} is not an invariant of the spec")
    ts = TransitionSystem(spec)
    try:
        inv = z3.parse_smt2_string(prelude + "\n(assert inv)")[0]
    except z3.Z3Exception as e:
        raise CertificateError(f"{path}: the invariant does not parse: {e}") from None
    against = {}
    for name, term in _obligations(ts, inv, invariants).items():
        s = z3.SolverFor("QF_FD")
        s.add(term)
        against[name] = str(s.check())
    return Recheck(path, scenario.name, invariants, stored, against)
