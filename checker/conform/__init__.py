"""Conformance with the real engine: SGLang 0.5.23's own code replays kvproof's traces.

:mod:`.stubs` imports SGLang without a GPU; :mod:`.harness` wires its real classes up with a
fake clock, transport, transfer engine, collective and page table; :mod:`.replay` runs a trace's
events on both the model and the code and compares every step; :mod:`.fuzz` generates event
sequences with hypothesis; :mod:`.report` turns runs into verdicts.
"""

from .stubs import ENGINE, EngineUnavailable, engine_problem, load_sglang

__all__ = ["ENGINE", "EngineUnavailable", "engine_problem", "load_sglang"]
