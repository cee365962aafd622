"""The lines of a log that is still being written (``kvproof validate --follow``): a pipe read as
its lines arrive, or a file read to its end and then watched, across log rotation.

Each source yields ``(line number, bytes)`` for every whole line, and :data:`NEW_FILE` (with
line number 0) where the file was replaced: renamed away and a new file created at the path
(its rest read first), or truncated in place (read again from its start).  Line numbers count
from 1 in each file.  A torn last line is kept until its newline arrives.
"""

from __future__ import annotations

import os
import time
from typing import Any, BinaryIO, Callable, Iterator

__all__ = ["NEW_FILE", "POLL_SECONDS", "pipe_lines", "tail_lines"]

NEW_FILE = None
"""What a source yields in place of a line where a new file begins (a rotation)."""
POLL_SECONDS = 0.05
"""How often a followed file at its end is looked at again (well inside the one second within
which a violation is to be reported)."""

def pipe_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """Every line of ``stream`` as it arrives (a blocking read: a pipe yields a line as soon as
    the writer writes it, while it still holds the pipe), until the stream ends."""
    no = 0
    while True:
        data = stream.readline()
        if not data:
            return
        no += 1
        yield no, data


def _open(path: str) -> tuple[Any, int] | None:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    return f, os.fstat(f.fileno()).st_ino


def tail_lines(path: str, stop: Callable[[], bool] | None = None,
               poll: float = POLL_SECONDS) -> Iterator[tuple[int, bytes | None]]:
    """Every line of the file at ``path``, then the lines appended to it, following rotation
    (see the module docstring), until ``stop()`` is true at the end of the file (never, by
    default: the reader is interrupted).  ``OSError`` if the file cannot be opened at first."""
    opened = _open(path)
    if opened is None:
        raise FileNotFoundError(2, "No such file or directory", path)
    f, ino = opened
    no, torn = 0, b""
    try:
        while True:
            data = f.readline()
            if data:
                torn += data
                if torn.endswith(b"\n"):
                    no += 1
                    yield no, torn
                    torn = b""
                continue
            # at the end: a new file at the path (rotated), or this one truncated?
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
            if now is not None and now.st_ino != ino:
                again = _open(path)
                if again is not None:
                    f.close()
                    f, ino = again
                    no, torn = 0, b""
                    yield 0, NEW_FILE
                    continue
            if os.fstat(f.fileno()).st_size < f.tell():
                f.seek(0)
                no, torn = 0, b""
                yield 0, NEW_FILE
                continue
            if stop is not None and stop():
                return
            time.sleep(poll)
    finally:
        f.close()
