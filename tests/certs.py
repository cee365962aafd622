"""Certificates for the certificate tests: a committed one, tampered copies, and a certificate
whose invariant mentions the action tag (stock z3 discharges it, the claim is violated)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import z3

from kvproof.checker.allsizes.quantified import certificate_text
from kvproof.checker.certs.reader import (ALL_SIZES, ALL_SIZES_HOWTO, ALL_SIZES_MAGIC, parse_certificate,
                                          read_certificate)
from kvproof.checker.certs.solvers import run_solvers
from kvproof.checker.symbolic.certificate import write_certificate
from kvproof.checker.symbolic.transition import TransitionSystem
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin

PROOFS = Path(__file__).resolve().parent.parent / "traces" / "proofs"
SMALL = "ack-target-cleared"  # 26 reachable states, the smallest committed certificate


def committed(name: str = SMALL) -> Path:
    """The committed certificate of scenario ``name``."""
    return PROOFS / f"{name}.smt2"


def copy_as(tmp_path: Path, text: str, name: str = SMALL) -> Path:
    """``text`` saved as ``<tmp_path>/<name>.smt2`` (its own folder, so names never clash)."""
    folder = tmp_path / f"c{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    path = folder / f"{name}.smt2"
    path.write_text(text, encoding="utf-8")
    return path


def replace_line(text: str, prefix: str, line: str) -> str:
    """``text`` with its (one) line starting with ``prefix`` replaced by ``line``."""
    out = re.sub(rf"^{re.escape(prefix)}.*$", lambda _: line, text, count=1, flags=re.M)
    assert out != text, prefix
    return out


def tampered(tmp_path: Path, how: str) -> Path:
    """A copy of the small committed certificate, changed as ``how`` names."""
    text = committed().read_text(encoding="utf-8")
    if how == "trans false":
        text = replace_line(text, "(define-fun trans ", "(define-fun trans () Bool false)")
    elif how == "safe true":
        text = replace_line(text, "(define-fun safe ", "(define-fun safe () Bool true)")
    elif how == "assert false":
        old = "(assert (and inv typed trans typed_next (not inv_next)))"
        assert old in text
        text = text.replace(old, "(assert false)")
    elif how == "empty proves":
        text = replace_line(text, "; proves: ", "; proves: ")
    elif how == "title changed":
        assert '"title": "' in text
        text = text.replace('"title": "', '"title": "Renamed: ', 1)
    elif how == "engine changed":
        assert '"timeout": 2' in text
        text = text.replace('"timeout": 2', '"timeout": 3', 1)
    elif how == "weak invariant":
        text = replace_line(text, "(define-fun inv ", "(define-fun inv () Bool true)")
        text = replace_line(text, "(define-fun inv_next ", "(define-fun inv_next () Bool true)")
    elif how == "post bit in inv":
        bit = re.search(r"\|[^|]*@post\|", text)[0]
        text = replace_line(text, "(define-fun inv ", f"(define-fun inv () Bool (or {bit} (not {bit})))")
        text = replace_line(text, "(define-fun inv_next ", f"(define-fun inv_next () Bool (or {bit} (not {bit})))")
    elif how == "smuggled command":
        body = re.search(r"^\(define-fun inv \(\) Bool (.*)\)$", text, flags=re.M)[1]
        text = replace_line(text, "(define-fun inv ",
                            f"(define-fun inv () Bool true) (assert false) (define-fun extra () Bool {body})")
    else:
        raise ValueError(how)
    return copy_as(tmp_path, text)


def renamed(tmp_path: Path) -> Path:
    """abort-race's committed certificate saved as ack-target-cleared's."""
    return copy_as(tmp_path, committed("abort-race").read_text(encoding="utf-8"))


def _is_state(ts: TransitionSystem, state: bytes):
    return z3.And(*[b if state[slot] == v else z3.Not(b)
                    for slot, vals in enumerate(ts.pre) for v, b in vals.items() if not isinstance(b, bool)])


def _closure(machine: Machine, keep) -> set[bytes]:
    seen, todo = {machine.init}, [machine.init]
    while todo:
        s = todo.pop()
        for aid, t in machine.successors(s):
            if keep(aid) and t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


TAG_CLAIM = "quiescent_holds_nothing"  # ack-target-cleared violates it at depth 8


def tag_exploit(tmp_path: Path) -> Path:
    """A certificate of ack-target-cleared "proving" :data:`TAG_CLAIM`, which it violates, with
    an invariant that mentions the action tag: ``if action = c then I_c else I_other``, where
    ``I_c`` is the states reached by action ``c`` alone and ``I_other`` those reached without
    it.  The inductive step uses one tag for both states, so each set need only be closed
    under its own actions; the violation needs ``c`` and the others together."""
    sc = builtin(SMALL)
    machine = Machine(sc.build())
    ts = TransitionSystem(sc.build())
    for st in ts.steps:
        c = st.aid
        others = _closure(machine, lambda a: a != c)
        alone = _closure(machine, lambda a: a == c)
        if not any(machine.claim_hits(TAG_CLAIM, s) for s in others | alone):
            break
    else:
        raise AssertionError("no action splits the violation")
    tag = ts.tag("pre")
    inv = z3.If(tag == c, z3.Or(*[_is_state(ts, s) for s in alone]), z3.Or(*[_is_state(ts, s) for s in others]))
    folder = tmp_path / "tag"
    return write_certificate(folder, sc, ts, inv, [TAG_CLAIM], method="lemmas")


def fresh_copy(tmp_path: Path, name: str = SMALL) -> Path:
    """An untouched copy of a committed certificate, under its own name."""
    folder = tmp_path / "fresh"
    folder.mkdir(exist_ok=True)
    return Path(shutil.copy(committed(name), folder / f"{name}.smt2"))


# -- all-sizes certificates: read back and solved through the one reader -----------------------

def invariant_of(text: str) -> tuple[str, list[str]]:
    """The invariant (one line) and the claims of an all-sizes certificate's text, as the one
    reader reads them."""
    cert = parse_certificate(text, "<text>", ALL_SIZES)
    return cert.invariant_text, [o.name[len("claim "):] for o in cert.obligations if o.name.startswith("claim ")]


def headed(system, invariant, scenario: str = "toy") -> str:
    """:func:`certificate_text` of ``invariant`` with the header the reader needs (the scenario,
    the claims it states), for a model that is no catalogue scenario's."""
    claims = [c.name for c in invariant if c.claim]
    return certificate_text(system, invariant, [f"{ALL_SIZES_MAGIC}{scenario}", "proves: " + " ".join(claims),
                                                 ALL_SIZES_HOWTO])


@dataclass
class Solved:
    """Both solvers' answers to an all-sizes certificate's obligations (through the one reader
    and :func:`run_solvers`)."""

    obligations: list[str]
    answers: dict[str, dict[str, str]]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """Every obligation answered unsat by both."""
        return not self.problems and all(set(a.values()) == {"unsat"} for a in self.answers.values())

    def failures(self) -> list[str]:
        """The problem lines."""
        return self.problems


def solve(path: Path, seconds: float = 600.0) -> Solved:
    """z3 and cvc5 on the all-sizes certificate at ``path``."""
    cert = read_certificate(path, ALL_SIZES)
    runs = run_solvers(cert, seconds)
    return Solved([o.name for o in cert.obligations], {r.solver: r.answers for r in runs},
                  cert.problems + [p for r in runs for p in r.problems])
