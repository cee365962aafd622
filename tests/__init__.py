"""kvproof's test suite (pytest + hypothesis), one file per module."""
