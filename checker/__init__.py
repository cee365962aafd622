"""Protocol-agnostic engines and what they return; nothing here imports a protocol.

One subpackage per role: :mod:`.explicit` (the explicit-state engine: search, visited sets, the
native backend, workers, Ray, symmetry, liveness), :mod:`.symbolic` (the Z3 engine at a fixed
size: the encoding, bounded model checking, k-induction, lemmas, ``prove``, the fixed-size
certificate's writer and its catalogue check), :mod:`.allsizes` (quantified proofs for every
size), :mod:`.certs` (the one certificate reader and the solver processes), :mod:`.logs`
(``validate``: event logs against the spec), :mod:`.audit` (``audit``'s protocol-neutral half),
:mod:`.report` (text, HTML, SVG, Mermaid, JUnit, SARIF) and :mod:`.cli` (the command line).  At
the top, what they share: :mod:`.results` (verdicts, reports and a search's statistics),
:mod:`.traces` (ITF), :mod:`.states` (a state's values by name), :mod:`.expected` (the
expected-verdict table), :mod:`.atomic` (whole-or-nothing writes), :mod:`.conform`
(``conform``'s protocol-neutral half), :mod:`.budget` (``--max-seconds``), :mod:`.outcome` (the one
outcome type of every engine and command, the one map from outcomes to exit codes, and the
closing line every command prints), and :mod:`.certify` (``certify``: either kind
of certificate re-checked).  The layers between them are an import contract (``pyproject.toml``).
"""

import importlib as _importlib

_PUBLIC = {  # name: the module that defines it (imported on first use, so the CLI starts fast)
    "Exploration": "kvproof.checker.explicit.search", "Limits": "kvproof.checker.explicit.search",
    "explore": "kvproof.checker.explicit.search", "explore_parallel": "kvproof.checker.explicit.parallel",
    "Stats": "kvproof.checker.results",
    "ClaimReport": "kvproof.checker.results", "Inconclusive": "kvproof.checker.results",
    "ScenarioReport": "kvproof.checker.results", "Verified": "kvproof.checker.results",
    "Violated": "kvproof.checker.results", "Reached": "kvproof.checker.results",
    "Unreachable": "kvproof.checker.results", "exit_code": "kvproof.checker.outcome",
    "Proved": "kvproof.checker.outcome", "Refuted": "kvproof.checker.outcome",
    "Unexplained": "kvproof.checker.outcome", "Tally": "kvproof.checker.outcome", "judge": "kvproof.checker.outcome",
    "check_scenario": "kvproof.checker.explicit.run", "Checker": "kvproof.checker.explicit.run",
    "Trace": "kvproof.checker.traces", "TraceError": "kvproof.checker.traces",
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
