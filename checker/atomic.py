"""Writing files atomically: a temporary file in the same folder, then ``os.replace``.

Every file kvproof writes (traces, the expected table, reports, JUnit and SARIF) goes through
:func:`write_text_atomic`, so an interrupted run never leaves a half-written file behind; a
search's checkpoint goes through :func:`write_bytes_atomic`, which also flushes the file to
disk before it takes the place of the last one (a crash of the machine keeps one of the two).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomic", "write_bytes_atomic", "TEMP_PREFIX"]

TEMP_PREFIX = ".tmp-"
"""The name every temporary file starts with (a process killed while writing leaves one behind)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path``, creating its folder; the file appears whole or not at
    all.  Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=path.suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_bytes_atomic(path: str | Path, chunks, write=None, prefix: str = TEMP_PREFIX) -> Path:
    """Write the byte strings ``chunks`` in order to ``path`` (its folder must exist), flushed
    to disk (``fsync`` of the file, then of the folder after the rename), so that ``path`` holds
    either its previous content or the whole new one, even if the process is killed or the
    machine stops part way.  ``write(f, chunks)`` writes the chunks to the open file (default:
    one ``f.write`` each); the temporary file's name starts with ``prefix``.  Returns the path."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            if write is None:
                for chunk in chunks:
                    f.write(chunk)
            else:
                write(f, chunks)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return path
