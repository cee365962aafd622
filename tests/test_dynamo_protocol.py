"""The Dynamo protocol (spec/dynamo/): it registers itself, its scenarios keep their verdicts,
and each fix it models is the guard that makes the difference (a mutant without it is caught)."""

import pytest

from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.model.registry import protocol_named
from kvproof.model.scenario import builtin_names
from kvproof.spec.dynamo.config import DynamoConfig
from kvproof.spec.dynamo.protocol import DynamoPd
from kvproof.spec.dynamo.state import P_COMMITTED, P_FREED, P_HELD, P_RUNNING, W_DOWN, W_DRAINING

DYNAMO = ("dynamo-cancel-linked-prefill", "dynamo-cancel-unlinked-prefill", "dynamo-cancel-dispatch-dropped",
          "dynamo-trtllm-precommit-cancel", "dynamo-vllm-shutdown-no-drain", "dynamo-trtllm-shutdown-drain",
          "dynamo-shutdown-drain-outlasted")


def hits(spec, claim: str) -> tuple[bool, int]:
    """Whether a complete search of ``spec`` breaks ``claim`` (an invariant), and the states it saw."""
    m = Machine(spec)
    i = [c.name for c in m.claims].index(claim)
    ex = explore(m, claims=[i])
    assert ex.complete
    return i in ex.hit_at, ex.stats.states


def test_the_protocol_is_registered_with_its_catalogue():
    assert protocol_named("dynamo").base() is DynamoPd
    assert [n for n in builtin_names() if n.startswith("dynamo-")] == list(DYNAMO)


def test_the_unlinked_prefill_context_is_the_fix_of_7489():
    fixed = DynamoConfig(cancel_reaches_prefill=False, kv_transfer_timeout=False)
    before = DynamoConfig(cancel_reaches_prefill=True, kv_transfer_timeout=False)
    assert hits(DynamoPd(fixed), "no_orphaned_blocks") == (False, 169)
    assert hits(DynamoPd(before), "no_orphaned_blocks") == (True, 169)
    assert hits(DynamoPd(before), "quiescent_holds_nothing")[0]
    # the transfer timeout frees the blocks, so nothing is held where nothing moves, but they were orphaned
    assert not hits(DynamoPd(DynamoConfig(cancel_reaches_prefill=True)), "quiescent_holds_nothing")[0]


def test_one_request_is_enough_for_each_leak():
    one = DynamoConfig(requests=1, cancel_reaches_prefill=True, kv_transfer_timeout=False)
    assert hits(DynamoPd(one), "no_orphaned_blocks")[0]
    assert hits(DynamoPd(DynamoConfig(requests=1, dispatch_decode_after_cancel=False)), "no_orphaned_blocks")[0]


class TimeoutUnderRead(DynamoPd):
    """A mutant: the transfer timeout fires for any committed request, even one a READ is reading."""

    def prefill_kv_transfer_timeout(self, s, n, r):
        s.require(self.cfg.kv_transfer_timeout)
        s.require((s.pf[r] == P_COMMITTED) & (s.worker != W_DOWN))
        n.pf[r] = P_FREED


class DrainIgnoresHeld(DynamoPd):
    """A mutant of the until_idle drain that waits only for requests still running (not committed ones)."""

    def prefill_shutdown_cleanup(self, s, n):
        s.require(s.worker == W_DRAINING)
        s.require(s.ops.all_(s.pf[r] != P_RUNNING for r in self.req))
        n.worker = W_DOWN
        for r in self.req:
            n.pf[r] = s.ops.ite(s.ops.is_in(s.pf[r], P_HELD), P_FREED, s.pf[r])


def test_mutants_of_the_timeout_and_the_drain_are_caught():
    cfg = DynamoConfig()
    assert not hits(DynamoPd(cfg), "no_source_free_while_read")[0]
    assert hits(TimeoutUnderRead(cfg), "no_source_free_while_read")[0]
    drain = DynamoConfig(shutdown=True, drain="until_idle")
    assert hits(DynamoPd(drain), "no_source_free_while_read") == (False, 363)
    assert hits(DrainIgnoresHeld(drain), "no_source_free_while_read")[0]
    assert hits(DynamoPd(DynamoConfig(shutdown=True)), "decode_reads_only_own_pages") == (True, 627)


@pytest.mark.parametrize("bad, message", [
    (dict(requests=4), "requests: expected a whole number in 1..3, got 4"),
    (dict(drain="until_idle"), "drain, transfer_outlasts_drain: only with shutdown = true"),
])
def test_a_bad_configuration_is_refused(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        DynamoConfig(**bad)
