"""``kvproof.checker.audit.common``: the protocol-neutral half of ``kvproof audit``, on hand-built input
(no protocol: the engines' audits are tested in test_audit.py and test_vllm_audit.py)."""

from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import pytest

from kvproof.checker.audit import common as core


class _Bad(Exception):
    pass


def test_flags_split_into_names_and_values():
    words = ["--a=1", "-b=2", "--c", "3", "--on", "x", "--d", "--e", "pos", "-", "--last"]
    assert core.split_flags(words, ("--on",)) == [
        ("--a", "1"), ("-b", "2"), ("--c", "3"), ("--on", None), ("", "x"), ("--d", None), ("--e", "pos"),
        ("", "-"), ("--last", None)]
    # with joined="--", a single-dash word keeps its "=" (vLLM's -tp=2 is not --tp=2)
    assert core.split_flags(["-b=2", "v", "--a=1"], (), joined="--") == [("-b=2", "v"), ("--a", "1")]


def test_the_environment_prefix_takes_every_env_group_later_ones_overriding():
    words = ["A=1", "env", "B=2", "A=3", "env", "C=4", "vllm", "serve", "env", "D=5"]
    assert core.take_prefix_environment(words) == {"A": "3", "B": "2", "C": "4"}
    assert words == ["vllm", "serve", "env", "D=5"]  # after the program, words are its arguments
    words = ["python", "-m", "x"]
    assert core.take_prefix_environment(words) == {} and words == ["python", "-m", "x"]


def test_assignments_in_front_of_a_command_stop_at_the_first_other_word():
    words = ["A=1", "B='two words'", "env", "C=3", "python"]
    assert core.take_assignments(words) == {"A": "1", "B": "two words"}
    assert words == ["env", "C=3", "python"]
    words = ["A=1", "1X=2", "B=3"]  # not a variable name: the prefix ends there
    assert core.take_assignments(words) == {"A": "1"} and words == ["1X=2", "B=3"]
    for bad in ("=1", "A", "A='open", "-A=1"):
        with pytest.raises(ValueError):
            core.assignment(bad)


def test_a_launch_line_quoted_as_one_word_is_split_as_a_shell_would():
    assert core.command_words(["A=1 python -m x --f 'a b'"], _Bad) == ["A=1", "python", "-m", "x", "--f", "a b"]
    assert core.command_words(["python"], _Bad) == ["python"]
    with pytest.raises(_Bad, match="No closing quotation"):
        core.command_words(["python '-m"], _Bad)


def test_engine_versions_are_read_or_refused_with_the_known_ones():
    releases = {"1.0": "one", "2.0": "two"}
    assert core.parse_engine(" Eng ==2.0 ", "eng", releases, "2.0", _Bad) == "two"
    for text, words in [("eng==3.0", "unknown engine version; known: eng==1.0, eng==2.0"),
                        ("other==1.0", "unknown engine version"), ("eng", "expected ENGINE==VERSION, e.g. eng==2.0"),
                        ("==1.0", "expected ENGINE==VERSION")]:
        with pytest.raises(_Bad, match=words):
            core.parse_engine(text, "eng", releases, "2.0", _Bad)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "x", "", True, None])
def test_durations_are_finite_and_positive(value):
    with pytest.raises(_Bad):
        core.seconds("T", value, _Bad)


def test_counts_and_durations_that_are_good_are_read():
    assert core.seconds("T", "1.5", _Bad) == 1.5 and core.seconds("T", 30, _Bad) == 30.0
    assert core.count("--tp", "2", _Bad) == 2
    for bad in ("0", "x", None):
        with pytest.raises(_Bad):
            core.count("--tp", bad, _Bad)


def test_the_environment_is_files_then_env_then_the_command_prefix(tmp_path):
    f = tmp_path / "a.env"
    f.write_text("# c\nexport A=file\nB=\"file\"\nC=file\n")
    args = SimpleNamespace(env_file=[str(f)], env=["B=env", "C=env"])
    env = core.environment(args, core.Launch({"C": "cmd"}, [], "p"), _Bad)
    assert env == {"A": ("file", "--env-file"), "B": ("env", "--env"), "C": ("cmd", "command")}
    with pytest.raises(_Bad, match="--env x: expected NAME=VALUE"):
        core.environment(SimpleNamespace(env_file=[], env=["x"]), core.Launch({}, [], "p"), _Bad)
    with pytest.raises(_Bad, match="--launch-cmd"):
        core.launch_command(SimpleNamespace(launch=["--"]), "--launch-cmd", _Bad)
    assert core.launch_command(SimpleNamespace(launch=["--", "a", "--"]), "x", _Bad) == ["a", "--"]


@dataclass(frozen=True)
class _Release:
    version: str = "9.9"
    basis: str = "a test release"


@dataclass
class _Settings(core.SettingsBase):
    knob: int = 0


def _report(hazards=(), cut=(), **settings):
    s = _Settings(_Release(), **settings)
    scen = SimpleNamespace(name="fam-a")
    m = core.Member("a", "trigger A", scen)
    hs = [core.Hazard(c, m, 3, None, **kw) for c, kw in hazards]
    return core.AuditReport(s, [m], {"a": 1234}, hs, list(cut), ("HANDOFF_",))


def test_the_exit_code_puts_an_uncovered_setting_before_a_hazard_and_a_hazard_before_a_cut_search():
    assert _report().exit_code == core.EXIT_NOT_EXPOSED == 0
    assert _report(cut=["x"]).exit_code == core.EXIT_UNDECIDED == 2
    assert _report([("c", {})], cut=["x"]).exit_code == core.EXIT_EXPOSED == 1
    assert _report([("c", {})], unmodelled=["tp 8"]).exit_code == 2
    assert _report([("c", {})], unknown=["HANDOFF_X=1"]).exit_code == 2
    assert _report(unknown=["--other"]).exit_code == 0  # not a handoff name: listed, not undecidable
    assert _report(unknown=["--other", "HANDOFF_X=1"]).undecided_unknown() == ["HANDOFF_X=1"]


def test_settings_base_fields_are_keyword_only_after_the_engines_own():
    s = _Settings(_Release(), 7, unknown=["u"])
    assert s.knob == 7 and s.unknown == ["u"] and s.source == {} and replace(s, knob=1).unknown == ["u"]


def test_the_header_shows_the_table_only_when_given_rows():
    s = _Settings(_Release(), inert=["--port 1"], abstracted=["--size 2"], unknown=["--x"])
    lines = core.header("eng", s, [("a", "command", "A"), ("long name", "default", "B")], 8, "why")
    assert lines == ["eng==9.9: a test release", "settings (value, from, in the model):",
                     "  a          command   A", "  long name  default   B",
                     "known, abstracted by the model (why): --size 2",
                     "known, no part in the isolation checks: --port 1",
                     "not known to kvproof, not modelled (1): --x"]
    assert core.header("eng", _Settings(_Release()), [], 8, "why")[1:] == ["settings (value, from, in the model):"]
    assert core.header("eng", _Settings(_Release()), None, 8, "why") == ["eng==9.9: a test release"]


def test_the_body_names_each_hazard_its_other_triggers_its_remedies_and_the_verdict():
    r = _report([("c1", {"remedies": ["fix 1", "fix 2"], "trace_path": "t/a.json"}), ("c2", {"also": ["trigger B"]})],
                cut=["fam-b: out of states"])
    lines = core.body(r, {"c1": "one thing", "c2": "another"}, "no fix")
    assert lines == ["checked: fam-a (1,234 states)", "exposed to 2 hazards:",
                     "  1. one thing (c1), after trigger A", "     shortest trace: 3 steps, written to t/a.json",
                     "     removed by: fix 1; or fix 2",
                     "  2. another (c2), after trigger A (also after trigger B)", "     shortest trace: 3 steps",
                     "     removed by: no fix", "search cut short: fam-b: out of states", "verdict: exposed"]
    assert core.body(_report(unknown=["--x"]), {}, "")[-1] == \
        "verdict: not exposed (assuming the flags kvproof does not know leave the KV handoff alone)"
    assert core.body(_report([("c", {})], unmodelled=["pp 2"]), {"c": "x"}, "")[-2:] == \
        ["not modelled: pp 2", "verdict: cannot decide (the model checked is exposed to 1)"]
