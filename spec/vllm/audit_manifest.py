"""``kvproof audit vllm==VERSION --manifest FILE.yaml``: a vLLM prefill/decode pair as a
Kubernetes deployment runs it, audited as one deployment.

Each container's command line is read as a launch line (:func:`.audit.parse_launch`,
:func:`.audit.read_launch`: vLLM's own parser or the table generated from it) with the
container's environment; ``kv_role`` says which side it is (``kv_producer``: prefill,
``kv_consumer``: decode; ``kv_both``: the manifest's role).  The pair is one
:class:`~.audit.Settings` (:func:`merge`) when the two sides agree on what vLLM 0.33.0 reads on
each side:

* ``kv_connector``: NIXL's pull or push on both sides;
* ``kv_connector_extra_config.kv_lease_duration``: each side derives its part of the lease from
  its own value, the side that sends heartbeats their interval (``lease // 6``,
  ``nixl/base_scheduler.py``), the side that holds the blocks the expiry
  (``nixl/pull_scheduler.py``, ``request_finished``; push: ``nixl/push_scheduler.py``) and each
  heartbeat's extension (``2 * lease // 3``, ``nixl/base_worker.py``).  The model has one lease,
  so two different values are not modelled (cannot decide) and the report says to set one.

A remedy names the side it is set on (both, for the lease and the connector).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kvproof.checker.audit import manifest as mf
from kvproof.checker.budget import call_within
from kvproof.spec.vllm import audit as va

__all__ = ["ROLES", "read_side", "merge", "merge_rows", "key", "run_manifest"]

ROLES = {"kv_producer": "prefill", "kv_consumer": "decode"}
"""``kv_role`` -> the side it launches (``kv_both`` says neither)."""


def read_side(release: va.Release, reader: str, bad, bounds: tuple[float | None, float | None, bool],
              budget=None):
    """The reading of one container's command line, for :func:`~kvproof.checker.audit.manifest.pair`:
    a launch line of :data:`.launch.LAUNCHERS` read as :func:`.audit.read_launch` reads it, with
    the deployment's bounds (arrival, transfer, stalls); with ``budget`` (the command's
    ``--max-seconds``) in a child process stopped at its deadline
    (:func:`~kvproof.checker.budget.call_within`)."""
    from kvproof.spec.vllm.launch import split

    return mf.side_reader(
        bad, is_launch=lambda words: split(words) is not None, parse=va.parse_launch,
        read=lambda launch, here: call_within(budget, va.read_launch, release, launch, here, reader),
        settings=lambda launch, env, here, reading: va.settings_of(release, launch, env, here, *bounds, reading),
        role=lambda s: ROLES.get(s.role or ""), prefixes=va.LIFECYCLE_PREFIXES, config_flag="--config")


def key(s: va.Settings) -> tuple:
    """What the model reads of one side."""
    return (s.connector, s.role, s.lease, s.tp, s.pp, tuple(s.unknown), tuple(s.unmodelled))


def merge(p: mf.Side, d: mf.Side) -> tuple[va.Settings, list[tuple[str, str, str]], Any]:
    """The pair as one deployment: prefill's settings (its lease holds the blocks in pull mode),
    the larger parallel sizes, every list of names marked with its side; the two sides'
    connectors and leases must agree (else not modelled).  Returns (settings, rows, the side each
    remedy names: both)."""
    ps, ds = p.settings, d.settings
    agree = {"lease": ps.lease == ds.lease, "connector": ps.connector == ds.connector}
    s = dataclasses.replace(ps, source={k: (f"{'both' if agree[k] else 'prefill'} {v}" if k in agree else v)
                                        for k, v in ps.source.items()})
    for name in ("unknown", "abstracted", "inert", "unmodelled"):
        setattr(s, name, [*mf.sided("prefill", getattr(ps, name)), *mf.sided("decode", getattr(ds, name))])
    s.tp, s.pp = max(ps.tp, ds.tp), max(ps.pp, ds.pp)
    for side, x in (("prefill", ps), ("decode", ds)):
        if x.connector is None:
            s.unmodelled.append(f"{side}: no kv_connector on its line: vLLM runs it without a KV handoff (a launcher "
                                f"that sets one itself, such as Dynamo's, is not read)")
    if ps.connector != ds.connector and ps.connector is not None and ds.connector is not None:
        s.unmodelled.append(f"kv_connector: prefill {ps.connector}, decode {ds.connector}: the two sides must use "
                            f"one connector")
    if ps.lease != ds.lease:
        s.unmodelled.append(
            f"kv_connector_extra_config.kv_lease_duration: prefill {ps.lease:g} s, decode {ds.lease:g} s: the side "
            f"that sends heartbeats spaces them by its own lease // 6, the side that holds the blocks expires and "
            f"extends them by its own (nixl/base_scheduler.py, nixl/base_worker.py); the model has one lease "
            f"(set the same kv_lease_duration on both sides)")
    rows = merge_rows(s, p, d)
    return s, rows, lambda remedy: f"both sides: {remedy}"


def _merge_with_metrics(args: Any, bad):
    def merged(p: mf.Side, d: mf.Side):
        s, _, side_of = merge(p, d)
        va.apply_metrics(s, args, bad)
        return s, merge_rows(s, p, d), side_of

    return merged


def merge_rows(s: va.Settings, p: mf.Side, d: mf.Side) -> list[tuple[str, str, str]]:
    """The settings rows of the merged pair (:func:`~.audit.mapping`, the role row for both sides)."""
    rows = []
    for name, where, meaning in va.mapping(s):
        if name.startswith("kv_role"):
            name, where = f"kv_role prefill {p.settings.role}, decode {d.settings.role}", "both lines"
        elif name.startswith("kv_connector "):
            where = "both lines"
        rows.append((name, where, meaning))
    return rows


def run_manifest(args: Any, out: Any, bad) -> int:
    """``kvproof audit vllm==VERSION --manifest FILE...``."""
    release = va.parse_engine(args.engine, bad)
    if getattr(args, "peer_tp", None) is not None:
        raise bad("--peer-tp: an SGLang option; vLLM's model has one rank a side")
    arrival, transfer = va.bounds(args, bad)
    stalls = not getattr(args, "no_decode_stalls", False)
    no_fix = "nothing kvproof tried removes it"
    if arrival is None or transfer is None:
        no_fix += " (with no --arrival-bound and --transfer-bound, no lease is known to outlast the hand-off)"
    return mf.audit_manifest(
        args, out, bad, engine=va.ENGINE, release=release,
        read=read_side(release, getattr(args, "reader", None) or "auto", bad, (arrival, transfer, stalls),
                       getattr(args, "budget", None)),
        merge=_merge_with_metrics(args, bad), key=key, audit=lambda s, limits: va.audit(s, limits), hazards=va.HAZARDS, no_fix=no_fix,
        where_width=24, abstracted_why="block counts are symbolic")
