"""The Z3 engine at a fixed size: bounded model checking, k-induction and inductive invariants.

The encoding: :mod:`.z3ops` (the operations facade over Z3 integer terms), :mod:`.onehot` (the
one-hot, propositional interpretation) and :mod:`.transition` (Init, Next and Safe of one
instance).  The engines: :mod:`.bmc`, :mod:`.kinduction`, :mod:`.lemmas` (mined lemmas and
Houdini), :mod:`.cti` (a counterexample to induction, explained), :mod:`.proofs` (``kvproof
prove``), :mod:`.lift` (``prove --lift-from``: lemmas of a small instance lifted to a larger
one) and :mod:`.run` (``check --engine bmc|both``).  :mod:`.watchdog` and :mod:`.interrupts`:
time limits and Ctrl-C inside Z3."""
