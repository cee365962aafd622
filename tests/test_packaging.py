"""The wheel holds every package of the source tree: ``pyproject.toml`` lists its packages by
hand (``[tool.setuptools] packages``), so a new subpackage missing from that list installs
editable but not from a wheel (``kvproof list`` then fails with ``ModuleNotFoundError``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _source_packages(config: dict) -> set[str]:
    """Every directory holding an ``__init__.py`` under the mapped roots, as a dotted name."""
    found = set()
    for name, where in config["tool"]["setuptools"]["package-dir"].items():
        base = ROOT / where
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            if any(p.startswith((".", "_")) or p == "build" for p in parts):
                continue
            found.add(".".join((name, *parts)))
    return found


def test_every_source_package_is_in_the_wheel():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    missing = _source_packages(config) - listed
    assert not missing, f"packages missing from pyproject.toml's [tool.setuptools] packages: {sorted(missing)}"
    assert "kvproof.checker.explicit.backends" in listed  # the walk reaches nested subpackages


def test_a_package_dropped_from_the_list_is_reported():
    """The check is not vacuous: the walk finds the nested packages, and one left out of the
    list shows as missing."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = _source_packages(config)
    assert {"kvproof.spec.vllm.conform", "kvproof.checker.explicit.backends"} <= packages
    listed = set(config["tool"]["setuptools"]["packages"]) - {"kvproof.spec.vllm.conform"}
    assert packages - listed == {"kvproof.spec.vllm.conform"}
