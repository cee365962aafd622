"""Engines, results, traces, rendering and the command line.

Modules: :mod:`.explicit` (BFS engine), :mod:`.symbolic` (Z3 interpretation of the spec),
:mod:`.results`, :mod:`.run` (scenario -> report), :mod:`.traces` (ITF), :mod:`.expected`
(the expected-verdict table), :mod:`.render` and :mod:`.cli`; :mod:`.liveness` (fair lassos);
:mod:`.watchdog` (the time limit for Z3 calls).
For large proofs: :mod:`.visited` (exact or fingerprinted visited set), :mod:`.symmetry`
(checked symmetry reduction), :mod:`.partition`, :mod:`.parallel` (worker processes) and
:mod:`.ray_backend` (Ray actors).  Reading and gating: :mod:`.sequence` (a trace as messages
between actors), :mod:`.sequence_svg` (drawn as SVG), :mod:`.timeline` (page by page),
:mod:`.report_html` (the HTML report), :mod:`.junit`, :mod:`.sarif`, :mod:`.mermaid`,
:mod:`.trace_json`, :mod:`.focus` (``show --only``), :mod:`.diff` (``kvproof diff``) and
:mod:`.atomic` (whole-or-nothing file writes).
The Z3 engine: :mod:`.onehot` (one-hot interpretation), :mod:`.transition` (Init, Next, Safe),
:mod:`.bmc`, :mod:`.horn` (Spacer), :mod:`.kinduction`, :mod:`.certificate` (with
:mod:`.cert_solvers` and :mod:`.cert_catalogue`, what ``certify`` checks), :mod:`.proofs`
(``prove``; :mod:`.interrupts`: Ctrl-C inside Z3), :mod:`.theorems` (parametric theorems),
:mod:`.run_symbolic` (``check --engine bmc|both``) and :mod:`.cli_symbolic`.
"""

from kvproof.checker.explicit import Exploration, Limits, Stats, explore
from kvproof.checker.parallel import explore_parallel
from kvproof.checker.results import ClaimReport, Inconclusive, Reached, ScenarioReport, Unreachable, Verified, Violated, exit_code
from kvproof.checker.run import check_scenario
from kvproof.checker.traces import Trace, TraceError, read_trace, write_trace

__all__ = ["Exploration", "Limits", "Stats", "explore", "explore_parallel", "ClaimReport", "Inconclusive", "ScenarioReport",
           "Verified", "Violated", "Reached", "Unreachable", "exit_code", "check_scenario", "Trace", "TraceError", "read_trace", "write_trace"]
