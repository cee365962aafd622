"""vLLM 0.33.0's prefill/decode disaggregation over NIXL, pull mode (``NixlPullConnector``) and
push mode (``NixlPushConnector``): the KV block lifecycle of a request, its READ or WRITE, its
lease and its release, named after vLLM's own
code (``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``, ``vllm/v1/core/sched/``).

:mod:`.config` (the instance, its knobs and the scenario tables), :mod:`.state` (fields and
codes), :mod:`.protocol` (the actions: :class:`~.protocol.VllmPd`), :mod:`.claims`,
:mod:`.story` (what a step means in vLLM's terms), :mod:`.prefix_cache` (decode's prefix
block shared by live requests, its reference count, eviction and failed-load recovery: the spec
``vllm-prefix-cache``, model-only), :mod:`.multi_connector` (decode's ``MultiConnector`` of NIXL
and LMCache: an aborted request's two transfer completions, the spec ``vllm-multi-connector``,
model-only), ``scenarios/`` (the catalogue), :mod:`.audit`
(a deployment's launch line mapped to a scenario family and checked: ``kvproof audit vllm==...``),
:mod:`.validate` (the event-log schema, what a log shows of each action, and :class:`~.validate.VllmStream`,
the spec as a stream of requests through reused slots: ``kvproof validate``).  Conformance
with vLLM's real code: :mod:`.conform` (``kvproof conform``, pull mode on vLLM 0.33.0).

:data:`PROTOCOL` is what the general layers see (:class:`~kvproof.model.protocol.Protocol`).
"""

from importlib import resources

from kvproof.model.protocol import Protocol
from kvproof.spec.vllm.config import CONFIG_KEYS, config_data, parse_config

__all__ = ["PROTOCOL"]


def _base():
    from kvproof.spec.vllm.protocol import VllmPd

    return VllmPd


def _prefix_cache():
    from kvproof.spec.vllm.prefix_cache import VllmPrefixCache

    return VllmPrefixCache


def _multi_connector():
    from kvproof.spec.vllm.multi_connector import VllmMultiConnector

    return VllmMultiConnector


def _stream():
    from kvproof.spec.vllm.validate import VllmStream

    return VllmStream


def _validate():
    from kvproof.spec.vllm import validate

    return validate


def _audit():
    def run(args, out, bad):
        """A launch line (:mod:`.audit`) or, with ``--manifest``, a deployment's pair (:mod:`.audit_manifest`)."""
        if getattr(args, "manifest", None):
            from kvproof.spec.vllm.audit_manifest import run_manifest

            return run_manifest(args, out, bad)
        from kvproof.spec.vllm.audit import run_audit

        return run_audit(args, out, bad)

    return run


def _audit_releases():
    from kvproof.spec.vllm.audit import known_engines

    return known_engines


def _conform():
    from kvproof.spec.vllm.conform.command import run_conform

    return run_conform


def _audit_arguments(parser) -> None:
    """``kvproof audit``'s options that only vLLM's engine has (the deployment's time bounds)."""
    parser.add_argument("--arrival-bound", metavar="S",
                        help="vLLM: the longest the router takes to hand a finished prefill to decode, seconds "
                             "(default: unbounded)")
    parser.add_argument("--transfer-bound", metavar="S",
                        help="vLLM: the longest from decode receiving a request to the end of its READ (push: "
                             "WRITE), engine-loop pauses included, seconds (default: unbounded)")
    parser.add_argument("--no-decode-stalls", action="store_true",
                        help="vLLM: assume decode's engine loop never pauses long enough to miss a heartbeat")


PROTOCOL = Protocol(
    name="vllm",
    title="vLLM 0.33.0 PD disaggregation (NIXL connector, pull and push mode)",
    specs={"vllm": _base, "vllm-stream": _stream, "vllm-prefix-cache": _prefix_cache,
           "vllm-multi-connector": _multi_connector},
    config_keys=CONFIG_KEYS,
    parse_config=parse_config,
    config_data=config_data,
    catalogue=lambda: resources.files("kvproof.spec.vllm").joinpath("scenarios"),
    commands={"audit": _audit, "audit-releases": _audit_releases, "validate": _validate,
              "conform": _conform},
    arguments={"audit": _audit_arguments},
    # a vLLM spec without an all-sizes model (push mode, a subclass): the claims checked at its
    # own size before it is reported inconclusive (the model of :mod:`.allsizes` states one more,
    # pages_conserved)
    all_sizes_claims=("decode_reads_only_own_pages", "no_cross_tenant_read", "no_write_after_release",
                      "no_source_free_while_read", "exclusive_ownership"),
)
"""The vLLM protocol, registered under the ``kvproof.protocols`` entry-point group."""
