"""Proof certificates: an inductive invariant and its three obligations, as SMT-LIB text.

A certificate is a plain SMT-LIB 2 script that any solver can run (``z3 FILE`` prints
``unsat`` three times): the state bits are declared, ``init``, ``typed``, ``typed_next``,
``trans``, ``safe``, ``inv`` and ``inv_next`` are defined, and three obligations are asserted
one at a time::

    init & typed & not inv                       (Init => Inv)
    inv & typed & trans & typed' & not inv'      (Inv & Next => Inv')
    inv & typed & not safe                       (Inv => Safe)

Comment lines in front carry the scenario (JSON) and the invariants proved.

This module is the file format: :func:`write_certificate` writes one, :func:`read_certificate`
reads one back as *text* (:class:`Certificate`), strictly: every line must be one the writer
writes, and what deviates (an obligation that is not the standard one, a stray command, an
``inv_next`` that is not ``inv`` over the post-state) is recorded as a problem.  Nothing in a
certificate is ever built, imported or run by kvproof: the stored scenario stays JSON data.

:func:`recheck` is what ``kvproof certify`` runs, in two independent parts:

* :mod:`.cert_solvers`: the stored SMT-LIB text alone, checked by fresh solver processes
  (stock z3 and cvc5), with the invariant restricted to the pre-state bits;
* :mod:`.cert_catalogue`: the stored ``init``, ``typed``, ``trans`` and ``safe`` shown
  equivalent to today's encoding of the catalogue scenario of the same name, the stored scenario
  equal to the catalogue's, ``proves`` covering every invariant it expects verified, and the
  file named after its scenario.

A certificate checks only when both parts find nothing wrong.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import z3

from kvproof.model.files import read_user_text
from kvproof.model.scenario import Scenario
from kvproof.checker.transition import TransitionSystem

__all__ = ["write_certificate", "read_certificate", "Certificate", "CertificateError",
           "certificate_filename", "OBLIGATIONS", "DEFINITIONS", "STANDARD_ASSERTS", "TAG"]

MAGIC = "; kvproof certificate 1"
OBLIGATIONS = ("init_implies_inv", "inv_is_inductive", "inv_implies_safe")
DEFINITIONS = ("init", "typed", "typed_next", "trans", "safe", "inv", "inv_next")
STANDARD_ASSERTS = {
    "init_implies_inv": "(and init typed (not inv))",
    "inv_is_inductive": "(and inv typed trans typed_next (not inv_next))",
    "inv_implies_safe": "(and inv typed (not safe))",
}
TAG = "action@pre"  # the action tag of the step: an Int, in trans only
HOWTO = "; Run it with any SMT-LIB solver: each (check-sat) must answer unsat."
MAX_NESTING = 1000  # committed certificates nest at most 19 deep; deeper is refused, never parsed


class CertificateError(ValueError):
    """A file that is not a readable certificate (one line)."""


@dataclass
class Certificate:
    """A certificate as read: text only, nothing built from it.

    ``scenario`` is the stored scenario (JSON data), ``proves`` the invariants it claims,
    ``pre``/``post`` the declared state bits (quoted symbols, in file order), ``defs`` the body
    of each definition (one S-expression of text), and ``problems`` what deviates from the
    format the writer writes (each makes the certificate fail).
    """

    path: Path
    scenario: dict[str, Any]
    method: str
    proves: list[str]
    pre: list[str]
    post: list[str]
    defs: dict[str, str]
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The stored scenario's name."""
        return self.scenario["name"]


def certificate_filename(scenario: str) -> str:
    """``<scenario>.smt2``."""
    return f"{scenario}.smt2"


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
        HOWTO,
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


# -- reading -------------------------------------------------------------------------------------

_DECL = re.compile(r"^\(declare-const (\|[^|\\]*\||[A-Za-z_][\w@.]*) (Bool|Int)\)$")
_DEF = re.compile(r"^\(define-fun ([A-Za-z_]\w*) \(\) Bool (.*)\)$")
_BLOCK = ("(push 1)", None, "(check-sat)", "(pop 1)")


def sexpr_problem(text: str) -> str | None:
    """Why ``text`` is not exactly one SMT-LIB S-expression (or atom) of at most
    :data:`MAX_NESTING` levels, on one line, without comments or strings; ``None`` if it is.

    This keeps a stored definition from closing its own ``define-fun`` and smuggling commands
    in (``true) (assert false``) when the definitions are put into another script."""
    if not text or text != text.strip():
        return "empty or padded"
    if any(c in text for c in "\n\r;\"\\"):
        return "contains a line break, a comment, a string or a backslash"
    depth, quoted, closed = 0, False, False
    for i, c in enumerate(text):
        if quoted:
            quoted = c != "|"
            continue
        if closed and not c.isspace():
            return f"text after the end at column {i + 1}"
        if c == "|":
            quoted = True
        elif c == "(":
            depth += 1
            if depth > MAX_NESTING:
                return f"nested more than {MAX_NESTING} deep"
        elif c == ")":
            depth -= 1
            if depth < 0:
                return f"unbalanced ')' at column {i + 1}"
            closed = depth == 0
        elif depth == 0 and c.isspace():
            return f"more than one term (space at column {i + 1})"
    if quoted:
        return "an unterminated |quoted| symbol"
    if depth:
        return "unbalanced '('"
    return None


def _text(path: Path) -> str:
    text = read_user_text(path, CertificateError, "a kvproof certificate")
    if "\x00" in text:
        raise CertificateError(f"{path}: not a kvproof certificate (a binary file: it contains NUL bytes)")
    if not text.startswith(MAGIC + "\n"):
        raise CertificateError(f"{path}: not a kvproof certificate (first line is not {MAGIC!r})")
    return text


def read_certificate(path: str | Path) -> Certificate:
    """Read a certificate as text; :class:`CertificateError` (one line) if it cannot be read as
    one at all (not UTF-8, binary, not a certificate, a part missing).  Deviations from the
    writer's format are collected in :attr:`Certificate.problems`."""
    path = Path(path)
    lines = _text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    problems: list[str] = []
    stray: list[str] = []  # lines the writer never writes: the first is named, the others counted
    meta: dict[str, str] = {}
    pre: list[str] = []
    post: list[str] = []
    tags: list[str] = []
    defs: dict[str, str] = {}
    blocks: dict[str, list[str]] = {}
    k = 1
    while k < len(lines) and lines[k].startswith(";") and not lines[k].startswith("; obligation: "):
        line = lines[k]
        key, sep, value = line[2:].partition(": ")
        if line == HOWTO:
            pass
        elif line.startswith("; ") and sep and key in ("scenario", "method", "proves"):
            if key in meta:
                problems.append(f"line {k + 1}: a second '; {key}:' line")
            meta[key] = value
        elif line.rstrip() in ("; proves:", "; method:"):  # an empty list
            meta.setdefault(line[2:].rstrip()[:-1], "")
        else:
            stray.append(f"line {k + 1}: not part of a kvproof certificate: {_clip(line)}")
        k += 1
    if k < len(lines) and lines[k] == "(set-logic ALL)":
        k += 1
    else:
        problems.append(f"line {k + 1}: the script does not start with (set-logic ALL)")
    if "scenario" not in meta:
        raise CertificateError(f"{path}: a part is missing: no '; scenario:' line")
    if "proves" not in meta:
        raise CertificateError(f"{path}: a part is missing: no '; proves:' line")
    try:
        scenario = json.loads(meta["scenario"])
    except (json.JSONDecodeError, RecursionError) as e:
        raise CertificateError(f"{path}: the scenario line is not JSON: {str(e)[:80]}") from None
    if not isinstance(scenario, dict) or not isinstance(scenario.get("name"), str) or not scenario["name"]:
        raise CertificateError(f"{path}: the scenario line is not a scenario with a name")
    order: list[str] = []
    while k < len(lines):
        line, at = lines[k], k + 1
        if line.startswith("; obligation: "):
            name = line[len("; obligation: "):]
            got = lines[k + 1:k + 5]
            if name not in OBLIGATIONS or len(got) < 4 or any(want is not None and g != want
                                                              for g, want in zip(got, _BLOCK)):
                problems.append(f"line {at}: obligation {_clip(name)} is not a push/assert/check-sat/pop block")
                k += 1
                continue
            if name in blocks:
                problems.append(f"line {at}: obligation {name} a second time")
            blocks[name] = got
            order.append(name)
            k += 5
            continue
        k += 1
        m = _DECL.match(line)
        if m and not defs and not blocks:
            sym, sort = m.groups()
            if sort == "Bool" and sym.endswith("@pre|"):
                pre.append(sym)
            elif sort == "Bool" and sym.endswith("@post|"):
                post.append(sym)
            elif sym == TAG and sort == "Int":
                tags.append(sym)
            else:
                stray.append(f"line {at}: declares {_clip(sym)} {sort}, which is no state bit nor the action tag")
            continue
        m = _DEF.match(line)
        if m and not blocks:
            name, body = m.groups()
            if name not in DEFINITIONS:
                problems.append(f"line {at}: defines {name}, which is not part of a certificate")
            elif name in defs:
                problems.append(f"line {at}: defines {name} a second time")
            else:
                why = sexpr_problem(body)
                if why:
                    problems.append(f"line {at}: the definition of {name} is not one S-expression ({why})")
                defs[name] = body
            continue
        stray.append(f"line {at}: not part of a kvproof certificate: {_clip(line)}")
    if stray:
        problems.append(stray[0] + (f" (and {len(stray) - 1} more such lines)" if len(stray) > 1 else ""))
    missing = [n for n in DEFINITIONS if n not in defs]
    if missing:
        raise CertificateError(f"{path}: a part is missing: no definition of {', '.join(missing)}")
    missing = [n for n in OBLIGATIONS if n not in blocks]
    if missing:
        raise CertificateError(f"{path}: a part is missing: no obligation {', '.join(missing)}")
    if order != list(OBLIGATIONS):
        problems.append(f"the obligations are not in the order {', '.join(OBLIGATIONS)}")
    for name in OBLIGATIONS:
        if blocks[name][1] != f"(assert {STANDARD_ASSERTS[name]})":
            problems.append(f"obligation {name} is not the standard one: {_clip(blocks[name][1])}")
    if len(tags) != 1:
        problems.append(f"the action tag {TAG} (Int) is declared {len(tags)} times, not once")
    if not pre:
        problems.append("declares no pre-state bit")
    twins = [p[:-len("@pre|")] + "@post|" for p in pre]
    if len(set(pre)) != len(pre) or len(set(post)) != len(post):
        problems.append("declares a state bit twice")
    if twins != post:
        odd = sorted(set(twins) ^ set(post))
        problems.append("the post-state bits are not the pre-state bits renamed"
                        + (f" (first: {_clip(odd[0])})" if odd else " (order differs)"))
    for copy, orig in (("typed_next", "typed"), ("inv_next", "inv")):
        if defs[copy] != defs[orig].replace("@pre|", "@post|"):
            problems.append(f"{copy} is not {orig} over the post-state bits")
    proves = meta["proves"].split()
    if not proves:
        problems.append("'; proves:' names no invariant")
    return Certificate(path, scenario, meta.get("method", ""), proves, pre, post, defs, problems)


def _clip(text: str, n: int = 60) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= n else text[:n] + "..."
