"""Mutants: deliberately broken engines that the checker must catch.

Each mutant is a small override of the one spec (or a flag flipped back to a buggy value) on a
scenario whose correct engine is verified.  A mutant that survives means a claim is too weak.
"""

import ast
import importlib.util
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.state import (
    ACK_DRAIN, D_ENDED, D_HELD, FREE, OUT_SUCCESS, P_ENDED, PAB_ACKED, PAB_RECEIVED, READ_OWN, WR_FLIGHT, WR_LANDED,
    kv_of, owned_by,
)
from kvproof.model.scenario import builtin


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
        self.release_decode(s, n, r)


class AckNamesTheRoom(PdProtocol):
    """The fan-out's ack target is the room, not the rank: decode records one prefill rank's drain
    ack for every prefill rank of the room, so the other ranks' writes are never waited for."""

    def decode_handle_abort_ack(self, s, n, r, pr):
        super().decode_handle_abort_ack(s, n, r, pr)
        o = s.ops
        for x in self.prs:
            n.acked[r, x] = o.ite(n.acked[r, pr] == 1, 1, s.acked[r, x])


class DeferredReleaseAsWritten(PdProtocol):
    """Adds nothing: the deferred release through ``super()``."""

    def decode_release_deferred(self, s, n, r):
        super().decode_release_deferred(s, n, r)


class FreeSourceOnFailure(PdProtocol):
    """Prefill frees source pages on failure whatever the flag says."""

    def prefill_transfer_failed(self, s, n, r, pr):
        super().prefill_transfer_failed(s, n, r, pr)
        self.release_source(s, n, r)


class SkipChecksumCompare(PdProtocol):
    """The checksum is computed but never compared: every commit succeeds."""

    @property
    def checksum_active(self):
        return False


class AllocateOwnedPages(PdProtocol):
    """The allocator hands out page 0 for every chunk, owned or not."""

    def allocate(self, s, n, r, k, owner, table, size, content=None):
        if owner != "owner":
            return super().allocate(s, n, r, k, owner, table, size, content)
        for c in range(k):
            n.dest[r, c] = 0
        n.owner[0] = owned_by(r)


class ReleaseForgetsLastPage(PdProtocol):
    """Release frees every destination page but the last."""

    def release_decode(self, s, n, r, when=True):
        o = s.ops
        for c in range(self.pages(r) - 1):
            p = s.dest[r, c]
            n.owner[p] = o.ite(when & (s.owner[p] == owned_by(r)), FREE, s.owner[p])


class LandingCarriesWritersKV(PdProtocol):
    """H8's data effect dropped: a landing write carries the writer's own KV (``kv_of(r)``) instead
    of what its source page holds at landing time."""

    def kv_write_lands(self, s, n, r, w, c):
        o = s.ops
        s.require(c < self.send_len(r))
        s.require(o.ge(s.wr[r, w, c], WR_FLIGHT))
        n.wr[r, w, c] = WR_LANDED
        p = s.dest[r, c]
        for u in self.k.units_of_stream(w):
            n.content[u, p] = kv_of(r)


class SuccessWithoutCommitCheck(PdProtocol):
    """Decode commits without waiting for the transfer's conclusion."""

    def decode_commit(self, s, n, r):
        o = s.ops
        s.require(o.eq(s.d_phase[r], 2))
        n.outcome[r] = OUT_SUCCESS
        n.read[r] = READ_OWN
        n.d_phase[r] = D_ENDED
        self.release_decode(s, n, r)


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
    ("release without the ack check (release_justified)", "pr-35049-drain-ack",
     ReleaseWithoutAck(builtin("pr-35049-drain-ack").config), "release_justified"),
    ("fan-out: one rank's ack recorded for the room", "tp2-every-rank",
     AckNamesTheRoom(builtin("tp2-every-rank").config), "release_justified"),
    ("the cleared-room fix under a deadline", "pr-40645",
     PdProtocol(_flag("pr-40645", release_policy="drain_ack_or_timeout", write_latency_bound=1)),
     "release_justified"),
    ("a landing carries the writer's own KV (H8's data effect)", "failure-source-reuse",
     LandingCarriesWritersKV(builtin("failure-source-reuse").config), "no_cross_tenant_read"),
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


@pytest.mark.parametrize("name,scenario,spec,claim", MUTANTS, ids=IDS)
def test_the_catalogue_gate_expects_the_claim_the_mutant_breaks(name, scenario, spec, claim):
    sc = builtin(scenario)
    assert sc.expectations(sc.build())[claim] == "verified"  # so `kvproof check` flags the mutant


def test_a_variant_that_adds_nothing_keeps_release_justified():
    base = builtin("pr-40645")
    ex_base, hit_base = _hit(base.build(), "release_justified", stop=False)
    ex, hit = _hit(DeferredReleaseAsWritten(base.config), "release_justified", stop=False)
    assert ex.complete and not hit and not hit_base
    assert ex.stats.states == ex_base.stats.states


def test_the_fan_out_mutant_releases_on_one_rank_s_ack_only_with_a_write_left():
    # release_justified fails where the base claims fail too (a write of the other rank lands after)
    _, hit = _hit(AckNamesTheRoom(builtin("tp2-every-rank").config), "no_write_after_release", stop=True)
    assert hit


# failure-source-reuse: R0 fails with its write in flight; decode and prefill free its pages at
# once (H7, H8); R1 takes both, and R0's write lands after R1's own write, before R1's read.
LATE_LANDING = [
    "prefill_bootstrap_add(req=R0)", "prefill_bootstrap_add(req=R1)", "decode_prealloc(req=R0)",
    "decode_send_metadata(req=R0)", "prefill_forward(req=R0)", "kv_transfer_write(req=R0, chunk=0)",
    "prefill_transfer_failed(req=R0)", "decode_poll_failed(req=R0)", "decode_prealloc(req=R1)",
    "decode_send_metadata(req=R1)", "prefill_forward(req=R1)", "kv_transfer_write(req=R1, chunk=0)",
    "kv_write_lands(req=R1, chunk=0)", "kv_write_lands(req=R0, chunk=0)", "prefill_transfer_done(req=R1)",
    "decode_commit(req=R1)",
]


def test_a_late_landing_copies_the_reused_source_page_as_it_is_at_landing_time():
    m = Machine(builtin("failure-source-reuse").build())
    named = m.spec.layout.decode(m.run(*LATE_LANDING))
    assert named["src"] == [["q0"], ["q0"]] and named["dest"] == [["p0"], ["p0"]]  # both pages reused
    assert named["content"] == [["R1"]]  # R0's write carried R1's KV out of q0
    assert named["read"] == ["none", "own"]


def test_the_writers_own_kv_on_the_same_steps_is_a_cross_tenant_read():
    m = Machine(LandingCarriesWritersKV(builtin("failure-source-reuse").config))
    named = m.spec.layout.decode(m.run(*LATE_LANDING))
    assert named["content"] == [["R0"]]
    assert named["read"] == ["none", "cross_tenant"]


class OnlyR1Fails:
    """A transfer that fails for one request only (R1; a bad destination session, say), so the
    tenants of the requests that can meet its late write are fixed by the order of arrival."""

    def prefill_transfer_failed(self, s, n, r, pr):
        s.require(r == 1)
        super().prefill_transfer_failed(s, n, r, pr)


class OnlyR1FailsSpec(OnlyR1Fails, PdProtocol):
    """:class:`OnlyR1Fails` on the base protocol."""


class OnlyR1FailsWritersKV(OnlyR1Fails, LandingCarriesWritersKV):
    """:class:`OnlyR1Fails` with H8's data effect dropped."""


def _third_tenant_reads(spec_class, held: bool) -> bool:
    # R0 (tenant B), R1 and R2 (tenant A), FIFO at the doors; R1 fails with its write in flight and
    # decode frees its page at once (H7), so only R2 can reserve it; only R0 can forward onto the
    # source page R1 freed early (H8).  Is a cross-tenant read reachable?
    c = builtin("failure-source-reuse").config
    cfg = replace(c, decode_pages=2, prefill_pages=2, requests=(Request("B", 1), Request("A", 1), Request("A", 1)),
                  engine=replace(c.engine, hold_source_until_drained=held))
    ex, hit = _hit(spec_class(cfg), "no_cross_tenant_read", stop=False)
    assert ex.complete
    return hit


def test_a_reused_source_page_s_content_at_landing_time_reaches_a_read_only_before_the_h8_fix():
    # before the fix R1's late write carries R0's KV (tenant B) out of the reused source page into
    # R2's page: a cross-tenant read; with the source held it carries R1's own KV (tenant A): R2
    # still reads a foreign page (H7), never another tenant's
    assert _third_tenant_reads(OnlyR1FailsSpec, held=False)
    assert not _third_tenant_reads(OnlyR1FailsSpec, held=True)
    # and it is the content at landing time that does it: a landing with the writer's own KV
    assert not _third_tenant_reads(OnlyR1FailsWritersKV, held=False)


# -- the mutation gate (bench/mutation.py): its list still applies, and a few of its mutants ---------
def _gate():
    path = Path(__file__).resolve().parent.parent / "bench" / "mutation.py"
    spec = importlib.util.spec_from_file_location("kvproof_bench_mutation", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


GATE = _gate()


def test_the_gate_has_at_least_40_mutants_of_the_protocol_and_each_still_applies():
    ids = [m.id for m in GATE.MUTANTS]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    assert {m.file for m in GATE.MUTANTS} == {"spec/sglang/protocol.py", "spec/sglang/claims.py", "spec/sglang/v0523.py"}
    for m in GATE.MUTANTS:
        where = GATE.locate(m)
        original = (GATE.ROOT / m.file).read_text()
        assert where.text != original, m.id
        assert m.old in original.splitlines()[where.line - 1], m.id
        ast.parse(textwrap.dedent(where.function))  # a mutant is a program, not a syntax error


def test_a_stale_mutant_is_refused():
    m = GATE.Mutant("gone", "spec/sglang/protocol.py", "kv_write_lands", "no such text", "pass", "nothing")
    with pytest.raises(GATE.Stale):
        GATE.locate(m)


# (mutant, the scenario that catches it): H8's data effect in the default tier (a child process, about
# a second), one mutant of each other kind in the slow tier
REPRESENTATIVE = [
    ("H8", "failure-source-reuse"),
    pytest.param("pd-release-unready", "pr-35049-drain-ack", marks=pytest.mark.slow),
    pytest.param("cl-coverage-of-sent", "incident", marks=pytest.mark.slow),
    pytest.param("sg-room-check-any", "sglang-0.5.23-aux-failed-send-unbounded", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("mutant,scenario", REPRESENTATIVE)
def test_representative_mutants_are_caught_by_the_gate(mutant, scenario):
    m = next(x for x in GATE.MUTANTS if x.id == mutant)
    result, detail, _ = GATE.run_gate(m, [scenario])
    assert result == "caught", detail
    assert detail.startswith(scenario + ":")


def test_the_unmutated_tree_passes_the_gate_where_h8_is_caught():
    result, detail, _ = GATE.run_gate(None, ["failure-source-reuse"])
    assert result == "survived", detail
