"""Committed counterexamples of the built-in catalogue (ITF JSON) and ``expected.toml``, the
expected verdicts and state counts that the tests re-check."""
