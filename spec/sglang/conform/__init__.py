"""Conformance with the real engine: SGLang 0.5.23's own code replays kvproof's traces.

:mod:`.stubs` imports SGLang without a GPU; :mod:`.wiring` builds its real managers, queues and
pools per prefill and decode rank; :mod:`.fakes` is everything faked around them (clock,
transport, transfer engine, collective); :mod:`.harness` drives them one kvproof event at a time;
:mod:`.observation` is what is compared; :mod:`.replay` runs a trace's events on both the model
and the code and compares every step; :mod:`.fuzz` generates event sequences with hypothesis;
:mod:`.report` turns runs into verdicts; :mod:`.command` is ``kvproof conform``.
"""

from kvproof.spec.sglang.conform.errors import ConformError
from kvproof.spec.sglang.conform.stubs import ENGINE, EngineUnavailable, engine_problem, load_sglang

__all__ = ["ENGINE", "ConformError", "EngineUnavailable", "engine_problem", "load_sglang"]
