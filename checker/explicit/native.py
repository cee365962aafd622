"""The native backend of the explicit engine: the spec compiled to C, a BFS level at a time.

:func:`~kvproof.model.ccompiler.c_source` turns a spec into C; this module compiles it with the
system C compiler (``$CC``, else ``cc``) into a shared library the first time it is needed,
caches it under :func:`cache_dir` keyed by a hash of the source and the compiler command, and
loads it with :mod:`ctypes` (the calls are one per chunk of a BFS level, so their cost does not
matter and no binding package is needed).  :class:`NativeMachine` is a
:class:`~kvproof.model.machine.Machine` that also carries the loaded code; :func:`explore_native`
is :func:`~kvproof.checker.explicit.search.explore` over it with the frontier and each level's
successors kept as contiguous ``(n, width)`` byte arrays: the successor function, the claim
checks, the fingerprints and the visited set (:class:`NativeVisited`, open addressing) run in
C; Python only walks the levels.  The search's outcome (states, transitions, depth,
quiescent states, which claims hit where, the path to each) is the Python engine's.

Symmetry reduction maps each level's successors to their representatives with the
canonicaliser's Python function (:func:`explore_native`).  Not yet: several workers, and
keeping the state graph (liveness) - the caller refuses the first and
:func:`~kvproof.checker.explicit.search.explore` runs the Python engine for the second.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from kvproof.checker.explicit.search import (ClaimBook, Exploration, Limits, StateGraph, _add_edges_numpy, _ended,
                                             graph_searchable)
from kvproof.checker.results import Stats
from kvproof.checker.explicit.native_store import NativeVisited, Scratch, grown_table, join_rows, take_rows  # noqa: F401 - re-exported
from kvproof.checker.explicit.visited import collision_probability
from kvproof.checker.explicit.sizes import cache_dir
from kvproof.model.ccompiler import MAX_CLAIMS, CSource, c_source
from kvproof.model.compiler import RangeCheckFailed
from kvproof.model.machine import Machine

__all__ = ["NativeUnavailable", "NativeCode", "NativeVisited", "NativeMachine", "native_code", "cache_dir", "c_compiler", "explore_native",
           "explore_native_graph"]

_FLAGS = ("-std=gnu99", "-shared", "-fPIC")
_CHUNK = 1 << 15  # states expanded per call between limit checks
_BUFFER = 1 << 16  # successors a thread's buffer first holds (at least one state's worth)
_MAX_BUFFER = 1 << 18  # successors it may grow to hold: past that a chunk's successors are copied out


class NativeUnavailable(Exception):
    """The native backend cannot run here (no C compiler, or it failed): one line saying why."""


def c_compiler() -> list[str] | None:
    """The C compiler command (``$CC`` split like a shell would, else ``cc``), or ``None``
    when it is not on the path."""
    cmd = shlex.split(os.environ.get("CC") or "cc")
    if not cmd or shutil.which(cmd[0]) is None:
        return None
    return cmd


def _compile(cc: list[str], opt: str, text: str, where: Path, lib: Path, timeout: float | None = None) -> None:
    """Compile ``text`` in a fresh folder under ``where`` and move the library to ``lib`` in one
    rename (several processes compiling the same model at once each write their own file; the
    last rename wins and every one of them is whole); ``timeout``: seconds the compiler may take."""
    with tempfile.TemporaryDirectory(dir=where, prefix="build-") as tmp:
        src, out = Path(tmp) / "model.c", Path(tmp) / "model.so"
        src.write_text(text)
        try:
            run = subprocess.run([*cc, opt, *_FLAGS, "-o", str(out), str(src)], capture_output=True, text=True,
                                 timeout=None if timeout is None else max(timeout, 0.01))
        except subprocess.TimeoutExpired:
            raise NativeUnavailable(f"the time limit ran out while {cc[0]} compiled the model") from None
        except OSError as e:
            raise NativeUnavailable(f"the C compiler {cc[0]} did not run: {e.strerror or e}") from None
        if run.returncode != 0:
            first = next((ln for ln in run.stderr.splitlines() if "error" in ln), run.stderr.strip()[:200])
            raise NativeUnavailable(f"the C compiler {cc[0]} failed on the generated model: {first}")
        os.replace(out, lib)


_PRIVATE: list[str] = []  # this process's own build folder, when the cache cannot be written


def _private_dir() -> Path:
    """A build folder of this process alone (removed when it exits), for when the cache folder
    cannot be created or written: the model is then compiled every time."""
    if not _PRIVATE:
        import atexit

        _PRIVATE.append(tempfile.mkdtemp(prefix="kvproof-native-"))
        atexit.register(shutil.rmtree, _PRIVATE[0], True)
    return Path(_PRIVATE[0])


def _library(text: str, opt: str = "-O1", deadline: float | None = None) -> tuple[Path, float]:
    """The shared library of C source ``text``, compiled (at optimisation level ``opt``, and
    stopped at ``deadline``, a ``time.perf_counter()`` reading) unless cached, and the seconds
    the compiler took (0 from the cache).  A cache folder that cannot
    be created or written is not an error: the library is then built in a private folder."""
    cc = c_compiler()
    if cc is None:
        raise NativeUnavailable(f"no C compiler found ({os.environ.get('CC') or 'cc'} is not on the path): "
                                "install one (e.g. gcc) or use --backend python")
    key = hashlib.sha256("\0".join([*cc, opt, *_FLAGS, text]).encode()).hexdigest()[:24]
    name = f"kv_{key}.so"
    where = cache_dir()
    if (where / name).exists():
        return where / name, 0.0
    started = time.perf_counter()
    timeout = None if deadline is None else deadline - started
    try:
        where.mkdir(parents=True, exist_ok=True)
        _compile(cc, opt, text, where, where / name, timeout)
    except OSError:  # the cache is read-only, full or not a folder: build where this process can
        where = _private_dir()
        if not (where / name).exists():
            _compile(cc, opt, text, where, where / name, None if deadline is None else deadline - time.perf_counter())
    return where / name, time.perf_counter() - started


_P, _I = ctypes.c_void_p, ctypes.c_int64


class NativeCode:
    """A spec's compiled C (:func:`~kvproof.model.ccompiler.c_source`), loaded: its level
    functions over ``(n, width)`` uint8 arrays; ``opt`` is the compiler's optimisation flag,
    ``deadline`` when the compiler is stopped (:class:`NativeUnavailable`)."""

    def __init__(self, source: CSource, opt: str = "-O1", deadline: float | None = None):
        self.source = source
        self.width = source.width
        self.n_actions = source.n_actions
        started = time.perf_counter()
        self.path, self.compile_seconds = _library(source.text, opt, deadline)
        lib = ctypes.CDLL(str(self.path))
        self.load_seconds = time.perf_counter() - started
        self._expand = lib.kv_expand
        self._expand.argtypes = [_P, _I, _I, _P, _I, _P, _P, _P, _P]
        self._expand.restype = _I
        for name in ("kv_hits", "kv_qhits"):
            f = getattr(lib, name)
            f.argtypes = [_P, _I, _P, _P]
            f.restype = _I
        self._hits, self._qhits = lib.kv_hits, lib.kv_qhits
        self._pending = lib.kv_pending
        self._pending.argtypes = [_I, _P, _I, _P, _P]
        self._pending.restype = _I
        self._keys = lib.kv_keys
        self._keys.argtypes = [_P, _I, _P]
        self._keys.restype = None
        self.insert = lib.kv_insert
        self.insert.argtypes = [_P, _P, _I, _P, _I, _P, _I, _P, _P, _P]
        self.insert.restype = _I
        self.packed_width = source.packed_width
        self._unpack = lib.kv_unpack
        self._unpack.argtypes = [_P, _I, _P]
        self._unpack.restype = None
        self._pack = lib.kv_pack
        self._pack.argtypes = [_P, _I, _P]
        self._pack.restype = _I
        self.rehash = lib.kv_rehash
        self.rehash.argtypes = [_P, _P, _I, _P, _P, _I]
        self.rehash.restype = None
        self.prep = lib.kv_prep  # the sharded visited set's (kvproof.checker.explicit.native_workers)
        self.prep.argtypes = [_P, _I, _I, _P, _P, _P, _I, _P]
        self.prep.restype = _I
        self.insert_shard = lib.kv_insert_shard
        self.insert_shard.argtypes = [_P, _P, _I, _P, _P, _P, _P, _I, _I, _P, _P]
        self.insert_shard.restype = _I
        self.number_shard = lib.kv_number_shard
        self.number_shard.argtypes = [_P, _P, _P, _P, _I, _I, _I, _P, _P]
        self.number_shard.restype = None
        self._scratch = self.scratch()

    def scratch(self) -> "Scratch":
        """Buffers for one thread's calls (each thread running these functions at once needs its own)."""
        return Scratch(max(_BUFFER, self.source.max_successors), max(self.width, 1))

    def _fail(self, scratch: "Scratch") -> None:
        k, value = int(scratch.err[0]), int(scratch.err[1])
        scratch.err[:] = 0
        raise RangeCheckFailed(self.source.checks[k - 1], value)

    def pieces(self, states: np.ndarray, start: int, stop: int, quiet: np.ndarray,
               scratch: "Scratch | None" = None) -> Iterator[tuple[np.ndarray, np.ndarray, bool]]:
        """Successors of ``states[start:stop]`` a buffer at a time: ``(successors, codes, more)``
        per buffer filled (codes as :meth:`expand`'s; ``quiet`` as there), each a view of
        ``scratch``'s buffers (this thread's; by default the code's own) that the next one
        overwrites when ``more`` (the buffer was full: more successors follow); the last
        (``more`` false) stays valid until the next call with the same buffers.  What a caller
        that uses each piece at once takes instead of copying them out (:meth:`expand`)."""
        b = scratch or self._scratch
        j, made, w, room, given = start, 0, b.out.shape[1], self.source.max_successors, False
        while j < stop:
            if len(b.out) - made < room:  # full: grow the buffers, or hand their successors over
                if len(b.out) < _MAX_BUFFER:
                    b.grow(made)
                else:
                    yield b.out[:made], b.codes[:made], True
                    made, given = 0, True
            nxt = self._expand(states.ctypes.data, stop, j, b.out.ctypes.data + made * w, len(b.out) - made,
                               b.codes.ctypes.data + made * 8, quiet.ctypes.data, b.made.ctypes.data,
                               b.err.ctypes.data)
            if nxt < 0:
                self._fail(b)
            made += int(b.made[0])
            j = nxt
        if made or not given:
            yield b.out[:made], b.codes[:made], False

    def expand(self, states: np.ndarray, start: int, stop: int, quiet: np.ndarray,
               scratch: "Scratch | None" = None) -> tuple[list, list]:
        """Successors of ``states[start:stop]``: lists of ``(m, width)`` successor arrays and of
        their codes (``position * n_actions + action id``, positions in ``states``); ``quiet``
        gets 1 at every position with no successor.  ``scratch``: this thread's buffers; the
        last arrays are views of them, valid until the next call with the same buffers
        (:meth:`pieces`, the pieces a full buffer held copied out)."""
        outs, codes = [], []
        for out, code, more in self.pieces(states, start, stop, quiet, scratch):
            outs.append(out.copy() if more else out)
            codes.append(code.copy() if more else code)
        return outs, codes

    def _masks(self, f: Callable, states: np.ndarray, out: np.ndarray | None, scratch: "Scratch | None") -> np.ndarray:
        b = scratch or self._scratch
        masks = np.zeros(len(states), np.uint64) if out is None else out
        if len(states) and f(states.ctypes.data, len(states), masks.ctypes.data, b.err.ctypes.data) < 0:
            self._fail(b)
        return masks

    def hits(self, states: np.ndarray, out: np.ndarray | None = None, scratch: "Scratch | None" = None) -> np.ndarray:
        """Per state, the bits of the ``always`` claims that hit (written to ``out`` when given)."""
        return self._masks(self._hits, states, out, scratch)

    def pending(self, claim: int, states: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
        """Per state, the bits of liveness claim number ``claim``'s obligations pending there,
        and their labels (as :func:`~kvproof.model.compiler.compile_pending`); ``None`` when that
        claim is not compiled (more than 64 obligations)."""
        labels = self.source.obligations.get(claim)
        if labels is None:
            return None
        masks = np.zeros(len(states), np.uint64)
        b = self._scratch
        if len(states) and self._pending(claim, states.ctypes.data, len(states), masks.ctypes.data,
                                         b.err.ctypes.data) < 0:
            self._fail(b)
        return masks, labels

    def quiescent_hits(self, states: np.ndarray, out: np.ndarray | None = None,
                       scratch: "Scratch | None" = None) -> np.ndarray:
        """Per state, the bits of the ``quiescent`` claims that hit (whether or not it has a successor)."""
        return self._masks(self._qhits, states, out, scratch)

    def unpack(self, packed: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The ``(n, width)`` states of ``(n, packed_width)`` packed ones (the exact store's form;
        written to ``out`` when given)."""
        if out is None:
            out = np.empty((len(packed), max(self.width, 1)), np.uint8)
        if len(packed):
            self._unpack(np.ascontiguousarray(packed).ctypes.data, len(packed), out.ctypes.data)
        return out

    def pack(self, states: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The ``(n, packed_width)`` packed form of ``(n, width)`` states (:meth:`unpack` undoes
        it; written to ``out`` when given)."""
        if out is None:
            out = np.empty((len(states), self.packed_width), np.uint8)
        if len(states) and self._pack(np.ascontiguousarray(states).ctypes.data, len(states), out.ctypes.data) < 0:
            raise RuntimeError("the native backend's packed states do not hold a value: a bug, please report it "
                               "(--backend python searches without packing)")
        return out

    def keys(self, states: np.ndarray) -> np.ndarray:
        """A 64-bit fingerprint per state (the fingerprint visited set's key)."""
        keys = np.empty(len(states), np.uint64)
        if len(states):
            self._keys(states.ctypes.data, len(states), keys.ctypes.data)
        return keys


def native_code(machine: Machine, opt: str = "-O1", deadline: float | None = None) -> NativeCode:
    """The C code of ``machine``'s spec and claims, compiled (or found in the cache; the
    compiler stopped at ``deadline``) and loaded: what :func:`explore_native` runs for an
    existing machine; :class:`NativeUnavailable` when that cannot be done here."""
    too_wide = machine.spec.layout.too_wide()
    if too_wide:
        raise NativeUnavailable(f"the native backend keeps one byte a state slot: {too_wide}")
    if len(machine.claims) > MAX_CLAIMS:
        raise NativeUnavailable(f"the native backend checks at most {MAX_CLAIMS} claims at once, "
                                f"not {len(machine.claims)}")
    return NativeCode(c_source(machine.spec, machine.claims), opt, deadline)


@dataclass
class NativeMachine(Machine):
    """A :class:`~kvproof.model.machine.Machine` with its C code compiled and loaded as well
    (``native``, compiled at optimisation level ``opt``); :class:`NativeUnavailable` when that
    cannot be done here."""

    opt: str = "-O1"
    native: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.native = native_code(self, self.opt)

    def search(self, limits: Limits = Limits(), claims: list[int] | None = None, stop_when_all_hit: bool = False,
               progress: Callable[[Stats], None] | None = None, visited: str = "exact",
               rows: bool = False, canonicaliser: Any = None, workers: int = 1) -> Exploration:
        """:func:`explore_native` of this machine (what :func:`~kvproof.checker.explicit.search.explore`
        calls for it)."""
        return explore_native(self, limits, claims, stop_when_all_hit, progress, visited, rows,
                              canonicaliser=canonicaliser, workers=workers)

    def search_graph(self, limits: Limits = Limits(), claims: list[int] | None = None,
                     progress: Callable[[Stats], None] | None = None, rows: bool = False) -> Exploration:
        """:func:`explore_native_graph` of this machine (what
        :func:`~kvproof.checker.explicit.search.explore` calls for it with ``edges``, when
        :func:`graph_searchable` says it can)."""
        return explore_native_graph(self, limits, claims, progress, rows)


def _rows(states: np.ndarray) -> list[bytes]:
    """Each row of a ``(n, width)`` array as ``bytes``."""
    return [bytes(r) for r in states.view(f"V{states.shape[1]}").ravel().tolist()] if len(states) else []


def _canonical(states: np.ndarray, canon: Callable[[bytes], bytes], width: int) -> np.ndarray:
    """Each row of ``states`` replaced by ``canon`` of it, ``canon`` called once per distinct row."""
    uniq, back = np.unique(states.view(f"V{width}").ravel(), return_inverse=True)
    reps = b"".join(map(canon, [bytes(r) for r in uniq.tolist()]))
    return np.frombuffer(reps, np.uint8).reshape(len(uniq), width)[back.ravel()]


def checkpoint_kind(code: NativeCode) -> str:
    """What a checkpoint of the native search with ``code`` is of: ``native`` and a digest of
    the C code (a checkpoint of other C code is refused)."""
    return "native " + hashlib.sha256(code.source.text.encode()).hexdigest()[:24]


def _saved(frontier: np.ndarray, store: NativeVisited, parent: array, via: array, numbers: dict) -> Any:
    """The native search's state at a level boundary, as a checkpoint writes it."""
    from kvproof.checker.explicit.checkpoint import Saved

    table = (store.tkeys, store.tidx, store.store[:store.size] if store.exact else b"")
    front = np.ascontiguousarray(frontier)
    return Saved((front.tobytes(), front.shape[1]), None, parent, via if via.typecode == "i" else array("i", via),
                 numbers, native=table)


def _via_type(n_actions: int) -> str:
    """The ``array`` type code that holds every action id and -1 (the initial state's) in the
    fewest bytes."""
    return "b" if n_actions <= 1 << 7 else "h" if n_actions <= 1 << 15 else "i"


def explore_native_graph(machine: Machine, limits: Limits = Limits(), claims: list[int] | None = None,
                         progress: Callable[[Stats], None] | None = None, rows: bool = False,
                         code: NativeCode | None = None) -> Exploration:
    """:func:`~kvproof.checker.explicit.search.explore` with ``edges`` (the state graph liveness
    claims need) run by the machine's native code (or ``code``) in this thread, exact, for the
    arguments :func:`graph_searchable` accepts: the same outcome, the same graph (states
    numbered alike, the same edges in the same order), as ``tests/test_native.py`` checks.  The C
    visited set gives every successor's state number, new or seen, which are the edges'
    targets."""
    if not graph_searchable(limits):
        raise ValueError("the native search keeping the graph takes no state or depth limit")
    code = code if code is not None else machine.native
    return _explore(machine, limits, claims, False, progress, "exact", rows, code, None, None, time.perf_counter(),
                    None, graph=True)


def explore_native(
    machine: Machine,
    limits: Limits = Limits(),
    claims: list[int] | None = None,
    stop_when_all_hit: bool = False,
    progress: Callable[[Stats], None] | None = None,
    visited: str = "exact",
    rows: bool = False,
    code: NativeCode | None = None,
    canonicaliser: Any = None,
    workers: int = 1,
    checkpoint: Any = None,
) -> Exploration:
    """:func:`~kvproof.checker.explicit.search.explore` (without symmetry reduction or the state
    graph) run by the machine's native code (or ``code``, :func:`native_code` of a plain
    :class:`~kvproof.model.machine.Machine`); the same arguments mean the same, and the outcome
    is the same.  With symmetry reduction (``canonicaliser``, a
    :class:`~kvproof.model.canon.Canonicaliser`) the successors are computed in C and mapped to
    their representatives by the canonicaliser's Python function, between the C expansion and
    the C visited set: the same representatives as the Python engine, so the same paths.
    With ``workers`` > 1 that many threads run the C functions at once
    (:mod:`.native_workers`), with the same outcome (the same state numbers too).  A
    ``checkpoint`` (:class:`~kvproof.checker.explicit.checkpoint.Checkpoint`; one thread, no
    ``rows``) is resumed from and written every ``checkpoint.every`` seconds at a level boundary
    as the Python engine does, its C visited set saved as it is (its table and packed states);
    a search the time limit stopped keeps the last checkpoint written before (the C set already
    holds part of the level it stopped in)."""
    if checkpoint is not None and (workers > 1 or rows):
        raise ValueError("a checkpointed native search runs in one thread and keeps no rows")
    start = time.perf_counter()
    code = code if code is not None else machine.native
    canon = canonicaliser.canon if canonicaliser is not None else None
    orbit = canonicaliser.orbit if canonicaliser is not None else None
    if workers > 1:
        from kvproof.checker.explicit.native_workers import Crew

        crew = Crew(code, workers)
        try:
            return _explore(machine, limits, claims, stop_when_all_hit, progress, visited, rows, code, canon, orbit,
                            start, crew)
        finally:
            crew.close()
    return _explore(machine, limits, claims, stop_when_all_hit, progress, visited, rows, code, canon, orbit, start,
                    None, checkpoint)


def _explore(machine: Machine, limits: Limits, claims: list[int] | None, stop_when_all_hit: bool,
             progress: Callable[[Stats], None] | None, visited: str, rows: bool, code: NativeCode,
             canon: Callable[[bytes], bytes] | None, orbit: Callable[[bytes], int] | None, start: float,
             crew: Any, checkpoint: Any = None, graph: bool = False) -> Exploration:
    """:func:`explore_native`'s search, its C calls made by ``crew`` (``None``: this thread);
    with ``graph`` (:func:`explore_native_graph`: this thread, exact, no limit but time, no
    checkpoint), keeping every edge as the Python engine's search does."""
    if crew is None:
        store = NativeVisited(code, visited, max(code.width, 1))
        hits, qhits, unpack, pack = code.hits, code.quiescent_hits, code.unpack, code.pack

        def pieces(states: np.ndarray, lo: int, hi: int, quiet: np.ndarray) -> Iterator[tuple[list, list]]:
            # each buffer of successors deduplicated as it fills: none copied out
            return (([o], [c]) for o, c, _ in code.pieces(states, lo, hi, quiet))
        chunk = _CHUNK
        take, join = take_rows, join_rows
    else:
        from kvproof.checker.explicit.native_workers import ShardedVisited

        store = ShardedVisited(code, visited, max(code.width, 1), crew)
        hits, qhits, unpack, pack = crew.hits, crew.quiescent_hits, crew.unpack, crew.pack

        def pieces(states: np.ndarray, lo: int, hi: int, quiet: np.ndarray) -> list[tuple[list, list]]:
            return [crew.expand(states, lo, hi, quiet)]
        take, join = crew.take, crew.join
        chunk = _CHUNK * crew.workers
    book = ClaimBook(machine.claims, claims)
    n_actions = code.n_actions
    width = max(code.width, 1)

    init = np.frombuffer(machine.init, np.uint8).reshape(1, width).copy()
    store.add(init)
    kept = [init] if rows and not store.exact else None  # exact: the store keeps them in order
    parent = array("i", [-1])
    via = array("i" if graph else _via_type(n_actions), [-1])  # the graph's: the Python engine's arrays
    stats = Stats(visited=visited, workers=1 if crew is None else crew.workers)
    if graph:  # the Python engine's graph arrays: per state its depth, first edge and whether expanded
        depths, offsets, targets, aids, expanded = array("i", [0]), array("q", [0]), array("i"), array("i"), bytearray()
        graph_states = [machine.init]  # as bytes, a level at a time (within the time checks, not all at the end)
    max_states, max_depth = limits.max_states, limits.max_depth
    deadline = limits.deadline(start)

    represented = orbit(machine.init) if orbit is not None else 0
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is None:
        h = int(hits(init)[0]) & book.always
        if h:
            book.record(h, 0)

    complete, reason = True, ""
    frontier = init
    lo, n_states, depth = 0, 1, 0
    timed_out = False
    clock = start  # when the search's time counts from (earlier for a resumed search)
    if saved is not None:  # resume at the level boundary the checkpoint holds
        num = saved.numbers
        frontier = np.frombuffer(b"".join(saved.frontier), np.uint8).reshape(-1, width).copy()
        parent, via = saved.parent, array(via.typecode, saved.via)
        store.restore(*saved.native, num["n_states"])
        lo, n_states, depth = num["lo"], num["n_states"], num["depth"]
        stats.transitions, stats.quiescent, represented = num["transitions"], num["quiescent"], num["represented"]
        book.open, book.always, book.hit_at = num["open"], num["always"], dict(num["hit_at"])
        clock = start - num["seconds"]
    if checkpoint is not None:
        checkpoint.start(start)
    while len(frontier):
        if stop_when_all_hit and not book.open:
            complete, reason = False, "stopped once every claim asked for had hit"
            break
        if checkpoint is not None and checkpoint.due(time.perf_counter()):
            checkpoint.save(_saved(frontier, store, parent, via, dict(
                lo=lo, n_states=n_states, depth=depth, transitions=stats.transitions, quiescent=stats.quiescent,
                represented=represented, open=book.open, always=book.always, hit_at=dict(book.hit_at),
                per_successor=0.0, seconds=time.perf_counter() - clock, native=True)))
        # -- expand one level in C, a chunk at a time, and deduplicate each chunk's successors
        # against everything seen at once (in order, so the first occurrence of a state is the
        # one the whole level's deduplication would keep): only the new states and their codes
        # outlive a chunk, not the level's successors
        quiet_flags = np.zeros(len(frontier), np.uint8)
        edge_codes: list = []  # graph: every successor's code and state number, in order
        edge_ids: list = []
        fresh_codes: list = []
        fresh_states: list = []  # fingerprint mode: the new states, packed (exact: they are in the store)
        level_fresh = 0
        timed_out = False
        for c0 in range(0, len(frontier), chunk):
            for outs, cs in pieces(frontier, c0, min(c0 + chunk, len(frontier)), quiet_flags):
                stats.transitions += sum(map(len, outs))
                if canon is not None:
                    outs = [_canonical(o, canon, width) if len(o) else o for o in outs]
                if crew is None and not store.exact:  # the new states come packed from the C
                    f, packed = store.add_packed(outs[0])
                    fresh_states.append(packed)
                elif graph:  # every successor's number: the edges' targets (the codes are a view: copied)
                    ids = np.empty(len(outs[0]), np.int32)
                    f = store.add(outs[0], ids=ids)
                    edge_codes.append(cs[0].copy())
                    edge_ids.append(ids)
                else:
                    f = store.add_all(outs)
                    if not store.exact:
                        fresh_states.append(pack(take(outs, f)))
                fresh_codes.append(take(cs, f))
                level_fresh += f.size
            now = time.perf_counter()
            if deadline is not None and now > deadline:
                timed_out = True
                break
            if progress is not None and len(frontier) > chunk:
                stats.states, stats.depth, stats.seconds = n_states, depth, now - clock
                progress(stats)
        if graph and not timed_out:  # the level's edges, as the Python engine appends them
            level_codes = np.concatenate(edge_codes) if edge_codes else np.zeros(0, np.int64)
            level_ids = np.concatenate(edge_ids) if edge_ids else np.zeros(0, np.int32)
            _add_edges_numpy(level_ids, level_codes, n_actions, 1 << 62, len(frontier), offsets, targets, aids,
                             expanded)
            edge_codes = edge_ids = level_codes = level_ids = None
        qpos = np.flatnonzero(quiet_flags)
        stats.quiescent += int(qpos.size)
        quiet: list[tuple[int, int]] = []
        if book.open & book.quiescent and qpos.size:
            qm = qhits(frontier[qpos]) & np.uint64(book.open & book.quiescent)
            quiet = [(int(p), int(m)) for p, m in zip(qpos[qm != 0].tolist(), qm[qm != 0].tolist())]
        frontier = qpos = None  # expanded: its memory goes before the new level is joined
        # time is up part way through the level: end now, keeping none of its successors (the
        # Python engine does not deduplicate them; the search is incomplete anyway)
        keep = 0 if timed_out else level_fresh
        cut = ""
        if keep and max_depth is not None and depth >= max_depth:
            cut = f"depth limit {max_depth} reached"
            keep = 0
        if max_states is not None and n_states + keep > max_states:
            cut = f"state limit {max_states} reached"
            keep = max_states - n_states
        if cut:
            complete, reason = False, cut
        codes_kept = np.concatenate(fresh_codes)[:keep] if fresh_codes else np.zeros(0, np.int64)
        fresh_codes = []
        par, aid = np.divmod(codes_kept, n_actions)
        if store.exact:
            new_states = unpack(store.store[n_states:n_states + keep])
        else:
            joined = join(fresh_states, keep) if fresh_states else np.zeros((0, code.packed_width), np.uint8)
            fresh_states = []
            new_states = unpack(joined)
            joined = None
        fresh = np.arange(keep)
        # -- claims, in discovery order (quiescent hits interleaved by expansion position); the
        # loop runs only on a level where something hits
        masks = hits(new_states) & np.uint64(book.always) if book.always else None
        if quiet or (masks is not None and masks.any()):
            mask_l = masks.tolist() if masks is not None else []
            keep = book.level(par.tolist(), quiet, mask_l.__getitem__, n_states, lo, stop_when_all_hit)
            if keep < fresh.size:
                complete, reason = False, "stopped once every claim asked for had hit"
                fresh, par, aid, new_states = fresh[:keep], par[:keep], aid[:keep], new_states[:keep]
        parent.frombytes((par + lo).astype(np.int32).tobytes())
        via.frombytes(aid.astype(via.typecode).tobytes())  # numpy reads the type code as array does
        if graph and not timed_out:
            depths.frombytes(np.full(len(new_states), depth + 1, np.int32).tobytes())
            graph_states.extend(_rows(new_states))
        if kept is not None:
            kept.append(new_states)
        if orbit is not None:
            represented += sum(map(orbit, _rows(new_states)))
        lo, n_states = n_states, n_states + len(new_states)
        if timed_out:
            complete, reason = False, limits.time_reason
            break
        if not complete:
            break
        frontier = new_states
        if len(frontier):
            depth += 1

    if checkpoint is not None and not timed_out:  # ended: a later run starts afresh
        checkpoint.finish()
    if crew is not None:
        stats.worker_cpu = tuple(round(c, 3) for c in crew.cpu)
    ended = _ended(stats, n_states, depth, clock, represented, orbit)
    ended.bytes_per_state = (store.nbytes + parent.itemsize * len(parent) + via.itemsize * len(via)) / n_states
    if visited == "fingerprint":
        ended.collision_probability = collision_probability(ended.states)
    found = None
    if rows and not graph:
        found = _rows(code.unpack(store.store[:n_states]) if store.exact else np.concatenate(kept))
    if graph:
        found = graph_states
        kept_graph = _graph_of(found, depths, offsets, targets, aids, parent, via, expanded, complete, reason, clock,
                               len(machine.init))
        names = [c.name for c in machine.claims]
        table: list[np.ndarray] = []  # the states unpacked, once, for the first claim that asks

        def pending(claim: str) -> tuple[np.ndarray, list[str]] | None:  # the obligations, in C
            if not table:
                table.append(code.unpack(store.store[:n_states]))
            return code.pending(names.index(claim), table[0])
        kept_graph.pending = pending
        for s in (ended, kept_graph.stats):  # the Python engine's measure of its graph
            s.bytes_per_state = kept_graph.stats.bytes_per_state
        return Exploration(ended, complete, reason, book.hit_at, parent, via, rows=found if rows else None,
                           graph=kept_graph)
    return Exploration(ended, complete, reason, book.hit_at, parent, via, canonical=canon is not None, rows=found)


def _graph_of(states: list[bytes], depths: array, offsets: array, targets: array, aids: array, parent: array,
              via: array, expanded: bytearray, complete: bool, reason: str, clock: float, width: int) -> StateGraph:
    """The :class:`~kvproof.checker.explicit.search.StateGraph` of a search keeping its edges,
    its states found but never expanded (time ran out) given no edge: as the Python engine
    closes its graph."""
    n_states = len(states)
    missing = n_states + 1 - len(offsets)
    offsets.extend([len(targets)] * missing)
    expanded.extend(bytes(missing))
    nbytes = width * n_states + depths.itemsize * len(depths) + offsets.itemsize * len(offsets) + \
        len(expanded) + targets.itemsize * len(targets) + aids.itemsize * len(aids)
    ends = np.frombuffer(offsets, np.int64)
    quiescent = int(np.count_nonzero(np.frombuffer(bytes(expanded), np.uint8).astype(bool) & (ends[1:] == ends[:-1])))
    stats = Stats(states=n_states, transitions=len(targets), depth=max(depths), quiescent=quiescent,
                  represented=n_states, seconds=time.perf_counter() - clock)
    stats.bytes_per_state = (nbytes + parent.itemsize * len(parent) + via.itemsize * len(via)) / n_states
    return StateGraph(states, offsets, targets, aids, parent, via, depths, stats, complete,
                      "" if complete else reason, expanded)
