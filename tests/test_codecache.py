"""The compiled-code cache (kvproof.model.codecache): a text compiled once is read back, from
memory or the cache folder, and computes what a fresh compile computes."""

from __future__ import annotations

import marshal

from kvproof.model import codecache
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin


def _run(code) -> int:
    ns: dict = {}
    exec(code, ns)
    return ns["f"](20)


def test_a_text_is_compiled_once_then_read_back_from_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPROOF_CODE_CACHE", str(tmp_path))
    calls: list[str] = []
    real = compile
    monkeypatch.setattr(codecache, "compile", lambda src, *a: calls.append(src) or real(src, *a), raising=False)
    src = "def f(n):\n    return sum(range(n)) * 3\n# one\n"
    first = codecache.code_of(src, "<kvproof-test>")
    assert _run(first) == 570 and len(calls) == 1 and len(list(tmp_path.iterdir())) == 1
    codecache._cached.cache_clear()  # a new process: memory empty, the folder kept
    again = codecache.code_of(src, "<kvproof-test>")
    assert len(calls) == 1 and again == first and _run(again) == 570
    assert codecache.code_of(src + "# two\n", "<kvproof-test>") is not first and len(calls) == 2
    assert len(list(tmp_path.iterdir())) == 2


def test_a_damaged_or_foreign_file_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPROOF_CODE_CACHE", str(tmp_path))
    src = "def f(n):\n    return n + 1\n# damaged\n"
    codecache.code_of(src, "<kvproof-test>")
    [path] = tmp_path.iterdir()
    for junk in (b"not marshal", marshal.dumps(42), marshal.dumps(compile("def f(n): return -1", "<other>", "exec"))):
        path.write_bytes(junk)
        codecache._cached.cache_clear()
        assert _run(codecache.code_of(src, "<kvproof-test>")) == 21
    assert _run(marshal.loads(path.read_bytes())) == 21  # rewritten whole


def test_off_and_an_unwritable_folder_compile_in_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPROOF_CODE_CACHE", "off")
    assert codecache.cache_dir() is None
    assert _run(codecache.code_of("def f(n):\n    return 2 * n\n", "<kvproof-test>")) == 40
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("KVPROOF_CODE_CACHE", str(blocker / "cache"))
    assert _run(codecache.code_of("def f(n):\n    return 3 * n\n", "<kvproof-test>")) == 60
    assert blocker.read_text() == "not a folder"


def test_a_machine_from_the_cache_computes_what_a_fresh_one_does(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPROOF_CODE_CACHE", str(tmp_path))
    spec = builtin("incident").build()
    codecache._cached.cache_clear()
    fresh = Machine(spec)
    assert list(tmp_path.iterdir())
    codecache._cached.cache_clear()
    cached = Machine(spec)
    s = fresh.init
    for _ in range(6):
        a, b = fresh.successors(s), cached.successors(s)
        assert a == b and a
        assert fresh.hits(s) == cached.hits(s)
        s = a[-1][1]
