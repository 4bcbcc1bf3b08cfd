"""Who is signed in to the operator page, and how fast a name may be guessed at.

Sessions live here, in the page's memory (the browser holds only a random id in a signed cookie):
signing out or restarting the page ends them, and each carries its own CSRF token. Both tables
are bounded, so nobody can fill the page's memory by asking for sign-in forms or guessing names."""
from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

IDLE_S = 12 * 3600.0  # a shift and some: an idle session ends by itself
MAX_SIGNED_IN = 64  # operators at one station at once, with room
MAX_ANONYMOUS = 256  # sign-in forms handed out and not yet used


@dataclass
class Session:
    sid: str
    csrf: str
    operator: str | None = None  # None: a sign-in form's session, not signed in
    created: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)


class Sessions:
    def __init__(self, idle_s: float = IDLE_S) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._signed_in: OrderedDict[str, Session] = OrderedDict()  # least recently seen first
        self._anonymous: OrderedDict[str, Session] = OrderedDict()

    def new(self, operator: str | None = None) -> Session:
        """A fresh session (new id, new CSRF token): a sign-in never keeps the id it came with."""
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), operator)
        table, limit = (self._signed_in, MAX_SIGNED_IN) if operator else (self._anonymous, MAX_ANONYMOUS)
        with self._lock:
            table[session.sid] = session
            while len(table) > limit:
                table.popitem(last=False)
        return session

    def get(self, sid: object) -> Session | None:
        if not isinstance(sid, str):
            return None
        now = time.monotonic()
        with self._lock:
            for table in (self._signed_in, self._anonymous):
                session = table.get(sid)
                if session is None:
                    continue
                if now - session.seen > self.idle_s:
                    del table[sid]
                    return None
                session.seen = now
                table.move_to_end(sid)
                return session
        return None

    def end(self, sid: object) -> None:
        with self._lock:
            for table in (self._signed_in, self._anonymous):
                table.pop(sid, None)  # type: ignore[call-overload]  # any cookie value: absent is fine

    def end_operator(self, operator: str) -> None:
        """Every session of an operator no longer in the operators file."""
        with self._lock:
            for sid in [s.sid for s in self._signed_in.values() if s.operator == operator]:
                del self._signed_in[sid]


class FailureThrottle:
    """Failed sign-ins per name: the first FREE are free, then each try waits twice as long as the
    last (up to MAX_WAIT_S) after the latest failure. A success clears the name."""

    FREE = 3
    BASE_S = 1.0
    MAX_WAIT_S = 300.0
    MAX_NAMES = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()  # name -> (count, last failure)

    def wait_s(self, name: str, now: float | None = None) -> float:
        """Seconds before `name` may be tried again (0: now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            count, last = self._failures.get(_key(name), (0, 0.0))
        if count < self.FREE:
            return 0.0
        return max(0.0, last + min(self.BASE_S * 2 ** (count - self.FREE), self.MAX_WAIT_S) - now)

    def failed(self, name: str, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        key = _key(name)
        with self._lock:
            count = self._failures.pop(key, (0, 0.0))[0] + 1
            self._failures[key] = (count, now)
            while len(self._failures) > self.MAX_NAMES:
                self._failures.popitem(last=False)
        return count

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._failures.pop(_key(name), None)


def _key(name: str) -> str:
    return name[:64].lower()
