"""Atomic writes: whole or not at all, with the usual file mode."""

import os

import pytest

from kvproof.checker.atomic import write_text_atomic


def test_writes_creating_folders_with_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "a" / "b.txt", "héllo\n")
    finally:
        os.umask(old)
    assert path.read_text(encoding="utf-8") == "héllo\n"
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_failed_replace_leaves_neither_file_nor_temp(tmp_path, monkeypatch):
    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomic(tmp_path / "out.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_replaced_whole(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("old contents that are longer\n")
    write_text_atomic(path, "new\n")
    assert path.read_text() == "new\n"
