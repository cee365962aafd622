"""The modelling language and the executable model; it knows no protocol.

The language: :mod:`.layout` (the finite typed state), :mod:`.ops` (the operations facade and
the reference interpreter), :mod:`.expr` (values: operators that build the facade's
expressions, misuse refused), :mod:`.framework` (actions, claims and specs), :mod:`.symmetry`
(symmetry declarations).  How protocols are found: :mod:`.protocol` (what a protocol hands
the general layers), :mod:`.registry` (registered protocols, trusted variant files),
:mod:`.scenario` (scenario files).  The executable model: :mod:`.compiler` (spec ->
straight-line Python), :mod:`.machine` (the compiled instance and the reference
interpreter's answers), :mod:`.replay` (re-execute a trace), :mod:`.canon` (the compiled
canonical form of symmetry reduction).
"""

from kvproof.model.expr import SpecError
from kvproof.model.framework import ConfiguredSpec, Spec, action, invariant, liveness, witness
from kvproof.model.layout import Domain, Field, Layout
from kvproof.model.narrate import Busy, Narration, Pool, Read, Signal
from kvproof.model.narration import Lane
from kvproof.model.machine import Machine, reference_successors
from kvproof.model.protocol import Protocol
from kvproof.model.replay import Divergence, ReplayError, replay, run_actions

__all__ = ["Narration", "Busy", "Pool", "Read", "Signal", "Lane", "Spec", "ConfiguredSpec", "action", "invariant", "witness", "liveness", "Domain", "Field", "Layout",
           "SpecError", "Protocol", "Machine", "reference_successors", "Divergence", "ReplayError", "replay",
           "run_actions"]
