"""``kvproof audit``: real SGLang launch lines mapped to the model, checked, with their verdicts."""

import re

import pytest
from hypothesis import given, settings, strategies as st

from kvproof.checker.cli import main
from kvproof.model.scenario import builtin
from kvproof.spec.sglang import audit as A

LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "zai-org/GLM-4.6", "--trust-remote-code",
          "--host", "0.0.0.0", "--port", "30001"]
DECODE = [*LAUNCH, "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "mooncake"]
PREFILL = [*LAUNCH, "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "mooncake"]
DEFERRED = "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE"
DEADLINE = "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT"


def run(capsys, tmp_path, *argv):
    code = main(["audit", "--traces", str(tmp_path / "t"), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def hazards(out):
    """{(family member, claim)} from the trace paths the audit printed; each file exists."""
    found = set()
    for path in re.findall(r"written to (\S+\.itf\.json)", out):
        m = re.search(r"audit-[0-9.]+-(\w+)__(\w+)\.itf\.json$", path)
        assert m, path
        from pathlib import Path
        assert Path(path).is_file()
        found.add((m.group(1), m.group(2)))
    return found


FAILED_SEND = {("failure", "no_cross_tenant_read"), ("failure", "no_write_after_release")}

# (name, engine, audit options, launch line, exit code, hazards (member, claim), a remedy printed)
LINES = [
    # 0.5.23 as shipped: deferred release on, its 30 s deadline equal to Mooncake's 30 s transfer
    # timeout: the deadline race after a client abort (the next owner's own write lands after it:
    # no foreign read), the metadata write after send_aux, and the failed send (H6 with no bound)
    ("0.5.23-defaults", "sglang==0.5.23", [], DECODE, 1,
     FAILED_SEND | {("abort", "no_write_after_release"), ("metadata", "no_write_after_release")},
     f"{DEADLINE}=61"),
    # deferred release off: the abort race (H2) reads another tenant's KV; turning it on removes it
    ("0.5.23-deferral-off", "sglang==0.5.23", ["--env", f"{DEFERRED}=0"], DECODE, 1,
     FAILED_SEND | {("abort", "no_cross_tenant_read"), ("abort", "no_write_after_release")},
     f"removed by: {DEFERRED}=1"),
    # the deadline above two transfer calls: the abort and metadata races are gone, the failed
    # send (no bound on its write) stays
    ("0.5.23-deadline-above", "sglang==0.5.23", ["--env", f"{DEADLINE}=90"], DECODE, 1, FAILED_SEND, None),
    # the deadline below the transfer timeout: the abort race again
    ("0.5.23-deadline-below", "sglang==0.5.23", ["--env", f"{DEADLINE}=10"], DECODE, 1,
     FAILED_SEND | {("abort", "no_write_after_release"), ("metadata", "no_write_after_release")},
     f"{DEADLINE}=61"),
    # TP 2 on both sides with the deadline above two calls: the rank machinery holds (tp2x2)
    ("0.5.23-tp2", "sglang==0.5.23", ["--env", f"{DEADLINE}=90"], [*DECODE, "--tp", "2"], 1, FAILED_SEND, None),
    # 0.5.22 on a prefill line (decode's settings at their defaults): the base protocol's deadline
    # race reads another tenant's KV; 0.5.23's in-order worker or a longer deadline removes it
    ("0.5.22-prefill", "sglang==0.5.22", [], [*PREFILL, "--tp-size", "1"], 1,
     FAILED_SEND | {("abort", "no_cross_tenant_read"), ("abort", "no_write_after_release")},
     "upgrade to sglang==0.5.23"),
    # the pre-fix release: the incident (a rejected prompt served on stale KV) and the abort race
    ("0.5.21-pre-fix", "sglang==0.5.21", [], DECODE, 1,
     FAILED_SEND | {("abort", "no_cross_tenant_read"), ("abort", "no_write_after_release"),
                    ("admission", "no_cross_tenant_read"), ("admission", "rejected_never_succeeds"),
                    ("admission", "success_implies_full_coverage")},
     "upgrade to sglang==0.5.22"),
]


@pytest.mark.parametrize("name,engine,opts,line,code,found,remedy",
                         [pytest.param(*x, marks=pytest.mark.slow) if x[0] in ("0.5.23-tp2", "0.5.21-pre-fix") else x
                          for x in LINES], ids=[x[0] for x in LINES])  # the two slowest (2 s, 1.4 s) in the slow tier
def test_real_launch_lines_give_their_documented_verdicts(capsys, tmp_path, name, engine, opts, line, code,
                                                           found, remedy):
    got, out, err = run(capsys, tmp_path, engine, *opts, "--", *line)
    assert (got, err) == (code, "")
    assert hazards(out) == found
    assert out.rstrip().splitlines()[-2] == "verdict: exposed"
    assert out.rstrip().splitlines()[-1].startswith("kvproof audit: sglang==") and "exit 1: exposed" in out
    if remedy:
        assert remedy in out
    if name == "0.5.23-tp2":  # two ranks a side: the two-by-two shape, not the one-rank one (3,950 states)
        assert "prefill_ranks = 2, decode_ranks = 2" in out
        states = re.search(r"audit-0.5.23-abort \(([\d,]+) states\)", out).group(1)
        assert int(states.replace(",", "")) > 100_000


def test_the_deadline_is_mapped_against_one_and_two_transfer_calls():
    rel = A.RELEASES["0.5.23"]
    for r, c in [(10, 30), (30, 30), (45, 30), (60, 30), (61, 30), (30, 10), (5, 5)]:
        t, b = A.Settings(rel, release_timeout=r, transfer_timeout=c).ticks()
        assert (t > b) == (r > c) and (t == b) == (r == c)
        assert (t > 2 * b) == (r > 2 * c)
    assert A.Settings(rel, backend="nixl").ticks() == (2, None)


def test_a_flag_sglang_does_not_have_is_refused_with_sglangs_message(capsys, tmp_path):
    code, out, err = run(capsys, tmp_path, "sglang==0.5.23", "--reader", "table", "--", *DECODE, "--frobnicate", "3")
    assert code == 3 and out == "" and "refuses this line: unrecognized arguments: --frobnicate 3" in err


def test_a_handoff_setting_the_model_does_not_read_makes_it_undecidable(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path, "sglang==0.5.23", "--reader", "table", "--", *DECODE,
                       "--disaggregation-decode-polling-interval", "4")
    assert code == 2 and "unknown handoff settings could change the verdict: " \
                         "--disaggregation-decode-polling-interval 4" in out
    assert "verdict: cannot decide" in out


def test_a_prefix_of_several_env_groups_is_read_as_a_shell_would():
    launch = A.parse_launch(["A=1", "env", f"{DEFERRED}=1", "env", f"{DEADLINE}=30", *DECODE], ValueError)
    assert launch.env == {"A": "1", DEFERRED: "1", DEADLINE: "30"}
    assert launch.program == "python -m sglang.launch_server"
    assert [w for _, w in launch.flags] == DECODE[3:]


def test_settings_the_model_does_not_cover_are_named_and_undecidable():
    bad = ValueError
    launch = A.parse_launch([*DECODE, "--tp", "8", "--disaggregation-decode-allocation-policy", "prefill_complete"],
                            bad)
    s = A.settings_of(A.RELEASES["0.5.23"], launch, {}, bad, reading=A.read_launch(A.RELEASES["0.5.23"], launch,
                                                                                    bad, "table"))
    assert s.ranks() == (2, 2) and len(s.unmodelled) == 2
    assert any("attention TP 8" in u for u in s.unmodelled)
    dpl = A.parse_launch([*DECODE, "--tp", "2", "--dp-size", "2", "--enable-dp-attention"], bad)
    dp = A.settings_of(A.RELEASES["0.5.23"], dpl, {}, bad, reading=A.read_launch(A.RELEASES["0.5.23"], dpl, bad, "table"))
    assert dp.attn_tp == 1 and dp.ranks() == (1, 1) and not dp.unmodelled


@pytest.mark.parametrize("engine,words", [("sglang==0.5.20", "unknown engine version"),
                                          ("trtllm==1.0", "trtllm: unknown engine"),
                                          ("sglang", "expected ENGINE==VERSION")])
def test_unknown_versions_are_refused_with_the_known_ones(capsys, tmp_path, engine, words):
    code, out, err = run(capsys, tmp_path, engine, "--", *DECODE)
    assert code == 3 and out == "" and len(err.splitlines()) == 1
    assert words in err and "known: sglang==0.5.21, sglang==0.5.22, sglang==0.5.23" in err


def test_a_malformed_env_file_line_is_one_line_naming_file_and_line(capsys, tmp_path):
    f = tmp_path / "prod.env"
    f.write_text(f"# decode\nexport {DEFERRED}=1\n\n{DEADLINE}='90'\nthis is not an assignment\n")
    code, out, err = run(capsys, tmp_path, "sglang==0.5.23", "--env-file", str(f), "--", *DECODE)
    assert code == 3 and out == ""
    assert err.strip() == f"kvproof: error: {f}:5: expected NAME=VALUE, got 'this is not an assignment'"
    code, _, err = run(capsys, tmp_path, "sglang==0.5.23", "--env-file", str(tmp_path / "nope.env"), "--", *DECODE)
    assert code == 3 and "nope.env" in err and len(err.splitlines()) == 1


def test_env_file_values_reach_the_model_and_env_overrides_the_file(tmp_path):
    f = tmp_path / "prod.env"
    f.write_text(f"export {DEFERRED}=1\n{DEADLINE}='90'\nMC_TRANSFER_TIMEOUT=\"20\"\n")
    env = {k: (v, "--env-file") for k, v in A.read_env_file(str(f), ValueError).items()}
    launch = A.parse_launch(DECODE, ValueError)
    s = A.settings_of(A.RELEASES["0.5.23"], launch, env, ValueError,
                      reading=A.read_launch(A.RELEASES["0.5.23"], launch, ValueError, "table"))
    assert (s.release_timeout, s.transfer_timeout, s.source["release_timeout"]) == (90.0, 20.0, "--env-file")
    assert s.ticks() == (3, 1)


def test_the_process_environment_is_never_read(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(DEADLINE, "90")
    monkeypatch.setenv(DEFERRED, "0")
    monkeypatch.setenv("MC_TRANSFER_TIMEOUT", "5")
    code, out, _ = run(capsys, tmp_path, "sglang==0.5.23", "--", *DECODE)
    assert f"{DEADLINE}=30 " in out and "MC_TRANSFER_TIMEOUT=30 " in out and f"{DEFERRED}=1 " in out
    assert code == 1 and ("abort", "no_write_after_release") in hazards(out)  # the 30 s deadline race


def test_variables_in_front_of_the_command_are_its_environment(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path, "sglang==0.5.23", "--", f"{DEADLINE}=90", "MC_TE_METRIC=true", *DECODE)
    assert re.search(rf"{DEADLINE}=90 +command", out)
    assert hazards(out) == FAILED_SEND
    inert = next(x for x in out.splitlines() if x.startswith("known, no part in the isolation checks: "))
    for shown in ("--model-path zai-org/GLM-4.6", "--trust-remote-code", "--host 0.0.0.0", "--port 30001",
                  "MC_TE_METRIC=true"):
        assert shown in inert
    assert code == 1 and "not known to kvproof" not in out


@pytest.mark.parametrize("argv,words", [
    (["sglang==0.5.23", "--env", f"{DEFERRED}=maybe", "--", *DECODE], "expected a boolean"),
    (["sglang==0.5.23", "--env", f"{DEADLINE}=-1", "--", *DECODE], "seconds > 0"),
    (["sglang==0.5.23", "--env", "=1", "--", *DECODE], "expected NAME=VALUE"),
    (["sglang==0.5.23", "--", "echo", "hi"], "expected an SGLang server launch"),
    (["sglang==0.5.23", "--reader", "table", "--", *LAUNCH, "--disaggregation-mode", "both"],
     "argument --disaggregation-mode: invalid choice: 'both'"),
    (["sglang==0.5.23"], "expected the launch command after --"),
    (["sglang==0.5.23", "--env", "X=1", *DECODE], "put the launch command after --"),
    (["sglang==0.5.23", "--peer-tp", "0", "--", *DECODE], "--peer-tp 0: expected a whole number >= 1"),
    (["vllm==0.33.0", "--peer-tp", "2", "--", "vllm", "serve", "m"], "--peer-tp: an SGLang option"),
])
def test_bad_input_is_one_line_exit_3(capsys, tmp_path, argv, words):
    code, out, err = run(capsys, tmp_path, *argv)
    assert code == 3 and out == "" and len(err.splitlines()) == 1 and words in err


def test_peer_tp_is_sglangs_own_option_and_reaches_the_model():
    """--peer-tp is declared by the SGLang protocol (not the general audit command) and sets the
    other side's ranks; without it the other side is this line's size."""
    from kvproof.checker.cli import build_parser
    from kvproof.spec.sglang import PROTOCOL

    assert "audit" in PROTOCOL.arguments
    import kvproof.checker.cli.audit as cli_audit
    import inspect
    assert "--peer-tp" not in inspect.getsource(cli_audit)  # the general layer names no protocol's option
    args = build_parser().parse_args(["audit", "sglang==0.5.23", "--peer-tp", "2", "--", *DECODE])
    cli_audit.prepare(args)
    assert args.peer_tp == "2"
    launch = A.parse_launch(DECODE, ValueError)
    s = A.settings_of(A.RELEASES["0.5.23"], launch, {}, ValueError, peer_tp=2)
    assert s.ranks() == (2, 1)  # decode line: the peer (prefill) has 2 ranks, this side 1
    assert A.settings_of(A.RELEASES["0.5.23"], launch, {}, ValueError).ranks() == (1, 1)


def test_a_traces_folder_that_is_a_file_is_refused_before_any_search(capsys, tmp_path):
    (tmp_path / "afile").write_text("")
    code = main(["audit", "--traces", str(tmp_path / "afile"), "sglang==0.5.23", "--", *DECODE])
    out, err = capsys.readouterr()
    assert code == 3 and out == "" and "is a file, expected a folder" in err


def test_a_search_cut_short_is_cannot_decide_never_not_exposed(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path, "sglang==0.5.23", "--max-states", "5", "--", *DECODE)
    assert code == 2 and "search cut short" in out
    assert out.rstrip().splitlines()[-2] == "verdict: cannot decide (inconclusive: a limit cut a search short)"


def test_a_launch_without_disaggregation_has_nothing_to_audit(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path, "sglang==0.5.23", "--", *LAUNCH)
    assert code == 0 and "not a PD-disaggregated launch" in out


def test_the_family_uses_the_catalogue_shapes_and_the_release_spec():
    s = A.Settings(A.RELEASES["0.5.23"], mode="decode", deferred=True)
    fam = {m.key: m.scenario for m in A.family(s)}
    assert set(fam) == {"abort", "failure", "admission", "metadata"}
    shipped = builtin("sglang-0.5.23-mooncake").config
    assert fam["abort"].config == shipped  # the defaults are exactly the catalogue's 0.5.23 scenario
    assert fam["abort"].protocol == "sglang-0.5.23"
    assert fam["failure"].config.engine.write_latency_bound is None
    pre = {m.key: m.scenario for m in A.family(A.Settings(A.RELEASES["0.5.21"], mode="decode"))}
    assert pre["admission"].config.engine.reject_at_decode_door is False and pre["abort"].protocol is None


class _Bad(Exception):
    pass


_WORDS = st.sampled_from(["python", "-m", "sglang.launch_server", "--tp", "2", "--tp-size", "x", "--pp-size", "0",
                          "--disaggregation-mode", "decode", "prefill", "--dp-size", "--enable-dp-attention",
                          "--disaggregation-transfer-backend", "nixl", "fake", "=", "A=1", "env", "--x=1", "-",
                          "--disaggregation-decode-allocation-policy", "--disaggregation-enable-kv-checksum", "é", ""])


@settings(max_examples=100, deadline=None)
@given(st.lists(_WORDS, max_size=12), st.dictionaries(st.sampled_from(list(A.ENV_VARS) + ["SGLANG_X", "MC_Y"]),
                                                      st.sampled_from(["1", "0", "yes", "30", "-3", "nan", "x", ""]),
                                                      max_size=3))
def test_any_command_and_environment_map_or_are_bad_input_never_a_crash(words, env):
    for rel in A.RELEASES.values():
        try:
            launch = A.parse_launch(["python", "-m", "sglang.launch_server", *words], _Bad)
            s = A.settings_of(rel, launch, {k: (v, "--env") for k, v in env.items()}, _Bad,
                              reading=A.read_launch(rel, launch, _Bad, "table"))
        except _Bad:
            continue
        t, b = s.ticks()
        assert t >= 1 and (b is None or b >= 1)
        pr, dr = s.ranks()
        assert 1 <= pr <= 2 and 1 <= dr <= 2
        assert A.mapping(s) and A.family(s)
