"""``kvproof validate LOG``: read an event log's header, build the scenario and the protocol's
observation, run the search (:mod:`kvproof.checker.logs.validate`; its steps in C where that can run,
:mod:`kvproof.checker.logs.validate_native`) over the log read once, and print the answer.

The answer is one of :data:`ANSWERS`; the command line maps it to the exit code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from kvproof.checker.logs.validate import Checked, Event, LogError, Observation, _Rows, explain, read_log, rebuild
from kvproof.checker.logs.validate_native import make_search
from kvproof.model.machine import Machine

__all__ = ["run_validate", "ANSWERS", "EXPLAINED", "VIOLATION", "UNDECIDED", "UNEXPLAINED"]

EXPLAINED = "explained"
"""A behaviour of the spec produces every event and breaks no invariant (with ``--certain-only``,
also when another behaviour consistent with the log breaks one)."""
VIOLATION = "violation"
"""The log shows a violation: every explanation of it up to some event breaks an invariant, or
(unless ``--certain-only``) some explanation does (a *possible* violation).  It wins over an
unexplained line after it: a violation is the stronger statement about the engine, and the
search stops at the first certain one."""
UNDECIDED = "undecided"
"""Cannot decide: more than ``--max-states`` states were possible at one event (or after the last)."""
UNEXPLAINED = "unexplained"
"""A line no behaviour of the spec explains (an event lost, duplicated or reordered, or an engine
that does what the spec does not), with no violation counted before it."""
ANSWERS = (EXPLAINED, VIOLATION, UNDECIDED, UNEXPLAINED)
"""What :func:`run_validate` answers, one word each."""


def _events(obs: Observation, path: str, rows: Iterator[tuple[int, dict]]) -> Iterator[Event]:
    """Decode each row; a bad one is :class:`LogError` naming ``file:line``."""
    for no, raw in rows:
        try:
            yield obs.decode(no, raw)
        except ValueError as e:
            raise LogError(f"{path}:{no}: {e}") from None


def _reread(obs: Observation, path: str) -> Iterator[Event]:
    """The log's events, read again from the start (the file closed at the end or when dropped)."""
    _, rows = read_log(path)
    try:
        yield from _events(obs, path, rows)
    finally:
        rows.close()


def run_validate(args: Any, out: Any, bad_input: type[Exception]) -> str:
    """``kvproof validate LOG``: read the header, find the protocol's ``validate`` command and
    search, reading the log once; where the search stops early the rest of the log is still
    read, so bad input is ``bad_input`` (exit 3) wherever it is.  Returns one of
    :data:`ANSWERS`: :data:`EXPLAINED`; :data:`VIOLATION` for a violation or a *possible*
    violation (an explained log that some explanation breaks an invariant along:
    :class:`~kvproof.checker.logs.validate.Maybe`; not counted with ``--certain-only``), its trace
    written, also when an unexplained line follows it; :data:`UNEXPLAINED` for a line nothing
    explains with no violation counted before it; :data:`UNDECIDED` when it cannot decide."""
    import time

    from kvproof.checker.traces import Trace, to_itf
    from kvproof.checker.atomic import write_text_atomic
    from kvproof.model.scenario import ScenarioError, builtin, parse_scenario

    path = args.log
    opened: list[_Rows] = []
    try:
        header, rows = read_log(path)
        opened.append(rows)
        where = f"{path}:header"
        scenario_ref = header.get("scenario")
        if isinstance(scenario_ref, str):
            if scenario_ref.endswith(".toml") or "/" in scenario_ref:
                raise LogError(f"{where}: scenario: a built-in scenario's name or the scenario's data, "
                               f"not a file ({scenario_ref!r})")
            try:
                base = builtin(scenario_ref)
            except ScenarioError as e:
                raise LogError(f"{where}: scenario: {e}") from None
        elif isinstance(scenario_ref, dict):
            base = parse_scenario(scenario_ref, f"{where}.scenario")
        else:
            raise LogError(f"{where}: scenario: expected a built-in scenario's name or the scenario's data, "
                           f"got {scenario_ref!r}")
        module = base.family_protocol().command("validate")
        if module is None:
            raise LogError(f"{where}: the {base.family} protocol has no event-log validation")
        try:
            scenario = module.log_scenario(base, header)
            spec = scenario.build()
        except ValueError as e:
            raise LogError(f"{where}: {e}") from None
        machine = Checked.invariants(spec)
        invariants = machine.claims
        try:
            obs = module.observation(machine, header)
        except ValueError as e:
            raise LogError(f"{where}: {e}") from None
        from kvproof.checker.explicit.native import NativeUnavailable

        from kvproof.checker.logs.validate_factored import FactoredSearch, FactoredUnavailable

        backend = getattr(args, "backend", "auto")
        try:  # compiling the steps is not part of the rate
            search = make_search(machine, obs, args.max_states, backend)
        except (NativeUnavailable, FactoredUnavailable) as e:
            raise LogError(f"--backend {backend}: {e}") from None
        if isinstance(search, FactoredSearch):  # where it hands the log to the flat search: read it again
            search.replay = lambda: _reread(obs, path)
        t0 = time.perf_counter()
        events = _events(obs, path, rows)
        verdict = explain(machine, obs, events, args.max_states, search)
        seconds = time.perf_counter() - t0
        count = verdict.events + sum(1 for _ in events)  # the rest, if it stopped early: bad input is exit 3
    except (LogError, ScenarioError) as e:
        raise bad_input(str(e)) from None
    finally:
        for rows in opened:
            rows.close()
    rate = f"{verdict.events / seconds:,.0f} events/s" if seconds > 0 else ""
    stats = (f"{verdict.events:,} of {count:,} events in {seconds:.2f} s ({rate}); "
             f"at most {verdict.peak:,} possible {'state' if verdict.peak == 1 else 'states'} at once")
    maybe = verdict.maybe
    certain_only = getattr(args, "certain_only", False)
    if verdict.kind == "explained" and maybe is None and verdict.tail and not certain_only:
        out.print(f"{path}: cannot decide: a behaviour of {scenario.name} produces every event and breaks no "
                  f"invariant up to the last one, but {verdict.tail}", soft_wrap=True)
        out.print(f"  {stats}")
        return UNDECIDED
    if verdict.kind == "explained" and (maybe is None or certain_only):
        out.print(f"{path}: explained: a behaviour of {scenario.name} produces every event "
                  f"and breaks no invariant ({len(invariants)} checked)", soft_wrap=True)
        if maybe is not None:
            out.print(f"  possible violation of {', '.join(maybe.claims)} at {path}:{maybe.event.line} "
                      f"(some behaviour consistent with the log breaks it; not counted: --certain-only)",
                      soft_wrap=True)
        out.print(f"  {stats}")
        return EXPLAINED

    def write(claim: str, last: Any, bad: bytes, closed: bool) -> None:
        """Rebuild the explanation that ends in ``bad`` and write its trace up to where it breaks ``claim``."""
        _, rows = read_log(path)
        obs2 = module.observation(machine, header)
        actions, states = rebuild(machine, obs2, _events(obs2, path, rows), last, bad, args.max_states, closed)
        rows.close()
        full = Machine(spec)
        first = next((k for k, st in enumerate(states) if full.claim_hits(claim, st)), len(states) - 1)
        actions, states = actions[:first], states[:first + 1]  # up to the state that breaks it
        trace = Trace(scenario, full, claim, "counterexample", actions, states)
        directory = Path(args.traces) if args.traces else Path(path).parent
        target = directory / f"{Path(path).name.split('.')[0]}__{claim}.itf.json"
        try:
            written = write_text_atomic(target, json.dumps(to_itf(trace), indent=1) + "\n")
        except OSError as e:
            raise bad_input(f"{target}: cannot write the trace: {e.strerror or e}") from None
        out.print(f"  the explanation ({len(actions)} steps) written to {written}", soft_wrap=True)

    if verdict.kind == "explained":
        assert maybe is not None
        ev = maybe.event
        where = "before" if maybe.before else "after"
        out.print(f"{path}:{ev.line}: possible violation: {ev.raw.get('event')} - some behaviour consistent with "
                  f"the log up to here breaks {', '.join(maybe.claims)} ({where} this event); the log cannot rule "
                  f"it out (a behaviour that breaks no invariant explains every event)", soft_wrap=True)
        out.print(f"  {json.dumps(ev.raw, separators=(',', ':'))}", soft_wrap=True, markup=False)
        if not args.no_traces:
            write(maybe.claims[0], None if maybe.before else ev, maybe.bad, True)
        out.print(f"  {stats}")
        return VIOLATION
    ev = verdict.event
    assert ev is not None
    out.print(f"{path}:{ev.line}: {verdict.kind}: {ev.raw.get('event')} - {verdict.why}", soft_wrap=True)
    out.print(f"  {json.dumps(ev.raw, separators=(',', ':'))}", soft_wrap=True, markup=False)
    # a possible violation before an unexplained line counts, as on an explained log (the
    # violation is the stronger statement), unless --certain-only
    counted = verdict.kind == "unexplained" and maybe is not None and not certain_only
    if maybe is not None and (maybe.event.line != ev.line or verdict.kind != "violation"):
        note = (": counted, it wins over the unexplained line (--certain-only does not count it)" if counted
                else ": not counted (--certain-only)" if verdict.kind == "unexplained" else "")
        out.print(f"  possible violation of {', '.join(maybe.claims)} from {path}:{maybe.event.line} "
                  f"(some behaviour consistent with the log up to there breaks it){note}", soft_wrap=True)
    if verdict.kind == "undecided":
        out.print(f"  {stats}")
        return UNDECIDED
    if verdict.possible:
        shown = sorted({obs.describe(s, ev) for s in verdict.possible})
        out.print(f"  {len(verdict.possible):,} possible {'state' if len(verdict.possible) == 1 else 'states'} "
                  f"before it; what the event is about in them:")
        for line in shown[:5]:
            out.print(f"    {line}", soft_wrap=True, markup=False)
        if len(shown) > 5:
            out.print(f"    ... and {len(shown) - 5} more")
    if verdict.kind == "violation" and not args.no_traces and verdict.bad is not None:
        write(verdict.claims[0], ev, verdict.bad, False)
    if counted and not args.no_traces:
        write(maybe.claims[0], None if maybe.before else maybe.event, maybe.bad, True)
    out.print(f"  {stats}")
    if verdict.kind == "violation" or counted:
        return VIOLATION
    return UNEXPLAINED
