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
