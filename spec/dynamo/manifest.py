"""Dynamo's Kubernetes custom resource, ``DynamoGraphDeployment``, as ``kvproof audit --manifest``
reads it: each service's ``extraPodSpec.mainContainer`` is a pod template, its role the
service's ``subComponentType`` (``prefill`` or ``decode``), with the service's ``envs`` and
``envFromSecret`` added to the container's environment (the operator's CRD, ai-dynamo/dynamo
``deploy/cloud/operator``; the example ``examples/backends/vllm/deploy/disagg.yaml``).

The audit of each worker's command line is its engine's (``python -m dynamo.vllm`` passes its
engine arguments to vLLM's parser); this module only finds the containers.  Data only: the
object is a mapping from ``yaml.safe_load``.
"""

from __future__ import annotations

from typing import Any, Iterator

from kvproof.checker.audit.manifest import get_path, role_name

__all__ = ["graph_deployment_templates"]


def graph_deployment_templates(o: dict) -> Iterator[tuple[str, str | None, str, Any]]:
    """``(part, role, role_from, pod_template)`` of each service of a ``DynamoGraphDeployment``."""
    spec = o.get("spec") if isinstance(o.get("spec"), dict) else {}
    services = spec.get("services") if isinstance(spec.get("services"), dict) else {}
    for name, svc in services.items():
        if isinstance(svc, dict):
            yield f"service {name}", *_service_pod(svc)


def _service_pod(svc: dict) -> tuple[str | None, str, Any]:
    """(role, where it came from, pod template) of one service."""
    role = role_name(svc.get("subComponentType"))
    main = get_path(svc, "extraPodSpec", "mainContainer")
    if not isinstance(main, dict):
        return role, "", None
    main = {"name": "main", **main, "env": [*(svc.get("envs") or []), *(main.get("env") or [])]}
    if svc.get("envFromSecret"):
        main["envFrom"] = [*(main.get("envFrom") or []), {"secretRef": {"name": svc["envFromSecret"]}}]
    src = f"subComponentType {svc.get('subComponentType')}" if role else ""
    return role, src, {"spec": {"containers": [main]}}
