"""Protocol-agnostic engines and what they return; nothing here imports a protocol.

The explicit engine: :mod:`.explicit` (breadth-first search), :mod:`.visited` (exact or
fingerprinted visited set), :mod:`.symmetry` (checked symmetry reduction), :mod:`.partition`,
:mod:`.parallel` (worker processes) and :mod:`.ray_backend` (Ray actors), :mod:`.liveness`
(fair lassos).  The Z3 engine: :mod:`.symbolic` (Z3 terms over integers), :mod:`.onehot`
(one-hot interpretation), :mod:`.transition` (Init, Next, Safe), :mod:`.bmc`,
:mod:`.kinduction`, :mod:`.lemmas`, :mod:`.cti`, :mod:`.certificate` (with
:mod:`.cert_solvers` and :mod:`.cert_catalogue`), :mod:`.proofs` (``prove``),
:mod:`.run_symbolic` (``check --engine bmc|both``), :mod:`.watchdog` and :mod:`.interrupts`
(time limits and Ctrl-C inside Z3).  Results and files: :mod:`.results`, :mod:`.run` (scenario
-> report), :mod:`.traces` (ITF), :mod:`.expected` (the expected-verdict table),
:mod:`.atomic` (whole-or-nothing writes).  :mod:`.report` renders; :mod:`.cli` is the command
line.
"""

from kvproof.checker.explicit import Exploration, Limits, Stats, explore
from kvproof.checker.parallel import explore_parallel
from kvproof.checker.results import ClaimReport, Inconclusive, Reached, ScenarioReport, Unreachable, Verified, Violated, exit_code
from kvproof.checker.run import check_scenario
from kvproof.checker.traces import Trace, TraceError, read_trace, write_trace

__all__ = ["Exploration", "Limits", "Stats", "explore", "explore_parallel", "ClaimReport", "Inconclusive", "ScenarioReport",
           "Verified", "Violated", "Reached", "Unreachable", "exit_code", "check_scenario", "Trace", "TraceError", "read_trace", "write_trace"]
