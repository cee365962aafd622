"""A protocol's configuration written as a dataclass: the ``[config]`` table of a scenario file.

A protocol whose configuration is a handful of plain settings declares it as a dataclass and
hands the class to :class:`~.protocol.Protocol` (``config=MiniConfig``).  :class:`ConfigTable`
derives from it what the general layers need: the scenario key the protocol owns
(``[config]``), the parser of that table (each key one field, checked against the field's type;
a missing key takes the field's default) and its inverse (what traces and certificates store)::

    @dataclass(frozen=True)
    class MiniConfig:
        requests: int = 2          # a field's type: bool, int, float, str or Literal[...]
        free_on_abort: bool = False

        def __post_init__(self):   # what the types cannot say: raise ValueError, one line
            if not 1 <= self.requests <= 3:
                raise ValueError(f"requests: expected a whole number in 1..3, got {self.requests}")

    # in a scenario file
    [config]
    requests = 2
    free_on_abort = true

Every problem is one line naming the file and the key (``[config].requests: expected a whole
number, got 'two'``); a ``ValueError`` from the dataclass is reported as ``[config]: <its
message>``.  A protocol with richer tables (lists of requests, several tables) writes its own
``parse_config`` and ``config_data`` instead.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Literal

from kvproof.model.suggest import did_you_mean

__all__ = ["ConfigTable", "TABLE"]

TABLE = "config"
"""The scenario file's table a dataclass configuration is read from."""

_PLAIN = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


@dataclasses.dataclass(frozen=True)
class _Setting:
    """One field of the configuration: its name, what it accepts and its default (if any)."""

    name: str
    kind: Any
    default: Any

    def what(self) -> str:
        """What the key accepts, in the words of an error message."""
        if typing.get_origin(self.kind) is Literal:
            return "one of " + ", ".join(_toml(c) for c in typing.get_args(self.kind))
        return _PLAIN[self.kind]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (as TOML read it) has this setting's type."""
        if typing.get_origin(self.kind) is Literal:
            return any(type(value) is type(c) and value == c for c in typing.get_args(self.kind))
        if self.kind is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, self.kind)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _supported(kind: Any) -> bool:
    if typing.get_origin(kind) is Literal:
        return all(type(c) in (bool, int, str) for c in typing.get_args(kind))
    return kind in _PLAIN


class ConfigTable:
    """The ``[config]`` table of a dataclass configuration ``cls``: :attr:`keys`, :meth:`parse`
    and :meth:`data` are what :class:`~.protocol.Protocol` takes as ``config_keys``,
    ``parse_config`` and ``config_data``.  ``TypeError`` at once for a class that is not a
    dataclass, or a field of a type a TOML table cannot hold."""

    keys = (TABLE,)

    def __init__(self, cls: type):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"config={cls!r}: expected a dataclass (@dataclass(frozen=True) class ...)")
        hints = typing.get_type_hints(cls)
        self.cls = cls
        self.settings: list[_Setting] = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            kind = hints.get(f.name)
            if not _supported(kind):
                raise TypeError(f"{cls.__name__}.{f.name}: a [config] setting is bool, int, float, str or "
                                f"Literal[...] of those, got {kind!r}")
            default = f.default
            if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                default = f.default_factory()  # type: ignore[misc]
            self.settings.append(_Setting(f.name, kind, default))

    def parse(self, data: dict[str, Any], fail: Callable[..., Exception]) -> Any:
        """The configuration the scenario's ``[config]`` table describes (``data`` holds the
        protocol's keys of the file); ``fail`` reports the first problem."""
        table = data.get(TABLE, {})
        names = [s.name for s in self.settings]
        if not isinstance(table, dict):
            raise fail(f"[{TABLE}]", "a table of " + ", ".join(names), table)
        for key in table:
            if key not in names:
                raise fail(f"[{TABLE}].{key}", "one of the settings " + ", ".join(names) + did_you_mean(key, names))
        values = {}
        for s in self.settings:
            if s.name not in table:
                if s.default is dataclasses.MISSING:
                    raise fail(f"[{TABLE}].{s.name}", f"{s.what()} (it has no default)")
                continue
            value = table[s.name]
            if not s.accepts(value):
                raise fail(f"[{TABLE}].{s.name}", s.what(), value)
            values[s.name] = float(value) if s.kind is float else value
        try:
            return self.cls(**values)
        except ValueError as e:
            raise fail.problem(f"[{TABLE}]", " ".join(str(e).split()) or type(e).__name__) from None

    def data(self, config: Any) -> dict[str, Any]:
        """The ``[config]`` table of ``config`` (every setting, defaults included)."""
        return {TABLE: {s.name: getattr(config, s.name) for s in self.settings}}
