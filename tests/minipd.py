"""The example protocol package, ``examples/protocols/minipd/``, for the in-process tests: imported
from its own directory (as an installed copy would be imported) and registered for one test at a
time by :func:`registered`.  ``tests/test_protocol_package.py`` installs it for real."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from kvproof.model.registry import register, unregister

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "protocols" / "minipd"
if str(EXAMPLE) not in sys.path:
    sys.path.append(str(EXAMPLE))

from kvproof_minipd import PROTOCOL  # noqa: E402
from kvproof_minipd.spec import ABORTED, MiniPd, MiniPdConfig, owned_by  # noqa: E402

__all__ = ["EXAMPLE", "PROTOCOL", "MiniPd", "MiniPdConfig", "ABORTED", "owned_by", "registered"]


@contextmanager
def registered():
    """The example protocol registered (its catalogue joins the built-in one) while inside."""
    register(PROTOCOL)
    try:
        yield PROTOCOL
    finally:
        unregister(PROTOCOL.name)
