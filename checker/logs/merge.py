"""``kvproof validate --merge OUT LOG...``: the logs of one run's processes (a prefill server's
and a decode server's) made one log, ordered by time, and checked as one.

Why: each process records only its side (``KVPROOF_RECORD`` with ``{pid}``: one log per
process).  Checked on its own, a decode log is unexplained at its first event (its request's
slot was never opened: prefill finished it in the other log), and a prefill log at the first
event that needs decode's (a READ's notification, a heartbeat); ``kvproof validate DIR`` checks
each file of a directory as its own log, so a pair's two logs must be merged first.

How the events are ordered.  An event's ``t`` is the seconds since its log was opened
(:class:`~kvproof.checker.logs.eventlog.EventLog`: ``time.perf_counter``); a log's header may
carry ``t0``, the wall-clock time (``time.time()``, seconds) at which it was opened, which
kvproof's recorder writes.  An event's time is then ``t0 + t``; where no header has ``t0``
(logs split from one process's, or written by hand), ``t`` alone, as one clock.  Events are
merged in that order, ties in the order of the paths given, then of the lines, and each log's
own order is kept even where its times go backwards (a log is one process's sequence).  The
merged log's header is the logs' common header (every key other than ``t0`` must agree: the
same scenario and shape) with the earliest ``t0``; each event keeps its keys, its ``t`` made
relative to the merged origin, and gains ``origin``: ``"PATH:LINE"`` of the line it came from
(the checker ignores keys it does not know, and a finding's event line shows it).

What it does not do: it does not assign request slots across the processes.  Each event names
its slot and generation as the recorder of its process gave them out; where a protocol's
recorder learns them in the process that sees both sides of a request (its ``record`` module
says how), a server that sees one side cannot name them.  So the merge is exact for logs whose
events name the same slots and generations, and the clocks agree as the hosts' wall clocks do.
"""

from __future__ import annotations

import heapq
import json
from typing import Iterable

from kvproof.checker.logs.validate import LogError, read_log

__all__ = ["merge_logs", "CLOCK_KEY", "SOURCE_KEY"]

CLOCK_KEY = "t0"
"""The header key of the wall-clock time (seconds since the epoch) at which a log was opened."""
SOURCE_KEY = "origin"
"""The key a merged event gains: ``"PATH:LINE"`` of the line it came from."""


def merge_logs(paths: Iterable[str], out: str) -> tuple[int, int]:
    """Write the merge of the logs at ``paths`` (module docstring) to ``out``: ``(logs, events)``.
    :class:`~kvproof.checker.logs.validate.LogError` (one line) for a log that cannot be read, a
    line that is not an event with a number ``t``, or headers that differ."""
    paths = list(paths)
    if len(paths) < 2:
        raise LogError(f"--merge: at least two logs to merge, got {len(paths)}")
    headers, rows_of = [], []
    try:
        for p in paths:
            header, rows = read_log(p)
            headers.append(header)
            rows_of.append(rows)
        common = {k: v for k, v in headers[0].items() if k != CLOCK_KEY}
        for p, h in zip(paths[1:], headers[1:]):
            other = {k: v for k, v in h.items() if k != CLOCK_KEY}
            if other != common:
                key = next(k for k in sorted(set(common) | set(other)) if common.get(k) != other.get(k))
                raise LogError(f"{p}:header: {key}: {other.get(key)!r}, but {paths[0]} has {common.get(key)!r} "
                               f"(merged logs are one run: the same header)")
        clocks = [h.get(CLOCK_KEY) for h in headers]
        for p, c in zip(paths, clocks):
            if c is not None and (not isinstance(c, (int, float)) or isinstance(c, bool)):
                raise LogError(f"{p}:header: {CLOCK_KEY}: expected the wall-clock time in seconds, got {c!r}")
        have = [c for c in clocks if c is not None]
        if have and len(have) < len(clocks):
            p = paths[clocks.index(None)]
            raise LogError(f"{p}:header: no {CLOCK_KEY}, which the other logs have: their times cannot be compared")
        origin = min(have) if have else 0.0

        def timed(k: int, path: str, rows) -> Iterable[tuple]:
            base = (clocks[k] or 0.0) - origin
            last = float("-inf")
            for no, raw in rows:
                t = raw.get("t")
                if not isinstance(t, (int, float)) or isinstance(t, bool):
                    raise LogError(f"{path}:{no}: t: expected the time in seconds (a number), got {t!r}")
                last = max(last, base + t)  # a log's own order is kept
                yield last, k, no, raw

        merged = heapq.merge(*[timed(k, p, r) for k, (p, r) in enumerate(zip(paths, rows_of))],
                             key=lambda item: item[:3])
        head = dict(common)
        if have:
            head[CLOCK_KEY] = origin
        count = 0
        try:
            f = open(out, "w", encoding="utf-8")
        except OSError as e:
            raise LogError(f"--merge {out}: cannot write: {e.strerror or e}") from None
        with f:
            f.write(json.dumps(head, separators=(",", ":")) + "\n")
            for when, k, no, raw in merged:
                line = dict(raw)
                line["t"] = round(when, 6)
                line[SOURCE_KEY] = f"{paths[k]}:{no}"
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
                count += 1
        return len(paths), count
    finally:
        for rows in rows_of:
            rows.close()
