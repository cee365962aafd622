"""``kvproof audit vllm==0.33.0 [--env NAME=VALUE]... [--env-file FILE] [--arrival-bound S]
[--transfer-bound S] [--no-decode-stalls] -- vllm serve MODEL ... --kv-transfer-config '{...}'``:
is a vLLM deployment, as launched, exposed to a KV-isolation hazard?

The launch command (``vllm serve ...`` or ``python -m vllm.entrypoints.openai.api_server ...``,
with any ``NAME=VALUE`` words in front of it) and the environment given explicitly are mapped
to the vLLM model's knobs (:class:`~.config.Engine`): ``--kv-transfer-config``'s JSON (read as
data) gives the connector (``NixlConnector``: pull, ``NixlPushConnector``: push) and
``kv_connector_extra_config.kv_lease_duration`` (default 30 s; the heartbeat interval,
``lease // 6``, and its extension, ``2/3 * lease``, are derived from it and cannot be set).
What vLLM's flags cannot say is the deployment's timing, which decides whether a lease is long
enough: how long the router may take to hand a finished prefill to decode
(``--arrival-bound``), how long decode may take from receiving the request to the end of its
READ (push: of prefill's WRITE), engine-loop pauses included (``--transfer-bound``), and
whether decode's engine loop may pause at all (``--no-decode-stalls`` says it never pauses long
enough to miss a heartbeat).  Without a bound the time is unbounded, as nothing in vLLM bounds
it.  Every flag, JSON key and variable kvproof does not know is listed, not ignored.

The family (:func:`family`): ``lease`` (two tenants' requests through one prefill block, the
shape of ``vllm-pull-heartbeat-stall`` / ``vllm-push-lease-expiry-stall``) and ``abort`` (a
client abort on decode while the load is in flight, one block a side).  Each is checked for
the isolation claims; each hazard is printed with its shortest trace and the settings that
remove it, each re-checked (a lease above the bounds, the other NIXL mode).

Exit codes: 1 exposed; 0 not exposed; 2 cannot decide (a search cut short, a setting the model
does not cover, or a KV-transfer key or ``VLLM_NIXL_*`` variable kvproof does not know); 3 bad
input (raised as the caller's one-line error).  What is not vLLM's (reading ``NAME=VALUE`` words
and files, splitting flags, the report's records, checking the family, printing) is
:mod:`kvproof.checker.audit.common`'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from kvproof.checker.audit import common as core
from kvproof.checker.budget import call_within
from kvproof.checker.audit.common import (
    EXIT_EXPOSED, EXIT_NOT_EXPOSED, EXIT_UNDECIDED, AuditReport, Hazard, Launch, Member,
)
from kvproof.model.scenario import Scenario
from kvproof.spec.vllm.config import Config, Engine, Request

__all__ = ["run_audit", "known_engines", "RELEASES", "Release", "Settings", "Launch", "Member", "Hazard",
           "AuditReport", "parse_engine", "parse_launch", "settings_of", "ticks", "mapping", "family", "candidates",
           "audit", "bounds", "metric_bounds", "apply_metrics", "XFER_TIME", "QUEUE_TIME", "ENGINE", "CONNECTORS", "MODEL_SETTINGS", "ABSTRACTED", "read_launch", "TRANSFER_KEYS",
           "EXTRA_KEYS", "ENV_VARS", "CLAIMS", "HAZARDS", "LIFECYCLE_PREFIXES", "EXIT_EXPOSED", "EXIT_NOT_EXPOSED",
           "EXIT_UNDECIDED"]

ENGINE = "vllm"
"""The engine's name in ``ENGINE==VERSION``."""


@dataclass(frozen=True)
class Release:
    """One vLLM release as the model sees it."""

    version: str
    engine: dict[str, Any]
    """The release's behaviour as :class:`~.config.Engine` knobs."""
    basis: str
    """Why the release is modelled this way, and what is assumed rather than read."""


RELEASES: dict[str, Release] = {
    "0.33.0": Release(
        "0.33.0", dict(delay_free_aborted_load=True, abort_of_finished_frees=False),
        basis="the `vllm-*` scenarios' engine (spec/vllm/): NIXL pull and push as read in the 0.33.0 wheel's "
              "code: leases with #41383's heartbeats, #32255's held aborted loads, "
              "#25067's ignored abort of a finished request; both modes replayed on vLLM 0.33.0's scheduler and NIXL "
              "connector (kvproof conform: pull's connector scheduler and lease bookkeeping, push's connector "
              "scheduler and both push workers)"),
}
"""The known releases, oldest first."""


def known_engines() -> list[str]:
    """``vllm==VERSION`` for every known release (the CLI lists them for an unknown engine)."""
    return [f"{ENGINE}=={v}" for v in RELEASES]


CONNECTORS = {"NixlConnector": "pull", "NixlPushConnector": "push"}
"""``kv_connector`` values the model covers, and their mode (vLLM's NIXL docs: ``nixl_connector_usage.md``)."""

# -- names kvproof knows --------------------------------------------------------------------------
#
# Flags are not listed here: a launch line is read by vLLM's own parser, or by the flag table
# generated from it (:mod:`.launch`, :mod:`.gen_flags`).  What is listed is what the model reads
# of the parsed settings (by their destination in vLLM's ``EngineArgs``) and of the
# ``--kv-transfer-config`` JSON (whose keys vLLM validates; what they mean is the model's).

MODEL_SETTINGS: dict[str, str] = {
    "kv_transfer_config": "the KV connector, its role and kv_connector_extra_config (JSON)",
    "tensor_parallel_size": "tensor-parallel size (the model has one rank a side)",
    "pipeline_parallel_size": "pipeline-parallel size (the model has one stage)",
    "data_parallel_size": "data-parallel engines, each with its own connector: each audited as this one",
}
"""``EngineArgs`` settings that reach the model, and what they change."""

ABSTRACTED = ("gpu_memory_utilization", "max_model_len", "block_size", "max_num_seqs", "max_num_batched_tokens",
              "num_gpu_blocks_override", "swap_space")
"""Settings the model abstracts: block counts are symbolic (one block a request, reused)."""

TRANSFER_KEYS: dict[str, str] = {
    "kv_connector": "which connector: NixlConnector (pull) or NixlPushConnector (push)",
    "kv_role": "kv_producer, kv_consumer or kv_both (NixlConnector does not distinguish them: the router does)",
    "kv_connector_extra_config": "the connector's own settings (kv_lease_duration, ...)",
    "kv_load_failure_policy": "fail or recompute after a failed READ (the audit does not map it; V8's scenarios model "
                              "a failed READ under the default, fail)",
    "engine_id": "the engine's id for KV transfers",
    "kv_buffer_device": "where the connector buffers KV",
    "kv_port": "port of other connectors",
    "enable_permute_local_kv": "heterogeneous KV layout (a layout, not a lifecycle)",
}
"""``--kv-transfer-config`` keys kvproof knows (vLLM 0.33.0's ``KVTransferConfig``, which refuses any other)."""

EXTRA_KEYS: dict[str, str] = {
    "kv_lease_duration": "prefill's lease on a finished request's blocks, seconds (default 30)",
    "decoder_kv_blocks_ttl": "bidirectional mode's TTL of decode-cached blocks (480 s; the audit does not "
                             "map it; V14's scenarios model the turn-2 readback)",
    "push_registration_timeout": "push: decode's one-shot watchdog, drops a registration only (not modelled)",
    "backends": "the NIXL transport plugins (UCX, LIBFABRIC, ...): a transport, not a lifecycle",
    "enable_cross_layers_blocks": "contiguous blocks across layers: a layout, not a lifecycle",
}
"""``kv_connector_extra_config`` keys kvproof knows (vLLM's NIXL docs and ``nixl_kv_cache_lease.md``)."""

ENV_VARS: dict[str, str] = {
    "VLLM_NIXL_SIDE_CHANNEL_PORT": "the NIXL handshake port (no part in the block lifecycle)",
    "VLLM_NIXL_SIDE_CHANNEL_HOST": "the NIXL handshake host (no part in the block lifecycle)",
    "VLLM_NIXL_ABORT_REQUEST_TIMEOUT": "not read by 0.33.0 (absent from its envs.py; replaced by kv_lease_duration, "
                                       "#41383)",
    "UCX_TLS": "UCX transports (NIXL's default backend): a transport, not a lifecycle",
    "UCX_NET_DEVICES": "UCX network devices: a transport, not a lifecycle",
    "CUDA_VISIBLE_DEVICES": "which GPUs the engine uses",
}
"""Environment variables kvproof knows; none changes the model in 0.33.0."""

LIFECYCLE_PREFIXES = ("kv_transfer_config.", "kv_connector_extra_config.", "--kv-", "VLLM_NIXL_", "dynamo:")
"""Names that belong to the KV handoff: one of these that kvproof does not know makes a clean
verdict undecidable."""

CLAIMS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release", "no_source_free_while_read")
"""The isolation claims the audit checks."""

HAZARDS = {
    "decode_reads_only_own_pages": "decode computes on KV that was not written for the request it serves",
    "no_cross_tenant_read": "a response is computed on another tenant's KV",
    "no_write_after_release": "a transfer writes into a decode block already freed to its next owner",
    "no_source_free_while_read": "prefill frees (and may reuse) source blocks a transfer is still reading",
}
"""Each checked claim, violated, as a hazard of the deployment (the order hazards are listed in)."""

# -- reading the input ----------------------------------------------------------------------------


def parse_engine(text: str, bad) -> Release:
    """``vllm==0.33.0`` -> its :class:`Release`; anything else is bad input."""
    return core.parse_engine(text, ENGINE, RELEASES, "0.33.0", bad)


def parse_launch(command: list[str], bad) -> Launch:
    """Split ``[NAME=VALUE | env ...] LAUNCHER ARGS`` (a launcher of :data:`.launch.LAUNCHERS`);
    anything else is bad input.  ``Launch.flags`` holds vLLM's arguments as words (``("",
    word)``), read by :func:`read_launch`."""
    from kvproof.spec.vllm.launch import LAUNCHERS, split

    words = core.command_words(command, bad)
    env = core.take_prefix_environment(words)
    found = split(words)
    if found is None:
        shown = " ".join(command)[:60]
        raise bad(f"the launch command {shown!r}: expected a vLLM server launch ({', '.join(LAUNCHERS)} ...) "
                  f"after --")
    program, rest = found
    return Launch(env, [("", w) for w in rest], program)


def read_launch(release: Release, launch: Launch, bad, reader: str = "auto") -> core.Reading:
    """vLLM's reading of the launch's arguments (:func:`.launch.read`); a line vLLM refuses is
    bad input with vLLM's own message."""
    from kvproof.spec.vllm.launch import ParserRefused, read

    try:
        reading = read([w for _, w in launch.flags], release.version, launch.program, reader)
    except ParserRefused as e:
        raise bad(f"vllm {release.version} refuses this line: {' '.join(str(e).split())}") from None
    reading.launcher = launch.program
    return reading


# -- settings ------------------------------------------------------------------------------------


@dataclass
class Settings(core.SettingsBase):
    """The deployment as kvproof reads it: every value with where it came from (and, from
    :class:`~kvproof.checker.audit.common.SettingsBase`, ``source``, ``unknown``, ``abstracted``,
    ``inert`` and ``unmodelled``)."""

    release: Release
    connector: str | None = None
    role: str | None = None
    lease: float = 30.0
    arrival_bound: float | None = None
    transfer_bound: float | None = None
    stalls: bool = True
    tp: int = 1
    pp: int = 1
    dp: int = 1
    transfer_how: str = ""
    """How the transfer bound was derived when it was not given (``--metrics``: the histograms'
    quantiles)."""

    @property
    def mode(self) -> str | None:
        """``pull``, ``push``, or ``None`` (no NIXL connector kvproof models)."""
        return CONNECTORS.get(self.connector or "")


def _shown(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def settings_of(release: Release, launch: Launch, env: dict[str, tuple[str, str]], bad,
                arrival_bound: float | None = None, transfer_bound: float | None = None,
                stalls: bool = True, reading: core.Reading | None = None) -> Settings:
    """Map vLLM's reading of the launch (``reading``; read here when not given),
    ``--kv-transfer-config``'s keys and the environment (name -> (value, where it came from)) to
    :class:`Settings`; the process environment is not read."""
    r = reading if reading is not None else read_launch(release, launch, bad)
    s = Settings(release, arrival_bound=arrival_bound, transfer_bound=transfer_bound, stalls=stalls)
    where = "command" if not r.config_files else "command/--config"
    s.source = {"lease": "default", "connector": where, "tp": "default",
                "arrival_bound": "--arrival-bound" if arrival_bound is not None else "assumed",
                "transfer_bound": "--transfer-bound" if transfer_bound is not None else "assumed",
                "stalls": "--no-decode-stalls" if not stalls else "assumed"}
    v = r.values
    if "tensor_parallel_size" in v:
        s.tp, s.source["tp"] = core.count("--tensor-parallel-size", str(v["tensor_parallel_size"]), bad), where
    s.pp = core.count("--pipeline-parallel-size", str(v.get("pipeline_parallel_size", 1)), bad)
    if "data_parallel_size" in v:
        s.dp = core.count("--data-parallel-size", str(v["data_parallel_size"]), bad)
        s.inert.append(f"{r.shown('data_parallel_size')} (each data-parallel engine has its own connector: audited "
                       f"as this one)")
    for dest in v:
        if dest in MODEL_SETTINGS or dest == "config":
            continue
        (s.abstracted if dest in ABSTRACTED else s.inert).append(r.shown(dest))
    cfg = v.get("kv_transfer_config")
    if cfg is not None:
        if not isinstance(cfg, dict):
            raise bad(f"--kv-transfer-config: expected a JSON object, got {type(cfg).__name__}")
        for key, x in cfg.items():
            if key == "kv_connector":
                if x is not None and (not isinstance(x, str) or not x):
                    raise bad(f"--kv-transfer-config: kv_connector: expected a connector's name, got {_shown(x)}")
                s.connector = x
            elif key == "kv_role":
                s.role = x
            elif key == "kv_connector_extra_config":
                if not isinstance(x, dict):
                    raise bad(f"--kv-transfer-config: kv_connector_extra_config: expected a JSON object, "
                              f"got {_shown(x)}")
                for k, y in x.items():
                    if k == "kv_lease_duration":
                        s.lease = core.seconds("kv_connector_extra_config.kv_lease_duration", y, bad)
                        s.source["lease"] = where
                    elif k in EXTRA_KEYS:
                        s.inert.append(f"kv_connector_extra_config.{k}={_shown(y)} ({EXTRA_KEYS[k]})")
                    else:
                        s.unknown.append(f"kv_connector_extra_config.{k}={_shown(y)}")
            elif key == "kv_connector_module_path":
                if x is not None:
                    s.unmodelled.append(f"kv_connector_module_path {_shown(x)}: a connector loaded from other code "
                                        f"is not modelled")
            elif key in TRANSFER_KEYS:
                s.inert.append(f"kv_transfer_config.{key}={_shown(x)}")
            else:
                s.unknown.append(f"kv_transfer_config.{key}={_shown(x)}")
    s.unknown += [f"dynamo: {w}" for w in r.passthrough if w.startswith("-")]
    s.unmodelled += r.unread
    for name, (value, where_env) in env.items():
        if name in ENV_VARS:
            s.inert.append(f"{name}={value} ({ENV_VARS[name]})")
        else:
            s.unknown.append(f"{name}={value}")
    if s.connector is not None and s.mode is None:
        s.unmodelled.append(f"kv_connector {s.connector}: only NixlConnector (pull) and NixlPushConnector (push) "
                            f"are modelled (checked as pull)")
    if s.tp > 1:
        s.unmodelled.append(f"tensor parallel size {s.tp}: one rank a side is modelled (notification counts across "
                            f"ranks and sibling READs are not; checked with 1)")
    if s.pp > 1:
        s.unmodelled.append(f"pipeline parallel size {s.pp}: pipeline stages are not modelled (checked with 1)")
    return s


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


def ticks(s: Settings) -> tuple[int, int | None, int | None]:
    """(lease, arrival bound, transfer bound) in ticks, the smallest that keep the order of the
    lease against the arrival bound and against the arrival plus transfer bounds (``None``: no
    bound).  The lease is at least 3 ticks so that a heartbeat (every tick: ``lease // 6``)
    comes well within its extension (``2 * lease // 3`` = 2 ticks and more), as 5 s within 20 s."""
    a, b = s.arrival_bound, s.transfer_bound
    best: tuple[int, int, int, int | None, int | None] | None = None
    for lt in range(3, 7):
        for at in ([None] if a is None else range(0, 7)):
            if a is not None and at is not None and ((a == 0) != (at == 0) or _cmp(s.lease, a) != _cmp(lt, at)):
                continue
            for bt in ([None] if b is None else range(1, 7)):
                if b is not None and bt is not None and _cmp(s.lease, (a or 0) + b) != _cmp(lt, (at or 0) + bt):
                    continue
                cost = lt + (at or 0) + (bt or 0)
                if best is None or cost < best[0]:
                    best = (cost, lt, 0, at, bt)
    assert best is not None  # lt = 3..6 and at, bt = 0..6 cover every order of three numbers
    return best[1], best[3], best[4]


def _ticks(n: int) -> str:
    return f"{n} tick" if n == 1 else f"{n} ticks"


def mapping(s: Settings) -> list[tuple[str, str, str]]:
    """(setting = value, where it came from, what it is in the model) for every setting that
    reaches the model."""
    lt, at, bt = ticks(s)
    xfer = "WRITE" if s.mode == "push" else "READ"
    rows = [(f"kv_connector {s.connector}", "command",
             f"mode = {s.mode or 'pull'}" + (" (decode READs prefill's blocks)" if s.mode != "push"
                                             else " (prefill WRITEs into decode's blocks)")),
            (f"kv_role {s.role}", "command", "none: NixlConnector does not distinguish roles (the router does)"),
            (f"kv_lease_duration {s.lease:g} s", s.source["lease"],
             f"kv_lease_duration = {lt} ticks; heartbeats every {s.lease / 6:g} s -> heartbeat_interval = 1 tick, "
             f"extension {2 * s.lease / 3:g} s -> {max(1, 2 * lt // 3)} ticks (both derived, not settable)"),
            ("arrival bound " + (f"{s.arrival_bound:g} s" if s.arrival_bound is not None else "none"),
             s.source["arrival_bound"],
             f"arrival_latency_bound = {_ticks(at)}" if at is not None else
             "arrival_latency_bound = unbounded (the router may hand the request to decode at any time)"),
            ("transfer bound " + (f"{s.transfer_bound:g} s" if s.transfer_bound is not None else "none"),
             s.source["transfer_bound"],
             (f"read_latency_bound = {_ticks(bt)} (decode receiving the request to its {xfer}'s end)" if bt is not None
              else f"read_latency_bound = unbounded (a {xfer} may take any time)")
             + (f"; from {s.transfer_how}" if s.transfer_how else "")),
            ("decode stalls " + ("possible" if s.stalls else "never"), s.source["stalls"],
             "decode_may_stall = " + ("true (a long forward pass stops heartbeats)" if s.stalls else "false")),
            (f"tensor parallel {s.tp}, pipeline parallel {s.pp}", s.source["tp"], "one rank a side, one stage"),
            ("client aborts", "assumed", "client_aborts = true in the abort member; prefill_aborts = true "
             "(0.33.0 ignores an abort of a finished request, #25067)")]
    return rows


# -- the scenario family -------------------------------------------------------------------------


def family(s: Settings) -> list[Member]:
    """``lease``: tenants A and B through one prefill block (a late hand-off, a slow transfer, a
    stalled decode: the lease's race); ``abort``: a client abort on decode while the load is in
    flight, one block a side, the engine loop not stalling (the abort alone)."""
    lt, at, bt = ticks(s)
    base = dict(s.release.engine, mode=s.mode or "pull", kv_lease_duration=lt, heartbeat_interval=1,
                arrival_latency_bound=at, read_latency_bound=bt)
    tag = f"audit-vllm-{s.release.version}"
    ab = (Request("A"), Request("B"))
    xfer = "WRITE" if s.mode == "push" else "READ"

    def member(key: str, trigger: str, prefill: int, decode: int, **engine: Any) -> Member:
        cfg = Config(ab, prefill_blocks=prefill, decode_blocks=decode, engine=Engine(**{**base, **engine}))
        title = f"kvproof audit, {ENGINE} {s.release.version}: {trigger}"
        return Member(key, trigger, Scenario(f"{tag}-{key}", title, title, cfg, {}, None, "<kvproof audit>", ENGINE))

    return [member("lease", f"a late hand-off, a slow {xfer} or a stalled decode against the lease", 1, 2,
                   decode_may_stall=s.stalls),
            member("abort", f"a client abort on decode while its {xfer} is in flight", 1, 1,
                   client_aborts=True, prefill_aborts=True)]


# -- checking ------------------------------------------------------------------------------------


def candidates(s: Settings) -> list[tuple[Settings, str]]:
    """Changes to try as remedies: a lease above the arrival plus transfer bounds (when both are
    known) and the other NIXL mode."""
    out: list[tuple[Settings, str]] = []
    if s.arrival_bound is not None and s.transfer_bound is not None and s.lease <= s.arrival_bound + s.transfer_bound:
        longer = math.floor(s.arrival_bound + s.transfer_bound) + 1
        out.append((dataclasses.replace(s, lease=float(longer)),
                    f"kv_connector_extra_config.kv_lease_duration={longer} (above the arrival and transfer bounds)"))
    other = "NixlConnector" if s.mode == "push" else "NixlPushConnector"
    out.append((dataclasses.replace(s, connector=other), f"kv_connector {other}"))
    return out


def audit(s: Settings, limits=None, remedies: bool = True) -> AuditReport:
    """Check the family of ``s``; one hazard per claim (the first member's, the others named),
    and (with ``remedies``) the candidate changes that remove it when re-checked."""
    from kvproof.checker.explicit.search import Limits

    limits = limits or Limits()
    members = family(s)
    states, cut, violated = core.check_family(members, CLAIMS, limits)
    found: dict[str, Hazard] = {}
    for h in violated:
        if h.claim in found:
            found[h.claim].also.append(h.member.trigger)
        else:
            found[h.claim] = h
    if "no_cross_tenant_read" in found:  # another tenant's KV says more than another request's
        found.pop("decode_reads_only_own_pages", None)
    hazards = sorted(found.values(), key=lambda h: list(HAZARDS).index(h.claim))
    if remedies and hazards:
        for cand, label in candidates(s):
            fam = {m.key: m for m in family(cand)}
            for h in hazards:
                keys = [h.member.key] + [m.key for m in members if m.trigger in h.also]
                ok = True
                for key in keys:
                    rep = core.check(fam[key], [h.claim], limits)
                    if not rep.complete or any(c.verdict != "verified" for c in rep.claims):
                        ok = False
                        break
                if ok:
                    h.remedies.append(label)
    return AuditReport(s, members, states, hazards, cut, LIFECYCLE_PREFIXES)


# -- the command ---------------------------------------------------------------------------------


def _bound(name: str, value: Any, bad) -> float | None:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise bad(f"{name} {value}: expected a number of seconds >= 0") from None
    if not v >= 0 or v == float("inf"):
        raise bad(f"{name} {value}: expected a number of seconds >= 0")
    return v


XFER_TIME = "vllm:nixl_xfer_time_seconds"
"""NIXL's transfer-time histogram (``nixl/stats.py``, ``NixlPromMetrics``): each READ (push: WRITE)
from its post to its completion (``transfer_duration``)."""
QUEUE_TIME = "vllm:request_queue_time_seconds"
"""vLLM's queue-time histogram (``v1/metrics/loggers.py``): a request's time waiting before it is
first scheduled; on decode, from receiving the request until its KV has arrived."""


def metric_bounds(args: argparse.Namespace, bad) -> tuple[float | None, list[str], list[str]]:
    """The transfer bound from ``--metrics FILE`` (``None`` without it): the ``--quantile`` of
    :data:`QUEUE_TIME` plus that of :data:`XFER_TIME`, in seconds (their sum: decode's wait for
    the READ and the READ itself, an upper bound of the time from receiving the request to the
    READ's end); (bound, how it was derived, what the exposition lacks: not modelled).  No
    transfer histogram, or a quantile in its ``+Inf`` bucket: no bound (unbounded), said so."""
    from kvproof.checker.audit.metrics import histogram_bound, quantile, read_exposition

    path = getattr(args, "metrics", None)
    if path is None:
        return None, [], []
    if getattr(args, "transfer_bound", None) is not None:
        raise bad("--metrics and --transfer-bound: give one (the bound is derived from the metrics)")
    q = quantile(getattr(args, "quantile", None), bad)
    families = read_exposition(path, bad)
    xfer, queue = histogram_bound(families, XFER_TIME, q), histogram_bound(families, QUEUE_TIME, q)
    how = [f"--metrics {path}: {b.shown}" for b in (queue, xfer) if b is not None]
    lacks: list[str] = []
    if xfer is None:
        raise bad(f"{path}: no observations of {XFER_TIME} (NIXL's transfer time): a scrape of a decode (pull) or "
                  f"prefill (push) instance with transfers is needed")
    if queue is None:
        lacks.append(f"--metrics {path}: no {QUEUE_TIME}: decode's wait before its READ is not measured (the bound "
                     f"is the READ's alone)")
    if xfer.seconds is None or (queue is not None and queue.seconds is None):
        return None, how + ["a quantile in the +Inf bucket: no transfer bound (unbounded)"], lacks
    return xfer.seconds + (queue.seconds if queue is not None else 0.0), how, lacks


def bounds(args: argparse.Namespace, bad) -> tuple[float | None, float | None]:
    """(arrival bound, transfer bound) in seconds from ``--arrival-bound`` / ``--transfer-bound``
    (``None``: not given, unbounded); the transfer bound from ``--metrics`` when it is given
    (:func:`metric_bounds`)."""
    arrival = _bound("--arrival-bound", getattr(args, "arrival_bound", None), bad)
    transfer = _bound("--transfer-bound", getattr(args, "transfer_bound", None), bad)
    if transfer is not None and transfer == 0:
        raise bad("--transfer-bound 0: expected a number of seconds > 0 (a transfer takes time)")
    if getattr(args, "metrics", None) is not None:
        transfer = metric_bounds(args, bad)[0]
    elif getattr(args, "quantile", None) is not None:
        raise bad("--quantile: only with --metrics")
    return arrival, transfer


def apply_metrics(s: Settings, args: argparse.Namespace, bad) -> None:
    """Mark ``s``'s transfer bound as derived from ``--metrics`` (how, in the settings; what the
    exposition lacks, as not modelled)."""
    if getattr(args, "metrics", None) is None:
        return
    _, how, lacks = metric_bounds(args, bad)
    s.source["transfer_bound"] = "--metrics"
    s.transfer_how = "; ".join(h.removeprefix(f"--metrics {args.metrics}: ") for h in how)
    s.unmodelled += lacks


def run_audit(args: argparse.Namespace, out, bad) -> int:
    """``kvproof audit vllm==...``: ``args`` holds ``engine``, ``env``, ``env_file``, ``launch``,
    ``traces``, ``no_traces``, ``arrival_bound``, ``transfer_bound``, ``no_decode_stalls`` and
    the limits; ``out`` is a console, ``bad`` builds the CLI's bad-input exception."""
    release = parse_engine(args.engine, bad)
    if getattr(args, "peer_tp", None) is not None:
        raise bad("--peer-tp: an SGLang option; vLLM's model has one rank a side")
    command = core.launch_command(args, "vllm serve MODEL --kv-transfer-config '{...}'", bad)
    arrival, transfer = bounds(args, bad)
    launch = parse_launch(command, bad)
    env = core.environment(args, launch, bad)
    # with --max-seconds, in a child stopped at the deadline: the engine's own parser may spend
    # its time loading compiled extensions, which nothing interrupts here
    reading = call_within(getattr(args, "budget", None), read_launch, release, launch, bad,
                          getattr(args, "reader", None) or "auto")
    s = settings_of(release, launch, env, bad, arrival, transfer, not getattr(args, "no_decode_stalls", False),
                    reading)
    apply_metrics(s, args, bad)
    rows = mapping(s) if s.connector is not None else None
    lines = [*core.header(ENGINE, s, rows, 16, "block counts are symbolic"), *core.reading_lines(reading)]
    if s.connector is None:
        why = "no --kv-transfer-config kv_connector: not a PD-disaggregated launch; no KV handoff to audit"
        undecided = [*s.unmodelled, *[u for u in s.unknown if u.startswith(LIFECYCLE_PREFIXES)]]
        if core.nothing_to_audit_json(args, ENGINE, release, reading, why, undecided):
            return core.undecided_code(undecided)
        return core.nothing_to_audit(out, lines, why, ENGINE, release, undecided)
    no_fix = "nothing kvproof tried removes it"
    if s.arrival_bound is None or s.transfer_bound is None:
        no_fix += " (with no --arrival-bound and --transfer-bound, no lease is known to outlast the hand-off)"
    return core.conclude(args, out, lines, lambda limits: audit(s, limits), HAZARDS, no_fix, ENGINE, reading, rows)
