"""Engines, results, traces, rendering and the command line."""
