"""The pytest plugin: ``pytest --kvproof`` makes a repository's test run the proof gate.

Installed with kvproof and registered through the ``pytest11`` entry point, it does nothing
unless ``--kvproof`` is given.  Then it collects

* the built-in scenario catalogue (``kvproof list``), unless the ini option
  ``kvproof_catalogue = false``;
* every scenario file in the collected directories: a ``*.toml`` file (ini option
  ``kvproof_files`` narrows the name patterns) that has a ``[sizes]`` or ``[[requests]]``
  table, the shape of a scenario.  Engine variants come in through their scenario's
  ``protocol`` key, and only from the variant files listed in the ini option
  ``kvproof_variants`` (a variant file is code: a scenario file alone never runs one).

Each checked claim of each scenario is one test item, ``<file>::<claim>`` for a scenario file
(``kvproof/ours.toml::no_cross_tenant_read``: select it as any pytest node id) and
``kvproof-catalogue/<scenario>::<claim>`` for the catalogue (select with ``-k``); the catalogue
is collected when the run collects a directory, not when it names only files or node ids.  It passes when
the verdict is the one the scenario expects and fails otherwise, with the counterexample as
``kvproof show`` prints it.  An inconclusive verdict (``--kvproof-max-states`` or
``--kvproof-max-seconds`` cut the search short) fails too: the gate could not decide.  A
scenario file that is malformed fails as one item whose message names the file, the key and
what was expected.  Each scenario is searched once, however many of its items run.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, Iterator

import pytest

__all__ = ["KvproofScenario", "KvproofScenarioFile", "KvproofClaim", "KvproofMismatch"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--kvproof`` and its limits; ini options ``kvproof_catalogue`` and ``kvproof_files``."""
    group = parser.getgroup("kvproof", "kvproof: model-checked KV page isolation")
    group.addoption("--kvproof", action="store_true", default=False,
                    help="collect kvproof's scenario catalogue and the repository's scenario files as tests")
    group.addoption("--kvproof-max-states", type=int, default=None, metavar="N",
                    help="stop each scenario's search after N distinct states (its open claims fail as inconclusive)")
    group.addoption("--kvproof-max-seconds", type=float, default=None, metavar="S",
                    help="stop each scenario's check after S seconds, every phase (its open claims fail as inconclusive)")
    group.addoption("--kvproof-traces", default=None, metavar="DIR",
                    help="write counterexamples found to DIR as ITF traces")
    parser.addini("kvproof_catalogue", type="bool", default=True,
                  help="with --kvproof, also check kvproof's built-in scenario catalogue (default true)")
    parser.addini("kvproof_files", type="args", default=["*.toml"],
                  help="with --kvproof, name patterns of scenario files to collect (default *.toml)")
    parser.addini("kvproof_variants", type="args", default=[],
                  help="with --kvproof, engine variant files (code) that scenario files may name, "
                       "relative to the rootdir")


def pytest_configure(config: pytest.Config) -> None:
    """Trust the ``kvproof_variants`` files (with ``--kvproof``)."""
    if not _enabled(config):
        return
    from kvproof.model.registry import ProtocolError, trust_variant

    for v in config.getini("kvproof_variants"):
        try:
            trust_variant(config.rootpath / v)
        except ProtocolError as e:
            raise pytest.UsageError(f"kvproof_variants: {e}") from None


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("kvproof", default=False))


def _looks_like_scenario(path: Path) -> bool:
    """A TOML file with a ``[sizes]`` or ``[[requests]]`` table: a scenario, even a broken one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.strip() in ("[sizes]", "[[requests]]") for line in text.splitlines())


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Scenario files become :class:`KvproofScenarioFile` collectors (with ``--kvproof``)."""
    config = parent.config
    if not _enabled(config) or file_path.suffix != ".toml":
        return None
    patterns = config.getini("kvproof_files")
    if not any(fnmatch.fnmatch(file_path.name, p) for p in patterns) or not _looks_like_scenario(file_path):
        return None
    return KvproofScenarioFile.from_parent(parent, path=file_path)


@pytest.hookimpl(tryfirst=True)  # before -k / -m / --lf deselect the items
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """Prepend the built-in catalogue's items (with ``--kvproof``), unless the command line names
    only files or node ids (``pytest kvproof/ours.toml::no_cross_tenant_read`` runs that item
    alone).  The catalogue's scenarios are collected as pytest collects a file's tests, so
    ``--collect-only`` counts them and their ids (``kvproof-catalogue/incident::no_cross_tenant_read``)
    work with ``-k``, ``--deselect`` and ``--lf``."""
    if not _enabled(config) or not config.getini("kvproof_catalogue") or not _whole_directories(config):
        return
    from kvproof.model.scenario import builtins

    catalogue = []
    for sc in builtins():
        name = f"kvproof-catalogue/{sc.name}"
        node = KvproofScenario.from_parent(session, name=name, nodeid=name, scenario=sc)
        catalogue.extend(session.genitems(node))  # reports the collection, as for a file
    items[:0] = catalogue


def _whole_directories(config: pytest.Config) -> bool:
    """The run collects at least one whole directory (no arguments: the current one), not only
    named files or node ids."""
    here = config.invocation_params.dir
    for arg in config.args:
        path = Path(arg.split("::")[0])
        if "::" not in arg and (path if path.is_absolute() else here / path).is_dir():
            return True
    return False


class KvproofMismatch(Exception):
    """A verdict that is not the expected one (or is inconclusive); the message explains it."""


class _ScenarioNode:
    """Shared by the catalogue's and the files' scenario collectors: one search, many items."""

    scenario: Any
    _report: Any = None

    def _claim_items(self) -> Iterator["KvproofClaim"]:
        spec = self.scenario.build()
        for claim in self.scenario.expectations(spec):
            yield KvproofClaim.from_parent(self, name=claim)

    def report(self) -> Any:
        """The scenario's :class:`~kvproof.checker.results.ScenarioReport`, searched once."""
        if self._report is None:
            from kvproof.checker.explicit.search import Limits
            from kvproof.checker.explicit.run import check_scenario

            opt = self.config.getoption
            limits = Limits(opt("kvproof_max_states"), opt("kvproof_max_seconds"))
            self._report = check_scenario(self.scenario, limits, traces_dir=opt("kvproof_traces"))
        return self._report


class KvproofScenario(_ScenarioNode, pytest.Collector):
    """A built-in scenario: one item per claim it checks."""

    def __init__(self, *, scenario: Any, **kw: Any):
        super().__init__(**kw)
        self.scenario = scenario

    def collect(self) -> list["KvproofClaim"]:
        """One item per checked claim."""
        return list(self._claim_items())


class KvproofScenarioFile(_ScenarioNode, pytest.File):
    """A scenario file of the repository: one item per claim, or one failing item when the
    file is malformed."""

    def collect(self) -> list[pytest.Item]:
        """One item per checked claim; a :class:`_BadScenario` item for a malformed file."""
        from kvproof.model.scenario import ScenarioError, load_scenario

        try:
            self.scenario = load_scenario(self.path)
            return list(self._claim_items())
        except ScenarioError as e:
            return [_BadScenario.from_parent(self, name="scenario", message=str(e))]


class KvproofClaim(pytest.Item):
    """One claim of one scenario: passes when its verdict is the expected one."""

    def runtest(self) -> None:
        """Check (once per scenario) and compare this claim's verdict with its expectation."""
        report = self.parent.report()
        row = next(c for c in report.claims if c.claim == self.name)
        if row.matches:
            return
        from kvproof.checker.report.render import render_trace, to_text

        sc = report.scenario.name
        if row.verdict == "inconclusive":
            raise KvproofMismatch(f"{sc}: {self.name} is inconclusive (expected {row.expected}): {row.result.reason}")
        text = f"{sc}: {self.name} was expected {row.expected} but is {row.verdict}"
        trace = getattr(row.result, "trace", None)
        if trace is not None:
            text += f" after {len(trace)} steps\n\n" + to_text(render_trace(trace), width=100)
        elif row.kind == "invariant":
            text += ": the exhaustive search found no state that breaks it"
        elif row.kind == "liveness":
            text += ": the exhaustive search found no fair lasso that breaks it"
        else:
            text += ": the exhaustive search never reached it"
        raise KvproofMismatch(text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The explanation alone, without a Python traceback."""
        if isinstance(excinfo.value, KvproofMismatch):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """Where the item comes from, for pytest's report."""
        return self.path, None, f"kvproof: {self.parent.scenario.name}::{self.name}"


class _BadScenario(pytest.Item):
    """A scenario file kvproof cannot use: fails with the one-line problem."""

    def __init__(self, *, message: str, **kw: Any):
        super().__init__(**kw)
        self.message = message

    def runtest(self) -> None:
        raise KvproofMismatch(self.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"kvproof: {self.path.name}"
