"""Lifting lemmas by renaming (checker/symbolic/lift.py): known answers, a mutant that drops renamings,
and the rule that a buggy scenario's larger instance is never reported proved."""

from __future__ import annotations

import itertools

import pytest

from kvproof.model.scenario import parse_scenario
from kvproof.checker.symbolic.lift import Lifter, LiftBudget, LiftError, field_slots, prove_lifted

FIXED = {"reject_at_prefill_door": True, "reject_at_decode_door": True, "retire_pending_error_prefill": True,
         "client_aborts": False}
EXPECT_BUGGY = {"decode_reads_only_own_pages": "violated", "rejected_never_succeeds": "violated",
                "rejected_never_reserves": "violated", "success_implies_full_coverage": "violated"}


def scenario(name, requests, decode_pages, engine, expect=None):
    """An SGLang scenario of one prefill page and a context limit of 2."""
    return parse_scenario({"name": name, "sizes": {"decode_pages": decode_pages, "prefill_pages": 1, "context_limit": 2},
                           "requests": [{"tenant": t, "pages": p} for t, p in requests],
                           "engine": dict(engine), "expect": dict(expect or {})}, f"<{name}>")


SMALL = [("A", 1), ("B", 2)]
LARGE = [("A", 1), ("B", 2), ("A", 1)]  # R0 and R2 of one kind (tenant A, one page)


@pytest.fixture(scope="module")
def lifter():
    return Lifter(scenario("s", SMALL, 2, FIXED).build(), scenario("l", LARGE, 3, FIXED).build())


def _slot(spec, field, *idx):
    return spec.layout.slot(field, *idx)


def test_field_slots_name_every_slot_in_order(lifter):
    layout = lifter.small.layout
    slots = field_slots(layout)
    assert len(slots) == layout.size
    assert all(layout.slot(f, *idx) == k for k, (f, idx) in enumerate(slots))


def test_a_unary_fact_is_renamed_over_every_page_and_every_request_of_its_kind(lifter):
    s, big = lifter.small, lifter.large
    clause = ((_slot(s, "owner", 0), 1),)  # owner[p0] = R0 never
    want = {((_slot(big, "owner", p), r + 1),) for p in range(3) for r in (0, 2)}
    assert set(lifter.lift([clause])) == want


def _known_pair(lifter):
    """owner[p0] = R0 and dest[R1, chunk 1] = p1 never, and its 2 x 1 x 6 renamings."""
    s, big = lifter.small, lifter.large
    clause = tuple(sorted([(_slot(s, "owner", 0), 1), (_slot(s, "dest", 1, 1), 1)]))
    want = {tuple(sorted([(_slot(big, "owner", p), r + 1), (_slot(big, "dest", 1, 1), q)]))
            for r in (0, 2) for p, q in itertools.permutations(range(3), 2)}
    return clause, want


def test_a_fact_over_two_pages_and_two_requests_gets_every_injective_renaming(lifter):
    clause, want = _known_pair(lifter)
    assert len(want) == 12
    assert set(lifter.lift([clause])) == want


def test_values_outside_the_sorts_keep_their_meaning_by_label(lifter):
    s, big = lifter.small, lifter.large
    old_a_small = s.k.content.labels.index("old:A")
    old_a_large = big.k.content.labels.index("old:A")
    assert old_a_small != old_a_large  # the code moves with the number of requests
    clause = tuple(sorted([(_slot(s, "content", 0, 1), old_a_small), (_slot(s, "owner", 1), 0)]))
    want = {tuple(sorted([(_slot(big, "content", 0, p), old_a_large), (_slot(big, "owner", p), 0)])) for p in range(3)}
    assert set(lifter.lift([clause])) == want


def test_a_mutant_lifting_that_drops_renamings_is_caught(lifter):
    """Order-preserving renamings only (a plausible shortcut) lose half the known answer."""

    class Monotone(Lifter):
        def renamings(self, clause):
            for sigma in super().renamings(clause):
                if all(list(m.values()) == sorted(m.values()) for m in (dict(sorted(x.items())) for x in sigma.values())):
                    yield sigma

    mutant = Monotone(lifter.small, lifter.large)
    clause, want = _known_pair(lifter)
    got = set(mutant.lift([clause]))
    assert got < want and got != want


def test_the_larger_instance_permutes_onto_itself(lifter):
    perms = lifter.permutations()
    assert len(perms) == 2 * 6  # R0~R2, and every order of three pages
    init = bytes(lifter.large.init_state())
    assert all(lifter.permuter(p)(init) == init for p in perms)


def test_instances_that_differ_outside_the_sorts_are_refused():
    other = dict(FIXED, timeout=3, release_policy="drain_ack_or_timeout")
    base = dict(FIXED, timeout=2, release_policy="drain_ack_or_timeout")
    with pytest.raises(LiftError, match="hold"):
        Lifter(scenario("s", SMALL, 2, base).build(), scenario("l", LARGE, 3, other).build())


@pytest.mark.thorough  # about 50 s of CPU; the all-sizes path's refusals: tests/test_allsizes_catalogue.py
def test_a_buggy_scenarios_larger_instance_is_never_proved():
    """The incident's engine (no admission fix): the violated claims stay inconclusive; the
    larger instance is never enumerated."""
    small = scenario("buggy-s", SMALL, 2, {"client_aborts": False}, EXPECT_BUGGY)
    large = scenario("buggy-l", LARGE, 3, {"client_aborts": False}, EXPECT_BUGGY)
    r = prove_lifted(large, small, LiftBudget(large_seconds=120, claim_seconds=60))
    verdicts = {row.invariant: row.verdict for row in r.rows}
    assert all(verdicts[n] == "inconclusive" for n in EXPECT_BUGGY)
    assert r.kept > 0 and r.failures  # Houdini finished; each drop left its step
    broken = {n for f in r.failures for n in f.breaks}
    assert broken & set(EXPECT_BUGGY)


@pytest.mark.slow
def test_a_fixed_scenarios_larger_instance_is_proved_from_a_small_one_with_a_pair_of_each_kind():
    """Three requests (two of one kind) on two pages, lifted to three pages: every invariant
    proved, one Houdini round, and the inductive invariant is a certificate."""
    small = scenario("fixed-s", LARGE, 2, FIXED)
    large = scenario("fixed-l", LARGE, 3, FIXED)
    r = prove_lifted(large, small, LiftBudget(max_k=1))
    assert r.proved == [row.invariant for row in r.rows] and len(r.rows) == 11  # release_justified among them
    assert not r.by_induction and r.kept > 0


def _toml(path, name, requests, decode_pages, engine):
    lines = [f'name = "{name}"', "[sizes]", f"decode_pages = {decode_pages}", "prefill_pages = 1", "context_limit = 2"]
    for t, p in requests:
        lines += ["[[requests]]", f'tenant = "{t}"', f"pages = {p}"]
    lines += ["[engine]"] + [f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in engine.items()]
    lines += ["[expect]", 'default = "verified"']
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_cli_lift_from_an_instance_of_another_engine_is_bad_input(tmp_path, capsys):
    from kvproof.checker.cli.commands import main

    base = dict(FIXED, timeout=2, release_policy='"drain_ack_or_timeout"')
    small = _toml(tmp_path / "s.toml", "s", SMALL, 2, base)
    large = _toml(tmp_path / "l.toml", "l", LARGE, 3, dict(base, timeout=3))
    assert main(["prove", large, "--lift-from", small, "--no-certificates"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hold" in err[0] and "Traceback" not in err[0]
    assert main(["prove", large, small, "--lift-from", small]) == 3
