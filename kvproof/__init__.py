"""kvproof: a model-checked specification of the PD-disaggregated KV page lifecycle.

The public surface, following the data flow: a :class:`Scenario` builds a spec instance
(:class:`PdProtocol`), :func:`check_scenario` runs the explicit engine over it and returns a
:class:`ScenarioReport` of :class:`Verified` / :class:`Violated` (invariants and liveness
claims), :class:`Reached` / :class:`Unreachable` (witnesses) and :class:`Inconclusive`
results, whose traces :func:`write_trace` stores as ITF and :func:`read_trace` reads back.
"""

import os as _os
import time as _time

STARTED = _time.perf_counter()
"""``time.perf_counter()`` when kvproof was first imported: the command line's ``--max-seconds``
budget counts from here (interpreter start-up before it takes a few tens of milliseconds)."""

# In a source checkout the subpackages live beside this folder (pyproject's package-dir maps
# them); when Python finds this folder first (``python -m kvproof`` run from the checkout over
# a non-editable install), let the subpackages resolve there too.
_here = _os.path.dirname(__file__)
if not _os.path.isdir(_os.path.join(_here, "spec")):
    __path__.append(_os.path.dirname(_here))  # noqa: F821 - __path__ is defined for packages

from kvproof.checker.explicit import Limits, Stats  # noqa: E402
from kvproof.checker.results import (ClaimReport, Inconclusive, Reached, ScenarioReport, Unreachable,  # noqa: E402
                                     Verified, Violated)
from kvproof.checker.run import check_scenario  # noqa: E402
from kvproof.checker.run_symbolic import check_scenario_bmc  # noqa: E402
from kvproof.checker.proofs import ProofReport, prove_scenario  # noqa: E402
from kvproof.checker.certificate import recheck  # noqa: E402
from kvproof.checker.traces import Trace, read_trace, write_trace  # noqa: E402
from kvproof.model.machine import Machine  # noqa: E402
from kvproof.model.replay import replay  # noqa: E402
from kvproof.spec.sglang.config import Config, Engine, Request  # noqa: E402
from kvproof.spec.sglang.protocol import PdProtocol  # noqa: E402
from kvproof.model.scenario import Scenario, builtin, builtins, load_scenario  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "STARTED",
    "Scenario", "load_scenario", "builtin", "builtins",
    "Config", "Engine", "Request", "PdProtocol", "Machine",
    "check_scenario", "Limits", "Stats", "ScenarioReport", "ClaimReport",
    "check_scenario_bmc", "prove_scenario", "ProofReport", "recheck",
    "Verified", "Violated", "Reached", "Unreachable", "Inconclusive",
    "Trace", "read_trace", "write_trace", "replay",
]
