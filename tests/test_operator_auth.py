"""The operator page signs operators in (issue 48): per-operator passwords in a 0600 operators file,
a session cookie with its own CSRF token, every action recorded with the signed-in name, failed
sign-ins logged without the password and slowed per name, no plain HTTP on the network unless the
opt-out says so loudly, and station or fixture names that cannot inject script.

Most tests drive the Flask app through its test client (no port, no browser); one starts a real
emulated fixture and checks the store's record of a scan and a repair."""
from __future__ import annotations

import io
import json
import logging
import re
import ssl
import stat
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from phonebench.bench.operator.accounts import OperatorBook, OperatorsFileError
from phonebench.bench.operator.app import OperatorStation, serve
from phonebench.bench.operator.exposure import INSECURE_WARNING, check_exposure, tls_context
from phonebench.bench.operator.fixture import EmulatedUnits, FixtureSpec
from phonebench.bench.operator.page import create_app
from phonebench.bench.operator.signin import FailureThrottle
from phonebench.core.errors import ConfigError, UsageError

PASSWORD = "correct horse battery"
WAIT_S = 600.0  # an upper bound for a loaded 2-core machine, not a speed target
EVIL = "<script>alert(1)</script>"


@pytest.fixture
def book(tmp_path) -> OperatorBook:
    operators = OperatorBook(tmp_path / "config" / "operators.json")
    operators.add("alice", PASSWORD)
    operators.add("bob", PASSWORD + " too")
    return operators


def station(tmp_path: Path, name: str = "A", title: str = "test line") -> OperatorStation:
    """A station that is never started: the page's gate is tested, not the fixture."""
    return OperatorStation([FixtureSpec(name=name, results_dir=tmp_path, emulated=EmulatedUnits(count=1))],
                           title=title)


def client(op: OperatorStation, book: OperatorBook, **options):
    return create_app(op, ["localhost"], book, **options).test_client()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf(?:-token)?" (?:content|value)="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


def sign_in(browser, name: str = "alice", password: str = PASSWORD):
    form = browser.get("/signin")
    return browser.post("/signin", data={"csrf": csrf_of(form.text), "name": name, "password": password})


def signed_in(browser, name: str = "alice", password: str = PASSWORD) -> str:
    """Sign in; the page's CSRF token."""
    answer = sign_in(browser, name, password)
    assert answer.status_code == 303 and answer.headers["Location"] == "/", answer.text
    return csrf_of(browser.get("/").text)


def scan(browser, token: str | None, fixture: str = "A", serial: str = "LN070001"):
    headers = {"X-CSRF-Token": token} if token is not None else {}
    return browser.post("/api/scan", json={"fixture": fixture, "serial": serial}, headers=headers)


# --- the gate --------------------------------------------------------------------------------
def test_an_anonymous_post_is_refused(tmp_path, book):
    browser = client(station(tmp_path), book)
    for action in ("scan", "retest", "repair"):
        assert browser.post(f"/api/{action}", json={"fixture": "A", "serial": "LN070001"}).status_code == 401
    assert browser.get("/api/state").status_code == 401  # the shift is for signed-in operators too
    page = browser.get("/")
    assert page.status_code == 303 and page.headers["Location"] == "/signin"
    assert "csrf-token" not in browser.get("/signin").text  # the sign-in form carries no action token


def test_a_post_with_a_stolen_page_token_but_no_session_is_refused(tmp_path, book):
    op = station(tmp_path)
    alice = client(op, book)
    token = signed_in(alice)
    assert scan(alice, token).status_code == 409  # alice's own post reaches the station (no fixture started)
    outsider = alice.application.test_client()  # the same page, another browser: no session cookie
    assert scan(outsider, token).status_code == 401
    bob = alice.application.test_client()  # signed in as someone else: alice's token is not bob's session's
    bob_token = signed_in(bob, "bob", PASSWORD + " too")
    assert bob_token != token
    assert scan(bob, token).status_code == 403
    assert scan(alice, None).status_code == 403  # the cookie alone is not enough (a cross-site post)
    assert alice.post("/api/shell", json={}, headers={"X-CSRF-Token": token}).status_code == 404  # three actions only
    assert alice.post("/api/scan", data="fixture=A&serial=LN070001", headers={"X-CSRF-Token": token},
                      content_type="application/x-www-form-urlencoded").status_code == 403  # JSON only
    # Signing out ends the session on the server: the old cookie and token no longer act.
    assert alice.post("/signout", data={"csrf": token}).status_code == 303
    assert scan(alice, token).status_code == 401


def test_a_sign_in_needs_the_forms_own_token_and_gets_a_new_session(tmp_path, book):
    browser = client(station(tmp_path), book)
    no_form = browser.post("/signin", data={"csrf": "x", "name": "alice", "password": PASSWORD})
    assert no_form.status_code == 403 and "expired" in no_form.text  # e.g. a form from before a restart
    browser.get("/signin")
    forged = browser.post("/signin", data={"csrf": "guessed", "name": "alice", "password": PASSWORD})
    assert forged.status_code == 403  # login CSRF: a page elsewhere cannot sign this browser in
    form_cookie = browser.get_cookie("phonebench_operator")
    assert form_cookie is not None
    assert form_cookie.http_only and form_cookie.same_site == "Strict" and not form_cookie.secure
    signed_in(browser)
    assert browser.get_cookie("phonebench_operator").value != form_cookie.value  # no session fixation


def test_removing_an_operator_ends_their_session(tmp_path, book):
    browser = client(station(tmp_path), book)
    token = signed_in(browser)
    book.remove("alice")
    assert scan(browser, token).status_code == 401
    assert sign_in(browser).status_code == 401


# --- sign-in failures -------------------------------------------------------------------------
def test_a_wrong_password_is_refused_and_not_logged(tmp_path, book, caplog, monkeypatch):
    monkeypatch.setattr(FailureThrottle, "BASE_S", 3600.0)  # the throttle's wait cannot run out during the test
    browser = client(station(tmp_path), book)
    wrong = "hunter2-not-alices"
    with caplog.at_level(logging.DEBUG):
        answer = sign_in(browser, "alice", wrong)
        assert answer.status_code == 401 and "not accepted" in answer.text
        assert browser.get("/").status_code == 303  # not signed in
        assert sign_in(browser, "mallory", wrong).status_code == 401  # an unknown name reads the same
        for _ in range(FailureThrottle.FREE - 1):
            assert sign_in(browser, "alice", wrong).status_code == 401
        # The name is now slowed: even the right password is not checked until the wait is over.
        slowed = sign_in(browser, "alice", PASSWORD)
        assert slowed.status_code == 429 and "try again in" in slowed.text
        assert sign_in(browser, "bob", PASSWORD + " too").status_code == 303  # other operators are not slowed
    assert wrong not in caplog.text and PASSWORD not in caplog.text
    assert "sign-in refused: operator 'alice'" in caplog.text and "'mallory'" in caplog.text


def test_the_throttle_doubles_the_wait_and_forgets_on_success():
    throttle = FailureThrottle()
    for n in range(FailureThrottle.FREE):
        assert throttle.wait_s("alice", now=100.0) == 0.0
        throttle.failed("alice", now=100.0)
    assert throttle.wait_s("alice", now=100.0) == FailureThrottle.BASE_S
    throttle.failed("ALICE", now=100.0)  # names are counted case-blind
    assert throttle.wait_s("alice", now=100.0) == 2 * FailureThrottle.BASE_S
    for _ in range(40):
        throttle.failed("alice", now=100.0)
    assert throttle.wait_s("alice", now=100.0) == FailureThrottle.MAX_WAIT_S
    throttle.succeeded("alice")
    assert throttle.wait_s("alice", now=100.0) == 0.0
    for n in range(FailureThrottle.MAX_NAMES + 10):  # bounded: guessing many names cannot fill memory
        throttle.failed(f"name{n}", now=100.0)
    assert len(throttle._failures) == FailureThrottle.MAX_NAMES


# --- the operators file -----------------------------------------------------------------------
def test_the_operators_file_is_the_owners_only(tmp_path, book):
    assert stat.S_IMODE(book.path.stat().st_mode) == 0o600
    text = book.path.read_text()
    assert PASSWORD not in text and '"scrypt:' in text
    book.path.chmod(0o644)
    with pytest.raises(OperatorsFileError) as refused:
        OperatorBook(book.path).operators()
    assert str(book.path) in str(refused.value) and "chmod 600" in str(refused.value)
    browser = client(station(tmp_path), book)
    assert sign_in(browser).status_code == 503  # a file others could read signs nobody in
    with pytest.raises(OperatorsFileError):
        serve(station(tmp_path), "127.0.0.1", 0, operators=book)  # nor does the page start on it


def test_bench_line_operators_add_list_remove(tmp_path, monkeypatch, capsys):
    from phonebench.bench.cli import main

    path = tmp_path / "ops" / "operators.json"
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["line", "operators", "add", "carol", "--password-stdin", "--operators", str(path)]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert OperatorBook(path).verify("carol", PASSWORD) and not OperatorBook(path).verify("carol", "wrong one")
    assert main(["line", "operators", "list", "--operators", str(path)]) == 0
    assert "carol" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["line", "operators", "add", "dave", "--password-stdin", "--operators", str(path)]) == 4
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal, no --password-stdin: never silently empty
    assert main(["line", "operators", "add", "dave", "--operators", str(path)]) == 4
    assert main(["line", "operators", "add", "<b>x", "--password-stdin", "--operators", str(path)]) == 4
    assert main(["line", "operators", "remove", "carol", "--operators", str(path)]) == 0
    assert OperatorBook(path).operators() == {}
    assert "not a name" in capsys.readouterr().err


# --- the network ------------------------------------------------------------------------------
def test_non_loopback_without_tls_is_refused_and_the_opt_out_warned(tmp_path, book, capsys, caplog):
    from phonebench.bench.cli import main

    code = main(["line", "serve", "--host", "192.0.2.10", "--port", "0", "--operators", str(book.path)])
    assert code == 4
    err = capsys.readouterr().err
    assert "plain HTTP" in err and "--tls-cert" in err and "--insecure-http-on-network" in err
    with pytest.raises(UsageError):
        serve(station(tmp_path), "0.0.0.0", 0, operators=book)
    for loopback in ("127.0.0.1", "localhost", "::1"):
        assert check_exposure(loopback, tls=False, insecure_network=False) is False
    assert check_exposure("192.0.2.10", tls=True, insecure_network=False) is False
    # The opt-out: warned when the page starts listening, and on the page itself. (Bound to every
    # address for a moment, on a free port, never serving a request.)
    with caplog.at_level(logging.WARNING):
        server = serve(station(tmp_path), "0.0.0.0", 0, operators=book, insecure_network=True)
    try:
        assert INSECURE_WARNING in caplog.text
        page = server.app.test_client()
        host = {"Host": f"0.0.0.0:{server.server_port}"}
        assert INSECURE_WARNING in page.get("/signin", headers=host).text  # before a password is typed
    finally:
        server.server_close()
    browser = client(station(tmp_path), book, insecure_network=True)
    signed_in(browser)
    assert INSECURE_WARNING in browser.get("/").text
    assert INSECURE_WARNING not in client(station(tmp_path), book).get("/signin").text


def test_the_page_over_tls_sets_a_secure_cookie(tmp_path, book):
    from werkzeug.serving import make_ssl_devcert

    cert, key = make_ssl_devcert(str(tmp_path / "line"), host="localhost")
    Path(key).chmod(0o644)
    with pytest.raises(ConfigError, match="readable by every user"):
        tls_context(cert, key)
    Path(key).chmod(0o600)
    server = serve(station(tmp_path), "127.0.0.1", 0, operators=book, tls_cert=cert, tls_key=key)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        context = ssl.create_default_context(cafile=cert)
        context.check_hostname = False  # the dev certificate names localhost; the request goes to 127.0.0.1
        with urllib.request.urlopen(f"https://127.0.0.1:{server.server_port}/signin", context=context,
                                    timeout=60) as answer:
            cookie = answer.headers["Set-Cookie"]
            assert answer.status == 200
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    finally:
        server.shutdown()
        server.server_close()


# --- escaping ---------------------------------------------------------------------------------
def test_script_in_station_and_fixture_names_is_escaped(tmp_path, book):
    browser = client(station(tmp_path, name=EVIL, title=f"{EVIL} line"), book)
    assert EVIL not in browser.get("/signin").text
    signed_in(browser)
    page = browser.get("/").text
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '"><script' not in page  # nor out of an attribute


# --- the record -------------------------------------------------------------------------------
def test_a_signed_in_operators_scan_and_repair_are_recorded_with_their_name(tmp_path, book):
    from phonebench.bench.procedures.acceptance.attempts import AttemptBook
    from phonebench.bench.store import open_store

    results = tmp_path / "results"
    spec = FixtureSpec(name="A", results_dir=results, operator="the-flag",
                       emulated=EmulatedUnits(count=1, faulty=0, seed=7))
    with OperatorStation([spec], title="test line") as op:
        browser = client(op, book)
        token = signed_in(browser)
        state = lambda: json.loads(browser.get("/api/state").text)["fixtures"][0]  # noqa: E731
        wait_until(lambda: state()["status"] in ("idle", "down"), "the fixture ready")
        assert state()["status"] == "idle", state().get("reason")
        # The unit on the fixture is LN070001: another serial stops as a wrong unit, quickly, and is stored.
        answer = scan(browser, token, serial="ZZ000001")
        assert answer.status_code == 200, answer.text
        wait_until(lambda: state()["status"] == "result", "the result")
        assert state()["result"]["outcome"] == "wrong-unit" and state()["operator"] == "alice"
        assert browser.post("/api/repair", json={"fixture": "A"}, headers={"X-CSRF-Token": token}).status_code == 200
        wait_until(lambda: state()["disposed"], "the repair")
        rows = json.loads(browser.get("/api/state").text)["units"]
        assert rows[0]["operator"] == "alice"
    with open_store(results / "results.sqlite") as store:
        stored = AttemptBook(store).attempts(serial="ZZ000001")
    assert [a.operator for a in stored] == ["alice"]  # the signed-in name, not the command line's
    assert stored[-1].outcome == "wrong-unit" and stored[-1].details["disposed_by"] == "alice"


def wait_until(condition, what: str, limit_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"never saw {what}")
