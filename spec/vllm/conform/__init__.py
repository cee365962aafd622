"""Conformance with the real engine: vLLM 0.33.0's own code replays kvproof's vLLM traces.

:mod:`.engine` imports vLLM on a CPU and builds its configuration; :mod:`.harness` drives the
real prefill and decode schedulers, their NIXL scheduler connectors and prefill's worker-side
lease bookkeeping one kvproof event at a time (pull mode); :mod:`.push` adds both push workers
and their writer loop (push mode); :mod:`.ranked` runs one prefill push worker per rank (TP/PP
fan-in, V6's failed WRITE posts); :mod:`.ranked_pull` runs decode's real pull worker and one
prefill pull worker per rank (V8's sibling READs, V17's re-registration); :mod:`.observation` is what is
compared; :mod:`.replay` runs a sequence on both the model and the code and compares every
step; :mod:`.fuzz` runs random sequences (:mod:`kvproof.checker.conform`); :mod:`.report`
turns replays into verdicts; :mod:`.command` is ``kvproof conform`` for vLLM targets.
"""

from kvproof.spec.vllm.conform.engine import ENGINE, EngineUnavailable, engine_problem, load_vllm

__all__ = ["ENGINE", "EngineUnavailable", "engine_problem", "load_vllm"]
