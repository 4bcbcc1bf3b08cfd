"""The operator station's web server (Flask): sign-in, the page, its state as JSON, and the three
operator actions — scan, retest, send to repair. Nothing else can be asked of the station from a
browser: no commands, no file paths. An operator signs in with their own name and password (the
operators file, accounts.py); every action needs that session and the session's own CSRF token
as JSON, and is recorded with the signed-in name. A request must name this server as its Host.
Served on loopback by default; anything else needs TLS or a loud opt-out (exposure.py)."""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .accounts import OperatorBook
from .exposure import INSECURE_WARNING, check_exposure, tls_context
from .fixture import FixtureSpec, start_fixture
from .page import create_app
from .shift import Shift

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess
    from multiprocessing.queues import Queue

    from flask import Flask
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

    def act(self, action: str, fixture: str, serial: str | None = None, *, operator: str) -> tuple[bool, str]:
        """One operator action by the signed-in `operator`, who is recorded with it; (accepted, what
        the page says)."""
        if fixture not in self._fixtures:
            return False, f"no fixture {fixture!r}"
        _, commands = self._fixtures[fixture]
        if action == "scan":
            serial = (serial or "").strip()
            refusal = self.shift.check_scan(fixture, serial)
            if refusal:
                return False, refusal
            self.shift.apply({"fixture": fixture, "event": "started", "serial": serial, "operator": operator})
            commands.put({"action": "accept", "serial": serial, "operator": operator})
            return True, f"testing {serial} on fixture {fixture}"
        state = self.shift.view()["fixtures"]
        current = next(f for f in state if f["name"] == fixture)
        shown = (current.get("result") or {}).get("serial")
        if action == "retest":
            if not current["may_retest"]:
                return False, "the retest policy allows no retest of this result: send the unit to repair"
            self.shift.apply({"fixture": fixture, "event": "started", "serial": shown, "operator": operator})
            commands.put({"action": "accept", "serial": shown, "operator": operator})
            return True, f"retesting {shown} on fixture {fixture}"
        if action == "repair":
            if not current["may_repair"]:
                return False, "nothing to send to repair on this fixture"
            commands.put({"action": "repair", "serial": shown, "operator": operator})
            return True, f"{shown} goes to repair"
        return False, f"unknown action {action!r}"

    def app(self, allowed_hosts: Sequence[str], operators: OperatorBook, *, tls: bool = False,
            insecure_network: bool = False) -> Flask:
        return create_app(self, allowed_hosts, operators, tls=tls, insecure_network=insecure_network)


def _default_retestable() -> frozenset[str]:
    from ..procedures.acceptance.disposition import RetestPolicy

    return RetestPolicy().retestable


def serve(station: OperatorStation, host: str = "127.0.0.1", port: int = 8080, *, operators: OperatorBook,
          tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
          insecure_network: bool = False) -> BaseWSGIServer:
    """A threaded WSGI server for the page (werkzeug, which Flask ships); returns it, not yet
    serving. A host that is not loopback needs TLS or `insecure_network` (UsageError otherwise)."""
    from werkzeug.serving import make_server

    insecure = check_exposure(host, tls=tls_cert is not None or tls_key is not None, insecure_network=insecure_network)
    operators.operators()  # a missing or unsafe operators file stops the page before it listens
    context = tls_context(tls_cert, tls_key) if tls_cert is not None or tls_key is not None else None
    server = make_server(host, port, None, threaded=True,  # type: ignore[arg-type]  # the app needs the bound port: set below
                         ssl_context=context)
    bound = server.server_port
    names = {f"{host}:{bound}", f"localhost:{bound}", f"127.0.0.1:{bound}"} if host in ("127.0.0.1", "localhost") \
        else {f"{host}:{bound}"}
    server.app = station.app(sorted(names), operators, tls=context is not None, insecure_network=insecure)
    if insecure:
        log.warning("%s: http://%s:%d/", INSECURE_WARNING, host, bound)
    log.info("operator station on %s://%s:%d/", "https" if context is not None else "http", host, bound)
    return server
