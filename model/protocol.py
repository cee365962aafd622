"""What a protocol hands the general layers: one small, documented interface.

A protocol is a package that describes one serving engine's KV page lifecycle as a
:class:`~.framework.Spec` subclass: one of ``kvproof.spec`` (``spec/sglang/``, ``spec/vllm/``)
or any installed package (``examples/protocols/minipd/`` is one, in under two hundred lines).
The model and the checker never import it; they meet it through a :class:`Protocol` it
registers under the ``kvproof.protocols`` entry-point group (its ``pyproject.toml``), or that
a test registers with :func:`~.registry.register`.  It says:

* which spec classes it offers, under stable names a scenario's ``protocol`` key uses
  (``"sglang"``, ``"sglang-0.5.23"``), with older spellings as aliases;
* which keys of a scenario file are its own and how they become the configuration its spec
  classes are built from, and back: a dataclass's ``[config]`` table (:mod:`.config`), or
  tables it parses itself (``[sizes]``, ``[[requests]]``, ``[engine]``);
* where its built-in scenarios are;
* optionally, commands that only make sense for it (parametric theorems, conformance with the
  real engine's code, a workload simulator), as callables the command line looks up by name;
* optionally, options of its own on a general command (``audit``'s settings that only its
  engine has, ``simulate``'s workload sizes), which the command line adds to that command's
  parser;
* the safety claims ``prove --all-sizes`` decides for a spec of it that has no all-sizes model.

Everything else a general layer needs to know about a protocol - how to narrate a step, how to
name a request or a page, which fields form a page pool - it asks the spec instance itself
through the optional methods of :class:`~.framework.Spec` (:meth:`~.framework.Spec.story`,
:meth:`~.framework.Spec.narration`, :meth:`~.framework.Spec.shown_params`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from kvproof.model.config import ConfigTable

__all__ = ["Protocol"]


@dataclass(frozen=True)
class Protocol:
    """One protocol package, as the general layers see it.

    ``specs`` maps each stable name to the spec class, or to a function returning it (so that
    nothing is imported before it is used); the first name is the protocol's base spec, the
    class engine variants subclass.  The configuration a spec class is built from is either
    ``config``, a dataclass whose fields are the keys of the scenario file's ``[config]`` table
    (:mod:`.config` derives the parser and its inverse), or, for richer tables, the three of
    ``config_keys`` (the scenario file's keys the protocol owns, ``("sizes", "engine")``),
    ``parse_config(data, fail)`` (``data`` holds only those keys; it returns the configuration
    or raises ``fail(key, what, got)`` for the first problem) and ``config_data(config)`` (its
    inverse).  ``catalogue`` is the folder of its built-in ``*.toml`` scenarios (a path or an
    ``importlib.resources`` traversable), or a function returning it.  ``default`` marks the
    protocol a scenario without a ``protocol`` key belongs to.  ``commands`` maps a command
    name (``theorems``, ``conform``, ``simulate``) to a function returning the callable that
    implements it.  ``arguments`` maps a general command's name (``audit``, ``simulate``) to a function that
    adds this protocol's own options to that command's ``argparse`` parser (it imports nothing
    heavy: the parser is built at start-up).  ``all_sizes_claims`` names the safety claims
    ``prove --all-sizes`` checks at a scenario's own size when its spec cannot be lifted to an
    all-sizes model (no :meth:`~.framework.Spec.lift_sorts`, or a refusal; those of the spec's claims it has).
    ``workloads`` maps a Kubernetes kind that deployments of this protocol are written in (a
    custom resource of its own, beyond Kubernetes' and LeaderWorkerSet's) to a function that
    yields, for one object of that kind (a mapping, as ``yaml.safe_load`` gives it), a tuple
    ``(part, role, role_from, pod_template)`` per pod template it holds: ``audit --manifest``
    reads those kinds too.

    A protocol with one spec class and a dataclass configuration needs five arguments::

        PROTOCOL = Protocol(name="minipd", title="one prefill, one decode, one page",
                            specs={"minipd": MiniPd}, config=MiniConfig,
                            catalogue=resources.files(__name__) / "scenarios")
    """

    name: str
    title: str
    specs: Mapping[str, Callable[[], type] | type]
    config_keys: tuple[str, ...] | None = None
    parse_config: Callable[[dict[str, Any], Callable[..., Exception]], Any] | None = None
    config_data: Callable[[Any], dict[str, Any]] | None = None
    catalogue: Callable[[], Any] | Any | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    default: bool = False
    commands: Mapping[str, Callable[[], Callable[..., Any]]] = field(default_factory=dict)
    arguments: Mapping[str, Callable[[Any], None]] = field(default_factory=dict)
    all_sizes_claims: tuple[str, ...] = ()
    config: type | None = None
    workloads: Mapping[str, Callable[[dict], Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Derive what the arguments leave implicit: the ``[config]`` table from ``config``,
        a factory for a spec class given directly, a function for a catalogue folder given
        directly.  ``TypeError`` (at once, in the protocol's own package) for a protocol
        that gives both or neither of the two ways of reading its configuration."""
        own = (self.config_keys, self.parse_config, self.config_data)
        if self.config is not None:
            if any(x is not None for x in own):
                raise TypeError(f"protocol {self.name}: give config=<dataclass> or config_keys, parse_config "
                                "and config_data, not both")
            table = ConfigTable(self.config)
            object.__setattr__(self, "config_keys", table.keys)
            object.__setattr__(self, "parse_config", table.parse)
            object.__setattr__(self, "config_data", table.data)
        elif any(x is None for x in own):
            raise TypeError(f"protocol {self.name}: give config=<dataclass>, or all of config_keys, parse_config "
                            "and config_data")
        if not self.specs:
            raise TypeError(f"protocol {self.name}: specs names no spec class")
        object.__setattr__(self, "specs", {name: _factory(make) for name, make in self.specs.items()})
        if self.catalogue is not None and not callable(self.catalogue):
            folder = self.catalogue
            object.__setattr__(self, "catalogue", lambda: folder)

    @property
    def base_name(self) -> str:
        """The stable name of the base spec (the first of :attr:`specs`)."""
        return next(iter(self.specs))

    def base(self) -> type:
        """The base spec class: every engine variant of this protocol subclasses it."""
        return self.specs[self.base_name]()

    def command(self, name: str) -> Callable[..., Any] | None:
        """The callable implementing command ``name`` for this protocol, or ``None``."""
        make = self.commands.get(name)
        return make() if make is not None else None


def _factory(make: Callable[[], type] | type) -> Callable[[], type]:
    """``make`` as a function returning the spec class (a class given directly is wrapped)."""
    if isinstance(make, type):
        return lambda: make
    return make
