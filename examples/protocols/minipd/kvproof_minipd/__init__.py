"""minipd: a third protocol for kvproof, installed as its own package.

kvproof finds :data:`PROTOCOL` through the ``kvproof.protocols`` entry point this package's
``pyproject.toml`` declares; scenarios name the protocol ``minipd``, and the package's own
scenarios (``scenarios/*.toml``) join kvproof's catalogue.
"""

from importlib import resources

from kvproof.model import Protocol

from kvproof_minipd.spec import MiniPd, MiniPdConfig

__all__ = ["PROTOCOL"]

PROTOCOL = Protocol(
    name="minipd",
    title="one prefill, one decode, one KV page, abort (an example protocol package)",
    specs={"minipd": MiniPd},
    config=MiniPdConfig,
    catalogue=resources.files(__name__) / "scenarios",
)
"""The protocol, registered under the ``kvproof.protocols`` entry-point group."""
