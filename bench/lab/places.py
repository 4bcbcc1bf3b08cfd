"""Places through `labgrid-client`: create one per bay, acquire (waiting, bounded, for a holder),
read the acquired resources, release.

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

from bench.core.errors import BenchError, ConfigError

log = logging.getLogger(__name__)

ENV_COORDINATOR = "LG_COORDINATOR"
DEFAULT_WAIT_S = 600.0
_HELD = re.compile(r"acquired by (\S+?)\.?(?:\s|$)")
_ACQUIRED_RES = re.compile(r"^Acquired resource '([^']+)' \(([^)]*)\):$")


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
        if proc.returncode != 0:
            raise BenchError(f"labgrid-client {' '.join(args)}{' on ' + place if place else ''}: "
                             f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:] or ['failed']}"[:500],
                             hint=f"coordinator {self.coordinator}")
        return proc.stdout

    # --- places -----------------------------------------------------------------------------
    def places(self, pattern: str = "*") -> list[str]:
        names = [line.strip() for line in self._checked("places").splitlines() if line.strip()]
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]

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

    def owner(self, place: str) -> str | None:
        for line in self._checked("show", place=place).splitlines():
            key, _, value = line.strip().partition(": ")
            if key == "acquired":
                return None if value in ("None", "") else value
        return None

    def acquire(self, place: str, wait_s: float = DEFAULT_WAIT_S) -> None:
        """Acquire `place`; a holder makes this wait (saying who, once) up to wait_s, then PlaceBusy."""
        deadline = time.monotonic() + wait_s
        told = None
        while True:
            proc = self.client("acquire", place=place)
            if proc.returncode == 0:
                log.info("acquired place %s as %s", place, self.user)
                return
            text = (proc.stderr + proc.stdout).strip()
            held = _HELD.search(text)
            if held is None:
                raise BenchError(f"place {place}: acquire failed: {text.splitlines()[-1] if text else proc.returncode}",
                                 hint=f"`labgrid-client -p {place} show` on coordinator {self.coordinator}")
            holder = held.group(1)
            if self._stale(holder):
                log.warning("place %s: holder %s is gone (killed run); reclaiming it", place, holder)
                self.client("release", "--kick", place=place)
                continue
            if time.monotonic() >= deadline:
                raise PlaceBusy(f"place {place} is held by {holder}; waited {wait_s:.0f} s",
                                hint="try later, pick another place, or ask the holder to release it")
            if told != holder:
                print(f"bench: place {place} is held by {holder}; waiting up to {wait_s:.0f} s")
                told = holder
            time.sleep(1.0)

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

    def release(self, place: str) -> None:
        proc = self.client("release", place=place)
        if proc.returncode != 0:
            log.warning("place %s not released: %s", place, (proc.stderr or proc.stdout).strip())

    def resources(self, place: str) -> dict[str, dict[str, Any]]:
        """The acquired place's resources: name -> {cls, params, ...} (from `labgrid-client show`)."""
        resources: dict[str, dict[str, Any]] = {}
        name, block = None, []
        for line in [*self._checked("show", place=place).splitlines(), "Acquired resource 'end' ():"]:
            match = _ACQUIRED_RES.match(line)
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
        self.acquire(place, wait_s)
        try:
            yield self.resources(place)
        finally:
            self.release(place)
