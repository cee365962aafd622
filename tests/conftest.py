"""Shared fixtures: scenarios, compiled machines and explored state sets, built once."""

from __future__ import annotations

import copy
import os
from functools import lru_cache

import pytest

# vLLM decides its platform once per process, on first import: a test that imports it before
# another sets this would leave every later one in the process with "Failed to infer device type"
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from kvproof.checker.explicit.search import Limits, explore
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin


def pytest_addoption(parser):
    parser.addoption("--thorough", action="store_true",
                     help="also run the thorough tiers (marked thorough: 2,000 random specs, 10,000 fuzzed inputs)")


THOROUGH = False
"""``pytest --thorough``: set before any test module is imported (so a module's sample sizes can
depend on it); the test command's tier takes smaller samples of the same checks."""


def pytest_configure(config):
    global THOROUGH
    THOROUGH = bool(config.getoption("--thorough"))


def tier(default: int, thorough: int) -> int:
    """A sample size: ``default`` in the test command's tier, ``thorough`` with ``--thorough``."""
    return thorough if THOROUGH else default


def a_third(names, keep=()):
    """``names`` as parameters for a comparison over the catalogue: a fixed third of them (by a
    CRC-32 of the name, so the same third in every run, and ``keep``) in the test command's tier,
    the others marked thorough (``pytest --thorough`` runs them all)."""
    import zlib

    return [n if zlib.crc32(n.encode()) % 3 == 0 or n in keep else pytest.param(n, marks=pytest.mark.thorough)
            for n in names]


# Tests over 5 s of CPU each that run only with --thorough, for the test command's budget (8 minutes
# on 2 cores); what each covers stays covered in the test command by a smaller test beside it
# (seconds: one idle core, 2026-12-07)
BUDGET = (
    "tests/test_run_symbolic.py::test_cross_check_proves_what_never_hits_instead_of_searching_the_full_depth",  # 14
    "tests/test_run_symbolic.py::test_cross_check_catches_an_explicit_engine_that_missed_a_violation",  # 10
    "tests/test_audit.py::test_any_command_and_environment_map_or_are_bad_input_never_a_crash",  # 11
    "tests/test_allsizes_catalogue.py::test_a_certificate_added_or_a_claim_dropped_changes_the_table",  # 11
    "tests/test_canon.py::test_pages_are_searched_and_requests_sorted_exactly",  # 9
    "tests/test_symbolic.py::test_guards_and_effects_with_z3_terms_match_concrete_evaluation[incident]",  # 9
    "tests/test_pd.py::test_any_free_pages_reserves_every_free_page_in_any_order_and_matches_the_reference",  # 8
    "tests/test_link.py::test_the_lift_at_several_ranks_links[2x1]",  # 5 (1x2 and 2x2 stay)
    "tests/test_cli.py::test_max_seconds_bounds_every_phase_on_a_large_scenario[both]",  # 4 (bmc, explicit stay)
    "tests/test_cli.py::test_max_seconds_bounds_every_phase_on_a_large_scenario[workers]",  # 3
    "tests/test_cli.py::test_max_seconds_bounds_every_phase_on_a_large_scenario[liveness]",  # 3
    "tests/test_ray_backend.py::test_two_ray_workers_equal_one_process[scenario2-True]",  # 10
    "tests/test_pytest_plugin.py::test_nothing_is_collected_without_the_flag_and_k_selects",  # 6
    "tests/test_pytest_plugin.py::test_a_scenario_naming_a_variant_runs_it_only_when_the_ini_lists_it",  # 5
)


def pytest_collection_modifyitems(config, items):
    """The thorough tiers run only with ``--thorough``: they are what the README's figures were
    measured with, and longer than the test command's budget (:data:`BUDGET` names more)."""
    for item in items:
        if item.nodeid in BUDGET:
            item.add_marker(pytest.mark.thorough)
    if config.getoption("--thorough"):
        return
    kept = [i for i in items if i.get_closest_marker("thorough") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("thorough") is not None])
        items[:] = kept


@lru_cache(maxsize=None)
def machine_of(name: str) -> Machine:
    """The compiled machine of a built-in scenario (cached across tests)."""
    return Machine(builtin(name).build())


def states_of(machine, limit: int | None = None) -> list[bytes]:
    """The reachable states of ``machine`` in BFS order (the first ``limit`` of them when given),
    from the engine's search (``explore`` keeping its rows, tracking no claim)."""
    return explore(machine, Limits(max_states=limit), claims=[], rows=True).rows


@lru_cache(maxsize=None)
def reachable(name: str) -> list[bytes]:
    """Every reachable state of a built-in scenario, in BFS order."""
    return states_of(machine_of(name))


def sampled(name: str, most: int) -> list[bytes]:
    """The reachable states of a built-in scenario a comparison looks at.  With ``--thorough``,
    or when the scenario has at most ``most``: every one (BFS order).  Else ``most`` of them,
    cheaply: the first ``most // 2`` in BFS order (the shallow states, the initial one among
    them), then the new states met on random walks from the initial state (a seed of the
    scenario's name: the same sample in every run), which reach the deep states a BFS prefix
    never does."""
    import random

    if THOROUGH:
        return reachable(name)
    m = machine_of(name)
    states = states_of(m, most + 1)
    if len(states) <= most:
        return states
    out = states[: most // 2]
    seen = set(out)
    rnd = random.Random(name)
    walk = m.init
    for _ in range(50 * most):  # walk steps at most
        if len(out) >= most:
            break
        nxt = m.successors(walk)
        if not nxt or rnd.random() < 0.01:  # a dead end, or one walk in a hundred steps: start again
            walk = m.init
            continue
        walk = nxt[rnd.randrange(len(nxt))][1]
        if walk not in seen:
            seen.add(walk)
            out.append(walk)
    return out


@lru_cache(maxsize=None)
def _checked(name: str):
    from kvproof.checker.explicit.run import check_scenario

    return check_scenario(builtin(name))


def checked(name: str):
    """``check_scenario`` of a built-in scenario with default limits, explored once per test
    process (the suite asks for the catalogue's reports in several files); each call returns a
    copy, which the test may change."""
    return copy.deepcopy(_checked(name))


@pytest.fixture(autouse=True)
def _columns_unset(monkeypatch):
    """Every test sees the width a pipe gets when ``COLUMNS`` is not set (120): pytest-xdist sets
    ``COLUMNS=80`` in its workers, and kvproof honours ``COLUMNS``, so without this a test's
    output would wrap differently under ``-n 2`` than under ``-n 0``.  A test of the width sets
    ``COLUMNS`` itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(autouse=True)
def _no_trusted_variants():
    """Every test starts with no engine variant trusted, and forgets the ones it trusted."""
    from kvproof.model.registry import variant_scope

    with variant_scope():
        yield


@pytest.fixture
def machine():
    return machine_of


@pytest.fixture
def states():
    return reachable


__all__ = ["machine_of", "reachable", "checked", "explore"]
