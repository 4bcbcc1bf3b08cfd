"""report.html in a real headless Chromium (Debian's chromium + chromium-driver, through Selenium):
the page renders, every plot is laid out and painted, nothing is loaded from outside, no console
errors, and hostile device strings stay text."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from phonebench.core.paths import SOURCE_ROOT
from phonebench.bench.results.matrix import assemble, to_html
from phonebench.bench.report import render_run
from tests.report_example import ExampleDut, ExampleRun, write_example_run
from tests.browser_helpers import needs_browser, start_browser

XSS_DUT = "<script>alert(1)</script>"
XSS_MICROCODE = 'mc "q" & <img src=x onerror=alert(2)>'

pytestmark = needs_browser
ARTIFACTS = SOURCE_ROOT / "reports" / "test-artifacts" / "report"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    driver = start_browser()
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def open_page(driver, path: Path) -> None:
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(path.resolve().as_uri())


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("reports")
    duts = [ExampleDut(), ExampleDut(name=XSS_DUT, serial="EMU2", microcode=XSS_MICROCODE, fingerprint="mismatch",
                                     rule="wrap", latency_ok=False)]
    rec = write_example_run(folder, "r1", ExampleRun(duts=duts))
    return render_run(rec.run_dir)


def test_the_report_renders_with_every_plot_visible(browser, report):
    open_page(browser, report)
    assert browser.title == "phonebench run r1"
    assert browser.find_element("id", "summary").is_displayed()
    plots = browser.find_elements("css selector", "figure.plot svg")
    assert len(plots) == 16  # 10 raw-data plots, 6 claim plots
    for svg in plots:
        assert svg.is_displayed()
        size = svg.size
        assert size["width"] > 300 and size["height"] > 100, size
        browser.execute_script("arguments[0].scrollIntoView()", svg)
        pixels = _png_pixels(svg.screenshot_as_png)
        assert pixels.std() > 0.05, "the plot area is blank"
    assert console_errors(browser) == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0


def test_the_report_opens_with_the_claims_grid(browser, report):
    """A lab lead sees at a glance which claim holds on which phone: the grid is the first table,
    claims by number and name, a column per phone, an outcome in every cell. Screenshot kept."""
    open_page(browser, report)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "report-top.png"))
    first_table = browser.find_element("css selector", "table")
    assert "claims" in first_table.get_attribute("class")
    assert first_table.location["y"] < 700, "the claims grid is at the top of the page"
    grid = browser.find_element("css selector", "table.claims")
    grid.screenshot(str(ARTIFACTS / "claims-grid.png"))
    phones = [th.text for th in grid.find_elements("css selector", "th.phone")]
    assert phones == ["bay1", XSS_DUT]
    rows = grid.find_elements("css selector", "tr.claim-row")
    assert [r.get_attribute("data-claim") for r in rows] == [str(n) for n in range(1, 15)]
    assert rows[0].find_element("css selector", "th").text == "1. Voice latency"
    outcomes = {(r.get_attribute("data-claim"), c.get_attribute("data-phone")): c.get_attribute("data-outcome")
                for r in rows for c in r.find_elements("css selector", "td.cell")}
    assert outcomes[("1", "bay1")] == "pass" and outcomes[("1", XSS_DUT)] == "fail"
    assert outcomes[("8", "bay1")] == "pass" and outcomes[("3", "bay1")] == "not measured"
    cell = grid.find_element("css selector", "tr[data-claim='1'] td[data-phone='bay1']")
    assert "voice_latency" in cell.text and "≤ 410 ms" in cell.text and "measured" in cell.text
    claim_plot = browser.find_element("id", "claim-plot-1")
    browser.execute_script("arguments[0].scrollIntoView()", claim_plot)
    claim_plot.screenshot(str(ARTIFACTS / "claim-plot-1.png"))
    assert "None" not in browser.find_element("tag name", "body").text
    assert console_errors(browser) == []


def test_hostile_device_strings_stay_text_in_the_browser(browser, report):
    from selenium.common.exceptions import NoAlertPresentException

    open_page(browser, report)
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 - no script ran
    assert browser.execute_script("return document.scripts.length") == 0
    assert browser.execute_script("return document.images.length") == 0
    names = [cell.text for cell in browser.find_elements("css selector", "td.dut-name")]
    assert names == ["bay1", XSS_DUT]
    microcodes = [cell.text for cell in browser.find_elements("css selector", "td.microcode")]
    assert XSS_MICROCODE in microcodes
    assert console_errors(browser) == []


def test_the_matrix_page_renders_with_highlighted_rows(browser, tmp_path):
    from phonebench.bench.results.matrix import DutSighting, VerdictFact

    sightings = [DutSighting("r1", None, "bay1", "S1", "Qualcomm SM8650", "mc-1"),
                 DutSighting("r1", None, "bay2", "S2", "Qualcomm SM8650", XSS_MICROCODE)]
    facts = [VerdictFact("r1", None, "bay1", "fingerprint", "pass", {"verdict": "known"}),
             VerdictFact("r1", None, "bay2", "fingerprint", "fail", {"verdict": "unknown"})]
    page = tmp_path / "matrix.html"
    page.write_text(to_html(assemble(sightings, facts)))
    open_page(browser, page)
    rows = browser.find_elements("css selector", "tr.anomaly")
    assert len(rows) == 1 and XSS_MICROCODE in rows[0].text
    highlighted = browser.find_element("css selector", "tr.anomaly td.soc")
    plain = browser.find_element("css selector", "tr:not(.anomaly) td.soc")
    assert highlighted.value_of_css_property("background-color") != plain.value_of_css_property("background-color")
    assert console_errors(browser) == []


def test_the_console_check_catches_a_page_that_loads_from_outside(browser, tmp_path):
    """Negative control: the same security policy, one external image: the browser logs an error."""
    page = tmp_path / "bad.html"
    html = (Path(__file__).resolve().parent.parent / "bench/report/templates/report.html.j2").read_text()
    policy = html[html.index("<meta http-equiv"):html.index(">", html.index("<meta http-equiv")) + 1]
    page.write_text(f"<!DOCTYPE html><html><head>{policy}</head><body>"
                    f"<img src='http://127.0.0.1:9/x.png'></body></html>")
    open_page(browser, page)
    assert any("Content Security Policy" in m for m in console_errors(browser))


def _png_pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float) / 255.0

