"""The shipped example protocol (``examples/protocols/minipd/``), registered in this process, runs
through check, show, replay, report, prove and certify without any change to model/ or checker/;
its counts are pinned, and a mutant of its fix is caught."""

import json

import pytest

from kvproof.checker.cli import main
from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtins, load_scenario

from .minipd import ABORTED, EXAMPLE, MiniPd, MiniPdConfig, owned_by, registered

SCENARIOS = EXAMPLE / "kvproof_minipd" / "scenarios"
EARLY, DEFERRED = str(SCENARIOS / "minipd-early-free.toml"), str(SCENARIOS / "minipd-deferred-free.toml")


@pytest.fixture(autouse=True)
def minipd():
    with registered() as p:
        yield p


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_its_catalogue_joins_the_built_in_one():
    names = [sc.name for sc in builtins()]
    assert names[-2:] == ["minipd-deferred-free", "minipd-early-free"] and "incident" in names
    sc = load_scenario(EARLY)
    assert sc.family == "minipd" and sc.config == MiniPdConfig(requests=2, free_on_abort=True)


def test_check_show_replay_and_report(capsys, tmp_path):
    code, out, _ = run(capsys, "check", EARLY, DEFERRED, "--traces", str(tmp_path), "--json")
    assert code == 0, out
    early, deferred = json.loads(out)["scenarios"]
    assert (early["stats"]["states"], early["stats"]["transitions"]) == (63, 90)
    assert (deferred["stats"]["states"], deferred["stats"]["transitions"]) == (68, 80)
    assert [(r["invariant"], r["verdict"], r["depth"]) for r in early["results"]] == [
        ("decode_reads_only_own_kv", "violated", 8), ("sometimes_abort_mid_transfer", "reached", 3),
        ("sometimes_request_decodes", "reached", 4)]
    assert [r["verdict"] for r in deferred["results"]] == ["verified", "reached", "reached"]
    trace = tmp_path / "minipd-early-free__decode_reads_only_own_kv.itf.json"
    assert [p.name for p in tmp_path.iterdir()] == [trace.name]
    code, out, _ = run(capsys, "show", str(trace))
    assert code == 0
    steps = [line.split("   [")[0] for line in out.splitlines() if line.startswith("Step ")]
    assert steps == ["Step 0  initial state", "Step 1  decode_prealloc(req=R0)", "Step 2  prefill_send_kv(req=R0)",
                     "Step 3  decode_abort(req=R0)", "Step 4  decode_prealloc(req=R1)",
                     "Step 5  prefill_send_kv(req=R1)", "Step 6  transfer_write_lands(req=R1)",
                     "Step 7  transfer_write_lands(req=R0)", "Step 8  decode_commit(req=R1)"]
    assert "  data: R1 → R0\n" in out and "  got[R1]: none → R0\n" in out
    assert "✗ decode_reads_only_own_kv fails after step 8" in out
    code, out, _ = run(capsys, "replay", str(trace))
    assert code == 0 and out.startswith("reproduced: 8 steps replay exactly")
    code, out, _ = run(capsys, "report", EARLY, "-o", str(tmp_path / "r.html"))
    assert code == 0 and (tmp_path / "r.html").read_text().count('<section class="counterexample"') == 1


def test_prove_and_certify(capsys, tmp_path):
    code, out, _ = run(capsys, "prove", EARLY, DEFERRED, "--certificates", str(tmp_path), "--traces", str(tmp_path / "t"),
                       "--lemma-seconds", "30", "--induction-seconds", "30")
    assert code == 0, out
    assert [p.name for p in tmp_path.glob("*.smt2")] == ["minipd-deferred-free.smt2"]
    code, out, _ = run(capsys, "certify", str(tmp_path / "minipd-deferred-free.smt2"), "--scenario", DEFERRED)
    assert code == 0 and "1 of 1 certificates check" in out


class ReleaseUnderWrite(MiniPd):
    """A mutant of the fix: the held page is freed without waiting for the write."""

    def decode_release_deferred(self, s, n, r):
        """Free the aborted request's page whether or not its write is in flight."""
        with s.widen((s.phase[r] == ABORTED) & (s.owner == owned_by(r))):
            super().decode_release_deferred(s, n, r)


def _violates(spec) -> tuple[bool, int]:
    """Whether ``spec`` reaches a state breaking the invariant (complete search), and its depth."""
    m = Machine(spec)
    i = [c.name for c in m.claims].index("decode_reads_only_own_kv")
    ex = explore(m, claims=[i])
    assert ex.complete
    return i in ex.hit_at, ex.stats.depth


def test_the_fix_is_the_wait_a_mutant_without_it_is_caught():
    cfg = MiniPdConfig(requests=2)
    assert _violates(MiniPd(cfg)) == (False, 10)
    assert _violates(ReleaseUnderWrite(cfg))[0]
    assert _violates(MiniPd(MiniPdConfig(requests=1, free_on_abort=True)))[0] is False  # no next request to hurt


@pytest.mark.parametrize("text, message", [
    ("[config]\nrequests = 4\n", "[config]: requests: expected a whole number in 1..3, got 4"),
    ("[config]\nfree_on_abrt = true\n", "[config].free_on_abrt: expected one of the settings requests, "
                                        "free_on_abort; did you mean free_on_abort?"),
])
def test_a_bad_config_table_is_one_line_and_exit_3(capsys, tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(f'name = "bad"\nprotocol = "minipd"\n{text}')
    code, out, err = run(capsys, "check", str(path))
    assert code == 3 and out == "" and err == f"kvproof: error: {path}: {message}\n"
