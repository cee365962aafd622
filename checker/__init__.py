"""Engines, results, traces, rendering and the command line.

Modules: :mod:`.explicit` (BFS engine), :mod:`.symbolic` (Z3 interpretation of the spec),
:mod:`.results`, :mod:`.run` (scenario -> report), :mod:`.traces` (ITF), :mod:`.expected`
(the expected-verdict table), :mod:`.render` and :mod:`.cli`.  The Z3 engine:
:mod:`.onehot` (one-hot interpretation), :mod:`.transition` (Init, Next, Safe), :mod:`.bmc`,
:mod:`.horn` (Spacer), :mod:`.kinduction`, :mod:`.certificate`, :mod:`.proofs` (``prove``),
:mod:`.theorems` (parametric theorems), :mod:`.run_symbolic` (``check --engine bmc|both``) and
:mod:`.cli_symbolic`.
"""

from .explicit import Exploration, Limits, Stats, explore
from .results import ClaimReport, Inconclusive, ScenarioReport, Verified, Violated, exit_code
from .run import check_scenario
from .traces import Trace, TraceError, read_trace, write_trace

__all__ = ["Exploration", "Limits", "Stats", "explore", "ClaimReport", "Inconclusive", "ScenarioReport",
           "Verified", "Violated", "exit_code", "check_scenario", "Trace", "TraceError", "read_trace", "write_trace"]
