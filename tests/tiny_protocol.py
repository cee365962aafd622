"""A second protocol in a few lines: the test that a new protocol needs no change to the core.

One page is shared by clients that take it when it is free, write their data with a write that
lands later, read it, and give the page back.  ``release_early`` gives it back as soon as the
write is posted (the write may then land on the next owner's data).  Registered with
:func:`~kvproof.model.registry.register`, with its own scenario tables and catalogue
(``tests/tiny/scenarios``), it is checked, shown, replayed, reported and proved through the
ordinary command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvproof.model import Domain, Field, Protocol, Spec, action, invariant, witness

__all__ = ["TinyConfig", "TinyPage", "TINY"]

FREE, WRITING, WRITTEN = 0, 1, 2


@dataclass(frozen=True)
class TinyConfig:
    """How many clients share the page, and whether the page goes back before the write lands."""

    clients: int
    release_early: bool = False


class TinyPage(Spec):
    """The shared page's lifecycle."""

    def __init__(self, cfg: TinyConfig):
        self.cfg = cfg
        self.client = Domain("client", cfg.clients, tuple(f"C{i}" for i in range(cfg.clients)))
        self.holder = Domain("holder", cfg.clients + 1, ("free", *[f"C{i}" for i in range(cfg.clients)]))

    def build_fields(self):
        """The page's holder and data, each client's write and what it read."""
        return [Field("owner", (), self.holder), Field("data", (), self.holder),
                Field("wr", (self.client,), Domain("wr", 3, ("idle", "flying", "landed"))),
                Field("read", (self.client,), Domain("read", 3, ("none", "own", "foreign")))]

    def domain(self, name):
        """The only parameter domain: ``client``."""
        return self.client

    @action("client", "client")
    def client_take(self, s, n, c):
        """A client takes the free page (it has not read yet)."""
        s.require((s.owner == 0) & (s.read[c] == 0) & (s.wr[c] == 0))
        n.owner = c + 1

    @action("client", "client")
    def client_write(self, s, n, c):
        """The owner posts its write; with ``release_early`` it gives the page back at once."""
        s.require((s.owner == c + 1) & (s.wr[c] == 0))
        n.wr[c] = 1
        if self.cfg.release_early:
            n.owner = 0

    @action("network", "client", fair=True)
    def write_lands(self, s, n, c):
        """A posted write lands on the page, whoever holds it now."""
        s.require(s.wr[c] == 1)
        n.wr[c] = 2
        n.data = c + 1

    @action("client", "client", fair=True)
    def client_read(self, s, n, c):
        """A client reads once its write landed (the owner, unless the page went back early),
        and gives the page back if it still holds it."""
        s.require((s.wr[c] == 2) & (s.read[c] == 0))
        if not self.cfg.release_early:
            s.require(s.owner == c + 1)
        n.read[c] = s.ops.ite(s.data == c + 1, 1, 2)
        n.owner = s.ops.ite(s.owner == c + 1, 0, s.owner)

    @invariant
    def reads_only_own_data(self, s):
        """No client reads another client's data."""
        return s.ops.all_(s.read[c] != 2 for c in range(self.cfg.clients))

    @witness
    def sometimes_read(self, s):
        """A client reads."""
        return s.ops.any_(s.read[c] != 0 for c in range(self.cfg.clients))


def _parse(data, fail):
    sizes, engine = data.get("sizes", {}), data.get("engine", {})
    clients = sizes.get("clients")
    if not isinstance(clients, int) or isinstance(clients, bool) or not 1 <= clients <= 4:
        raise fail("[sizes].clients", "a whole number in 1..4", clients)
    early = engine.get("release_early", False)
    if not isinstance(early, bool):
        raise fail("[engine].release_early", "true or false", early)
    return TinyConfig(clients, early)


def _data(cfg: TinyConfig):
    return {"sizes": {"clients": cfg.clients}, "engine": {"release_early": cfg.release_early}}


TINY = Protocol(
    name="tiny",
    title="one shared page (a test protocol)",
    specs={"tiny": lambda: TinyPage},
    config_keys=("sizes", "engine"),
    parse_config=_parse,
    config_data=_data,
    catalogue=lambda: Path(__file__).parent / "tiny" / "scenarios",
)
