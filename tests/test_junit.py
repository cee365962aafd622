"""JUnit XML: a test case per scenario × claim, failures and errors, valid against the JUnit XSD."""

from dataclasses import replace
from pathlib import Path

import pytest
from lxml import etree

from kvproof.checker.explicit.search import Limits
from kvproof.checker.report.junit import junit_xml, write_junit
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import builtin

SCHEMA = etree.XMLSchema(etree.parse(str(Path(__file__).parent / "schemas" / "junit-10.xsd")))


def _valid(text: str) -> etree._Element:
    doc = etree.fromstring(text.encode("utf-8"))
    SCHEMA.assertValid(doc)
    return doc


@pytest.fixture(scope="module")
def reports():
    race = builtin("abort-race")
    wrong = replace(race, name="abort-race-wrong", expect={**race.expect, "no_cross_tenant_read": "verified"})
    cut = check_scenario(builtin("v0.5.22"), Limits(max_states=500))
    return [check_scenario(race), check_scenario(wrong), cut]


def test_valid_and_one_case_per_scenario_and_claim(reports):
    doc = _valid(junit_xml(reports))
    suites = doc.findall("testsuite")
    assert [s.get("name") for s in suites] == ["abort-race", "abort-race-wrong", "v0.5.22"]
    for suite, rep in zip(suites, reports):
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [c.claim for c in rep.claims]
        assert {c.get("classname") for c in cases} == {f"kvproof.{rep.scenario.name}"}
        assert suite.get("tests") == str(len(rep.claims))
    assert doc.get("tests") == str(sum(len(r.claims) for r in reports))


def test_a_witness_reads_reached_and_unreachable():
    race = builtin("abort-race")  # "violated" is the old word for an unreachable witness: a synonym
    sc = replace(race, name="abort-race-witness", expect={**race.expect, "sometimes_abort_mid_transfer": "violated"})
    failure = _valid(junit_xml([check_scenario(sc)])).find(
        "testsuite/testcase[@name='sometimes_abort_mid_transfer']/failure")
    assert failure.get("message").startswith("expected unreachable, found reached after ")
    assert "verified" not in failure.get("message")


def test_an_unexpected_verdict_is_a_failure_with_the_counterexample(reports):
    doc = _valid(junit_xml(reports))
    suite = doc.find("testsuite[@name='abort-race-wrong']")
    assert suite.get("failures") == "1" and suite.get("errors") == "0"
    failure = suite.find("testcase[@name='no_cross_tenant_read']/failure")
    assert failure.get("message") == "expected verified, found violated after 15 steps"
    assert "decode R1@room1 (tenant B) reads p0 holding R0@room0's KV (tenant A)" in failure.text
    assert doc.find("testsuite[@name='abort-race']").get("failures") == "0"


def test_an_inconclusive_verdict_is_an_error(reports):
    doc = _valid(junit_xml(reports))
    suite = doc.find("testsuite[@name='v0.5.22']")
    errors = suite.findall("testcase/error")
    assert errors and suite.get("errors") == str(len(errors)) and suite.get("failures") == "0"
    assert all(e.get("message").startswith("inconclusive: state limit 500") for e in errors)
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["complete"] == "false" and int(props["states"]) >= 500


def test_the_schema_rejects_what_it_should():
    """The XSD is not vacuous: a misspelt element or a missing required attribute fails."""
    with pytest.raises(etree.DocumentInvalid):
        _valid('<testsuites><testsuite tests="1"><testcase name="x"><errors/></testcase></testsuite></testsuites>')
    with pytest.raises(etree.DocumentInvalid):
        _valid('<testsuites><testsuite name="s"><testcase name="x"/></testsuite></testsuites>')


def test_written_atomically(tmp_path, reports):
    path = write_junit(tmp_path / "out" / "kvproof.xml", reports[:1])
    _valid(path.read_text(encoding="utf-8"))
    assert [p.name for p in path.parent.iterdir()] == ["kvproof.xml"]
