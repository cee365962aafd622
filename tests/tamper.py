"""Forged and tampered certificates of both kinds, generated from the committed ones.

:func:`forgeries` returns every :class:`Forgery`: the file's bytes, the name it is saved under,
and what must happen to it: ``bad input`` (the one reader refuses it: ``certify`` exits 3) or
``fails`` (it reads, and a check fails: exit 1), with a piece of the line that says why; or
``same`` with the reason it still proves the same thing.  The families:

* **smuggled commands**: every SMT-LIB command kvproof never writes, and each solver's own
  extensions (z3's ``check-sat-using``, ``assert-soft``, ``eval``, ``include``, fixedpoint
  rules; cvc5's ``block-model``, ``get-abduct``, ``synth-fun`` …), put in front of the
  obligations, inside one, between two, at the end, and on the line of a definition that closes
  itself (``true) (assert false) …``), in a fixed-size and an all-sizes certificate;
* **the all-sizes forgery** whose invariant closes its own assertion, runs commands once per
  obligation, exits, and then nests 300,000 deep (and the same without the deep term);
* **malformed text**: unbalanced, too deep, too large, not UTF-8, NUL bytes, strings, keywords,
  literals kvproof never writes, comments where kvproof writes none;
* **swapped claims** and **relabelled scenarios**: a claim added, dropped or renamed in
  ``proves``, a claim the scenario violates, a certificate saved under another scenario's name,
  a scenario field changed;
* **weakened content**: a definition replaced (``trans false``, ``safe true``, ``inv true`` …),
  an obligation changed or reordered, an abstraction line, a guard, an update, Init or a claim's
  formula of an all-sizes certificate changed, an obligation dropped, an invariant that names a
  post-state symbol or a state symbol in quotes (``|p_phase|``, which the rename to the
  post-state would miss).

``python -m tests.tamper DIR`` writes them all to ``DIR`` (one folder each, the file under its
name) for trying ``kvproof certify`` by hand.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PROOFS = Path(__file__).resolve().parent.parent / "traces" / "proofs"
FIXED = "ack-target-cleared"  # the smallest committed fixed-size certificate (26 reachable states)
ALL_SIZES = "vllm-pull-abort-32255"  # the smaller committed all-sizes certificate
ALL_SIZES_SGLANG = "v0.5.22"

# Commands kvproof never writes (each also a solver's own extension where marked).
SMUGGLED = [
    "(assert false)", "(check-sat)", "(exit)", "(reset)", "(reset-assertions)", "(push 1)", "(pop 1)",
    "(get-model)", "(get-assertions)", "(get-info :version)", "(set-info :status unsat)",
    "(set-option :print-success true)", '(echo "unsat")', "(declare-const extra Bool)",
    "(define-fun extra () Bool false)", "(define-fun-rec loop ((x Int)) Int (loop x))",
    "(define-sort S () Int)", "(declare-datatype D ((d)))", "(check-sat-assuming (false))",
    "(set-logic QF_LIA)", "(get-value (true))", "(get-unsat-core)",
    # z3
    "(check-sat-using smt)", "(assert-soft false)", "(maximize 0)", "(eval true)", "(simplify true)",
    '(include "other.smt2")', "(declare-rel r ())", "(rule r)", "(query r)", "(define-const k Bool false)",
    # cvc5
    "(block-model :literals)", "(get-abduct a false)", "(get-interpolant i false)", "(synth-fun f () Bool)",
    "(check-synth)", "(declare-pool p Int ())", "(get-qe false)", "(declare-heap (Int Int))",
]


@dataclass(frozen=True)
class Forgery:
    """One forged file: ``name`` (unique), the ``data`` to save as ``filename``, the expected
    ``outcome`` (``bad input``, ``fails`` or ``same``) and ``expect``: a piece of the error or
    problem line (``bad input``, ``fails``) or why it proves the same thing (``same``)."""

    name: str
    filename: str
    data: bytes
    outcome: str
    expect: str


@lru_cache(maxsize=None)
def committed(scenario: str, suffix: str = ".smt2") -> str:
    """The committed certificate's text."""
    return (PROOFS / f"{scenario}{suffix}").read_text(encoding="utf-8")


def _replace_line(text: str, prefix: str, new: str) -> str:
    out = re.sub(rf"^{re.escape(prefix)}.*$", lambda _: new, text, count=1, flags=re.M)
    assert out != text, prefix
    return out


def _line_of(text: str, prefix: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(prefix))


def _insert_before(text: str, marker: str, new: str) -> str:
    k = text.index(marker)
    return text[:k] + new + "\n" + text[k:]


def _fixed_smuggled() -> list[Forgery]:
    text = committed(FIXED)
    name = f"{FIXED}.smt2"
    inv = _line_of(text, "(define-fun inv ")
    out = []
    for cmd in SMUGGLED:
        places = {
            "after set-logic": text.replace("(set-logic ALL)\n", f"(set-logic ALL)\n{cmd}\n", 1),
            "before the obligations": _insert_before(text, "; obligation: init_implies_inv", cmd),
            "inside an obligation": text.replace("(assert (and inv typed (not safe)))\n",
                                                 f"(assert (and inv typed (not safe)))\n{cmd}\n", 1),
            "between obligations": _insert_before(text, "; obligation: inv_implies_safe", cmd),
            "at the end": text + cmd + "\n",
            "closing a definition": text.replace(inv, f"(define-fun inv () Bool true) {cmd} (define-fun extra () Bool"
                                                      f"{inv[len('(define-fun inv () Bool'):]}", 1),
        }
        for where, forged in places.items():
            assert forged != text, (cmd, where)
            out.append(Forgery(f"fixed: {cmd} {where}", name, forged.encode(), "bad input", "line "))
    return out


def _all_sizes_smuggled() -> list[Forgery]:
    text = committed(ALL_SIZES, ".allsizes.smt2")
    name = f"{ALL_SIZES}.allsizes.smt2"
    step = _line_of(text, "; obligation step ")
    out = []
    for cmd in SMUGGLED:
        places = {
            "in the declarations": text.replace("(set-logic ALL)\n", f"(set-logic ALL)\n{cmd}\n", 1),
            "inside Init": text.replace("; obligation init\n(push 1)\n", f"; obligation init\n(push 1)\n{cmd}\n", 1),
            "inside a step": text.replace(f"{step}\n(push 1)\n", f"{step}\n(push 1)\n{cmd}\n", 1),
        }
        if cmd in SMUGGLED[:8]:  # after the last obligation: as between two (the fixed-size ones try every command)
            places["at the end"] = text + cmd + "\n"
        for where, forged in places.items():
            assert forged != text, (cmd, where)
            if where.startswith("inside") and cmd.split()[0] in ("(assert", "(define-fun"):
                # an obligation of this kind holds assertions and definitions: one more is
                # no structure kvproof refuses to read, but it is not today's model's
                out.append(Forgery(f"all sizes: {cmd} {where}", name, forged.encode(), "fails",
                                   "differs from the lifted model"))
                continue
            out.append(Forgery(f"all sizes: {cmd} {where}", name, forged.encode(), "bad input", "line "))
    return out


def _invariant_text(text: str) -> str:
    lines = text.splitlines()
    k = lines.index("; obligation init")
    neg = next(ln for ln in lines[k:] if ln.startswith("(assert (not "))
    return neg[len("(assert (not "):-2]


def _the_forgery(scenario: str, deep: int) -> bytes:
    """The invariant line closes its own assertion, asserts false and checks once per obligation,
    exits, then (with ``deep``) opens a term ``deep`` levels deep."""
    text = committed(scenario, ".allsizes.smt2")
    n = text.count("(check-sat)")
    evil = "true)) " + "(assert false) (check-sat) " * n + "(exit) " + "(" * deep + "x" + ")" * deep + " ((true"
    return text.replace(_invariant_text(text), evil).encode()


def _forgeries_of_the_report() -> list[Forgery]:
    out = []
    for sc in (ALL_SIZES, ALL_SIZES_SGLANG):
        for deep in (300_000, 0):
            out.append(Forgery(f"all sizes {sc}: the invariant runs commands, exits" + (", then nests" if deep else ""),
                               f"{sc}.allsizes.smt2", _the_forgery(sc, deep), "bad input",
                               "nested more than 256 deep" if deep else "line "))
    return out


def _malformed() -> list[Forgery]:
    fixed, name = committed(FIXED), f"{FIXED}.smt2"
    allsz, aname = committed(ALL_SIZES, ".allsizes.smt2"), f"{ALL_SIZES}.allsizes.smt2"
    inv = _line_of(fixed, "(define-fun inv ")
    cases = []
    for kind, text, fname, anchor in (("fixed", fixed, name, inv), ("all sizes", allsz, aname, "(check-sat)\n(pop 1)\n")):
        forged = {
            "an unbalanced '('": text + "(assert (and true\n",
            "an unbalanced ')'": text.replace(anchor, anchor.rstrip("\n") + ")" + ("\n" if anchor.endswith("\n") else ""), 1),
            "a term 257 deep": text + "(assert " + "(not " * 256 + "true" + ")" * 257 + "\n",
            "a term 300,000 deep": text + "(assert " + "(" * 300_000 + ")" * 300_000 + ")\n",
            "a string literal": text + '(echo "kvproof obligation 0")\n',
            "a keyword": text.replace("(check-sat)", "(check-sat :x)", 1),
            "a hex literal": text + "(assert (= #x01 #x01))\n",
            "a decimal literal": text + "(assert (= 1.0 1.0))\n",
            "a comment inside a command": text.replace("(check-sat)", "(check-sat ; c\n)", 1),
            "a comment after a command": text.replace("(check-sat)", "(check-sat) ; unsat", 1),
            "a stray comment": text.replace("(check-sat)", "; unsat\n(check-sat)", 1),
            "a second header line": text.replace("\n", "\n; proves: nothing\n", 1),
            "a backslash in a quoted symbol": text + "(assert |a\\b|)\n",
            "a multi-line quoted symbol": text + "(assert |a\nb|)\n",
            "a bare symbol": text + "unsat\n",
            "no set-logic": text.replace("(set-logic ALL)\n", "", 1),
        }
        for what, t in forged.items():
            assert t != text, what
            cases.append(Forgery(f"{kind}: {what}", fname, t.encode(), "bad input", ""))
        for what, data in {
            "not UTF-8": text.encode() + b"\xff\xfe",
            "a NUL byte": text.encode().replace(b"\n", b"\n\x00", 1),
            "CRLF line ends": text.replace("\n", "\r\n").encode(),
            "a byte-order mark": b"\xef\xbb\xbf" + text.encode(),
            "empty": b"",
            "the first line only": text.split("\n", 1)[0].encode() + b"\n",
        }.items():
            cases.append(Forgery(f"{kind}: {what}", fname, data, "bad input", ""))
    huge = fixed + "(assert (and " + "true " * 4_000_001 + "))\n"
    cases.append(Forgery("fixed: more than 4,000,000 symbols", name, huge.encode(), "bad input",
                         "more than 4,000,000 symbols and lists"))
    return cases


def _fixed_content() -> list[Forgery]:
    text, name = committed(FIXED), f"{FIXED}.smt2"
    inv = _line_of(text, "(define-fun inv ")
    bit = re.search(r"\|[^|]*@post\|", text)[0]
    edits = {
        "trans false": (_replace_line(text, "(define-fun trans ", "(define-fun trans () Bool false)"),
                        "trans is not today's encoding"),
        "init false": (_replace_line(text, "(define-fun init ", "(define-fun init () Bool false)"),
                       "init is not today's encoding"),
        "safe true": (_replace_line(text, "(define-fun safe ", "(define-fun safe () Bool true)"),
                      "safe is not today's encoding"),
        "typed true": (_replace_line(_replace_line(text, "(define-fun typed ", "(define-fun typed () Bool true)"),
                                     "(define-fun typed_next ", "(define-fun typed_next () Bool true)"),
                       "typed is not today's encoding"),
        "inv true": (_replace_line(_replace_line(text, "(define-fun inv ", "(define-fun inv () Bool true)"),
                                   "(define-fun inv_next ", "(define-fun inv_next () Bool true)"),
                     "inv_implies_safe: sat (expected unsat)"),
        "inv_next not the copy": (_replace_line(text, "(define-fun inv_next ", "(define-fun inv_next () Bool true)"),
                                  "inv_next is not inv over the post-state bits"),
        "a post-state bit in inv": (
            _replace_line(_replace_line(text, "(define-fun inv ", f"(define-fun inv () Bool (or {bit} (not {bit})))"),
                          "(define-fun inv_next ", f"(define-fun inv_next () Bool (or {bit} (not {bit})))"),
            "inv mentions |"),
        "the action tag in inv": (
            _replace_line(_replace_line(text, "(define-fun inv ", "(define-fun inv () Bool (= action@pre action@pre))"),
                          "(define-fun inv_next ", "(define-fun inv_next () Bool (= action@pre action@pre))"),
            "inv mentions action@pre"),
        "an obligation asserts false": (
            text.replace("(assert (and inv typed trans typed_next (not inv_next)))", "(assert false)"),
            "obligation inv_is_inductive is not the standard one"),
        "an obligation weakened": (
            text.replace("(assert (and inv typed (not safe)))", "(assert (and inv typed (not safe) false))"),
            "obligation inv_implies_safe is not the standard one"),
        "obligations reordered": (
            _swap_blocks(text, "; obligation: init_implies_inv", "; obligation: inv_implies_safe"),
            "the obligations are not in the order"),
        "a quoted alias of a definition": (
            text.replace("(assert (and inv typed (not safe)))", "(assert (and |inv| typed (not safe)))"),
            "obligation inv_implies_safe is not the standard one"),
        "the tag declared twice": (text.replace("(declare-const action@pre Int)",
                                                "(declare-const action@pre Int)\n(declare-const action@pre Int)"),
                                   "declared 2 times"),
        "a bit left out": (text.replace(_line_of(text, "(declare-const |"), "", 1), "not the pre-state bits renamed"),
        "the method changed": (text.replace("; method: lemmas", "; method: spacer"), None),
    }
    out = []
    for what, (forged, expect) in edits.items():
        assert forged != text, what
        if expect is None:  # the method line is a note of how the invariant was found: no part of the proof
            out.append(Forgery(f"fixed: {what}", name, forged.encode(), "same",
                               "the method line says how the invariant was found; every obligation is the same"))
        else:
            out.append(Forgery(f"fixed: {what}", name, forged.encode(), "fails", expect))
    out += [
        Forgery("fixed: a definition twice", name, text.replace(inv, inv + "\n" + inv).encode(), "bad input",
                "defines inv a second time"),
        Forgery("fixed: an extra definition", name, text.replace(inv, inv + "\n(define-fun extra () Bool true)").encode(),
                "bad input", "defines extra, which is not part of a certificate"),
        Forgery("fixed: an obligation dropped", name, _drop_block(text, "; obligation: inv_implies_safe").encode(),
                "bad input", "no obligation inv_implies_safe"),
        Forgery("fixed: an obligation twice", name,
                (text + "\n".join(_block(text, "; obligation: inv_implies_safe")) + "\n").encode(),
                "bad input", "obligation inv_implies_safe a second time"),
        Forgery("fixed: two assertions in an obligation", name,
                text.replace("(assert (and inv typed (not safe)))", "(assert (and inv typed (not safe)))\n(assert true)").encode(),
                "bad input", "has 2 commands, not one"),
        Forgery("fixed: extra spaces and blank lines", name,
                text.replace("\n(check-sat)\n", "\n(  check-sat )\n\n").replace("(define-fun inv ", "(define-fun   inv ").encode(),
                "same", "the same terms: the reader reads terms, and the solvers are given them re-written"),
    ]
    return out


def _block(text: str, comment: str) -> list[str]:
    lines = text.splitlines()
    k = lines.index(comment)
    end = next(i for i in range(k, len(lines)) if lines[i] == "(pop 1)")
    return lines[k:end + 1]


def _drop_block(text: str, comment: str) -> str:
    block = "\n".join(_block(text, comment)) + "\n"
    return text.replace(block, "", 1)


def _swap_blocks(text: str, a: str, b: str) -> str:
    ba, bb = "\n".join(_block(text, a)), "\n".join(_block(text, b))
    return text.replace(ba, "\0").replace(bb, ba).replace("\0", bb)


def _relabelled() -> list[Forgery]:
    text = committed(FIXED)
    data = json.loads(_line_of(text, "; scenario: ")[len("; scenario: "):])
    out = []

    def scenario(**change) -> str:
        return _replace_line(text, "; scenario: ", "; scenario: " + json.dumps({**data, **change}, sort_keys=True))

    race = committed("abort-race")
    out += [
        Forgery("fixed: another scenario's certificate under this name", f"{FIXED}.smt2", race.encode(), "fails",
                "the file is named ack-target-cleared.smt2, but the certificate is of scenario abort-race"),
        Forgery("fixed: the scenario renamed inside", f"{FIXED}.smt2", scenario(name="abort-race").encode(), "fails",
                "the file is named"),
        Forgery("fixed: a scenario not in the catalogue", "nowhere.smt2", scenario(name="nowhere").encode(), "fails",
                "no catalogue scenario is named 'nowhere'"),
        Forgery("fixed: the title changed", f"{FIXED}.smt2", scenario(title="Renamed").encode(), "fails",
                "differs from the catalogue's ack-target-cleared in title"),
        Forgery("fixed: an engine flag changed", f"{FIXED}.smt2",
                text.replace('"timeout": 2', '"timeout": 3', 1).encode(), "fails", "in engine.timeout"),
        Forgery("fixed: another protocol", f"{FIXED}.smt2", scenario(protocol="vllm").encode(), "fails",
                "differs from the catalogue's ack-target-cleared"),
        Forgery("fixed: proves nothing", f"{FIXED}.smt2", _replace_line(text, "; proves: ", "; proves:").encode(),
                "fails", "'; proves:' names no invariant"),
        Forgery("fixed: a claim it violates", "abort-race.smt2",
                race.replace("; proves: no_source_free_while_read",
                             "; proves: no_write_after_release no_source_free_while_read").encode(),
                "fails", "proves no_write_after_release, which abort-race expects violated"),
        Forgery("fixed: an unknown claim", f"{FIXED}.smt2",
                text.replace("; proves: ", "; proves: no_such_claim ", 1).encode(), "fails",
                "proves no_such_claim, not invariants of ack-target-cleared"),
        Forgery("fixed: a claim dropped", f"{FIXED}.smt2",
                text.replace("; proves: decode_reads_only_own_pages ", "; proves: ", 1).encode(), "fails",
                "does not prove decode_reads_only_own_pages"),
    ]
    return out


def _all_sizes_content() -> list[Forgery]:
    from kvproof.checker.allsizes.prove import all_sizes_model, certificate_header
    from kvproof.checker.certs.sexpr import parse_script, render
    from kvproof.checker.allsizes.quantified import certificate_from
    from kvproof.model.scenario import builtin

    text, name = committed(ALL_SIZES, ".allsizes.smt2"), f"{ALL_SIZES}.allsizes.smt2"
    inv = _invariant_text(text)
    lines = text.splitlines()

    def edited(k: int, new: str) -> str:
        out = list(lines)
        out[k] = new
        return "\n".join(out) + "\n"

    step = _line_of(text, "; obligation step decode_abort")
    k = lines.index(step)
    guard = next(i for i in range(k, len(lines)) if lines[i].startswith("(assert (and (distinct decode_abort!req")
                 and "d_phase_reading" in lines[i])
    update = next(i for i in range(len(lines)) if lines[i].startswith("(define-fun ") and "!next" in lines[i])
    term = parse_script(lines[update])[0].term  # (define-fun NAME!next ((x S) ...) RESULT BODY)
    init_k = lines.index("; obligation init")  # then (push 1), the background, Init
    claim = _line_of(text, "; obligation claim ")
    ck = lines.index(claim)  # then (push 1), Inv, the claim's negation
    first_claim = claim[len("; obligation claim "):]
    abstraction = _line_of(text, "; abstraction: ")
    fixed_line = _line_of(text, "; fixed: ")
    symbol = next(n for n in ("d_phase", "p_phase", "owner") if f"({n} " in inv)
    hook, _ = all_sizes_model(builtin(ALL_SIZES).build())
    weak = certificate_from(hook.system, "true", [first_claim], certificate_header(ALL_SIZES, [first_claim], hook))
    edits = [
        ("a guard changed", edited(guard, lines[guard].replace("d_phase_reading", "d_phase_held", 1)), "fails",
         "obligation step decode_abort"),
        ("an update changed", edited(update, render((*term[:4], _any_value(text, term[3])))), "fails",
         "differs from the lifted model"),
        ("Init weakened", edited(init_k + 3, "(assert true)"), "fails", "obligation init (line"),
        ("the background dropped", edited(init_k + 2, "(assert false)"), "fails", "obligation init (line"),
        ("a claim's formula weakened", edited(ck + 3, "(assert (not true))"), "fails", f"obligation claim {first_claim}"),
        ("an abstraction line dropped", text.replace(abstraction + "\n", "", 1), "fails", "'; abstraction:' lines differ"),
        ("an abstraction line weakened", text.replace(abstraction, "; abstraction: none", 1), "fails",
         "'; abstraction:' lines differ"),
        ("a fixed line changed", text.replace(fixed_line, fixed_line + " (any)", 1), "fails", "'; fixed:' lines differ"),
        ("a step dropped", _drop_block(text, step), "fails", "its obligations (16) differ"),
        ("a claim's obligation dropped", _drop_block(text, claim), "fails", "but the claim obligations are"),
        ("a claim added to proves", text.replace("; proves: ", "; proves: no_such_claim ", 1), "fails",
         "but the claim obligations are"),
        (f"the invariant in quotes (|{symbol}|)", text.replace(inv, inv.replace(f"({symbol} ", f"(|{symbol}| ", 1)),
         "fails", f"the invariant mentions |{symbol}|"),
        ("the invariant over the post-state", text.replace(inv, inv.replace(f"({symbol} ", f"({symbol}!next ", 1)),
         "fails", f"the invariant mentions {symbol}!next"),
        ("the invariant over an action's parameter", text.replace(inv, f"(and {inv} (= decode_abort!r decode_abort!r))"),
         "fails", "the invariant mentions decode_abort!r"),
        ("the invariant true", weak, "fails", f"claim {first_claim}: sat (expected unsat)"),
    ]
    out = []
    for what, forged, outcome, expect in edits:
        assert forged != text, what
        out.append(Forgery(f"all sizes: {what}", name, forged.encode(), outcome, expect))
    twin = "vllm-pull-abort-before-32255"
    sg = committed(ALL_SIZES_SGLANG, ".allsizes.smt2")
    renamed = text.replace(f"scenario {ALL_SIZES}\n", f"scenario {twin}\n", 1)
    out += [
        Forgery("all sizes: another scenario's name inside", name, renamed.encode(), "fails",
                f"obligation step decode_abort (line {k + 1}) differs from the lifted model of {twin}"),
        Forgery("all sizes: relabelled as the before twin", f"{twin}.allsizes.smt2", renamed.encode(), "fails",
                f"obligation step decode_abort (line {k + 1}) differs from the lifted model of {twin}"),
        Forgery("all sizes: a scenario not in the catalogue", "nowhere.allsizes.smt2",
                text.replace(f"scenario {ALL_SIZES}\n", "scenario nowhere\n", 1).encode(), "fails", "scenario nowhere"),
        Forgery("all sizes: SGLang's certificate under vLLM's name", name, sg.encode(), "fails",
                f"expected {ALL_SIZES_SGLANG}.allsizes.smt2"),
        Forgery("all sizes: vLLM's certificate named SGLang's", f"{ALL_SIZES_SGLANG}.allsizes.smt2",
                text.replace(f"scenario {ALL_SIZES}\n", f"scenario {ALL_SIZES_SGLANG}\n", 1).encode(), "fails",
                f"the lifted model of {ALL_SIZES_SGLANG} cannot state this invariant"),
        Forgery("all sizes: saved as a fixed-size one", f"{ALL_SIZES}.smt2", text.encode(), "fails", "file name"),
    ]
    return out


def _any_value(text: str, sort: str) -> str:
    """A constant of ``sort``: a datatype's first constructor, ``false``, or a declared
    constant of it."""
    m = re.search(rf"\(declare-datatypes \(\({re.escape(sort)} 0\)\) \(\(\((\w+)\)", text)
    if m:
        return m.group(1)
    if sort == "Bool":
        return "false"
    m = re.search(rf"\(declare-fun (\w+) \(\) {re.escape(sort)}\)", text)
    assert m, sort
    return m.group(1)


def forgeries() -> list[Forgery]:
    """Every forged and tampered certificate (see the module docstring)."""
    out = (_fixed_smuggled() + _all_sizes_smuggled() + _forgeries_of_the_report() + _malformed() + _fixed_content()
           + _relabelled() + _all_sizes_content())
    names = [f.name for f in out]
    assert len(set(names)) == len(names), [n for n in names if names.count(n) > 1]
    return out


if __name__ == "__main__":  # python -m tests.tamper DIR
    root = Path(sys.argv[1])
    for i, f in enumerate(forgeries()):
        folder = root / f"{i:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f.filename).write_bytes(f.data)
        (folder / "WHAT").write_text(f"{f.name}\n{f.outcome}: {f.expect}\n", encoding="utf-8")
    print(f"{len(forgeries())} forged certificates under {root}")
