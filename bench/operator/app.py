"""The operator station's web server (Flask): the page, its state as JSON, and the three operator
actions — scan, retest, send to repair. Nothing else can be asked of the station from a browser:
no commands, no file paths. Served on loopback by default; a request must name this server as its
Host, and an action must carry the page's token as JSON (a page from elsewhere can neither read
the token nor post JSON here without it)."""
from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, abort, g, jsonify, render_template, request

from .fixture import FixtureSpec, start_fixture
from .shift import Shift

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess
    from multiprocessing.queues import Queue

    from werkzeug.serving import BaseWSGIServer

log = logging.getLogger(__name__)

ACTIONS = ("scan", "retest", "repair")
STOP_TIMEOUT_S = 30.0  # a fixture closing its emulated line and store after SIGTERM


class OperatorStation:
    """The fixtures' processes and the shift they feed; `app()` is the page over them."""

    def __init__(self, specs: Sequence[FixtureSpec], title: str = "phonebench operator station") -> None:
        import multiprocessing as mp

        if not specs:
            raise ValueError("an operator station needs at least one fixture")
        self.title = title
        self.specs = {s.name: s for s in specs}
        first = specs[0]
        retestable = frozenset(first.retestable) if first.retestable is not None else _default_retestable()
        self.shift = Shift([s.name for s in specs], first.retries, retestable)
        self._events = mp.get_context("spawn").Queue()
        self._fixtures: dict[str, tuple[BaseProcess, Queue[dict[str, Any]]]] = {}  # process, its commands
        self._stop = threading.Event()
        self._pump = threading.Thread(target=self._pump_events, name="operator-events", daemon=True)
        self.token = secrets.token_urlsafe(24)

    def start(self) -> OperatorStation:
        for name, spec in self.specs.items():
            self._fixtures[name] = start_fixture(spec, self._events)
        self._pump.start()
        return self

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop every fixture: an idle one at once, a busy one after `grace_s` by SIGTERM (its
        attempt is stored incomplete), one that ignores that by SIGKILL."""
        self._stop.set()
        for process, commands in self._fixtures.values():
            commands.put({"action": "stop"})
        deadline = time.monotonic() + grace_s
        for process, _ in self._fixtures.values():
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process, _ in self._fixtures.values():
            if process.is_alive():
                process.terminate()
                process.join(timeout=STOP_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join(timeout=STOP_TIMEOUT_S)
        self._fixtures.clear()

    def __enter__(self) -> OperatorStation:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _pump_events(self) -> None:
        while not self._stop.is_set():
            try:
                event = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            self.shift.apply(event)

    def act(self, action: str, fixture: str, serial: str | None = None) -> tuple[bool, str]:
        """One operator action; (accepted, what the page says)."""
        if fixture not in self._fixtures:
            return False, f"no fixture {fixture!r}"
        _, commands = self._fixtures[fixture]
        if action == "scan":
            serial = (serial or "").strip()
            refusal = self.shift.check_scan(fixture, serial)
            if refusal:
                return False, refusal
            self.shift.apply({"fixture": fixture, "event": "started", "serial": serial})
            commands.put({"action": "accept", "serial": serial})
            return True, f"testing {serial} on fixture {fixture}"
        state = self.shift.view()["fixtures"]
        current = next(f for f in state if f["name"] == fixture)
        shown = (current.get("result") or {}).get("serial")
        if action == "retest":
            if not current["may_retest"]:
                return False, "the retest policy allows no retest of this result: send the unit to repair"
            self.shift.apply({"fixture": fixture, "event": "started", "serial": shown})
            commands.put({"action": "accept", "serial": shown})
            return True, f"retesting {shown} on fixture {fixture}"
        if action == "repair":
            if not current["may_repair"]:
                return False, "nothing to send to repair on this fixture"
            commands.put({"action": "repair", "serial": shown})
            return True, f"{shown} goes to repair"
        return False, f"unknown action {action!r}"

    def app(self, allowed_hosts: Sequence[str]) -> Flask:
        return create_app(self, allowed_hosts)


def _default_retestable() -> frozenset[str]:
    from ..procedures.acceptance.judge import RetestPolicy

    return RetestPolicy().retestable


def create_app(station: OperatorStation, allowed_hosts: Sequence[str]) -> Flask:
    app = Flask(__name__)
    # Flask escapes templates named *.html, not operator.html.j2: every template is escaped here.
    app.jinja_env.autoescape = True
    hosts = {h.lower() for h in allowed_hosts}

    @app.before_request
    def _only_this_station() -> None:
        g.nonce = secrets.token_urlsafe(16)  # the page's own script and style, nothing injected
        if request.host.lower() not in hosts:  # DNS rebinding: a name that is not this server
            abort(421)
        if request.method == "POST":
            if not request.is_json or request.headers.get("X-Operator-Token") != station.token:
                abort(403)

    @app.after_request
    def _no_outside_content(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{g.nonce}'; style-src 'nonce-{g.nonce}'; "
            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.get("/")
    def page() -> str:
        return render_template("operator.html.j2", title=station.title, token=station.token,
                               fixtures=list(station.specs), nonce=g.nonce)

    @app.get("/api/state")
    def state() -> Response:
        return jsonify(station.shift.view())

    @app.post("/api/<action>")
    def act(action: str) -> tuple[Response, int]:
        if action not in ACTIONS:
            abort(404)
        body = request.get_json(silent=True) or {}
        fixture, serial = body.get("fixture"), body.get("serial")
        if not isinstance(fixture, str) or (serial is not None and not isinstance(serial, str)):
            return jsonify({"ok": False, "message": "fixture and serial are text"}), 400
        ok, message = station.act(action, fixture, serial)
        return jsonify({"ok": ok, "message": message}), (200 if ok else 409)

    return app


def serve(station: OperatorStation, host: str = "127.0.0.1", port: int = 8080) -> BaseWSGIServer:
    """A threaded WSGI server for the page (werkzeug, which Flask ships); returns it, not yet serving."""
    from werkzeug.serving import make_server

    server = make_server(host, port, None, threaded=True)  # type: ignore[arg-type]  # the app needs the bound port: set below
    bound = server.server_port
    names = {f"{host}:{bound}", f"localhost:{bound}", f"127.0.0.1:{bound}"} if host in ("127.0.0.1", "localhost") \
        else {f"{host}:{bound}"}
    server.app = station.app(sorted(names))
    log.info("operator station on http://%s:%d/", host, bound)
    return server
