"""kvproof: a model-checked specification of the PD-disaggregated KV page lifecycle.

The public surface, following the data flow: a :class:`Scenario` builds a spec instance (a
protocol's :class:`Spec` subclass), :func:`check_scenario` runs the explicit engine over it and
returns a :class:`ScenarioReport` of :class:`Verified` / :class:`Violated` (invariants and
liveness claims), :class:`Reached` / :class:`Unreachable` (witnesses) and
:class:`Inconclusive` results, whose traces :func:`write_trace` stores as ITF and
:func:`read_trace` reads back.

The names are imported when first used, so ``import kvproof`` (and ``kvproof --help``) costs
only this module.
"""

import importlib as _importlib
import os as _os
import time as _time

STARTED = _time.perf_counter()
"""``time.perf_counter()`` when kvproof was first imported: where the process's own start cannot
be read, the console command's ``--max-seconds`` budget counts from here
(:func:`kvproof.checker.budget.process_started`)."""

__version__ = "0.1.0"

# In a source checkout the subpackages live beside this folder (pyproject's package-dir maps
# them); when Python finds this folder first (``python -m kvproof`` run from the checkout over
# a non-editable install), let the subpackages resolve there too.
_here = _os.path.dirname(__file__)
if not _os.path.isdir(_os.path.join(_here, "spec")):
    __path__.append(_os.path.dirname(_here))  # noqa: F821 - __path__ is defined for packages

_PUBLIC = {  # name: the module that defines it
    "Scenario": "kvproof.model.scenario", "load_scenario": "kvproof.model.scenario",
    "builtin": "kvproof.model.scenario", "builtins": "kvproof.model.scenario",
    "Machine": "kvproof.model.machine", "replay": "kvproof.model.replay",
    "Spec": "kvproof.model.framework", "Protocol": "kvproof.model.protocol",
    "check_scenario": "kvproof.checker.explicit.run", "Limits": "kvproof.checker.explicit.search",
    "Stats": "kvproof.checker.results",
    "ScenarioReport": "kvproof.checker.results", "ClaimReport": "kvproof.checker.results",
    "Verified": "kvproof.checker.results", "Violated": "kvproof.checker.results",
    "Reached": "kvproof.checker.results", "Unreachable": "kvproof.checker.results",
    "Inconclusive": "kvproof.checker.results",
    "check_scenario_bmc": "kvproof.checker.symbolic.run", "prove_scenario": "kvproof.checker.symbolic.proofs",
    "ProofReport": "kvproof.checker.symbolic.proofs", "recheck": "kvproof.checker.certify",
    "Trace": "kvproof.checker.traces", "read_trace": "kvproof.checker.traces", "write_trace": "kvproof.checker.traces",
}

__all__ = ["STARTED", "__version__", *_PUBLIC]


def __getattr__(name: str):
    """Import a public name from its module on first use (PEP 562)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kvproof' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(__all__)
