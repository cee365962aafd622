"""What a protocol hands the general layers: one small, documented interface.

A protocol is a package of ``kvproof.spec`` (``spec/sglang/`` today) that describes one
serving engine's KV page lifecycle as a :class:`~.framework.Spec` subclass.  The model and
the checker never import it; they meet it through a :class:`Protocol` it registers under the
``kvproof.protocols`` entry-point group (``pyproject.toml``), or that a test registers with
:func:`~.registry.register`.  It says:

* which spec classes it offers, under stable names a scenario's ``protocol`` key uses
  (``"sglang"``, ``"sglang-0.5.23"``), with older spellings as aliases;
* which keys of a scenario file are its own (``[sizes]``, ``[[requests]]``, ``[engine]``) and
  how they become the configuration its spec classes are built from, and back;
* where its built-in scenarios are;
* optionally, commands that only make sense for it (parametric theorems, conformance with the
  real engine's code, a workload simulator), as callables the command line looks up by name;
* optionally, options of its own on a general command (``audit``'s settings that only its
  engine has), which the command line adds to that command's parser;
* the safety claims ``prove --all-sizes`` decides for a spec of it that has no all-sizes model.

Everything else a general layer needs to know about a protocol - how to narrate a step, how to
name a request or a page, which fields form a page pool - it asks the spec instance itself
through the optional methods of :class:`~.framework.Spec` (:meth:`~.framework.Spec.story`,
:meth:`~.framework.Spec.pools`, :meth:`~.framework.Spec.shown_params`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Protocol"]


@dataclass(frozen=True)
class Protocol:
    """One protocol package, as the general layers see it.

    ``specs`` maps each stable name to a function returning the class (so that nothing is
    imported before it is used); the first name is the protocol's base spec, the class engine
    variants subclass.  ``parse_config(data, fail)`` turns the protocol's own keys of a
    scenario file (``data`` holds only those) into its configuration, raising ``fail(key,
    what, got)`` for the first problem; ``config_data(config)`` is its inverse.  ``catalogue``
    returns the folder of its built-in ``*.toml`` scenarios (an ``importlib.resources``
    traversable).  ``default`` marks the protocol a scenario without a ``protocol`` key
    belongs to.  ``commands`` maps a command name (``theorems``, ``conform``, ``simulate``) to
    a function returning the callable that implements it.  ``arguments`` maps a general
    command's name (``audit``) to a function that adds this protocol's own options to that
    command's ``argparse`` parser (it imports nothing heavy: the parser is built at start-up).
    ``all_sizes_claims`` names the safety claims ``prove --all-sizes`` checks at a scenario's own
    size when its spec has no all-sizes model (:meth:`~.framework.Spec.all_sizes`; those of the
    spec's claims it has).
    """

    name: str
    title: str
    specs: Mapping[str, Callable[[], type]]
    config_keys: tuple[str, ...]
    parse_config: Callable[[dict[str, Any], Callable[..., Exception]], Any]
    config_data: Callable[[Any], dict[str, Any]]
    catalogue: Callable[[], Any] | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    default: bool = False
    commands: Mapping[str, Callable[[], Callable[..., Any]]] = field(default_factory=dict)
    arguments: Mapping[str, Callable[[Any], None]] = field(default_factory=dict)
    all_sizes_claims: tuple[str, ...] = ()

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
