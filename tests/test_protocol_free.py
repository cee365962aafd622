"""The general layers know no protocol: what a protocol knows (its names, claim names, sizes,
flags and defaults) lives in its own package, and the general layers ask it through
:class:`~kvproof.model.protocol.Protocol`.

The import contract (``.ci/import-contract``) sees imports only; a claim name, a flag or a default
written into ``model/`` or ``checker/`` is invisible to it.  These tests read the installed
sources, so they hold for the package as shipped."""

import re
from importlib import resources

import kvproof

PROTOCOL_WORD = re.compile(r"sglang|vllm|minipd", re.IGNORECASE)  # minipd: examples/protocols/

# the one module of model/ and checker/ that may name a protocol, in a docstring example of
# the interface protocols implement
ALLOWED = {"model/protocol.py"}


def _sources(package: str, prefix: str):
    """(path under ``prefix``, text) of every Python source of an installed ``package``."""
    root = resources.files(package)
    stack = [(root, prefix)]
    while stack:
        folder, rel = stack.pop()
        for entry in folder.iterdir():
            if entry.is_dir() and entry.name != "__pycache__":
                stack.append((entry, f"{rel}/{entry.name}"))
            elif entry.name.endswith(".py"):
                yield f"{rel}/{entry.name}", entry.read_text(encoding="utf-8")


def test_model_and_checker_name_no_protocol():
    sources = dict(_sources("kvproof.model", "model")) | dict(_sources("kvproof.checker", "checker"))
    assert len(sources) > 80, sorted(sources)  # really the installed sources, subpackages included
    naming = sorted(path for path, text in sources.items() if PROTOCOL_WORD.search(text))
    assert set(naming) <= ALLOWED, naming
    assert len(naming) <= 2


def test_the_check_would_see_a_protocol_name():
    # the pattern is what a protocol's package is full of: it would catch a copy in the core
    texts = dict(_sources("kvproof.spec", "spec"))
    assert any(PROTOCOL_WORD.search(t) for p, t in texts.items() if p.startswith("spec/sglang/"))
    assert any(PROTOCOL_WORD.search(t) for p, t in texts.items() if p.startswith("spec/vllm/"))


def test_import_kvproof_exports_no_protocol_class():
    exported = {name: getattr(kvproof, name) for name in kvproof.__all__}
    from_spec = sorted(name for name, value in exported.items()
                       if getattr(value, "__module__", "").startswith("kvproof.spec"))
    assert from_spec == []
    assert "Spec" in exported and "Protocol" in exported  # what a protocol implements stays public
