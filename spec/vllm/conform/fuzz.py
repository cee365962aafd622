"""Random conformance on vLLM 0.33.0: :func:`kvproof.checker.conform.random_sequences` with a
fresh pair of vLLM engines (:func:`~.replay.harness_for`) per sequence."""

from __future__ import annotations

from kvproof.checker.conform import FuzzReport, random_sequences
from kvproof.model.machine import Machine
from kvproof.model.scenario import Scenario
from kvproof.spec.vllm.conform.replay import harness_for, run_on_code

__all__ = ["fuzz_scenario"]


def fuzz_scenario(scenario: Scenario, sequences: int = 300, max_steps: int = 40, seed: int = 0) -> FuzzReport:
    """Run ``sequences`` random event sequences of ``scenario`` on the model and vLLM's code."""
    spec = scenario.build()
    machine = Machine(spec)
    harness_for(scenario, spec, random=True).close()  # refuse what cannot run before hypothesis starts

    def run(actions):
        harness = harness_for(scenario, spec, random=True)
        try:
            return run_on_code(machine, harness, actions)
        finally:
            harness.close()

    return random_sequences(scenario.name, machine, run, sequences, max_steps, seed)
