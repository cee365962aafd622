"""Trace validation: does some behaviour of the spec explain an observed event log?

An event log is what a running engine saw: one JSON object a line, most of them the visible
trace of one action of the spec (a page reserved, a write issued, an abort sent), the model's
other steps (the clock, a lost message, a death nobody logs) invisible.  The protocol says which
action instances are visible and how (its *observation*: :class:`Observation`); this module
searches, generically, for a run of the machine whose visible steps are the log's events in
order (trace validation with partial observation, as Cirstea, Kuppe, Loillier and Merz do for
TLA+ with TLC).

The search keeps a *frontier*: the set of states the engine may be in after the events read so
far (deduplicated, so concurrency in the log costs states, not paths).  Before each event it
closes the frontier under the internal steps (a breadth-first search bounded by ``max_states``),
then keeps the successors by an enabled visible instance whose observation equals the event.
(The observation should let an event name one instance in any state; where several match,
each is followed.)  No state: the event is *unexplained* (the first one nothing explains is reported with the
states that were possible).  Every state reached is checked against the always-invariants; a
state that breaks one stays in the frontier marked *dirty* (a clean state reached by another
path wins), and the log is a *violation* at the first event after which every explanation is
dirty: the log itself proves the engine broke the claim.  The first event after which SOME
explanation is dirty is a *possible* violation (:class:`Maybe`; reported whatever the verdict):
the searches note every successor of a clean state that breaks a claim (``Search.breaks``) until
the searches attributed to one event (its step, and the closure after it) have found one.
Memory is the frontier only (states
are finite, so it is bounded by the reachable set; past ``max_states`` the answer is *cannot
decide*); the path to a state is not kept while searching - a violation's trace is rebuilt by a
second pass over the log up to that event, which keeps each event's parents.

Nothing here knows a protocol: the protocol's ``validate`` command supplies the observation
(its ``validate`` module).  The command itself (read the log, pick the
search, print the answer) is :mod:`kvproof.checker.logs.validate_command`; the search with its steps
in C, :mod:`kvproof.checker.logs.validate_native`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from kvproof.model.compiler import compile_steps, compile_successors_of
from kvproof.model.framework import Spec
from kvproof.model.machine import Machine

__all__ = [
    "LOG_FORMAT", "SCHEMA_VERSION", "LogError", "Event", "Checked", "Observation", "Maybe", "Verdict", "read_log",
    "Search",
    "explain", "monitor", "rebuild", "log_text",
]

LOG_FORMAT = "kvproof-events"
"""The ``log`` value of an event log's header line."""
SCHEMA_VERSION = 1
"""The schema version this kvproof reads (the header's and every event's ``v``)."""
DEFAULT_MAX_STATES = 100_000


class LogError(ValueError):
    """An event log that cannot be read: one line naming ``file:line`` and the problem."""


@dataclass(frozen=True)
class Event:
    """One decoded event: its line, the action instances it may be (``aids``), what their
    observation must equal (``want``), and the event as logged (``raw``) for messages."""

    line: int
    aids: tuple[int, ...]
    want: Any
    raw: dict


class Observation(Protocol):
    """What a protocol tells the search about its event log (its ``validate`` command builds one)."""

    internal: Sequence[int]
    """Action instances no log shows: closed over between events."""

    unseen: dict[int, Callable[[bytes], bool]]
    """Optional: visible instances a log may also leave out, in the states where the predicate
    holds (a step no process can observe there); closed over like the internal ones."""

    def decode(self, line: int, raw: dict) -> Event:
        """The event of one parsed line; ``ValueError`` (one line) for bad input."""

    def admit(self, event: Event) -> str | None:
        """Check the log against itself in order (request ids, generations): ``None``, or why
        the event contradicts the events before it (then it is unexplained)."""

    def observe(self, aid: int, pre: bytes, post: bytes) -> Any:
        """What the log shows of instance ``aid`` taken from ``pre`` to ``post``."""

    def describe(self, state: bytes, event: Event) -> str:
        """One line: the parts of ``state`` that ``event`` is about."""


@dataclass
class Checked:
    """The spec and the claims re-checked along an explanation: what :func:`explain` needs of a
    :class:`~kvproof.model.machine.Machine` (``spec``, ``init``, ``claims``, ``hits``), with only
    the claim checks compiled (``hits_after[aid]``: only the claims instance ``aid`` can change,
    exact where the state before hit none)."""

    spec: Spec
    claims: list = field(default_factory=list)

    def __post_init__(self) -> None:
        from kvproof.model.compiler import compile_hits, compile_hits_after

        self.hits, _ = compile_hits(self.spec, self.claims)
        self.hits_after = compile_hits_after(self.spec, self.claims)
        self.init = self.spec.layout.pack(self.spec.init_state())

    @classmethod
    def invariants(cls, spec: Spec) -> "Checked":
        """Every always-invariant of ``spec`` (quiescent and liveness claims need the whole run)."""
        return cls(spec, [c for c in spec.claims if c.kind == "invariant" and c.at == "always"])


# -- reading a log ----------------------------------------------------------------------------------
def _parse_line(path: str, no: int, text: str) -> dict:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise LogError(f"{path}:{no}: not JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise LogError(f"{path}:{no}: not an event: JSON nested too deeply") from None
    if not isinstance(raw, dict):
        raise LogError(f"{path}:{no}: expected a JSON object, got {type(raw).__name__}")
    v = raw.get("v", SCHEMA_VERSION)
    if v != SCHEMA_VERSION or isinstance(v, bool):
        raise LogError(f"{path}:{no}: unknown schema version {v!r}; this kvproof reads version {SCHEMA_VERSION}")
    return raw


class _Rows:
    """``(line, object)`` of a log's events, read lazily from the open file; closing (or the end
    of the file) closes it."""

    def __init__(self, path: str, f: Any, line: int):
        self.path, self.f, self.line = path, f, line

    def __iter__(self) -> "_Rows":
        return self

    def __next__(self) -> tuple[int, dict]:
        while True:
            data = self.f.readline() if not self.f.closed else b""
            if not data:
                self.close()
                raise StopIteration
            self.line += 1
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self.close()
                raise LogError(f"{self.path}:{self.line}: not UTF-8 text") from None
            if text.strip():
                try:
                    return self.line, _parse_line(self.path, self.line, text)
                except LogError:
                    self.close()
                    raise

    def close(self) -> None:
        """Close the file."""
        self.f.close()


def read_log(path: str | Path) -> tuple[dict, _Rows]:
    """The header of the log at ``path`` and an iterator over ``(line, object)`` of its events
    (blank lines skipped), read lazily; :class:`LogError` for what cannot be read."""
    p = str(path)
    try:
        f = open(path, "rb")  # decoded line by line, so that an error names its line
    except OSError as e:
        raise LogError(f"{p}: cannot read: {e.strerror or e}") from None
    rows = _Rows(p, f, 0)
    try:
        no, header = next(rows)
    except StopIteration:
        raise LogError(f"{p}: empty: expected a header line {{\"v\": {SCHEMA_VERSION}, \"log\": \"{LOG_FORMAT}\", ...}}") from None
    if header.get("log") != LOG_FORMAT or "v" not in header:
        rows.close()
        raise LogError(f"{p}:{no}: expected the header {{\"v\": {SCHEMA_VERSION}, \"log\": \"{LOG_FORMAT}\", "
                       f"\"scenario\": ...}} as the first line")
    return header, rows


# -- the search -------------------------------------------------------------------------------------
@dataclass
class Maybe:
    """A *possible* violation: the first event after which SOME explanation of the log so far
    breaks an always-invariant (the log cannot rule the breach out, though it may not prove it).

    ``event`` is the last event read before the first dirty state appeared: the searches
    attributed to an event are its step (the states it leads to) and the closure under internal
    steps before the next event (or after the log's end); the closure before the first event is
    attributed to the first event (``before``: ``bad`` was reached before it).  ``claims`` are
    the claims broken by the states of those searches that break a claim and have a clean
    predecessor (every claim some such state breaks, in the claims' order); ``bad`` one of them
    that breaks ``claims[0]``, for the trace."""

    event: Event
    claims: list[str]
    bad: bytes
    before: bool = False


def _maybe(machine: Any, event: Event, breaks: dict[bytes, int], before: bool) -> Maybe:
    """The :class:`Maybe` of the dirty states ``breaks`` (state -> the claims it breaks) found in
    the searches attributed to ``event``."""
    union = 0
    for mask in breaks.values():
        union |= mask
    bits = [i for i in range(len(machine.claims)) if union >> i & 1]
    bad = next(t for t, mask in breaks.items() if mask >> bits[0] & 1)
    return Maybe(event, [machine.claims[i].name for i in bits], bad, before)


@dataclass
class Verdict:
    """The answer: ``kind`` is ``explained``, ``unexplained``, ``violation`` or ``undecided``.

    ``event`` is the event the answer is about (the first unexplained one, the one after which
    every explanation breaks ``claims``, the one where the frontier passed the cap), ``why``
    one line, ``possible`` the states the engine may have been in just before it (closed under
    internal steps), ``bad`` a state of the violation's explanation after ``event``.
    ``maybe`` is the first possible violation (:class:`Maybe`), whatever the kind: on an
    ``explained`` log, a breach some explanation makes and the log cannot rule out.
    ``tail`` is set (one line) on an ``explained`` log whose closure after the last event passed
    the cap: a possible violation only that closure would reach is not known."""

    kind: str
    events: int = 0
    event: Event | None = None
    why: str = ""
    possible: list[bytes] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    bad: bytes | None = None
    peak: int = 1
    explored: int = 0
    maybe: Maybe | None = None
    tail: str = ""


class Search:
    """The frontier search over one machine and observation (see the module docstring): the
    compiled internal successors and visible steps, and the two moves of :func:`explain`."""

    def __init__(self, machine: Machine, obs: Observation, max_states: int):
        self.machine = machine
        self.obs = obs
        self.max_states = max_states
        spec = machine.spec
        self.internal = compile_successors_of(spec, obs.internal)
        internal = set(obs.internal)
        self.steps = compile_steps(spec, [i.aid for i in spec.instances if i.aid not in internal])
        self.unseen = [(aid, when, self.steps[aid]) for aid, when in getattr(obs, "unseen", {}).items()
                       if aid in self.steps]
        self.hits = machine.hits
        # only the claims a step can change, where the state before broke none (a clean state)
        self.after = getattr(machine, "hits_after", None) or [machine.hits] * len(spec.instances)
        self.explored = 0
        self.breaks: dict[bytes, int] | None = None
        """Where a dict (set by :func:`explain` until the first possible violation is known):
        every successor of a clean state that breaks a claim, with the claims it breaks."""

    def close(self, frontier: dict[bytes, int], parents: dict | None = None) -> dict[bytes, int] | None:
        """``frontier`` and every state its internal steps reach, each with its mask (0: clean;
        else the claims a state on its path broke); ``None`` past the cap."""
        seen = dict(frontier)
        todo = list(frontier)
        internal, after, cap = self.internal, self.after, self.max_states
        if self.unseen:
            plain, unseen = internal, self.unseen

            def internal(s):
                return plain(s) + [(aid, t) for aid, when, step in unseen
                                   if when(s) and (t := step(s)) is not None]
        breaks = self.breaks
        while todo:
            nxt = []
            for s in todo:
                mask = seen[s]
                for aid, t in internal(s):
                    m = mask or after[aid](t)
                    if m and not mask and breaks is not None:
                        breaks[t] = m
                    old = seen.get(t)
                    if old is None:
                        seen[t] = m
                        nxt.append(t)
                        if parents is not None:
                            parents[t] = (s, aid)
                    elif old and not m:  # a clean path to a state known only dirty: clean wins
                        seen[t] = 0
                        nxt.append(t)
                        if parents is not None:
                            parents[t] = (s, aid)
            if len(seen) > cap:
                return None
            todo = nxt
        self.explored += len(seen)
        return seen

    def advance(self, closed: dict[bytes, int], event: Event, parents: dict | None = None) -> dict[bytes, int]:
        """The states ``event`` leads to from ``closed``."""
        out: dict[bytes, int] = {}
        observe, after, want = self.obs.observe, self.after, event.want
        breaks = self.breaks
        for aid in event.aids:
            step = self.steps.get(aid)
            if step is None:
                continue
            for s, mask in closed.items():
                t = step(s)
                if t is None or observe(aid, s, t) != want:
                    continue
                m = mask or after[aid](t)
                if m and not mask and breaks is not None:
                    breaks[t] = m
                old = out.get(t)
                if old is None or (old and not m):
                    out[t] = m
                    if parents is not None:
                        parents[t] = (s, aid)
        return out


def explain(machine: Machine, obs: Observation, events: Iterable[Event], max_states: int = DEFAULT_MAX_STATES,
            search: "Search | None" = None) -> Verdict:
    """Search for a behaviour of ``machine`` that explains ``events`` (see the module docstring).

    ``machine`` checks its claims in every state: build it with the always-invariants only.
    ``search`` reuses the compiled steps of an earlier :class:`Search` over the same machine."""
    search = search or Search(machine, obs, max_states)
    if callable(getattr(search, "explain", None)):  # a search with its own loop (the factored one)
        return search.explain(machine, obs, events, max_states)
    search.obs = obs
    return next(_search(machine, obs, events, max_states, search, live=False))


def _search(machine: Any, obs: Observation, events: Iterable[Event], max_states: int, search: Search,
            live: bool) -> Iterator["Verdict | Maybe"]:
    """The one search over a log's events, for :func:`explain` and :func:`monitor`: the frontier
    closed under internal steps before each event, then stepped by it.  Not ``live`` (explain),
    it yields one verdict, the first finding or ``explained``, each with the first possible
    violation found by then (``maybe``), and stops; the closure after the last event is taken
    only while that possible violation is not known.  ``live`` (monitor), each closure is taken
    as soon as its event is read, so that a possible violation is yielded (a :class:`Maybe`) as
    soon as it is known, and the search goes on past a violation (its claims not reported again)
    and an unexplained event (skipped); only ``undecided`` ends it."""
    hits = machine.hits
    tracker = _MaybeTracker(machine, search)
    maybe = (lambda: None) if live else tracker.done  # live, the Maybe is a finding of its own
    frontier: dict[bytes, int] = {machine.init: hits(machine.init)}
    closed = search.close(frontier) if live else None
    count, peak, said = 0, 1, False
    reported = 0  # the claims already reported violated (live)
    for event in events:
        count += 1
        why = obs.admit(event)
        if not live:
            closed = search.close(frontier)
        tracker.closed(event)  # the closure before the first event is attributed to it
        if closed is None:
            yield Verdict("undecided", count, event, f"more than {max_states:,} states could precede this event "
                          f"(--max-states)", peak=peak, explored=search.explored, maybe=maybe())
            return
        nxt = search.advance(closed, event) if why is None else {}
        tracker.advanced(event)
        if not nxt:
            yield Verdict("unexplained", count, event, why or "no behaviour of the spec explains it", list(closed),
                          peak=peak, explored=search.explored, maybe=maybe())
            if not live:
                return
            continue  # skipped: the search goes on from the states before it
        peak = max(peak, len(closed), len(nxt))
        if len(nxt) > max_states:
            yield Verdict("undecided", count, event, f"more than {max_states:,} states could follow this event "
                          f"(--max-states)", peak=peak, explored=search.explored, maybe=maybe())
            return
        if all(mask & ~reported for mask in nxt.values()):
            v = _violation(machine, count, event, closed, nxt, reported, peak, search.explored, maybe())
            yield v
            if not live:
                return
            reported |= sum(1 << i for i, c in enumerate(machine.claims) if c.name in v.claims)
        if reported:  # each state's claims afresh, less those reported
            nxt = {st: hits(st) & ~reported for st in nxt}
        frontier = nxt
        if live:
            closed = search.close(nxt)
            if closed is not None:
                peak = max(peak, len(closed))
            if not said:
                tracker.closed(None)
                if tracker.answer is not None:
                    said = True
                    yield tracker.answer
    if live:
        return
    tail = ""
    if tracker.pending():  # the closure after the last event belongs to it
        if search.close(frontier) is None:
            tail = (f"more than {max_states:,} states could follow the last event (--max-states): whether "
                    "one of them breaks an invariant is not known")
        tracker.closed(None)
    yield Verdict("explained", count, peak=peak, explored=search.explored, maybe=tracker.done(), tail=tail)


def _violation(machine: Any, count: int, event: Event, closed: dict, nxt: dict, masked: int, peak: int,
               explored: int, maybe: "Maybe | None" = None) -> Verdict:
    """The :class:`Verdict` of a violation at ``event`` (every state of ``nxt`` dirty in a claim
    outside ``masked``): the claims every explanation breaks, or, if none is common to all,
    those some break; ``maybe`` is the first possible violation found by then (:func:`explain`)."""
    common = any_ = 0
    for mask in nxt.values():
        mask &= ~masked
        common = mask if not any_ else common & mask
        any_ |= mask
    names = [c.name for i, c in enumerate(machine.claims) if (common or any_) >> i & 1]
    bad = next(st for st, mask in nxt.items() if mask & (common or any_) == (common or any_)) \
        if common else next(iter(nxt))
    how = "breaks " if common else "breaks one of "
    return Verdict("violation", count, event, "every behaviour that explains the log up to here " + how
                   + ", ".join(names), list(closed), names, bad, peak, explored, maybe)


def monitor(machine: Machine, obs: Observation, events: Iterable[Event], max_states: int = DEFAULT_MAX_STATES,
            search: "Search | None" = None) -> Iterator["Verdict | Maybe"]:
    """The search of :func:`explain`, live: each finding is yielded as soon as the event that
    shows it is read, and the search goes on (``kvproof validate --follow``).

    Yields a :class:`Verdict` per violation (``violation``: the claims it names are not reported
    again; the search goes on with the others, each state's claims re-checked in full), per
    unexplained event (``unexplained``: the event is skipped and the search goes on from the states
    before it), and ``undecided`` (the last: past ``max_states`` the search stops), and the first
    possible violation (:class:`Maybe`) once its searches are done - the closure after each event
    is taken at once, not when the next event comes, so it is known when its event is read.
    ``search`` must be a flat one (the reference or its C steps)."""
    search = search or Search(machine, obs, max_states)
    if callable(getattr(search, "explain", None)):
        raise ValueError("the factored search has its own loop: monitor a log with the flat search")
    search.obs = obs
    yield from _search(machine, obs, events, max_states, search, live=True)


class _MaybeTracker:
    """Finds the first possible violation (:class:`Maybe`) as :func:`explain` runs: it turns the
    search's ``breaks`` on, and after each closure or step reads what it found."""

    def __init__(self, machine: Any, search: Search):
        self.machine, self.search = machine, search
        self.at: Event | None = None
        self.before = False
        self.prev: Event | None = None
        self.answer: Maybe | None = None
        self.breaks: dict[bytes, int] = {}
        search.breaks = self.breaks

    def pending(self) -> bool:
        """Whether the closure after the last event read may still add to the answer."""
        return self.answer is None

    def closed(self, event: Event | None) -> None:
        """After the closure before ``event`` (``None``: after the last event)."""
        if self.answer is not None:
            return
        if self.at is None and self.breaks:
            self.at, self.before = (self.prev, False) if self.prev is not None else (event, True)
        if self.at is not None and self.at is self.prev:  # its searches are done
            self._finish()

    def advanced(self, event: Event) -> None:
        """After ``event``'s step."""
        if self.answer is None and self.at is None and self.breaks:
            self.at = event
        self.prev = event

    def _finish(self) -> None:
        assert self.at is not None
        self.answer = _maybe(self.machine, self.at, self.breaks, self.before)
        self.search.breaks = None

    def done(self) -> Maybe | None:
        """The answer (from what was found so far where the search stopped early)."""
        if self.answer is None and self.at is not None:
            self._finish()
        self.search.breaks = None
        return self.answer


def rebuild(machine: Machine, obs: Observation, events: Iterable[Event], last: Event | None, bad: bytes,
            max_states: int = DEFAULT_MAX_STATES, closed: bool = False,
            search: Search | None = None) -> tuple[list[int], list[bytes]]:
    """The actions and states of a behaviour that explains ``events`` up to ``last`` and ends
    in ``bad`` (a violation's explanation): the search again, keeping each event's parents.
    With ``closed``, ``bad`` may also be a state of the closure under internal steps after
    ``last`` (a possible violation's: :class:`Maybe`); ``last`` ``None`` reads no event.
    ``search`` reuses the compiled steps of the search that found it (its reference moves, which
    keep parents, run; ``max_states`` is then its own): a wide spec's steps take seconds to compile."""
    if search is None:
        search = Search(machine, obs, max_states)
    else:
        search.obs, search.breaks = obs, None
    frontier: dict[bytes, int] = {machine.init: machine.hits(machine.init)}
    layers: list[tuple[dict, dict | None]] = []
    for event in events if last is not None else ():
        obs.admit(event)
        inner: dict = {}
        outer: dict = {}
        closed_ = search.close(frontier, inner)
        assert closed_ is not None
        frontier = search.advance(closed_, event, outer)
        layers.append((inner, outer))
        if event.line == last.line:
            break
    if closed:
        inner = {}
        assert search.close(frontier, inner) is not None
        layers.append((inner, None))
    actions: list[int] = []
    states = [bad]
    s = bad
    for inner, outer in reversed(layers):
        if outer is not None:
            s, aid = outer[s]
            actions.append(aid)
            states.append(s)
        while s in inner:
            s, aid = inner[s]
            actions.append(aid)
            states.append(s)
    assert s == machine.init
    return actions[::-1], states[::-1]


def log_text(base: Any, events: list[dict], **header: Any) -> str:
    """The JSONL text of an event log: the header (the scenario ``base`` inline unless
    ``scenario`` names a built-in, plus ``header``) and one line per event (each given the schema
    version); what a protocol's ``to_events`` returns, written as :func:`read_log` reads it."""
    head = {"v": SCHEMA_VERSION, "log": LOG_FORMAT, "scenario": header.pop("scenario", None) or base.to_data()}
    head.update(header)
    lines = [json.dumps(head, separators=(",", ":"))]
    lines += [json.dumps({"v": SCHEMA_VERSION, **e}, separators=(",", ":")) for e in events]
    return "\n".join(lines) + "\n"
