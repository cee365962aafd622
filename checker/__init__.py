"""Protocol-agnostic engines and what they return; nothing here imports a protocol.

The explicit engine: :mod:`.explicit` (breadth-first search), :mod:`.visited` (exact or
fingerprinted visited set), :mod:`.symmetry` (checked symmetry reduction), :mod:`.partition`,
:mod:`.parallel` (worker processes) and :mod:`.ray_backend` (Ray actors), :mod:`.liveness`
(fair lassos).  The Z3 engine: :mod:`.symbolic` (Z3 terms over integers), :mod:`.onehot`
(one-hot interpretation), :mod:`.transition` (Init, Next, Safe), :mod:`.bmc`,
:mod:`.kinduction`, :mod:`.lemmas`, :mod:`.cti`, :mod:`.certs` (the one certificate reader,
the solver processes, the fixed-size writer and catalogue check) and :mod:`.certify`
(``certify``), :mod:`.proofs` (``prove``),
:mod:`.run_symbolic` (``check --engine bmc|both``), :mod:`.watchdog` and :mod:`.interrupts`
(time limits and Ctrl-C inside Z3).  Results and files: :mod:`.results`, :mod:`.run` (scenario
-> report), :mod:`.traces` (ITF), :mod:`.expected` (the expected-verdict table),
:mod:`.atomic` (whole-or-nothing writes).  Protocol commands' protocol-neutral halves:
:mod:`.validate` (trace validation of event logs), :mod:`.audit` (a launch line's settings, a
scenario family's hazards and the verdict).  :mod:`.report` renders; :mod:`.cli` is the command
line.
"""

import importlib as _importlib

_PUBLIC = {  # name: the module that defines it (imported on first use, so the CLI starts fast)
    "Exploration": "kvproof.checker.explicit", "Limits": "kvproof.checker.explicit", "Stats": "kvproof.checker.explicit",
    "explore": "kvproof.checker.explicit", "explore_parallel": "kvproof.checker.parallel",
    "ClaimReport": "kvproof.checker.results", "Inconclusive": "kvproof.checker.results",
    "ScenarioReport": "kvproof.checker.results", "Verified": "kvproof.checker.results",
    "Violated": "kvproof.checker.results", "Reached": "kvproof.checker.results",
    "Unreachable": "kvproof.checker.results", "exit_code": "kvproof.checker.results",
    "check_scenario": "kvproof.checker.run", "Trace": "kvproof.checker.traces", "TraceError": "kvproof.checker.traces",
    "read_trace": "kvproof.checker.traces", "write_trace": "kvproof.checker.traces",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str):
    """Import a public name from its module on first use (PEP 562)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kvproof.checker' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value
