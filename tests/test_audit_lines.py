"""``kvproof audit`` on a table of real launch lines: each read as the engine reads it, with the
engine parser's verdict (accepts or refuses) and kvproof's exit code pinned.

Every line is read through the generated flag table (no engine needed); when the engine is
installed at the audited version, the engine's own parser reads it too and the two readings must
agree (refused or not; the same settings), and the committed table must equal the one generated
from the installed parser.  Sources: the engines' docs, Dynamo's and llm-d's examples, written in
the form each documents (the model names are the docs' own)."""

import json

import pytest

from kvproof.checker.cli import main
from kvproof.checker.audit.flagtable import ParserRefused
from kvproof.spec.sglang import launch as SL
from kvproof.spec.vllm import launch as VL

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
SG = ["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct"]
VS = ["vllm", "serve", "Qwen/Qwen3-0.6B", "--port", "8100", "--enforce-eager"]
PD_DOC = "SGLang docs, PD disaggregation (docs/advanced_features/pd_disaggregation.md)"
NIXL_DOC = "vLLM docs, NixlConnector usage (docs/features/nixl_connector_usage.md)"

# (id, engine, launch words ({yaml} is the config file written by the test), config YAML, source,
#  the engine parser's verdict, kvproof's exit code (bounds unknown, no traces))
LINES = [
    ("sg-doc-prefill", "sglang==0.5.23", [*SG, "--disaggregation-mode", "prefill", "--disaggregation-ib-device",
                                          "mlx5_roce0"], None, PD_DOC, "accepts", 1),
    ("sg-doc-decode", "sglang==0.5.23", [*SG, "--disaggregation-mode", "decode", "--port", "30001", "--base-gpu-id",
                                         "1", "--disaggregation-ib-device", "mlx5_roce0"], None, PD_DOC, "accepts", 1),
    # was a false "not exposed": argparse takes an unambiguous prefix, as SGLang does
    ("sg-prefix-mod", "sglang==0.5.23", [*SG, "--disaggregation-mod", "decode"], None, PD_DOC + ", a prefix",
     "accepts", 1),
    ("sg-serve", "sglang==0.5.23", ["sglang", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--disaggregation-mode",
                                    "decode"], None, "SGLang docs, `sglang serve <model>` (cli/serve.py)", "accepts", 1),
    # was a false "not exposed": the mode is in the config file
    ("sg-config", "sglang==0.5.23", [*SG[:3], "--config", "{yaml}"],
     "model-path: meta-llama/Llama-3.1-8B-Instruct\ndisaggregation-mode: decode\ntp-size: 1\n",
     "SGLang docs, server arguments: --config config.yaml", "accepts", 1),
    ("sg-dp-attention", "sglang==0.5.23", [*SG, "--disaggregation-mode", "decode", "--tp", "2", "--dp-size", "2",
                                           "--enable-dp-attention"], None, PD_DOC + ", DeepSeek with DP attention",
     "accepts", 1),
    ("sg-nixl", "sglang==0.5.23", [*SG, "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"],
     None, PD_DOC + ", NIXL backend", "accepts", 2),
    ("sg-dynamo", "sglang==0.5.23", ["python3", "-m", "dynamo.sglang", "--model-path", "Qwen/Qwen3-0.6B",
                                     "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl"],
     None, "Dynamo docs, SGLang disaggregated serving (examples/backends/sglang)", "accepts", 2),
    ("sg-env-prefix", "sglang==0.5.23", ["env", "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT=90", *SG,
                                         "--disaggregation-mode", "decode"], None, PD_DOC + ", environment", "accepts", 1),
    ("sg-not-pd", "sglang==0.5.23", SG, None, "SGLang docs, quick start", "accepts", 0),
    ("sg-bad-choice", "sglang==0.5.23", [*SG, "--disaggregation-mode", "both"], None, PD_DOC + ", a typo",
     "refuses", 3),
    ("sg-unknown-flag", "sglang==0.5.23", [*SG, "--disaggregation-mode", "decode", "--disaggregation-secret-fix", "on"],
     None, "a flag SGLang 0.5.23 does not have", "refuses", 3),
    ("vl-doc-nixl", "vllm==0.33.0", [*VS, "--kv-transfer-config", NIXL], None, NIXL_DOC, "accepts", 1),
    # was a false "not exposed": vLLM takes underscores in a flag's name (an llm-d example writes it so)
    ("vl-underscores", "vllm==0.33.0", [*VS, "--kv_transfer_config", NIXL], None,
     "llm-d examples (guides/pd-disaggregation), --kv_transfer_config", "accepts", 1),
    # was a false "not exposed": the connector is in the config file
    ("vl-config", "vllm==0.33.0", ["vllm", "serve", "Qwen/Qwen3-0.6B", "--config", "{yaml}"],
     "port: 8100\nkv-transfer-config:\n  kv_connector: NixlConnector\n  kv_role: kv_both\n",
     "vLLM docs, serve args: --config config.yaml (nested YAML)", "accepts", 1),
    # was read as tensor parallel 1: --enable-expert-parallel takes no value
    ("vl-ep-tp2", "vllm==0.33.0", [*VS, "--enable-expert-parallel", "-tp", "2", "--kv-transfer-config", NIXL], None,
     "vLLM docs, expert parallel deployment", "accepts", 2),
    ("vl-dotted", "vllm==0.33.0", [*VS, "--kv-transfer-config.kv_connector", "NixlConnector",
                                   "--kv-transfer-config.kv_role", "kv_both"], None,
     "vLLM docs, CLI: --json-arg.key value", "accepts", 1),
    ("vl-api-server", "vllm==0.33.0", ["python", "-m", "vllm.entrypoints.openai.api_server", "--model",
                                       "Qwen/Qwen3-0.6B", "--kv-transfer-config", NIXL], None,
     "vLLM docs, OpenAI-compatible server (module form)", "accepts", 1),
    ("vl-grpc", "vllm==0.33.0", ["python", "-m", "vllm.entrypoints.launchers.grpc_server", "--model", "Qwen/Qwen3-0.6B",
                                 "--kv-transfer-config", NIXL], None, "vLLM 0.33.0, launchers/grpc_server.py main()",
     "accepts", 1),
    ("vl-dynamo", "vllm==0.33.0", ["python3", "-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B", "--is-prefill-worker",
                                   "--kv-transfer-config", NIXL], None,
     "Dynamo docs, vLLM disaggregated serving (examples/backends/vllm)", "accepts", 2),
    ("vl-env-prefix", "vllm==0.33.0", ["VLLM_NIXL_SIDE_CHANNEL_PORT=5600", "CUDA_VISIBLE_DEVICES=1", *VS,
                                       "--kv-transfer-config", NIXL], None, NIXL_DOC + ", decoder line", "accepts", 1),
    ("vl-not-pd", "vllm==0.33.0", VS, None, "vLLM docs, quickstart", "accepts", 0),
    # KVTransferConfig keys 0.33.0 removed (older disaggregated-prefill examples)
    ("vl-kv-buffer-size", "vllm==0.33.0", [*VS, "--kv-transfer-config", json.dumps(
        {"kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_buffer_size": "1e1", "kv_port": "21001"})],
     None, "vLLM docs (older), P2P NCCL connector", "refuses", 3),
    ("vl-kv-rank", "vllm==0.33.0", [*VS, "--kv-transfer-config", json.dumps(
        {"kv_connector": "PyNcclConnector", "kv_role": "kv_producer", "kv_rank": 0, "kv_parallel_size": 2})],
     None, "vLLM examples (older), disaggregated prefill", "refuses", 3),
    ("vl-kv-ip", "vllm==0.33.0", [*VS, "--kv-transfer-config", json.dumps(
        {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_ip": "10.0.0.1"})], None,
     "a removed KVTransferConfig key", "refuses", 3),
    ("vl-bad-role", "vllm==0.33.0", [*VS, "--kv-transfer-config", json.dumps(
        {"kv_connector": "NixlConnector", "kv_role": "decoder"})], None, "a kv_role vLLM does not have", "refuses", 3),
]


def _words(line, yaml_text, tmp_path):
    if yaml_text is None:
        return list(line)
    f = tmp_path / "config.yaml"
    f.write_text(yaml_text)
    return [w.replace("{yaml}", str(f)) for w in line]


@pytest.mark.parametrize("name,engine,line,yaml_text,source,parser,code", LINES, ids=[x[0] for x in LINES])
def test_each_line_gets_its_exit_code_through_the_generated_table(capsys, tmp_path, name, engine, line, yaml_text,
                                                                     source, parser, code):
    words = _words(line, yaml_text, tmp_path)
    got = main(["audit", "--no-traces", "--reader", "table", engine, "--", *words])
    out, err = capsys.readouterr()
    assert got == code, (out, err)
    if parser == "refuses":
        assert out == "" and len(err.splitlines()) == 1 and "refuses this line" in err
    else:
        assert err == "" and out.splitlines()[-1].startswith(f"kvproof audit: {engine}") and f"exit {code}" in out


def test_the_four_false_negatives_are_no_longer_not_exposed(capsys, tmp_path):
    for name in ("sg-prefix-mod", "sg-config", "vl-underscores", "vl-config"):
        _, engine, line, yaml_text, *_ = next(x for x in LINES if x[0] == name)
        assert main(["audit", "--no-traces", "--reader", "table", engine, "--", *_words(line, yaml_text, tmp_path)]) == 1
        capsys.readouterr()


def test_json_is_one_object_with_the_reading_the_verdicts_and_the_summary(capsys):
    code = main(["audit", "--no-traces", "--json", "--reader", "table", "vllm==0.33.0", "--", *VS,
                 "--kv_transfer_config", NIXL, "--frobnicate-nothing-here" if False else "--max-model-len", "8192"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["exit_code"] == 1 and doc["verdict"] == "exposed"
    assert doc["reading"]["values"]["kv_transfer_config"] == json.loads(NIXL)
    assert doc["reading"]["launcher"] == "vllm serve" and "max_model_len" in doc["reading"]["values"]
    assert {h["claim"] for h in doc["hazards"]} == {"no_cross_tenant_read", "no_source_free_while_read"}
    assert all(h["remedies"] or h["no_remedy"] for h in doc["hazards"])
    assert {(c["member"], c["claim"]) for c in doc["claims"] if c["verdict"] == "violated"} >= \
        {("lease", "no_cross_tenant_read")}
    assert doc["summary"]["command"] == "audit" and doc["summary"]["exit_code"] == 1
    assert doc["summary"]["mismatched"] >= 2


def test_an_unread_config_file_is_cannot_decide_never_not_exposed(capsys, tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("disaggregation-mode: decode\n")
    code = main(["audit", "--no-traces", "--reader", "table", "sglang==0.5.23", "--", *SG, f"--config={f}"])
    out = capsys.readouterr().out
    assert code == 2 and "not read by SGLang" in out and "verdict: cannot decide" in out


def _reading(mod, line, engine, reader, tmp_path, yaml_text):
    words = _words(line, yaml_text, tmp_path)
    version = engine.partition("==")[2]
    launcher, argv = mod.split(words[words.index("env") + 2:] if words[0] == "env" else
                               [w for w in words if "=" not in w or w.startswith("-") or w.startswith("{")])
    try:
        if mod is SL:
            r = mod.read(argv, version, dynamo=launcher.endswith("dynamo.sglang"), reader=reader)
        else:
            r = mod.read(argv, version, launcher, reader=reader)
    except ParserRefused as e:
        return ("refused", str(e).split(":")[0])
    return ("read", {k: (json.dumps(v, sort_keys=True, default=str) if k in ("kv_transfer_config",) else
                         v if isinstance(v, (int, float, str, bool)) or v is None else "<object>")
                     for k, v in r.values.items()}, r.passthrough)


def _installed(mod, engine):
    return mod.engine_installed(engine.partition("==")[2])


@pytest.mark.parametrize("engine,mod", [("sglang==0.5.23", SL), ("vllm==0.33.0", VL)])
def test_the_engine_and_the_table_read_every_line_alike(tmp_path, engine, mod):
    if not _installed(mod, engine):
        pytest.skip(f"{engine} is not installed: the table path alone is tested")
    for name, e, line, yaml_text, *_, parser, _code in LINES:
        if e != engine:
            continue
        got = {r: _reading(mod, line, engine, r, tmp_path, yaml_text) for r in ("engine", "table")}
        assert got["engine"][0] == ("refused" if parser == "refuses" else "read"), (name, got)
        if parser == "refuses":
            assert got["table"][0] == "refused", name
            continue
        eng, tab = got["engine"][1], got["table"][1]
        assert set(eng) == set(tab), (name, set(eng) ^ set(tab))
        plain = {k for k in eng if eng[k] != "<object>" and tab[k] != "<object>"}
        assert {k: eng[k] for k in plain} == {k: tab[k] for k in plain}, name
        assert got["engine"][2] == got["table"][2], name


@pytest.mark.parametrize("engine,mod,gen", [("sglang==0.5.23", SL, "kvproof.spec.sglang.gen_flags"),
                                            ("vllm==0.33.0", VL, "kvproof.spec.vllm.gen_flags")])
def test_the_committed_table_is_the_one_generated_from_the_installed_parser(engine, mod, gen):
    import importlib

    from kvproof.checker.audit.flagtable import read_table

    if not _installed(mod, engine):
        pytest.skip(f"{engine} is not installed")
    fresh = json.loads(json.dumps(importlib.import_module(gen).engine_table(), sort_keys=True, default=str))
    committed = read_table(mod.table_path(engine.partition("==")[2]))
    # a default computed per process (a random engine id, a port) is not compared
    strip = lambda t: [{k: v for k, v in a.items() if k != "default"} for a in t["actions"]]  # noqa: E731
    assert strip(fresh) == strip(committed)
    assert fresh.get("json_configs") == committed.get("json_configs")
