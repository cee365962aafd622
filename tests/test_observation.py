"""Observations of a conformance step: the comparison names every field that differs."""

from kvproof.spec.sglang.conform.observation import Observation


def test_equal_observations_have_no_differences():
    a = Observation(held=frozenset({0}), owner=(1, 0), aborts=((0, 1, True),))
    assert a.differences(Observation(held=frozenset({0}), owner=(1, 0), aborts=((0, 1, True),))) == []


def test_every_differing_field_is_named_model_first():
    model = Observation(held=frozenset({0}), owner=(1,), aborts=((0, 0, True),), acked=(1,), write_after_release=True)
    code = Observation(held=frozenset(), owner=(0,), aborts=((0, 0, False),), acked=(0,))
    diffs = model.differences(code)
    assert diffs == [
        "held: model {R0}, SGLang {}",
        "owner: model [1], SGLang [0]",
        "aborts: model [R0->P0 armed], SGLang [R0->P0 unarmed]",
        "acked: model [1], SGLang [0]",
        "write_after_release: model True, SGLang False",
    ]
