"""Checkpoints of the explicit engine's breadth-first search: resume after a crash or a kill.

A :class:`Checkpoint` is one scenario's file in the ``--checkpoint`` folder
(``<scenario>.kvckpt``).  While it searches, the Python engine
(:func:`~kvproof.checker.explicit.search.explore`) or the native backend in one thread
(:func:`~kvproof.checker.explicit.native.explore_native`) writes its whole state there every
``every`` seconds at a BFS level boundary: the visited set (the native backend's C table and
packed states as they are), the frontier, the parent links and actions of every state found
(the shortest counterexamples are rebuilt from them), the claims' first hits, the statistics
and the depth, and the state graph when the search keeps it for liveness claims.  Run again
with the same folder, the search starts from that state and ends exactly as an uninterrupted
one (the same verdicts, state counts, depth and counterexamples): a level is a function of the
state before it.  A search that ends removes its file; one the time limit stopped keeps the
checkpoint of its last level boundary (the native backend: the last one it wrote), so that
running again goes on from there.

The file is data, never code: a magic line, one line of JSON (the header: format version,
kvproof version, scenario, the compiled spec's :attr:`~kvproof.model.machine.Machine.fingerprint`,
the limits, visited-set mode, symmetry, claims and engine of the search, the search's numbers, the
byte order, the length of each binary section and the SHA-256 of them all), then the sections
(flat arrays of machine integers and the states' bytes).  It is written atomically
(:func:`~kvproof.checker.atomic.write_bytes_atomic`: a temporary file in the folder, ``fsync``,
``os.replace``), so a kill while writing leaves the previous checkpoint whole.  A file of
another scenario, spec, kvproof version or search, or one truncated or corrupted, is refused
with :class:`CheckpointError` (one line) and left as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvproof.checker.atomic import TEMP_PREFIX, write_bytes_atomic

__all__ = ["CheckpointError", "Checkpoint", "Saved", "FORMAT", "SUFFIX", "DEFAULT_EVERY"]

FORMAT = 1
"""The file format's version (a file of another one is refused)."""
SUFFIX = ".kvckpt"
"""A checkpoint file's suffix."""
DEFAULT_EVERY = 60.0
"""Seconds between two checkpoints of a search (``--checkpoint-every``)."""
_MAGIC = b"KVPROOF-CHECKPOINT\n"
_MAX_HEADER = 1 << 20

# the binary sections, in file order: (name, array typecode)
_SECTIONS = (("frontier", "B"), ("frontier_lengths", "q"), ("visited", "B"), ("visited_lengths", "q"),
             ("fingerprints", "Q"), ("parent", "i"), ("via", "i"),
             ("depths", "i"), ("offsets", "q"), ("targets", "i"), ("aids", "i"), ("expanded", "B"),
             ("table_keys", "Q"), ("table_index", "i"), ("packed", "B"))
_GRAPH = ("depths", "offsets", "targets", "aids", "expanded")
_NATIVE = ("table_keys", "table_index", "packed")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used here: its one-line message says why (the command line
    prints it and exits 3)."""


@dataclass
class Saved:
    """A search's state at a BFS level boundary, as a checkpoint holds it: ``frontier`` (the
    level to expand next, in order), ``visited`` (the visited set's keys: the states in
    ``exact`` mode, or they joined with their one width as ``(bytes, width)``, their 64-bit
    fingerprints in ``fingerprint`` mode; any order), ``parent``
    and ``via`` (per state number: its parent's number and the action that reached it), and
    ``numbers``: ``lo`` (the number of the frontier's first state), ``n_states``, ``depth``,
    ``transitions``, ``quiescent``, ``represented``, ``open`` and ``always`` (claim bits still
    tracked), ``hit_at`` (claim index to state number), ``per_successor`` and ``seconds`` (the
    search's time so far).  A search keeping the state graph (liveness) has its numbering's
    states in number order as ``visited`` (with any a limit left unused past the last state) and
    ``graph``: its ``(depths, offsets, targets, aids, expanded)`` arrays; ``numbers`` then also
    hold ``g_complete``, ``g_reason``, ``complete``, ``reason``, ``outcome`` and ``ended``."""

    frontier: Any
    visited: Any
    parent: array
    via: array
    numbers: dict = field(default_factory=dict)
    graph: tuple | None = None
    native: tuple | None = None
    """The native backend's visited set (its ``numbers`` hold ``native``: ``True``; ``visited``
    is then unused): the open-addressing table's keys and, exact, state numbers, and the packed
    states in number order (flat buffers).  ``frontier`` may be ``(bytes, width)`` too: the
    states joined, all of one width."""


def _join(states: list[bytes]) -> tuple[bytes, array]:
    return b"".join(states), array("q", map(len, states))


def _split(blob: bytes | memoryview, lengths: array) -> list[bytes]:
    out, at = [], 0
    for n in lengths:
        out.append(bytes(blob[at:at + n]))
        at += n
    if at != len(blob):
        raise ValueError("state lengths do not add up")
    return out


def file_name(scenario: str) -> str:
    """The checkpoint file name of scenario ``scenario`` (characters a file name cannot hold
    replaced by ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", scenario) + SUFFIX


class Checkpoint:
    """One search's checkpoint file: ``DIR/<scenario>.kvckpt``, written every ``every`` seconds
    by the search given it.  ``search`` describes the search (scenario, spec fingerprint,
    limits, visited-set mode, symmetry, claims): a file whose description differs is refused."""

    def __init__(self, folder: str | Path, scenario: str, fingerprint: str, search: dict,
                 every: float = DEFAULT_EVERY):
        from kvproof import __version__

        self.path = Path(folder) / file_name(scenario)
        self._prefix = f"{TEMP_PREFIX}{self.path.stem}-"
        self.every = every
        self.expect = {"format": FORMAT, "kvproof": __version__, "scenario": scenario, "spec": fingerprint,
                       "search": search, "byteorder": sys.byteorder}
        self.saves = 0
        self.resumed_from: dict | None = None

    def of_engine(self, kind: str) -> None:
        """The search is ``kind``'s (``python``, or the native backend's with its C code's
        digest), decided when it runs (the default backend): a checkpoint of another is refused."""
        self.expect["search"] = dict(self.expect["search"], engine=kind)

    # -- reading
    def _read(self) -> tuple[dict, dict[str, memoryview]] | None:
        """The header and sections of the file (``None``: there is none); refuses a file that
        is not a whole checkpoint."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CheckpointError(f"{self.path}: cannot read the checkpoint: {e.strerror or e}") from None
        bad = f"{self.path}: not a whole kvproof checkpoint"
        if not data.startswith(_MAGIC):
            raise CheckpointError(f"{bad} (it does not start as one); delete it or use another --checkpoint folder")
        end = data.find(b"\n", len(_MAGIC), len(_MAGIC) + _MAX_HEADER)
        if end < 0:
            raise CheckpointError(f"{bad} (truncated: its header does not end); delete it to start over")
        try:
            header = json.loads(data[len(_MAGIC):end])
            lengths = [int(n) for n in header["lengths"]]
            digest = str(header["sha256"])
        except (ValueError, KeyError, TypeError):
            raise CheckpointError(f"{bad} (its header is not readable); delete it to start over") from None
        body = memoryview(data)[end + 1:]
        if len(lengths) != len(_SECTIONS) or any(n < 0 for n in lengths) or sum(lengths) != len(body):
            raise CheckpointError(f"{bad} (truncated or padded: {len(body):,} bytes after the header, "
                                  f"{sum(lengths):,} expected); delete it to start over")
        if hashlib.sha256(body).hexdigest() != digest:
            raise CheckpointError(f"{bad} (corrupted: its SHA-256 does not match); delete it to start over")
        sections, at = {}, 0
        for (name, _), n in zip(_SECTIONS, lengths):
            sections[name] = body[at:at + n]  # a view: the file is read into memory once
            at += n
        return header, sections

    def _refuse_other(self, header: dict, search: bool = True, any_engine: bool = False) -> None:
        """Refuse a checkpoint of another scenario, spec, kvproof version or (with ``search``)
        search (with ``any_engine``: of any engine)."""
        want = dict(self.expect)
        theirs = header.get("search") if isinstance(header.get("search"), dict) else {}
        if any_engine:
            want["search"] = dict(want["search"], engine=theirs.get("engine"))
        for key, what in (("format", "file format"), ("byteorder", "byte order"), ("scenario", "scenario"),
                          ("kvproof", "kvproof version"), ("spec", "compiled spec"), ("search", "search")):
            if header.get(key) != want[key] and (search or key != "search"):
                if key == "search":
                    ours = want[key]
                    diff = ", ".join(f"{k} {theirs.get(k)!r} (now {ours.get(k)!r})" for k in sorted(ours)
                                     if theirs.get(k) != ours.get(k)) or "its description"
                    why = f"it is of a search with other options: {diff}"
                elif key == "spec":
                    why = "the spec it was made of compiles differently now (another spec or kvproof version)"
                else:
                    why = f"its {what} is {header.get(key)!r}, this run's {want[key]!r}"
                raise CheckpointError(f"{self.path}: refused: {why}; delete it or use another --checkpoint folder")

    def validate(self, search: bool = True, any_engine: bool = False) -> bool:
        """Refuse (:class:`CheckpointError`) a file that this search cannot resume from (without
        ``search``: not whole, or of another scenario, spec or kvproof version; with
        ``any_engine``: whichever engine's search it is); ``True`` when there is one it can,
        ``False`` when there is none."""
        got = self._read()
        if got is None:
            return False
        self._refuse_other(got[0], search, any_engine)
        return True

    def load(self) -> Saved | None:
        """The search state the file holds (``None``: no file), refused as :meth:`validate` does."""
        got = self._read()
        if got is None:
            return None
        header, sec = got
        self._refuse_other(header)
        arrays = {}
        for name, code in _SECTIONS:
            a = array(code)
            try:
                a.frombytes(sec[name])
            except ValueError:
                raise CheckpointError(f"{self.path}: not a whole kvproof checkpoint (section {name} is cut); "
                                      "delete it to start over") from None
            arrays[name] = a
        numbers = header.get("numbers") or {}
        try:
            frontier = _split(sec["frontier"], arrays["frontier_lengths"])
            native = None
            if numbers.get("native"):
                visited: Any = None
                native = tuple(sec[k] if k == "packed" else arrays[k] for k in _NATIVE)
            elif header["search"].get("visited") == "fingerprint":
                visited = arrays["fingerprints"]
            else:
                visited = _split(sec["visited"], arrays["visited_lengths"])
            numbers["hit_at"] = {int(k): int(v) for k, v in numbers["hit_at"].items()}
            n = int(numbers["n_states"])
            graph = None
            if "g_complete" in numbers:
                graph = (*(arrays[k] for k in _GRAPH[:-1]), bytearray(arrays["expanded"]))
                if len(visited) < n or len(arrays["depths"]) != n:
                    raise ValueError("the graph's arrays do not hold one entry per state")
            elif native is None and len(visited) != n:
                raise ValueError("the visited set does not hold every state")
            if not len(arrays["parent"]) == len(arrays["via"]) == n:
                raise ValueError("the parent arrays do not hold one entry per state")
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"{self.path}: not a usable kvproof checkpoint ({e}); delete it to start over") from None
        self.resumed_from = {k: numbers[k] for k in ("n_states", "depth")}
        return Saved(frontier, visited, arrays["parent"], arrays["via"], numbers, graph, native)

    # -- writing
    def due(self, now: float) -> bool:
        """Time for the next checkpoint (``every`` seconds after the last one, or after
        :meth:`start`)."""
        return now >= self._next

    def start(self, now: float | None = None) -> None:
        """The search starts (or resumes) now: the first checkpoint is due ``every`` seconds on."""
        self._next = (time.perf_counter() if now is None else now) + self.every

    def save(self, saved: Saved) -> None:
        """Write ``saved`` atomically, in place of the previous checkpoint
        (:class:`CheckpointError` when it cannot be written: the previous one stays)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"{self.path.parent}: cannot make the checkpoint folder: {e.strerror or e}") from None
        if isinstance(saved.frontier, tuple):
            fblob, width = saved.frontier
            flens = array("q", [width]) * (len(fblob) // max(width, 1))
        else:
            fblob, flens = _join(saved.frontier)
        if saved.native is not None:
            vblob, vlens, fps = b"", array("q"), array("Q")
        elif isinstance(saved.visited, array):
            vblob, vlens, fps = b"", array("q"), saved.visited
        elif isinstance(saved.visited, tuple):  # the states joined, all of one width
            vblob, width = saved.visited
            vlens, fps = array("q", [width]) * (len(vblob) // max(width, 1)), array("Q")
        else:
            (vblob, vlens), fps = _join(saved.visited), array("Q")
        parts = {"frontier": fblob, "frontier_lengths": flens, "visited": vblob, "visited_lengths": vlens,
                 "fingerprints": fps, "parent": saved.parent, "via": saved.via}
        parts.update(zip(_GRAPH, saved.graph or (b"",) * len(_GRAPH)))
        parts.update(zip(_NATIVE, saved.native or (b"",) * len(_NATIVE)))
        chunks = [memoryview(parts[name]).cast("B") for name, _ in _SECTIONS]
        h = hashlib.sha256()
        for c in chunks:
            h.update(c)
        numbers = dict(saved.numbers)
        numbers["hit_at"] = {str(k): v for k, v in numbers.get("hit_at", {}).items()}
        header = dict(self.expect, numbers=numbers, lengths=[len(c) for c in chunks], sha256=h.hexdigest())
        line = json.dumps(header, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        try:
            write_bytes_atomic(self.path, [_MAGIC, line, *chunks], write=_write, prefix=self._prefix)
        except OSError as e:
            raise CheckpointError(f"{self.path}: cannot write the checkpoint: {e.strerror or e}") from None
        self.saves += 1
        self._next = time.perf_counter() + self.every

    def finish(self) -> None:
        """The search ended: remove the checkpoint (a later run starts afresh) and any
        temporary file a killed writer left in the folder."""
        self.path.unlink(missing_ok=True)
        self.clean()

    def clean(self) -> None:
        """Remove the temporary files a writer killed part way left for this checkpoint."""
        for stale in self.path.parent.glob(f"{self._prefix}*{SUFFIX}"):
            stale.unlink(missing_ok=True)


def _write(f, chunks) -> None:
    """Write the chunks to the open file (a seam for the tests, which kill the writer part way)."""
    for c in chunks:
        f.write(c)
