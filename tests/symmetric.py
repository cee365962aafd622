"""Small scenarios with interchangeable requests, shared by the symmetry and parallel tests."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Request
from kvproof.model.scenario import Scenario, builtin


SMALL = dict(transfer_failures=False, release_policy="drain_ack", write_latency_bound=None)


def unordered(name: str, tenants: str) -> Scenario:
    """Built-in scenario ``name`` with one-page requests of these tenants, arriving in any order,
    on one decode page (``v0.5.22`` also loses transfer failures and the deadline: the
    benchmark's standard scenario, smaller)."""
    sc = builtin(name)
    cfg = sc.config
    engine = replace(cfg.engine, ordered_arrivals=False, **(SMALL if name == "v0.5.22" else {}))
    cfg = replace(cfg, requests=tuple(Request(t, 1) for t in tenants), decode_pages=1, engine=engine,
                  prefill_pages=1 if name == "v0.5.22" else cfg.prefill_pages)
    return replace(sc, name=f"{name}-{tenants}", config=cfg)


@lru_cache(maxsize=None)
def machine(name: str, tenants: str) -> Machine:
    """The compiled machine of :func:`unordered`."""
    return Machine(unordered(name, tenants).build())
