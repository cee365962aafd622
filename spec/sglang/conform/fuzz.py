"""Random conformance on SGLang 0.5.23: :func:`kvproof.checker.conform.random_sequences` (hypothesis
draws event sequences within a scenario's bounds and shrinks any disagreement to a minimal
sequence) with a fresh harness over SGLang's code (:func:`~.replay.harness_for`) per sequence.

A sequence is built step by step from the model's enabled events (so every sequence is one the
model allows); the real code must agree after every step.
"""

from __future__ import annotations

from kvproof.checker.conform import FuzzReport, random_sequences
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.spec.sglang.conform.replay import harness_for, run_on_code

__all__ = ["FuzzReport", "fuzz_scenario"]


def fuzz_scenario(scenario: Scenario, sequences: int = 1000, max_steps: int = 40, seed: int = 0) -> FuzzReport:
    """Run ``sequences`` random event sequences of ``scenario`` on the model and the code."""
    spec = scenario.build()
    machine = Machine(spec)

    def run(actions):
        harness = harness_for(scenario, spec)
        try:
            return run_on_code(machine, harness, actions)
        finally:
            harness.close()

    return random_sequences(scenario.name, machine, run, sequences, max_steps, seed)
