"""``kvproof audit sglang==VERSION [--env NAME=VALUE]... [--env-file FILE] -- COMMAND...``: is a
deployment, as launched, exposed to a KV-isolation hazard?

The launch command (``python -m sglang.launch_server ...``, with any ``NAME=VALUE`` words in
front of it) and the environment given explicitly (``--env``, ``--env-file``; the auditing
process's own environment is never read) are mapped, flag by flag, to the model's engine flags
and scenario values (:data:`FLAGS`, :data:`ENV_VARS`, per release :data:`RELEASES`).  Every flag
and variable kvproof does not know is listed, not ignored.  The audit then builds a small
scenario family from the catalogue's shapes with those values (:func:`family`): a client abort
mid-transfer, a prefill-side transfer failure, an over-long prompt, and on 0.5.23 the metadata
slot; it checks the isolation claims of each with the explicit engine and prints the hazards
found, each with its shortest trace and the settings or upgrades that remove it (each remedy is
re-checked by the same search, never assumed).

Exit codes: 1 exposed; 0 not exposed; 2 cannot decide (a search cut short by a limit, a setting
the model does not cover, or a lifecycle flag kvproof does not know); 3 bad input (raised as
the caller's one-line error).  What is not SGLang's (reading ``NAME=VALUE`` words and files,
splitting flags, the report's records, checking the family, printing) is
:mod:`kvproof.checker.audit.common`'s.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any

from kvproof.checker.audit import common as core
from kvproof.checker.budget import call_within
from kvproof.checker.audit.common import (
    EXIT_EXPOSED, EXIT_NOT_EXPOSED, EXIT_UNDECIDED, AuditReport, Hazard, Launch, Member, read_env_file,
)
from kvproof.model.scenario import Scenario
from kvproof.spec.sglang.config import Config, Engine, Request

__all__ = ["run_audit", "refuse_other_options", "metrics_notes", "TRANSFER_LATENCY", "RELEASES", "Release", "Settings", "Launch", "Member", "parse_engine", "parse_launch",
           "read_env_file", "settings_of", "mapping", "family", "candidates", "audit", "AuditReport", "Hazard",
           "ENGINE", "MODEL_SETTINGS", "ABSTRACTED", "INERT_HANDOFF", "read_launch", "BACKENDS_DEFERRING", "ENV_VARS",
           "INERT_ENV", "LIFECYCLE_PREFIXES", "CLAIMS", "READS", "CHECKSUM", "HAZARDS", "EXIT_EXPOSED",
           "EXIT_NOT_EXPOSED", "EXIT_UNDECIDED"]

ENGINE = "sglang"
"""The engine's name in ``ENGINE==VERSION``."""

# -- what kvproof knows of each release ---------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """One SGLang release as the model sees it."""

    version: str
    spec: str | None
    """The protocol class the family is built on: ``"sglang-0.5.23"`` (the shipped Mooncake
    worker, :mod:`.v0523`) or ``None`` (the base protocol with this release's flags)."""
    engine: dict[str, Any]
    """The release's fixes as engine flags (on top of :class:`~.config.Engine`'s defaults, the
    incident-era engine)."""
    deferred_release: bool
    """The release has deferred decode release (PR 35049) and reads its two variables."""
    deferred_default: bool
    """``SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE`` when it is not set."""
    checksum_flag: bool
    """The release has ``--disaggregation-enable-kv-checksum`` (PR 39500)."""
    metadata_slot: bool
    """The family includes the metadata (aux) slot scenario (the 0.5.23 worker's ``send_aux``)."""
    basis: str
    """Why the release is modelled this way, and what is assumed rather than read."""


_FIXES = dict(reject_at_prefill_door=True, reject_at_decode_door=True, retire_pending_error_prefill=True,
              defer_on_every_failure=True, hold_source_until_drained=True)

RELEASES: dict[str, Release] = {
    "0.5.21": Release(
        "0.5.21", None, {}, deferred_release=False, deferred_default=False, checksum_flag=False,
        metadata_slot=False,
        basis="the release before v0.5.22, the first release Cloudflare's disclosure recommends to disaggregated "
              "operators (seed); modelled as the catalogue's incident-era engine (scenario `incident`: none of "
              "PR 36988, 38935, 35049, 41404, 38961). That 0.5.21 has none of them is assumed from the seed, not "
              "read in its code"),
    "0.5.22": Release(
        "0.5.22", None, dict(_FIXES, release_policy="drain_ack_or_timeout"), deferred_release=True,
        deferred_default=True, checksum_flag=False, metadata_slot=False,
        basis="the catalogue's `v0.5.22` scenario: every fix (PR 36988, 38935, 35049, 41404, source pages held), on "
              "the base protocol; deferred release assumed on by default as that scenario does (some versions of "
              "SGLang's environ.py default it to off: pass it with --env when unsure)"),
    "0.5.23": Release(
        "0.5.23", "sglang-0.5.23", dict(_FIXES, release_policy="drain_ack_or_timeout"), deferred_release=True,
        deferred_default=True, checksum_flag=True, metadata_slot=True,
        basis="the `sglang-0.5.23-*` scenarios: the release as shipped on Mooncake (spec/sglang/v0523.py), read in "
              "its code and replayed on it by `kvproof conform`; deferred release defaults to on (environ.py)"),
}
"""The known releases, oldest first."""

BACKENDS_DEFERRING = ("mooncake", "nixl", "mori")
"""Backends whose manager declares ``supports_deferred_decode_kv_release`` (0.5.23's code; the
base class and ``fake`` do not)."""

# -- settings and variables ---------------------------------------------------------------------
#
# Flags are not listed here: a launch line is read by SGLang's own parser, or by the flag table
# generated from it (:mod:`.launch`, :mod:`.gen_flags`).  What is listed is what the model reads
# of the parsed settings (by their destination in SGLang's ``ServerArgs``).

MODEL_SETTINGS: dict[str, str] = {
    "disaggregation_mode": "prefill or decode: which side this line launches",
    "disaggregation_transfer_backend": "mooncake (default), nixl, ...: deferred release capability, write bound",
    "tp_size": "tensor-parallel size: the ranks of this side",
    "dp_size": "data-parallel size: with --enable-dp-attention, attention TP = tp / dp",
    "enable_dp_attention": "attention TP = tp / dp (deprecated in 0.5.23 for --attn-dp-size)",
    "attn_dp_size": "attention data-parallel size: attention TP = tp / attn_dp",
    "pp_size": "pipeline-parallel size (not modelled beyond 1)",
    "disaggregation_decode_allocation_policy": "when decode reserves pages (only `early` is modelled)",
    "disaggregation_enable_kv_checksum": "PR 39500's transfer checksum (0.5.23)",
}
"""``ServerArgs`` settings that change the model, and what they change."""

ABSTRACTED = ("context_length", "mem_fraction_static", "page_size", "max_running_requests", "chunked_prefill_size",
              "max_total_tokens")
"""Settings the model abstracts: pool sizes and page counts are symbolic (a prompt may exceed the
prefill pool whatever they are), a handful of requests stands for any load."""

INERT_HANDOFF = ("disaggregation_ib_device", "disaggregation_bootstrap_port")
"""Handoff settings with no part in the page lifecycle (which NIC, which port); every other
``disaggregation_*`` setting the model does not read makes a clean verdict undecidable."""

ENV_VARS: dict[str, str] = {
    "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE": "deferred decode release on abort (PR 35049)",
    "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT": "the deferred release deadline, seconds (30)",
    "MC_TRANSFER_TIMEOUT": "Mooncake transfer engine's timeout, seconds (30): the longest transfer call",
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "decode fails a transfer not concluded by then (300 s)",
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "prefill waits this long for decode's page indices (300 s)",
    "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "decode's health check of prefill, seconds (5)",
    "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": "missed heartbeats before prefill is declared dead (2)",
}
"""Environment variables the audit reads from ``--env`` / ``--env-file`` / the command's prefix."""

INERT_ENV = {
    "MC_TE_METRIC": "Mooncake transfer engine metrics reporting",
    "MC_TE_METRIC_INTERVAL_SECONDS": "Mooncake transfer engine metrics interval",
}
"""Known variables with no part in the KV page lifecycle (Mooncake's transfer engine docs)."""

_SUBSUMED = {
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "subsumed: decode may abort a request at any point (client aborts)",
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "subsumed: prefill may fail a transfer at any point",
    "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "liveness only: peer death is not among the isolation checks",
    "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": "liveness only: peer death is not among the isolation checks",
}

LIFECYCLE_PREFIXES = ("--disaggregation-", "SGLANG_DISAGGREGATION_", "MC_", "dynamo:")
"""Names that belong to the KV handoff: one of these that kvproof does not know makes a clean
verdict undecidable (``dynamo:``: a flag of Dynamo's own, which kvproof does not read)."""

CLAIMS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
          "no_source_free_while_read", "rejected_never_succeeds", "success_implies_full_coverage")
"""The isolation claims the audit checks."""

READS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "rejected_never_succeeds",
         "success_implies_full_coverage")
"""The claims about what a response is computed on (the ones a checksum can catch)."""
CHECKSUM = "--disaggregation-enable-kv-checksum"
"""The checksum's flag as a remedy: it detects a bad read, it cannot stop a write (so it is
tried on the :data:`READS` claims only)."""

HAZARDS = {  # claim -> what it means for the deployment
    "decode_reads_only_own_pages": "decode reads KV that was not written for the request it serves",
    "no_cross_tenant_read": "a response is computed on another tenant's KV",
    "no_write_after_release": "a transfer writes into pages decode had already released to their next owner",
    "no_source_free_while_read": "prefill reuses source pages that a transfer is still reading",
    "rejected_never_succeeds": "a request rejected at admission is served (HTTP 200)",
    "success_implies_full_coverage": "a request succeeds with pages its transfer never wrote",
}
"""Each checked claim, violated, as a hazard of the deployment (the order hazards are listed in)."""

# -- reading the input ----------------------------------------------------------------------------


def parse_engine(text: str, bad) -> Release:
    """``sglang==0.5.23`` -> its :class:`Release`; anything else is bad input."""
    return core.parse_engine(text, ENGINE, RELEASES, "0.5.23", bad)


def parse_launch(command: list[str], bad) -> Launch:
    """Split ``[NAME=VALUE | env ...] LAUNCHER ARGS`` (a launcher of :data:`.launch.LAUNCHERS`);
    a command that is not an SGLang server launch is bad input.  ``Launch.flags`` holds SGLang's
    arguments as words (``("", word)``), read by :func:`read_launch`."""
    from kvproof.spec.sglang.launch import LAUNCHERS, split

    words = core.command_words(command, bad)
    env = core.take_prefix_environment(words)
    found = split(words)
    if found is None:
        shown = " ".join(command)[:60]
        raise bad(f"the launch command {shown!r}: expected an SGLang server launch "
                  f"({', '.join(LAUNCHERS)} ...) after --")
    program, rest = found
    return Launch(env, [("", w) for w in rest], program)


def read_launch(release: Release, launch: Launch, bad, reader: str = "auto") -> core.Reading:
    """SGLang's reading of the launch's arguments (:func:`.launch.read`); a line SGLang refuses
    is bad input with SGLang's own message."""
    from kvproof.spec.sglang.launch import ParserRefused, read

    argv = [w for _, w in launch.flags]
    try:
        reading = read(argv, release.version, dynamo=launch.program.endswith("dynamo.sglang"), reader=reader)
    except ParserRefused as e:
        raise bad(f"sglang {release.version} refuses this line: {e}") from None
    reading.launcher = launch.program
    return reading


# -- settings ------------------------------------------------------------------------------------


@dataclass
class Settings(core.SettingsBase):
    """The deployment as kvproof reads it: every value with where it came from (and, from
    :class:`~kvproof.checker.audit.common.SettingsBase`, ``source``, ``unknown``, ``abstracted``,
    ``inert`` and ``unmodelled``)."""

    release: Release
    mode: str | None = None
    backend: str = "mooncake"
    tp: int = 1
    dp: int = 1
    dp_attention: bool = False
    pp: int = 1
    peer_tp: int | None = None
    allocation_policy: str = "early"
    checksum: bool = False
    deferred: bool = False
    release_timeout: float = 30.0
    transfer_timeout: float = 30.0

    @property
    def attn_tp(self) -> int:
        """This side's attention-TP size (the ranks that send or receive a request's KV)."""
        return max(1, self.tp // self.dp) if self.dp_attention else self.tp

    def ranks(self) -> tuple[int, int]:
        """(prefill ranks, decode ranks) of the model, at most 2 a side."""
        mine = min(self.attn_tp, 2)
        peer = min(self.peer_tp if self.peer_tp is not None else self.attn_tp, 2)
        return (peer, mine) if self.mode == "decode" else (mine, peer)

    def deferring(self) -> bool:
        """Decode holds an aborted request's pages (the release has it, the variable is on, the
        backend declares the capability)."""
        return self.release.deferred_release and self.deferred and self.backend in BACKENDS_DEFERRING

    def bounded(self) -> bool:
        """A completed transfer call is bounded by a timeout kvproof knows (Mooncake's)."""
        return self.backend == "mooncake"

    def ticks(self) -> tuple[int, int | None]:
        """(release deadline, write latency bound) in ticks, keeping the order of the deadline
        against one and two transfer calls: ``t > b`` iff the deadline outlasts a call, ``t > 2b``
        iff it outlasts two (a chunk's call then ``send_aux``, 0.5.23)."""
        if not self.bounded():
            return 2, None
        r, c = self.release_timeout, self.transfer_timeout
        if r < c:
            return 1, 2
        if r == c:
            return 2, 2
        if r < 2 * c:
            return 3, 2
        if r == 2 * c:
            return 2, 1
        return 3, 1


def _bool(name: str, value: str, bad) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "y"):
        return True
    if v in ("false", "0", "no", "n"):
        return False
    raise bad(f"{name}={value}: expected a boolean as SGLang reads it (true/1/yes/y or false/0/no/n)")


def settings_of(release: Release, launch: Launch, env: dict[str, tuple[str, str]], bad,
                peer_tp: int | None = None, reading: core.Reading | None = None) -> Settings:
    """Map SGLang's reading of the launch (``reading``; read here when not given) and the
    environment (name -> (value, where it came from)) to :class:`Settings`; the process
    environment is not read."""
    r = reading if reading is not None else read_launch(release, launch, bad)
    s = Settings(release, deferred=release.deferred_default, peer_tp=peer_tp)
    where = "command" if not r.config_files else "command/--config"
    s.source = {"backend": "default", "tp": "default", "deferred": "default", "release_timeout": "default",
                "transfer_timeout": "default", "peer_tp": "--peer-tp" if peer_tp is not None else "assumed"}
    v = r.values
    mode = v.get("disaggregation_mode", "null")
    s.mode = None if mode == "null" else mode
    s.source["mode"] = where
    if "disaggregation_transfer_backend" in v:
        s.backend, s.source["backend"] = str(v["disaggregation_transfer_backend"]).lower(), where
    if "tp_size" in v:
        s.tp, s.source["tp"] = core.count(r.options.get("tp_size", "--tp-size"), str(v["tp_size"]), bad), where
    s.dp = core.count("--dp-size", str(v.get("dp_size", 1)), bad)
    s.pp = core.count("--pp-size", str(v.get("pp_size", 1)), bad)
    attn_dp = core.count("--attn-dp-size", str(v.get("attn_dp_size", 1)), bad)
    if attn_dp > 1:
        s.dp, s.dp_attention = attn_dp, True
    elif v.get("enable_dp_attention"):
        s.dp_attention = True
    s.allocation_policy = v.get("disaggregation_decode_allocation_policy", "early")
    if v.get("disaggregation_enable_kv_checksum"):
        if release.checksum_flag:
            s.checksum = True
        else:
            s.unknown.append(f"--disaggregation-enable-kv-checksum (not in sglang {release.version} as modelled)")
    for dest in v:
        if dest in MODEL_SETTINGS or dest == "config":
            continue
        shown = r.shown(dest)
        if dest in ABSTRACTED:
            s.abstracted.append(shown)
        elif dest.startswith("disaggregation_") and dest not in INERT_HANDOFF:
            s.unknown.append(shown)  # a handoff setting the model does not read
        else:
            s.inert.append(shown)
    s.unknown += [f"dynamo: {w}" for w in r.passthrough if w.startswith("-")]
    s.unmodelled += r.unread
    for name, (value, where_env) in env.items():
        if name == "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE" and release.deferred_release:
            s.deferred, s.source["deferred"] = _bool(name, value, bad), where_env
        elif name == "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT" and release.deferred_release:
            s.release_timeout, s.source["release_timeout"] = core.seconds(name, value, bad), where_env
        elif name == "MC_TRANSFER_TIMEOUT":
            s.transfer_timeout, s.source["transfer_timeout"] = core.seconds(name, value, bad), where_env
        elif name in INERT_ENV:
            s.inert.append(f"{name}={value}")
        elif name in _SUBSUMED:
            core.seconds(name, value, bad)
            s.inert.append(f"{name}={value} ({_SUBSUMED[name]})")
        else:
            s.unknown.append(f"{name}={value}")
    if s.backend not in ("mooncake", "fake"):
        s.unmodelled.append(f"--disaggregation-transfer-backend {s.backend}: only Mooncake's transfer worker is "
                            f"modelled (checked as the base protocol with no bound on a write)")
    if s.attn_tp > 2 or (s.peer_tp or 0) > 2:
        s.unmodelled.append(f"attention TP {max(s.attn_tp, s.peer_tp or 0)}: at most 2 ranks a side are modelled "
                            f"(checked with 2)")
    if s.pp > 1:
        s.unmodelled.append(f"pipeline parallel size {s.pp}: pipeline stages are not modelled (checked with 1)")
    if s.allocation_policy != "early":
        s.unmodelled.append(f"--disaggregation-decode-allocation-policy {s.allocation_policy}: only `early` "
                            f"(decode reserves before prefill runs) is modelled")
    return s


def mapping(s: Settings) -> list[tuple[str, str, str]]:
    """(setting = value, where it came from, what it is in the model) for every setting that
    reaches the model."""
    t, b = s.ticks()
    rel = s.release
    pr, dr = s.ranks()
    rows = [(f"--disaggregation-mode {s.mode}", s.source.get("mode", "command"),
             "this line's side (decode: its ranks are decode_ranks)"),
            (f"--disaggregation-transfer-backend {s.backend}", s.source["backend"],
             "deferred release: " + ("supported" if s.backend in BACKENDS_DEFERRING else "not supported")
             + ("; a transfer call is bounded by MC_TRANSFER_TIMEOUT" if s.bounded() else "; no known bound on a write")),
            (f"tensor parallel {s.tp}" + (f", dp {s.dp} with DP attention" if s.dp_attention else ""), s.source["tp"],
             f"prefill_ranks = {pr}, decode_ranks = {dr}"),
            (f"other side's attention TP {s.peer_tp if s.peer_tp is not None else s.attn_tp}", s.source["peer_tp"],
             "not on this line: the same as this side unless --peer-tp says otherwise")]
    if s.pp > 1:
        rows.append((f"--pp-size {s.pp}", "command", "not modelled (checked with 1 stage)"))
    if rel.deferred_release:
        policy = "drain_ack_or_timeout" if s.deferring() else "immediate"
        rows.append((f"SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE={'1' if s.deferred else '0'}",
                     s.source["deferred"], f"release_policy = {policy}"))
        rows.append((f"SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT={s.release_timeout:g}",
                     s.source["release_timeout"], f"timeout = {t} ticks" if s.deferring() else "unused (no deferral)"))
    else:
        rows.append(("deferred release", "release", f"release_policy = immediate ({rel.version} has no PR 35049)"))
    if s.bounded():
        rows.append((f"MC_TRANSFER_TIMEOUT={s.transfer_timeout:g}", s.source["transfer_timeout"],
                     f"write_latency_bound = {b} ticks ({_relation(s)}); a call that failed on it: unbounded"))
    if rel.checksum_flag:
        rows.append((f"--disaggregation-enable-kv-checksum {'on' if s.checksum else 'off'}",
                     "command" if s.checksum else "default",
                     "checksum = true, verify_then_read = true (the served model assumed supported)"
                     if s.checksum else "checksum = false"))
    rows.append((f"--disaggregation-decode-allocation-policy {s.allocation_policy}",
                 "command" if s.allocation_policy != "early" else "default",
                 "decode reserves when the request arrives (the model's order)" if s.allocation_policy == "early"
                 else "not modelled"))
    return rows


def _relation(s: Settings) -> str:
    r, c = s.release_timeout, s.transfer_timeout
    if r < c:
        return "deadline below the transfer timeout"
    if r == c:
        return "deadline equal to the transfer timeout"
    if r < 2 * c:
        return "deadline above one transfer call, below two"
    if r == 2 * c:
        return "deadline equal to two transfer calls"
    return "deadline above two transfer calls"


# -- the scenario family -------------------------------------------------------------------------


def family(s: Settings) -> list[Member]:
    """The small scenarios that stand for this deployment, from the catalogue's shapes:
    ``abort`` (a client abort mid-transfer: ``sglang-0.5.23-mooncake``'s shape, ``-tp2x2``'s
    with two ranks), ``failure`` (a prefill-side transfer failure: ``sglang-0.5.23-failed-send``),
    ``admission`` (a prompt longer than the prefill pool: ``incident``) and, on 0.5.23 with
    Mooncake, ``metadata`` (``sglang-0.5.23-aux``)."""
    rel = s.release
    t, b = s.ticks()
    flags = dict(rel.engine)
    if not s.deferring():
        flags["release_policy"] = "immediate"
    if s.checksum:
        flags.update(checksum=True, verify_then_read=True)
    spec = rel.spec if s.backend in ("mooncake", "fake") else None
    pr, dr = s.ranks()
    tag = f"audit-{rel.version}"

    def member(key, trigger, sizes, requests, **engine):
        e = Engine(**{**flags, "timeout": t, **engine})
        cfg = Config(tuple(Request(*r) for r in requests), engine=e, **sizes)
        title = f"kvproof audit, {ENGINE} {rel.version}: {trigger}"
        return Member(key, trigger, Scenario(f"{tag}-{key}", title, title, cfg, {}, spec, "<kvproof audit>", "sglang"))

    one = dict(decode_pages=1, prefill_pages=2, context_limit=2)
    two = dict(decode_pages=1, prefill_pages=1, context_limit=1, prefill_ranks=pr, decode_ranks=dr)
    ab = [("A", 1), ("B", 1)]
    out = [member("abort", "a client abort mid-transfer", two if max(pr, dr) > 1 else one, ab,
                  client_aborts=True, transfer_failures=False, write_latency_bound=b),
           member("failure", "a prefill-side transfer failure (its write has no bound)", one, ab,
                  client_aborts=False, transfer_failures=True, write_latency_bound=None),
           member("admission", "a prompt longer than the prefill pool",
                  dict(decode_pages=3, prefill_pages=2, context_limit=3), [("A", 2), ("B", 3), ("B", 2)],
                  client_aborts=False, transfer_failures=False, write_latency_bound=b)]
    if rel.metadata_slot and s.backend == "mooncake" and s.deferring():
        out.append(member("metadata", "a client abort while the metadata slot is written",
                          dict(decode_pages=1, prefill_pages=2, context_limit=1, aux_slots=1), ab,
                          client_aborts=True, transfer_failures=False, write_latency_bound=b))
    return out


# -- checking ------------------------------------------------------------------------------------


def audit(s: Settings, limits=None, remedies: bool = True) -> AuditReport:
    """Check the family of ``s``; each hazard keeps the shortest trace over the family, and
    (with ``remedies``) the candidate changes that remove it when re-checked."""
    from kvproof.checker.explicit.search import Limits

    limits = limits or Limits()
    members = family(s)
    states, cut, violated = core.check_family(members, CLAIMS, limits)
    found: dict[str, Hazard] = {}
    per_member: dict[str, list[str]] = {}
    for h in violated:
        per_member.setdefault(h.member.key, []).append(h.claim)
        found[f"{h.claim}/{h.member.key}"] = h
    for key, claims in per_member.items():  # another tenant's KV says more than another request's
        if "no_cross_tenant_read" in claims:
            found.pop(f"decode_reads_only_own_pages/{key}", None)
    hazards = sorted(found.values(), key=lambda h: (list(HAZARDS).index(h.claim), h.depth))
    if remedies and hazards:
        for cand, label in candidates(s):
            try:
                fam = {m.key: m for m in family(cand)}
            except ValueError:
                continue
            for key, claims in per_member.items():
                if key not in fam:  # the candidate has no such member: nothing shown either way
                    continue
                if label == CHECKSUM:  # it detects a bad read; it cannot stop a write
                    claims = [c for c in claims if c in READS]
                    if not claims:
                        continue
                rep = core.check(fam[key], claims, limits)
                if not rep.complete:
                    continue
                removed = {c.claim for c in rep.claims if c.verdict == "verified"}
                for h in hazards:
                    if h.member.key == key and h.claim in removed and \
                            not any(label.startswith(f"{r} with ") for r in h.remedies):
                        h.remedies.append(label)
    return AuditReport(s, members, states, hazards, cut, LIFECYCLE_PREFIXES)


def candidates(s: Settings) -> list[tuple[Settings, str]]:
    """Changes to try as remedies: deferred release on, a deferring backend, a deadline above two
    transfer calls, the checksum, and each later known release (alone and with that deadline)."""
    out: list[tuple[Settings, str]] = []
    rel = s.release
    safe = 2 * s.transfer_timeout + 1
    deadline = f"SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT={safe:g} (above two transfer calls)"
    if rel.deferred_release and not s.deferred:
        out.append((dataclasses.replace(s, deferred=True), "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1"))
        out.append((dataclasses.replace(s, deferred=True, release_timeout=safe),
                    f"SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1 with {deadline}"))
    if rel.deferred_release and s.backend == "fake":
        out.append((dataclasses.replace(s, backend="mooncake"), "--disaggregation-transfer-backend mooncake"))
    if rel.deferred_release and s.deferring() and s.bounded() and s.release_timeout <= 2 * s.transfer_timeout:
        out.append((dataclasses.replace(s, release_timeout=safe), deadline))
    if rel.checksum_flag and not s.checksum:
        out.append((dataclasses.replace(s, checksum=True), CHECKSUM))
    versions = list(RELEASES)
    for v in versions[versions.index(rel.version) + 1:]:
        newer = RELEASES[v]
        up = dataclasses.replace(s, release=newer, deferred=s.deferred if rel.deferred_release else newer.deferred_default)
        out.append((up, f"upgrade to {ENGINE}=={v}"))
        if newer.deferred_release and up.bounded():
            out.append((dataclasses.replace(up, deferred=True, release_timeout=safe),
                        f"upgrade to {ENGINE}=={v} with {deadline}"))
    return out


# -- the command ---------------------------------------------------------------------------------


def refuse_other_options(args: argparse.Namespace, bad) -> None:
    """vLLM's audit options are bad input here: SGLang's transfer bound is a timeout it reads, not
    a measurement."""
    for opt, given in (("--arrival-bound", getattr(args, "arrival_bound", None)),
                       ("--transfer-bound", getattr(args, "transfer_bound", None)),
                       ("--no-decode-stalls", getattr(args, "no_decode_stalls", None) or None)):
        if given is not None:
            raise bad(f"{opt}: a vLLM option; SGLang's transfer bound is MC_TRANSFER_TIMEOUT (--env), the "
                      f"timeout of a transfer call, not a measurement")
    if getattr(args, "quantile", None) is not None and getattr(args, "metrics", None) is None:
        raise bad("--quantile: only with --metrics")


TRANSFER_LATENCY = "sglang:kv_transfer_latency_ms"
"""SGLang's KV transfer latency histogram (``observability/metrics_collector.py``), observed by
prefill for each request whose transfer succeeded (``disaggregation/prefill.py``)."""


def metrics_notes(args: argparse.Namespace, bad) -> list[str]:
    """What ``--metrics FILE`` says of the transfers, as a note: SGLang's transfer latency at the
    ``--quantile``.  It is not a bound of the model: prefill skips aborted requests when it
    observes it (``disaggregation/prefill.py``, ``FINISH_ABORT``), and on Mooncake it measures the
    last chunk only (``reports_transfer_latency`` is NIXL's; ``observability/req_time_stats.py``),
    so the transfers the hazards are about are not in it; a transfer call is bounded by
    ``MC_TRANSFER_TIMEOUT``, which the model reads.  No such histogram in the file is bad input."""
    from kvproof.checker.audit.metrics import histogram_bound, quantile, read_exposition

    path = getattr(args, "metrics", None)
    if path is None:
        return []
    q = quantile(getattr(args, "quantile", None), bad)
    b = histogram_bound(read_exposition(path, bad), TRANSFER_LATENCY, q, scale=0.001)
    if b is None:
        raise bad(f"{path}: no observations of {TRANSFER_LATENCY} (SGLang's transfer latency): a scrape of a "
                  f"prefill instance with --enable-metrics is needed")
    return [f"--metrics {path}: {b.shown}: not a bound of the model (aborted requests are not observed; on Mooncake "
            f"the last chunk only); a transfer call is bounded by MC_TRANSFER_TIMEOUT"]


def run_audit(args: argparse.Namespace, out, bad) -> int:
    """``kvproof audit``: ``args`` holds ``engine``, ``env``, ``env_file``, ``launch``,
    ``traces``, ``no_traces``, ``peer_tp`` and the limits; ``out`` is a console, ``bad`` builds the
    CLI's bad-input exception.  Returns the exit code."""
    release = parse_engine(args.engine, bad)
    refuse_other_options(args, bad)
    command = core.launch_command(args, "python -m sglang.launch_server ...", bad)
    launch = parse_launch(command, bad)
    env = core.environment(args, launch, bad)
    # with --max-seconds, in a child stopped at the deadline: the engine's own parser may spend
    # its time loading compiled extensions, which nothing interrupts here
    reading = call_within(getattr(args, "budget", None), read_launch, release, launch, bad,
                          getattr(args, "reader", None) or "auto")
    peer = getattr(args, "peer_tp", None)
    peer_tp = core.count("--peer-tp", peer, bad) if peer is not None else None
    s = settings_of(release, launch, env, bad, peer_tp, reading)
    s.inert += metrics_notes(args, bad)
    rows = mapping(s) if s.mode is not None else []
    lines = [*core.header(ENGINE, s, rows, 16, "sizes are symbolic; a prompt may exceed the pool"),
             *core.reading_lines(reading)]
    if s.mode is None:
        why = "no --disaggregation-mode prefill|decode: not a PD-disaggregated launch; no KV handoff to audit"
        undecided = [*s.unmodelled, *[u for u in s.unknown if u.startswith(LIFECYCLE_PREFIXES)]]
        if core.nothing_to_audit_json(args, ENGINE, release, reading, why, undecided):
            return core.undecided_code(undecided)
        return core.nothing_to_audit(out, lines, why, ENGINE, release, undecided)
    return core.conclude(args, out, lines, lambda limits: audit(s, limits), HAZARDS,
                         "nothing kvproof tried removes it (no setting it knows, no known release)",
                         ENGINE, reading, rows)
