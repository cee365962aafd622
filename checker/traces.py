"""Traces: a path through the spec, stored as ITF JSON (the Informal Trace Format).

A :class:`Trace` is the scenario, the claim it illustrates, the action ids taken and the states
visited.  On disk it is an ITF document (``#meta``, ``vars``, ``states``; integers as
``{"#bigint": ...}``) written with ``itf-py``.  Each state carries the spec's fields by name
(enum values by label) and, following Quint's model-based-testing convention, the action that
produced it (``mbt::actionTaken``) and its parameters (``mbt::nondetPicks``, a record of plain
values rather than Quint's ``Some(...)`` wrappers, which ``itf-py`` cannot read back), so
existing ITF tooling can read and drive it.  The scenario itself is stored in ``#meta``, so a trace replays
without the file it came from.

Reading checks the document against the spec and raises :class:`TraceError` with one line
naming what does not fit.
"""

from __future__ import annotations

import json
from collections import namedtuple
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from kvproof.model.files import read_user_text
from kvproof.model.machine import Machine
from kvproof.model.narration import rename
from kvproof.model.layout import LayoutError
from kvproof.model.scenario import Scenario, ScenarioError, parse_scenario
from kvproof.checker.atomic import write_text_atomic

__all__ = ["Trace", "TraceError", "to_itf", "write_trace", "read_trace", "trace_filename"]

ACTION_VAR = "mbt::actionTaken"
PICKS_VAR = "mbt::nondetPicks"
FORMAT = "kvproof-trace/1"
_KINDS = {"invariant": "counterexample", "witness": "witness", "liveness": "lasso"}  # claim kind -> trace kind


class TraceError(ValueError):
    """A trace file that cannot be read as a trace of its spec (one line)."""


@dataclass
class Trace:
    """A path: ``states[k]`` is reached from ``states[k-1]`` by ``actions[k-1]``.

    ``kind`` is ``counterexample`` (the last state breaks an invariant) or ``witness`` (the
    last state satisfies a witness).  ``loop`` is kept for lasso-shaped traces (ITF ``loop``).
    """

    scenario: Scenario
    machine: Machine
    claim: str
    kind: str
    actions: list[int]
    states: list[bytes]
    loop: int | None = None

    def __len__(self) -> int:
        return len(self.actions)

    def labels(self) -> list[str]:
        """``action(params)`` of every step (index labels as the state has them: ``R0``)."""
        return [self.machine.label(a) for a in self.actions]

    @cached_property
    def names(self) -> list[dict[str, str]]:
        """Per state, the names renderings show for its index labels
        (:meth:`~kvproof.model.framework.Spec.display_names`: e.g. ``R0`` shown as ``R0@room0``)."""
        names = self.machine.spec.display_names(self.states, self.actions)
        return list(names) + [{}] * (len(self.states) - len(names))

    def shown(self, text: str, k: int) -> str:
        """``text`` (a label, a note, a value) as renderings show it at state ``k`` (the state
        after step ``k``): its index labels renamed by :attr:`names`."""
        return rename(text, self.names[k])

    def shown_labels(self) -> list[str]:
        """:meth:`labels` as renderings show them (step ``k``'s with the names after it)."""
        return [self.shown(label, k + 1) for k, label in enumerate(self.labels())]


def trace_filename(scenario: str, claim: str) -> str:
    """``<scenario>__<claim>.itf.json``."""
    return f"{scenario}__{claim}.itf.json"


def to_itf(trace: Trace) -> dict[str, Any]:
    """The ITF document of ``trace``."""
    import itf_py  # only writing or reading a trace needs it

    spec = trace.machine.spec
    layout = spec.layout
    states = []
    for k, state in enumerate(trace.states):
        values = layout.decode(state)
        if k == 0:
            values[ACTION_VAR] = "init"
            values[PICKS_VAR] = namedtuple("Picks", [])()
        else:
            inst = trace.machine.instances[trace.actions[k - 1]]
            values[ACTION_VAR] = inst.name
            names = list(inst.action.params)
            picks = namedtuple("Picks", names)(
                *[spec.domain(p).label(v) for p, v in zip(names, inst.args)]
            )
            values[PICKS_VAR] = picks
        states.append(itf_py.State(meta={"index": k}, values=values))
    meta = {
        "format": "ITF",
        "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
        "source": FORMAT,
        "description": f"{trace.kind} of {trace.claim} in scenario {trace.scenario.name}",
        "scenario": trace.scenario.to_data(),
        "claim": trace.claim,
        "kind": trace.kind,
    }
    vars_ = [f.name for f in layout.fields] + [ACTION_VAR, PICKS_VAR]
    doc = itf_py.trace_to_json(itf_py.Trace(meta=meta, params=[], vars=vars_, states=states, loop=trace.loop))
    if doc.get("loop") is None:
        doc.pop("loop", None)
    return doc


def write_trace(trace: Trace, directory: str | Path) -> Path:
    """Write ``trace`` under ``directory`` atomically; returns the path written."""
    path = Path(directory) / trace_filename(trace.scenario.name, trace.claim)
    return write_text_atomic(path, json.dumps(to_itf(trace), indent=1) + "\n")


def read_trace(path: str | Path) -> Trace:
    """Read a trace file; :class:`TraceError` names what does not fit.

    The stored states are returned as stored; :func:`kvproof.model.replay.replay` checks them.
    """
    p = Path(path)
    text = read_user_text(p, TraceError, "an ITF trace (JSON)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{p}: not JSON: {e}") from None
    except RecursionError:
        raise TraceError(f"{p}: not an ITF trace: JSON nested too deeply") from None
    try:
        return _from_doc(doc, p)
    except TraceError:
        raise
    except ScenarioError as e:
        raise TraceError(f"{p}: stored scenario: {e}") from None
    except RecursionError:
        raise TraceError(f"{p}: does not fit the spec: values nested too deeply") from None
    except (LayoutError, KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise TraceError(f"{p}: does not fit the spec: {type(e).__name__}: {e}") from None


def _from_doc(doc: Any, p: Path) -> Trace:
    if not isinstance(doc, dict) or not isinstance(doc.get("states"), list) or "vars" not in doc:
        raise TraceError(f"{p}: not an ITF trace (needs vars and states)")
    meta = doc.get("#meta", {})
    if not isinstance(meta, dict) or meta.get("source") != FORMAT:
        source = meta.get("source") if isinstance(meta, dict) else None
        raise TraceError(f"{p}: not a kvproof trace (#meta.source is {source!r})")
    scenario = parse_scenario(meta.get("scenario"), f"{p}#meta.scenario")
    machine = Machine(scenario.build())
    layout = machine.spec.layout
    import itf_py

    parsed = itf_py.trace_from_json(doc)
    if not parsed.states:
        raise TraceError(f"{p}: no states")
    by_name = {inst.name: inst for inst in machine.instances}
    actions, states = [], []
    for k, st in enumerate(parsed.states):
        values = dict(st.values)
        action = values.pop(ACTION_VAR, None)
        picks = values.pop(PICKS_VAR, None)
        try:
            states.append(layout.pack(layout.encode(values)))
        except LayoutError as e:
            raise TraceError(f"{p}: state {k}: {e}") from None
        if k == 0:
            continue
        if action not in by_name:
            raise TraceError(f"{p}: state {k}: unknown action {action!r}")
        args = []
        inst0 = by_name[action]
        for param in inst0.action.params:
            pick = getattr(picks, param, None)
            if pick is None:
                raise TraceError(f"{p}: state {k}: {action} needs parameter {param}")
            try:
                args.append(machine.spec.domain(param).code(pick))
            except LayoutError as e:
                raise TraceError(f"{p}: state {k}: {action}.{param}: {e}") from None
        matches = [i.aid for i in machine.instances if i.name == action and list(i.args) == args]
        if not matches:
            raise TraceError(f"{p}: state {k}: {action} has no instance with these parameters")
        actions.append(matches[0])
    claim = meta.get("claim")
    try:
        c = machine.spec.claim(claim)
    except (KeyError, TypeError):
        raise TraceError(f"{p}: #meta.claim {claim!r} is not a claim of the spec") from None
    want = _KINDS[c.kind]
    kind = meta.get("kind", want)
    if kind != want:
        raise TraceError(f"{p}: #meta.kind: expected {want!r} for the {c.kind} {claim}, got {kind!r}")
    loop = doc.get("loop")
    if c.kind == "liveness":
        if not isinstance(loop, int) or isinstance(loop, bool) or not 0 <= loop < len(states):
            raise TraceError(f"{p}: loop: expected the step a liveness lasso loops back to, "
                             f"a whole number in 0..{len(states) - 1}, got {loop!r}")
    elif loop is not None:
        raise TraceError(f"{p}: loop: the trace of the {c.kind} {claim} is a path, not a lasso; "
                        f"expected no loop, got {loop!r}")
    return Trace(scenario, machine, claim, kind, actions, states, loop)
