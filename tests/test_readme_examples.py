"""The command examples of the README and of the docs site, run as written (issue 18: "the
README's command examples are run by a test and their output shape checked").

Each line below must appear verbatim in the README or on a docs page; it is run in a scratch copy of the files it
names (so nothing in the checkout is written), and its exit code and the shape of its output are
checked.  The examples left out take longer than a test should (the whole catalogue, ``prove``,
``conform`` on SGLang's code, a 10,000-request simulation, BMC to depth 20) or name placeholder
files (``T.itf.json``); the flags of every example are checked by
``test_cli_everyday.test_every_command_and_flag_the_readme_shows_exists``.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from tests import user_docs

from kvproof.checker.cli.commands import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = user_docs.text()  # the README and every docs page

CLOSING = "kvproof {}: "  # the closing line every verdict-giving command ends with

# (the README's line, its exit code, what its output must show)
EXAMPLES = [
    ("kvproof --version", 0, ["kvproof "]),
    ("kvproof check incident", 0, ["incident", CLOSING.format("check") + "1 scenario"]),
    ("kvproof show traces/abort-race__no_cross_tenant_read.itf.json", 0, ["✗ no_cross_tenant_read fails after step"]),
    ("kvproof show traces/abort-race__no_cross_tenant_read.itf.json --step 13", 0, ["13"]),
    ("kvproof show traces/abort-race__no_cross_tenant_read.itf.json --step 13 --full", 0, ["owner"]),
    ("kvproof replay traces/abort-race__no_cross_tenant_read.itf.json", 0,
     ["reproduced: 15 steps replay exactly", CLOSING.format("replay")]),
    ("kvproof check --variant examples/variant/in_order_completion.py", 0, [CLOSING.format("check")]),
    ("kvproof show --variant examples/variant/in_order_completion.py "
     "traces/in-order-completion__no_cross_tenant_read.itf.json", 0, ["fails after step"]),
    ("kvproof replay --variant examples/variant/in_order_completion.py "
     "traces/in-order-completion__no_cross_tenant_read.itf.json", 0, ["reproduced"]),
    ("kvproof check --variant examples/variant/early_release.py examples/variant/early_release.toml", 0,
     [CLOSING.format("check")]),
    ("kvproof report incident -o report.html", 0, ["wrote report.html", CLOSING.format("report")]),
    ("kvproof check incident --coverage", 0, ["never fired: ", CLOSING.format("check")]),
    ("kvproof graph incident -o incident.dot", 0, ["wrote incident.dot: 68 states, 110 transitions"]),
    ("kvproof show traces/vllm-pull-heartbeat-stall__no_cross_tenant_read.itf.json", 0, ["fails after step"]),
    ("kvproof validate examples/validate/v0.5.22-clean.jsonl", 0, ["explained: "]),
    ("kvproof validate examples/validate/incident.jsonl", 1, ["violation: decode_prealloc"]),
    ("kvproof validate examples/validate/vllm-clean.jsonl", 0, ["explained: ", "249 of 249 events"]),
    ("kvproof validate examples/validate/vllm-lease-expiry.jsonl", 1,
     ["vllm-lease-expiry.jsonl:6: violation: decode_start_load_kv - every behaviour that explains the log up to "
      "here breaks no_source_free_while_read", "the explanation (10 steps) written to "
      "examples/validate/vllm-lease-expiry__no_source_free_while_read.itf.json",
      "kvproof validate: 1 log, 11 events: 0 matched, 1 mismatched, 0 inconclusive; exit 1"]),
    ("kvproof validate examples/validate/vllm-push-window.jsonl", 1,
     ["vllm-push-window.jsonl:6: possible violation: prefill_reap_expired_lease - some behaviour consistent",
      "breaks no_source_free_while_read (after this event)", "the explanation (10 steps) written to"]),
    ("kvproof validate examples/validate/vllm-push-window.jsonl --certain-only", 0,
     ["vllm-push-window.jsonl: explained:", "possible violation of no_source_free_while_read at "
      "examples/validate/vllm-push-window.jsonl:6"]),
    ("kvproof audit vllm==0.33.0 --arrival-bound 2 --transfer-bound 60 -- vllm serve Qwen/Qwen3-0.6B --port 8100 "
     "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}'", 1,
     ["checked: audit-vllm-0.33.0-lease (14,332 states), audit-vllm-0.33.0-abort (7,042 states)",
      "removed by: kv_connector_extra_config.kv_lease_duration=63", "verdict: exposed"]),
    ("kvproof audit sglang==0.5.23 --manifest examples/deployments/sglang-pd.yaml --no-traces", 1,
     ["removed by: decode: SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT=61 (above two transfer calls)",
      "verdict: exposed", "exit 1: exposed"]),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A copy of what the examples read: the traces, the example variants and logs."""
    root = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "traces", root / "traces", ignore=shutil.ignore_patterns("proofs"))
    shutil.copytree(ROOT / "examples", root / "examples")
    return root


@pytest.mark.parametrize("line, code, shows", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_a_readme_example_runs_as_written(line, code, shows, scratch, monkeypatch, capsys):
    assert line in DOCS, "neither the README nor a docs page shows this example any more: update the list"
    monkeypatch.chdir(scratch)
    monkeypatch.setenv("COLUMNS", "120")
    argv = shlex.split(line)[1:]
    got = main(argv)
    out, err = capsys.readouterr()
    assert got == code, (line, out[-400:], err)
    for text in shows:
        assert text in out + err, (line, text, out[-400:], err)
    if any(s.startswith("kvproof ") and s.endswith(": ") for s in shows):
        assert out.rstrip().splitlines()[-1].startswith("kvproof "), "the closing line ends the output"
