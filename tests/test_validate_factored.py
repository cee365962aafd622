"""The factored search of ``kvproof validate`` (``checker/logs/validate_factored.py``) against the
reference (``checker/logs/validate.py``'s :class:`Search`), property-based: on random, mutated and
hazard logs of the vLLM and SGLang specs, after every event the factored frontier's states are
exactly the reference's clean states (those some path of clean states reaches), and the verdict
is the reference's (kind, event, claims, the state shown, the possible states); a mutant of the
footprints (a step that ignores the groups it reads) is caught on a known log.  And the reference
over a wide layout (states as tuples, past 255 slots) against the same spec's byte layout."""

import functools
import random
from itertools import product

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kvproof.checker.logs.validate import Checked, Search, explain
from kvproof.checker.logs.validate_factored import Block, FactoredSearch, FactoredUnavailable, suits
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.sglang import validate as sv
from kvproof.spec.vllm import validate as vv

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@functools.lru_cache(maxsize=None)
def _vllm(name: str, slots: int | None):
    sc = builtin(name)
    if slots is not None:
        sc = vv.stream_scenario(sc, slots, slots, slots)
    spec = sc.build()
    machine = Checked.invariants(spec)
    return Machine(spec), machine, FactoredSearch(machine, vv.observation(machine), 1_000_000)


@functools.lru_cache(maxsize=None)
def _sglang(name: str):
    from kvproof.spec.sglang.simulate import simulation_scenario

    spec = simulation_scenario(builtin(name), 6, 2).build()
    machine = Checked.invariants(spec)
    return Machine(spec), machine, FactoredSearch(machine, sv.observation(machine), 1_000_000)


def _mutate(events, rng):
    """``events`` with one random change (or none): dropped, swapped, duplicated, a block moved."""
    out = [dict(e) for e in events]
    if not out:
        return out
    kind = rng.choice(["none", "drop", "swap", "dup", "block"])
    i = rng.randrange(len(out))
    if kind == "drop":
        del out[i]
    elif kind == "swap" and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], out[i]
    elif kind == "dup":
        out.insert(i, dict(out[i]))
    elif kind == "block":
        for key in ("block", "src", "dest", "page"):
            if key in out[i]:
                out[i][key] = max(0, out[i][key] + rng.choice((-1, 1)))
                break
    return out


def _decoded(obs, events):
    out = []
    for i, e in enumerate(events):
        try:
            out.append(obs.decode(i + 2, dict(e)))
        except ValueError:  # a change that is bad input (exit 3), not the search's
            break
    return out


def _compare(machine, obs_of, factored, events):
    """The clean frontier after every event and the verdict, factored against the reference."""
    ref = Search(machine, obs_of(machine), 1_000_000)
    fr = {machine.init: machine.hits(machine.init)}
    robs = obs_of(machine)
    frontiers = []
    for ev in events:
        if robs.admit(ev) is not None:
            break
        fr = ref.advance(ref.close(fr), ev)
        frontiers.append((ev.line, {s for s, m in fr.items() if not m}))
        if not fr or all(fr.values()):
            break
    got = []

    def watch(ev, blocks):
        got.append((ev.line, {s for b in blocks for s in b.states()}))

    factored.watch = watch
    try:
        fobs = obs_of(machine)
        b = explain(machine, fobs, events, 1_000_000, factored)
    finally:
        factored.watch = None
    a = explain(machine, obs_of(machine), events, 1_000_000, Search(machine, obs_of(machine), 1_000_000))
    # the factored search stops at the first event with no clean explanation
    assert got == frontiers[:len(got)] and len(frontiers) - len(got) <= 1, (got[-1:], frontiers[len(got) - 1:len(got) + 1])
    assert (a.kind, a.events, a.event and a.event.line, a.why, a.claims, a.bad, a.possible) == \
           (b.kind, b.events, b.event and b.event.line, b.why, b.claims, b.bad, b.possible)
    _same_maybe(machine, obs_of, events, a, b)
    return a.kind if a.kind != "explained" or a.maybe is None else "possible"


def _same_maybe(machine, obs_of, events, a, b):
    """The same first possible violation (line, claims, before); the factored search's state
    (the first one ``_purge`` dropped that breaks the first claim) is a state of the reference's
    searches attributed to that event: the reference's rebuild pass reaches it."""
    from kvproof.checker.logs.validate import rebuild

    key = [v.maybe and (v.maybe.event.line, v.maybe.claims, v.maybe.before) for v in (a, b)]
    assert key[0] == key[1], key
    m = b.maybe
    if m is not None and a.kind == "explained":
        first = [c.name for c in machine.claims].index(m.claims[0])
        assert machine.hits(m.bad) >> first & 1
        _, states = rebuild(machine, obs_of(machine), events, None if m.before else m.event, m.bad, closed=True)
        assert states[-1] == m.bad


VLLM = [("vllm-pull-heartbeat", 3), ("vllm-pull-heartbeat-stall", 2), ("vllm-push-heartbeat", 2),
        ("vllm-pull-abort-32255", 2), ("vllm-push-lease-expiry-stall", 2)]
pytestmark = pytest.mark.slow  # compiling each scenario's footprints: about a second


@given(k=st.integers(0, len(VLLM) - 1), seed=st.integers(0, 10_000), mutate=st.booleans())
@settings(max_examples=12, **SETTINGS)
def test_vllm_random_and_mutated_logs(k, seed, mutate):
    name, slots = VLLM[k]
    gen, machine, factored = _vllm(name, slots)
    events = vv.to_events(gen, vv.random_run(gen, 5, seed, fault_weight=0.2))
    if mutate:
        events = _mutate(events, random.Random(seed))
    _compare(machine, vv.observation, factored, _decoded(vv.observation(machine), events))


@pytest.mark.parametrize("name", ["vllm-pull-ttl-expiry", "vllm-pull-lease-equals-read"])
def test_vllm_hazard_runs(name):
    """Random runs of the as-shipped scenarios (not streams): violations found where the
    reference finds them."""
    gen, machine, factored = _vllm(name, None)
    kinds = [_compare(machine, vv.observation, factored,
                      _decoded(vv.observation(machine), vv.to_events(gen, _hazard_run(gen, seed))))
             for seed in range(6)]
    assert "violation" in kinds and "possible" in kinds, kinds


def _hazard_run(gen, seed):
    """30 random steps of ``gen`` (any enabled action, uniformly)."""
    rng = random.Random(seed)
    state, run = gen.init, []
    for _ in range(30):
        succ = gen.successors(state)
        if not succ:
            break
        aid, state = rng.choice(succ)
        run.append(aid)
    return run


@given(name=st.sampled_from(["pr-38935", "v0.5.22"]), seed=st.integers(0, 10_000), mutate=st.booleans())
@settings(max_examples=6, **SETTINGS)
def test_sglang_random_and_mutated_logs(name, seed, mutate):
    gen, machine, factored = _sglang(name)
    events = sv.to_events(gen, sv.random_run(gen, 3, seed))
    if mutate:
        events = _mutate(events, random.Random(seed))
    _compare(machine, sv.observation, factored, _decoded(sv.observation(machine), events))


def test_the_stored_logs_and_the_command(capsys):
    """The example logs give the reference's answer (the command's first lines); ``auto`` picks
    the factored search for an 8-slot pull stream (a 6-slot push stream) and not for 4 slots or a clock that waits
    for READs; an observation with unseen steps is refused (``--backend factored``: exit 3)."""
    from kvproof.checker.cli import main

    for log, code in [("examples/validate/vllm-clean.jsonl", 0), ("examples/validate/vllm-lease-expiry.jsonl", 1),
                      ("examples/validate/incident.jsonl", 1)]:
        outs = []
        for backend in ("factored", "python"):
            assert main(["validate", log, "--no-traces", "--backend", backend]) == code
            outs.append([line for line in capsys.readouterr().out.splitlines()[:-1]  # the last line: the summary
                         if " events in " not in line])  # the timings differ
        assert outs[0] == outs[1]
    from types import SimpleNamespace

    def auto_factors(name, slots):
        m = SimpleNamespace(spec=vv.stream_scenario(builtin(name), slots, slots, slots).build())
        return suits(m, vv.observation(m))

    assert auto_factors("vllm-pull-heartbeat", 8) and auto_factors("vllm-push-heartbeat", 6)
    assert not auto_factors("vllm-pull-heartbeat", 4) and not auto_factors("vllm-pull-abort-32255", 8)
    spec = builtin("sglang-0.5.23-mooncake").build()
    machine = Checked.invariants(spec)
    with pytest.raises(FactoredUnavailable):
        FactoredSearch(machine, sv.observation(machine, {"failed_writes_land_unseen": True}), 100)


def test_an_8_slot_log_is_factored_exactly():
    """A pinned 8-slot pull log: the reference's peak is 4,374 = 2 x 3^7 states; the factored
    search holds one block of 8 groups at most, and its frontiers are the reference's."""
    gen, machine, factored = _vllm("vllm-pull-heartbeat", 8)
    events = _decoded(vv.observation(machine), vv.to_events(gen, vv.random_run(gen, 40, 0)))
    factored.blocks_peak = 0
    assert _compare(machine, vv.observation, factored, events) == "explained"
    assert explain(machine, vv.observation(machine), events, 1_000_000, factored).peak == 4374
    assert factored.blocks_peak == 1


@given(data=st.data())
@settings(max_examples=30, **SETTINGS)
def test_a_block_s_alternative_states_and_slot_map(data):
    """A block's states for group ``g`` are its core with ``g`` at each alternative (the first
    is the core itself: the core holds every group's first alternative), its slot -> group map
    is its own groups' (blocks of one shape share it), and its states are the product."""
    n = 10
    core = bytes(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    slots = data.draw(st.permutations(range(n)))
    cuts = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    groups, start = [], 0
    for size in cuts:
        gslots = tuple(slots[start:start + size])
        start += size
        if len(gslots) < size:
            break
        alts = data.draw(st.sets(st.tuples(*[st.integers(0, 5)] * size), min_size=1, max_size=4))
        groups.append((gslots, alts, (size,)))
    b = Block.make(core, groups, split=False)
    want = set()
    for combo in product(*[sorted(a) for _, a, _ in groups]):
        c = bytearray(core)
        for (gs, _, _), alt in zip(groups, combo):
            for x, v in zip(gs, alt):
                c[x] = v
        want.add(bytes(c))
    assert set(b.states()) == want and b.size() == len(want)
    assert b.gslots == {x for gs, a, _ in groups if len(a) > 1 for x in gs}
    for g, (gs, alts, _) in enumerate(b.groups):
        assert all(b.where[x] == g for x in gs)
        got = b.alt_states(g)
        assert got == [(alt, b.with_alt(g, alt)) for alt in alts] and got[0][1] is b.core


def test_mutants_are_caught(monkeypatch):
    """Wrong implementations give other frontiers, and the comparison above catches them: a
    join split back where its alternatives are not a product (the clock's ages and the READ
    phases it waits for), every alternative run as the first, a step run once where its groups
    were joined up front, and conjuncts never checked (dirty states kept)."""
    from kvproof.checker.logs import validate_factored as vf

    gen, machine, factored = _vllm("vllm-pull-abort-32255", 2)
    events = _decoded(vv.observation(machine), vv.to_events(gen, vv.random_run(gen, 5, 0)))
    _compare(machine, vv.observation, factored, events)
    with monkeypatch.context() as m:
        m.setattr(vf, "_split", lambda slots, alts, cuts: [
            (slots[:cuts[0]], {a[:cuts[0]] for a in alts}, cuts[:1]),
            (slots[cuts[0]:], {a[cuts[0]:] for a in alts}, cuts[1:])])
        with pytest.raises(AssertionError):
            _compare(machine, vv.observation, factored, events)
    with monkeypatch.context() as m:  # every alternative run as the core (the first alternative)
        m.setattr(Block, "alt_states", lambda self, g: [(alt, self.core) for alt in self.groups[g][1]])
        with pytest.raises(AssertionError):
            _compare(machine, vv.observation, factored, events)
    with monkeypatch.context() as m:  # a step's groups joined on its literal reads only, never re-checked
        run = FactoredSearch._run

        def once(self, b, aid, visible=False):
            static = self.code.sreads[aid]
            self.code.sreads[aid] = frozenset(range(len(b.core)))  # joins every group first...
            try:
                bb, g, results, reads, writes = run(self, b, aid, visible)
            finally:
                self.code.sreads[aid] = static
            return bb, g, [results[0]], reads, writes  # ...but keeps one alternative's result

        m.setattr(FactoredSearch, "_run", once)
        with pytest.raises(AssertionError):
            _compare(machine, vv.observation, factored, events)
    gen, machine, factored = _vllm("vllm-pull-ttl-expiry", None)
    events = _decoded(vv.observation(machine), vv.to_events(gen, _hazard_run(gen, 0)))
    assert _compare(machine, vv.observation, factored, events) == "violation"
    with monkeypatch.context() as m:
        m.setattr(FactoredSearch, "_purge", lambda self, b, conjs, reads, cmemo: b)
        with pytest.raises(AssertionError):
            _compare(machine, vv.observation, factored, events)


def test_possible_violations_are_the_first_states_purge_drops_and_mutants_are_caught(monkeypatch):
    """The first possible violation is the first state ``_purge`` drops: on a push log whose
    WRITE is outstanding at the reap (explained; possible at the reap), and with the reap unlogged
    (the dirty state reached between events, by the closure after line 5), as the reference.
    Mutants caught: drops not noted; drops in the closure not noted; the closure after the last
    event left out (the log cut after line 5)."""
    from kvproof.checker.traces import read_trace

    from tests.test_vllm_validate import hidden_reap_log

    trace = read_trace("traces/vllm-push-lease-expiry-stall__no_cross_tenant_read.itf.json")
    gen, machine, factored = _vllm("vllm-push-lease-expiry-stall", None)
    push = _decoded(vv.observation(machine), vv.to_events(trace.machine, trace.actions))
    assert _compare(machine, vv.observation, factored, push) == "possible"
    hm, hobs, hidden = hidden_reap_log()
    hf = FactoredSearch(hm, hobs(), 100_000)

    def maybe(events, search=None):
        v = explain(hm, hobs(), events, 100_000, search or FactoredSearch(hm, hobs(), 100_000))
        assert v.kind == "explained"
        return v.maybe and (v.maybe.event.line, v.maybe.claims)

    for evs in (hidden, hidden[:4]):
        a = explain(hm, hobs(), evs, 100_000, Search(hm, hobs(), 100_000))
        b = explain(hm, hobs(), evs, 100_000, hf)
        _same_maybe(hm, lambda _: hobs(), evs, a, b)
        assert (b.maybe.event.line, b.maybe.claims) == (5, ["no_source_free_while_read"])
    with monkeypatch.context() as m:
        m.setattr(FactoredSearch, "_dropped", lambda self, states: None)
        assert maybe(hidden) is None
        with pytest.raises(AssertionError):
            _compare(machine, vv.observation, factored, push)
    close = FactoredSearch._close

    def no_closure(self, *args):
        b, self.breaks = self.breaks, None
        try:
            return close(self, *args)
        finally:
            self.breaks = b

    with monkeypatch.context() as m:
        m.setattr(FactoredSearch, "_close", no_closure)
        assert maybe(hidden) is None
    from kvproof.checker.logs import validate as vmod

    class NoTail(vmod._MaybeTracker):
        def pending(self):
            return False

    with monkeypatch.context() as m:
        m.setattr(vmod, "_MaybeTracker", NoTail)
        from kvproof.checker.logs import validate_factored as vf

        m.setattr(vf, "_MaybeTracker", NoTail)
        assert maybe(hidden[:4]) is None and maybe(hidden) == (5, ["no_source_free_while_read"])


@pytest.mark.thorough
@given(k=st.integers(0, len(VLLM) - 1), seed=st.integers(0, 10**6), mutate=st.booleans(),
       requests=st.integers(2, 12))
@settings(max_examples=400, **SETTINGS)
def test_vllm_random_and_mutated_logs_thorough(k, seed, mutate, requests):
    """The default tier's property on 400 logs of up to 12 requests."""
    name, slots = VLLM[k]
    gen, machine, factored = _vllm(name, slots)
    events = vv.to_events(gen, vv.random_run(gen, requests, seed, fault_weight=0.2))
    if mutate:
        events = _mutate(events, random.Random(seed))
    _compare(machine, vv.observation, factored, _decoded(vv.observation(machine), events))


def test_past_the_cap_the_flat_search_takes_the_whole_log_over():
    """Where the factored search holds more alternatives than ``max_states``, the reference
    search (with the same cap) answers for the whole log: its verdict, not "explained" for the
    part read so far.  The cap bounds what each search holds: a log whose flat frontier passes
    it (the reference cannot decide) may stay under it factored."""
    gen, machine, _ = _vllm("vllm-pull-heartbeat", 3)
    events = _decoded(vv.observation(machine), vv.to_events(gen, vv.random_run(gen, 8, 2)))
    kinds = []
    for cap in (3, 30, 1_000):
        a = explain(machine, vv.observation(machine), events, cap, Search(machine, vv.observation(machine), cap))
        factored = FactoredSearch(machine, vv.observation(machine), cap, Search(machine, vv.observation(machine), cap))
        b = explain(machine, vv.observation(machine), events, cap, factored)
        kinds.append((a.kind, b.kind))
        if b.kind != "explained":  # it handed the log over
            assert (a.kind, a.events, a.event.line, a.why) == (b.kind, b.events, b.event.line, b.why)
        else:
            assert b.events == len(events)
    assert kinds == [("undecided", "undecided"), ("undecided", "explained"),
                     ("explained", "explained")], kinds


@functools.lru_cache(maxsize=None)
def _wide_pair(name: str, slots: int):
    """The stream of ``name`` at ``slots`` slots twice: as built (one byte a slot) and with its
    layout forced wide (states as tuples of ints, as past 255 slots), each with its reference
    search."""
    out = []
    for wide in (False, True):
        spec = vv.stream_scenario(builtin(name), slots, slots, slots).build()
        spec.layout.wide = wide
        machine = Checked.invariants(spec)
        out.append((machine, Search(machine, vv.observation(machine), 1_000_000)))
    return Machine(out[0][0].spec), out


@settings(max_examples=12, **SETTINGS)
@given(seed=st.integers(0, 10**6), name=st.sampled_from(["vllm-pull-heartbeat", "vllm-push-lease-expiry-stall"]))
def test_the_wide_layout_gives_the_byte_layout_s_answers(seed, name):
    """A wide layout (past 255 slots) stores states as tuples of ints and compiles its steps over
    lists: on random and mutated logs the reference search over it gives, event for event, the
    byte layout's frontier (states and claim masks) and the same verdict."""
    gen, ((narrow, ns), (wide, ws)) = _wide_pair(name, 3)
    assert isinstance(narrow.init, bytes) and isinstance(wide.init, tuple) and tuple(narrow.init) == wide.init
    rng = random.Random(seed)
    events = _mutate(vv.to_events(gen, vv.random_run(gen, rng.randrange(1, 8), seed)), rng)
    answers = []
    for machine, search in ((narrow, ns), (wide, ws)):
        obs = vv.observation(machine)
        evs = _decoded(obs, events)
        search.obs = obs
        front = {machine.init: machine.hits(machine.init)}
        seen = []
        for ev in evs:
            if obs.admit(ev) is not None:
                break
            closed = search.close(front)
            front = search.advance(closed, ev)
            kind = type(machine.init)  # bytes, or tuples for the wide layout: never a mix
            assert all(type(s) is kind for s in closed) and all(type(s) is kind for s in front)
            seen.append(sorted((tuple(s), m) for s, m in front.items()))
            if not front:
                break
        v = explain(machine, vv.observation(machine), _decoded(vv.observation(machine), events), 1_000_000, search)
        answers.append((seen, v.kind, v.events, v.event.line if v.event else None, v.claims, v.peak,
                        sorted(tuple(s) for s in v.possible), v.maybe and (v.maybe.event.line, v.maybe.claims)))
    assert answers[0] == answers[1]
