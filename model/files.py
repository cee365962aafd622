"""Reading a file a user hands kvproof (a scenario, a trace, a certificate) as text: one line
naming the file and the problem when it cannot be read or is not UTF-8, never a traceback."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_user_text"]


def read_user_text(path: str | Path, error: type[Exception], expected: str) -> str:
    """The UTF-8 text of ``path``, exactly as stored (no newline translation).  Raises
    ``error`` with ``"<path>: cannot read: …"`` or ``"<path>: not UTF-8 text (byte N): expected
    <expected>"``."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise error(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{p}: not UTF-8 text (byte {e.start}): expected {expected}") from None
