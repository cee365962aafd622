"""Conformance with SGLang 0.5.23's own code (skipped when the ``sglang`` extra is absent).

The stored counterexamples of the ``sglang-0.5.23-*`` family must reproduce on the real code;
a counterexample of an older engine must diverge where 0.5.23 behaves differently; a harness
configured unlike the trace's engine must be caught; random sequences must agree.
"""

from pathlib import Path

import pytest

from kvproof.checker.conform import engine_problem

pytestmark = pytest.mark.skipif(
    engine_problem() is not None,
    reason=f"conformance needs the sglang extra: {engine_problem()}",
)

TRACES = Path(__file__).resolve().parent.parent / "traces"
FAMILY = ["sglang-0.5.23-mooncake", "sglang-0.5.23-failed-send", "sglang-0.5.23-deferral-off",
          "sglang-0.5.23-admission"]


def family_traces():
    return sorted(p for p in TRACES.glob("sglang-0.5.23-*__*.itf.json"))


def test_the_family_has_stored_counterexamples():
    assert len(family_traces()) >= 8


@pytest.mark.parametrize("path", family_traces(), ids=lambda p: p.name.removesuffix(".itf.json"))
def test_every_stored_counterexample_reproduces_on_the_real_code(path):
    from kvproof.checker.conform.report import replay_trace

    verdict = replay_trace(path)
    assert verdict.verdict == "reproduced", getattr(verdict, "reason", "")


def test_the_incident_diverges_at_the_prefill_door():
    """0.5.23 retires the pending-error placeholder at PrefillBootstrapQueue.add; the
    incident-era model queues it, so the real code's client view differs right there."""
    from kvproof.checker.conform.report import replay_trace

    verdict = replay_trace(TRACES / "incident__no_cross_tenant_read.itf.json")
    assert verdict.verdict == "diverged"
    assert "outcome" in verdict.reason and "prefill_bootstrap_add" in verdict.reason


def test_a_harness_configured_unlike_the_trace_is_caught():
    """The mooncake trace holds R0's pages after the abort; SGLang with deferral off releases
    them at once, and the comparison must name that step and field."""
    from kvproof.checker.conform.harness import Harness, Options
    from kvproof.checker.conform.replay import run_on_code
    from kvproof.checker.traces import read_trace

    trace = read_trace(TRACES / "sglang-0.5.23-mooncake__no_write_after_release.itf.json")
    spec = trace.machine.spec
    reqs = [(spec.k.tenant[r], spec.pages(r), spec.over_long(r)) for r in range(spec.k.R)]
    h = Harness(reqs, spec.cfg.decode_pages, spec.cfg.prefill_pages, Options(deferred_release=False))
    try:
        result = run_on_code(trace.machine, h, trace.actions)
    finally:
        h.close()
    assert not result.agrees
    step = trace.labels()[result.diverged_at - 1]
    assert step.startswith("decode_abort") and "held: model {R0}, SGLang {}" in result.reason


def test_the_abort_arms_a_generation_before_it_is_sent():
    from kvproof.checker.conform.replay import harness_for
    from kvproof.checker.traces import read_trace

    trace = read_trace(TRACES / "sglang-0.5.23-mooncake__no_write_after_release.itf.json")
    h = harness_for(trace.scenario, trace.machine.spec)
    try:
        for aid in trace.actions:
            inst = trace.machine.instances[aid]
            getattr(h, inst.name)(*inst.args)
        assert h.aborts and all(g is not None for _, g in h.aborts)
        assert h.anomalies() == []
    finally:
        h.close()


@pytest.mark.parametrize("name", FAMILY)
def test_random_sequences_agree_with_the_real_code(name):
    from kvproof.checker.conform.fuzz import fuzz_scenario
    from kvproof.spec.scenario import builtin

    report = fuzz_scenario(builtin(name), sequences=1000)
    assert report.agrees, (report.disagreement, report.result and report.result.reason)
    assert report.sequences >= 1000


def test_cli_conform_replays_a_trace(capsys):
    from kvproof.checker.cli import main

    path = TRACES / "sglang-0.5.23-deferral-off__no_cross_tenant_read.itf.json"
    code = main(["conform", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("reproduced") and "no_cross_tenant_read fails in the code" in out


def test_cli_conform_exits_1_on_a_divergence(capsys):
    from kvproof.checker.cli import main

    code = main(["conform", str(TRACES / "incident__rejected_never_succeeds.itf.json")])
    assert code == 1 and "diverged" in capsys.readouterr().out
