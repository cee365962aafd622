"""What a small protocol may leave implicit: its configuration as a dataclass (the scenario's
``[config]`` table, :mod:`kvproof.model.config`), a spec class or a catalogue folder given
directly to :class:`~kvproof.model.protocol.Protocol`, and :meth:`Spec.domain` derived from the
fields' index domains.  The shipped protocols spell all of these out, and keep doing so."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from kvproof.model import Domain, Field, Protocol, Spec, SpecError, action
from kvproof.model.config import ConfigTable
from kvproof.model.registry import protocol_named
from kvproof.model.scenario import ScenarioError, parse_scenario


@dataclass(frozen=True)
class Settings:
    """Every kind of setting a [config] table holds."""

    requests: int
    early: bool = False
    rate: float = 0.5
    label: str = "x"
    policy: Literal["hold", "free"] = "hold"
    ranks: tuple = field(default=(1,), init=False)  # not a setting: init=False

    def __post_init__(self):
        if not 1 <= self.requests <= 3:
            raise ValueError(f"requests: expected a whole number in 1..3, got {self.requests}")


class Two(Spec):
    """Two requests, a phase each, and one scalar: the ``req`` domain is found from ``phase``."""

    def __init__(self, cfg=None):
        self.req = Domain("req", 2, ("R0", "R1"))

    def build_fields(self):
        return [Field("phase", (self.req,), Domain("phase", 2)), Field("turn", (), Domain("turn", 2))]

    @action("decode", "req")
    def decode_step(self, s, n, r):
        s.require(s.phase[r] == 0)
        n.phase[r] = 1


PROTO = Protocol(name="settings-test", title="a test", specs={"two": Two}, config=Settings)


def parse(table, origin="f.toml"):
    data = {"name": "s", "protocol": "two", **({"config": table} if table is not None else {})}
    from kvproof.model.registry import register, unregister
    register(PROTO)
    try:
        return parse_scenario(data, origin)
    finally:
        unregister(PROTO.name)


def test_the_config_table_is_read_into_the_dataclass_and_written_back():
    sc = parse({"requests": 2, "early": True, "rate": 1, "policy": "free"})
    assert sc.config == Settings(2, True, 1.0, "x", "free") and isinstance(sc.config.rate, float)
    assert PROTO.config_keys == ("config",)
    assert PROTO.config_data(sc.config) == {"config": {"requests": 2, "early": True, "rate": 1.0, "label": "x",
                                                        "policy": "free"}}
    again = parse(PROTO.config_data(sc.config)["config"])
    assert again.config == sc.config


@pytest.mark.parametrize("table, message", [
    ({"requests": "two"}, "f.toml: [config].requests: expected a whole number, got 'two'"),
    ({"requests": True}, "f.toml: [config].requests: expected a whole number, got True"),
    ({"requests": 2, "early": 1}, "f.toml: [config].early: expected true or false, got 1"),
    ({"requests": 2, "rate": True}, "f.toml: [config].rate: expected a number, got True"),
    ({"requests": 2, "label": 3}, "f.toml: [config].label: expected a string, got 3"),
    ({"requests": 2, "policy": "drop"}, 'f.toml: [config].policy: expected one of "hold", "free", got \'drop\''),
    ({"requests": 2, "reqests": 2}, "f.toml: [config].reqests: expected one of the settings requests, early, rate, "
                                    "label, policy; did you mean requests?"),
    ({"requests": 2, "ranks": [1]}, "f.toml: [config].ranks: expected one of the settings"),
    ({"early": True}, "f.toml: [config].requests: expected a whole number (it has no default)"),
    (None, "f.toml: [config].requests: expected a whole number (it has no default)"),
    ({"requests": 9}, "f.toml: [config]: requests: expected a whole number in 1..3, got 9"),
    ("requests", "f.toml: [config]: expected a table of requests, early, rate, label, policy, got 'requests'"),
])
def test_each_problem_is_one_line_naming_the_key(table, message):
    with pytest.raises(ScenarioError) as e:
        parse(table)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_class_that_cannot_be_a_table_is_refused_when_the_protocol_is_made():
    with pytest.raises(TypeError, match="expected a dataclass"):
        ConfigTable(dict)

    @dataclass(frozen=True)
    class Listy:
        sizes: list

    with pytest.raises(TypeError, match=r"Listy.sizes: a \[config\] setting is bool, int, float, str or Literal"):
        Protocol(name="x", title="x", specs={"two": Two}, config=Listy)


def test_config_and_a_parser_of_its_own_are_one_or_the_other():
    with pytest.raises(TypeError, match="not both"):
        Protocol(name="x", title="x", specs={"two": Two}, config=Settings, config_keys=("config",))
    with pytest.raises(TypeError, match="or all of config_keys, parse_config and config_data"):
        Protocol(name="x", title="x", specs={"two": Two}, config_keys=("sizes",))
    with pytest.raises(TypeError, match="specs names no spec class"):
        Protocol(name="x", title="x", specs={}, config=Settings)


def test_a_spec_class_and_a_catalogue_folder_may_be_given_directly(tmp_path):
    lazy = Protocol(name="x", title="x", specs={"two": lambda: Two}, config=Settings, catalogue=lambda: tmp_path)
    direct = Protocol(name="x", title="x", specs={"two": Two}, config=Settings, catalogue=tmp_path)
    for p in (lazy, direct):
        assert p.base() is Two and p.specs["two"]() is Two and p.catalogue() == tmp_path
    assert Protocol(name="x", title="x", specs={"two": Two}, config=Settings).catalogue is None


def test_the_shipped_protocols_keep_their_own_tables():
    for name, keys in (("sglang", ("sizes", "requests", "engine")), ("vllm", None)):
        p = protocol_named(name)
        assert p.config is None and "config" not in p.config_keys
        assert keys is None or p.config_keys == keys
        assert isinstance(p.catalogue(), Path) or hasattr(p.catalogue(), "iterdir")


def test_a_parameter_domain_is_found_among_the_fields_index_domains():
    spec = Two()
    assert spec.domain("req") is spec.req
    assert [(i.name, i.args) for i in spec.instances] == [("decode_step", (0,)), ("decode_step", (1,))]
    with pytest.raises(SpecError, match=r"no field of the state is indexed by a domain called 'page' "
                                        r"\(those that are: req\)"):
        spec.domain("page")


def test_two_different_index_domains_of_one_name_are_refused():
    class Clash(Two):
        def build_fields(self):
            return [*super().build_fields(), Field("held", (Domain("req", 3),), Domain("held", 2))]

    with pytest.raises(SpecError, match="two different index domains are called 'req'"):
        Clash().domain("req")


def test_entry_points_are_ordered_kvproofs_own_first_then_by_package_whatever_the_folder_order():
    """Python lists packages in folder order; the catalogue's order must not depend on it."""
    from types import SimpleNamespace

    from kvproof.model.registry import entry_point_order

    def ep(name, dist):
        return SimpleNamespace(name=name, dist=SimpleNamespace(name=dist))

    found = [ep("minipd", "kvproof-minipd"), ep("zeta", "Aaa_Proto"), ep("sglang", "kvproof"), ep("vllm", "kvproof"),
             ep("made", None)]
    found[-1].dist = None  # an entry point made by hand, with no package
    assert [e.name for e in entry_point_order(found)] == ["sglang", "vllm", "made", "zeta", "minipd"]
    assert [e.name for e in entry_point_order(found[::-1])] == ["vllm", "sglang", "made", "zeta", "minipd"]
