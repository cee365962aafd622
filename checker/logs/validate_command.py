"""``kvproof validate LOG``: read an event log's header, build the scenario and the protocol's
observation, run the search (:mod:`kvproof.checker.logs.validate`; its steps in C where that can run,
:mod:`kvproof.checker.logs.validate_native`) over the log read once, and report the answer.

:func:`validate_log` checks one log and hands what it finds to a printer
(:mod:`kvproof.checker.logs.validate_output`: the text, or JSON Lines), one finding at a time;
the answer is one of :data:`ANSWERS`, which the command line maps to the exit code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from kvproof.checker.logs.validate import Checked, Event, LogError, Observation, _Rows, explain, read_log, rebuild
from kvproof.checker.logs.validate_native import make_search
from kvproof.model.machine import Machine

__all__ = ["validate_log", "follow_log", "LogResult", "prepare_header", "Prepared", "prepare", "ANSWERS", "EXPLAINED", "VIOLATION", "UNDECIDED", "UNEXPLAINED"]

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


@dataclass
class Prepared:
    """A log opened for checking: its header and rows (read lazily), the scenario it names, the
    protocol's ``validate`` module, the machine (the always-invariants) and observation, and the
    search (compiled, not yet run)."""

    path: str
    header: dict
    rows: _Rows
    scenario: Any
    spec: Any
    module: Any
    machine: Checked
    obs: Observation
    search: Any


def prepare(path: str, backend: str, max_states: int, opened: list | None = None) -> Prepared:
    """Open the log at ``path``, read its header and build what checking it needs;
    :class:`LogError` (or :class:`~kvproof.model.scenario.ScenarioError`) for bad input.  The
    rows are appended to ``opened`` as soon as the file is open, for the caller to close."""
    header, rows = read_log(path)
    if opened is not None:
        opened.append(rows)
    return prepare_header(path, header, rows, backend, max_states)


def prepare_header(path: str, header: dict, rows: Any, backend: str, max_states: int, flat: bool = False) -> Prepared:
    """What checking a log with ``header`` needs (:func:`prepare`, the header already read);
    with ``flat`` the search is the reference or its C steps, never the factored one (a live
    log is searched event by event: :func:`~kvproof.checker.logs.validate.monitor`)."""
    from kvproof.checker.explicit.native import NativeUnavailable
    from kvproof.checker.logs.validate_factored import FactoredSearch, FactoredUnavailable
    from kvproof.model.scenario import ScenarioError, builtin, parse_scenario

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
    try:
        obs = module.observation(machine, header)
    except ValueError as e:
        raise LogError(f"{where}: {e}") from None
    if flat and backend != "python":
        backend = "native" if backend == "native" else "flat"
    try:  # compiling the steps is not part of the rate
        search = make_search(machine, obs, max_states, backend)
    except (NativeUnavailable, FactoredUnavailable) as e:
        raise LogError(f"--backend {backend}: {e}") from None
    if isinstance(search, FactoredSearch):  # where it hands the log to the flat search: read it again
        search.replay = lambda: _reread(obs, path)
    return Prepared(path, header, rows, scenario, spec, module, machine, obs, search)


@dataclass
class LogResult:
    """What checking one log found: its answer (one of :data:`ANSWERS`, or ``bad input``), the
    events the search read and the events in the log, the search's seconds and peak, and the
    findings handed to the printer (JSON objects)."""

    log: str
    answer: str
    events: int = 0
    count: int = 0
    seconds: float = 0.0
    peak: int = 0
    findings: list = field(default_factory=list)

    def verdict(self) -> dict:
        """The log's ``verdict`` object (its JSON Lines closing object)."""
        return {"log": self.log, "verdict": self.answer, "events": self.events, "read": self.count,
                "seconds": round(self.seconds, 6), "peak": self.peak}


def validate_log(args: Any, path: str, printer: Any, bad_input: type[Exception]) -> LogResult:
    """Check the log at ``path``: read the header, find the protocol's ``validate`` command and
    search, reading the log once; where the search stops early the rest of the log is still
    read, so bad input is ``bad_input`` (exit 3) wherever it is.  What it finds goes to
    ``printer`` (``say`` a text line, ``finding`` a JSON object).  The answer is one of
    :data:`ANSWERS`: :data:`EXPLAINED`; :data:`VIOLATION` for a violation or a *possible*
    violation (an explained log that some explanation breaks an invariant along:
    :class:`~kvproof.checker.logs.validate.Maybe`; not counted with ``--certain-only``), its trace
    written, also when an unexplained line follows it; :data:`UNEXPLAINED` for a line nothing
    explains with no violation counted before it; :data:`UNDECIDED` when it cannot decide."""
    import time

    from kvproof.checker.traces import Trace, to_itf
    from kvproof.checker.atomic import write_text_atomic
    from kvproof.model.scenario import ScenarioError

    opened: list[_Rows] = []
    try:
        p = prepare(path, getattr(args, "backend", "auto"), args.max_states, opened)
        header, rows, scenario, spec, module, machine, obs = (p.header, p.rows, p.scenario, p.spec, p.module,
                                                              p.machine, p.obs)
        invariants = machine.claims
        t0 = time.perf_counter()
        events = _events(obs, path, rows)
        verdict = explain(machine, obs, events, args.max_states, p.search)
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
    result = LogResult(path, "", verdict.events, count, seconds, verdict.peak)
    say = printer.say

    def find(kind: str, event: Event | None, **fields: Any) -> dict:
        """Hand one finding to the printer (and keep it)."""
        obj = {"log": path, "finding": kind, "line": event.line if event else None,
               "event": event.raw.get("event") if event else None, **fields}
        if event is not None:
            obj["raw"] = event.raw
        result.findings.append(obj)
        return obj

    def done(answer: str) -> LogResult:
        say(f"  {stats}")
        for obj in result.findings:
            printer.finding(obj)
        result.answer = answer
        return result

    maybe = verdict.maybe
    certain_only = getattr(args, "certain_only", False)

    def possible(counted: bool) -> dict:
        """The possible violation's finding."""
        return find("possible_violation", maybe.event, claims=list(maybe.claims), before=maybe.before,
                    counted=counted, trace=None)

    if verdict.kind == "explained" and maybe is None and verdict.tail and not certain_only:
        say(f"{path}: cannot decide: a behaviour of {scenario.name} produces every event and breaks no "
            f"invariant up to the last one, but {verdict.tail}")
        find("undecided", None, why=verdict.tail)
        return done(UNDECIDED)
    if verdict.kind == "explained" and (maybe is None or certain_only):
        say(f"{path}: explained: a behaviour of {scenario.name} produces every event "
            f"and breaks no invariant ({len(invariants)} checked)")
        if maybe is not None:
            say(f"  possible violation of {', '.join(maybe.claims)} at {path}:{maybe.event.line} "
                f"(some behaviour consistent with the log breaks it; not counted: --certain-only)")
            possible(False)
        return done(EXPLAINED)

    def write(claim: str, last: Any, bad: bytes, closed: bool, obj: dict) -> None:
        """Rebuild the explanation that ends in ``bad`` and write its trace up to where it breaks ``claim``."""
        _, rows = read_log(path)
        obs2 = module.observation(machine, header)
        actions, states = rebuild(machine, obs2, _events(obs2, path, rows), last, bad, args.max_states, closed,
                                 p.search)
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
        obj["trace"] = str(written)
        say(f"  the explanation ({len(actions)} steps) written to {written}")

    if verdict.kind == "explained":
        assert maybe is not None
        ev = maybe.event
        where = "before" if maybe.before else "after"
        say(f"{path}:{ev.line}: possible violation: {ev.raw.get('event')} - some behaviour consistent with "
            f"the log up to here breaks {', '.join(maybe.claims)} ({where} this event); the log cannot rule "
            f"it out (a behaviour that breaks no invariant explains every event)")
        say(f"  {json.dumps(ev.raw, separators=(',', ':'))}", markup=False)
        obj = possible(True)
        if not args.no_traces:
            write(maybe.claims[0], None if maybe.before else ev, maybe.bad, True, obj)
        return done(VIOLATION)
    ev = verdict.event
    assert ev is not None
    say(f"{path}:{ev.line}: {verdict.kind}: {ev.raw.get('event')} - {verdict.why}")
    say(f"  {json.dumps(ev.raw, separators=(',', ':'))}", markup=False)
    main = find(verdict.kind, ev, why=verdict.why)
    if verdict.kind == "violation":
        main.update(claims=list(verdict.claims), trace=None)
    # a possible violation before an unexplained line counts, as on an explained log (the
    # violation is the stronger statement), unless --certain-only
    counted = verdict.kind == "unexplained" and maybe is not None and not certain_only
    extra = None
    if maybe is not None and (maybe.event.line != ev.line or verdict.kind != "violation"):
        note = (": counted, it wins over the unexplained line (--certain-only does not count it)" if counted
                else ": not counted (--certain-only)" if verdict.kind == "unexplained" else "")
        say(f"  possible violation of {', '.join(maybe.claims)} from {path}:{maybe.event.line} "
            f"(some behaviour consistent with the log up to there breaks it){note}")
        extra = possible(counted)
    if verdict.kind == "undecided":
        return done(UNDECIDED)
    if verdict.possible:
        shown = sorted({obs.describe(s, ev) for s in verdict.possible})
        main["possible_states"] = len(verdict.possible)
        main["about"] = shown[:5]
        say(f"  {len(verdict.possible):,} possible {'state' if len(verdict.possible) == 1 else 'states'} "
            f"before it; what the event is about in them:")
        for line in shown[:5]:
            say(f"    {line}", markup=False)
        if len(shown) > 5:
            say(f"    ... and {len(shown) - 5} more")
    if verdict.kind == "violation" and not args.no_traces and verdict.bad is not None:
        write(verdict.claims[0], ev, verdict.bad, False, main)
    if counted and not args.no_traces:
        write(maybe.claims[0], None if maybe.before else maybe.event, maybe.bad, True, extra)
    if verdict.kind == "violation" or counted:
        return done(VIOLATION)
    return done(UNEXPLAINED)


def _segments(lines: Iterator, label: str, bad: list) -> Iterator[tuple[int, dict | None]]:
    """The rows of a live log: ``(line, object)``, and ``(line, None)`` where a new log begins (a
    new file, or a header line in the stream); a line that is not an object of the schema is
    appended to ``bad`` as ``(line, message)`` and skipped."""
    from kvproof.checker.logs.follow import NEW_FILE
    from kvproof.checker.logs.validate import LOG_FORMAT, _parse_line

    for no, data in lines:
        if data is NEW_FILE:
            yield no, None
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            bad.append((no, f"{label}:{no}: not UTF-8 text"))
            continue
        if not text.strip():
            continue
        try:
            raw = _parse_line(label, no, text)
        except LogError as e:
            bad.append((no, str(e)))
            continue
        if raw.get("log") == LOG_FORMAT:
            yield no, None
        yield no, raw


def _live_answer(findings: list) -> str:
    """A live log's answer from its findings so far: a violation (or a possible one counted),
    else an unexplained line, else bad input, else cannot decide, else explained."""
    got = {f["finding"] for f in findings if f["finding"] != "possible_violation" or f.get("counted")}
    from kvproof.checker.logs.validate_output import BAD_INPUT

    return (VIOLATION if got & {"violation", "possible_violation"} else UNEXPLAINED if "unexplained" in got
            else BAD_INPUT if BAD_INPUT in got else UNDECIDED if "undecided" in got else EXPLAINED)


def follow_log(args: Any, printer: Any, notes: Any, lines: Iterator, label: str,
               results: list | None = None) -> list[LogResult]:
    """``kvproof validate --follow``: check a log while it is written, reporting each finding as
    soon as the line that shows it is read (:func:`~kvproof.checker.logs.validate.monitor`), and
    going on.  ``lines`` are the source's lines (:mod:`kvproof.checker.logs.follow`); each new
    file or header line starts a new log, checked from the spec's initial state.  A line that
    cannot be read is a ``bad_input`` finding and is skipped; a log whose header cannot be read is
    skipped to the next header.  ``notes`` gets one line (stderr) when a log starts.  Appends one
    :class:`LogResult` per log to ``results`` as the log starts (so that an interrupted run can
    still sum them up) and returns it; no trace is written (the log may not be read again)."""
    import time

    from kvproof.checker.logs.validate import Maybe, monitor
    from kvproof.checker.logs.validate_output import BAD_INPUT
    from kvproof.model.scenario import ScenarioError

    certain_only = getattr(args, "certain_only", False)
    bad: list = []
    rows = _segments(lines, label, bad)
    results = [] if results is None else results
    pending: list = []  # a row read past the end of the last log

    def report(result: LogResult, kind: str, line: int | None, text: str, raw: dict | None = None,
               **fields: Any) -> None:
        obj = {"log": label, "finding": kind, "line": line, "event": raw.get("event") if raw else None, **fields}
        if raw is not None:
            obj["raw"] = raw
        result.findings.append(obj)
        result.answer = _live_answer(result.findings)
        printer.say(text)
        if raw is not None:
            printer.say(f"  {json.dumps(raw, separators=(',', ':'))}", markup=False)
        printer.finding(obj)

    def flush_bad(result: LogResult) -> None:
        while bad:
            no, message = bad.pop(0)
            report(result, BAD_INPUT, no, f"{message} (skipped)", why=message)

    def next_row():
        if pending:
            return pending.pop()
        return next(rows, StopIteration)

    ended: list = []

    def events(result: LogResult, p: Prepared) -> Iterator[Event]:
        """The rows of this log decoded, up to the next log's start."""
        while not ended:
            flush_bad(result)
            row = next_row()
            if row is StopIteration or row[1] is None:
                ended.append(row)
                return
            no, raw = row
            result.count += 1
            try:
                yield p.obs.decode(no, raw)
            except ValueError as e:
                bad.append((no, f"{label}:{no}: {e}"))

    while True:
        row = next_row()
        if row is StopIteration:
            break
        no, raw = row
        if raw is None:
            continue  # a new log begins: its header is the next row
        result = LogResult(label, EXPLAINED, count=0)
        results.append(result)
        flush_bad(result)
        try:
            if raw.get("log") is None:
                raise LogError(f"{label}:{no}: expected the header {{\"v\": 1, \"log\": \"kvproof-events\", "
                               f"\"scenario\": ...}} before the events; skipped to the next header")
            p = prepare_header(label, raw, None, getattr(args, "backend", "auto"), args.max_states, flat=True)
        except (LogError, ScenarioError) as e:
            report(result, BAD_INPUT, no, str(e), why=str(e))
            result.answer = BAD_INPUT
            while True:  # to the next log
                row = next_row()
                if row is StopIteration or row[1] is None:
                    if row is not StopIteration:
                        pending.append(row)
                    break
                result.count += 1
            flush_bad(result)
            continue
        notes(f"following {label}: {p.scenario.name} ({len(p.machine.claims)} invariants)")
        ended.clear()
        t0 = time.perf_counter()
        for found in monitor(p.machine, p.obs, events(result, p), args.max_states, p.search):
            if isinstance(found, Maybe):
                ev = found.event
                counted = not certain_only
                if any(f.get("line") == ev.line and f["finding"] == "violation" for f in result.findings):
                    continue  # the certain violation at the same line said it
                report(result, "possible_violation", ev.line,
                       f"{label}:{ev.line}: possible violation: {ev.raw.get('event')} - some behaviour consistent "
                       f"with the log up to here breaks {', '.join(found.claims)} "
                       f"({'before' if found.before else 'after'} this event); the log cannot rule it out"
                       + ("" if counted else " (not counted: --certain-only)"),
                       ev.raw, claims=list(found.claims), before=found.before, counted=counted)
                continue
            ev = found.event
            tail = {UNEXPLAINED: "; skipped: the search goes on from the states before it",
                    UNDECIDED: "; this log is no longer checked (a new header starts the next)"}.get(found.kind, "")
            fields = {"claims": list(found.claims)} if found.kind == "violation" else {}
            report(result, found.kind, ev.line, f"{label}:{ev.line}: {found.kind}: {ev.raw.get('event')} - "
                   f"{found.why}{tail}", ev.raw, why=found.why, **fields)
        for _ in events(result, p):  # after undecided: the rest of this log, still read for bad input
            pass
        flush_bad(result)
        result.events, result.seconds = result.count, time.perf_counter() - t0
        printer.say(f"{label}: {result.answer}: {result.count:,} events read")
        printer.finding(result.verdict())
    return results
