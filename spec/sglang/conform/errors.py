"""The one error a conformance run reports as bad input (CLI exit code 3)."""

from __future__ import annotations

__all__ = ["ConformError"]


class ConformError(ValueError):
    """A trace or scenario the harness cannot run (one line: which flag or size, and why)."""
