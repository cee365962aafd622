"""Headless Chromium for the tests that look at what a person sees (not a test module).

The tests that need it skip with a reason when no Chromium is installed, except where
``KVPROOF_REQUIRE_BROWSER=1`` (``.ci/run`` sets it): there a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["CHROMIUM", "run_chromium"]

CHROMIUM = os.environ.get("KVPROOF_CHROMIUM") or next(
    (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
REQUIRE_BROWSER = os.environ.get("KVPROOF_REQUIRE_BROWSER") == "1"


def run_chromium(profile: Path, *args: str) -> str:
    """Run headless Chromium with a fresh profile and the flags it needs on a closed network;
    returns its stdout (the DOM, with ``--dump-dom``)."""
    if CHROMIUM is None:
        if REQUIRE_BROWSER:
            pytest.fail("KVPROOF_REQUIRE_BROWSER=1 but no Chromium found (apt-get install chromium)")
        pytest.skip("no headless Chromium here (apt-get install chromium); CI sets KVPROOF_REQUIRE_BROWSER=1")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", f"--user-data-dir={profile}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
