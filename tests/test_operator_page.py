"""The operator station in a real headless Chromium (Debian's chromium + chromium-driver through
Selenium) on two emulated fixtures: sign in, scan, live progress, PASS,
FAIL in words with the engineering detail folded away, steps that never ran marked so, no
retest beyond the policy, send to repair, a wrong serial refused, two fixtures at once. Screenshots
are kept in reports/test-artifacts/operator/."""
from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

from phonebench.bench.operator.accounts import OperatorBook
from phonebench.bench.operator.app import OperatorStation, serve
from phonebench.bench.operator.fixture import EmulatedUnits, FixtureSpec
from phonebench.core.paths import SOURCE_ROOT
from tests.browser_helpers import needs_browser, start_browser

pytestmark = needs_browser
ARTIFACTS = SOURCE_ROOT / "reports" / "test-artifacts" / "operator"
WAIT_S = 600.0  # an upper bound for a loaded 2-core machine, not a speed target
OPERATOR, PASSWORD = "alice", "correct horse battery"


@pytest.fixture(scope="module")
def station(tmp_path_factory) -> Iterator[tuple[OperatorStation, str]]:
    results = tmp_path_factory.mktemp("operator")
    # Fixture A's units: LN07...; fixture B's: LN09... (the seeds choose the faulty ones: see faulty())
    specs = [FixtureSpec(name=name, results_dir=results, retries=1,
                         emulated=EmulatedUnits(count=3, faulty=1, seed=seed, faults=("no-redundancy",)))
             for name, seed in (("A", 7), ("B", 9))]
    operators = OperatorBook(results / "operators.json")
    operators.add(OPERATOR, PASSWORD)
    with OperatorStation(specs, title="test line") as op:
        server = serve(op, "127.0.0.1", 0, operators=operators)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield op, f"http://127.0.0.1:{server.server_port}/"
        finally:
            server.shutdown()
            server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    driver = start_browser("1280,1100")
    try:
        yield driver
    finally:
        driver.quit()


def faulty(seed: int, want: bool) -> str:
    """A serial of the test line's units of `seed` that is (or is not) faulty."""
    from phonebench.emulation.line import plan_units

    return next(u.serial for u in plan_units(3, 1, seed, ("no-redundancy",)) if bool(u.fault) == want)


def shot(driver, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def text(driver, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).text


def wait_for(driver, condition, what: str, limit_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    shot(driver, f"timeout-{what}")
    raise AssertionError(f"the page never showed {what} (screenshot kept)")


def scan(driver, fixture: str, serial: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    field = driver.find_element(By.ID, f"scan-{fixture}")
    field.send_keys(serial + Keys.ENTER)  # what a barcode scanner types


def test_operator_runs_two_fixtures_from_the_page(station, browser):
    from selenium.webdriver.common.by import By

    op, url = station
    browser.get(url)  # not signed in: the sign-in page
    browser.find_element(By.ID, "name").send_keys(OPERATOR)
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "signin").click()
    wait_for(browser, lambda: browser.find_elements(By.ID, "operator"), "the page after signing in")
    assert text(browser, "operator") == OPERATOR
    wait_for(browser, lambda: "ready" in text(browser, "why-A") and "ready" in text(browser, "why-B"),
             "both fixtures ready")
    # A wrong serial is refused at once, in words, and nothing starts.
    scan(browser, "A", "not a serial!")
    wait_for(browser, lambda: "is not a serial" in text(browser, "message-A"), "the refusal")
    # Two fixtures at once: the faulty unit on A, a good one on B.
    bad, good = faulty(7, True), faulty(9, False)
    scan(browser, "A", bad)
    scan(browser, "B", good)
    wait_for(browser, lambda: text(browser, "big-A") == "TESTING" and text(browser, "big-B") == "TESTING",
             "both fixtures testing")
    # The steps list is redrawn twice a second: read it in the page, not through stale element handles.
    wait_for(browser, lambda: browser.execute_script(
        "return [...document.querySelectorAll('#steps-A li')].some(li => li.className === 'done')"), "live progress")
    shot(browser, "testing")
    wait_for(browser, lambda: text(browser, "big-B") == "PASS", "PASS on fixture B")
    wait_for(browser, lambda: text(browser, "big-A") == "FAIL", "FAIL on fixture A")
    why = text(browser, "why-A")
    assert bad in why and "Redundancy under supply ripple: redundancy did NOT engage" in why  # in words
    assert "acceptance_redundancy_engaged =" not in why and "limit ==" not in why
    detail = browser.find_element(By.ID, "detail-A")  # the engineering detail, folded away
    assert detail.is_displayed() and detail.get_attribute("open") is None
    detail.find_element(By.TAG_NAME, "summary").click()
    assert "acceptance_redundancy_engaged = 0" in detail.text
    assert "unit accepted" in text(browser, "why-B")
    states = browser.execute_script("return [...document.querySelectorAll('#steps-A li')].map(li => li.className)")
    assert "fail" in states and "not-run" in states and "pending" not in states  # the run stopped at the FAIL
    shot(browser, "pass-and-fail")
    # The retest policy (one retest) was used by the acceptance run itself: no Retest, only the repair.
    op_fixture = next(f for f in op.shift.view()["fixtures"] if f["name"] == "A")
    assert op_fixture["attempts"][bad] == 2 and not op_fixture["may_retest"]
    assert not browser.find_element(By.ID, "retest-A").is_enabled()
    assert browser.find_element(By.ID, "repair-A").is_enabled()
    browser.find_element(By.ID, "repair-A").click()
    wait_for(browser, lambda: "sent to repair" in text(browser, "why-A"), "the repair disposition")
    shot(browser, "sent-to-repair")
    rows = browser.execute_script("return [...document.querySelectorAll('#unit-rows tr')].map(r => r.innerText)")
    assert any(good in r and "pass" in r and OPERATOR in r for r in rows)  # who tested it: the signed-in name
    assert any(bad in r and "repair" in r for r in rows)
    # A reload loses nothing: the state lives in the station, not in the page.
    browser.refresh()
    wait_for(browser, lambda: text(browser, "big-B") == "PASS" and "sent to repair" in text(browser, "why-A"),
             "the same state after a reload")
    assert text(browser, "units") == "2"
    # The unit placed on A is still the faulty one: scanning another serial is a wrong unit, the line stops.
    scan(browser, "A", "ZZ000001")
    wait_for(browser, lambda: text(browser, "big-A") == "STOP", "the wrong-unit stop")
    assert "wrong unit" in text(browser, "why-A")
    # No blocked content, no script errors (a refused action answers 409, which the console notes).
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"
              and not ("/api/" in e["message"] and "409" in e["message"])]
    assert errors == []


def test_the_page_refuses_foreign_hosts_and_posts_without_a_session(station, browser):
    import json
    import urllib.error
    import urllib.request

    from selenium.webdriver.common.by import By

    op, url = station
    bad_host = urllib.request.Request(url + "api/state", headers={"Host": "attacker.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(bad_host, timeout=30)
    assert refused.value.code == 421
    # The page's token, taken from a signed-in browser, acts for nobody without that browser's session.
    browser.get(url)
    if browser.find_elements(By.ID, "signin"):
        browser.find_element(By.ID, "name").send_keys(OPERATOR)
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        browser.find_element(By.ID, "signin").click()
    wait_for(browser, lambda: browser.find_elements(By.ID, "operator"), "the page after signing in")
    token = browser.find_element(By.CSS_SELECTOR, 'meta[name="csrf-token"]').get_attribute("content")
    stolen = urllib.request.Request(url + "api/scan", data=json.dumps({"fixture": "B", "serial": faulty(9, False)}).encode(),
                                    headers={"Content-Type": "application/json", "X-CSRF-Token": token}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(stolen, timeout=30)
    assert anonymous.value.code == 401
    # Signing out from the page ends the session: the page goes back to the sign-in form.
    browser.find_element(By.ID, "signout").click()
    wait_for(browser, lambda: browser.find_elements(By.ID, "signin"), "the sign-in page after signing out")
