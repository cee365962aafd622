"""``kvproof audit --manifest`` (a deployment's prefill/decode pair) and ``--metrics`` (a bound
from a Prometheus scrape).  The manifests keep the shapes of real ones, each named where it is
used; the scrapes are written by ``prometheus_client`` (the engines' metrics library) with the
histograms' real names, labels and buckets."""

import re

import pytest

from kvproof.checker.audit import manifest as mf
from kvproof.checker.audit.metrics import histogram_bound, read_exposition
from kvproof.checker.cli import main

# llm-d's guides/pd-disaggregation/modelserver/gpu/sglang/base/disaggregatedset.yaml: a
# DisaggregatedSet with a prefill and a decode role, each a LeaderWorkerSet spec; decode's pod has
# the routing sidecar as an init container (restartPolicy: Always) with no command; HF_TOKEN from
# a Secret.  Here on Mooncake (the guide uses NIXL, which the SGLang model does not cover).
LLMD_SGLANG = """\
apiVersion: disaggregatedset.x-k8s.io/v1
kind: DisaggregatedSet
metadata:
  name: pd-disagg-sglang
spec:
  slices: 2
  roles:
    - name: prefill
      spec:
        replicas: 1
        leaderWorkerTemplate:
          size: 1
          workerTemplate:
            metadata:
              labels: {llm-d.ai/role: prefill}
            spec:
              containers:
                - name: modelserver
                  command: [python3, -m, sglang.launch_server]
                  args: [--model-path=openai/gpt-oss-120b, --port=8000, --disaggregation-mode=prefill,
                         --tensor-parallel-size=1, --page-size=64{prefill_args}]
                  env:
                    - name: HF_TOKEN
                      valueFrom: {{secretKeyRef: {{key: HF_TOKEN, name: llm-d-hf-token}}}}
{prefill_env}
    - name: decode
      spec:
        replicas: 1
        leaderWorkerTemplate:
          size: 1
          workerTemplate:
            metadata:
              labels: {{llm-d.ai/role: decode}}
            spec:
              initContainers:
                - name: routing-proxy
                  image: ghcr.io/llm-d/llm-d-routing-sidecar
                  args: [--port=8000, --kv-connector=sglang]
                  restartPolicy: Always
              containers:
                - name: modelserver
                  command: [python3, -m, sglang.launch_server]
                  args: [--model-path=openai/gpt-oss-120b, --port=8200, --disaggregation-mode=decode,
                         --tensor-parallel-size=1{decode_args}]
                  env:
                    - name: SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE
                      value: "1"
{decode_env}
---
apiVersion: v1
kind: Service
metadata: {{name: pd-disagg-sglang}}
"""


def llmd(prefill_args="", decode_args="", prefill_env="", decode_env=""):
    text = LLMD_SGLANG.replace("{prefill_args}", prefill_args).replace("{decode_args}", decode_args)
    text = text.replace("{prefill_env}", prefill_env).replace("{decode_env}", decode_env)
    return text.replace("{{", "{").replace("}}", "}")


def env(name, value):
    return f"                    - name: {name}\n                      value: \"{value}\""


# kthena's examples/model-serving/gpu-pd-disaggregation.yaml: a ModelServing with roles prefill
# and decode, each container a `sh -c` script running vLLM's OpenAI server with NixlConnector.
KTHENA_VLLM = """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelServing
metadata: {name: vllm-qwen-06b}
spec:
  template:
    roles:
""" + "".join(f"""\
      - name: {role}
        replicas: 1
        entryTemplate:
          spec:
            containers:
              - name: {role}
                image: ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2
                command: ["sh", "-c"]
                args:
                  - |
                    python3 -m vllm.entrypoints.openai.api_server \\
                    --host "0.0.0.0" \\
                    --port "8000" \\
                    --model /models/Qwen3-0.6B \\
                    --served-model-name Qwen/Qwen3-0.6B \\
                    --kv-transfer-config '{{"kv_connector":"NixlConnector","kv_role":"{kv_role}"LEASE_{role}}}'
                env:
                  - name: VLLM_NIXL_SIDE_CHANNEL_PORT
                    value: "5558"
        workerReplicas: 0
""" for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")))


def kthena(prefill_lease=None, decode_lease=None):
    text = KTHENA_VLLM
    for role, lease in (("prefill", prefill_lease), ("decode", decode_lease)):
        extra = f',"kv_connector_extra_config":{{"kv_lease_duration":{lease}}}' if lease is not None else ""
        text = text.replace(f"LEASE_{role}", extra)
    return text


def run(capsys, tmp_path, *argv):
    code = main(["audit", "--no-traces", "--reader", "table", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, text, name="deploy.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def audit_manifest(capsys, tmp_path, engine, text, *after, before=()):
    """``kvproof audit ENGINE [BEFORE...] --manifest FILE [AFTER...]``, FILE holding ``text``."""
    return run(capsys, tmp_path, engine, *before, "--manifest", write(tmp_path, text), *after)


# -- reading manifests (no search) -----------------------------------------------------------------


def test_llmd_disaggregatedset_roles_sidecar_and_secret():
    import yaml

    m = mf.parse_manifests(list(yaml.safe_load_all(llmd())))
    by = {(c.role, c.name): c for c in m.containers}
    assert set(by) == {("prefill", "modelserver"), ("decode", "modelserver"), ("decode", "routing-proxy")}
    p = by["prefill", "modelserver"]
    assert p.commands == [["python3", "-m", "sglang.launch_server", "--model-path=openai/gpt-oss-120b", "--port=8000",
                           "--disaggregation-mode=prefill", "--tensor-parallel-size=1", "--page-size=64"]]
    assert p.unread_env == {"HF_TOKEN": "Secret llm-d-hf-token"} and p.role_from == "DisaggregatedSet role prefill"
    assert by["decode", "routing-proxy"].commands == [] and "no command" in by["decode", "routing-proxy"].unread[0]
    assert m.other == ["Service/pd-disagg-sglang"] and m.unreadable == []


def test_kthena_script_is_split_into_its_commands():
    import yaml

    m = mf.parse_manifests(list(yaml.safe_load_all(kthena())))
    c = next(c for c in m.containers if c.role == "decode")
    assert c.role_from == "ModelServing role decode" and len(c.commands) == 1
    assert c.commands[0][:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert c.commands[0][-1] == '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def test_env_configmaps_references_and_unknown_kinds():
    docs = [
        {"kind": "ConfigMap", "metadata": {"name": "pd-env"}, "data": {"MC_TRANSFER_TIMEOUT": "10"}},
        {"kind": "List", "items": [{"kind": "Deployment", "metadata": {"name": "p", "labels": {"app.kubernetes.io/component": "prefill"}},
                                    "spec": {"template": {"spec": {"containers": [{
                                        "name": "e", "envFrom": [{"configMapRef": {"name": "pd-env"}},
                                                                 {"configMapRef": {"name": "absent"}}],
                                        "env": [{"name": "TP", "value": "2"}],
                                        "command": ["sh", "-lc", "export A=1; exec python3 -m x --tp $(TP) --a $A && echo done"]}]}}}}]},
        {"kind": "RayService", "metadata": {"name": "ray"}, "apiVersion": "ray.io/v1",
         "spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}}}}},
    ]
    m = mf.parse_manifests(docs)
    (c,) = m.containers
    assert c.role == "prefill" and c.env["MC_TRANSFER_TIMEOUT"] == "10" and c.env_from["MC_TRANSFER_TIMEOUT"] == "ConfigMap pd-env"
    assert c.commands == [["python3", "-m", "x", "--tp", "2", "--a", "1"], ["echo", "done"]]
    assert any("ConfigMap absent" in u for u in c.unread)
    assert m.unreadable == ["RayService/ray (a kind kvproof does not read: ray.io/v1)"]
    assert m.other == ["ConfigMap/pd-env"]


def test_sglang_pair_takes_each_value_from_the_side_that_reads_it():
    """Ranks from both sides, MC_TRANSFER_TIMEOUT from prefill, the checksum only with both sides."""
    import yaml

    from kvproof.spec.sglang import audit as sg
    from kvproof.spec.sglang import audit_manifest as sm

    text = llmd(prefill_args=", --disaggregation-enable-kv-checksum", prefill_env=env("MC_TRANSFER_TIMEOUT", 10),
                decode_env=env("MC_TRANSFER_TIMEOUT", 100)).replace("--tensor-parallel-size=1]", "--tensor-parallel-size=2]")
    m = mf.parse_manifests(list(yaml.safe_load_all(text)))

    class Bad(Exception):
        pass

    p, d, notes, unread = mf.pair(m, sm.read_side(sg.RELEASES["0.5.23"], "table", Bad), Bad)
    assert [x.side for x in p + d] == ["prefill", "decode"] and unread == []
    assert any("sidecar" in n and "routing-proxy" in n for n in notes)
    s, rows, side_of = sm.merge(p[0], d[0])
    assert (s.peer_tp, s.attn_tp, s.ranks()) == (1, 2, (1, 2))
    assert s.transfer_timeout == 10.0 and s.source["transfer_timeout"].startswith("prefill")
    assert s.checksum is False and any("set on prefill only" in i for i in s.inert)
    assert any("MC_TRANSFER_TIMEOUT set on decode" not in i for i in s.inert)
    assert side_of(sg.CHECKSUM) is None  # attention TP 1 vs 2: the digest would be skipped
    assert side_of("SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1").startswith("decode: ")
    assert side_of("upgrade to sglang==0.5.23").startswith("both sides: ")
    both = llmd(prefill_args=", --disaggregation-enable-kv-checksum", decode_args=", --disaggregation-enable-kv-checksum")
    p, d, _, _ = mf.pair(mf.parse_manifests(list(yaml.safe_load_all(both))),
                         sm.read_side(sg.RELEASES["0.5.23"], "table", Bad), Bad)
    assert sm.merge(p[0], d[0])[0].checksum is True


# -- the command ----------------------------------------------------------------------------------


def test_sglang_manifest_pair_is_audited_with_sided_remedies(capsys, tmp_path):
    code, out, err = audit_manifest(capsys, tmp_path, "sglang==0.5.23", llmd())
    assert code == 1, out + err
    assert "prefill: DisaggregatedSet/pd-disagg-sglang role prefill container modelserver" in out
    assert "removed by: decode: SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT=61 (above two transfer calls)" in out
    assert "not read, beside the engine's container (a sidecar)" in out
    assert "kvproof audit: sglang==0.5.23, 4 scenarios, 24 claims" in out.splitlines()[-1]


def test_with_a_budget_each_side_is_read_in_a_child_process_with_the_same_result(capsys, tmp_path, monkeypatch):
    """``--max-seconds``: each container's launch line is read by ``Budget.call`` (a forked child
    stopped at the deadline: the engine's own parser loads compiled extensions no signal
    interrupts), and the audit says what it says without a budget."""
    from kvproof.checker import budget as B

    calls = []
    real = B.Budget.call

    def counted(self, fn, *args):
        calls.append(fn.__name__)
        return real(self, fn, *args)

    monkeypatch.setattr(B.Budget, "call", counted)
    plain = audit_manifest(capsys, tmp_path, "sglang==0.5.23", llmd())
    assert calls == []
    budgeted = audit_manifest(capsys, tmp_path, "sglang==0.5.23", llmd(), before=("--max-seconds", "300"))
    assert calls == ["read_launch", "read_launch"]  # the prefill side and the decode side
    assert budgeted == plain


@pytest.mark.parametrize("text, code, message", [
    ("kind: Deployment\n  bad: [", 3, "not YAML"),
    ("- just\n- a list\n", 3, "expected a Kubernetes object"),
    ("kind: Service\nmetadata: {name: s}\n", 3, "no prefill/decode pair of sglang (no container of it)"),
    ("kind: RayService\nmetadata: {name: r}\nspec: {rayClusterConfig: {headGroupSpec: {template: {spec: {containers: [{name: h}]}}}}}\n",
     2, "verdict: cannot decide"),
])
def test_manifest_bad_input_and_cannot_decide(capsys, tmp_path, text, code, message):
    got, out, err = audit_manifest(capsys, tmp_path, "sglang==0.5.23", text)
    assert got == code and message in out + err
    if code == 3:
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_manifest_and_a_launch_line_are_not_both_given(capsys, tmp_path):
    code, _, err = audit_manifest(capsys, tmp_path, "sglang==0.5.23", llmd(), "--",
                       "python", "-m", "sglang.launch_server")
    assert code == 3 and "not both" in err


def test_vllm_pair_with_different_leases_cannot_be_decided(capsys, tmp_path):
    bounds = ("--arrival-bound", "2", "--transfer-bound", "60")
    code, out, _ = audit_manifest(capsys, tmp_path, "vllm==0.33.0", kthena(decode_lease=300), before=bounds)
    assert code == 2
    assert "kv_lease_duration: prefill 30 s, decode 300 s" in out and "set the same kv_lease_duration on both sides" in out
    code, out, _ = audit_manifest(capsys, tmp_path, "vllm==0.33.0", kthena(300, 300), before=bounds)
    assert code == 0, out


# -- metrics --------------------------------------------------------------------------------------

XFER_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0]  # vLLM 0.33.0 nixl/stats.py
QUEUE_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
                 960.0, 1920.0, 7680.0]  # vLLM 0.33.0 v1/metrics/loggers.py


def scrape(xfer, queue=(), engines=("0",)):
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    reg = CollectorRegistry()
    x = Histogram("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.",
                  ["model_name", "engine"], buckets=XFER_BUCKETS, registry=reg)
    q = Histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                  ["model_name", "engine"], buckets=QUEUE_BUCKETS, registry=reg) if queue else None
    for i, v in enumerate(xfer):
        x.labels("Qwen/Qwen3-0.6B", engines[i % len(engines)]).observe(v)
    for v in queue:
        q.labels("Qwen/Qwen3-0.6B", engines[0]).observe(v)
    return generate_latest(reg).decode()


def test_histogram_quantile_is_a_bucket_edge(tmp_path):
    class Bad(Exception):
        pass

    fams = read_exposition(write(tmp_path, scrape([0.02] * 90 + [0.2] * 9 + [0.7], engines=("0", "1")), "m.prom"), Bad)
    got = {q: histogram_bound(fams, "vllm:nixl_xfer_time_seconds", q) for q in (0.5, 0.9, 0.99, 1.0)}
    assert {q: b.seconds for q, b in got.items()} == {0.5: 0.025, 0.9: 0.025, 0.99: 0.2, 1.0: 0.75}
    assert got[1.0].observations == 100 and got[1.0].series == 2
    slow = read_exposition(write(tmp_path, scrape([0.02, 7.0]), "s.prom"), Bad)
    assert histogram_bound(slow, "vllm:nixl_xfer_time_seconds", 1.0).seconds is None  # the +Inf bucket
    assert histogram_bound(slow, "vllm:nixl_xfer_time_seconds", 0.5).seconds == 0.025
    assert histogram_bound(slow, "vllm:request_queue_time_seconds", 1.0) is None


def test_vllm_transfer_bound_from_metrics(capsys, tmp_path):
    line = ["--", "vllm", "serve", "Qwen/Qwen3-0.6B", "--kv-transfer-config",
            '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}']
    fast = write(tmp_path, scrape([0.02] * 99 + [0.7], [0.4] * 99 + [4.0]), "fast.prom")
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--arrival-bound", "2", "--metrics", fast, *line)
    assert code == 0, out
    assert "transfer bound 5.75 s" in out and "vllm:nixl_xfer_time_seconds p100 <= 0.75 s (100 observations)" in out
    slow = write(tmp_path, scrape([0.02] * 99 + [7.0], [0.4] * 100), "slow.prom")
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--arrival-bound", "2", "--metrics", slow, *line)
    assert code == 1 and "no transfer bound (unbounded)" in out
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", "--arrival-bound", "2", "--metrics", slow, "--quantile", "0.99",
                       *line)
    assert code == 0 and "p99 <= 0.025 s" in out


@pytest.mark.parametrize("argv, message", [
    (["vllm==0.33.0", "--metrics", "BAD"], "not a Prometheus text exposition"),
    (["vllm==0.33.0", "--metrics", "EMPTY"], "no observations of vllm:nixl_xfer_time_seconds"),
    (["vllm==0.33.0", "--metrics", "EMPTY", "--transfer-bound", "3"], "give one"),
    (["vllm==0.33.0", "--quantile", "0.9"], "only with --metrics"),
    (["sglang==0.5.23", "--metrics", "EMPTY"], "no observations of sglang:kv_transfer_latency_ms"),
    (["sglang==0.5.23", "--quantile", "2", "--metrics", "EMPTY"], "--quantile 2: expected a number in (0, 1]"),
])
def test_metrics_bad_input(capsys, tmp_path, argv, message):
    files = {"BAD": write(tmp_path, "garbage{\n", "bad.prom"), "EMPTY": write(tmp_path, "", "empty.prom")}
    argv = [files.get(a, a) for a in argv]
    launch = ["python", "-m", "sglang.launch_server", "--model-path", "m"] if argv[0].startswith("sglang") else \
        ["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}']
    code, _, err = run(capsys, tmp_path, *argv, "--", *launch)
    assert code == 3 and message in err and len(err.strip().splitlines()) == 1


def sglang_scrape(latencies_ms):
    """SGLang's transfer latency as its scheduler exports it (metrics_collector.py: the buckets, and
    the labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank)."""
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    reg = CollectorRegistry()
    h = Histogram("sglang:kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.",
                  ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"],
                  buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000), registry=reg)
    for v in latencies_ms:
        h.labels("zai-org/GLM-4.6", "prefill", "0", "0", "0").observe(v)
    return generate_latest(reg).decode()


def test_sglang_metrics_are_reported_not_used_as_a_bound(capsys, tmp_path):
    """The latency is noted; the verdict is the one MC_TRANSFER_TIMEOUT gives (the abort hazard of
    the default 30 s deadline against a 30 s transfer timeout is still found)."""
    scrape_file = write(tmp_path, sglang_scrape([20] * 50 + [200]), "sglang.prom")
    line = ["--", "python", "-m", "sglang.launch_server", "--model-path", "m", "--disaggregation-mode", "decode"]
    code, out, _ = run(capsys, tmp_path, "sglang==0.5.23", "--metrics", scrape_file, *line)
    assert code == 1
    assert "sglang:kv_transfer_latency_ms p100 <= 0.25 s (51 observations): not a bound of the model" in out
    assert "after a client abort mid-transfer" in out


def _doc_examples():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "how-to" / "audit-a-deployment.md").read_text()
    blocks = re.findall(r"```console\n\$ (kvproof audit [^\n]+)\n(.*?)\n```", text, re.S)
    assert len(blocks) == 3
    return blocks


@pytest.mark.parametrize("command, shown", _doc_examples(), ids=["sglang-manifest", "vllm-metrics", "vllm-quantile"])
def test_the_how_to_page_shows_what_the_commands_print(capsys, monkeypatch, command, shown):
    """The page's examples, run from the repository's root (with the generated flag table: the
    page's 'read:' lines name the installed engine's parser, which is the only difference)."""
    import shlex
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    argv = shlex.split(command)[2:]
    main(["audit", "--reader", "table", *argv])
    got = capsys.readouterr().out.splitlines()

    def comparable(lines):
        return [re.sub(r", read: .*", "", line) for line in lines if line != "..."]

    want = comparable(shown.splitlines())
    if "..." in shown.splitlines():
        it = iter(comparable(got))
        assert all(line in it for line in want), "\n".join(got)
    else:
        assert comparable(got) == want


def test_manifest_json_names_the_pair_and_sided_remedies(capsys, tmp_path):
    import json

    code, out, _ = audit_manifest(capsys, tmp_path, "sglang==0.5.23", llmd(), before=("--json",))
    doc = json.loads(out)
    assert code == doc["exit_code"] == 1 and doc["verdict"] == "exposed"
    assert [(p["side"], p["container"]) for p in doc["pair"]] == [
        ("prefill", "DisaggregatedSet/pd-disagg-sglang role prefill container modelserver"),
        ("decode", "DisaggregatedSet/pd-disagg-sglang role decode container modelserver")]
    assert doc["pair"][1]["reading"]["values"]["disaggregation_mode"] == "decode"
    assert any(r.startswith("decode: SGLANG_") for h in doc["hazards"] for r in h["remedies"])
    assert doc["summary"]["exit_code"] == 1


def test_manifest_refuses_a_launch_lines_environment(capsys, tmp_path):
    code, _, err = audit_manifest(capsys, tmp_path, "sglang==0.5.23", llmd(), "--env", "A=1")
    assert code == 3 and "--env and --env-file are a launch line's" in err


# Dynamo's examples/backends/vllm/deploy/disagg.yaml: a DynamoGraphDeployment whose workers'
# subComponentType is their role; the worker line carries Dynamo's own --is-decode-worker and no
# --kv-transfer-config (Dynamo sets the connector itself).
DYNAMO_VLLM = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: vllm-disagg}
spec:
  services:
    Frontend:
      componentType: frontend
      extraPodSpec: {mainContainer: {image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0"}}
    VllmDecodeWorker:
      envFromSecret: hf-token-secret
      componentType: worker
      subComponentType: decode
      envs: [{name: VLLM_NIXL_SIDE_CHANNEL_PORT, value: "5600"}]
      extraPodSpec:
        mainContainer:
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-0.6B, --is-decode-worker]
    VllmPrefillWorker:
      envFromSecret: hf-token-secret
      componentType: worker
      subComponentType: prefill
      extraPodSpec:
        mainContainer:
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-0.6B, --is-prefill-worker]
"""


def test_dynamo_graph_deployment_roles_envs_and_what_cannot_be_read(capsys, tmp_path):
    import yaml

    m = mf.parse_manifests(list(yaml.safe_load_all(DYNAMO_VLLM)))
    by = {c.workload: c for c in m.containers}
    d = by["DynamoGraphDeployment/vllm-disagg service VllmDecodeWorker"]
    assert (d.role, d.role_from, d.env) == ("decode", "subComponentType decode", {"VLLM_NIXL_SIDE_CHANNEL_PORT": "5600"})
    assert d.commands == [["python3", "-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B", "--is-decode-worker"]]
    assert any("Secret hf-token-secret" in u for u in d.unread)
    code, out, _ = audit_manifest(capsys, tmp_path, "vllm==0.33.0", DYNAMO_VLLM)
    assert code == 2
    assert "decode: no kv_connector on its line" in out and "dynamo: --is-decode-worker (decode)" in out


def test_a_protocols_own_workload_kind_is_read_only_while_the_protocol_is_registered():
    # DynamoGraphDeployment is the Dynamo protocol's declaration (Protocol.workloads), not the
    # manifest reader's: without the protocol the object holds containers kvproof cannot read
    import yaml

    from kvproof.model import registry

    assert "DynamoGraphDeployment" not in mf.WORKLOAD_KINDS and "DynamoGraphDeployment" in mf.workload_kinds()
    dynamo = registry.protocol_named("dynamo")
    registry.unregister("dynamo")
    try:
        m = mf.parse_manifests(list(yaml.safe_load_all(DYNAMO_VLLM)))
    finally:
        registry.register(dynamo)
    assert m.containers == [] and m.unreadable == [
        "DynamoGraphDeployment/vllm-disagg (a kind kvproof does not read: nvidia.com/v1alpha1)"]


# `helm template` output in the shape of llm-d's modelservice chart: `# Source:` comments, an empty
# document, two apps/v1 Deployments labelled llm-d.ai/role, vLLM's `vllm serve` with its
# --kv-transfer-config from a ConfigMap through $(VAR).
HELM_VLLM = """\
---
# Source: llm-d-modelservice/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: kv-config}
data:
  KV_CONFIG: '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"kv_lease_duration":300}}'
---
""" + "".join(f"""\
# Source: llm-d-modelservice/templates/{role}-deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {{name: ms-{role}, labels: {{llm-d.ai/role: {role}}}}}
spec:
  template:
    metadata: {{labels: {{llm-d.ai/role: {role}}}}}
    spec:
      containers:
        - name: vllm
          command: [vllm, serve]
          args: [Qwen/Qwen3-0.6B, --port, "8000", --kv-transfer-config, $(KV_CONFIG)]
          env:
            - name: KV_CONFIG
              valueFrom: {{configMapKeyRef: {{name: kv-config, key: KV_CONFIG}}}}
---
""" for role in ("prefill", "decode"))


def test_helm_output_with_a_configmap_reference(capsys, tmp_path):
    bounds = ["--arrival-bound", "2", "--transfer-bound", "60"]
    code, out, _ = audit_manifest(capsys, tmp_path, "vllm==0.33.0", HELM_VLLM, before=bounds)
    assert code == 0, out
    assert "prefill: Deployment/ms-prefill container vllm (label llm-d.ai/role=prefill)" in out
    assert "kv_lease_duration 300 s" in out
    without = HELM_VLLM.split("---\n# Source: llm-d-modelservice/templates/prefill", 1)
    code, out, _ = run(capsys, tmp_path, "vllm==0.33.0", *bounds, "--manifest",
                       write(tmp_path, "# Source: llm-d-modelservice/templates/prefill" + without[1], "noconfig.yaml"))
    assert code == 2 and "uses $(KV_CONFIG), whose value is not in the manifests" in out
