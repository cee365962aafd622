"""The executable reference: the spec compiled and run on concrete states."""
