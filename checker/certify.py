"""``kvproof certify``: a certificate re-checked by code kvproof does not share, then held
against today's catalogue.

:func:`recheck` reads the file (:mod:`.certificate`), has fresh z3 and cvc5 processes run its
stored text (:mod:`.cert_solvers`) while the stored definitions are compared with today's
encoding of the catalogue scenario of the same name (:mod:`.cert_catalogue`), and returns a
:class:`Recheck` with one line per failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvproof.checker.cert_catalogue import match_catalogue
from kvproof.checker.cert_solvers import SolverJob
from kvproof.checker.certificate import read_certificate
from kvproof.model.scenario import Scenario

__all__ = ["Recheck", "recheck"]


@dataclass
class Recheck:
    """What re-checking one certificate found.

    ``solvers`` maps each solver (``z3``, ``cvc5``) to its answer per obligation (``unsat`` is
    discharged); ``equivalence`` maps ``init``, ``typed``, ``trans`` and ``safe`` to the answer
    of "the stored definition differs from today's encoding" (``unsat``: they are equal);
    ``problems`` has one line per failure, empty when the certificate checks.
    """

    path: Path
    scenario: str
    invariants: list[str]
    solvers: dict[str, dict[str, str]]
    equivalence: dict[str, str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """Nothing failed: both solvers discharged all three obligations and the definitions,
        the scenario, the coverage and the file name match the catalogue."""
        return not self.problems



def recheck(path: str | Path, scenario: Scenario | None = None, seconds: float = 600.0) -> Recheck:
    """Re-check a certificate (see the module docstring): the stored text by fresh z3 and cvc5
    processes, then the stored definitions against today's encoding of the catalogue scenario of
    the same name (or of ``scenario``, given explicitly).  :class:`CertificateError` if the file
    cannot be read as a certificate; otherwise every failure is a line of
    :attr:`Recheck.problems`."""
    cert = read_certificate(path)
    problems = list(cert.problems)
    with SolverJob(cert, seconds) as job:  # the solver processes run while the catalogue is compared
        match = match_catalogue(cert, scenario)
        runs = job.results()
    for run in runs:
        problems += run.problems
    problems += match.problems
    return Recheck(cert.path, cert.name, cert.proves, {r.solver: r.answers for r in runs},
                   match.equivalence, problems)
