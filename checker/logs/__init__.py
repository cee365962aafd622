"""Event logs of real runs, validated against the spec (``kvproof validate``).

:mod:`.eventlog` (writing an event log from a running process), :mod:`.validate` (trace validation: does some path of
the spec explain the log), :mod:`.validate_factored` (the factored search), :mod:`.validate_native`
(the spec's successors computed in C) and :mod:`.validate_command` (the command)."""
