"""The protocol: state, actions, claims and scenarios of the PD KV page lifecycle.

Modules: :mod:`.ops` (the operations facade), :mod:`.layout` (the flat typed state),
:mod:`.framework` (how actions and claims are written), :mod:`.config` (instance parameters),
:mod:`.pd_state`, :mod:`.pd`, :mod:`.pd_claims`, :mod:`.pd_story`, :mod:`.pd_symmetry` (the
PD protocol), :mod:`.symmetry` (symmetry declarations), :mod:`.scenario` (the TOML
catalogue) and :mod:`.protocols` (the protocols a scenario may name; variant files the user
trusted).
"""

from kvproof.spec.config import Config, Engine, Request
from kvproof.spec.framework import Spec, action, invariant, witness
from kvproof.spec.pd import PdProtocol
from kvproof.spec.scenario import Scenario, ScenarioError, builtin, builtins, load_scenario

__all__ = ["Config", "Engine", "Request", "Spec", "action", "invariant", "witness", "PdProtocol",
           "Scenario", "ScenarioError", "builtin", "builtins", "load_scenario"]
