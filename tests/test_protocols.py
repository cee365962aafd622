"""The protocol registry: built-in names, variant files trusted only when passed, nothing else."""

import sys

import pytest

from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.model.registry import (ProtocolError, builtin_names, canonical, check_reference, protocol_class,
                                    trust_variant, trusted_files, variant_error, variant_scope)


def _variant(path, cls="Mine", mark=None):
    body = f"open({str(mark)!r}, 'w').close()\n" if mark else ""
    path.write_text(body + f"from kvproof.spec.sglang.protocol import PdProtocol\nclass {cls}(PdProtocol):\n"
                    "    def _boom(self):\n        return [][0]\n")
    return path


def test_the_built_in_protocols():
    assert protocol_class(None) is PdProtocol
    assert builtin_names() == ["sglang", "sglang-0.5.23", "vllm", "vllm-stream", "vllm-prefix-cache", "vllm-multi-connector", "dynamo"]
    assert protocol_class("sglang") is PdProtocol
    assert protocol_class("sglang-0.5.23").__name__ == "Sglang0523"
    assert protocol_class("vllm").__name__ == "VllmPd"


def test_an_older_spelling_names_the_same_protocol():
    assert canonical("kvproof.spec.sglang_0523:Sglang0523") == "sglang-0.5.23"
    assert protocol_class("kvproof.spec.sglang_0523:Sglang0523") is protocol_class("sglang-0.5.23")
    assert canonical(None) == "sglang"


@pytest.mark.parametrize("ref", [":X", "x:", "x:1A", "a:b c", "a\x00b.py:C", "a\nb:C", 7, None, "x" * 2000 + ":C"])
def test_malformed_references(ref):
    with pytest.raises(ProtocolError, match="expected"):
        check_reference(ref)


def test_anything_else_is_refused_and_not_imported(tmp_path, monkeypatch):
    (tmp_path / "evil_mod.py").write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for ref in ("evil_mod:E", "os:system", "kvproof.spec.sglang.protocol:PdProtocol", ".x:Y"):
        with pytest.raises(ProtocolError, match="is not a built-in protocol"):
            protocol_class(ref)
    engine = _variant(tmp_path / "engine.py", mark=tmp_path / "RAN")
    with pytest.raises(ProtocolError, match="pass the file with --variant engine.py to trust it"):
        protocol_class(f"{engine}:Mine")
    assert not (tmp_path / "RAN").exists() and "evil_mod" not in sys.modules


def test_a_trusted_file_matches_by_path_or_by_file_and_class_name(tmp_path):
    engine = _variant(tmp_path / "engine.py", mark=tmp_path / "RAN")
    trust_variant(engine)
    assert (tmp_path / "RAN").exists() and trusted_files() == [engine.resolve()]
    cls = protocol_class(f"{engine.resolve()}:Mine")
    assert issubclass(cls, PdProtocol) and cls.__name__ == "Mine"
    assert protocol_class("/elsewhere/on/another/machine/engine.py:Mine") is cls  # a trace from elsewhere
    with pytest.raises(ProtocolError, match=r"Other is not a PdProtocol or VllmPd or DynamoPd subclass of the variant file .*\(it defines: Mine\)"):
        protocol_class(f"{engine}:Other")
    with pytest.raises(ProtocolError, match="pass the file with --variant other.py"):
        protocol_class("/x/other.py:Mine")
    (tmp_path / "b").mkdir()
    trust_variant(_variant(tmp_path / "b" / "engine.py"))
    with pytest.raises(ProtocolError, match="several --variant files named engine.py define Mine"):
        protocol_class("/elsewhere/engine.py:Mine")
    assert protocol_class(f"{engine.resolve()}:Mine") is cls  # the exact path still decides


def test_a_scope_forgets_what_was_trusted_inside_it(tmp_path):
    engine = _variant(tmp_path / "engine.py")
    with variant_scope():
        trust_variant(engine)
        assert protocol_class(f"{engine.resolve()}:Mine")
    with pytest.raises(ProtocolError):
        protocol_class(f"{engine.resolve()}:Mine")


def test_an_edited_variant_file_runs_again(tmp_path):
    engine = _variant(tmp_path / "engine.py", cls="First")
    trust_variant(engine)
    _variant(engine, cls="Second")
    module = trust_variant(engine)
    assert "Second" in vars(module) and "First" not in vars(module)
    assert protocol_class(f"{engine.resolve()}:Second").__name__ == "Second"
    with pytest.raises(ProtocolError, match="it defines: Second"):
        protocol_class(f"{engine.resolve()}:First")


def test_bad_variant_files(tmp_path):
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(ProtocolError, match=r"x.txt: expected a Python file \(.py\)"):
        trust_variant(tmp_path / "x.txt")
    with pytest.raises(ProtocolError, match="no such variant file"):
        trust_variant(tmp_path / "missing.py")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(4)\n")
    with pytest.raises(ProtocolError, match="exits.py:2: the variant failed to load: SystemExit: 4"):
        trust_variant(tmp_path / "exits.py")


def test_an_error_in_a_variant_names_its_file_and_line(tmp_path):
    engine = _variant(tmp_path / "engine.py")
    trust_variant(engine)
    spec_cls = protocol_class(f"{engine.resolve()}:Mine")
    try:
        spec_cls._boom(None)
    except IndexError as e:
        assert variant_error(e) == f"{engine.resolve()}:4: IndexError in the engine variant: list index out of range"
    try:
        [][0]
    except IndexError as e:
        assert variant_error(e) is None  # no variant took part
