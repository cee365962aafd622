"""The one certificate reader: a file read into terms and held to the structure kvproof writes.

Both kinds of certificate are SMT-LIB scripts with a comment header, read the same way:

1. the text (UTF-8, no NUL byte) is parsed into commands and whole-line comments by
   :func:`~.sexpr.parse_script`, within its stated limits;
2. the header (the comments before the first command) must be the writer's: the magic first
   line, then only the keys the kind has, each as often as the writer writes it;
3. the commands must be ``(set-logic ALL)``, then the *prelude* (declarations and definitions of
   the kinds the writer writes), then one *obligation* per ``; obligation`` comment: ``(push 1)``,
   declarations, definitions and assertions, one ``(check-sat)``, ``(pop 1)``.  Nothing else: no
   other command (``echo``, ``exit``, ``set-option``, ``include``, a second ``check-sat`` …), no
   command between two obligations, no comment inside one.

Anything else is bad input: :class:`CertificateError`, one line naming the file, the line and
what is wrong (``kvproof certify`` exits 3).  A file that has the structure is a
:class:`Certificate` of terms; what its terms *mean* (a definition that is not today's
encoding, an obligation that is not the standard one, an invariant over the post-state) is
checked by the kind's own checks and listed in :attr:`Certificate.problems` (exit 1).  Nothing
in a certificate is ever built, imported or run by kvproof: the stored scenario stays JSON data,
and the solvers are given a script rebuilt from the parsed terms, never the file's text.

The two kinds:

* **fixed-size** (``<scenario>.smt2``, from ``prove``): first line ``; kvproof certificate 1``;
  header keys ``scenario`` (JSON), ``method``, ``proves``; a prelude of ``declare-const`` (the
  state bits, ``Bool``, and the action tag, ``Int``) and ``define-fun NAME () Bool TERM`` for
  the seven definitions; three obligations named ``; obligation: NAME``, one assertion each.
* **all-sizes** (``<scenario>.allsizes.smt2``, from ``prove --all-sizes``): first line
  ``; kvproof all-sizes certificate: scenario NAME``; header keys ``proves``, ``fixed``,
  ``abstraction``; a prelude of ``declare-sort``, ``declare-datatypes`` and ``declare-fun``;
  obligations ``; obligation init``, ``; obligation step ACTION`` and ``; obligation claim
  CLAIM``.  The invariant is the term of the Init obligation's last assertion, ``(not INV)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvproof.checker.certs.sexpr import Command, Comment, SexprError, free_symbols, parse_script, render
from kvproof.model.files import read_user_text

__all__ = ["Certificate", "CertificateError", "Obligation", "read_certificate", "parse_certificate",
           "FIXED", "ALL_SIZES", "FIXED_MAGIC", "ALL_SIZES_MAGIC", "ALL_SIZES_SUFFIX", "FIXED_OBLIGATIONS",
           "DEFINITIONS", "STANDARD_ASSERTS", "TAG", "FIXED_HOWTO", "ALL_SIZES_HOWTO", "SMT_BUILTINS"]

FIXED, ALL_SIZES = "fixed-size", "all-sizes"
FIXED_MAGIC = "kvproof certificate 1"
ALL_SIZES_MAGIC = "kvproof all-sizes certificate: scenario "
ALL_SIZES_SUFFIX = ".allsizes.smt2"
FIXED_HOWTO = "Run it with any SMT-LIB solver: each (check-sat) must answer unsat."
ALL_SIZES_HOWTO = "every (check-sat) below must answer unsat"
FIXED_OBLIGATIONS = ("init_implies_inv", "inv_is_inductive", "inv_implies_safe")
DEFINITIONS = ("init", "typed", "typed_next", "trans", "safe", "inv", "inv_next")
STANDARD_ASSERTS = {
    "init_implies_inv": "(and init typed (not inv))",
    "inv_is_inductive": "(and inv typed trans typed_next (not inv_next))",
    "inv_implies_safe": "(and inv typed (not safe))",
}
TAG = "action@pre"  # the fixed-size action tag: an Int, in trans only
SMT_BUILTINS = frozenset({"true", "false", "and", "or", "not", "=>", "=", "distinct", "ite", "xor", "+", "-",
                          "*", "<=", "<", ">=", ">", "div", "mod", "abs", "_", "is", "Bool", "Int"})
"""The SMT-LIB symbols a term may use without declaring them (core and integer theories)."""


class CertificateError(ValueError):
    """A file that is not a readable certificate (one line naming the file and the problem)."""


@dataclass(frozen=True)
class Obligation:
    """One obligation: its name (``inv_is_inductive``; ``step prefill_forward``), the line of
    its comment, and the commands between its ``(push 1)`` and its ``(check-sat)``."""

    name: str
    line: int
    body: tuple[tuple, ...]


@dataclass
class Certificate:
    """A certificate as read: terms and data, nothing built from them.

    ``kind`` is :data:`FIXED` or :data:`ALL_SIZES`; ``scenario_name`` the scenario it is of;
    ``proves`` the claims it states; ``header`` every header key's values in file order;
    ``prelude`` the commands between ``(set-logic ALL)`` and the first obligation;
    ``obligations`` in file order; ``problems`` what its terms fail of the kind's own checks
    (each makes the certificate fail).  Fixed-size only: ``scenario`` (the stored scenario, JSON
    data), ``method``, ``pre``/``post`` (the declared state bits), ``defs`` (each definition's
    term).  All-sizes only: ``invariant`` (the term of ``(not INV)`` in the Init obligation).
    """

    path: Path
    kind: str
    scenario_name: str
    proves: list[str]
    header: dict[str, list[str]]
    prelude: tuple[tuple, ...]
    obligations: list[Obligation]
    problems: list[str] = field(default_factory=list)
    scenario: dict[str, Any] | None = None
    method: str = ""
    pre: list[str] = field(default_factory=list)
    post: list[str] = field(default_factory=list)
    defs: dict[str, Any] = field(default_factory=dict)
    invariant: Any = None

    @property
    def name(self) -> str:
        """The stored scenario's name."""
        return self.scenario_name

    def text_of(self, definition: str) -> str:
        """A fixed-size definition's term as one line of SMT-LIB text."""
        return render(self.defs[definition])

    @property
    def invariant_text(self) -> str:
        """The invariant as one line of SMT-LIB text (all-sizes: the Init obligation's;
        fixed-size: ``inv``'s definition)."""
        return render(self.invariant if self.kind == ALL_SIZES else self.defs["inv"])


def read_certificate(path: str | Path, kind: str | None = None) -> Certificate:
    """Read the certificate at ``path`` (of ``kind`` when given, else the kind its first line
    names); :class:`CertificateError` (one line) when it is not one."""
    path = Path(path)
    text = read_user_text(path, CertificateError, "a kvproof certificate")
    return parse_certificate(text, path, kind)


def parse_certificate(text: str, path: str | Path = "<text>", kind: str | None = None) -> Certificate:
    """:func:`read_certificate` of text already read (``path`` names it in messages)."""
    path = Path(path)

    def bad(why: str) -> CertificateError:
        return CertificateError(f"{path}: {why}")

    if "\x00" in text:
        raise bad("not a kvproof certificate (a binary file: it contains NUL bytes)")
    first = text.split("\n", 1)[0]
    found = FIXED if first == "; " + FIXED_MAGIC else ALL_SIZES if first.startswith("; " + ALL_SIZES_MAGIC) else None
    if found is None or (kind is not None and found != kind):
        want = {FIXED: f"'; {FIXED_MAGIC}'", ALL_SIZES: f"'; {ALL_SIZES_MAGIC}NAME'"}
        wanted = want[kind] if kind else f"{want[FIXED]} or {want[ALL_SIZES]}"
        raise bad(f"not a kvproof certificate (its first line is not {wanted})")
    try:
        items = parse_script(text)
    except SexprError as e:
        raise bad(str(e)) from None
    k = 0
    header: list[Comment] = []
    while k < len(items) and isinstance(items[k], Comment):
        header.append(items[k])
        k += 1
    body = items[k:]
    if found == FIXED:
        return _fixed(path, header, body, bad)
    return _all_sizes(path, header, body, bad)


# -- the structure both kinds share ----------------------------------------------------------------

def _header(header: list[Comment], keys: dict[str, str], bad) -> dict[str, list[str]]:
    """The header's values per key.  ``keys`` maps each key to ``"once"`` or ``"many"``; the
    magic line and the how-to line (``key`` ``""``) are given as their whole text."""
    out: dict[str, list[str]] = {}
    for c in header[1:]:
        if c.text in keys and keys[c.text] == "text":
            if c.text in out:
                raise bad(f"line {c.line}: a second {c.text!r} line")
            out[c.text] = []
            continue
        key, sep, value = c.text.partition(":")
        if not sep or key not in keys or keys[key] == "text":
            raise bad(f"line {c.line}: a comment that is not part of a kvproof certificate: {_clip(c.text)}")
        if keys[key] == "once" and key in out:
            raise bad(f"line {c.line}: a second '; {key}:' line")
        out.setdefault(key, []).append(value[1:] if value.startswith(" ") else value)
    return out


def _blocks(body: list, comment_prefix: str, bad) -> tuple[tuple[tuple, ...], list[Obligation]]:
    """``(set-logic ALL)``, the prelude, then the obligation blocks, each ``; <prefix>NAME``,
    ``(push 1)``, its body, ``(check-sat)``, ``(pop 1)``."""
    if not body or not isinstance(body[0], Command) or body[0].term != ("set-logic", "ALL"):
        line = body[0].line if body else "end"
        raise bad(f"line {line}: the script does not start with (set-logic ALL)")
    k = 1
    prelude: list[tuple] = []
    while k < len(body) and isinstance(body[k], Command):
        prelude.append(body[k])
        k += 1
    obligations: list[Obligation] = []
    while k < len(body):
        c = body[k]
        if isinstance(c, Command):
            raise bad(f"line {c.line}: {_clip(render(c.term), 50)} between obligations: kvproof writes no command "
                      "outside an obligation after the first")
        if not c.text.startswith(comment_prefix):
            raise bad(f"line {c.line}: a comment that is not part of a kvproof certificate: {_clip(c.text)}")
        name = c.text[len(comment_prefix):]
        k += 1
        if k >= len(body) or not isinstance(body[k], Command) or body[k].term != ("push", "1"):
            raise bad(f"line {c.line}: obligation {_clip(name)} is not followed by (push 1)")
        k += 1
        inner: list[tuple] = []
        while k < len(body) and isinstance(body[k], Command) and body[k].term != ("check-sat",):
            if body[k].term in (("pop", "1"), ("push", "1")):
                raise bad(f"line {body[k].line}: obligation {_clip(name)} has {render(body[k].term)} "
                          "before its (check-sat)")
            inner.append(body[k])
            k += 1
        if k >= len(body) or not isinstance(body[k], Command):
            line = body[k].line if k < len(body) else "end"
            raise bad(f"line {line}: obligation {_clip(name)} has no (check-sat)")
        k += 1
        if k >= len(body) or not isinstance(body[k], Command) or body[k].term != ("pop", "1"):
            line = body[k].line if k < len(body) else "end"
            raise bad(f"line {line}: obligation {_clip(name)} does not end with (pop 1) after its one (check-sat)")
        k += 1
        obligations.append(Obligation(name, c.line, tuple(inner)))  # type: ignore[arg-type]
    return tuple(prelude), obligations  # type: ignore[return-value]


def _command_problem(cmd: Command, allowed: dict[str, Any], where: str) -> str | None:
    """Why ``cmd`` is not one of the ``allowed`` shapes (head -> a predicate on the term)."""
    check = allowed.get(cmd.head)
    if check is None:
        return f"line {cmd.line}: {_clip(render(cmd.term), 50)} {where}: kvproof writes no {cmd.head or 'such'} command there"
    if not check(cmd.term):
        return f"line {cmd.line}: a {cmd.head} command of a shape kvproof never writes: {_clip(render(cmd.term), 50)}"
    return None


def _is_symbol(t: Any) -> bool:
    return isinstance(t, str) and not t[0].isdigit()


# -- fixed-size --------------------------------------------------------------------------------------

_FIXED_PRELUDE = {
    "declare-const": lambda t: len(t) == 3 and _is_symbol(t[1]) and t[2] in ("Bool", "Int"),
    "define-fun": lambda t: len(t) == 5 and _is_symbol(t[1]) and t[2] == () and t[3] == "Bool",
}
_FIXED_BODY = {"assert": lambda t: len(t) == 2}


def _fixed(path: Path, header: list[Comment], body: list, bad) -> Certificate:
    meta = _header(header, {"scenario": "once", "method": "once", "proves": "once", FIXED_HOWTO: "text"}, bad)
    for key in ("scenario", "proves"):
        if key not in meta:
            raise bad(f"a part is missing: no '; {key}:' line")
    try:
        scenario = json.loads(meta["scenario"][0])
    except (json.JSONDecodeError, RecursionError) as e:
        raise bad(f"the scenario line is not JSON: {str(e)[:80]}") from None
    if not isinstance(scenario, dict) or not isinstance(scenario.get("name"), str) or not scenario["name"]:
        raise bad("the scenario line is not a scenario with a name")
    prelude, obligations = _blocks(body, "obligation: ", bad)
    problems: list[str] = []
    pre: list[str] = []
    post: list[str] = []
    tags = 0
    defs: dict[str, Any] = {}
    for cmd in prelude:
        why = _command_problem(cmd, _FIXED_PRELUDE, "before the obligations")
        if why:
            raise bad(why)
        _, sym, *rest = cmd.term
        if cmd.head == "declare-const":
            if defs:
                raise bad(f"line {cmd.line}: declares {_clip(sym)} after a definition")
            if rest[0] == "Bool" and sym.endswith("@pre|"):
                pre.append(sym)
            elif rest[0] == "Bool" and sym.endswith("@post|"):
                post.append(sym)
            elif sym == TAG and rest[0] == "Int":
                tags += 1
            else:
                raise bad(f"line {cmd.line}: declares {_clip(sym)} {rest[0]}, which is no state bit nor the action tag")
        else:
            if sym not in DEFINITIONS:
                raise bad(f"line {cmd.line}: defines {_clip(sym)}, which is not part of a certificate")
            if sym in defs:
                raise bad(f"line {cmd.line}: defines {sym} a second time")
            defs[sym] = rest[2]
    missing = [n for n in DEFINITIONS if n not in defs]
    if missing:
        raise bad(f"a part is missing: no definition of {', '.join(missing)}")
    names = [o.name for o in obligations]
    for o in obligations:
        if o.name not in FIXED_OBLIGATIONS:
            raise bad(f"line {o.line}: no obligation is named {_clip(o.name)}")
        if names.count(o.name) > 1:
            raise bad(f"line {o.line}: obligation {o.name} a second time")
        if len(o.body) != 1:
            raise bad(f"line {o.line}: obligation {o.name} has {len(o.body)} commands, not one (assert ...)")
        why = _command_problem(o.body[0], _FIXED_BODY, f"in obligation {o.name}")  # type: ignore[arg-type]
        if why:
            raise bad(why)
    missing = [n for n in FIXED_OBLIGATIONS if n not in names]
    if missing:
        raise bad(f"a part is missing: no obligation {', '.join(missing)}")
    obligations = [Obligation(o.name, o.line, tuple(c.term for c in o.body)) for o in obligations]  # type: ignore[union-attr]
    # what the terms must satisfy (each a problem: the certificate fails, exit 1)
    if names != list(FIXED_OBLIGATIONS):
        problems.append(f"the obligations are not in the order {', '.join(FIXED_OBLIGATIONS)}")
    for o in obligations:
        if render(o.body[0]) != f"(assert {STANDARD_ASSERTS[o.name]})":
            problems.append(f"obligation {o.name} is not the standard one: {_clip(render(o.body[0]))}")
    if tags != 1:
        problems.append(f"the action tag {TAG} (Int) is declared {tags} times, not once")
    if not pre:
        problems.append("declares no pre-state bit")
    if len(set(pre)) != len(pre) or len(set(post)) != len(post):
        problems.append("declares a state bit twice")
    twins = [p[:-len("@pre|")] + "@post|" for p in pre]
    if twins != post:
        odd = sorted(set(twins) ^ set(post))
        problems.append("the post-state bits are not the pre-state bits renamed"
                        + (f" (first: {_clip(odd[0])})" if odd else " (order differs)"))
    for copy, orig in (("typed_next", "typed"), ("inv_next", "inv")):
        if render(defs[copy]) != render(defs[orig]).replace("@pre|", "@post|"):
            problems.append(f"{copy} is not {orig} over the post-state bits")
    proves = meta["proves"][0].split()
    if not proves:
        problems.append("'; proves:' names no invariant")
    method = (meta.get("method") or [""])[0]
    return Certificate(path, FIXED, scenario["name"], proves, meta, tuple(c.term for c in prelude),  # type: ignore[union-attr]
                       obligations, problems, scenario=scenario, method=method, pre=pre, post=post, defs=defs)


# -- all sizes ---------------------------------------------------------------------------------------

_ALL_SIZES_PRELUDE = {
    "declare-sort": lambda t: len(t) == 3 and _is_symbol(t[1]) and t[2] == "0",
    "declare-datatypes": lambda t: (len(t) == 3 and isinstance(t[1], tuple) and isinstance(t[2], tuple)
                                    and len(t[1]) == len(t[2]) == 1 and isinstance(t[1][0], tuple)
                                    and len(t[1][0]) == 2 and _is_symbol(t[1][0][0]) and t[1][0][1] == "0"
                                    and isinstance(t[2][0], tuple) and len(t[2][0]) > 0
                                    and all(isinstance(c, tuple) and len(c) == 1 and _is_symbol(c[0]) for c in t[2][0])),
    "declare-fun": lambda t: (len(t) == 4 and _is_symbol(t[1]) and isinstance(t[2], tuple)
                              and all(_is_symbol(a) for a in t[2]) and _is_symbol(t[3])),
}
_ALL_SIZES_BODY = {
    "declare-fun": _ALL_SIZES_PRELUDE["declare-fun"],
    "define-fun": lambda t: (len(t) == 5 and _is_symbol(t[1]) and isinstance(t[2], tuple)
                             and all(isinstance(p, tuple) and len(p) == 2 and _is_symbol(p[0]) and _is_symbol(p[1])
                                     for p in t[2]) and _is_symbol(t[3])),
    "assert": lambda t: len(t) == 2,
}


def _all_sizes(path: Path, header: list[Comment], body: list, bad) -> Certificate:
    name = header[0].text[len(ALL_SIZES_MAGIC):].strip()
    if not name or any(c.isspace() for c in name):
        raise bad("the first line names no scenario")
    meta = _header(header, {"proves": "once", "fixed": "many", "abstraction": "many", ALL_SIZES_HOWTO: "text"}, bad)
    if "proves" not in meta:
        raise bad("a part is missing: no '; proves:' line")
    prelude, obligations = _blocks(body, "obligation ", bad)
    for cmd in prelude:
        why = _command_problem(cmd, _ALL_SIZES_PRELUDE, "before the obligations")
        if why:
            raise bad(why)
    seen: set[str] = set()
    for o in obligations:
        kind, _, what = o.name.partition(" ")
        if not (o.name == "init" or (kind in ("step", "claim") and what and " " not in what)):
            raise bad(f"line {o.line}: no obligation is named {_clip(o.name)} (init, step ACTION or claim CLAIM)")
        if o.name in seen:
            raise bad(f"line {o.line}: obligation {_clip(o.name)} a second time")
        seen.add(o.name)
        if not any(c.head == "assert" for c in o.body):  # type: ignore[union-attr]
            raise bad(f"line {o.line}: obligation {_clip(o.name)} asserts nothing")
        for c in o.body:
            why = _command_problem(c, _ALL_SIZES_BODY, f"in obligation {_clip(o.name)}")  # type: ignore[arg-type]
            if why:
                raise bad(why)
    if not obligations or obligations[0].name != "init":
        raise bad("a part is missing: the first obligation is not 'init'")
    last = obligations[0].body[-1].term  # type: ignore[union-attr]
    if not (last[0] == "assert" and isinstance(last[1], tuple) and len(last[1]) == 2 and last[1][0] == "not"):
        raise bad(f"line {obligations[0].line}: the Init obligation does not end with (assert (not Inv))")
    invariant = last[1][1]
    obligations = [Obligation(o.name, o.line, tuple(c.term for c in o.body)) for o in obligations]  # type: ignore[union-attr]
    prelude_terms = tuple(c.term for c in prelude)  # type: ignore[union-attr]
    problems: list[str] = []
    declared = set(SMT_BUILTINS)
    for t in prelude_terms:
        if t[0] == "declare-datatypes":
            declared |= {c[0] for c in t[2][0]} | {t[1][0][0]}
        else:
            declared.add(t[1])
    stray = sorted(free_symbols(invariant) - declared)
    if stray:
        problems.append(f"the invariant mentions {', '.join(_clip(s, 30) for s in stray[:3])}"
                        + (f" and {len(stray) - 3} more" if len(stray) > 3 else "")
                        + ": an invariant may mention only the sorts, constructors and state symbols declared "
                          "before the obligations")
    proves = meta["proves"][0].split()
    if not proves:
        problems.append("'; proves:' names no claim")
    claims = [o.name[len("claim "):] for o in obligations if o.name.startswith("claim ")]
    if sorted(claims) != sorted(proves):
        problems.append(f"'; proves:' names {' '.join(proves) or 'nothing'}, but the claim obligations are "
                        f"{' '.join(claims) or 'none'}")
    return Certificate(path, ALL_SIZES, name, proves, meta, prelude_terms, obligations, problems, invariant=invariant)


def _clip(text: str, n: int = 60) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= n else text[:n] + "..."
