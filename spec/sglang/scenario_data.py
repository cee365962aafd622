"""The SGLang protocol's keys of a scenario file: ``[sizes]``, ``[[requests]]`` and ``[engine]``.

:func:`parse_config` turns them into a :class:`~.config.Config` (one ``fail(key, what, got)``
error for the first problem - the file, the key and what was expected - or
``fail.problem(key, text)``), :func:`config_data` is its inverse (what traces and certificates
store)::

    [sizes]
    decode_pages = 3        # 1..64
    prefill_pages = 2       # 1..64
    context_limit = 3       # 1..64; optional: prefill_ranks, decode_ranks (1..4), aux_slots (0..8), layers (1..4)

    [[requests]]            # 1..32 of them
    tenant = "A"
    pages = 2               # 1..context_limit

    [engine]                # flags of kvproof.spec.sglang.config.Engine; unset ones keep their defaults
    release_policy = "immediate"
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, Callable

from kvproof.model.scenario import did_you_mean
from kvproof.spec.sglang.config import CHOICES, Config, Engine, Request

__all__ = ["CONFIG_KEYS", "parse_config", "config_data"]

CONFIG_KEYS = ("sizes", "requests", "engine")
_SIZES = {"decode_pages": (1, 64), "prefill_pages": (1, 64), "context_limit": (1, 64)}
_OPTIONAL_SIZES = {"prefill_ranks": (1, 4, 1), "decode_ranks": (1, 4, 1), "aux_slots": (0, 8, 0), "layers": (1, 4, 1)}
_MAX_REQUESTS = 32
_OPTIONAL_INTS = {"write_latency_bound": ("unbounded", 0, 16), "waiting_timeout": ("none", 1, 16)}
_INTS = {"timeout": (1, 16), "heartbeat_timeout": (1, 16)}


def parse_config(data: dict[str, Any], fail: Callable[..., Exception]) -> Config:
    """The configuration the ``[sizes]``, ``[[requests]]`` and ``[engine]`` tables describe."""
    sizes = data.get("sizes")
    if not isinstance(sizes, dict):
        raise fail("[sizes]", "a table with " + ", ".join(_SIZES))
    for key in sizes:
        if key not in _SIZES and key not in _OPTIONAL_SIZES:
            allowed = [*_SIZES, *_OPTIONAL_SIZES]
            raise fail(f"[sizes].{key}", "one of " + ", ".join(allowed) + did_you_mean(key, allowed))
    size_values = {}
    for key, (lo, hi) in _SIZES.items():
        v = sizes.get(key)
        if not _is_int(v) or not lo <= v <= hi:
            raise fail(f"[sizes].{key}", f"a whole number in {lo}..{hi}", v)
        size_values[key] = v
    for key, (lo, hi, default) in _OPTIONAL_SIZES.items():
        v = sizes.get(key, default)
        if not _is_int(v) or not lo <= v <= hi:
            raise fail(f"[sizes].{key}", f"a whole number in {lo}..{hi}", v)
        size_values[key] = v

    reqs = data.get("requests")
    if not isinstance(reqs, list) or not 1 <= len(reqs) <= _MAX_REQUESTS:
        raise fail("[[requests]]", f"1..{_MAX_REQUESTS} request tables")
    requests = []
    allowed_keys = ("tenant", "pages", "room", "prefill_instance")
    for i, r in enumerate(reqs):
        if isinstance(r, dict) and set(r) - set(allowed_keys):
            key = sorted(set(r) - set(allowed_keys))[0]
            raise fail(f"requests[{i}].{key}", "only tenant, pages, room and prefill_instance in a request"
                       + did_you_mean(key, allowed_keys))
        if not isinstance(r, dict) or not {"tenant", "pages"} <= set(r):
            raise fail(f"requests[{i}]", "a table with tenant and pages (and optionally room, prefill_instance)", r)
        for key in ("room", "prefill_instance"):
            if key in r and (not _is_int(r[key]) or not 0 <= r[key] < _MAX_REQUESTS):
                raise fail(f"requests[{i}].{key}", f"a whole number in 0..{_MAX_REQUESTS - 1}", r[key])
        if not isinstance(r["tenant"], str) or not r["tenant"]:
            raise fail(f"requests[{i}].tenant", "a non-empty string", r["tenant"])
        if not _is_int(r["pages"]) or not 1 <= r["pages"] <= size_values["context_limit"]:
            raise fail(f"requests[{i}].pages", f"a whole number in 1..{size_values['context_limit']} (context_limit)",
                       r["pages"])
        requests.append(Request(r["tenant"], r["pages"], r.get("room"), r.get("prefill_instance", 0)))

    engine = _engine(data.get("engine", {}), fail)
    config = Config(tuple(requests), engine=engine, **size_values)
    problems = config.problems()
    if problems:
        key, _, what = problems[0].partition(": ")
        raise fail.problem(key, what)
    return config


def config_data(cfg: Config) -> dict[str, Any]:
    """``cfg`` as the ``sizes``, ``requests`` and ``engine`` tables (every size, set flags)."""
    return {
        "sizes": {
            "decode_pages": cfg.decode_pages,
            "prefill_pages": cfg.prefill_pages,
            "context_limit": cfg.context_limit,
            "prefill_ranks": cfg.prefill_ranks,
            "decode_ranks": cfg.decode_ranks,
            "aux_slots": cfg.aux_slots,
            "layers": cfg.layers,
        },
        "requests": [_request_data(r) for r in cfg.requests],
        # the room flags appear only when a scenario sets them, so the data (and every stored
        # trace and certificate that embeds it) of the scenarios before them is unchanged
        "engine": {k: v for k, v in asdict(cfg.engine).items()
                   if v is not None and not (k in _ROOM_FLAGS and v == _ROOM_FLAGS[k])},
    }


_ROOM_FLAGS = {"room_policy": "reused_after_end", "decode_allocation_policy": "early"}


def _request_data(r: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"tenant": r.tenant, "pages": r.pages}
    if r.room is not None:
        out["room"] = r.room
    if r.prefill_instance:
        out["prefill_instance"] = r.prefill_instance
    return out


def _engine(table: Any, fail) -> Engine:
    if not isinstance(table, dict):
        raise fail("[engine]", "a table of engine flags")
    known = {f.name: f for f in fields(Engine)}
    values = {}
    for key, v in table.items():
        if key not in known:
            raise fail(f"[engine].{key}", "one of " + ", ".join(known) + did_you_mean(key, known))
        default = known[key].default
        if key in CHOICES:
            if v not in CHOICES[key]:
                raise fail(f"[engine].{key}", "one of " + ", ".join(CHOICES[key]), v)
        elif key in _OPTIONAL_INTS:
            word, lo, hi = _OPTIONAL_INTS[key]
            if v != word and (not _is_int(v) or not lo <= v <= hi):
                raise fail(f"[engine].{key}", f'a whole number in {lo}..{hi} or "{word}"', v)
            v = None if v == word else v
        elif key in _INTS:
            lo, hi = _INTS[key]
            if not _is_int(v) or not lo <= v <= hi:
                raise fail(f"[engine].{key}", f"a whole number in {lo}..{hi}", v)
        elif isinstance(default, bool) and not isinstance(v, bool):
            raise fail(f"[engine].{key}", "true or false", v)
        values[key] = v
    return Engine(**values)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
