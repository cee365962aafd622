"""Writes as declared resources: a variant's new kind of write is checked by the unchanged base
claims once it declares it (``PdProtocol.write_targets``)."""

import json

from kvproof.checker.cli.commands import main
from kvproof.checker.explicit.search import explore
from kvproof.model.expr import SpecOps
from kvproof.model.framework import Pre, action
from kvproof.model.layout import Field
from kvproof.model.machine import Machine
from kvproof.model.ops import ConcreteOps
from kvproof.model.replay import run_actions
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.protocol import (
    P_SENDING, WR_FLIGHT, WR_LANDED, WR_NOT_ISSUED, PdProtocol, WriteTarget, kv_of,
)


# -- the variant: under 20 lines ----------------------------------------------------------------
class StageWrites(PdProtocol):
    """A pipeline stage also writes the request's metadata slot; nothing waits for it."""

    def build_fields(self):
        return super().build_fields() + [Field("stage_wr", (self.k.req,), self.k.write, WR_NOT_ISSUED, "stage write")]

    def write_targets(self, s):
        return super().write_targets(s) + [WriteTarget(r, s.stage_wr[r] >= WR_FLIGHT, "aux_owner", s.aux[r], "stage")
                                           for r in range(self.k.R)]

    @action("transfer", "req")
    def stage_write(self, s, n, r):
        s.require((s.p_phase[r] == P_SENDING) & (s.stage_wr[r] == WR_NOT_ISSUED))
        n.stage_wr[r] = WR_FLIGHT

    @action("transfer", "req", fair=True)
    def stage_lands(self, s, n, r):
        s.require(s.stage_wr[r] >= WR_FLIGHT)
        n.stage_wr[r] = WR_LANDED
        n.aux_content[s.aux[r]] = kv_of(r)


class StageWritesWaited(StageWrites):
    """The fix: rank 0 counts the stage's write as its own (drain ack) and concludes after it."""

    def rank_writes_in_flight(self, s, r, pr):
        return super().rank_writes_in_flight(s, r, pr) | ((s.stage_wr[r] >= WR_FLIGHT) & (pr == 0))

    def prefill_transfer_done(self, s, n, r, pr):
        s.require((s.stage_wr[r] == WR_LANDED) | (pr != 0))
        super().prefill_transfer_done(s, n, r, pr)
# -----------------------------------------------------------------------------------------------


def _search(cls, claim="no_write_after_release"):
    spec = cls(builtin("aux-held").config)  # the base protocol verifies every claim here
    machine = Machine(spec)
    index = [c.name for c in machine.claims].index(claim)
    return machine, index, explore(machine, claims=[index])


def test_the_base_protocol_declares_every_page_write_and_every_aux_write():
    spec = PdProtocol(builtin("aux-held").config)
    s = Pre(SpecOps(ConcreteOps(spec.init_state())), spec.layout)
    kinds = [(t.kind, t.request, t.owner) for t in spec.write_targets(s)]
    k = spec.k
    assert kinds == ([("page", r, "owner") for r in range(k.R) for _ in range(k.S * spec.send_len(r))]
                     + [("aux", r, "aux_owner") for r in range(k.R)])


def test_a_declared_stage_write_is_caught_by_the_unchanged_base_claim():
    machine, index, found = _search(StageWrites)
    assert index in found.hit_at  # violated
    states = run_actions(machine, found.path(found.hit_at[index]))
    last = machine.spec.layout
    stage = [states[-1][last.slot("stage_wr", r)] for r in range(machine.spec.k.R)]
    aux_wr = [states[-1][last.slot("aux_wr", r)] for r in range(machine.spec.k.R)]
    # it is the stage's write, not the base aux write, that is in flight into a released slot
    assert any(w >= WR_FLIGHT for w in stage) and not any(w >= WR_FLIGHT for w in aux_wr)


def test_the_fixed_stage_write_verifies():
    _, index, found = _search(StageWritesWaited)
    assert found.complete and index not in found.hit_at


def test_the_claim_sees_the_stage_write_only_through_its_declaration():
    class Undeclared(StageWrites):
        def write_targets(self, s):
            return PdProtocol.write_targets(self, s)

    _, index, found = _search(Undeclared)
    assert found.complete and index not in found.hit_at  # invisible: what the declaration fixes


_ZERO_ON_RELEASE = '''
from kvproof.spec.sglang.protocol import UNWRITTEN, PdProtocol, owned_by


class ZeroOnRelease(PdProtocol):
    def release_decode(self, s, n, r, when=True):
        """Zero every page as it is freed."""
        for c in range(self.pages(r)):
            p = s.dest[r, c]
            for u in range(self.k.U):
                n.content[u, p] = s.ops.ite(when & (s.owner[p] == owned_by(r)), UNWRITTEN, s.content[u, p])
        super().release_decode(s, n, r, when)


SCENARIO = {
    "name": "zero-on-release",
    "title": "Pages are zeroed as they are freed",
    "sizes": {"decode_pages": 2, "prefill_pages": 2, "context_limit": 1},
    "requests": [{"tenant": "A", "pages": 1}, {"tenant": "B", "pages": 1}],
    "engine": {"release_policy": "drain_ack"},
    "expect": {"no_cross_tenant_read": "verified", "default": "verified"},
}
'''


def _check_variant(capsys, tmp_path, source, *extra):
    path = tmp_path / "variant.py"
    path.write_text(source)
    code = main(["check", "--variant", str(path), "--traces", str(tmp_path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_witness_the_variant_makes_unreachable_is_named(capsys, tmp_path):
    code, out, _ = _check_variant(capsys, tmp_path, _ZERO_ON_RELEASE, "--json")
    notes = json.loads(out)["scenarios"][0]["notes"]
    # only the witness the variant took away: the ones the base cannot reach here either get no note
    assert notes == ["witness sometimes_stale_page_reserved is unreachable in this variant (ZeroOnRelease) but "
                     "reachable in PdProtocol: a verified invariant may be vacuous"]
    assert code == 0  # a note, not a verdict: the listed claims still decide the exit code
    code, out, _ = _check_variant(capsys, tmp_path, _ZERO_ON_RELEASE)
    assert code == 0 and "zero-on-release: note: witness sometimes_stale_page_reserved is unreachable" in " ".join(out.split())


def test_a_listed_witness_gets_its_verdict_and_no_note(capsys, tmp_path):
    listed = _ZERO_ON_RELEASE.replace('"expect": {', '"expect": {"sometimes_stale_page_reserved": "unreachable", ')
    code, out, _ = _check_variant(capsys, tmp_path, listed, "--json")
    doc = json.loads(out)["scenarios"][0]
    assert code == 0 and doc["notes"] == []
    assert {r["invariant"]: r["verdict"] for r in doc["results"]}["sometimes_stale_page_reserved"] == "unreachable"


def test_the_read_claims_cover_what_read_targets_declares():
    class PagesOnly(PdProtocol):  # decode's read leaves the metadata slot out
        def read_targets(self, s, r):
            return super().read_targets(s, r)[:-1]

    def found(cls):
        machine = Machine(cls(builtin("aux-freed-early").config))  # a late aux write lands in R1's slot
        index = [c.name for c in machine.claims].index("decode_reads_only_own_pages")
        return index in explore(machine, claims=[index]).hit_at

    assert found(PdProtocol) and not found(PagesOnly)
