"""The timeout theorem's *if* direction by parametric lemmas: proved for T > W, never for T ≥ W."""

from kvproof.spec.sglang.timeout_lemmas import timeout_if_by_lemmas


def test_a_deadline_above_the_latency_bound_is_proved_safe_for_every_value():
    verdict, why, n = timeout_if_by_lemmas(600)
    assert verdict == "proved" and n > 0 and "T ≥ W + 1" in why


def test_the_false_statement_with_t_equal_to_w_is_never_proved():
    verdict, why, _ = timeout_if_by_lemmas(30, gap=0)
    assert verdict == "unknown" and why
