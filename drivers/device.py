"""What a test can do with a DUT, whatever the transport (ADB over TCP or USB)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

from phonebench.core.errors import CommandFailed
from phonebench.core.phone_text import printable


@dataclass
class ShellResult:
    device: str
    command: str
    output: str
    exit_code: int

    def check(self) -> "ShellResult":
        if self.exit_code != 0:
            raise CommandFailed(
                f"{self.device}: `{self.command}` exited {self.exit_code}: {self.output.strip()[-300:]}",
                hint="run the same command with `adb shell` to see the device's side")
        return self


@dataclass
class TimedShellResult(ShellResult):
    """A shell command whose output lines were stamped on arrival with a station clock:
    `sent_t` just before the command went out, each line with the arrival of the packet that
    completed it (phonebench.drivers.adb.AdbPhone.shell_timed)."""

    sent_t: float = 0.0
    lines: list[tuple[float, str]] = field(default_factory=list)


class ShellCommands:
    """`run`, `getprop` and `serial` for a driver that has `shell(command, timeout_s)`, whatever
    its transport (the adb server or the serverless one)."""

    _serial: str | None = None

    def run(self, command: str | Sequence[str], timeout_s: float | None = None) -> str:
        """shell() that raises CommandFailed on a non-zero exit; returns the output."""
        return self.shell(command, timeout_s).check().output  # type: ignore[attr-defined]

    def getprop(self, key: str) -> str:
        """A property's value, made printable: it is the phone's text and reaches screens and records."""
        return printable(self.run(["getprop", key]).rstrip("\r\n"))

    @property
    def serial(self) -> str:
        """ro.serialno, read once."""
        if self._serial is None:
            self._serial = self.getprop("ro.serialno")
        return self._serial


@runtime_checkable
class Device(Protocol):
    """One DUT. `name` names it in every error (serial or address)."""

    name: str

    def shell(self, command: str | Sequence[str], timeout_s: float | None = None) -> ShellResult:
        """Run a shell command; a sequence is quoted argument by argument."""

    def run(self, command: str | Sequence[str], timeout_s: float | None = None) -> str:
        """shell() that raises CommandFailed on a non-zero exit; returns the output."""

    def push_bytes(self, data: bytes, remote: str, mode: int = 0o644) -> None: ...

    def pull_bytes(self, remote: str) -> bytes:
        """A small file whole, in memory, refused past the driver's pull cap."""

    def push(self, local: str | Path, remote: str) -> None:
        """A host file streamed to the phone, keeping its permission bits."""

    def pull(self, remote: str, local: str | Path) -> None:
        """A file of any size streamed to a host file (nothing left behind on failure)."""

    def getprop(self, key: str) -> str: ...

    def close(self) -> None: ...
