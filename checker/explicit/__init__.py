"""The explicit-state engine: every reachable state, breadth-first, shortest counterexamples.

:mod:`.run` (a scenario's claims checked: the backend chosen, the report built) over
:mod:`.search` (the breadth-first search, its limits and state graph); :mod:`.visited` and
:mod:`.visited_small` (the visited sets: exact or fingerprinted, numpy or Python);
:mod:`.native` (the model compiled to C), :mod:`.native_store` and :mod:`.native_workers` (its
packed levels and threads); :mod:`.parallel` (worker processes), :mod:`.partition` (a
partition of the state space) and :mod:`.ray_backend` (partitions as Ray actors);
:mod:`.symmetry` (checked symmetry reduction); :mod:`.liveness` (the state graph and fair
lassos) and :mod:`.coverage` (action coverage and graph export)."""
