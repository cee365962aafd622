"""SARIF 2.1.0 for code-scanning dashboards: one result per unexpected verdict.

``kvproof check --sarif FILE`` writes it.  Every claim is a rule (its docstring is the rule's
description).  Every verdict that differs from its expectation - or that a limit left
inconclusive - is a result located where a person would start reading:

1. the claim's definition in the spec source (the protocol's claims module, or a variant's file);
2. the definition of the counterexample's last action (the step after which the claim
   fails), when there is a counterexample;

with the whole counterexample as a code flow (one location per step, at that step's action
definition, with the step's label as its message) and the trace file as a related location.
Paths under the working directory are relative to ``%SRCROOT%`` (which GitHub code scanning
maps to the repository); others are absolute ``file:`` URIs.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

from kvproof import __version__
from kvproof.checker.atomic import write_text_atomic
from kvproof.checker.results import ClaimReport, ScenarioReport

__all__ = ["sarif_log", "write_sarif", "source_region", "SARIF_SCHEMA_URI"]

SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def source_region(spec: Any, name: str) -> tuple[Path, int, int] | None:
    """``(file, first line, last line)`` of the definition of method ``name`` of ``spec``'s
    class (an action or a claim): the ``def`` line, not its decorator.  ``None`` when the
    source cannot be found."""
    fn = getattr(type(spec), name, None)
    if fn is None:
        return None
    try:
        path = inspect.getsourcefile(fn)
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    offset = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("def ")), 0)
    return Path(path).resolve(), first + offset, first + len(lines) - 1


def _artifact(path: Path, root: Path) -> dict[str, Any]:
    try:
        return {"uri": path.resolve().relative_to(root).as_posix(), "uriBaseId": "SRCROOT"}
    except ValueError:
        return {"uri": path.resolve().as_uri()}


def _location(spec: Any, name: str, root: Path, text: str) -> dict[str, Any] | None:
    where = source_region(spec, name)
    if where is None:
        return None
    path, start, end = where
    return {
        "physicalLocation": {"artifactLocation": _artifact(path, root),
                             "region": {"startLine": start, "endLine": end}},
        "message": {"text": text},
    }


def _first_sentence(doc: str) -> str:
    head, dot, _ = doc.partition(". ")
    return head + "." if dot else doc


def _result(rep: ScenarioReport, c: ClaimReport, rule_index: int, root: Path) -> dict[str, Any]:
    spec = rep.scenario.build()
    sc = rep.scenario.name
    trace = getattr(c.result, "trace", None)
    if c.verdict == "inconclusive":
        level = "warning"
        text = (f"{sc}: {c.claim} is inconclusive ({c.result.reason}); expected {c.expected}. "
                f"{rep.stats.states:,} states explored to depth {rep.stats.depth}.")
    else:
        level = "error"
        text = f"{sc}: {c.claim} was expected {c.expected} but is {c.verdict}"
        text += f" after {len(trace)} steps, the last {trace.shown_labels()[-1]}." if trace is not None and len(trace) else "."
    locations = [_location(spec, c.claim, root, f"the claim {c.claim}")]
    result: dict[str, Any] = {
        "ruleId": c.claim,
        "ruleIndex": rule_index,
        "level": level,
        "kind": "fail",
        "message": {"text": text},
        "partialFingerprints": {
            "kvproofScenarioClaim/v1": hashlib.sha256(f"{sc}\0{c.claim}".encode()).hexdigest()[:32]},
        "properties": {"scenario": sc, "expected": c.expected, "verdict": c.verdict,
                       "states": rep.stats.states, "complete": rep.complete},
    }
    if trace is not None and len(trace):
        last = trace.machine.instances[trace.actions[-1]]
        locations.append(_location(spec, last.name, root, f"the last action: {trace.shown_labels()[-1]}"))
        steps = []
        for k, aid in enumerate(trace.actions, start=1):
            label = trace.shown(trace.machine.label(aid), k)
            loc = _location(spec, trace.machine.instances[aid].name, root, f"step {k}: {label}")
            if loc is not None:
                steps.append({"location": loc, "executionOrder": k})
        if steps:
            result["codeFlows"] = [{"message": {"text": f"counterexample of {c.claim} in {sc}"},
                                    "threadFlows": [{"locations": steps}]}]
        result["properties"]["steps"] = len(trace)
    if c.trace_path is not None:
        result["relatedLocations"] = [{"id": 1, "physicalLocation": {"artifactLocation": _artifact(Path(c.trace_path), root)},
                                       "message": {"text": "the counterexample trace (ITF JSON)"}}]
    result["locations"] = [loc for loc in locations if loc is not None]
    return result


def sarif_log(reports: list[ScenarioReport], root: str | Path | None = None) -> dict[str, Any]:
    """The SARIF log of ``reports``; ``root`` (default: the working directory) is ``%SRCROOT%``."""
    root = Path(root or Path.cwd()).resolve()
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for rep in reports:
        for claim in rep.scenario.build().claims:
            if claim.name in index:
                continue
            index[claim.name] = len(rules)
            rules.append({
                "id": claim.name,
                "name": "".join(w.capitalize() for w in claim.name.split("_")),
                "shortDescription": {"text": _first_sentence(claim.doc)},
                "fullDescription": {"text": claim.doc},
                "defaultConfiguration": {"level": "error"},
                "properties": {"kind": claim.kind, "checked": claim.at},
            })
    results = [_result(rep, c, index[c.claim], root) for rep in reports for c in rep.claims if not c.matches]
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "kvproof", "version": __version__, "semanticVersion": __version__,
                                "rules": rules}},
            "originalUriBaseIds": {"SRCROOT": {"uri": root.as_uri() + "/"}},
            "invocations": [{"executionSuccessful": True}],
            "results": results,
        }],
    }


def write_sarif(path: str | Path, reports: list[ScenarioReport], root: str | Path | None = None) -> Path:
    """Write the SARIF log of ``reports`` to ``path`` atomically; returns the path."""
    return write_text_atomic(path, json.dumps(sarif_log(reports, root), indent=2) + "\n")

