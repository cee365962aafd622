"""``kvproof audit vllm==0.33.0``: real-looking vLLM launch lines mapped to the vLLM model, checked,
with their documented verdicts."""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from kvproof.checker.cli import main
from kvproof.spec.vllm import audit as V

SERVE = ["vllm", "serve", "Qwen/Qwen3-0.6B", "--port", "8100", "--enforce-eager"]


def kv(connector="NixlConnector", role="kv_producer", **extra):
    """A ``--kv-transfer-config`` value as vLLM's docs write it."""
    cfg = {"kv_connector": connector, "kv_role": role}
    if extra:
        cfg["kv_connector_extra_config"] = extra
    return json.dumps(cfg)


BOUNDS = ["--arrival-bound", "2", "--transfer-bound", "60"]  # router hand-off 2 s, READ within 60 s


def run(capsys, tmp_path, *argv):
    code = main(["audit", "--traces", str(tmp_path / "t"), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def hazards(out):
    """{(family member, claim)} from the trace paths printed; each file exists."""
    found = set()
    for path in re.findall(r"written to (\S+\.itf\.json)", out):
        m = re.search(r"audit-vllm-[0-9.]+-(\w+)__(\w+)\.itf\.json$", path)
        assert m and Path(path).is_file(), path
        found.add((m.group(1), m.group(2)))
    return found


LEASE_RACE = {("lease", "no_cross_tenant_read"), ("lease", "no_source_free_while_read")}

# (name, audit options, launch line, exit code, hazards (member, claim), a line printed)
LINES = [
    # the docs' prefiller line, 0.33.0's 30 s lease, nothing known of the timing: the lease race (V1)
    ("pull-defaults-unbounded", [], [*SERVE, "--kv-transfer-config", kv()], 1, LEASE_RACE,
     "no lease is known to outlast the hand-off"),
    # the default 30 s lease against a READ that may take 60 s (decode may stall for it): V1, and a
    # lease above 2 + 60 s removes it (re-checked)
    ("pull-default-lease", BOUNDS, [*SERVE, "--kv-transfer-config", kv()], 1, LEASE_RACE,
     "removed by: kv_connector_extra_config.kv_lease_duration=63 (above the arrival and transfer bounds)"),
    # aws-do-eks#84's remedy: a 300 s lease outlasts the hand-off and the READ: not exposed
    ("pull-long-lease", BOUNDS, [*SERVE, "--kv-transfer-config", kv(kv_lease_duration=300)], 0, set(),
     "kv_lease_duration 300 s"),
    # push with the same long lease: a client abort on decode stops its heartbeats while prefill's
    # WRITE may still be posted near expiry (V7 under an aborted load; nothing is served from it)
    ("push-long-lease", BOUNDS, [*SERVE, "--kv-transfer-config", kv("NixlPushConnector", kv_lease_duration=300)], 1,
     {("abort", "no_source_free_while_read")}, "removed by: kv_connector NixlConnector"),
    # push, default lease: the lease race through the WRITE too
    ("push-default-lease", BOUNDS, [*SERVE, "--kv-transfer-config", kv("NixlPushConnector")], 1, LEASE_RACE,
     "mode = push"),
    # a key of kv_connector_extra_config kvproof does not know: listed, and it could change the verdict
    ("unknown-key", BOUNDS, [*SERVE, "--kv-transfer-config", kv(kv_lease_duration=300, lease_grace_s=5)], 2, set(),
     "unknown handoff settings could change the verdict: kv_connector_extra_config.lease_grace_s=5"),
    # decode never stalls: heartbeats carry the 30 s lease through a 60 s READ (vllm-pull-heartbeat),
    # except for an aborted load: decode stops heartbeating it while its READ is held in flight
    # (#32255), the lease runs out under the READ (nothing is served from it)
    ("pull-no-stalls", [*BOUNDS, "--no-decode-stalls"], [*SERVE, "--kv-transfer-config", kv()], 1,
     {("abort", "no_source_free_while_read")}, "decode_may_stall = false"),
    # ... but not through a router hand-off longer than the lease: heartbeats start on decode
    ("pull-no-stalls-late-hand-off", ["--arrival-bound", "40", "--transfer-bound", "60", "--no-decode-stalls"],
     [*SERVE, "--kv-transfer-config", kv()], 1, LEASE_RACE, "arrival_latency_bound = 4 ticks"),
]


@pytest.mark.parametrize("name,opts,line,code,found,printed", LINES, ids=[x[0] for x in LINES])
def test_vllm_launch_lines_give_their_documented_verdicts(capsys, tmp_path, name, opts, line, code, found, printed):
    got, out, err = run(capsys, tmp_path, "vllm==0.33.0", *opts, "--", *line)
    assert (got, err) == (code, "")
    assert hazards(out) == found
    assert printed in out
    verdict = {0: "verdict: not exposed", 1: "verdict: exposed", 2: "verdict: cannot decide"}[code]
    assert out.rstrip().splitlines()[-2].startswith(verdict)
    assert out.rstrip().splitlines()[-1].startswith("kvproof audit: vllm==0.33.0") and f"exit {code}" in out


def _verdicts(capsys, tmp_path):
    return [run(capsys, tmp_path, "vllm==0.33.0", "--no-traces", *o, "--", *line)[0] for _, o, line, *_ in LINES]


@pytest.mark.slow  # inner loop: over 2.5 s (the README's test command runs it)
def test_an_audit_that_ignores_the_lease_value_gives_wrong_verdicts(capsys, tmp_path, monkeypatch):
    """The mutant: the lease read from kv_connector_extra_config is dropped (30 s always).  The
    long-lease lines then audit as exposed, against their documented verdicts."""
    right = [x[3] for x in LINES]
    real = V.settings_of

    def ignoring_the_lease(*a, **k):
        s = real(*a, **k)
        s.lease = 30.0
        return s

    monkeypatch.setattr(V, "settings_of", ignoring_the_lease)
    got = _verdicts(capsys, tmp_path)
    wrong = [LINES[i][0] for i in range(len(LINES)) if got[i] != right[i]]
    assert "pull-long-lease" in wrong and "unknown-key" not in wrong


def test_ticks_keep_the_order_of_the_lease_against_the_bounds():
    rel = V.RELEASES["0.33.0"]
    for lease in (1, 5, 20, 30, 59, 60, 61, 62, 63, 300):
        for a in (None, 0, 2, 30, 40):
            for b in (None, 1, 30, 60):
                s = V.Settings(rel, lease=float(lease), arrival_bound=a, transfer_bound=b)
                lt, at, bt = V.ticks(s)
                assert 3 <= lt <= 6 and (at is None) == (a is None) and (bt is None) == (b is None)
                if a is not None:
                    assert (lt > at) == (lease > a) and (lt == at) == (lease == a) and (at == 0) == (a == 0)
                if b is not None:
                    total, total_t = (a or 0) + b, (at or 0) + bt
                    assert (lt > total_t) == (lease > total) and (lt == total_t) == (lease == total)


def test_the_dotted_form_of_kv_transfer_config_is_read_like_the_json(capsys, tmp_path):
    dotted = [*SERVE, "--kv-transfer-config.kv_connector", "NixlConnector", "--kv-transfer-config.kv_role", "kv_both",
              "--kv-transfer-config.kv_connector_extra_config.kv_lease_duration", "300",
              "--kv-transfer-config.kv_connector_extra_config.backends+", "UCX"]
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--no-traces", *BOUNDS, "--", *dotted)
    assert code == 0 and re.search(r"kv_lease_duration 300 s +command", out)
    assert 'kv_connector_extra_config.backends=["UCX"]' in out
    assert "by the flag table" in out or "own parser" in out


def test_flags_and_variables_are_mapped_or_listed(capsys, tmp_path):
    line = ["CUDA_VISIBLE_DEVICES=0", "VLLM_NIXL_SIDE_CHANNEL_PORT=5600", "VLLM_NIXL_FAST_FREE=1", *SERVE,
            "--max-model-len", "8192", "--async-scheduling", "--kv-transfer-config", kv(kv_lease_duration=300)]
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--no-traces", *BOUNDS, "--", *line)
    unknown = next(x for x in out.splitlines() if x.startswith("not known to kvproof"))
    assert "VLLM_NIXL_FAST_FREE=1" in unknown and "--async-scheduling" not in unknown
    assert "known, abstracted by the model (block counts are symbolic): --max-model-len 8192" in out
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT=5600" in out and "CUDA_VISIBLE_DEVICES=0" in out
    assert code == 2 and "could change the verdict: VLLM_NIXL_FAST_FREE=1" in out  # a NIXL variable kvproof lacks
    code, out, err = run(capsys, tmp_path, "vllm==0.33.0", "--reader", "table", "--", *SERVE, "--frobnicate", "3")
    assert code == 3 and "refuses this line: unrecognized arguments: --frobnicate 3" in err


def test_settings_the_model_does_not_cover_are_cannot_decide(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--no-traces", *BOUNDS, "--",
                       *SERVE, "--tensor-parallel-size", "8", "--kv-transfer-config", kv(kv_lease_duration=300))
    assert code == 2 and "not modelled: tensor parallel size 8" in out
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--no-traces", "--", *SERVE,
                       "--kv-transfer-config", kv("MooncakeConnector"))
    assert code == 2 and "not modelled: kv_connector MooncakeConnector" in out
    assert "verdict: cannot decide (the model checked is exposed to 2)" in out


def test_a_launch_without_a_kv_connector_has_nothing_to_audit(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--", *SERVE)
    assert code == 0 and "not a PD-disaggregated launch" in out


@pytest.mark.parametrize("argv,words", [
    (["vllm==0.33.0", "--", *SERVE, "--kv-transfer-config", '{"kv_connector": "NixlConnector", kv_role}'],
     "refuses this line: argument --kv-transfer-config"),
    (["vllm==0.33.0", "--", *SERVE, "--kv-transfer-config", "[1]"], "refuses this line: argument --kv-transfer-config"),
    (["vllm==0.33.0", "--", *SERVE, "--kv-transfer-config", '{"kv_connector": "NixlConnector"}'],
     "Please specify kv_role when kv_connector is set"),
    (["vllm==0.33.0", "--", *SERVE, "--kv-transfer-config", kv(role="decoder")], "refuses this line"),
    (["vllm==0.33.0", "--", *SERVE, "--kv-transfer-config", kv(kv_lease_duration="long")],
     "kv_lease_duration=long: expected a number of seconds"),
    (["vllm==0.33.0", "--", *SERVE, "--kv-transfer-config", kv(kv_lease_duration=0)], "seconds > 0"),
    (["vllm==0.33.0", "--transfer-bound", "soon", "--", *SERVE], "--transfer-bound soon"),
    (["vllm==0.33.0", "--", "python", "-m", "sglang.launch_server"], "expected a vLLM server launch"),
    (["vllm==0.32.0", "--", *SERVE], "vllm==0.32.0: unknown engine version; known: vllm==0.33.0"),
    (["trtllm==1.0", "--", *SERVE], "trtllm: unknown engine; known: sglang==0.5.21, sglang==0.5.22, "
                                    "sglang==0.5.23, vllm==0.33.0"),
    (["sglang==0.5.23", "--arrival-bound", "2", "--", "python", "-m", "sglang.launch_server"], "a vLLM option"),
])
def test_bad_input_is_one_line_exit_3(capsys, tmp_path, argv, words):
    code, out, err = run(capsys, tmp_path, *argv)
    assert code == 3 and out == "" and len(err.splitlines()) == 1 and words in err


def test_the_family_uses_the_catalogue_shapes():
    s = V.Settings(V.RELEASES["0.33.0"], connector="NixlPushConnector", role="kv_both")
    fam = {m.key: m.scenario for m in V.family(s)}
    lease, abort = fam["lease"].config, fam["abort"].config
    assert lease.engine.mode == abort.engine.mode == "push"
    assert (lease.prefill_blocks, lease.decode_blocks) == (1, 2) and lease.engine.decode_may_stall
    assert abort.engine.client_aborts and not abort.engine.decode_may_stall
    assert lease.engine.delay_free_aborted_load and not lease.engine.abort_of_finished_frees  # #32255, #25067
    assert lease.engine.heartbeat_interval == 1 and lease.engine.arrival_latency_bound is None


class _Bad(Exception):
    pass


_WORDS = st.sampled_from(["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"NixlConnector"}',
                          '{"kv_connector":"NixlPushConnector","kv_role":"kv_both"}', "{", "[]", '{"kv_role":"x"}',
                          '{"kv_connector_extra_config":{"kv_lease_duration":-1}}', "-tp", "2", "0", "x", "--x=1",
                          "--kv-transfer-config.kv_role", "kv_both", "--kv-transfer-config.a.b+", "-", "A=1", "env",
                          "--pipeline-parallel-size", "--enforce-eager", "é", ""])


@settings(max_examples=100, deadline=None)
@given(st.lists(_WORDS, max_size=12), st.sampled_from([None, 0.0, 2.0, 30.0, 45.5]),
       st.sampled_from([None, 1.0, 30.0, 60.0, 1e6]))
def test_any_command_maps_or_is_bad_input_never_a_crash(words, arrival, transfer):
    rel = V.RELEASES["0.33.0"]
    try:
        launch = V.parse_launch(["vllm", "serve", *words], _Bad)
        s = V.settings_of(rel, launch, {}, _Bad, arrival, transfer, reading=V.read_launch(rel, launch, _Bad, "table"))
    except _Bad:
        return
    lt, at, bt = V.ticks(s)
    assert 3 <= lt <= 6 and (at is None or 0 <= at <= 6) and (bt is None or 1 <= bt <= 6)
    assert V.mapping(s) and len(V.family(s)) == 2
