"""Random simulation of long workloads."""

from dataclasses import replace

from kvproof.model.machine import Machine
from kvproof.model.replay import run_actions
from kvproof.spec.sglang.simulate import simulate, simulation_scenario
from kvproof.spec.sglang.state import READ_CROSS_TENANT, READ_FOREIGN
from kvproof.model.scenario import builtin


def _machine(name, pages=16, slots=4):
    return Machine(simulation_scenario(builtin(name), pages, slots).build())


def test_a_simulation_is_deterministic_for_a_seed():
    m = _machine("abort-race")
    a, b = simulate(m, 300, seed=5), simulate(m, 300, seed=5)
    assert a == b
    assert simulate(m, 300, seed=6).steps != a.steps


def test_the_incident_exposes_responses_and_the_first_run_replays_to_a_foreign_read():
    m = _machine("incident")
    e = simulate(m, 400, seed=1)
    assert e.requests == 400 and not e.stuck
    assert 0 < e.cross_tenant_reads <= e.foreign_reads <= e.responses
    states = run_actions(m, e.first_bad_run)
    r = m.instances[e.first_bad_run[-1]].args[0]
    assert m.instances[e.first_bad_run[-1]].name == "decode_commit"
    assert states[-1][m.spec.layout.slot("read", r)] in (READ_FOREIGN, READ_CROSS_TENANT)


def test_fixed_engines_expose_nothing():
    for name in ("pr-38935", "v0.5.22", "pr-35049-drain-ack"):
        e = simulate(_machine(name), 400, seed=2)
        assert e.foreign_reads == 0 and e.first_bad_run is None and not e.stuck, name
        assert e.responses + e.errors + e.aborted == e.requests


def test_faults_happen_at_their_weight():
    m = _machine("abort-race")
    rare = simulate(m, 400, seed=3, fault_weight=0.001)
    often = simulate(m, 400, seed=3, fault_weight=0.5)
    assert rare.aborted < often.aborted


def test_a_long_first_exposure_is_sliced_to_the_two_requests_involved():
    from kvproof.spec.sglang.simulate import slice_exposure

    m = _machine("abort-race", pages=8, slots=4)
    e = simulate(m, 400, seed=2, fault_weight=0.2)
    assert len(e.first_bad_run) > 1000
    sliced = slice_exposure(m, e)
    assert sliced is not None and len(sliced) < 20
    states = run_actions(m, sliced)  # raises if any step is not enabled
    victim = m.instances[sliced[-1]].args[0]
    assert states[-1][m.spec.layout.slot("read", victim)] in (READ_FOREIGN, READ_CROSS_TENANT)
    involved = {m.instances[a].args[0] for a in sliced if m.instances[a].action.params[:1] == ("req",)}
    assert len(involved) == 2 and victim in involved


def test_the_simulation_keeps_every_dimension_of_the_scenario():
    """Ranks, metadata slots and layers come from the scenario (only pages, slots and the request
    streams change): they were dropped, so a TP 2x2 scenario simulated as TP 1."""
    from dataclasses import replace

    for name in ("tp2x2-ready-any", "aux-freed-early", "layerwise-abort-race"):
        base = builtin(name).config
        sim = simulation_scenario(builtin(name), 16, 4).config
        assert (sim.prefill_ranks, sim.decode_ranks, sim.aux_slots, sim.layers) == \
            (base.prefill_ranks, base.decode_ranks, base.aux_slots, base.layers), name
        assert (sim.decode_pages, len(sim.requests), sim.engine.request_streams) == (16, 4, True)
    tp = builtin("tp2x2-ready-any")
    one_rank = replace(tp, config=replace(tp.config, prefill_ranks=1, decode_ranks=1))
    runs = [simulate(Machine(simulation_scenario(s, 16, 4).build()), 300, seed=4) for s in (tp, one_rank)]
    assert runs[0].steps != runs[1].steps  # the ranks' own steps (each rank's writes and acks) are simulated


def _on_a_deadline(name):
    sc = builtin(name)
    engine = replace(sc.config.engine, release_policy="drain_ack_or_timeout", timeout=2, write_latency_bound=1)
    return Machine(simulation_scenario(replace(sc, config=replace(sc.config, engine=engine)), 8, 4).build())


def test_the_cleared_room_fix_shows_in_the_share_of_releases_on_the_deadline():
    # under a deadline both engines verify every isolation claim; only the deadline share tells them apart
    buggy = simulate(_on_a_deadline("ack-target-cleared"), 60, seed=1, fault_weight=0.5)
    fixed = simulate(_on_a_deadline("pr-40645"), 60, seed=1, fault_weight=0.5)
    assert buggy.held_releases > 0 and buggy.deadline_share == 1.0
    assert fixed.held_releases > 0 and 0 < fixed.deadline_share < 1.0
    assert simulate(_machine("pr-35049-drain-ack"), 60, seed=1, fault_weight=0.5).deadline_releases == 0
