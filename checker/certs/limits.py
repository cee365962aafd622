"""Solver budgets in the solvers' own resource units (``--rlimit``) rather than wall-clock
seconds: Z3 and cvc5 count the work a query does (rewrites, decisions, conflicts, ...), and the
count is the same for the same query and solver version whatever else the machine runs.  A
proof bounded by units passes on a loaded machine exactly when it passes on an idle one; one
bounded by seconds (``--lemma-seconds``, ``certify --all-sizes-seconds``) may not.  Used by
``prove --all-sizes`` (every Z3 query in the process, :meth:`ResourceLimit.applied`) and by
the solver processes of an all-sizes certificate (:mod:`.solvers`)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

__all__ = ["ResourceLimit", "DEFAULT_RLIMIT", "DEFAULT_CVC5_RLIMIT", "NO_WALL_CLOCK"]

DEFAULT_RLIMIT = 200_000_000
"""Z3's resource units per solver query of ``prove --all-sizes`` and ``certify`` on an all-sizes
certificate (``--rlimit``).  ``bench/bench_rlimit.py`` measures what the committed proofs ask:
on 2026-12-07 the largest single query of the catalogue's slowest all-sizes proof (18,060
queries) used 9,692,973 units, and the largest obligation of the committed all-sizes
certificates 3,299,438 in z3: the default is 20 times the largest."""

DEFAULT_CVC5_RLIMIT = 20_000_000
"""cvc5's resource units per obligation of an all-sizes certificate in ``certify``
(``--cvc5-rlimit``; cvc5's ``rlimit-per``).  cvc5 counts its own units, not Z3's, hence a
separate figure: the largest obligation of the committed all-sizes certificates used 111,779
(``bench/bench_rlimit.py --certificates``, 2026-12-07)."""

NO_WALL_CLOCK = 1_000_000.0
"""The wall-clock seconds a phase is given when a resource limit bounds its queries instead
(about eleven days: a ceiling no proof reaches, so the answer does not depend on the load)."""


@dataclass(frozen=True)
class ResourceLimit:
    """``--rlimit UNITS``: every solver query bounded by the solver's own count of the work it
    did (Z3's ``rlimit``, cvc5's ``rlimit-per``) instead of by wall-clock seconds.  The count
    is deterministic (the same query, the same solver version, the same units, whatever else
    the machine runs), so a proof that passes on an idle machine passes under load; a query
    that needs more answers *unknown* (Z3: "max. resource limit exceeded").  ``z3`` ``0``:
    no resource limit (the wall-clock budgets apply, as before)."""

    z3: int = DEFAULT_RLIMIT
    cvc5: int = DEFAULT_CVC5_RLIMIT

    @property
    def on(self) -> bool:
        """Whether the queries are bounded by units (else by the wall-clock budgets only)."""
        return self.z3 > 0

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Z3's global ``rlimit`` set in this process for the block: it applies to every query
        of every solver, whichever module made the solver; lifted again when the block ends."""
        import z3

        z3.set_param("rlimit", self.z3)
        try:
            yield
        finally:
            z3.set_param("rlimit", 0)

    def seconds(self, given: float | None, default: float) -> float:
        """A phase's wall-clock budget: ``given`` if the user gave one, else :data:`NO_WALL_CLOCK`
        when the resource limit is on (the units bound each query), else ``default``."""
        if given is not None:
            return given
        return NO_WALL_CLOCK if self.on else default
