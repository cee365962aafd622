"""Scenarios: named configurations of a protocol with the verdict each claim should get.

A scenario is a TOML file.  These keys are every protocol's::

    name = "incident"
    title = "One line"
    description = "What it models"
    protocol = "mypd-1.2"        # optional: a registered protocol's name (none: the default
                                 # protocol's base spec), or "file.py:Class", a subclass in a
                                 # variant file (relative to this file), used only when that file
                                 # is passed as --variant

    [expect]              # claim = "verified" | "violated"
    no_cross_tenant_read = "violated"
    sometimes_request_succeeds = "reached"   # a witness: "reached" | "unreachable"
    default = "verified"  # optional: the verdict of every invariant not listed

and the protocol names the rest (its own tables, such as ``[sizes]``, ``[[requests]]`` and
``[engine]``: :attr:`~.protocol.Protocol.config_keys`), which it parses into its own
configuration (:class:`~.protocol.Protocol`).

Expectations are strict: a scenario file (and a built-in scenario) names the verdict of every
invariant of its protocol, or gives ``default`` (``"verified"`` or ``"violated"``) for the ones it
leaves out; an invariant neither listed nor covered by a default is refused in one line naming
the file and the claim, never silently expected to hold.  Witnesses and liveness claims are
checked when listed, and left out otherwise.  Scenarios made in code, and those stored in
trace files written before the rule, keep the old reading (an unlisted invariant: ``verified``).

A witness's verdict is ``reached`` or ``unreachable``; the older words ``verified`` and
``violated`` are accepted for a witness as synonyms and read as ``reached`` and ``unreachable``
(:data:`WITNESS_SYNONYMS`).

Every problem with a file is raised as one :class:`ScenarioError` line that names the file,
the key and what was expected.  A scenario file is data: its ``protocol`` is looked up in
:mod:`.registry` (registered protocols, and variant files the user trusted), never imported.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvproof.model.files import read_user_text
from kvproof.model.framework import Spec
from kvproof.model.protocol import Protocol
from kvproof.model.registry import (ProtocolError, base_names, check_reference, default_protocol, protocol_named,
                                    protocol_of, protocols, trust_variant, variant_classes)
from kvproof.model.suggest import did_you_mean

__all__ = ["Scenario", "ScenarioError", "load_scenario", "load_variant", "parse_scenario", "builtins",
           "builtin_names", "builtin", "did_you_mean", "VERDICTS", "WITNESS_VERDICTS", "WITNESS_SYNONYMS", "expected_verdict"]

VERDICTS = ("verified", "violated", "reached", "unreachable")
WITNESS_VERDICTS = ("reached", "unreachable")
WITNESS_SYNONYMS = {"verified": "reached", "violated": "unreachable"}
"""The older words for a witness's verdict, accepted in [expect] tables and read as the new ones."""
_TOP = {"name", "title", "description", "protocol", "expect"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")  # it names trace and certificate files


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class Scenario:
    """A named configuration, its expected verdicts, and where it came from.

    ``family`` is the name of the protocol the scenario belongs to; ``protocol`` the spec
    class it names (``None``: that protocol's base spec); ``config`` is the protocol's own
    configuration, opaque here."""

    name: str
    title: str
    description: str
    config: Any
    expect: dict[str, str] = field(default_factory=dict)
    protocol: str | None = None
    origin: str = "<memory>"
    family: str = ""
    default: str | None = None
    """The ``[expect]`` table's ``default``: the verdict of the invariants it does not list."""
    strict: bool = field(default=False, compare=False)
    """Read from a scenario file or the catalogue: :meth:`build` refuses an invariant that
    neither ``expect`` nor ``default`` gives a verdict."""

    def family_protocol(self) -> Protocol:
        """The protocol the scenario belongs to (for a scenario made in code without a
        ``family``: the one its ``protocol`` names, else the default protocol)."""
        try:
            if self.family:
                return protocol_named(self.family)
            return protocol_of(self.protocol)[0] if self.protocol is not None else default_protocol()
        except ProtocolError as e:
            raise ScenarioError(f"{self.origin}: protocol: {e}") from None

    def build(self) -> Spec:
        """The spec instance: the protocol's base spec, or the class the scenario names."""
        try:
            cls = protocol_of(self.protocol)[1] if self.protocol is not None else self.family_protocol().base()
        except ProtocolError as e:
            raise ScenarioError(f"{self.origin}: protocol: {e}") from None
        spec = cls(self.config)
        names = [x.name for x in spec.claims]
        unknown = [c for c in self.expect if c not in names]
        if unknown:
            raise ScenarioError(f"{self.origin}: [expect].{unknown[0]}: no such claim in the protocol; expected "
                                f"one of its claims (kvproof list --claims){did_you_mean(unknown[0], names)}")
        for c in spec.claims:
            if c.kind != "witness" and self.expect.get(c.name) in WITNESS_VERDICTS:
                raise ScenarioError(f"{self.origin}: [expect].{c.name}: expected \"verified\" or \"violated\" "
                                    f"(it is not a witness), got {self.expect[c.name]!r}")
        if "default" in names:
            raise ScenarioError(f"{self.origin}: the protocol has a claim called 'default', which [expect] "
                                "reserves for the verdict of unlisted invariants")
        missing = [c.name for c in spec.claims if c.kind == "invariant" and c.name not in self.expect]
        if self.strict and self.default is None and missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ScenarioError(f"{self.origin}: [expect].{missing[0]}: missing{more}; give every invariant an "
                                "expected verdict (\"verified\" or \"violated\"), or the verdict of those left "
                                "out: default = \"verified\"")
        return spec

    def expectations(self, spec: Spec) -> dict[str, str]:
        """Expected verdict of every claim checked: every invariant (unlisted: the file's
        ``default``, else ``verified``, which :meth:`build` allows only off a strict file) and
        the witnesses and liveness claims the scenario lists (a witness's old words normalised
        to ``reached`` / ``unreachable``)."""
        out = {}
        for c in spec.claims:
            if c.kind == "invariant":
                out[c.name] = self.expect.get(c.name, self.default or "verified")
            elif c.name in self.expect:
                out[c.name] = expected_verdict(c.kind, self.expect[c.name])
        return out

    def to_data(self) -> dict[str, Any]:
        """The scenario as TOML-shaped data (stored in traces so they replay on their own)."""
        data: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description}
        data.update(self.family_protocol().config_data(self.config))
        data["expect"] = dict(self.expect) | ({"default": self.default} if self.default is not None else {})
        if self.protocol is not None:
            data["protocol"] = self.protocol
        return data


class _Fail:
    """How a parser reports the first problem of ``origin``: ``fail(key, what, got)`` is
    ``ORIGIN: KEY: expected WHAT, got GOT``; ``fail.problem(key, text)`` is ``ORIGIN: KEY: TEXT``."""

    def __init__(self, origin: str):
        self.origin = origin

    def __call__(self, key: str, what: str, got: Any = None) -> ScenarioError:
        tail = "" if got is None else f", got {got!r}"
        return ScenarioError(f"{self.origin}: {key}: expected {what}{tail}")

    def problem(self, key: str, text: str) -> ScenarioError:
        return ScenarioError(f"{self.origin}: {key}: {text}")


def parse_scenario(data: dict[str, Any], origin: str, family: Protocol | None = None,
                   strict: bool = False) -> Scenario:
    """Validate TOML-shaped ``data`` into a :class:`Scenario` (``origin`` names it in errors).
    A scenario without a ``protocol`` key belongs to ``family`` (a catalogue's own protocol),
    else to the default protocol.  ``strict`` (a scenario file or the catalogue; not a trace's
    stored scenario) makes :meth:`Scenario.build` refuse an invariant without an expected verdict."""
    fail = _Fail(origin)
    if not isinstance(data, dict):
        raise fail("(top level)", "a table")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        got = name if not isinstance(name, str) or len(name) <= 80 else name[:77] + "..."
        raise fail("name", "1..64 letters, digits, '.', '_' or '-', starting with a letter or digit "
                           "(it names the trace files)", got)
    title = _str(data, "title", fail, default=name)
    description = _str(data, "description", fail, default="")
    protocol = data.get("protocol")
    try:
        if protocol is not None:
            family = protocol_of(check_reference(protocol))[0]  # a registered one or a trusted variant
        elif family is None:
            family = default_protocol()
    except ProtocolError as e:
        raise ScenarioError(f"{origin}: protocol: {e}") from None
    allowed = _TOP | set(family.config_keys)
    extra = sorted(set(data) - allowed)
    if extra:
        raise fail(extra[0], "one of the keys " + ", ".join(sorted(allowed)) + did_you_mean(extra[0], allowed))
    config = family.parse_config({k: data[k] for k in family.config_keys if k in data}, fail)

    expect = data.get("expect", {})
    if not isinstance(expect, dict):
        raise fail("[expect]", "a table of claim = \"verified\" | \"violated\" (a witness: \"reached\" | \"unreachable\")")
    expect = dict(expect)
    default = expect.pop("default", None)
    if default is not None and default not in ("verified", "violated"):
        raise fail("[expect].default", '"verified" or "violated" (the verdict of every invariant not listed)', default)
    for claim, verdict in expect.items():
        if verdict not in VERDICTS:
            raise fail(f"[expect].{claim}", '"verified" or "violated" (a witness: "reached" or "unreachable")', verdict)
    return Scenario(name, title, description, config, expect, protocol, origin, family.name, default, strict)


def expected_verdict(kind: str, verdict: str) -> str:
    """``verdict`` as the verdict word of a claim of ``kind``: a witness's ``verified`` /
    ``violated`` read as ``reached`` / ``unreachable`` (:data:`WITNESS_SYNONYMS`)."""
    return WITNESS_SYNONYMS.get(verdict, verdict) if kind == "witness" else verdict


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
    text = read_user_text(p, ScenarioError, "a TOML scenario file")
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
    return parse_scenario(data, str(p), strict=True)


def load_variant(path: str | Path) -> Scenario:
    """A scenario written as Python: the file defines one subclass of a protocol's base spec
    (the engine variant) and ``SCENARIO``, a dict shaped like a scenario file; the variant is the
    scenario's protocol (``SCENARIO["protocol"]`` may name the class when there are several).

    This runs the file (:func:`~.registry.trust_variant`): only for a file the user named."""
    p = Path(path)
    try:
        module = trust_variant(p)
    except ProtocolError as e:
        raise ScenarioError(str(e)) from None
    data = getattr(module, "SCENARIO", None)
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: SCENARIO: expected a dict shaped like a scenario file")
    classes = variant_classes(module)
    name = data.get("protocol")
    if name is not None:
        classes = [c for c in classes if c.__name__ == name]
    if len(classes) != 1:
        found = ", ".join(c.__name__ for c in classes) or "none"
        raise ScenarioError(f"{p}: expected exactly one {base_names()} subclass (or SCENARIO['protocol'] naming it), "
                            f"found {found}")
    data = {**data, "protocol": f"{p.resolve()}:{classes[0].__name__}"}
    return parse_scenario(data, str(p), strict=True)


def builtins() -> list[Scenario]:
    """Every built-in scenario of every registered protocol, in catalogue order (file names
    sort them within a protocol).  :class:`ScenarioError` if there is none: an installation
    without the ``kvproof.protocols`` entry points would otherwise check nothing and pass."""
    found = list(_catalogue(tuple(p.name for p in protocols())))
    if not found:
        raise ScenarioError("the catalogue is empty: no protocol is registered under the kvproof.protocols "
                            "entry point (is kvproof installed in this environment? pip install -e . in a checkout)")
    return found


@functools.lru_cache(maxsize=4)
def _catalogue(names: tuple[str, ...]) -> tuple[Scenario, ...]:
    """The catalogues of the protocols ``names``, parsed once per process."""
    out = []
    for p in map(protocol_named, names):
        if p.catalogue is None:
            continue
        folder = p.catalogue()
        files = sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
        out += [parse_scenario(tomllib.loads(f.read_text(encoding="utf-8")), f"spec/{p.name}/scenarios/{f.name}", p,
                               strict=True)
                for f in files]
    return tuple(out)


def builtin_names() -> list[str]:
    """Names of the built-in scenarios, in catalogue order."""
    return [sc.name for sc in builtins()]


def _builtin_file(name: str) -> Scenario | None:
    """The built-in scenario ``name`` read from its own file (``NN-name.toml`` in its protocol's
    catalogue) without parsing the whole catalogue, or ``None`` when no file is named so."""
    for p in protocols():
        if p.catalogue is None:
            continue
        folder = p.catalogue()
        for f in sorted(folder.iterdir(), key=lambda f: f.name):
            stem = f.name[:-5] if f.name.endswith(".toml") else ""
            if stem == name or (stem.endswith("-" + name) and stem[: -len(name) - 1].isdigit()):
                sc = parse_scenario(tomllib.loads(f.read_text(encoding="utf-8")), f"spec/{p.name}/scenarios/{f.name}", p,
                                    strict=True)
                if sc.name == name:
                    return sc
    return None


def builtin(name: str) -> Scenario:
    """A built-in scenario by name (read from its own file when the file is named after it:
    names are unique across the catalogue); :class:`ScenarioError` if there is none."""
    found = _builtin_file(name)
    if found is not None:
        return found
    for sc in builtins():
        if sc.name == name:
            return sc
    raise ScenarioError(f"unknown scenario {name!r}{did_you_mean(name, builtin_names())} (kvproof list shows the catalogue)")
