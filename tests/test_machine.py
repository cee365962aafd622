"""The compiled machine: step, labels, claim checks (against the reference interpreter)."""

import pytest

from kvproof.model.machine import reference_claim

from .conftest import machine_of, reachable


def test_step_follows_successors_and_refuses_a_disabled_action():
    m = machine_of("abort-race")
    succ = m.successors(m.init)
    aid, nxt = succ[0]
    assert m.step(m.init, aid) == nxt
    commit = [i.aid for i in m.instances if i.name == "decode_commit"][0]
    assert m.step(m.init, commit) is None


def test_labels_use_the_domains_names():
    m = machine_of("abort-race")
    labels = {m.label(i.aid) for i in m.instances}
    assert "kv_transfer_write(req=R1, chunk=0)" in labels
    assert "clock_tick()" in labels


def test_run_follows_labels_from_init_and_names_the_label_it_cannot_take():
    m = machine_of("abort-race")
    first = m.label(m.successors(m.init)[0][0])
    s1 = m.run(first)
    assert s1 == m.successors(m.init)[0][1]
    second = m.label(m.successors(s1)[0][0])
    assert m.run(first, second) == m.run(second, state=s1) == m.successors(s1)[0][1]
    assert m.run() == m.init
    with pytest.raises(ValueError, match="decode_commit.*not enabled"):
        m.run(next(m.label(i.aid) for i in m.instances if i.name == "decode_commit"))
    with pytest.raises(ValueError, match="no action instance is labelled nope"):
        m.run("nope")


def test_claim_hits_agree_with_the_reference_interpreter():
    m = machine_of("receipt-ack")
    for state in reachable("receipt-ack")[::7]:
        for c in m.claims:
            if c.at != "always":
                continue
            truth = reference_claim(m.spec, c.name, state)
            assert m.claim_hits(c.name, state) == ((not truth) if c.kind == "invariant" else truth)


def test_quiescent_claims_hit_only_where_nothing_is_enabled():
    m = machine_of("lost-drain-ack")
    busy = [s for s in reachable("lost-drain-ack") if m.successors(s)]
    assert not any(m.claim_hits("quiescent_holds_nothing", s) for s in busy[:500])
    stuck = [s for s in reachable("lost-drain-ack") if not m.successors(s)]
    assert any(m.claim_hits("quiescent_holds_nothing", s) for s in stuck)
    assert not all(m.claim_hits("quiescent_holds_nothing", s) for s in stuck)
