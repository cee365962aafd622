"""Everyday use of the command line (issue 18): the closing line every run ends with, progress
only on a terminal, ``--variant`` wherever a scenario is taken, the README and ``--help`` in
agreement, ``simulate``'s exit codes, the licence."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_licence_is_apache_2_in_full_and_declared_in_pyproject():
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text) > 11_000  # the full text, not a notice
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_the_mermaid_variable_is_documented_where_the_readme_lists_the_test_tiers():
    readme = (ROOT / "README.md").read_text()
    tiers = readme[readme.index("## Running the tests"):readme.index("## Dependencies")]
    assert "KVPROOF_MERMAID_JS" in tiers and "mermaid.min.js" in tiers and "`.ci/run`" in tiers
    assert re.search(r'^export KVPROOF_MERMAID_JS=', (ROOT / ".ci" / "run").read_text(), re.M)
    test = (ROOT / "tests" / "test_mermaid.py").read_text()
    assert 'os.environ.get("KVPROOF_MERMAID_JS")' in test  # the variable the README names is the one read
