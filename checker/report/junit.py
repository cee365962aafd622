"""JUnit XML for CI systems: one test case per scenario × claim.

``kvproof check --junit FILE`` writes it.  Each scenario is a ``<testsuite>`` (with the
search's statistics as properties) and each checked claim a ``<testcase>``
(``classname="kvproof.<scenario>"``, ``name="<claim>"``).  A verdict that differs from its
expectation is a ``<failure>`` whose text is the counterexample as ``kvproof show`` prints it;
an inconclusive verdict (a limit cut the search short) is an ``<error>``: the gate could not
decide, which is not the same as a wrong verdict.  The document follows the JUnit schema that
Jenkins' xUnit plugin publishes (``junit-10.xsd``), which GitLab, GitHub test reporters and
Azure DevOps read too; the tests validate against it.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from kvproof.checker.atomic import write_text_atomic
from kvproof.checker.report.render import render_trace, to_text
from kvproof.checker.results import ClaimReport, ScenarioReport

__all__ = ["junit_xml", "write_junit"]


def _case(rep: ScenarioReport, c: ClaimReport) -> ET.Element:
    case = ET.Element("testcase", classname=f"kvproof.{rep.scenario.name}", name=c.claim)
    trace = getattr(c.result, "trace", None)
    if c.verdict == "inconclusive":
        reason = c.result.reason
        err = ET.SubElement(case, "error", type="kvproof.inconclusive",
                            message=f"inconclusive: {reason} (expected {c.expected})")
        err.text = (f"The search stopped before it could decide {c.claim}: {reason}. "
                    f"{rep.stats.states:,} states were explored to depth {rep.stats.depth}. "
                    "Raise or drop the limit to decide it.")
    elif not c.matches:
        message = f"expected {c.expected}, found {c.verdict}"
        if trace is not None:
            message += f" after {len(trace)} steps"
        fail = ET.SubElement(case, "failure", type="kvproof.unexpected_verdict", message=message)
        doc = rep.scenario.build().claim(c.claim).doc
        lines = [f"{rep.scenario.name}: {c.claim} {message}.", doc]
        if c.trace_path is not None:
            lines.append(f"Counterexample: {c.trace_path} (kvproof show / kvproof replay it)")
        if trace is not None:
            lines += ["", to_text(render_trace(trace), width=100)]
        elif c.kind == "invariant":
            lines.append("The exhaustive search found no state that breaks it.")
        elif c.kind == "liveness":
            lines.append("The exhaustive search found no fair lasso that breaks it.")
        else:
            lines.append("The exhaustive search never reached it: the checks it guards may be vacuous.")
        fail.text = "\n".join(lines)
    return case


def junit_xml(reports: list[ScenarioReport], name: str = "kvproof") -> str:
    """The JUnit XML document for ``reports``."""
    stamp = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    host = socket.gethostname()
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    seconds = 0.0
    for rep in reports:
        cases = [_case(rep, c) for c in rep.claims]
        failures = sum(1 for c in cases if c.find("failure") is not None)
        errors = sum(1 for c in cases if c.find("error") is not None)
        suite = ET.SubElement(root, "testsuite", name=rep.scenario.name, tests=str(len(cases)),
                              failures=str(failures), errors=str(errors), skipped="0",
                              time=f"{rep.stats.seconds:.3f}", timestamp=stamp, hostname=host)
        props = ET.SubElement(suite, "properties")
        for key, value in (("title", rep.scenario.title), ("origin", rep.scenario.origin),
                           ("complete", str(rep.complete).lower()), ("reason", rep.reason),
                           ("states", str(rep.stats.states)), ("transitions", str(rep.stats.transitions)),
                           ("depth", str(rep.stats.depth))):
            ET.SubElement(props, "property", name=key, value=value)
        suite.extend(cases)
        totals["tests"] += len(cases)
        totals["failures"] += failures
        totals["errors"] += errors
        seconds += rep.stats.seconds
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | Path, reports: list[ScenarioReport]) -> Path:
    """Write the JUnit XML of ``reports`` to ``path`` atomically; returns the path."""
    return write_text_atomic(path, junit_xml(reports))
