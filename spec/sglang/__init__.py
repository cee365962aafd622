"""SGLang's prefill/decode disaggregation: the KV page lifecycle of the request, its transfer
and its release, named after SGLang's own code (``python/sglang/srt/disaggregation/``).

:mod:`.config` (instance parameters and engine flags), :mod:`.scenario_data` (the ``[sizes]``,
``[[requests]]`` and ``[engine]`` tables of a scenario file), :mod:`.state` (the fields and
their codes), :mod:`.protocol` (the actions: :class:`PdProtocol`), :mod:`.claims`,
:mod:`.story` (what a step means in SGLang's terms), :mod:`.symmetry` (interchangeable
requests), :mod:`.v0523` (SGLang 0.5.23 as shipped), ``scenarios/`` (the catalogue),
:mod:`.theorems` and :mod:`.timeout_lemmas` (parametric theorems), :mod:`.simulate` (long
random workloads), :mod:`.conform` (replaying traces on SGLang 0.5.23's own code) and
:mod:`.audit` (a deployment's launch line mapped to a scenario family and checked) and
:mod:`.validate` (the event-log schema and what it shows of each action: ``kvproof validate``).

:data:`PROTOCOL` is what the general layers see (:class:`~kvproof.model.protocol.Protocol`).
"""

from importlib import resources

from kvproof.model.protocol import Protocol
from kvproof.spec.sglang.scenario_data import CONFIG_KEYS, config_data, parse_config

__all__ = ["PROTOCOL", "ALL_SIZES_CLAIMS"]

ALL_SIZES_CLAIMS = ("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
                    "no_source_free_while_read", "exclusive_ownership")
"""The safety claims ``prove --all-sizes`` decides (the all-sizes models state them)."""


def _base():
    from kvproof.spec.sglang.protocol import PdProtocol

    return PdProtocol


def _v0523():
    from kvproof.spec.sglang.v0523 import Sglang0523

    return Sglang0523


def _theorems():
    from kvproof.spec.sglang.theorems import all_theorems

    return all_theorems


def _conform():
    from kvproof.spec.sglang.conform.command import run_conform

    return run_conform


def _audit():
    def run(args, out, bad):
        """A launch line (:mod:`.audit`) or, with ``--manifest``, a deployment's pair (:mod:`.audit_manifest`)."""
        if getattr(args, "manifest", None):
            from kvproof.spec.sglang.audit_manifest import run_manifest

            return run_manifest(args, out, bad)
        from kvproof.spec.sglang.audit import run_audit

        return run_audit(args, out, bad)

    return run


def _audit_releases():
    from kvproof.spec.sglang.audit import RELEASES, ENGINE

    return lambda: [f"{ENGINE}=={v}" for v in RELEASES]


def _validate():
    from kvproof.spec.sglang import validate

    return validate


def _simulate():
    from kvproof.spec.sglang import simulate

    return simulate


def _audit_arguments(parser) -> None:
    """``kvproof audit``'s options that only SGLang's engine has (the other side's attention TP,
    which a prefill or decode line does not state)."""
    parser.add_argument("--peer-tp", metavar="N",
                        help="SGLang: the other side's attention-TP size (default: the same as this line's)")


def _simulate_arguments(parser) -> None:
    """``kvproof simulate``'s options that only SGLang's workload has (its decode pages and
    requests in flight; it imports nothing heavy: the parser is built at start-up)."""
    import argparse

    from kvproof.checker.cli.options import positive_int

    def at_most(most: int, what: str):
        def parse(text: str) -> int:
            v = positive_int(text)
            if v > most:
                raise argparse.ArgumentTypeError(f"expected at most {most} {what}, got {v}")
            return v
        return parse

    parser.add_argument("--pages", type=at_most(200, "pages"), default=64, metavar="D", help="decode pages (default 64)")
    parser.add_argument("--slots", type=at_most(64, "slots"), default=8, metavar="K",
                        help="requests in flight at once (default 8)")


PROTOCOL = Protocol(
    name="sglang",
    title="SGLang PD disaggregation (Mooncake, NIXL, ... backends)",
    specs={"sglang": _base, "sglang-0.5.23": _v0523},
    aliases={"kvproof.spec.sglang_0523:Sglang0523": "sglang-0.5.23"},
    config_keys=CONFIG_KEYS,
    parse_config=parse_config,
    config_data=config_data,
    catalogue=lambda: resources.files("kvproof.spec.sglang").joinpath("scenarios"),
    default=True,
    commands={"theorems": _theorems, "conform": _conform, "simulate": _simulate, "audit": _audit,
              "audit-releases": _audit_releases, "validate": _validate},
    arguments={"audit": _audit_arguments, "simulate": _simulate_arguments},
    all_sizes_claims=ALL_SIZES_CLAIMS,
)
"""The SGLang protocol, registered under the ``kvproof.protocols`` entry-point group."""
