"""The explicit engine's one backend interface: the command line maps ``--backend`` and
``--workers`` to one backend object, a :class:`Checker` is built step by step and runs what it
says, any :class:`Backend` object can run a check (the interface is open), and the symmetry
reduction reaches every backend under one name (``canonicaliser``)."""

from __future__ import annotations

import pytest

from kvproof.checker.cli.check import backend_of
from kvproof.checker.cli.commands import build_parser
from kvproof.checker.explicit.backends import (AutoBackend, Backend, NativeBackend, PythonBackend, RayBackend, Search,
                                               WorkersBackend)
from kvproof.checker.explicit.run import Checker, check_scenario
from kvproof.checker.explicit.search import Limits
from kvproof.model.scenario import builtin

from .symmetric import unordered


@pytest.mark.parametrize("flags,kind,workers", [
    ([], AutoBackend, 1), (["--workers", "2"], AutoBackend, 2),
    (["--backend", "native"], NativeBackend, 1), (["--backend", "native", "--workers", "3"], NativeBackend, 3),
    (["--backend", "python"], PythonBackend, 1), (["--backend", "python", "--workers", "2"], WorkersBackend, 2),
    (["--backend", "process", "--workers", "2"], WorkersBackend, 2), (["--backend", "ray", "--workers", "2"], RayBackend, 2),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_the_command_line_maps_backend_and_workers_to_one_object(flags, kind, workers):
    backend = backend_of(build_parser().parse_args(["check", *flags]))
    assert type(backend) is kind and backend.workers == workers


def test_a_checker_is_built_step_by_step_and_runs_what_it_says():
    base = Checker(builtin("incident"))
    built = (base.with_backend(PythonBackend()).with_limits(Limits(max_states=50))
             .with_claims(["decode_reads_only_own_pages", "pages_conserved"]).with_visited("fingerprint"))
    assert type(base.backend) is AutoBackend and base.claims is None and base.limits == Limits()  # unchanged
    report = built.check()
    assert [c.claim for c in report.claims] == ["decode_reads_only_own_pages", "pages_conserved"]
    assert report.backend == "python" and report.stats.visited == "fingerprint"
    assert (report.stats.states, report.reason) == (50, "state limit 50 reached")
    whole = base.check()  # every claim, on the default backend: the catalogue's pinned count (68 states)
    assert whole.complete and whole.stats.states == 68 and len(whole.claims) == 13


class _Recording(Backend):
    """A backend of a tool author's own: the Python engine, recording what it was asked."""

    name = "recording"

    def __init__(self):
        self.asked: list[Search] = []

    def explore(self, search: Search):
        self.asked.append(search)
        return PythonBackend().explore(search)


def test_any_backend_object_runs_a_check_with_the_outcome_of_the_python_engine():
    mine = _Recording()
    got = check_scenario(builtin("incident"), backend=mine)
    ref = check_scenario(builtin("incident"), backend=PythonBackend())
    assert got.backend == "recording" and len(mine.asked) == 1 and mine.asked[0].canonicaliser is None
    assert [(c.claim, c.verdict, c.depth) for c in got.claims] == [(c.claim, c.verdict, c.depth) for c in ref.claims]
    assert got.stats.states == ref.stats.states


def test_symmetry_reaches_the_backend_as_the_canonicaliser():
    mine = _Recording()
    sc = unordered("incident", "AA")
    reduced = check_scenario(sc, symmetry=True, backend=mine)
    assert mine.asked[0].canonicaliser is not None and reduced.symmetry == "R0~R1 (2 permutations)"
    plain = check_scenario(sc, backend=PythonBackend())
    assert reduced.stats.states < plain.stats.states == reduced.stats.represented
    assert {c.claim: c.verdict for c in reduced.claims} == {c.claim: c.verdict for c in plain.claims}


def test_a_backend_refuses_no_workers():
    for kind in (AutoBackend, NativeBackend, WorkersBackend, RayBackend):
        with pytest.raises(ValueError, match="at least 1"):
            kind(0)
