"""Random conformance: hypothesis draws event sequences within a scenario's bounds, runs each on
the model and on SGLang's code, and shrinks any disagreement to a minimal sequence.

A sequence is built step by step from the model's enabled events (so every sequence is one the
model allows); the real code must agree after every step.  Hypothesis shrinks a disagreeing
sequence by dropping and lowering choices, and the last disagreement it reports is the minimal
one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.spec.sglang.conform.replay import Conformance, harness_for, run_on_code

__all__ = ["FuzzReport", "fuzz_scenario"]


@dataclass
class FuzzReport:
    """``sequences`` run, the longest one, and the minimal disagreement (if any)."""

    scenario: str
    sequences: int = 0
    steps: int = 0
    seconds: float = 0.0
    disagreement: list[str] = field(default_factory=list)
    result: Conformance | None = None

    @property
    def agrees(self) -> bool:
        """No sequence disagreed."""
        return not self.disagreement


def fuzz_scenario(scenario: Scenario, sequences: int = 1000, max_steps: int = 40, seed: int = 0) -> FuzzReport:
    """Run ``sequences`` random event sequences of ``scenario`` on the model and the code."""
    spec = scenario.build()
    machine = Machine(spec)
    report = FuzzReport(scenario.name)
    failing: list = []
    t0 = time.perf_counter()

    @settings(max_examples=sequences, deadline=None, database=None, derandomize=True,
              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
              print_blob=False)
    @given(st.data())
    def agrees(data):
        state, actions = machine.init, []
        for _ in range(max_steps):
            enabled = machine.successors(state)
            if not enabled:
                break
            aid, state = enabled[data.draw(st.integers(0, len(enabled) - 1))]
            actions.append(aid)
        harness = harness_for(scenario, spec)
        try:
            result = run_on_code(machine, harness, actions)
        finally:
            harness.close()
        report.sequences += 1
        report.steps += len(actions)
        if not result.agrees:
            failing[:] = [actions[: result.diverged_at], result]
            raise AssertionError(result.reason)

    agrees._hypothesis_internal_use_seed = seed
    try:
        agrees()
    except AssertionError:
        actions, result = failing
        report.disagreement = [machine.label(a) for a in actions]
        report.result = result
    report.seconds = time.perf_counter() - t0
    return report
