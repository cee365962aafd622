"""The one outcome type and the one map from outcomes to exit codes (``checker/outcome.py``):
how each outcome compares with its expectation, the order in which the exit code is decided,
that every command's own codes come from it, and that the README's exit-code sentences say
what it says."""

import re
from pathlib import Path

import pytest

from kvproof.checker import outcome
from kvproof.checker.outcome import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MEANINGS, EXIT_MISMATCH, EXIT_OK,
                                     EXIT_UNEXPLAINED, VERDICTS, BadInput, Inconclusive, Proved, Reached, Refuted,
                                     Tally, Unexplained, Unreachable, Verified, Violated, exit_code, judge,
                                     outcome_named)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("result, expected, judgement", [
    (Verified(), "verified", "matched"),
    (Violated(), "violated", "matched"),
    (Violated(), "verified", "mismatched"),
    (Verified(), "violated", "mismatched"),
    (Reached(), "reached", "matched"),
    (Unreachable(), "reached", "mismatched"),
    (Proved(), "verified", "matched"),      # a proof establishes what a complete search does
    (Proved(), "violated", "mismatched"),
    (Refuted(), "violated", "matched"),
    (Refuted(), "verified", "mismatched"),
    (Proved(verdict="holds"), "verified", "matched"),
    (Inconclusive("state limit"), "verified", "inconclusive"),  # never a match, never a mismatch
    (Inconclusive("state limit"), "inconclusive", "inconclusive"),
    (Unexplained(7), "verified", "unexplained"),
    (BadInput("no such file"), None, "bad input"),
    (Violated(), None, "matched"),           # nothing expected: whatever was found stands
])
def test_judge_compares_an_outcome_with_its_expectation(result, expected, judgement):
    assert judge(result, expected) == judgement


def test_the_exit_code_is_decided_bad_input_first_then_mismatch_unexplained_inconclusive():
    assert exit_code(Tally()) == EXIT_OK == 0
    assert exit_code(Tally(matched=5)) == 0
    assert exit_code(Tally(5, inconclusive=1)) == EXIT_INCONCLUSIVE == 2
    assert exit_code(Tally(5, unexplained=1, inconclusive=1)) == EXIT_UNEXPLAINED == 5
    assert exit_code(Tally(5, mismatched=1, unexplained=1, inconclusive=1)) == EXIT_MISMATCH == 1
    assert exit_code(Tally(5, 1, 1, 1, bad_input=1)) == EXIT_BAD_INPUT == 3
    pairs = [(Verified(), "verified"), (Inconclusive("x"), "verified"), (Refuted(), "verified")]
    assert exit_code(pairs) == 1 and exit_code(pairs[:2]) == 2 and exit_code(pairs[:1]) == 0
    assert Tally.of(pairs) == Tally(1, 1, 1) and Tally.of(pairs).exit_code == 1


def test_every_verdict_word_names_its_outcome():
    for word, cls in VERDICTS.items():
        named = outcome_named(word)
        assert type(named) is cls and named.verdict == word
    assert set(VERDICTS.values()) == set(outcome.Outcome.__args__)  # every outcome has a word


def test_the_explicit_engines_results_are_the_outcomes():
    from kvproof.checker import results

    for name in ("Verified", "Violated", "Reached", "Unreachable", "Inconclusive"):
        assert getattr(results, name) is getattr(outcome, name)


def test_every_commands_codes_come_from_the_one_map():
    from kvproof.checker.audit import common as audit
    from kvproof.checker.logs.validate_output import exit_of

    assert (audit.EXIT_NOT_EXPOSED, audit.EXIT_EXPOSED, audit.EXIT_UNDECIDED) == (0, 1, 2)
    assert audit.undecided_code([]) == 0 and audit.undecided_code(["--config x.yaml"]) == 2
    assert {a: exit_of([a]) for a in ("explained", "violation", "undecided", "unexplained", "bad input")} == {
        "explained": 0, "violation": 1, "undecided": 2, "unexplained": 5, "bad input": 3}
    assert exit_of(["violation", "bad input"]) == 1  # a log that cannot be read does not hide the others'
    assert exit_of(["unexplained", "bad input"]) == 5 and exit_of(["undecided", "bad input"]) == 3


def test_the_commands_own_words_are_outcomes_judged_against_their_expectation():
    from kvproof.checker.audit.common import NOT_EXPOSED
    from kvproof.checker.conform import Conformed, Diverged, Reproduced
    from kvproof.checker.logs.validate_output import EXPECTED

    assert [judge(outcome.worded("audit", cls, *p), NOT_EXPOSED) for cls, p in
            ((Verified, ()), (Violated, ()), (Inconclusive, ("x",)))] == ["matched", "mismatched", "inconclusive"]
    assert judge(outcome_named("violation"), EXPECTED) == "mismatched" and judge(outcome_named("explained"), EXPECTED) == "matched"
    ok, bad = Reproduced(Path("a"), "c", 3, "as the model"), Diverged(Path("b"), "c", 2, "differs")
    assert (ok.outcome.verdict, bad.outcome.verdict) == ("reproduced", "diverged")
    done = Conformed("2 traces", (ok.outcome, bad.outcome), "a trace diverges")
    assert (done.matched, done.mismatched, done.exit_code, done.verdict) == (1, 1, 1, "diverged")
    assert Conformed("1", (outcome.worded("conform --random", Verified),), "").exit_code == 0


def _second_vocabularies(where: str, text: str) -> list[str]:
    """Literals of the module ``text`` that are a second exit map (a dict with an ``EXIT_*``
    name among its keys or values) or a second verdict word list (a dict, list, tuple or set
    naming two verdict words or more)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Dict):
            items = [*node.keys, *node.values]
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = node.elts
        else:
            continue
        if isinstance(node, ast.Dict) and any(isinstance(i, ast.Name) and i.id.startswith("EXIT_") for i in items):
            found.append(f"{where}:{node.lineno}: an exit map")
        words = {i.value for i in items if isinstance(i, ast.Constant) and i.value in VERDICTS}
        if len(words) >= 2:
            found.append(f"{where}:{node.lineno}: verdict words {sorted(words)}")
    return found


def test_no_second_exit_map_or_verdict_word_list():
    """The exit codes and the verdict words live in ``checker/outcome.py`` only (:data:`VERDICTS`,
    :data:`~kvproof.checker.outcome.WORDINGS`, :func:`exit_code`); a module that spells two of
    them out in a table of its own is a second vocabulary."""
    found = []
    for package in ("checker", "spec"):
        for f in sorted((ROOT / package).rglob("*.py")):
            if f.relative_to(ROOT).as_posix() != "checker/outcome.py":
                found += _second_vocabularies(str(f.relative_to(ROOT)), f.read_text())
    assert found == []
    planted = ('MEANING = {EXIT_OK: "fine", EXIT_MISMATCH: "not"}\n'
               'WORDS = ("exposed", "not exposed")\nok = x in ("explained",)\n')
    assert _second_vocabularies("m.py", planted) == ["m.py:1: an exit map", "m.py:2: verdict words ['exposed', 'not exposed']"]


_CHOICE = re.compile(r"EXIT_[A-Z_]+ if |else EXIT_[A-Z_]+\b|(?:code|exit_code) = [0-9]\b")


def test_no_module_chooses_an_exit_code_by_itself():
    """An exit code chosen by a conditional over the codes (``EXIT_MISMATCH if ... else
    EXIT_OK``) is a second map from outcomes to codes: every command goes through
    :func:`~kvproof.checker.outcome.exit_code`."""
    found = []
    for package in ("checker", "spec"):
        for f in sorted((ROOT / package).rglob("*.py")):
            if f.name == "outcome.py" and f.parent.name == "checker":
                continue
            found += [f"{f.relative_to(ROOT)}:{n}" for n, line in enumerate(f.read_text().splitlines(), 1)
                      if _CHOICE.search(line)]
    assert found == []


def _readme_codes(start: str) -> list[tuple[int, str]]:
    """The ``**N** meaning`` pairs of the README's paragraph that begins with ``start``."""
    readme = (ROOT / "README.md").read_text()
    para = readme[readme.index(start):].split("\n\n", 1)[0].replace("\n", " ")
    parts = re.split(r"\*\*(\d+)\*\* ", para)[1:]
    return [(int(n), text.strip().rstrip(",")) for n, text in zip(parts[::2], parts[1::2])]


def test_the_readmes_exit_codes_are_the_ones_outcome_defines():
    codes = _readme_codes("The exit code is for CI:")
    assert [n for n, _ in codes] == [EXIT_OK, EXIT_MISMATCH, EXIT_INCONCLUSIVE, EXIT_BAD_INPUT]
    for n, text in codes:
        assert text.startswith(EXIT_MEANINGS[n]), (n, text, EXIT_MEANINGS[n])


def test_the_readmes_audit_codes_are_the_audits():
    from kvproof.checker.audit import common as audit

    readme = (ROOT / "README.md").read_text()
    line = re.search(r"Exit (\d) exposed, (\d) not exposed, (\d) cannot decide .*?, (\d) a line", readme, re.S)
    assert line is not None
    assert tuple(map(int, line.groups())) == (audit.EXIT_EXPOSED, audit.EXIT_NOT_EXPOSED, audit.EXIT_UNDECIDED,
                                              EXIT_BAD_INPUT)


def test_the_readmes_validate_codes_are_the_ones_outcome_defines():
    """The README's validate sentence gives the codes :func:`exit_code` maps validate's outcomes
    to: explained, a violation, undecided, bad input, an unexplained event."""
    from kvproof.checker.outcome import EXIT_UNEXPLAINED

    readme = (ROOT / "README.md").read_text()
    line = re.search(r"Exit (\d) explained, (\d) a violation, (\d) undecided, (\d) bad input, (\d) an event", readme)
    assert line is not None
    assert tuple(map(int, line.groups())) == (EXIT_OK, EXIT_MISMATCH, EXIT_INCONCLUSIVE, EXIT_BAD_INPUT,
                                              EXIT_UNEXPLAINED)
