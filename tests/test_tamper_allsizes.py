"""The tamper suite's all-sizes forgeries (:mod:`tests.tamper`), in a file of their own so that
the test runner spreads the suite over both cores; the checks are those of
:mod:`tests.test_tamper`."""

from __future__ import annotations

import pytest

from .tamper import forgeries
from .test_tamper import BY_NAME, judge, save


# the test command: every other forgery (by name); --thorough: every one
@pytest.mark.parametrize("name", [n if i % 2 == 0 else pytest.param(n, marks=pytest.mark.thorough) for i, n in
                                  enumerate(sorted(f.name for f in forgeries() if f.name.startswith("all sizes")))])
def test_a_forged_all_sizes_certificate_is_refused_for_its_reason(tmp_path, name):
    f = BY_NAME[name]
    outcome, lines = judge(save(tmp_path, f))
    assert outcome == f.outcome, (outcome, lines)
    assert any(f.expect in line for line in lines), lines
    if outcome == "bad input":
        assert len(lines) == 1 and "\n" not in lines[0] and lines[0].startswith(str(tmp_path))
