"""The timeout theorem's *if* direction by parametric lemmas: proved for T > W, never for T ≥ W."""

import pytest

from kvproof.spec.sglang.timeout_lemmas import timeout_if_by_lemmas


# The *if* direction proved (T ≥ W + 1: 452 lemmas, about 15 s) is
# test_cli.test_prove_theorems_prints_both_theorems_proved, which runs it through `kvproof prove
# --theorems` and checks the verdict line this function returns.


@pytest.mark.slow  # about 10 s
def test_the_false_statement_with_t_equal_to_w_is_never_proved():
    verdict, why, _ = timeout_if_by_lemmas(30, gap=0)
    assert verdict == "inconclusive" and why
