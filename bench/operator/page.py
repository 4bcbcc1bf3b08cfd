"""The operator page's routes: sign-in and sign-out, the page, its state, the three actions.

Every template is autoescaped (.j2 included: station, fixture and unit names come from files and
phones). A session is a random id in a signed cookie (HttpOnly, SameSite=Strict, Secure over TLS;
the signing key is new at every start and never leaves memory) naming a server-side record with
the operator and that session's CSRF token (signin.py)."""
from __future__ import annotations

import hmac
import logging
import math
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from flask import Flask, Response, abort, g, jsonify, redirect, render_template, request, session
from werkzeug.wrappers import Response as BaseResponse

from .accounts import NAME, OperatorBook, OperatorsFileError
from .exposure import INSECURE_WARNING
from .shift import Shift
from .signin import FailureThrottle, Session, Sessions

log = logging.getLogger(__name__)


class OperatorStation(Protocol):
    """What the page needs of the station it serves (app.OperatorStation is one; the page does
    not import it: app imports the page)."""

    @property
    def title(self) -> str: ...

    @property
    def specs(self) -> Mapping[str, Any]: ...

    @property
    def shift(self) -> Shift: ...

    def act(self, action: str, fixture: str, serial: str | None = None, *, operator: str) -> tuple[bool, str]: ...

ACTIONS = ("scan", "retest", "repair")
MAX_BODY = 16 * 1024  # a scan, a sign-in: nothing bigger is ever posted here
SESSION_COOKIE = "phonebench_operator"


class _EscapingFlask(Flask):
    def select_jinja_autoescape(self, filename: str | None) -> bool:
        return True  # Flask's own choice escapes .html only, not .html.j2


def _same(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


def _shown(name: str) -> str:
    """A name as a log line may carry it: bounded, quoted, control characters escaped."""
    return repr(name[:40])


def create_app(station: OperatorStation, allowed_hosts: Sequence[str], operators: OperatorBook, *,
               tls: bool = False, insecure_network: bool = False) -> Flask:
    app = _EscapingFlask(__name__)
    app.secret_key = secrets.token_bytes(32)  # per start: a restart signs every operator out
    app.config.update(SESSION_COOKIE_NAME=SESSION_COOKIE, SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Strict", SESSION_COOKIE_SECURE=tls, MAX_CONTENT_LENGTH=MAX_BODY)
    hosts = {h.lower() for h in allowed_hosts}
    sessions, throttle = Sessions(), FailureThrottle()
    warning = INSECURE_WARNING if insecure_network else None

    def current() -> Session | None:
        return sessions.get(session.get("sid"))

    def signed_in() -> Session | None:
        """The signed-in operator's session, if that operator is still in the operators file."""
        found = current()
        if found is None or found.operator is None:
            return None
        if not operators.exists(found.operator):
            log.warning("operator %s is no longer in %s: signed out", _shown(found.operator), operators.path)
            sessions.end_operator(found.operator)
            return None
        return found

    def signin_page(message: str | None, status: int = 200) -> tuple[str, int]:
        fresh = current()
        if fresh is None or fresh.operator is not None:
            fresh = sessions.new()
            session["sid"] = fresh.sid
        return render_template("signin.html.j2", title=station.title, csrf=fresh.csrf, nonce=g.nonce,
                               message=message, warning=warning), status

    @app.before_request
    def _only_this_station() -> None:
        g.nonce = secrets.token_urlsafe(16)  # the page's own script and style, nothing injected
        if request.host.lower() not in hosts:  # DNS rebinding: a name that is not this server
            abort(421)

    @app.after_request
    def _no_outside_content(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{g.nonce}'; style-src 'nonce-{g.nonce}'; "
            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.get("/signin")
    def signin_form() -> tuple[str, int] | BaseResponse:
        if signed_in() is not None:
            return redirect("/", 303)
        return signin_page(None)

    @app.post("/signin")
    def signin() -> tuple[str, int] | BaseResponse:
        form = current()
        if form is None or form.operator is not None:  # the form outlived its session (a restart): a fresh one
            return signin_page("This sign-in form has expired: sign in again.", 403)
        if not _same(request.form.get("csrf"), form.csrf):
            abort(403)  # not this page's own sign-in form (a forged one)
        name, password = request.form.get("name", "").strip(), request.form.get("password", "")
        wait = throttle.wait_s(name)
        if wait > 0:
            log.warning("sign-in as %s from %s not checked: too many failures, %.0f s to wait",
                        _shown(name), request.remote_addr, wait)
            return signin_page(f"Too many failed sign-ins with this name: try again in {math.ceil(wait)} s.", 429)
        try:
            accepted = bool(NAME.match(name)) and operators.verify(name, password)
        except OperatorsFileError as exc:
            log.error("sign-in refused: %s", str(exc).splitlines()[0])
            return signin_page("The operators file cannot be read: call the line's engineer.", 503)
        if not accepted:
            failures = throttle.failed(name)
            log.warning("sign-in refused: operator %s from %s (failure %d in a row)", _shown(name),
                        request.remote_addr, failures)  # never the password
            return signin_page("Name or password not accepted.", 401)
        throttle.succeeded(name)
        sessions.end(form.sid)
        session["sid"] = sessions.new(name).sid  # a new id: the form's session cannot be carried over
        log.info("operator %s signed in from %s", name, request.remote_addr)
        return redirect("/", 303)

    @app.post("/signout")
    def signout() -> BaseResponse:
        found = current()
        if found is None:  # already ended (a restart, idle, removed): nothing to sign out of
            session.clear()
            return redirect("/signin", 303)
        if not _same(request.form.get("csrf"), found.csrf):
            abort(403)
        sessions.end(found.sid)
        session.clear()
        if found.operator:
            log.info("operator %s signed out", found.operator)
        return redirect("/signin", 303)

    @app.get("/")
    def page() -> str | BaseResponse:
        found = signed_in()
        if found is None:
            return redirect("/signin", 303)
        return render_template("operator.html.j2", title=station.title, csrf=found.csrf, operator=found.operator,
                               fixtures=list(station.specs), nonce=g.nonce, warning=warning)

    @app.get("/api/state")
    def state() -> Response | tuple[Response, int]:
        if signed_in() is None:
            return jsonify({"ok": False, "message": "sign in first"}), 401
        return jsonify(station.shift.view())

    @app.post("/api/<action>")
    def act(action: str) -> tuple[Response, int]:
        found = signed_in()
        if found is None or found.operator is None:
            return jsonify({"ok": False, "message": "sign in first"}), 401
        if not request.is_json or not _same(request.headers.get("X-CSRF-Token"), found.csrf):
            abort(403)  # not this session's page
        if action not in ACTIONS:
            abort(404)
        body = request.get_json(silent=True)
        body = body if isinstance(body, dict) else {}
        fixture, serial = body.get("fixture"), body.get("serial")
        if not isinstance(fixture, str) or (serial is not None and not isinstance(serial, str)):
            return jsonify({"ok": False, "message": "fixture and serial are text"}), 400
        ok, message = station.act(action, fixture, serial, operator=found.operator)
        log.info("operator %s: %s on fixture %s: %s", found.operator, action, _shown(fixture), message[:200])
        return jsonify({"ok": ok, "message": message}), (200 if ok else 409)

    return app
