"""The two premises of the Dynamo spec's shutdown actions, on Dynamo's own code
(``dynamo.common.utils.graceful_shutdown`` of ``ai-dynamo`` 1.6.1, which imports on a CPU-only
machine): without a drain callback the runtime is shut down right after the grace period, and a
drain that outlasts its budget does not hold the shutdown back (``operator_sigterm`` then
``prefill_shutdown_cleanup`` with ``drain = "none"`` or ``transfer_outlasts_drain``).  Skipped where
``ai-dynamo`` is not installed (``pip install --no-deps ai-dynamo==1.6.1 ai-dynamo-runtime==1.6.1``)."""

import asyncio

import pytest

gs = pytest.importorskip("dynamo.common.utils.graceful_shutdown")


class Endpoint:
    """An endpoint that records its unregistering."""

    def __init__(self, log):
        self.log = log

    async def unregister_endpoint_instance(self):
        self.log.append("unregister")


class Runtime:
    """A runtime that records its shutdown."""

    def __init__(self, log):
        self.log = log

    def shutdown(self):
        self.log.append("runtime.shutdown")


def shut_down(drain=None, cleanup=True):
    """The order of what ``graceful_shutdown_with_discovery`` did, on a fresh start flag."""
    gs._shutdown_started.clear()
    log = []

    async def clean():
        log.append("cleanup")

    asyncio.run(gs.graceful_shutdown_with_discovery(Runtime(log), [Endpoint(log)], grace_period_s=0,
                                                    drain_callback=drain, cleanup_callback=clean if cleanup else None))
    return log


def test_without_a_drain_callback_the_memory_goes_right_after_the_grace_period():
    assert shut_down() == ["unregister", "cleanup", "runtime.shutdown"]


def test_a_drain_that_outlasts_its_budget_does_not_hold_the_shutdown(monkeypatch):
    assert gs._DEFAULT_DRAIN_TIMEOUT_SECS == 30.0  # 1.6.1's budget, the "30 s" the scenarios cite
    monkeypatch.setattr(gs, "_DEFAULT_DRAIN_TIMEOUT_SECS", 0.05)
    log = []

    async def never_idle():  # a transfer that never ends
        log.append("drain")
        await asyncio.sleep(3600)

    assert shut_down(never_idle)[-2:] == ["cleanup", "runtime.shutdown"]
    assert log == ["drain"]
