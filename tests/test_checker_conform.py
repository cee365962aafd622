"""checker/conform.py's command shell (run_on_engine): bad input is refused in one line before
the real engine is imported; the protocol's driver runs only after a successful load."""

from __future__ import annotations

import argparse

import pytest

from kvproof.checker.conform import run_on_engine
from kvproof.model.scenario import builtin


class Bad(Exception):
    pass


class Unavailable(Exception):
    pass


def _args(*targets, engine=None, random=0):
    return argparse.Namespace(targets=list(targets), engine=engine, random=random, seed=0, traces="/nonexistent")


def _run(args, load, driver=None, family="sglang"):
    return run_on_engine(args, builtin, None, Bad, None, engine="eng==1", family=family, default="nothing-*",
                         load=load, unavailable=Unavailable, error=RuntimeError,
                         driver=driver or (lambda: pytest.fail("the driver ran")))


def _never():
    pytest.fail("the engine was imported before the input was checked")


def test_a_scenario_of_another_protocol_is_refused_before_the_import():
    with pytest.raises(Bad, match=r"^conform: vllm-pull-heartbeat is a scenario of the vllm protocol; run it "
                                  r"separately from the eng==1 targets$"):
        _run(_args("vllm-pull-heartbeat"), _never)
    with pytest.raises(Bad, match=r"sglang-0.5.23-mooncake is a scenario of the sglang protocol"):
        _run(_args("sglang-0.5.23-mooncake"), _never, family="vllm")


def test_another_engine_is_refused_and_a_missing_engine_is_one_line():
    with pytest.raises(Bad, match=r"^--engine eng==2: only eng==1 is supported for sglang targets$"):
        _run(_args("sglang-0.5.23-mooncake", engine="eng==2"), _never)

    def missing():
        raise Unavailable("eng is not installed")
    with pytest.raises(Bad, match=r"^conform: eng is not installed$"):
        _run(_args("sglang-0.5.23-mooncake"), missing)


def test_a_harness_error_is_one_line_and_nothing_to_replay_is_refused():
    loaded = []
    with pytest.raises(Bad, match="no stored counterexample to replay"):
        _run(_args("sglang-0.5.23-mooncake"), lambda: loaded.append(1), driver=lambda: argparse.Namespace(engine="eng==1"))
    assert loaded == [1]

    def broken():
        raise RuntimeError("the harness broke")
    with pytest.raises(Bad, match=r"^conform: the harness broke$"):
        _run(_args("sglang-0.5.23-mooncake", random=3), lambda: None, driver=broken)
