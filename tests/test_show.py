"""``kvproof show``: it replays before it prints, keeps a 64-page map readable, and ``--full``."""

import json
import re
from pathlib import Path

import pytest

from kvproof.checker.cli.commands import EXIT_BAD_INPUT, EXIT_OK, main
from kvproof.checker.report.render import render_trace, to_text
from kvproof.checker.traces import Trace
from kvproof.model.machine import Machine
from kvproof.model.narration import rename
from kvproof.model.replay import run_actions
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.simulate import simulation_scenario

TRACES = Path(__file__).resolve().parents[1] / "traces"
RACE = TRACES / "abort-race__no_cross_tenant_read.itf.json"

# the abort race as `kvproof simulate abort-race --fault-weight 0.3` found it, sliced to 16 steps,
# on the simulator's pool of 64 decode pages
SIMULATED = ["prefill_bootstrap_add(req=R3)", "decode_prealloc(req=R3)", "decode_send_metadata(req=R3)",
             "prefill_forward(req=R3)", "kv_transfer_write(req=R3, chunk=0)", "decode_abort(req=R3)",
             "decode_prealloc(req=R6)", "decode_send_metadata(req=R6)", "prefill_bootstrap_add(req=R6)",
             "prefill_forward(req=R6)", "prefill_handle_abort(req=R3)", "kv_transfer_write(req=R6, chunk=0)",
             "kv_write_lands(req=R6, chunk=0)", "prefill_transfer_done(req=R6)", "kv_write_lands(req=R3, chunk=0)",
             "decode_commit(req=R6)"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _cut(tmp_path, states: int) -> Path:
    doc = json.loads(RACE.read_text())
    doc["states"] = doc["states"][:states]
    out = tmp_path / "cut.itf.json"
    out.write_text(json.dumps(doc))
    return out


def test_show_refuses_a_trace_cut_short(capsys, tmp_path):
    """Cut to 5 states, the file replays, but its claim does not fail there: no 'fails after step 4'."""
    cut = _cut(tmp_path, 5)
    code, out, err = run(capsys, "show", str(cut))
    assert code == EXIT_BAD_INPUT and out == ""
    assert err == (f"kvproof: error: {cut}: no_cross_tenant_read does not fail at its last state (step 4) on "
                   f"replay: the trace was cut short or edited; not shown (kvproof replay {cut} says more)\n")
    code, out, err = run(capsys, "show", str(cut), "--format", "json")
    assert code == EXIT_BAD_INPUT and out == ""


def test_show_refuses_stored_states_that_replay_does_not_give(capsys, tmp_path):
    doc = json.loads(RACE.read_text())
    doc["states"][3]["p_phase"][0] = "sending" if doc["states"][3]["p_phase"][0] != "sending" else "new"
    bad = tmp_path / "edited.itf.json"
    bad.write_text(json.dumps(doc))
    code, out, err = run(capsys, "show", str(bad))
    assert code == EXIT_BAD_INPUT and out == ""
    assert f"{bad}: the stored states do not match replay at step 3" in err and err.count("\n") == 1


def test_show_prints_a_trace_that_replays(capsys):
    code, out, _ = run(capsys, "show", str(RACE))
    assert code == EXIT_OK and "✗ no_cross_tenant_read fails after step 15" in out


def test_show_full_prints_every_field_of_the_state_at_the_step(capsys):
    code, out, _ = run(capsys, "show", str(RACE), "--step", "6", "--full")
    assert code == EXIT_OK
    head, full = out.split("State after step 6 (every field)\n")
    assert "Step 6  " in head and "Step 7" not in out
    rows = [re.split(r"\s{2,}", line.strip()) for line in full.splitlines()]
    values = {r[0]: r[1] for r in rows if len(r) == 2}
    assert len(rows) == len(values) == 36  # every field of the abort race's state, one line each
    assert values["owner[p0]"] == "R0@room0" and values["wr[R0@room0, P0, chunk 0]"] == "in_flight"
    assert values["src_owner[q0]"] == "R0@room0" and values["src_owner[q1]"] == "free"
    assert values["d_phase[R1@room1]"] == "new"
    code, out, _ = run(capsys, "show", str(RACE), "--step", "6")
    assert "every field" not in out
    code, out, _ = run(capsys, "show", str(RACE), "--step", "6", "--full", "--format", "json")
    record = json.loads(out)["steps"][0]
    state, names = record["state"], record["names"]  # JSON keeps the state's labels, and says their names
    assert state["owner[p0]"] == "R0" and names == {"R0": "R0@room0", "R1": "R1@room1"}
    assert {rename(k, names): rename(str(v), names) for k, v in state.items()} == values
    assert "initial_state" not in json.loads(out)
    code, out, err = run(capsys, "show", str(RACE), "--full", "--format", "mermaid")
    assert code == EXIT_BAD_INPUT and "--full applies to --format text and json, not mermaid" in err


@pytest.fixture(scope="module")
def simulated() -> Trace:
    sc = simulation_scenario(builtin("abort-race"), 64, 8)
    machine = Machine(sc.build())
    aid = {machine.label(i.aid): i.aid for i in machine.instances}
    actions = [aid[label] for label in SIMULATED]
    return Trace(sc, machine, "decode_reads_only_own_pages", "counterexample", actions, run_actions(machine, actions))


def test_a_64_page_map_shows_the_pages_that_matter_and_counts_the_rest(simulated):
    text = to_text(render_trace(simulated), width=100)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100
    step0 = lines[lines.index("Step 0  initial state") + 1]
    assert step0 == "decode pages: all 64 owner free, holds ·"
    at = lines.index("Step 15  kv_write_lands(req=R3@room3, chunk=0)   [transfer]")
    assert lines[at + 4:at + 8] == ["decode pages  p0",
                                    "owner         R6@room6",
                                    "holds         R3@room3 (B) !!",
                                    "… 63 other decode pages unchanged by this step"]
    at = lines.index("Step 1  prefill_bootstrap_add(req=R3@room3)   [prefill]")
    assert lines[at + 2] == "decode pages: none of the 64 changed by this step"
    assert not any(line.strip() in ("…", "·") for line in lines)  # no collapsed columns


def test_a_wide_page_map_is_split_to_fit_and_a_small_one_is_whole(simulated):
    """Every page unlike the others (no previous map): the map is split into tables that each fit; at 400 columns the 64 pages fit in one table and are all shown."""
    from kvproof.checker.report.render import PageMapView
    from kvproof.model.narration import Cell, PageMap

    pm = PageMap("decode pages", tuple(f"p{j}" for j in range(64)),
                 (("owner", tuple(Cell(f"R{j}") for j in range(64))),
                  ("holds", tuple(Cell("·") for _ in range(64)))))
    text = to_text(PageMapView(pm), width=60)
    headers = [line for line in text.splitlines() if line.startswith("decode pages")]
    assert all(len(line) <= 60 for line in text.splitlines())
    assert [p for line in headers for p in line.split()[2:]] == list(pm.columns) and len(headers) > 1
    wide = to_text(PageMapView(pm), width=400).splitlines()
    assert len(wide) == 3 and wide[0].split()[-1] == "p63"
