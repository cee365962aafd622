"""``check --coverage`` (transitions by action, actions that never fired) and ``kvproof graph``."""

import json
import subprocess
import sys

import networkx as nx
import pytest

from kvproof.checker.explicit import coverage as cov_mod
from kvproof.checker.cli.commands import EXIT_BAD_INPUT, EXIT_OK, main
from kvproof.checker.explicit.coverage import action_coverage, state_graph, write_graph
from kvproof.checker.explicit.run import check_scenario
from kvproof.model import action
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin

from .minipd import MiniPd, MiniPdConfig, owned_by


class DeadMiniPd(MiniPd):
    """The example protocol with an action whose guard can never hold: a modelling bug to report."""

    @action("decode", "req")
    def decode_steal(self, s, n, r):
        """Take a page that is both free and held: never enabled."""
        s.require((s.owner == 0) & (s.owner == owned_by(r)))
        n.owner = 0


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_one_request_fires_each_action_as_counted_by_hand_and_a_dead_action_is_listed():
    """One request, the page held after an abort until the write is done: reserve (1), then send
    or abort (1 + 1); from sent, land or abort (1 + 1); from landed, commit or abort (1 + 1); an
    abort in flight then lands (1) on the state an abort after landing reaches; the two held
    pages are released (2): 10 states, 10 transitions, and the impossible action has none."""
    cov = action_coverage(Machine(DeadMiniPd(MiniPdConfig(requests=1))))
    assert cov.fired == {"decode_prealloc": 1, "prefill_send_kv": 1, "transfer_write_lands": 2, "decode_commit": 1,
                         "decode_abort": 3, "decode_release_deferred": 2, "decode_steal": 0}
    assert (cov.states, cov.transitions, cov.complete) == (10, 10, True)
    assert cov.never_fired == ["decode_steal"]


def test_two_requests_counts_add_up_to_the_checks_transitions():
    m = Machine(MiniPd(MiniPdConfig(requests=2, free_on_abort=True)))
    cov = action_coverage(m)
    assert sum(cov.fired.values()) == cov.transitions == 90
    assert cov.never_fired == ["decode_release_deferred"]  # ruled out by free_on_abort
    assert cov.fired["decode_prealloc"] > 2  # reserved again after each free, from several states


def test_check_coverage_text_and_json_pin_the_incidents_counts(capsys):
    code, out, _ = run(capsys, "check", "incident", "--no-traces", "--coverage", "--json")
    assert code == EXIT_OK
    doc = json.loads(out)["scenarios"][0]
    cov = doc["coverage"]
    assert (cov["states"], cov["transitions"]) == (doc["stats"]["states"], doc["stats"]["transitions"]) == (68, 110)
    fired = {k: v for k, v in cov["actions"].items() if v}
    assert fired == {"prefill_bootstrap_add": 38, "prefill_forward": 6, "decode_prealloc": 9,
                     "decode_send_metadata": 9, "kv_transfer_write": 14, "kv_write_lands": 22,
                     "prefill_transfer_done": 6, "decode_commit": 6}
    assert "decode_abort" in cov["never_fired"] and "kv_write_lands" not in cov["never_fired"]
    code, out, _ = run(capsys, "check", "incident", "--no-traces", "--coverage")
    assert "incident: coverage: 110 transitions over 68 states, by action" in out
    assert "  kv_write_lands                      22\n" in out
    never = next(line for line in out.splitlines() if line.startswith("  never fired: "))
    assert never.split(": ")[1].split(", ") == cov["never_fired"]
    code, out, _ = run(capsys, "check", "incident", "--no-traces")
    assert "coverage:" not in out


def test_coverage_refuses_the_symbolic_engine(capsys):
    code, out, err = run(capsys, "check", "incident", "--engine", "bmc", "--coverage")
    assert code == EXIT_BAD_INPUT and "--coverage counts the explicit engine's transitions" in err


def test_a_plain_check_does_not_load_coverage():
    code = ("import sys; from kvproof.checker.cli.commands import main; main(['check', 'incident', "
            "'--no-traces', '--quiet']); print('kvproof.checker.explicit.coverage' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize("name", ["incident", "pr-41404"])
def test_the_graph_has_the_checks_states_and_transitions(name):
    rep = check_scenario(builtin(name))
    g = state_graph(Machine(builtin(name).build()))
    assert (g.number_of_nodes(), g.number_of_edges()) == (rep.stats.states, rep.stats.transitions)
    assert dict(g.nodes[0]) == {"depth": 0, "initial": True}
    assert max(d for _, d in g.nodes(data="depth")) == rep.stats.depth


def test_graph_writes_dot_and_graphml_that_read_back(capsys, tmp_path):
    code, out, _ = run(capsys, "graph", "incident")
    assert code == EXIT_OK and out.startswith("digraph states {\n")
    edges = [line for line in out.splitlines() if " -> " in line]
    assert len(edges) == 110 and sum(1 for line in out.splitlines() if "[depth=" in line) == 68
    assert '  0 -> 1 [label="prefill_bootstrap_add(req=R0)"];' in edges
    path = tmp_path / "g.graphml"
    code, out, err = run(capsys, "graph", "incident", "--format", "graphml", "-o", str(path))
    assert code == EXIT_OK and out == "" and err == f"wrote {path}: 68 states, 110 transitions\n"
    g = nx.read_graphml(path, force_multigraph=True)
    assert (g.number_of_nodes(), g.number_of_edges()) == (68, 110)
    assert {d["action"] for _, _, d in g.edges(data=True)} >= {"kv_write_lands(req=R0, chunk=0)"}


def test_graph_refuses_a_scenario_over_the_limit_in_one_line(capsys, monkeypatch):
    monkeypatch.setattr(cov_mod, "GRAPH_LIMIT", 100)
    code, out, err = run(capsys, "graph", "pr-41404")  # 317 states
    assert code == EXIT_BAD_INPUT and out == ""
    assert err == ("kvproof: error: graph: pr-41404 has more than 100 states, the limit for a graph export; "
                   "kvproof check --coverage counts its transitions by action instead\n")
    code, out, err = run(capsys, "graph", "incident", "--format", "svg")
    assert code == EXIT_BAD_INPUT


def test_write_graph_returns_text_without_a_path():
    g = state_graph(Machine(DeadMiniPd(MiniPdConfig(requests=1))))
    text = write_graph(g, None, "dot")
    assert text.count(" -> ") == 10 and '0 [depth=0, shape=doublecircle];' in text
