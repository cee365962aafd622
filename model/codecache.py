"""Compiled code objects of generated source, kept: what Python's own ``__pycache__`` does for modules.

The engine's hot functions are Python source generated per spec instance
(:mod:`kvproof.model.compiler`); turning that text into a code object with :func:`compile` is
most of the fixed cost of a small scenario (the whole catalogue compiles about 1.9 million
characters of it).  :func:`code_of` returns the code object of a source text: from this
process's memory when the same text was compiled before (scenarios of one configuration, a
claim's restricted check equal to the full one), else from a file of the cache folder
(:func:`cache_dir`) written by an earlier run, else compiled and written there.  The file is
named by a SHA-256 digest of the text, the file name given to :func:`compile` and the
interpreter's bytecode magic number, and holds :mod:`marshal`'s form of the code object, as a
``.pyc`` does: the same text always yields the same code object, so a cached one computes
exactly what a fresh compile would.  A file that cannot be read or loaded is ignored (and
compiled again); a folder that cannot be written leaves the code compiled in memory only.
``PYTHONDONTWRITEBYTECODE`` does not apply (these are not modules' ``.pyc`` files, and the
native backend's cache does not heed it either); ``KVPROOF_CODE_CACHE=off`` turns the folder off.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile
from functools import lru_cache
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType

__all__ = ["cache_dir", "code_of"]

_MEMORY = 1024
"""Code objects this process keeps (the catalogue compiles about 400 distinct texts)."""


def cache_dir() -> Path | None:
    """Where code objects are kept: ``$KVPROOF_CODE_CACHE`` (``off``: nowhere, every text compiled
    in each process), else ``$XDG_CACHE_HOME/kvproof/python``, else ``~/.cache/kvproof/python``
    (beside the native backend's compiled C, ``kvproof/native``)."""
    where = os.environ.get("KVPROOF_CODE_CACHE")
    if where:
        return None if where == "off" else Path(where)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvproof" / "python"


def _key(src: str, filename: str) -> str:
    return hashlib.sha256(b"\0".join([MAGIC_NUMBER, filename.encode(), src.encode()])).hexdigest()[:32]


def _read(path: Path) -> CodeType | None:
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _write(path: Path, code: CodeType) -> None:
    """Write ``code`` to ``path`` in one rename (processes writing one text at once each write
    their own file; the last rename wins and every one is whole); an unwritable folder is no error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps(code))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


@lru_cache(maxsize=_MEMORY)
def _cached(src: str, filename: str, where: Path | None) -> CodeType:
    path = None if where is None else where / f"{_key(src, filename)}.marshal"
    if path is not None:
        code = _read(path)
        if code is not None and code.co_filename == filename:
            return code
    code = compile(src, filename, "exec")
    if path is not None:
        _write(path, code)
    return code


def code_of(src: str, filename: str) -> CodeType:
    """The code object of module source ``src`` compiled with file name ``filename``
    (:func:`compile` in ``exec`` mode), from memory or the cache folder when it was compiled
    before (see the module docstring); a syntax error is raised as :func:`compile` raises it."""
    return _cached(src, filename, cache_dir())
