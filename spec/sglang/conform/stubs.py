"""Import SGLang 0.5.23 on a machine without a GPU: the one place that stubs anything at import.

SGLang's disaggregation bookkeeping is plain Python over CPU tensors, but its import chain
reaches two multimodal files that import ``torchvision`` at module level.  The ``torchvision``
wheel on PyPI is a CUDA build and fails against the CPU torch the ``sglang`` extra installs, so
this module answers ``import torchvision`` (and its submodules) with empty modules.  Nothing
else is stubbed at import time; what the conformance harness fakes at run time (clock,
transport, collective, transfer engine) is listed in :mod:`.harness`.

:func:`load_sglang` is idempotent and raises :class:`EngineUnavailable` with one line saying
what is missing, so the CLI and the tests can report it instead of a traceback.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
import types

__all__ = ["ENGINE", "EngineUnavailable", "load_sglang", "engine_problem"]

ENGINE = "sglang==0.5.23"
_VERSION = "0.5.23"
_INSTALL = "pip install 'kvproof[sglang]' && pip install --no-deps sglang==0.5.23"


class EngineUnavailable(RuntimeError):
    """The real engine cannot be imported here; the message says why and how to install it."""


class _TorchvisionStub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``torchvision`` and ``torchvision.*`` with empty packages (see the module doc)."""

    def find_spec(self, name, path=None, target=None):
        """A spec for torchvision modules only; every other import is left alone."""
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        """An empty package module."""
        module = types.ModuleType(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        """Nothing to run."""


_loaded: dict[str, types.ModuleType] = {}


def engine_problem() -> str | None:
    """Why the real engine is unavailable (``None`` when ``sglang==0.5.23`` is installed)."""
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return f"SGLang is not installed ({_INSTALL})"
    if version != _VERSION:
        return f"sglang {version} is installed; conformance is pinned to {ENGINE}"
    for dep in ("torch", "transformers", "zmq", "msgspec"):
        if importlib.util.find_spec(dep) is None:
            return f"{dep} is missing, SGLang cannot be imported ({_INSTALL})"
    return None


def load_sglang() -> dict[str, types.ModuleType]:
    """Import the SGLang modules the harness drives; ``{short name: module}``."""
    if _loaded:
        return _loaded
    problem = engine_problem()
    if problem:
        raise EngineUnavailable(problem)
    # transformers reads torchvision's version while importing; let it see the real absence
    # before the stub answers.
    importlib.import_module("transformers.utils.import_utils")
    if not any(isinstance(f, _TorchvisionStub) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchvisionStub())
    import warnings

    names = {
        "decode": "sglang.srt.disaggregation.decode",
        "prefill": "sglang.srt.disaggregation.prefill",
        "utils": "sglang.srt.disaggregation.utils",
        "common": "sglang.srt.disaggregation.common.conn",
        "common_utils": "sglang.srt.disaggregation.common.utils",
        "bootstrap": "sglang.srt.disaggregation.common.bootstrap",
        "mooncake": "sglang.srt.disaggregation.mooncake.conn",
        "base": "sglang.srt.disaggregation.base.conn",
        "schedule_batch": "sglang.srt.managers.schedule_batch",
        "scheduler": "sglang.srt.managers.scheduler",
        "sampling": "sglang.srt.sampling.sampling_params",
        "server_args": "sglang.srt.server_args",
        "runtime_context": "sglang.srt.runtime_context",
        "environ": "sglang.srt.environ",
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mods = {k: importlib.import_module(v) for k, v in names.items()}
    except Exception as e:  # an import chain that changed: one line, not a traceback
        raise EngineUnavailable(f"importing SGLang failed: {type(e).__name__}: {e}") from None
    import logging

    # SGLang logs every failed transfer and every deadline release; the verdicts report them.
    logging.getLogger("sglang").setLevel(logging.CRITICAL)
    _loaded.update(mods)
    return _loaded
