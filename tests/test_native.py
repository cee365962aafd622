"""The native backend (the spec compiled to C, :mod:`kvproof.checker.explicit.native`) has the reference
semantics: successor sets with action ids, quiescence and claim hits agree with the reference
interpreter on random specs (:mod:`.randspec`) and with the batched reference on every reachable
state of catalogue scenarios; its search has the Python engine's outcome (states, transitions,
depth, quiescent states, where each claim first hit, the paths) under every limit, and the
whole catalogue's pinned state counts and safety verdicts (``traces/expected.toml``)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvproof.checker.explicit.backends import AutoBackend, NativeBackend, PythonBackend
from kvproof.checker.explicit.backends import auto as auto_backend
from kvproof.checker.explicit.search import Limits, explore
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin, builtin_names

from .agree import native_disagreements
from .conftest import a_third, reachable, sampled, tier
from .randspec import build, specs, states

native = pytest.importorskip("kvproof.checker.explicit.native")
if native.c_compiler() is None:  # pragma: no cover - every CI image has one
    pytest.skip("no C compiler", allow_module_level=True)

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                       HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """Compiled models go to a directory of this test session, not the user's cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("KVPROOF_CACHE_DIR", str(tmp_path_factory.mktemp("native-cache")))
    yield
    mp.undo()


_MACHINES: dict[str, object] = {}


def native_of(name: str):
    """The native machine of a built-in scenario (compiled once per test process, at -O0: the
    command-line test runs the default -O2)."""
    if name not in _MACHINES:
        _MACHINES[name] = native.NativeMachine(builtin(name).build(), opt="-O0")
    return _MACHINES[name]


# -- random specs against the reference interpreter ----------------------------------------------------
def _agree_on_random_specs(data, states_per_spec: int = 6) -> None:
    plan = data.draw(specs(), label="spec")
    spec = build(plan)
    m = native.NativeMachine(spec, opt="-O0")  # the C is the same; -O0 compiles a random spec fastest
    init = tuple(spec.init_state())
    drawn = [init] + [data.draw(states(plan, spec), label="state") for _ in range(states_per_spec)]
    problems = native_disagreements(m, [bytes(s) for s in drawn])
    assert not problems, "; ".join(problems[:5])
    # the search too, exact (the packed store) and fingerprinted: the Python engine's outcome
    from kvproof.model.compiler import RangeCheckFailed

    for visited in ("exact", "fingerprint"):
        runs = []
        for machine in (Machine(spec), m):
            try:
                runs.append(_outcome(explore(machine, Limits(max_states=3000), visited=visited)))
            except RangeCheckFailed as e:
                runs.append(str(e))
        assert runs[0] == runs[1], visited
    # the search keeping the graph (liveness claims): the Python engine's graph, edge for edge
    if isinstance(runs[0], tuple) and runs[0][5]:  # (complete within 3,000 states: small enough to keep)
        assert _graph_outcome(explore(m, edges=True)) == _graph_outcome(explore(Machine(spec), edges=True))


def _graph_outcome(ex):
    """Everything a search keeping its edges gives: the outcome and the graph, array by array."""
    g = ex.graph
    return (_outcome(ex), g.states, list(g.offsets), list(g.targets), list(g.aids), list(g.parent), list(g.via),
            list(g.depth), bytes(g.expanded), g.complete, g.reason,
            (g.stats.states, g.stats.transitions, g.stats.depth, g.stats.quiescent, g.stats.represented))


@settings(max_examples=10, **_SETTINGS)
@given(data=st.data())
def test_native_successors_and_claims_agree_with_the_reference_on_random_specs(data):
    _agree_on_random_specs(data)


@pytest.mark.slow
@settings(max_examples=30, **_SETTINGS)
@given(data=st.data())
def test_native_agrees_with_the_reference_on_thirty_more_random_specs(data):
    _agree_on_random_specs(data)


@pytest.mark.thorough
@settings(max_examples=500, **_SETTINGS)
@given(data=st.data())
def test_native_agrees_with_the_reference_on_hundreds_of_random_specs(data):
    _agree_on_random_specs(data)


def test_the_comparison_catches_a_c_emitter_that_differs(monkeypatch):
    """A C emitter whose ``<`` were ``<=`` (or whose negation were dropped) is reported."""
    from kvproof.model import ccompiler
    from kvproof.model.compiler import _c

    monkeypatch.setattr(ccompiler.COps, "lt", lambda self, a, b: self._bind(f"({_c(a).src} <= {_c(b).src})"))
    m = native.NativeMachine(builtin("incident").build(), opt="-O0")
    problems = native_disagreements(m, reachable("incident"), batched=True)
    assert problems and problems[0].startswith("native")
    monkeypatch.undo()
    monkeypatch.setattr(ccompiler.COps, "not_", lambda self, x: _c(x))
    m = native.NativeMachine(builtin("incident").build(), opt="-O0")
    assert native_disagreements(m, reachable("incident"), batched=True)


def test_the_comparison_catches_pending_obligations_that_differ(monkeypatch):
    """A liveness claim's obligations compiled to C with one bit dropped are reported."""
    name = "ack-before-register"
    m = native.NativeMachine(builtin(name).build(), opt="-O0")
    assert any(c.kind == "liveness" for c in m.claims)
    assert not native_disagreements(m, reachable(name), batched=True)
    real = type(m.native).pending

    def dropped(self, claim, states):
        masks, labels = real(self, claim, states)
        return masks & ~np.uint64(1), labels

    import numpy as np

    monkeypatch.setattr(type(m.native), "pending", dropped)
    problems = native_disagreements(m, reachable(name), batched=True)
    assert any("pending" in p for p in problems), problems


# -- every reachable state of catalogue scenarios against the batched reference ---------------------------
@pytest.mark.parametrize("name", ["incident", "abort-race"])
def test_native_agrees_on_every_reachable_state_of_small_scenarios(name):
    # --thorough: every state; the test command: a fixed sample of 12,000 of a larger scenario's
    problems = native_disagreements(native_of(name), sampled(name, tier(12_000, 10**9)), batched=True)
    assert not problems, f"{name}: " + "; ".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("name", a_third(builtin_names(), keep=("v0.5.22", "incident")))
def test_native_agrees_on_every_reachable_state_of_the_catalogue(name):
    # --thorough: every state of every scenario; the test command: a third of them, 12,000 states
    # of the larger ones (v0.5.22 has 402,707; a larger sample costs seconds of random walks)
    problems = native_disagreements(native_of(name), sampled(name, tier(12_000, 10**9)), batched=True)
    assert not problems, f"{name}: " + "; ".join(problems)


# -- the search: the Python engine's outcome -------------------------------------------------------------
def _outcome(ex):
    s = ex.stats
    return (s.states, s.transitions, s.depth, s.quiescent, s.represented, ex.complete, ex.reason, ex.hit_at,
            {c: ex.path(sid) for c, sid in ex.hit_at.items()}, list(ex._parent), list(ex._via))


CASES = [
    dict(),
    dict(visited="fingerprint"),
    dict(limits=Limits(max_states=500)),
    dict(limits=Limits(max_depth=7)),
    dict(limits=Limits(max_seconds=1.0, started=-1e9)),  # the budget ran out long ago: stops in the first level
    dict(claims=[0, 3], stop_when_all_hit=True),
    dict(claims=[], rows=True),
    dict(visited="fingerprint", rows=True),
]


@pytest.mark.parametrize("name", ["abort-race", "incident"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(c) or "default")
def test_the_native_search_has_the_python_engines_outcome(name, case):
    nm = native_of(name)
    ref = explore(Machine(nm.spec), **case)
    got = explore(nm, **case)
    assert _outcome(got) == _outcome(ref)
    assert got.rows == ref.rows
    assert got.stats.visited == ref.stats.visited


def test_a_search_that_outgrows_the_visited_tables_first_size_has_the_python_engines_outcome():
    """tp2x2 (34,171 states) makes the C table and its state store grow several times."""
    nm = native_of("tp2x2")
    ref, got = explore(Machine(nm.spec)), explore(nm)
    assert _outcome(got) == _outcome(ref)
    assert got.stats.states == 34171


def test_the_batched_visited_set_flags_the_first_occurrences_a_dict_would():
    """``kv_insert`` takes its candidates 16 at a time (keys first, slots prefetched, then
    probed in order): over batches of lengths that are not multiples of 16, with repeats inside a
    16-candidate batch, across batches and across calls, it flags exactly the first occurrences
    (a dict's answer), packs the new states as ``pack`` does, stores them in that order (exact),
    and leaves every key reachable from its home slot without an empty slot between (the table
    grows from 4,096 slots past three quarters full, so probes run long)."""
    import numpy as np

    nm = native_of("tp2x2")
    code, width = nm.native, nm.native.width
    rows = np.frombuffer(b"".join(explore(nm, rows=True).rows), np.uint8).reshape(-1, width)
    rng = np.random.default_rng(11)
    for mode in ("exact", "fingerprint"):
        store, seen, order = native.NativeVisited(code, mode, width), {}, []
        for size in (1, 15, 17, 33, 700, 3001, 9999):
            cand = np.ascontiguousarray(rows[rng.integers(0, len(rows), size=size)])
            cand[1::7] = cand[::7][: len(cand[1::7])]  # a repeat one place after its first
            want = [j for j, r in enumerate(map(bytes, cand)) if r not in seen and not seen.setdefault(r, 0)]
            if mode == "fingerprint":
                fresh, packed = store.add_packed(cand)
                assert (packed == code.pack(cand[fresh])).all()
            else:
                fresh = store.add(cand)
            assert fresh.tolist() == want
            order += [bytes(cand[j]) for j in want]
        assert store.size == len(seen) == len(order) > 3 * 4096 // 4 and len(store.tkeys) > 4096
        if mode == "exact":
            assert [bytes(r) for r in code.unpack(store.store[:store.size])] == order
        keys, mask = store.tkeys, len(store.tkeys) - 1
        full = np.flatnonzero(keys)
        assert len(full) == len(order)
        for i in full.tolist():
            home = int(keys[i]) & mask
            assert all(keys[(home + d) & mask] for d in range((i - home) & mask))


def test_quiescent_claims_and_stopping_once_all_hit_match_the_python_engine():
    """Every claim, quiescent ones included, tracked on their own with the search stopped once
    they hit: the first hit of each (and the state count at the stop) is the Python engine's."""
    nm = native_of("abort-race")
    for i, c in enumerate(nm.claims):
        if c.kind == "liveness":
            continue
        ref = explore(Machine(nm.spec), claims=[i], stop_when_all_hit=True)
        got = explore(nm, claims=[i], stop_when_all_hit=True)
        assert _outcome(got) == _outcome(ref), c.name


def overflow_spec(codes: int = 2):
    """A spec whose one action counts x up past its ``codes`` codes: a range check fails."""
    from kvproof.model.framework import Spec, action, invariant
    from kvproof.model.layout import Domain, Field

    class Overflow(Spec):
        """x counts up past its codes."""

        def build_fields(self):
            return [Field("x", (), Domain("v", codes))]

        def domain(self, name):  # pragma: no cover - no parameters
            raise KeyError(name)

        @action("up")
        def up(self, s, n):
            """x + 1."""
            n.x = s.x + 1

        @invariant()
        def fine(self, s):
            """Always."""
            return s.ops.const(True)

    return Overflow()


def test_a_failing_range_check_raises_the_python_engines_error():
    from kvproof.model.compiler import RangeCheckFailed

    with pytest.raises(RangeCheckFailed) as ref:
        explore(Machine(overflow_spec()))
    with pytest.raises(RangeCheckFailed) as got:
        explore(native.NativeMachine(overflow_spec(), opt="-O0"))
    assert str(got.value) == str(ref.value)


def _o0(monkeypatch):
    """Compile at -O0 in this test (the C is the same; it compiles fastest)."""
    library = native._library
    monkeypatch.setattr(native, "_library", lambda text, opt="-O1", deadline=None: library(text, "-O0", deadline))


def _catalogue_case(name, tmp_path, monkeypatch):
    """``check_scenario`` of a catalogue scenario on the native backend: its pinned state counts
    and verdicts (``traces/expected.toml``), and every trace it writes byte for byte the stored
    one under ``traces/`` (what ``kvproof check`` with the Python engine wrote)."""
    from pathlib import Path

    from kvproof.checker.expected import read_expected
    from kvproof.checker.explicit.run import check_scenario

    _o0(monkeypatch)
    root = Path(__file__).resolve().parents[1] / "traces"
    stored = read_expected(root / "expected.toml")[name]
    report = check_scenario(builtin(name), traces_dir=tmp_path, backend=NativeBackend())
    assert report.backend == "native"
    s = report.stats
    assert (s.states, s.transitions, s.depth, report.complete) == \
        (stored["states"], stored["transitions"], stored["depth"], stored["complete"])
    assert {c.claim: c.verdict for c in report.claims} == stored["verdicts"]
    written = sorted(tmp_path.iterdir())
    assert len(written) == sum(c.trace_path is not None for c in report.claims)
    for path in written:
        assert path.read_bytes() == (root / path.name).read_bytes(), path.name


@pytest.mark.parametrize("name", ["incident", "abort-race", "ack-before-register"])
def test_native_checks_keep_the_pinned_counts_verdicts_and_traces_of_a_few_scenarios(name, tmp_path, monkeypatch):
    _catalogue_case(name, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", a_third(builtin_names(), keep=("v0.5.22", "incident")))
def test_the_catalogue_keeps_its_pinned_counts_verdicts_and_traces_under_the_native_backend(name, tmp_path):
    """The native search of every scenario's safety claims and witnesses (the liveness claims'
    graph is the Python engine's on every backend): the pinned counts and verdicts, and every
    counterexample written byte for byte as stored."""
    from pathlib import Path

    from kvproof.checker.expected import read_expected
    from kvproof.checker.explicit.run import trace_of
    from kvproof.checker.traces import write_trace

    root = Path(__file__).resolve().parents[1] / "traces"
    stored = read_expected(root / "expected.toml")[name]
    nm = native_of(name)
    tracked = [i for i, c in enumerate(nm.claims) if c.kind != "liveness" and c.name in stored["verdicts"]]
    ex = explore(nm, claims=tracked)
    assert (ex.stats.states, ex.stats.transitions, ex.stats.depth, ex.complete) == \
        (stored["states"], stored["transitions"], stored["depth"], stored["complete"])
    for i in tracked:
        c = nm.claims[i]
        hit = i in ex.hit_at
        verdict = ("violated" if c.kind == "invariant" else "reached") if hit else \
            ("verified" if c.kind == "invariant" else "unreachable")
        assert verdict == stored["verdicts"][c.name], c.name
        if hit and c.kind == "invariant":
            path = write_trace(trace_of(builtin(name), nm, ex, i), tmp_path)
            assert path.read_bytes() == (root / path.name).read_bytes(), path.name


# -- the default backend: native where it applies, else the Python engine, with the same outcome ---------
def _report_outcome(r):
    return (r.stats.states, r.stats.transitions, r.stats.depth, r.complete, r.reason,
            [(c.claim, c.verdict, c.depth) for c in r.claims])


def test_the_default_searches_a_model_past_the_probe_natively_with_the_python_engines_outcome(
        tmp_path, monkeypatch):
    from kvproof.checker.explicit import run

    _o0(monkeypatch)
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 500)  # abort-race: 2,958 states
    ref = run.check_scenario(builtin("abort-race"), traces_dir=tmp_path / "py", backend=PythonBackend())
    got = run.check_scenario(builtin("abort-race"), traces_dir=tmp_path / "auto")
    assert (got.backend, got.backend_note, ref.backend) == ("native", "", "python")
    assert _report_outcome(got) == _report_outcome(ref)
    py, auto = sorted((tmp_path / "py").iterdir()), sorted((tmp_path / "auto").iterdir())
    assert [p.name for p in py] == [p.name for p in auto] and py
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(py, auto))


@pytest.mark.parametrize("live", [False, True], ids=["safety", "liveness"])
def test_a_model_an_earlier_search_found_large_skips_the_probe_with_the_same_outcome(live, tmp_path, monkeypatch):
    from kvproof.checker.explicit import sizes
    from kvproof.checker.explicit.backends import Search

    _o0(monkeypatch)
    monkeypatch.setenv("KVPROOF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 500)  # abort-race: 2,958 states
    sc = builtin("abort-race")
    machine = Machine(sc.build())
    search = Search(sc, machine)

    def run():
        ex, used, _ = (AutoBackend().run_graph if live else AutoBackend().run)(search)
        return (_graph_outcome(ex) if live else _outcome(ex)), used

    first, used = run()
    assert used == "native" and sizes.known(machine) == 2958
    # the Python engine's probe does not run again: the search is native at once, with the same outcome
    with monkeypatch.context() as m:
        m.setattr(PythonBackend, "explore", lambda *a, **k: pytest.fail("probed again"))
        m.setattr(PythonBackend, "run_graph", lambda *a, **k: pytest.fail("probed again"))
        assert run() == (first, "native")
    # a count below the probe's limit, or a file that is not a count, leaves the probe to decide
    for text in ("400", "not a number"):
        (tmp_path / "cache" / "sizes" / machine.fingerprint).write_text(text)
        assert sizes.known(machine) == (400 if text == "400" else None)
        calls = []
        with monkeypatch.context() as m:
            real = PythonBackend.run_graph if live else PythonBackend.explore
            m.setattr(PythonBackend, "run_graph" if live else "explore",
                      lambda *a, **k: calls.append(1) or real(*a, **k))
            assert run() == (first, "native") and calls == [1]


def test_a_size_that_cannot_be_kept_is_skipped_and_leaves_no_file(tmp_path, monkeypatch):
    from kvproof.checker.explicit import sizes

    machine = Machine(builtin("abort-race").build())
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("KVPROOF_CACHE_DIR", str(blocker))
    sizes.remember(machine, 2958)  # no error: the count is only a speed-up
    assert sizes.known(machine) is None and sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    monkeypatch.setenv("KVPROOF_CACHE_DIR", str(tmp_path / "ok"))
    sizes.remember(machine, 2958)
    assert sizes.known(machine) == 2958 and [p.name for p in (tmp_path / "ok" / "sizes").iterdir()] == [
        machine.fingerprint]


def test_the_default_keeps_a_small_model_on_the_python_engine_and_says_why(monkeypatch):
    from kvproof.checker.explicit import run

    monkeypatch.setattr(native, "_library", lambda *a: pytest.fail("compiled C for a small model"))
    got = run.check_scenario(builtin("abort-race"))
    assert got.backend == "python" and "within 20,000 states" in got.backend_note
    assert got.stats.states == 2958


@pytest.mark.parametrize("limits,states,reason", [
    (Limits(max_states=700), 700, "state limit 700 reached"),  # at most the probe: the Python engine alone
    (Limits(max_states=1500), 1500, "state limit 1500 reached"),  # past the probe: native, the user's limit
    (Limits(max_depth=5), None, "depth limit 5 reached"),
])
def test_the_default_under_limits_has_the_python_engines_outcome(limits, states, reason, monkeypatch):
    from kvproof.checker.explicit import run

    _o0(monkeypatch)
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 1000)
    ref = run.check_scenario(builtin("abort-race"), limits, backend=PythonBackend())
    got = run.check_scenario(builtin("abort-race"), limits)
    assert _report_outcome(got) == _report_outcome(ref)
    assert got.reason == reason and (states is None or got.stats.states == states)


def test_the_default_falls_back_to_the_python_engine_without_a_c_compiler(monkeypatch, tmp_path):
    from kvproof.checker.explicit import run

    monkeypatch.setenv("CC", "no-such-compiler-kvproof")
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 500)
    got = run.check_scenario(builtin("abort-race"), traces_dir=tmp_path)
    ref = run.check_scenario(builtin("abort-race"), backend=PythonBackend())
    assert got.backend == "python" and got.backend_note.startswith("native backend unavailable: no C compiler")
    assert _report_outcome(got) == _report_outcome(ref)


def test_a_compiler_that_outruns_the_time_limit_is_stopped(monkeypatch, tmp_path):
    """The budget is the whole command's: a compile still running at the deadline is killed and
    the claims are inconclusive, as the Python engine leaves them when time is up."""
    import time

    from kvproof.checker.explicit import run

    slow = tmp_path / "slow-cc"
    slow.write_text("#!/bin/sh\nsleep 20\n")
    slow.chmod(0o755)
    monkeypatch.setenv("CC", str(slow))
    monkeypatch.setenv("KVPROOF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 500)
    began = time.perf_counter()
    got = run.check_scenario(builtin("abort-race"), Limits(max_seconds=1.5))
    assert time.perf_counter() - began < 6
    assert got.backend == "python" and "time limit ran out" in got.backend_note
    assert got.reason == "time limit 1.5 s reached" and {c.verdict for c in got.claims} <= {"inconclusive", "violated"}


def test_the_default_with_workers_probes_in_processes_then_searches_natively_in_threads(monkeypatch):
    from kvproof.checker.explicit import parallel, run

    _o0(monkeypatch)
    probes = []
    search = parallel.explore_parallel
    monkeypatch.setattr(parallel, "explore_parallel", lambda *a, **k: probes.append(a[1]) or search(*a, **k))
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 10)
    got = run.check_scenario(builtin("incident"), backend=AutoBackend(2))
    assert probes == [2] and (got.backend, got.backend_note) == ("native", "")
    assert got.stats.workers == 2
    assert _report_outcome(got) == _report_outcome(run.check_scenario(builtin("incident"), backend=PythonBackend()))


# -- symmetry reduction: C successors, the canonicaliser's representatives -------------------------------
def _symmetric_scenarios():
    from .symmetric import unordered

    pages = unordered("abort-race", "AB")  # a searched second sort (decode pages) as well
    cfg = pages.config
    pages = replace(pages, config=replace(cfg, decode_pages=2, engine=replace(cfg.engine, any_free_pages=True,
                                                                            ordered_arrivals=True)))
    return {"requests": unordered("abort-race", "AAB"), "requests-and-pages": pages}


_REDUCED: dict[str, tuple] = {}


def _reduced(which: str):
    """The machine, canonicaliser and C code of a symmetric scenario (once per test process)."""
    from kvproof.checker.explicit.symmetry import reduction_for

    if which not in _REDUCED:
        m = Machine(_symmetric_scenarios()[which].build())
        _REDUCED[which] = m, reduction_for(m).canonicaliser, native.native_code(m, "-O0")
    return _REDUCED[which]


@pytest.mark.parametrize("which,case", [
    pytest.param("requests", dict(), marks=pytest.mark.slow),  # abort-race AAB: 5-12 s
    *[("requests-and-pages", c) for c in (dict(), dict(visited="fingerprint"), dict(limits=Limits(max_states=300)),
                                          dict(claims=[0, 3], stop_when_all_hit=True))]],
    ids=lambda c: c if isinstance(c, str) else ",".join(c) or "default")
def test_a_reduced_native_search_has_the_python_engines_outcome(which, case):
    m, canon, code = _reduced(which)
    assert canon is not None
    ref = explore(m, canonicaliser=canon, **case)
    got = native.explore_native(m, code=code, canonicaliser=canon, **case)
    assert _outcome(got) == _outcome(ref) and got.canonical
    assert ref.stats.represented > ref.stats.states or case


def test_symmetry_under_the_native_backend_keeps_verdicts_and_writes_the_same_traces(tmp_path, monkeypatch):
    from kvproof.checker.explicit import run

    _o0(monkeypatch)
    sc = _symmetric_scenarios()["requests-and-pages"]
    ref = run.check_scenario(sc, symmetry=True, traces_dir=tmp_path / "py", backend=PythonBackend())
    got = run.check_scenario(sc, symmetry=True, traces_dir=tmp_path / "c", backend=NativeBackend())
    assert got.backend == "native" and ref.symmetry == got.symmetry != ""
    assert _report_outcome(got) == _report_outcome(ref) and got.stats.represented == ref.stats.represented
    py, c = sorted((tmp_path / "py").iterdir()), sorted((tmp_path / "c").iterdir())
    assert [p.name for p in py] == [p.name for p in c] and py
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(py, c))


@pytest.mark.parametrize("name", ["abort-race", "incident", "tp2x2", "sglang-0.5.23-shared-room-abort"])
@pytest.mark.parametrize("case", [dict(), dict(claims=[]), dict(claims=[0, 3]),
                                  dict(limits=Limits(max_seconds=1.0, started=-1e9))],
                         ids=["all", "none", "two", "out-of-time"])
def test_the_native_search_keeping_the_graph_has_the_python_engines_graph(name, case):
    nm = native_of(name)
    assert _graph_outcome(explore(nm, edges=True, **case)) == _graph_outcome(explore(Machine(nm.spec), edges=True, **case))


@pytest.mark.parametrize("case", [dict(limits=Limits(max_states=500)), dict(limits=Limits(max_depth=7)),
                                  dict(claims=[0, 3], stop_when_all_hit=True)], ids=["states", "depth", "stop"])
def test_the_search_keeping_the_graph_under_what_the_native_one_does_not_take_is_the_python_engines(case, monkeypatch):
    nm = native_of("abort-race")
    monkeypatch.setattr(native, "_explore", lambda *a, **k: pytest.fail("the native search ran"))
    assert _graph_outcome(explore(nm, edges=True, **case)) == _graph_outcome(explore(Machine(nm.spec), edges=True, **case))


def test_the_native_graph_is_not_the_python_one_when_an_edge_is_wrong(monkeypatch):
    # the comparison above is strict: one edge's target moved is caught
    nm = native_of("abort-race")
    ref = _graph_outcome(explore(Machine(nm.spec), edges=True))
    got = explore(nm, edges=True)
    got.graph.targets[7] = (got.graph.targets[7] + 1) % len(got.graph.states)
    assert _graph_outcome(got) != ref


def test_liveness_claims_past_the_probe_are_searched_natively_with_the_python_engines_verdicts(tmp_path, monkeypatch):
    from kvproof.checker.explicit import run

    name = "ack-before-register"
    assert any(c.kind == "liveness" for c in builtin(name).build().claims)
    _o0(monkeypatch)
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 10)
    got = run.check_scenario(builtin(name), traces_dir=tmp_path / "auto")
    ref = run.check_scenario(builtin(name), traces_dir=tmp_path / "py", backend=PythonBackend())
    assert (got.backend, got.backend_note, ref.backend) == ("native", "", "python")
    assert _report_outcome(got) == _report_outcome(ref)
    assert any(c.kind == "liveness" and c.verdict == "violated" for c in ref.claims)
    py, auto = sorted((tmp_path / "py").iterdir()), sorted((tmp_path / "auto").iterdir())
    assert [p.name for p in py] == [p.name for p in auto] and py
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(py, auto))


def test_liveness_claims_of_a_small_model_stay_on_the_python_engine(monkeypatch):
    from kvproof.checker.explicit import run

    monkeypatch.setattr(native, "_library", lambda *a: pytest.fail("compiled C for a small liveness check"))
    got = run.check_scenario(builtin("ack-before-register"))
    assert got.backend == "python" and got.backend_note.startswith("the search ended within 20,000 states")


def test_liveness_claims_with_workers_keep_the_workers_and_search_the_graph_natively(monkeypatch):
    # forked workers keep no graph: the safety search runs on them (then C threads), and the
    # graph is searched apart, past the probe in C in one thread, with the Python engine's verdicts
    from kvproof.checker.explicit import run

    _o0(monkeypatch)
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 10)
    calls = []
    real = native.explore_native_graph
    monkeypatch.setattr(native, "explore_native_graph", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = run.check_scenario(builtin("ack-before-register"), backend=AutoBackend(workers=2))
    ref = run.check_scenario(builtin("ack-before-register"), backend=PythonBackend())
    assert got.stats.workers == 2 and got.backend == "native" and calls == [1]
    assert _report_outcome(got) == _report_outcome(ref)


def test_a_cache_folder_that_cannot_be_written_compiles_privately(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("KVPROOF_CACHE_DIR", str(blocker / "cache"))
    text = c_text("incident")
    lib, seconds = native._library(text, "-O0")
    assert seconds > 0 and lib.exists() and not str(lib).startswith(str(tmp_path))
    import ctypes

    assert ctypes.CDLL(str(lib)).kv_expand  # a whole library


def c_text(name: str) -> str:
    """The C source of a built-in scenario."""
    from kvproof.model.ccompiler import c_source

    m = Machine(builtin(name).build())
    return c_source(m.spec, m.claims).text


def test_processes_compiling_one_model_at_once_share_one_whole_library(tmp_path, monkeypatch):
    """Three compiles of one model into one empty cache at once (as xdist workers do): one
    library, loadable, and no build folder left behind."""
    import ctypes
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("KVPROOF_CACHE_DIR", str(tmp_path))
    text = c_text("abort-race")
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda _: native._library(text, "-O0"), range(3)))
    assert len({lib for lib, _ in got}) == 1
    assert [p.name for p in tmp_path.iterdir()] == [got[0][0].name]
    assert ctypes.CDLL(str(got[0][0])).kv_insert


# -- the command line ---------------------------------------------------------------------------------------
def _kvproof(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    code = "import sys; from kvproof.checker.cli.commands import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_check_with_the_native_backend_prints_the_python_engines_table():
    python = _kvproof("check", "incident", "--no-traces", "--json")
    c = _kvproof("check", "incident", "--no-traces", "--json", "--backend", "native")
    assert c.returncode == python.returncode == 0, c.stderr
    import json

    def table(out):
        return [(r["name"], r["complete"], r["stats"]["states"], r["stats"]["transitions"], r["stats"]["depth"],
                 [(x["invariant"], x["verdict"], x["depth"]) for x in r["results"]])
                for r in json.loads(out)["scenarios"]]

    assert table(c.stdout) == table(python.stdout)


def test_check_with_native_workers_prints_the_python_engines_table():
    import json

    def table(out):
        return [(r["name"], r["complete"], r["stats"]["states"], r["stats"]["transitions"], r["stats"]["depth"],
                 r["stats"]["workers"], [(x["invariant"], x["verdict"], x["depth"]) for x in r["results"]])
                for r in json.loads(out)["scenarios"]]

    python = _kvproof("check", "incident", "--no-traces", "--json", "--workers", "2", "--backend", "python")
    c = _kvproof("check", "incident", "--no-traces", "--json", "--workers", "2", "--backend", "native")
    assert c.returncode == python.returncode == 0, c.stderr
    assert table(c.stdout) == table(python.stdout) and table(c.stdout)[0][5] == 2


def test_no_c_compiler_is_one_line_not_a_traceback(tmp_path):
    c = _kvproof("check", "incident", "--no-traces", "--backend", "native",
                 env={"CC": "no-such-compiler-kvproof", "KVPROOF_CACHE_DIR": str(tmp_path)})
    assert c.returncode == 3
    assert c.stderr.count("\n") == 1 and "no C compiler" in c.stderr and "Traceback" not in c.stderr


def test_help_loads_neither_the_native_backend_nor_ctypes():
    from .test_startup import PROBE

    heavy = ("kvproof.checker.explicit.native", "kvproof.model.ccompiler", "ctypes")
    for argv in (["--help"], ["check", "--help"]):
        done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=heavy)], capture_output=True,
                              text=True, timeout=60, check=True)
        assert done.stdout.split("\n")[-2] == "0 []", done.stdout + done.stderr


def test_the_command_says_when_the_default_fell_back_for_want_of_a_compiler(monkeypatch, capsys):
    import json

    from kvproof.checker.explicit import run
    from kvproof.checker.cli.commands import main

    monkeypatch.setenv("CC", "no-such-compiler-kvproof")
    monkeypatch.setattr(auto_backend, "PROBE_STATES", 500)
    assert main(["check", "abort-race", "--no-traces"]) == 0
    assert "Python engine (native backend unavailable: no C compiler found" in capsys.readouterr().out
    assert main(["check", "abort-race", "--no-traces", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["scenarios"][0]["stats"]
    assert stats["backend"] == "python" and stats["backend_note"].startswith("native backend unavailable")
    monkeypatch.delenv("CC")
    _o0(monkeypatch)
    assert main(["check", "abort-race", "--no-traces", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["scenarios"][0]["stats"]
    assert (stats["backend"], stats["backend_note"], stats["states"]) == ("native", "", 2958)
