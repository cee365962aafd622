"""``kvproof certify``: a certificate of either kind re-checked by code kvproof does not share,
then held against today's catalogue or model.

:func:`recheck` reads the file with the one certificate reader (:mod:`.certs.reader`: bad input
is :class:`~.certs.reader.CertificateError`, one line, exit 3), then:

* a **fixed-size** certificate: fresh z3 and cvc5 processes answer its three obligations
  (:mod:`.certs.solvers`) while its definitions are compared with today's encoding of the
  catalogue scenario of the same name (:mod:`.symbolic.cert_catalogue`);
* an **all-sizes** certificate: it must be, term for term, the certificate the model lifted from
  its scenario's spec demands for the invariant it states, and fresh z3 and cvc5 processes answer each of its
  obligations (:func:`~.allsizes.recheck_all_sizes`).

Either way the result is one :class:`Recheck` with one line per failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvproof.checker.allsizes.prove import recheck_all_sizes
from kvproof.checker.symbolic.cert_catalogue import match_catalogue
from kvproof.checker.certs.reader import FIXED, read_certificate
from kvproof.checker.certs.solvers import SolverJob, invariant_scope_problems, script_for
from kvproof.checker.certs.limits import ResourceLimit
from kvproof.model.scenario import Scenario

__all__ = ["Recheck", "recheck"]


@dataclass
class Recheck:
    """What re-checking one certificate found.

    ``kind`` is ``fixed-size`` or ``all-sizes``; ``solvers`` maps each solver (``z3``,
    ``cvc5``) to its answer per obligation (``unsat`` is discharged; empty when the solvers were
    not run); ``equivalence`` (fixed-size) maps ``init``, ``typed``, ``trans`` and ``safe`` to
    the answer of "the stored definition differs from today's encoding" (``unsat``: they are
    equal); ``problems`` has one line per failure, empty when the certificate checks.
    """

    path: Path
    kind: str
    scenario: str
    invariants: list[str]
    solvers: dict[str, dict[str, str]]
    equivalence: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing failed: both solvers discharged every obligation and the certificate is of
        today's scenario (fixed-size) or model (all-sizes)."""
        return not self.problems


def recheck(path: str | Path, scenario: Scenario | None = None, seconds: float = 600.0,
            all_sizes_seconds: float | None = None, solve_all_sizes: bool = True,
            limit: ResourceLimit | None = None) -> Recheck:
    """Re-check a certificate of either kind (see the module docstring), against the catalogue
    scenario of the name it states or against ``scenario``.  :class:`~.certs.reader.CertificateError`
    if the file cannot be read as a certificate; otherwise every failure is a line of
    :attr:`Recheck.problems`.  ``seconds`` bounds each solver process on a fixed-size
    certificate, ``all_sizes_seconds`` (default ``seconds``) on an all-sizes one;
    ``solve_all_sizes`` false compares an all-sizes one with today's model only; ``limit``
    bounds each check-sat of an all-sizes one in the solvers' resource units."""
    cert = read_certificate(path)
    if cert.kind != FIXED:
        ra = recheck_all_sizes(cert.path, scenario, all_sizes_seconds or seconds, solve=solve_all_sizes, limit=limit)
        return Recheck(ra.path, cert.kind, ra.scenario, ra.proves, ra.answers, {}, ra.problems)
    problems = list(cert.problems)
    with SolverJob(script_for(cert), seconds, first_problems=invariant_scope_problems(cert)) as job:
        match = match_catalogue(cert, scenario)  # the solver processes run meanwhile
        runs = job.results()
    for run in runs:
        problems += run.problems
    problems += match.problems
    return Recheck(cert.path, cert.kind, cert.name, cert.proves, {r.solver: r.answers for r in runs},
                   match.equivalence, problems)
