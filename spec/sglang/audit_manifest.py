"""``kvproof audit sglang==VERSION --manifest FILE.yaml``: an SGLang prefill/decode pair as a
Kubernetes deployment runs it, audited as one deployment.

Each container's command line is read as a launch line (:func:`.audit.parse_launch`,
:func:`.audit.read_launch`: SGLang's own parser or the table generated from it) with the
container's environment; ``--disaggregation-mode`` says which side it is (else the manifest's
role).  The pair is then one :class:`~.audit.Settings` (:func:`merge`), each value taken from
the side whose code reads it in SGLang 0.5.23:

* the ranks: prefill's and decode's attention TP (no ``--peer-tp`` to assume);
* ``SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE`` and its timeout, and
  ``--disaggregation-decode-allocation-policy``: decode's (decode releases and reserves);
* ``MC_TRANSFER_TIMEOUT``: prefill's (Mooncake's transfer workers, which call
  ``batch_transfer_sync``, run in prefill mode: ``disaggregation/mooncake/conn.py``);
* ``--disaggregation-enable-kv-checksum``: on only when both sides set it and their attention TP
  agrees: prefill computes the digest (``disaggregation/prefill.py``, ``kv_checksum_computer``),
  decode verifies it (``disaggregation/decode.py``, ``_verify_kv_checksums``), and a digest of
  another layout (``kv_layout_signature``: TP width, page size, dtype) is skipped
  (``_kv_checksum_comparable``): requests are then admitted unverified;
* ``--disaggregation-transfer-backend``: both sides must name the same one.

A remedy names the side it is set on (``decode: SGLANG_...=61``, ``both sides: upgrade ...``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kvproof.checker.audit import common as core
from kvproof.checker.audit import manifest as mf
from kvproof.checker.budget import call_within
from kvproof.spec.sglang import audit as sg

__all__ = ["read_side", "merge", "key", "side_of_remedy", "run_manifest", "DECODE_ENV", "PREFILL_ENV"]

DECODE_ENV = ("SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE",
              "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE_TIMEOUT")
"""Variables decode reads (deferred release: ``disaggregation/decode.py``)."""
PREFILL_ENV = ("MC_TRANSFER_TIMEOUT",)
"""Variables of prefill's process that bound a write (Mooncake's transfer engine, in prefill)."""


def read_side(release: sg.Release, reader: str, bad, budget=None):
    """The reading of one container's command line, for :func:`~kvproof.checker.audit.manifest.pair`:
    a launch line of :data:`.launch.LAUNCHERS` read as :func:`.audit.read_launch` reads it (with
    ``budget``, the command's ``--max-seconds``, in a child process stopped at its deadline:
    :func:`~kvproof.checker.budget.call_within`)."""
    from kvproof.spec.sglang.launch import split

    return mf.side_reader(
        bad, is_launch=lambda words: split(words) is not None, parse=sg.parse_launch,
        read=lambda launch, here: call_within(budget, sg.read_launch, release, launch, here, reader),
        settings=lambda launch, env, here, reading: sg.settings_of(release, launch, env, here, None, reading),
        role=lambda s: s.mode, prefixes=sg.LIFECYCLE_PREFIXES, config_flag="--config")


def key(s: sg.Settings) -> tuple:
    """What the model reads of one side (two containers of a role that agree on it read alike)."""
    return (s.mode, s.backend, s.attn_tp, s.pp, s.allocation_policy, s.checksum, s.deferred, s.release_timeout,
            s.transfer_timeout, tuple(s.unknown), tuple(s.unmodelled))


def merge(p: mf.Side, d: mf.Side) -> tuple[sg.Settings, list[tuple[str, str, str]], Any]:
    """The pair as one deployment: decode's settings, with prefill's attention TP as the other
    side's, prefill's transfer timeout, the checksum as both sides set it; every list of names
    marked with its side.  Returns (settings, rows, the side each remedy names)."""
    ps, ds = p.settings, d.settings
    s = dataclasses.replace(ds, source={k: f"decode {v}" for k, v in ds.source.items()})
    s.mode, s.peer_tp, s.source["peer_tp"] = "decode", ps.attn_tp, f"prefill {ps.source['tp']}"
    s.transfer_timeout, s.source["transfer_timeout"] = ps.transfer_timeout, f"prefill {ps.source['transfer_timeout']}"
    for name in ("unknown", "abstracted", "inert", "unmodelled"):
        setattr(s, name, [*mf.sided("prefill", getattr(ps, name)), *mf.sided("decode", getattr(ds, name))])
    for side, x in (("prefill", ps), ("decode", ds)):
        if x.mode is None:
            s.unmodelled.append(f"{side}: no --disaggregation-mode on its line: SGLang runs it without a KV handoff")
    if ps.backend != ds.backend:
        s.unmodelled.append(f"--disaggregation-transfer-backend: prefill {ps.backend}, decode {ds.backend}: the two "
                            f"sides must use one backend")
    if ps.pp != ds.pp or ps.pp > 1:
        s.pp = max(ps.pp, ds.pp)
    layouts_agree = ps.attn_tp == ds.attn_tp
    s.checksum = ps.checksum and ds.checksum and layouts_agree
    if ps.checksum != ds.checksum:
        on, off = ("prefill", "decode") if ps.checksum else ("decode", "prefill")
        why = ("decode does not verify" if off == "decode" else
               "prefill writes no digest, so decode verifies nothing (decode.py, _kv_checksum_comparable)")
        s.inert.append(f"{sg.CHECKSUM} set on {on} only: {why}; checksum = false")
    elif ps.checksum and not layouts_agree:
        s.inert.append(f"{sg.CHECKSUM} on both sides, but attention TP {ps.attn_tp} (prefill) and {ds.attn_tp} "
                       f"(decode) give other KV layouts: decode admits the requests unverified "
                       f"(decode.py, _kv_checksum_comparable); checksum = false")
    for v in PREFILL_ENV:
        if v in {n for n in _env_names(d)} and v not in _env_names(p):
            s.inert.append(f"{v} set on decode only: it bounds the writes of prefill's transfer engine")
    for v in DECODE_ENV:
        if v in _env_names(p) and v not in _env_names(d):
            s.inert.append(f"{v} set on prefill only: decode reads it")
    rows = []
    for name, where, meaning in sg.mapping(s) if s.mode is not None else []:
        if name.startswith("--disaggregation-mode"):
            name, where, meaning = "--disaggregation-mode prefill / decode", "both lines", "the pair: both sides"
        elif name.startswith("other side's attention TP"):
            name, meaning = f"prefill attention TP {ps.attn_tp}", "from prefill's line"
        elif name.startswith("tensor parallel"):
            name = f"decode {name}"
        elif name.startswith(sg.CHECKSUM):
            name = f"{sg.CHECKSUM} prefill {'on' if ps.checksum else 'off'}, decode {'on' if ds.checksum else 'off'}"
            where = "both lines"
        rows.append((name, where, meaning))

    def side_of(remedy: str) -> str | None:
        return side_of_remedy(remedy, ps, ds, layouts_agree)

    return s, rows, side_of


def _env_names(side: mf.Side) -> set[str]:
    words = list(side.command)
    return set(side.container.env) | set(core.take_prefix_environment(words))


def side_of_remedy(remedy: str, ps: sg.Settings, ds: sg.Settings, layouts_agree: bool) -> str | None:
    """``remedy`` with the side it is set on: decode's variables on decode, the checksum on the
    sides that lack it (none when the layouts differ: the digest would be skipped), a backend and
    an upgrade on both sides."""
    if remedy == sg.CHECKSUM:
        if not layouts_agree:
            return None
        lacking = [n for n, x in (("prefill", ps), ("decode", ds)) if not x.checksum]
        return f"{' and '.join(lacking) if len(lacking) == 1 else 'both sides'}: {remedy}"
    if remedy.startswith("SGLANG_DISAGGREGATION_"):
        return f"decode: {remedy}"
    return f"both sides: {remedy}"


def _merge_with_notes(args: Any, bad):
    def merged(p: mf.Side, d: mf.Side):
        s, rows, side_of = merge(p, d)
        s.inert += sg.metrics_notes(args, bad)
        return s, rows, side_of

    return merged


def run_manifest(args: Any, out: Any, bad) -> int:
    """``kvproof audit sglang==VERSION --manifest FILE...``."""
    release = sg.parse_engine(args.engine, bad)
    sg.refuse_other_options(args, bad)
    if getattr(args, "peer_tp", None) is not None:
        raise bad("--peer-tp: with --manifest the other side's TP is read from its own container")
    return mf.audit_manifest(
        args, out, bad, engine=sg.ENGINE, release=release,
        read=read_side(release, getattr(args, "reader", None) or "auto", bad, getattr(args, "budget", None)),
        merge=_merge_with_notes(args, bad), key=key,
        audit=lambda s, limits: sg.audit(s, limits), hazards=sg.HAZARDS,
        no_fix="nothing kvproof tried removes it (no setting it knows, no known release)", where_width=24,
        abstracted_why="sizes are symbolic; a prompt may exceed the pool")
