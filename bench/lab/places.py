"""Places through `labgrid-client`: create one per bay, reserve and acquire (waiting, bounded,
for a holder), read the acquired resources, release and cancel the reservation.

A bench acquires as `<user>.<pid>` on its host (LG_USERNAME), so the coordinator's owner string
`host/user.pid` names the very process holding a place. A place held by a process of this host
that no longer exists (a bench killed with SIGKILL) is stale: the next bench kicks it off and
acquires it, so a crashed run leaves its place reclaimable.
"""
from __future__ import annotations

import ast
import contextlib
import fnmatch
import getpass
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phonebench.core.errors import BenchError, ConfigError

log = logging.getLogger(__name__)

ENV_COORDINATOR = "LG_COORDINATOR"
DEFAULT_WAIT_S = 600.0
POLL_S = 3.0  # one look at a waiting reservation (a labgrid-client start costs about a second)
_HELD = re.compile(r"acquired by (\S+?)\.?(?:\s|$)")
# `labgrid-client show` lists a held place's resources as acquired, an idle one's as matching
_RESOURCE = re.compile(r"^(?:Acquired|Matching) resource '([^']+)' \(([^)]*)\):$")
_UNREACHABLE = "Could not connect to coordinator"


def _labgrid_client() -> str:
    """labgrid-client beside this Python (a venv not on PATH), else on PATH."""
    beside = Path(sys.executable).parent / "labgrid-client"
    found = str(beside) if beside.exists() else shutil.which("labgrid-client")
    if found is None:
        raise ConfigError("labgrid-client not found", hint="pip install 'phonebench[lab]' (labgrid 26)")
    return found


class PlaceBusy(BenchError):
    """The place is held by someone else and did not come free in time."""


@dataclass
class Lab:
    coordinator: str
    user: str = ""
    program: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.user = self.user or f"{getpass.getuser()}.{os.getpid()}"
        self.program = _labgrid_client()

    def client(self, *args: str, place: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        env = {**os.environ, ENV_COORDINATOR: self.coordinator, "LG_USERNAME": self.user}
        command = [self.program, *(["-p", place] if place else []), *args]
        try:
            return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(f"`{' '.join(command)}` did not answer in {timeout:.0f} s",
                             hint=f"is the coordinator at {self.coordinator} up?") from None

    def _checked(self, *args: str, place: str | None = None) -> str:
        proc = self.client(*args, place=place)
        if proc.returncode != 0 and _UNREACHABLE in proc.stderr + proc.stdout:
            raise BenchError(f"cannot reach the labgrid coordinator at {self.coordinator}",
                             hint=f"start labgrid-coordinator there, or pass --coordinator HOST:PORT (or set {ENV_COORDINATOR})")
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines() or ["failed"]
            raise BenchError(f"labgrid-client {' '.join(args)}{' on ' + place if place else ''}: {lines[-1][:300]}",
                             hint=f"coordinator {self.coordinator}")
        return proc.stdout

    # --- places -----------------------------------------------------------------------------
    def places(self, pattern: str = "*") -> list[str]:
        names = [line.strip() for line in self._checked("places").splitlines() if line.strip()]
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]

    def select(self, pattern: str) -> list[str]:
        """The places matching `pattern` (a name or a shell pattern); none is a ConfigError naming
        the pattern, the coordinator and the places it has."""
        found = self.places(pattern)
        if not found:
            there = self.places()
            raise ConfigError(f"no place matches {pattern!r} on coordinator {self.coordinator}",
                              hint=f"its places: {', '.join(there) if there else 'none'}; "
                                   "`bench lab places` creates one per bay")
        return found

    def create_bay_places(self, exporter: str, bays: list[str]) -> list[str]:
        """One place per bay, `<exporter>-<bay>`, matching that bay's resource group."""
        made = []
        existing = set(self.places())
        for bay in bays:
            name = f"{exporter}-{bay}"
            if name not in existing:
                self._checked("create", place=name)
                self._checked("add-match", f"{exporter}/{bay}/*", place=name)
            made.append(name)
        return made

    def state(self, place: str) -> dict[str, str | None]:
        """The place's `acquired` (host/user or None) and `reservation` (token or None)."""
        found: dict[str, str | None] = {"acquired": None, "reservation": None}
        for line in self._checked("show", place=place).splitlines():
            key, _, value = line.strip().partition(": ")
            if key in found:
                found[key] = None if value in ("None", "") else value
        return found

    def owner(self, place: str) -> str | None:
        return self.state(place)["acquired"]

    def reserve(self, place: str) -> str:
        """A reservation for `place` (labgrid schedules waiting benches in order); returns its token."""
        out = self._checked("reserve", "--shell", f"name={place}")
        match = re.search(r"LG_TOKEN=(\S+)", out)
        if match is None:
            raise BenchError(f"place {place}: `labgrid-client reserve` gave no token: {out.strip()[:200]}")
        return match.group(1)

    def _poll(self, token: str) -> None:
        """`labgrid-client wait` for a moment: it polls the reservation (keeping it alive, as the
        coordinator drops one nobody polls for 60 s) and returns early once it is allocated."""
        env = {**os.environ, ENV_COORDINATOR: self.coordinator, "LG_USERNAME": self.user}
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([self.program, "wait", token], env=env, capture_output=True, timeout=POLL_S)

    def cancel(self, token: str) -> None:
        self.client("cancel-reservation", token)

    def acquire(self, place: str, wait_s: float = DEFAULT_WAIT_S) -> str:
        """Reserve and acquire `place`; returns the reservation token.

        A holder makes this wait (saying who, once) up to wait_s, then PlaceBusy names it. A
        holder that is a dead process of this host (a killed bench) is kicked off, and its
        reservation cancelled, so its place is reclaimed.
        """
        if place not in self.places():
            raise ConfigError(f"no place {place!r} on coordinator {self.coordinator}",
                              hint=f"places: {', '.join(self.places()) or 'none'}; `bench lab places` creates them")
        token = self.reserve(place)
        try:
            self._wait_and_acquire(place, token, time.monotonic() + wait_s, wait_s)
        except BaseException:
            self.cancel(token)
            raise
        log.info("acquired place %s as %s (reservation %s)", place, self.user, token)
        return token

    def _wait_and_acquire(self, place: str, token: str, deadline: float, wait_s: float) -> None:
        told = None
        while True:
            self._poll(token)
            state = self.state(place)
            holder = state["acquired"]
            if holder is None and state["reservation"] == token:
                proc = self.client("acquire", place=place)
                if proc.returncode == 0:
                    return
                text = (proc.stderr + proc.stdout).strip()
                held = _HELD.search(text)
                if held is None:
                    raise BenchError(f"place {place}: acquire failed: {text.splitlines()[-1] if text else proc.returncode}",
                                     hint=f"`labgrid-client -p {place} show` on coordinator {self.coordinator}")
                holder = held.group(1)
            if holder is not None and self._stale(holder):
                log.warning("place %s: holder %s is gone (a killed run); reclaiming it", place, holder)
                self.client("release", "--kick", place=place)
                if state["reservation"] not in (None, token):
                    self.cancel(state["reservation"])
                continue
            if time.monotonic() >= deadline:
                who = holder or f"reservation {state['reservation']}"
                raise PlaceBusy(f"place {place} is held by {who}; waited {wait_s:.0f} s",
                                hint="try later, pick another place, or ask the holder to release it")
            if holder is not None and told != holder:
                print(f"bench: place {place} is held by {holder}; waiting up to {wait_s:.0f} s", flush=True)
                told = holder

    def _stale(self, holder: str) -> bool:
        host, _, user = holder.partition("/")
        name, _, pid = user.rpartition(".")
        if host != socket.gethostname() or not pid.isdigit() or name != getpass.getuser():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def release(self, place: str, token: str | None = None) -> None:
        proc = self.client("release", place=place)
        if proc.returncode != 0:
            log.warning("place %s not released: %s", place, (proc.stderr or proc.stdout).strip())
        if token is not None:
            self.cancel(token)

    def resources(self, place: str) -> dict[str, dict[str, Any]]:
        """The place's resources: name -> {cls, params, ...} (from `labgrid-client show`): those it
        holds once acquired, else those its matches select (reading them locks nothing)."""
        resources: dict[str, dict[str, Any]] = {}
        name: str | None = None
        block: list[str] = []
        for line in [*self._checked("show", place=place).splitlines(), "Acquired resource 'end' ():"]:
            match = _RESOURCE.match(line)
            if match:
                if name is not None:
                    resources[name] = ast.literal_eval("\n".join(block).strip())
                name, block = match.group(1), []
            elif name is not None:
                block.append(line)
        return resources

    @contextlib.contextmanager
    def held(self, place: str, wait_s: float = DEFAULT_WAIT_S) -> Iterator[dict[str, dict[str, Any]]]:
        """Acquire, yield the resources, and release however the body ends (failure, Ctrl-C)."""
        token = self.acquire(place, wait_s)
        try:
            yield self.resources(place)
        finally:
            self.release(place, token)
