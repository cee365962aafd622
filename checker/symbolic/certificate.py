"""The fixed-size certificate's writer: an inductive invariant and its three obligations, as
SMT-LIB text.

A certificate is a plain SMT-LIB 2 script that any solver can run (``z3 FILE`` prints
``unsat`` three times): the state bits are declared, ``init``, ``typed``, ``typed_next``,
``trans``, ``safe``, ``inv`` and ``inv_next`` are defined, and three obligations are asserted
one at a time::

    init & typed & not inv                       (Init => Inv)
    inv & typed & trans & typed' & not inv'      (Inv & Next => Inv')
    inv & typed & not safe                       (Inv => Safe)

Comment lines in front carry the scenario (JSON) and the invariants proved.  The one reader
(:mod:`.reader`) reads it back; ``kvproof certify`` (:mod:`kvproof.checker.certify`) re-checks it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import z3

from kvproof.checker.certs.reader import FIXED_HOWTO, FIXED_MAGIC, STANDARD_ASSERTS
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.scenario import Scenario

__all__ = ["write_certificate", "certificate_filename"]


def certificate_filename(scenario: str) -> str:
    """``<scenario>.smt2``."""
    return f"{scenario}.smt2"


def _to_post(ts: TransitionSystem, term: Any) -> Any:
    return ts.sub_post(term)


def write_certificate(directory: str | Path, scenario: Scenario, ts: TransitionSystem, invariant: Any,
                      invariants: Sequence[str], method: str = "spacer") -> Path:
    """Write the certificate of ``invariant`` (a term over the template pre-state) atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    xs, ys, tag = ts.pre, ts.state("post"), ts.tag("pre")
    lines = [
        f"; {FIXED_MAGIC}",
        f"; scenario: {json.dumps(scenario.to_data(), sort_keys=True)}",
        f"; method: {method}",
        f"; proves: {' '.join(invariants)}",
        f"; {FIXED_HOWTO}",
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
    for name, body in STANDARD_ASSERTS.items():
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
