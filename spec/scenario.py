"""Scenarios: named configurations of the protocol with the verdict each claim should get.

A scenario is a TOML file::

    name = "incident"
    title = "One line"
    description = "What it models"
    protocol = "my_engine.py:MyEngine"   # optional: a built-in protocol ("kvproof.spec.sglang_0523:Sglang0523")
                                         # or a PdProtocol subclass in a variant file (path relative to
                                         # this file), used only when that file is passed as --variant

    [sizes]
    decode_pages = 3
    prefill_pages = 2
    context_limit = 3

    [[requests]]
    tenant = "A"
    pages = 2

    [engine]              # flags of kvproof.spec.config.Engine; unset ones keep their defaults
    release_policy = "immediate"

    [expect]              # claim = "verified" | "violated"; unlisted invariants default to "verified"
    no_cross_tenant_read = "violated"
    sometimes_request_succeeds = "reached"   # a witness: "reached" | "unreachable"

A witness's verdict is ``reached`` or ``unreachable``; the older words ``verified`` and
``violated`` are accepted for a witness as synonyms and read as ``reached`` and ``unreachable``
(:data:`WITNESS_SYNONYMS`).

Every problem with a file is raised as one :class:`ScenarioError` line that names the file,
the key and what was expected.  A scenario file is data: its ``protocol`` is looked up in
:mod:`.protocols` (built-in protocols, and variant files the user trusted), never imported.
"""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from kvproof.spec.config import CHOICES, Config, Engine, Request
from kvproof.spec.pd import PdProtocol
from kvproof.spec.protocols import ProtocolError, check_reference, protocol_class, trust_variant

__all__ = ["Scenario", "ScenarioError", "load_scenario", "load_variant", "parse_scenario", "builtins",
           "builtin_names", "builtin", "VERDICTS", "WITNESS_VERDICTS", "WITNESS_SYNONYMS", "expected_verdict"]

VERDICTS = ("verified", "violated", "reached", "unreachable")
WITNESS_VERDICTS = ("reached", "unreachable")
WITNESS_SYNONYMS = {"verified": "reached", "violated": "unreachable"}
"""The older words for a witness's verdict, accepted in [expect] tables and read as the new ones."""
_TOP = {"name", "title", "description", "protocol", "sizes", "requests", "engine", "expect"}
_SIZES = {"decode_pages": (1, 64), "prefill_pages": (1, 64), "context_limit": (1, 64)}
_OPTIONAL_SIZES = {"prefill_ranks": (1, 4, 1), "decode_ranks": (1, 4, 1), "aux_slots": (0, 8, 0), "layers": (1, 4, 1)}
_MAX_REQUESTS = 32
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")  # it names trace and certificate files


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class Scenario:
    """A named configuration, its expected verdicts, and where it came from."""

    name: str
    title: str
    description: str
    config: Config
    expect: dict[str, str] = field(default_factory=dict)
    protocol: str | None = None
    origin: str = "<memory>"

    def build(self) -> PdProtocol:
        """The spec instance: :class:`PdProtocol` or the scenario's own subclass of it."""
        try:
            cls = protocol_class(self.protocol)
        except ProtocolError as e:
            raise ScenarioError(f"{self.origin}: protocol: {e}") from None
        spec = cls(self.config)
        names = [x.name for x in spec.claims]
        unknown = [c for c in self.expect if c not in names]
        if unknown:
            raise ScenarioError(f"{self.origin}: [expect].{unknown[0]}: no such claim in the protocol; expected "
                                f"one of its claims (kvproof list --claims){_did_you_mean(unknown[0], names)}")
        for c in spec.claims:
            if c.kind != "witness" and self.expect.get(c.name) in WITNESS_VERDICTS:
                raise ScenarioError(f"{self.origin}: [expect].{c.name}: expected \"verified\" or \"violated\" "
                                    f"(it is not a witness), got {self.expect[c.name]!r}")
        return spec

    def expectations(self, spec: PdProtocol) -> dict[str, str]:
        """Expected verdict of every claim checked: every invariant (default ``verified``) and
        the witnesses and liveness claims the scenario lists (a witness's old words normalised
        to ``reached`` / ``unreachable``)."""
        out = {}
        for c in spec.claims:
            if c.kind == "invariant":
                out[c.name] = self.expect.get(c.name, "verified")
            elif c.name in self.expect:
                out[c.name] = expected_verdict(c.kind, self.expect[c.name])
        return out

    def to_data(self) -> dict[str, Any]:
        """The scenario as TOML-shaped data (stored in traces so they replay on their own)."""
        cfg = self.config
        engine = {k: v for k, v in asdict(cfg.engine).items() if v is not None}
        data: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "sizes": {
                "decode_pages": cfg.decode_pages,
                "prefill_pages": cfg.prefill_pages,
                "context_limit": cfg.context_limit,
                "prefill_ranks": cfg.prefill_ranks,
                "decode_ranks": cfg.decode_ranks,
                "aux_slots": cfg.aux_slots,
                "layers": cfg.layers,
            },
            "requests": [{"tenant": r.tenant, "pages": r.pages} for r in cfg.requests],
            "engine": engine,
            "expect": dict(self.expect),
        }
        if self.protocol is not None:
            data["protocol"] = self.protocol
        return data


def parse_scenario(data: dict[str, Any], origin: str) -> Scenario:
    """Validate TOML-shaped ``data`` into a :class:`Scenario` (``origin`` names it in errors)."""

    def fail(key: str, what: str, got: Any = None) -> ScenarioError:
        tail = "" if got is None else f", got {got!r}"
        return ScenarioError(f"{origin}: {key}: expected {what}{tail}")

    if not isinstance(data, dict):
        raise fail("(top level)", "a table")
    extra = sorted(set(data) - _TOP)
    if extra:
        raise fail(extra[0], "one of the keys " + ", ".join(sorted(_TOP)) + _did_you_mean(extra[0], _TOP))
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        got = name if not isinstance(name, str) or len(name) <= 80 else name[:77] + "..."
        raise fail("name", "1..64 letters, digits, '.', '_' or '-', starting with a letter or digit "
                           "(it names the trace files)", got)
    title = _str(data, "title", fail, default=name)
    description = _str(data, "description", fail, default="")
    protocol = data.get("protocol")
    if protocol is not None:
        try:
            protocol_class(check_reference(protocol))  # a built-in or a trusted variant; nothing imported
        except ProtocolError as e:
            raise ScenarioError(f"{origin}: protocol: {e}") from None

    sizes = data.get("sizes")
    if not isinstance(sizes, dict):
        raise fail("[sizes]", "a table with " + ", ".join(_SIZES))
    for key in sizes:
        if key not in _SIZES and key not in _OPTIONAL_SIZES:
            allowed = [*_SIZES, *_OPTIONAL_SIZES]
            raise fail(f"[sizes].{key}", "one of " + ", ".join(allowed) + _did_you_mean(key, allowed))
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
    for i, r in enumerate(reqs):
        if isinstance(r, dict) and set(r) > {"tenant", "pages"}:
            key = sorted(set(r) - {"tenant", "pages"})[0]
            raise fail(f"requests[{i}].{key}", "only tenant and pages in a request" + _did_you_mean(key, ("tenant", "pages")))
        if not isinstance(r, dict) or set(r) != {"tenant", "pages"}:
            raise fail(f"requests[{i}]", "a table with exactly tenant and pages", r)
        if not isinstance(r["tenant"], str) or not r["tenant"]:
            raise fail(f"requests[{i}].tenant", "a non-empty string", r["tenant"])
        if not _is_int(r["pages"]) or not 1 <= r["pages"] <= size_values["context_limit"]:
            raise fail(f"requests[{i}].pages", f"a whole number in 1..{size_values['context_limit']} (context_limit)", r["pages"])
        requests.append(Request(r["tenant"], r["pages"]))

    engine = _engine(data.get("engine", {}), fail)
    config = Config(tuple(requests), engine=engine, **size_values)
    problems = config.problems()
    if problems:
        key, _, what = problems[0].partition(": ")
        raise ScenarioError(f"{origin}: {key}: {what}")

    expect = data.get("expect", {})
    if not isinstance(expect, dict):
        raise fail("[expect]", "a table of claim = \"verified\" | \"violated\" (a witness: \"reached\" | \"unreachable\")")
    for claim, verdict in expect.items():
        if verdict not in VERDICTS:
            raise fail(f"[expect].{claim}", '"verified" or "violated" (a witness: "reached" or "unreachable")', verdict)
    return Scenario(name, title, description, config, dict(expect), protocol, origin)


def expected_verdict(kind: str, verdict: str) -> str:
    """``verdict`` as the verdict word of a claim of ``kind``: a witness's ``verified`` /
    ``violated`` read as ``reached`` / ``unreachable`` (:data:`WITNESS_SYNONYMS`)."""
    return WITNESS_SYNONYMS.get(verdict, verdict) if kind == "witness" else verdict


_OPTIONAL_INTS = {"write_latency_bound": ("unbounded", 0, 16), "waiting_timeout": ("none", 1, 16)}
_INTS = {"timeout": (1, 16), "heartbeat_timeout": (1, 16)}


def _engine(table: Any, fail) -> Engine:
    if not isinstance(table, dict):
        raise fail("[engine]", "a table of engine flags")
    known = {f.name: f for f in fields(Engine)}
    values = {}
    for key, v in table.items():
        if key not in known:
            raise fail(f"[engine].{key}", "one of " + ", ".join(known) + _did_you_mean(key, known))
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


def _did_you_mean(word: str, choices) -> str:
    """``"; did you mean X?"`` for a close misspelling of one of ``choices``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""


def _str(data: dict, key: str, fail, default: str) -> str:
    v = data.get(key, default)
    if not isinstance(v, str):
        raise fail(key, "a string", v)
    return v


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{p}: not UTF-8 text (byte {e.start}): expected a TOML scenario file") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise ScenarioError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: malformed TOML: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{p}: malformed TOML: nested too deeply") from None
    ref = data.get("protocol")
    if isinstance(ref, str) and ref.rpartition(":")[0].endswith(".py"):
        # a variant file is named relative to the scenario file: resolve it to match --variant
        try:
            file, _, cls = check_reference(ref).rpartition(":")  # its shape first, then use it as a path
            data = {**data, "protocol": f"{(p.parent / file).resolve()}:{cls}"}
        except (ProtocolError, OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
            raise ScenarioError(f"{p}: protocol: {e}") from None
    return parse_scenario(data, str(p))


def load_variant(path: str | Path) -> Scenario:
    """A scenario written as Python: the file defines one :class:`PdProtocol` subclass (the
    engine variant) and ``SCENARIO``, a dict shaped like a scenario file; the variant is the
    scenario's protocol (``SCENARIO["protocol"]`` may name the class when there are several).

    This runs the file (:func:`~.protocols.trust_variant`): only for a file the user named."""
    p = Path(path)
    try:
        module = trust_variant(p)
    except ProtocolError as e:
        raise ScenarioError(str(e)) from None
    data = getattr(module, "SCENARIO", None)
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: SCENARIO: expected a dict shaped like a scenario file")
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, PdProtocol) and v is not PdProtocol
               and v.__module__ == module.__name__]
    name = data.get("protocol")
    if name is not None:
        classes = [c for c in classes if c.__name__ == name]
    if len(classes) != 1:
        found = ", ".join(c.__name__ for c in classes) or "none"
        raise ScenarioError(f"{p}: expected exactly one PdProtocol subclass (or SCENARIO['protocol'] naming it), found {found}")
    data = {**data, "protocol": f"{p.resolve()}:{classes[0].__name__}"}
    return parse_scenario(data, str(p))


def _catalogue_dir():
    return resources.files("kvproof.spec").joinpath("scenarios")


def builtins() -> list[Scenario]:
    """Every built-in scenario, in catalogue order (file names sort them)."""
    return list(_catalogue())


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[Scenario, ...]:
    """The catalogue, parsed once per process (``builtin(name)`` is called once per name)."""
    files = sorted((f for f in _catalogue_dir().iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
    return tuple(parse_scenario(tomllib.loads(f.read_text(encoding="utf-8")), f"spec/scenarios/{f.name}")
                 for f in files)


def builtin_names() -> list[str]:
    """Names of the built-in scenarios, in catalogue order."""
    return [sc.name for sc in builtins()]


def builtin(name: str) -> Scenario:
    """A built-in scenario by name; :class:`ScenarioError` if there is none."""
    for sc in builtins():
        if sc.name == name:
            return sc
    raise ScenarioError(f"unknown scenario {name!r} (kvproof list shows the catalogue)")
