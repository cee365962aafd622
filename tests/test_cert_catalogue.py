"""A certificate held against the catalogue: today's encoding of the scenario it names, its stored
scenario, what it proves and its file name; an encoding changed after it was written fails it."""

import tomli_w

from kvproof.checker.symbolic.cert_catalogue import match_catalogue, scenario_differences
from kvproof.checker.certs.reader import read_certificate
from kvproof.checker.cli.commands import main
from kvproof.model import ops
from kvproof.model.scenario import builtin, load_scenario

from .certs import SMALL, committed, copy_as, fresh_copy, renamed, tampered

EQUAL = {"init": "unsat", "typed": "unsat", "trans": "unsat", "safe": "unsat"}


def test_a_committed_certificate_matches_today_s_encoding():
    match = match_catalogue(read_certificate(committed()))
    assert match.problems == [] and match.equivalence == EQUAL
    assert match.scenario.name == SMALL


def test_scenario_differences_name_the_keys():
    today = builtin(SMALL).to_data()
    stored = {**today, "title": "x", "engine": {**today["engine"], "timeout": 3}, "extra": 1}
    assert scenario_differences(stored, today) == ["engine.timeout", "extra", "title"]
    assert scenario_differences(today, today) == []
    assert scenario_differences([1], today) == ["(the whole scenario)"]


def test_a_definition_that_is_not_today_s_is_found_by_one_query_each(tmp_path):
    for how, which in (("trans false", "trans"), ("safe true", "safe")):
        match = match_catalogue(read_certificate(tampered(tmp_path, how)))
        assert match.equivalence == {**EQUAL, which: "sat"}
        assert match.problems == [f"{which} is not today's encoding of {SMALL} (a state where they differ exists)"]


def test_an_encoding_changed_after_the_certificate_was_written_fails_it(monkeypatch):
    # a bug in shared encoding code, the kind the issue found: any_ dropping its last operand
    monkeypatch.setattr(ops.Ops, "any_", lambda self, xs: self.or_(*list(xs)[:-1]))
    match = match_catalogue(read_certificate(committed()))
    assert "sat" in match.equivalence.values()
    assert any("is not today's encoding" in p for p in match.problems)


def test_the_file_name_must_be_the_scenario_s(tmp_path):
    match = match_catalogue(read_certificate(renamed(tmp_path)))
    assert match.problems == ["the file is named ack-target-cleared.smt2, but the certificate is of scenario "
                              "abort-race (expected abort-race.smt2)"]


def test_a_scenario_not_in_the_catalogue_fails(tmp_path):
    text = committed().read_text().replace(f'"name": "{SMALL}"', '"name": "my-own"', 1)
    match = match_catalogue(read_certificate(copy_as(tmp_path, text, "my-own")))
    assert match.problems == ["no catalogue scenario is named 'my-own' (kvproof list shows the catalogue)"]


def test_certify_against_a_scenario_file(tmp_path, capsys):
    data = builtin(SMALL).to_data()
    same = tmp_path / "same.toml"
    same.write_text(tomli_w.dumps(data))
    assert load_scenario(same).to_data() == data
    cert = fresh_copy(tmp_path)
    assert main(["certify", str(cert), "--scenario", str(same)]) == 0
    other = tmp_path / "other.toml"
    other.write_text(tomli_w.dumps({**data, "engine": {**data["engine"], "timeout": 3}}))
    capsys.readouterr()
    assert main(["certify", str(cert), "--scenario", str(other)]) == 1
    assert f"the stored scenario differs from {SMALL} ({other}) in engine.timeout" in capsys.readouterr()[0]


def test_only_the_expectations_of_proved_invariants_are_part_of_the_stored_scenario(tmp_path):
    # a claim the certificate does not prove (a witness here, or an invariant a scenario expects
    # violated) may change its expectation; one it proves may not
    data = builtin(SMALL).to_data()
    cert = read_certificate(committed())
    assert "no_write_after_release" in cert.proves and "sometimes_request_succeeds" not in cert.proves
    witness = tmp_path / "witness.toml"
    witness.write_text(tomli_w.dumps({**data, "expect": {**data["expect"], "sometimes_request_succeeds": "unreachable"}}))
    assert match_catalogue(cert, load_scenario(witness)).problems == []
    proved = tmp_path / "proved.toml"
    proved.write_text(tomli_w.dumps({**data, "expect": {**data["expect"], "no_write_after_release": "violated"}}))
    problems = match_catalogue(cert, load_scenario(proved)).problems
    assert f"the stored scenario differs from {SMALL} ({proved}) in expect.no_write_after_release" in problems
