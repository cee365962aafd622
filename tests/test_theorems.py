"""The parametric theorems, and the symbolic admission held to the spec's own decisions."""

import itertools

from kvproof.spec.sglang.theorems import _timeout_only_if, admission_theorem, concrete_admission, smallest_unsafe_prompt
from kvproof.spec.sglang.config import Config, Engine, Request
from kvproof.spec.sglang.protocol import PdProtocol


def test_admission_agrees_with_the_spec_for_every_small_configuration():
    for prefill_door, decode_door in itertools.product([False, True], repeat=2):
        e = Engine(reject_at_prefill_door=prefill_door, reject_at_decode_door=decode_door)
        for pages, ctx, pool in itertools.product(range(1, 5), range(1, 5), range(1, 5)):
            if pages > ctx:
                continue
            spec = PdProtocol(Config((Request("A", pages),), decode_pages=4, prefill_pages=pool,
                                     context_limit=ctx, engine=e))
            a = concrete_admission(e, pages, ctx, pool)
            assert a["over_long"] == spec.over_long(0)
            assert a["pending_error"] == spec.pending_error(0)
            assert a["sent"] == spec.send_len(0)


def test_admission_theorem_and_the_incident_numbers():
    th = admission_theorem()
    assert th.verdict == "proved"
    assert any("681,274 tokens" in line for line in th.details)
    assert smallest_unsafe_prompt(Engine(), 1_048_576, 681_280) == 681_274  # max_req_input_len
    fixed = Engine(reject_at_prefill_door=True, reject_at_decode_door=True)
    assert smallest_unsafe_prompt(fixed, 1_048_576, 681_280) is None
    # a deployment whose context fits its pool is still exposed below the context limit
    assert smallest_unsafe_prompt(Engine(), 4096, 100_000) == 4090


def test_a_deadline_not_above_the_latency_bound_is_unsafe_for_every_value():
    verdict, why, schedule = _timeout_only_if()
    assert verdict == "proved", why
    assert schedule[-1] == "decode_release_timeout(req=R0)" and "tick until hold ≥ T" in schedule
