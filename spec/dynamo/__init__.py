"""NVIDIA Dynamo's disaggregated orchestration (``ai-dynamo`` 1.6.1): the frontend's prefill
router, the prefill and decode workers' handlers, a client's cancellation and the prefill worker's
shutdown drain, over a vLLM or TensorRT-LLM engine.

:mod:`.config` (the ``[config]`` table), :mod:`.manifest` (its Kubernetes resource, for ``audit --manifest``), :mod:`.state` (the codes), :mod:`.protocol` (the actions:
:class:`~.protocol.DynamoPd`), :mod:`.claims`, ``scenarios/`` (the catalogue: before/after pairs
for ai-dynamo/dynamo#7489, ai-dynamo/dynamo#13855, ai-dynamo/dynamo#14507, ai-dynamo/dynamo#4917 and ai-dynamo/dynamo#9344).

:data:`PROTOCOL` is what the general layers see (:class:`~kvproof.model.protocol.Protocol`).
"""

from importlib import resources

from kvproof.model.protocol import Protocol
from kvproof.spec.dynamo.config import DynamoConfig

__all__ = ["PROTOCOL"]


def _base():
    from kvproof.spec.dynamo.protocol import DynamoPd

    return DynamoPd


def _graph_deployment(o: dict):
    from kvproof.spec.dynamo.manifest import graph_deployment_templates

    return graph_deployment_templates(o)


PROTOCOL = Protocol(
    name="dynamo",
    title="NVIDIA Dynamo 1.6.1 disaggregated orchestration (router, prefill/decode handlers, cancel, drain)",
    specs={"dynamo": _base},
    config=DynamoConfig,
    catalogue=lambda: resources.files("kvproof.spec.dynamo").joinpath("scenarios"),
    workloads={"DynamoGraphDeployment": _graph_deployment},
)
"""The Dynamo protocol, registered under the ``kvproof.protocols`` entry-point group."""
