"""The HTML report: verdicts, and per counterexample a sequence diagram, a page timeline and the
steps; self-contained; rendered by a real headless browser."""

import pytest
from lxml import html as lxml_html

from kvproof.checker.report.html import counterexample_id, report_html, write_report
from kvproof.checker.explicit.run import check_scenario
from kvproof.model.scenario import builtin

from .browser import run_chromium
INCIDENT_CX = ["decode_reads_only_own_pages", "no_cross_tenant_read", "rejected_never_succeeds",
               "rejected_never_reserves", "success_implies_full_coverage"]


@pytest.fixture(scope="module")
def incident():
    return check_scenario(builtin("incident"))


@pytest.fixture(scope="module")
def page(incident):
    return lxml_html.fromstring(report_html([incident]))


def _has_class(cls):
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {cls} ')"


def test_the_verdict_table_has_a_row_per_claim_linking_counterexamples(page, incident):
    rows = page.xpath("//table[@class='verdicts']/tbody/tr")
    assert len(rows) == len(incident.claims) == 13
    links = page.xpath("//table[@class='verdicts']//a/@href")
    assert links == [f"#{counterexample_id('incident', c)}" for c in INCIDENT_CX]
    assert "all 13 verdicts match" in page.xpath("string(//p[contains(@class, 'summary')])")


def test_one_section_per_counterexample_with_diagram_timeline_and_steps(page):
    sections = page.xpath("//section[@class='counterexample']")
    assert [s.get("id") for s in sections] == [counterexample_id("incident", c) for c in INCIDENT_CX]
    for s in sections:
        assert len(s.xpath(".//svg//g[@class='lane']")) == 5
        assert s.xpath(".//ul[@class='pages']/li") and s.xpath(".//table[@class='grid']")
        assert "Step 1  prefill_bootstrap_add(req=R0@room0)" in s.xpath("string(.//pre[@class='steps'])")


def test_the_foreign_page_read_is_in_the_diagram_and_the_timeline(page):
    s = page.xpath(f"//section[@id='{counterexample_id('incident', 'no_cross_tenant_read')}']")[0]
    reads = s.xpath(f".//svg//g[{_has_class('violating-read')}]")
    assert len(reads) == 1 and "p1 holds R0@room0's KV (tenant A)" in reads[0].text_content()
    p1 = [li for li in s.xpath(".//ul[@class='pages']/li") if li.text_content().startswith("p1:")][0]
    assert [h.text_content() for h in p1.xpath(".//span[@class='hazard']")] == [
        "read by R1@room1 (holds R0@room0's KV (tenant A))"]
    hazard_cells = s.xpath(".//table[@class='grid']//tr[@data-page='p1']/td[contains(@class, 'hazard-event')]")
    assert len(hazard_cells) == 1  # the read at step 18


def test_the_abort_race_highlights_the_foreign_write():
    rep = check_scenario(builtin("abort-race"), only=["no_cross_tenant_read"])
    page = lxml_html.fromstring(report_html([rep]))
    p0 = [li for li in page.xpath("//ul[@class='pages']/li") if li.text_content().startswith("p0:")][0]
    assert "late write from R0@room0" in [h.text_content() for h in p0.xpath(".//span[@class='hazard']")]
    write = page.xpath(f"//svg//g[{_has_class('write')} and {_has_class('hazard')}]")
    assert len(write) == 1 and write[0].get("data-step") == "13"


def test_the_page_is_self_contained(page):
    assert not page.xpath("//script | //link | //iframe | //img | //object | //embed")
    for el in page.iter():
        for name, value in el.attrib.items():
            if name != "xmlns":
                assert "http:" not in value and "https:" not in value, (el.tag, name, value)
    styles = " ".join(page.xpath("//style/text()"))
    assert "url(" not in styles and "@import" not in styles


def test_a_report_with_a_wrong_verdict_says_so(tmp_path):
    sc = builtin("pr-35049-drain-ack")
    from dataclasses import replace

    wrong = replace(sc, expect={**sc.expect, "no_write_after_release": "violated"})
    rep = check_scenario(wrong)
    page = lxml_html.fromstring(report_html([rep]))
    assert "1 of" in page.xpath("string(//p[contains(@class, 'summary')])")
    assert page.xpath("//table[@class='verdicts']//td[@class='bad']/text()") == ["verified ✗"]
    assert not page.xpath("//section[@class='counterexample']")  # nothing was violated


def test_a_witness_reads_reached_and_unreachable(page):
    cells = [" ".join(r.xpath("./td//text()")) for r in page.xpath("//table[@class='verdicts']/tbody/tr")]
    witness = [c for c in cells if "sometimes_request_succeeds" in c]
    assert witness and "reached" in witness[0] and "verified" not in witness[0]


def test_write_report_is_atomic_and_readable(tmp_path, incident):
    path = write_report(tmp_path / "sub" / "report.html", [incident])
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]
    assert path.stat().st_mode & 0o044  # not the 0600 of a temp file


# -- a real browser ----------------------------------------------------------------------------
def _chromium(tmp_path, *args):
    return run_chromium(tmp_path / "profile", *args)


def _assert_rendered(shot):
    """The screenshot shows a page: not blank, many colours, and the red of the hazards."""
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(1 << 24)  # [(count, (r, g, b))]
    total = image.size[0] * image.size[1]
    ink = total - sum(n for n, c in colours if c == (255, 255, 255))
    assert ink > 0.02 * total, "the screenshot is (nearly) blank"
    assert len(colours) > 50, "the screenshot has almost no colours"
    red = sum(n for n, (r, g, b) in colours if r > 170 and g < 90 and b < 90)
    assert red > 300, f"the hazards (red) are not visible: {red} red pixels"
    return image


def test_headless_chromium_renders_the_incident_report(tmp_path, incident):
    report = write_report(tmp_path / "report.html", [incident])
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,4000", report.as_uri())
    assert _assert_rendered(shot).size == (1400, 4000)


def test_the_screenshot_check_catches_a_blank_page(tmp_path):
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body><p>kvproof</p></body></html>")
    shot = tmp_path / "blank.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=800,600", blank.as_uri())
    with pytest.raises(AssertionError, match="blank"):
        _assert_rendered(shot)


def test_headless_chromium_sees_the_lanes_and_the_marked_read(tmp_path, incident):
    report = write_report(tmp_path / "report.html", [incident])
    dom = lxml_html.fromstring(_chromium(tmp_path, "--dump-dom", report.as_uri()))
    first = dom.xpath("//section[@class='counterexample']")[0]
    lanes = first.xpath(".//svg//g[@class='lane']")
    assert [g.get("data-lane") for g in lanes] == ["client", "prefill", "transfer", "decode", "pool"]
    assert [g.text_content() for g in lanes] == ["client", "prefill scheduler", "transfer engine",
                                                 "decode scheduler", "page pool"]
    reads = first.xpath(f".//svg//g[{_has_class('violating-read')}]")
    assert len(reads) == 1 and reads[0].get("data-from") == "pool" and reads[0].get("data-to") == "decode"
    assert len(dom.xpath("//section[@class='counterexample']")) == len(INCIDENT_CX)


def test_headless_chromium_sees_vllm_arrows_and_the_loops_of_liveness_counterexamples(tmp_path):
    """One page with a vLLM counterexample, a liveness one with a cycle and one that ends where
    nothing can move: the browser's DOM has the vLLM arrows between its six lanes, a section per
    liveness counterexample with its loop marked, and the headline calling each configuration
    exposed."""
    reports = [check_scenario(builtin(n)) for n in ("vllm-pull-ttl-expiry", "lost-drain-ack",
                                                    "hold-forever-no-heartbeat")]
    report = write_report(tmp_path / "report.html", reports)
    dom = lxml_html.fromstring(_chromium(tmp_path, "--dump-dom", report.as_uri()))
    vllm = dom.get_element_by_id(counterexample_id("vllm-pull-ttl-expiry", "no_cross_tenant_read"))
    assert [g.get("data-lane") for g in vllm.xpath(".//svg//g[@class='lane']")] == [
        "client", "prefill", "prefill_blocks", "nixl", "decode_blocks", "decode"]
    arrows = vllm.xpath(f".//svg//g[{_has_class('msg')}][@data-from != @data-to][@data-from != 'all']")
    assert len(arrows) == 16 and all(g.xpath(".//*[local-name()='line']") for g in arrows)
    [read] = vllm.xpath(f".//svg//g[{_has_class('violating-read')}]")
    assert (read.get("data-from"), read.get("data-to")) == ("decode_blocks", "decode")
    assert vllm.xpath(".//ul[@class='pages']/li")  # the page timeline is not empty
    lassos = dom.xpath(f"//section[{_has_class('lasso')}]")
    assert sorted(s.get("id") for s in lassos) == sorted(
        counterexample_id(n, c) for n in ("lost-drain-ack", "hold-forever-no-heartbeat")
        for c in ("held_pages_are_released", "requests_end"))
    cycle = dom.get_element_by_id(counterexample_id("hold-forever-no-heartbeat", "requests_end"))
    [loop] = cycle.xpath(".//svg//g[@class='loop']")
    assert (loop.get("data-first-step"), loop.get("data-last-step")) == ("5", "7")
    assert "steps 5-7 repeat forever" in cycle.xpath("string(.//p[@class='loop'])")
    stuck = dom.get_element_by_id(counterexample_id("lost-drain-ack", "requests_end"))
    assert stuck.xpath(".//svg//g[@class='loop deadlock']")
    assert [li.get("data-scenario") for li in dom.xpath("//ul[@class='exposure']/li[@class='exposed']")] == [
        "vllm-pull-ttl-expiry", "lost-drain-ack", "hold-forever-no-heartbeat"]
