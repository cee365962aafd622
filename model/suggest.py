"""Suggestions for a mistyped name in a user's input: ``; did you mean X?``."""

from __future__ import annotations

import difflib

__all__ = ["did_you_mean"]


def did_you_mean(word: str, choices) -> str:
    """``"; did you mean X?"`` for a close misspelling of one of ``choices``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""
