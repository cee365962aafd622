"""Configuration checks."""

from dataclasses import replace

from kvproof.spec.sglang.config import Config, Engine, Request


def test_a_sound_config_has_no_problems():
    cfg = Config((Request("A", 1), Request("B", 2)), 2, 2, 2)
    assert cfg.problems() == []
    assert cfg.tenants == ["A", "B"]


def test_problems_name_the_key():
    cfg = Config((Request("A", 3),), 2, 2, 2, Engine(release_policy="never"))
    problems = cfg.problems()
    assert any(p.startswith("engine.release_policy") for p in problems)
    assert any(p.startswith("requests[0].pages") for p in problems)
    streams = replace(cfg, requests=(Request("A", 1),), engine=Engine(request_streams=True))
    assert any("request_streams" in p for p in streams.problems())
    assert "timeout" in " ".join(Config((Request("A", 1),), 1, 1, 1, Engine(timeout=0)).problems())


def test_new_dimensions_are_checked():
    ok = Config((Request("A", 1),), 1, 1, 1, prefill_ranks=2, decode_ranks=1)
    assert ok.problems() == [] and ok.units == 2
    assert ok.linked(0, 0) and ok.linked(1, 0)
    four_two = Config((Request("A", 1),), 1, 1, 1, prefill_ranks=4, decode_ranks=2)
    assert four_two.linked(2, 0) and not four_two.linked(1, 0)
    assert any("heartbeat_detection" in p for p in Config((Request("A", 1),), 1, 1, 1,
                                                           Engine(heartbeat_detection=True)).problems())
    assert any(p.startswith("engine.timeout_action") for p in Config((Request("A", 1),), 1, 1, 1,
                                                                      Engine(timeout_action="pray")).problems())


def test_any_free_pages_bounds_the_allocation_choices():
    from kvproof.spec.sglang.config import Config, Engine, Request

    ok = Config((Request("A", 2),), decode_pages=6, prefill_pages=2, context_limit=2, engine=Engine(any_free_pages=True))
    assert ok.problems() == []
    big = Config((Request("A", 3),), decode_pages=12, prefill_pages=3, context_limit=3, engine=Engine(any_free_pages=True))
    assert big.problems() == ["engine.any_free_pages: 12 decode pages give 1320 allocation choices for one request; "
                              "at most 720"]


def test_room_policies_and_the_guard_are_checked():
    client = Engine(room_policy="client", client_aborts=False)
    shared = (Request("A", 1, room=0), Request("B", 1, room=0))
    assert Config(shared, 2, 2, 1, client).problems() == []
    assert Config(shared, 2, 2, 1, client).room_of(1) == 0 and Config(shared[:1], 1, 1, 1).room_of(0) == 0
    # a room named without client rooms, distinct rooms reused, aborts with client rooms
    assert any(p.startswith("requests[0].room") for p in Config(shared, 2, 2, 1).problems())
    assert any(p.startswith("engine.room_policy") for p in Config(
        (Request("A", 1),), 1, 1, 1, Engine(room_policy="distinct", request_streams=True,
                                           ordered_arrivals=False)).problems())
    assert any("aborts" in p for p in Config(shared, 2, 2, 1, Engine(room_policy="client")).problems())
    # the guard: only with client rooms, and not for one room twice on one prefill instance
    guard = replace(client, decode_allocation_policy="prefill_complete")
    assert any("DeferredBootstrap" in p for p in Config(shared, 2, 2, 1, guard).problems())
    apart = (Request("A", 1, room=0), Request("B", 1, room=0, prefill_instance=1))
    assert Config(apart, 2, 2, 1, guard).problems() == [] and Config(apart, 2, 2, 1, guard).prefill_instances == 2
    assert any(p.startswith("engine.decode_allocation_policy") for p in Config(
        (Request("A", 1),), 1, 1, 1, Engine(decode_allocation_policy="prefill_complete")).problems())
    assert any(p.startswith("engine.room_policy") for p in Config(
        (Request("A", 1),), 1, 1, 1, Engine(room_policy="shared")).problems())


def test_room_values_are_data_only_when_a_scenario_sets_them():
    """A scenario without client rooms writes the same data as before they existed (so its stored
    traces and certificates are unchanged); one with them round-trips."""
    from kvproof.spec.sglang.scenario_data import config_data, parse_config

    plain = config_data(Config((Request("A", 1),), 1, 1, 1))
    assert "room_policy" not in plain["engine"] and "decode_allocation_policy" not in plain["engine"]
    assert plain["requests"] == [{"tenant": "A", "pages": 1}]
    cfg = Config((Request("A", 1, room=0), Request("B", 1, room=0, prefill_instance=1)), 2, 2, 1,
                 Engine(room_policy="client", client_aborts=False, decode_allocation_policy="prefill_complete"))
    data = config_data(cfg)
    assert data["requests"][1] == {"tenant": "B", "pages": 1, "room": 0, "prefill_instance": 1}
    assert parse_config(data, lambda key, what, got=None: ValueError(key)) == cfg
