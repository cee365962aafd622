"""The executable reference: the spec compiled once and run on concrete states.

Modules: :mod:`.compiler` (spec -> straight-line Python), :mod:`.machine` (the compiled
instance), :mod:`.replay` (re-execute a trace), :mod:`.simulate` (long random workloads),
:mod:`.canon` (the compiled canonical form of symmetry reduction).
"""

from kvproof.model.machine import Machine, reference_successors
from kvproof.model.replay import Divergence, ReplayError, replay, run_actions
from kvproof.model.simulate import Exposure, simulate, simulation_scenario

__all__ = ["Machine", "reference_successors", "Divergence", "ReplayError", "replay", "run_actions",
           "Exposure", "simulate", "simulation_scenario"]
