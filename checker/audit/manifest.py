"""Kubernetes manifests as data: the containers of a deployment's workloads, each with its
command line, its environment and its role, for ``kvproof audit --manifest``.

A manifest (one file or several, multi-document YAML as ``helm template`` and ``kustomize
build`` write it) is read with ``yaml.safe_load_all``: nothing in it is imported or run.  The
workload kinds read (:data:`WORKLOAD_KINDS`) are Kubernetes' own (``Pod``, ``Deployment``,
``StatefulSet``, ``ReplicaSet``, ``DaemonSet``, ``Job``, ``CronJob``), LeaderWorkerSet's
(``LeaderWorkerSet``: its leader and worker templates), kthena's ``ModelServing`` (its
``template.roles``, each with an entry and a worker template) and llm-d's ``DisaggregatedSet``
(its ``roles``, each a LeaderWorkerSet spec), and the kinds a registered protocol declares in
its ``workloads`` (its own custom resources, read by the protocol's function: see
:func:`workload_kinds`); ``List`` objects are opened.  An object of another
kind that holds containers (``containers`` or ``mainContainer`` anywhere in it) cannot be read:
it is listed in :attr:`Manifest.unreadable`, and the audit cannot decide while there is one.

For each container (init containers that run beside the others, ``restartPolicy: Always``,
included) :func:`read_manifests` gives:

* its role, ``prefill`` or ``decode``, when the manifest states one: the name of a kthena or
  llm-d role, or a label whose key ends in ``role`` or ``component`` (``llm-d.ai/role:
  prefill``) on the pod template or the object;
* its command lines: ``command`` + ``args`` with Kubernetes' ``$(VAR)`` references expanded
  from the container's environment, or, for ``sh -c SCRIPT`` (``bash``, ``-lc``, ...), each
  simple command of the script (split at ``;``, ``&&``, ``||``, ``|``, ``&`` and line ends;
  ``exec`` dropped; ``export NAME=VALUE`` added to the environment; ``$VAR`` and ``${VAR}``
  expanded from it);
* its environment: literal ``env`` values, and ``envFrom`` / ``configMapKeyRef`` values from a
  ``ConfigMap`` given in the manifests;
* what could not be read: a variable from a Secret, a field or a resource (its name, in
  :attr:`Container.unread_env`: whether it matters is the protocol's call), a ``ConfigMap`` not
  given, a reference to a variable whose value is not known, a container with no ``command``
  (the image's entrypoint is not in the manifest), a script the split cannot follow.

Which containers run an engine, which side each is, and what the pair means is each
protocol's (its audit reads each command line with the engine's own parser, as a launch line).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

__all__ = ["WORKLOAD_KINDS", "workload_kinds", "role_name", "get_path", "ROLES", "Container", "Manifest", "read_manifests", "parse_manifests", "Side", "pair",
           "unread_names", "take_option", "environment_of", "pair_lines", "sided", "audit_manifest", "side_reader", "Unreadable"]

ROLES = ("prefill", "decode")
"""The two roles of a prefill/decode pair."""

_APPS = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job")
WORKLOAD_KINDS = ("Pod", *_APPS, "CronJob", "LeaderWorkerSet", "ModelServing", "DisaggregatedSet")
"""The kinds whose pod templates are read here (``List`` objects are opened); the registered
protocols add their own (:func:`workload_kinds`)."""


def workload_kinds() -> dict[str, Callable[[dict], Any]]:
    """The kinds the registered protocols declare in their ``workloads``, each with its reader of
    an object's pod templates (the first protocol to declare a kind reads it)."""
    from kvproof.model.registry import protocols

    found: dict[str, Callable[[dict], Any]] = {}
    for p in protocols():
        for kind, read in p.workloads.items():
            if kind not in WORKLOAD_KINDS:
                found.setdefault(kind, read)
    return found

_SHELLS = ("sh", "bash", "dash", "zsh", "ash")
_OPERATORS = {";", "&&", "||", "|", "&", ";;", "|&"}


@dataclass
class Container:
    """One container of a workload, as the manifest states it."""

    workload: str
    """``Kind/name`` of the object, with the template's part (``LeaderWorkerSet/x leader``)."""
    name: str
    role: str | None
    """``prefill``, ``decode`` or ``None`` (the manifest states none)."""
    role_from: str
    """Where the role was read (``label llm-d.ai/role``, ``ModelServing role``), or ``""``."""
    commands: list[list[str]]
    """The command lines it runs (one for ``command`` + ``args``; one per simple command of a
    shell script)."""
    env: dict[str, str] = field(default_factory=dict)
    """The variables whose values the manifests give."""
    env_from: dict[str, str] = field(default_factory=dict)
    """Variable -> where its value came from (``env``, ``ConfigMap NAME``, ``script export``)."""
    unread_env: dict[str, str] = field(default_factory=dict)
    """Variables set from what the manifests do not hold -> from what (``Secret NAME``)."""
    unread: list[str] = field(default_factory=list)
    """What was given and could not be read (kvproof cannot tell what it sets)."""
    unread_refs: list[str] = field(default_factory=list)
    """References in its command lines to variables whose values are not known (a line holding
    one cannot be read as the engine would read it)."""

    @property
    def where(self) -> str:
        """The container as a reader finds it (``Deployment/x container engine``)."""
        return f"{self.workload} container {self.name}"


@dataclass
class Manifest:
    """What the manifests hold: the containers of the workloads read, the objects that are no
    workloads, and the objects holding containers that kvproof cannot read."""

    files: list[str]
    containers: list[Container]
    other: list[str]
    """``Kind/name`` of objects with no containers (Services, routes, ConfigMaps): not audited."""
    unreadable: list[str]
    """Objects of a kind not read (neither in :data:`WORKLOAD_KINDS` nor declared by a protocol) that hold containers."""


def read_manifests(paths: Sequence[str], bad) -> Manifest:
    """Read the manifest files ``paths`` (YAML, several documents each); bad YAML, a document
    that is not a mapping, or files with no object at all are one line of bad input."""
    import yaml

    from kvproof.checker.audit.common import read_option_file

    docs: list[Any] = []
    for path in paths:
        text = read_option_file(path, "--manifest", "a Kubernetes manifest (YAML)", bad)
        try:
            found = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f":{mark.line + 1}" if mark is not None else ""
            what = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise bad(f"{path}{where}: not YAML: {what}") from None
        for i, d in enumerate(found, 1):
            if not isinstance(d, dict):
                raise bad(f"{path}: document {i}: expected a Kubernetes object (a mapping), got {type(d).__name__}")
        docs += found
    if not docs:
        raise bad(f"{', '.join(paths)}: no Kubernetes object in the manifest")
    return parse_manifests(docs, list(paths))


def parse_manifests(docs: Sequence[dict], files: Sequence[str] = ()) -> Manifest:
    """The :class:`Manifest` of objects already loaded (``List`` objects opened)."""
    objects = list(_objects(docs))
    config_maps = {(_meta(o).get("name") or ""): _config_map_data(o) for o in objects if o.get("kind") == "ConfigMap"}
    containers: list[Container] = []
    other: list[str] = []
    unreadable: list[str] = []
    declared = workload_kinds()
    for o in objects:
        kind, name = str(o.get("kind") or "?"), str(_meta(o).get("name") or "?")
        if kind in WORKLOAD_KINDS or kind in declared:
            templates = _templates(o) if kind in WORKLOAD_KINDS else declared[kind](o)
            for part, role, role_from, template in templates:
                containers += _containers(f"{kind}/{name}" + (f" {part}" if part else ""), o, template, role, role_from,
                                          config_maps)
        elif _holds_containers(o):
            unreadable.append(f"{kind}/{name} (a kind kvproof does not read: {o.get('apiVersion', '?')})")
        else:
            other.append(f"{kind}/{name}")
    return Manifest(list(files), containers, other, unreadable)


def _objects(docs: Sequence[Any]) -> Iterator[dict]:
    for d in docs:
        if not isinstance(d, dict):
            continue
        if d.get("kind") == "List" or (str(d.get("kind", "")).endswith("List") and isinstance(d.get("items"), list)):
            yield from _objects(d.get("items") or [])
        else:
            yield d


def _meta(o: Any) -> dict:
    m = o.get("metadata") if isinstance(o, dict) else None
    return m if isinstance(m, dict) else {}


def get_path(o: Any, *keys: str) -> Any:
    """``o[k1][k2]...``, or ``None`` where a step is missing or not a mapping."""
    for k in keys:
        if not isinstance(o, dict):
            return None
        o = o.get(k)
    return o


def _config_map_data(o: dict) -> dict[str, str]:
    data = o.get("data") if isinstance(o.get("data"), dict) else {}
    return {str(k): str(v) for k, v in data.items()}


def _holds_containers(o: Any) -> bool:
    if isinstance(o, dict):
        return any(k in ("containers", "mainContainer") or _holds_containers(v) for k, v in o.items())
    if isinstance(o, list):
        return any(_holds_containers(v) for v in o)
    return False


def role_name(name: Any) -> str | None:
    """``prefill`` or ``decode`` when exactly one of them is a word of ``name`` (``DecodeWorker``
    is one word; ``worker-decode`` is two), else ``None``."""
    words = re.split(r"[-_./ ]+", str(name or "").lower())
    found = [r for r in ROLES if r in words]
    return found[0] if len(found) == 1 else None


def _templates(o: dict) -> Iterator[tuple[str, str | None, str, Any]]:
    """(part, role, where the role came from, pod template) of a workload object."""
    kind, spec = o["kind"], o.get("spec") if isinstance(o.get("spec"), dict) else {}
    if kind == "Pod":
        yield "", None, "", o
    elif kind in _APPS:
        yield "", None, "", spec.get("template")
    elif kind == "CronJob":
        yield "", None, "", get_path(spec, "jobTemplate", "spec", "template")
    elif kind == "LeaderWorkerSet":
        yield from _lws(spec.get("leaderWorkerTemplate"), None, "")
    elif kind in ("ModelServing", "DisaggregatedSet"):
        roles = get_path(spec, "template", "roles") if kind == "ModelServing" else spec.get("roles")
        for r in roles if isinstance(roles, list) else []:
            if not isinstance(r, dict):
                continue
            role = role_name(r.get("name"))
            src = f"{kind} role {r.get('name')}" if role else ""
            if kind == "ModelServing":
                yield f"role {r.get('name')} entry", role, src, r.get("entryTemplate")
                if r.get("workerTemplate") is not None:
                    yield f"role {r.get('name')} worker", role, src, r.get("workerTemplate")
            else:
                yield from _lws(get_path(r, "spec", "leaderWorkerTemplate"), role, src, f"role {r.get('name')} ")


def _lws(lwt: Any, role: str | None, src: str, prefix: str = "") -> Iterator[tuple[str, str | None, str, Any]]:
    if not isinstance(lwt, dict):
        return
    if lwt.get("leaderTemplate") is not None:
        yield f"{prefix}leader", role, src, lwt.get("leaderTemplate")
    yield f"{prefix}worker" if lwt.get("leaderTemplate") is not None else prefix.strip(), role, src, \
        lwt.get("workerTemplate")


def _label_role(*metas: dict) -> tuple[str | None, str]:
    for m in metas:
        labels = m.get("labels") if isinstance(m.get("labels"), dict) else {}
        for k, v in labels.items():
            last = str(k).rsplit("/", 1)[-1].lower()
            if ("role" in last or "component" in last) and role_name(v):
                return role_name(v), f"label {k}={v}"
    return None, ""


def _containers(workload: str, obj: dict, template: Any, role: str | None, role_from: str,
                config_maps: dict[str, dict[str, str]]) -> list[Container]:
    if not isinstance(template, dict):
        return []
    if role is None:
        role, role_from = _label_role(_meta(template), _meta(obj))
    pod = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    listed = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    listed += [c for c in pod.get("initContainers") or [] if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    return [_container(workload, c, role, role_from, config_maps) for c in listed]


def _container(workload: str, c: dict, role: str | None, role_from: str,
               config_maps: dict[str, dict[str, str]]) -> Container:
    out = Container(workload, str(c.get("name") or "?"), role, role_from, [])
    for src in c.get("envFrom") or []:
        ref = get_path(src, "configMapRef", "name")
        prefix = str(src.get("prefix") or "") if isinstance(src, dict) else ""
        if ref is not None and ref in config_maps:
            for k, v in config_maps[ref].items():
                out.env[prefix + k], out.env_from[prefix + k] = v, f"ConfigMap {ref}"
        elif ref is not None:
            out.unread.append(f"envFrom ConfigMap {ref}: not in the manifests given (its variables are unknown)")
        else:
            secret = get_path(src, "secretRef", "name")
            out.unread.append(f"envFrom Secret {secret}: its variables are not in the manifests"
                              if secret is not None else f"envFrom {src!r}: not read")
    for e in c.get("env") or []:
        if not isinstance(e, dict) or not e.get("name"):
            continue
        name = str(e["name"])
        if "value" in e:
            out.env[name], out.env_from[name] = _expand(str(e["value"] if e["value"] is not None else ""), out), "env"
        elif get_path(e, "valueFrom", "configMapKeyRef") is not None:
            ref, key = get_path(e, "valueFrom", "configMapKeyRef", "name"), get_path(e, "valueFrom", "configMapKeyRef", "key")
            if ref in config_maps and key in config_maps[ref]:
                out.env[name], out.env_from[name] = config_maps[ref][key], f"ConfigMap {ref}"
            else:
                out.unread_env[name] = f"ConfigMap {ref} key {key}, not in the manifests given"
        elif isinstance(e.get("valueFrom"), dict) and e["valueFrom"]:
            what = next(iter(e["valueFrom"]))
            ref = get_path(e, "valueFrom", what, "name")
            out.unread_env[name] = {"secretKeyRef": f"Secret {ref}", "fieldRef": "a field of the pod",
                                    "resourceFieldRef": "a resource of the container"}.get(what, what)
        else:
            out.env[name], out.env_from[name] = "", "env"
    command = [str(w) for w in c.get("command") or []]
    args = [str(w) for w in c.get("args") or []]
    if not command:
        if args:
            out.unread.append(f"{out.where}: no command (the image's entrypoint, which the manifest does not state, "
                              f"runs the args {' '.join(args)[:60]!r})")
        return out
    words = [_expand(w, out) for w in command + args]
    script = _script(words)
    if script is None:
        out.commands.append(words)
    else:
        _read_script(script, out)
    return out


def _expand(text: str, c: Container) -> str:
    """Kubernetes' ``$(VAR)`` references (``$$`` escapes ``$``): a variable given is replaced, one
    whose value the manifests do not hold is noted as unread, an undefined one stays as written."""

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name in c.env:
            return c.env[name]
        if name in c.unread_env:
            c.unread.append(f"{c.where}: $({name}) is set from {c.unread_env[name]}")
            c.unread_refs.append(f"$({name})")
        return m.group(0)

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, text)


def _script(words: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (any shell of :data:`_SHELLS`, by path; ``-c`` alone or in
    a group such as ``-lc``), else ``None``."""
    if not words or words[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for i, w in enumerate(words[1:], 1):
        if w.startswith("-") and not w.startswith("--") and "c" in w[1:]:
            return " ".join(words[i + 1:i + 2])
        if not w.startswith("-"):
            return None
    return None


def _read_script(script: str, c: Container) -> None:
    """Each simple command of ``script``, with ``$VAR`` / ``${VAR}`` expanded from the
    environment (``export`` adds to it); a script shlex cannot split is unread."""
    text = script.replace("\\\r\n", " ").replace("\\\n", " ")
    for line in text.splitlines():
        try:
            lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lex.whitespace_split = True
            lex.commenters = "#"
            tokens = list(lex)
        except ValueError as e:
            c.unread.append(f"{c.where}: its script cannot be split ({e}): {line.strip()[:60]!r}")
            continue
        segment: list[str] = []
        for t in [*tokens, ";"]:
            if t in _OPERATORS:
                if segment:
                    _segment(segment, c)
                segment = []
            else:
                segment.append(t)


def _segment(words: list[str], c: Container) -> None:
    while words and words[0] in ("exec", "time", "nohup"):
        words = words[1:]
    if words and words[0] == "export":
        for w in words[1:]:
            name, sep, value = w.partition("=")
            if sep:
                c.env[name], c.env_from[name] = _shell_expand(value, c), "script export"
        return
    if words:
        c.commands.append([_shell_expand(w, c) for w in words])


def _shell_expand(word: str, c: Container) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name in c.env:
            return c.env[name]
        c.unread.append(f"{c.where}: its script uses ${name}, whose value is not in the manifests"
                        + (f" (set from {c.unread_env[name]})" if name in c.unread_env else ""))
        c.unread_refs.append(f"${name}")
        return m.group(0)

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, word)


class Unreadable(Exception):
    """An engine's launch line that cannot be read as the engine would (a reference to a variable
    whose value is not in the manifests): the verdict cannot be decided."""


@dataclass
class Side:
    """One engine container as a protocol read it: the container, the command line it runs, the
    role the engine's own settings give it (``None``: they do not say), and the protocol's
    settings and reading."""

    container: Container
    command: list[str]
    role: str | None
    settings: Any
    reading: Any

    @property
    def side(self) -> str | None:
        """The role: the engine's own reading first, else the manifest's."""
        return self.role or self.container.role


def pair(manifest: Manifest, read: Callable[[Container, list[str]], Side | None], bad
         ) -> tuple[list[Side], list[Side], list[str], list[str]]:
    """The engine containers of ``manifest`` by role: ``read(container, command)`` is the
    protocol's reading of one command line (``None``: not its engine's launch).  Returns
    (prefill sides, decode sides, notes, what could not be read that could be an engine: in a
    prefill or decode role, a container with no command or an unreadable script, in a workload
    where no engine container was read; beside one, such a container is a sidecar, noted).  An engine
    container with no role, and one whose engine's role contradicts its manifest's, are bad
    input."""
    prefill: list[Side] = []
    decode: list[Side] = []
    notes: list[str] = []
    unread: list[str] = []
    maybe: dict[str, list[str]] = {}  # workload -> what could have been its engine, not read
    engines: set[str] = set()
    for c in manifest.containers:
        try:
            found = [s for s in (read(c, cmd) for cmd in c.commands) if s is not None]
        except Unreadable as e:
            unread.append(str(e))
            continue
        if not found:
            if c.role is not None and (c.unread or not c.commands):
                maybe.setdefault(c.workload, []).extend(c.unread or [f"{c.where}: no command line"])
            elif c.commands:
                notes.append(f"not an engine launch: {c.where} ({' '.join(c.commands[0])[:50]})")
            continue
        if len(found) > 1:
            raise bad(f"{c.where}: runs {len(found)} engine launches; expected one")
        s = found[0]
        if s.role is not None and c.role is not None and s.role != c.role:
            raise bad(f"{c.where}: the manifest says {c.role} ({c.role_from}) but its command line launches "
                      f"{s.role}")
        if s.side is None:
            raise bad(f"{c.where}: neither its command line nor the manifest says prefill or decode")
        (prefill if s.side == "prefill" else decode).append(s)
        engines.add(c.workload)
    for workload, what in maybe.items():
        if workload in engines:  # a sidecar beside the engine's container, listed
            notes += [f"not read, beside the engine's container (a sidecar): {w}" for w in what]
        else:
            unread += what
    return prefill, decode, notes, unread


def unread_names(c: Container, prefixes: Sequence[str]) -> tuple[list[str], list[str]]:
    """The variables of ``c`` whose values the manifests do not hold, as (those whose names start
    with one of ``prefixes``, which could change the verdict; the others), each with its source."""
    hit = [f"{n} (from {w})" for n, w in c.unread_env.items() if n.startswith(tuple(prefixes))]
    rest = [f"{n} (from {w})" for n, w in c.unread_env.items() if not n.startswith(tuple(prefixes))]
    return hit, rest


def take_option(words: list[str], flag: str) -> tuple[list[str], list[str]]:
    """``words`` without ``flag VALUE`` / ``flag=VALUE``, and the values removed (a file named on
    a container's command line is in the container's filesystem, not the auditor's)."""
    rest: list[str] = []
    taken: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == flag and i + 1 < len(words):
            taken.append(words[i + 1])
            i += 2
            continue
        if w.startswith(flag + "="):
            taken.append(w[len(flag) + 1:])
        else:
            rest.append(w)
        i += 1
    return rest, taken


def environment_of(c: Container, prefix: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The environment a command of ``c`` runs with, name -> (value, where it came from): the
    container's variables, then the command's own ``NAME=VALUE`` prefix."""
    env = {k: (v, f"manifest {c.env_from.get(k, 'env')}") for k, v in c.env.items()}
    env.update({k: (v, "manifest command") for k, v in prefix.items()})
    return env


def pair_lines(sides: Sequence[Side], notes: Sequence[str], other: Sequence[str]) -> list[str]:
    """How the pair was found: each engine container with its role (and where the role was
    read), how its line was read, and what the manifests hold besides."""
    lines = []
    for s in sides:
        how = "its command line" if s.role is not None else s.container.role_from
        if s.role is not None and s.container.role is not None:
            how += f" and {s.container.role_from}"
        lines.append(f"{s.side}: {s.container.where} ({how}), read: {s.reading.launcher} by {s.reading.how}")
        lines += [f"  note: {n}" for n in s.reading.notes]
    lines += list(notes)
    if other:
        lines.append("not workloads, not audited: " + ", ".join(other))
    return lines


def sided(side: str, items: Sequence[str]) -> list[str]:
    """``items`` of one side, each marked with it (``--enable-metrics (prefill)``): the mark goes
    last, so a name still starts as it did."""
    return [f"{x} ({side})" for x in items]


def audit_manifest(args: Any, out: Any, bad, *, engine: str, release: Any, read: Callable[[Container, list[str]], Side | None],
                   merge: Callable[[Side, Side], tuple[Any, list[tuple[str, str, str]], Callable[[str], str]]],
                   key: Callable[[Any], Any], audit: Callable[[Any, Any], Any], hazards: Any, no_fix: str,
                   where_width: int, abstracted_why: str) -> int:
    """``kvproof audit ENGINE==VERSION --manifest FILE...``: read the manifests, find the engine's
    prefill and decode containers (``read``: the protocol's reading of one command line), merge
    the two sides into one deployment (``merge``: the protocol's settings, the settings rows, and
    the side a remedy names), check it (``audit``) and print the report; return the exit code.

    No pair is bad input (3), unless something that could be one was not read (an unknown kind
    holding containers, a role's container with no command line): then "cannot decide" (2).
    Several containers of one role are audited as the first when they read alike (``key``);
    otherwise the verdict cannot be decided."""
    from kvproof.checker.audit import common as core

    m = read_manifests(args.manifest, bad)
    prefill, decode, notes, unread = pair(m, read, bad)
    undecided = [*m.unreadable, *unread]
    files = ", ".join(args.manifest)
    if not prefill or not decode:
        found = ", ".join(f"{s.side} {s.container.where}" for s in prefill + decode) or "no container of it"
        why = f"{files}: no prefill/decode pair of {engine} ({found})"
        if not undecided:
            raise bad(why)
        lines = [f"{engine}=={release.version}: {release.basis}", *pair_lines(prefill + decode, notes, m.other)]
        if core.nothing_to_audit_json(args, engine, release, None, why, undecided):
            return core.EXIT_UNDECIDED
        return core.nothing_to_audit(out, lines, why, engine, release, undecided)
    for group in (prefill, decode):
        differ = [s.container.where for s in group[1:] if key(s.settings) != key(group[0].settings)]
        if differ:
            undecided.append(f"{group[0].side} containers read differently: {group[0].container.where} (audited) and "
                             + ", ".join(differ))
        elif len(group) > 1:
            notes.append(f"{group[0].side}: also {', '.join(s.container.where for s in group[1:])} (read alike)")
    s, rows, side_of = merge(prefill[0], decode[0])
    s.unmodelled += undecided
    lines = [*core.header(engine, s, rows, where_width, abstracted_why), *pair_lines([prefill[0], decode[0]], notes, m.other)]

    def checked(limits):
        report = audit(s, limits)
        for h in report.hazards:
            h.remedies = [x for x in map(side_of, h.remedies) if x]  # None: not a remedy of this pair
        return report

    pair_json = {"manifests": list(args.manifest), "not_workloads": m.other, "notes": notes,
                 "pair": [{"side": x.side, "container": x.container.where, "role_from_manifest": x.container.role_from or None,
                           "command": x.command, "reading": core.reading_json(x.reading)} for x in (prefill[0], decode[0])]}
    return core.conclude(args, out, lines, checked, hazards, no_fix, engine, None, rows, pair_json)


def side_reader(bad, *, is_launch: Callable[[list[str]], bool], parse: Callable[..., Any], read: Callable[..., Any],
                settings: Callable[..., Any], role: Callable[[Any], str | None], prefixes: Sequence[str],
                config_flag: str) -> Callable[[Container, list[str]], Side | None]:
    """A protocol's reading of one container's command line, for :func:`pair`, from its launch
    reader's parts: ``is_launch(words)`` (one of its launchers, after the ``NAME=VALUE`` prefix),
    ``parse(words, bad)`` (a ``Launch``), ``read(launch, bad)`` (the engine parser's ``Reading``),
    ``settings(launch, env, bad, reading)`` (its settings), ``role(settings)`` (the side the engine
    reads, or ``None``), the names that belong to the handoff (``prefixes``) and the engine's
    config-file flag (``config_flag``: a file named on a container's line is in the container, not
    read).  Errors name the container; what the container left unread is not modelled (handoff
    variables) or listed (the others)."""
    from kvproof.checker.audit import common as core

    def reader(c: Container, command: list[str]) -> Side | None:
        words = list(command)
        prefix = core.take_prefix_environment(words)
        if not is_launch(words):
            return None
        refs = [r for r in c.unread_refs if any(r in w for w in command)]
        if refs:
            raise Unreadable(f"{c.where}: its engine's line uses {', '.join(refs)}, whose value is not in the "
                             f"manifests")

        def here(msg: str) -> Exception:
            return bad(f"{c.where}: {msg}")

        words, configs = take_option(words, config_flag)
        launch = parse(words, here)
        reading = read(launch, here)
        s = settings(launch, environment_of(c, prefix), here, reading)
        hit, rest = unread_names(c, prefixes)
        s.unmodelled += [f"{config_flag} {f}: a file in the container, not in the manifests" for f in configs]
        s.unmodelled += [*c.unread, *[f"{h}: not in the manifests" for h in hit]]
        s.inert += [f"{r}: not in the manifests" for r in rest]
        return Side(c, command, role(s), s, reading)

    return reader
