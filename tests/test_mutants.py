"""Mutants: deliberately broken engines that the checker must catch.

Each mutant is a small override of the one spec (or a flag flipped back to a buggy value) on a
scenario whose correct engine is verified.  A mutant that survives means a claim is too weak.
"""

from dataclasses import replace

import pytest

from kvproof.checker.explicit import explore
from kvproof.model.machine import Machine
from kvproof.spec.pd import PdProtocol
from kvproof.spec.pd_state import ACK_DRAIN, D_ENDED, D_HELD, FREE, OUT_SUCCESS, P_ENDED, PAB_ACKED, PAB_RECEIVED, READ_OWN
from kvproof.spec.scenario import builtin


class AckBeforeDrain(PdProtocol):
    """Prefill sends the drain ack as soon as ABORT arrives, before its writes drained."""

    def prefill_drain_ack(self, s, n, r, pr):
        o = s.ops
        s.require(o.eq(s.p_abort[r, pr], PAB_RECEIVED))
        n.p_abort[r, pr] = PAB_ACKED
        n.ack[r, pr] = ACK_DRAIN


class ReleaseWithoutAck(PdProtocol):
    """Deferred release that does not wait for anything."""

    def decode_release_deferred(self, s, n, r):
        o = s.ops
        s.require(o.eq(s.d_phase[r], D_HELD))
        n.d_phase[r] = D_ENDED
        self._release_decode(s, n, r)


class FreeSourceOnFailure(PdProtocol):
    """Prefill frees source pages on failure whatever the flag says."""

    def prefill_transfer_failed(self, s, n, r, pr):
        super().prefill_transfer_failed(s, n, r, pr)
        self._release_source(s, n, r)


class SkipChecksumCompare(PdProtocol):
    """The checksum is computed but never compared: every commit succeeds."""

    @property
    def checksum_active(self):
        return False


class AllocateOwnedPages(PdProtocol):
    """The allocator hands out page 0 for every chunk, owned or not."""

    def _allocate(self, s, n, r, k, owner, table, size, content=None):
        if owner != "owner":
            return super()._allocate(s, n, r, k, owner, table, size, content)
        for c in range(k):
            n.dest[r, c] = 0
        n.owner[0] = r + 1


class ReleaseForgetsLastPage(PdProtocol):
    """Release frees every destination page but the last."""

    def _release_decode(self, s, n, r, when=True):
        o = s.ops
        for c in range(self.pages(r) - 1):
            p = s.dest[r, c]
            n.owner[p] = o.ite(o.and_(when, o.eq(s.owner[p], r + 1)), FREE, s.owner[p])


class SuccessWithoutCommitCheck(PdProtocol):
    """Decode commits without waiting for the transfer's conclusion."""

    def decode_commit(self, s, n, r):
        o = s.ops
        s.require(o.eq(s.d_phase[r], 2))
        n.outcome[r] = OUT_SUCCESS
        n.read[r] = READ_OWN
        n.d_phase[r] = D_ENDED
        self._release_decode(s, n, r)


def _flag(scenario, **flags):
    sc = builtin(scenario)
    return replace(sc.config, engine=replace(sc.config.engine, **flags))


MUTANTS = [
    # (name, the verified scenario it breaks, the mutant spec, the claim that must then fail)
    ("drop the admission guard", "v0.5.22", PdProtocol(_flag("v0.5.22", reject_at_prefill_door=False,
     reject_at_decode_door=False, retire_pending_error_prefill=False)), "rejected_never_succeeds"),
    ("release before the drain (policy)", "pr-35049-drain-ack",
     PdProtocol(_flag("pr-35049-drain-ack", release_policy="immediate")), "no_write_after_release"),
    ("release before the drain (code)", "pr-35049-drain-ack",
     ReleaseWithoutAck(builtin("pr-35049-drain-ack").config), "no_write_after_release"),
    ("ack before the drain", "pr-35049-drain-ack", AckBeforeDrain(builtin("pr-35049-drain-ack").config),
     "no_write_after_release"),
    ("free source pages early", "source-held", FreeSourceOnFailure(builtin("source-held").config),
     "no_source_free_while_read"),
    ("skip the checksum compare", "checksum-supported", SkipChecksumCompare(builtin("checksum-supported").config),
     "no_cross_tenant_read"),
    ("allocator ignores ownership", "pr-38935", AllocateOwnedPages(builtin("pr-38935").config),
     "exclusive_ownership"),
    ("release forgets a page", "pr-38935", ReleaseForgetsLastPage(builtin("pr-38935").config), "pages_conserved"),
    ("commit before the transfer concludes", "pr-38935", SuccessWithoutCommitCheck(builtin("pr-38935").config),
     "success_implies_full_coverage"),
    ("no timeout after a lost ack", "lost-drain-ack-timeout",
     PdProtocol(_flag("lost-drain-ack-timeout", release_policy="drain_ack")), "quiescent_holds_nothing"),
]
IDS = [m[0] for m in MUTANTS]


def _hit(spec, claim, stop):
    m = Machine(spec)
    i = [c.name for c in m.claims].index(claim)
    ex = explore(m, claims=[i], stop_when_all_hit=stop)
    return ex, i in ex.hit_at


@pytest.mark.parametrize("name,scenario,spec,claim", MUTANTS, ids=IDS)
def test_every_mutant_is_caught(name, scenario, spec, claim):
    _, hit = _hit(spec, claim, stop=True)
    assert hit, f"mutant '{name}' survived: {claim} still holds"


@pytest.mark.parametrize("name,scenario,spec,claim", MUTANTS, ids=IDS)
def test_the_unmutated_engine_holds_the_same_claim(name, scenario, spec, claim):
    ex, hit = _hit(builtin(scenario).build(), claim, stop=False)
    assert ex.complete and not hit
