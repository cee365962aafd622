"""Import vLLM 0.33.0 on a machine without a GPU, and build the configuration its scheduler needs.

Nothing is stubbed: with ``VLLM_TARGET_DEVICE=cpu`` and ``VLLM_ENABLE_V1_MULTIPROCESSING=0``
the scheduler (``vllm/v1/core/sched/scheduler.py``) and the NIXL connector package
(``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``) import with the CPU torch of the
``vllm`` extra ("NIXL is not available": the connector's own ``NixlWrapper`` is ``None``, and
the harness never calls it).  ``ModelConfig`` needs a model directory: a ``config.json`` of a
one-layer Llama (no weights, no tokenizer: ``skip_tokenizer_init``) is written to a temporary
directory once per process.

:func:`load_vllm` is idempotent and raises :class:`EngineUnavailable` with one line saying what
is missing, so the CLI and the tests can report it instead of a traceback.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
import types

__all__ = ["ENGINE", "BLOCK_SIZE", "EngineUnavailable", "engine_problem", "load_vllm", "vllm_config", "worker_class"]

ENGINE = "vllm==0.33.0"
_VERSION = "0.33.0"
_INSTALL = "pip install 'kvproof[vllm]' && pip install --no-deps vllm==0.33.0"
BLOCK_SIZE = 32
"""Tokens per KV block (a CPU attention block size); every request's prompt fits in one block."""


class EngineUnavailable(RuntimeError):
    """The real engine cannot be imported here; the message says why and how to install it."""


_loaded: dict[str, types.ModuleType] = {}
_model_dir: list[str] = []
_model_configs: list = []


def engine_problem() -> str | None:
    """Why the real engine is unavailable (``None`` when ``vllm==0.33.0`` is installed)."""
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return f"vLLM is not installed ({_INSTALL})"
    if version != _VERSION:
        return f"vllm {version} is installed; conformance is pinned to {ENGINE}"
    for dep in ("torch", "transformers", "zmq", "msgspec", "openai"):
        if importlib.util.find_spec(dep) is None:
            return f"{dep} is missing, vLLM cannot be imported ({_INSTALL})"
    return None


def load_vllm() -> dict[str, types.ModuleType]:
    """Import the vLLM modules the harness drives; ``{short name: module}``."""
    if _loaded:
        return _loaded
    problem = engine_problem()
    if problem:
        raise EngineUnavailable(problem)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "CRITICAL")
    import logging
    import warnings

    nixl = "vllm.distributed.kv_transfer.kv_connector.v1.nixl."
    names = {
        "config": "vllm.config",
        "scheduler": "vllm.v1.core.sched.scheduler",
        "async_scheduler": "vllm.v1.core.sched.async_scheduler",
        "kv_cache_interface": "vllm.v1.kv_cache_interface",
        "structured_output": "vllm.v1.structured_output",
        "request": "vllm.v1.request",
        "sampling_params": "vllm.sampling_params",
        "outputs": "vllm.v1.outputs",
        "base_scheduler": nixl + "base_scheduler",
        "pull_scheduler": nixl + "pull_scheduler",
        "base_worker": nixl + "base_worker",
        "pull_worker": nixl + "pull_worker",
        "push_scheduler": nixl + "push_scheduler",
        "push_worker": nixl + "push_worker",
        "metadata": nixl + "metadata",
        "tp_mapping": nixl + "tp_mapping",
        "stats": nixl + "stats",
        "torch": "torch",
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mods = {k: importlib.import_module(v) for k, v in names.items()}
    except Exception as e:  # an import chain that changed: one line, not a traceback
        raise EngineUnavailable(f"importing vLLM failed: {type(e).__name__}: {e}") from None
    # vLLM logs every lease expiry and late notification; the observations report them.
    logging.getLogger("vllm").setLevel(logging.CRITICAL)
    _loaded.update(mods)
    return _loaded


_WORKERS: dict[str, type] = {}


def worker_class(mode: str) -> type:
    """vLLM 0.33.0's NIXL connector worker class of ``mode`` (``"pull"``: ``NixlPullConnectorWorker``,
    ``"push"``: ``NixlPushConnectorWorker``), the real class but for ``__del__``, which shuts a NIXL
    agent down and is not run: the harnesses build instances with ``object.__new__`` (no
    ``__init__``), set the attributes the methods they drive read, and subclass it to stand in for
    the handshake, heartbeat sending or the READ itself."""
    if mode not in _WORKERS:
        module = load_vllm()[f"{mode}_worker"]
        real = getattr(module, f"Nixl{mode.capitalize()}ConnectorWorker")

        def __del__(self):
            pass

        _WORKERS[mode] = type(real.__name__, (real,), {"__del__": __del__, "__doc__": worker_class.__doc__})
    return _WORKERS[mode]


def _model() -> str:
    if not _model_dir:
        d = tempfile.mkdtemp(prefix="kvproof-vllm-model-")
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                  "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2,
                  "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 256,
                  "torch_dtype": "float32", "head_dim": 32}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
        _model_dir.append(d)
    return _model_dir[0]


def _model_config():
    """The one-layer Llama's ``ModelConfig``, built once per process (building one reads and
    validates ``config.json`` through transformers: 30 ms); callers get a deep copy (1 ms)."""
    if not _model_configs:
        c = load_vllm()["config"]
        _model_configs.append(c.ModelConfig(model=_model(), skip_tokenizer_init=True, max_model_len=128,
                                            dtype="float32", seed=0))
    return _model_configs[0]


def vllm_config(role: str, lease_seconds: int, blocks: int, connector: str = "NixlConnector",
                async_scheduling: bool = False, prefix_caching: bool = False):
    """A ``VllmConfig`` of one engine (``kv_producer`` or ``kv_consumer``) with the real NIXL
    connector, ``kv_lease_duration = lease_seconds`` and ``blocks`` usable KV blocks (plus
    vLLM's null block); prefix caching as given (off by default); ``async_scheduling`` as given (two batches in
    flight: ``max_concurrent_batches`` is 2).  The first call takes tens of seconds (vLLM
    inspects the model architecture once per process), later ones milliseconds."""
    m = load_vllm()
    c = m["config"]
    mc = copy.deepcopy(_model_config())
    vc = c.VllmConfig(
        model_config=mc,
        cache_config=c.CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=prefix_caching),
        scheduler_config=c.SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=128, max_model_len=128,
                                           is_encoder_decoder=False, enable_chunked_prefill=False),
        device_config=c.DeviceConfig("cpu"),
        kv_transfer_config=c.KVTransferConfig(kv_connector=connector, kv_role=role, engine_id=role,
                                              kv_connector_extra_config={"kv_lease_duration": lease_seconds}),
    )
    vc.cache_config.num_gpu_blocks = blocks + 1
    if async_scheduling:  # set after the config's checks, which turn it off for a CPU without an executor
        vc.scheduler_config.async_scheduling = True
    return vc
