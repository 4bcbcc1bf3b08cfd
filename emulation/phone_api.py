"""What the emulated phone's shell and its built-in commands see of the phone: a protocol.

The phone (device.py) builds on its shell and its log; the shell and `logcat` are typed against
this protocol instead of the phone class, so the imports run one way (no phone <-> shell loop).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from .filesystem import DeviceFileSystem
from .logbuffer import LogBuffer
from .phone_spec import PhoneSpec
from .world import World

# A shell command: (argv, ShellContext) -> CommandResult; a watcher is told of a command as it
# starts (result None) and as it ends. Loosely typed here: the shell module defines both records.
Command = Callable[..., Any]
Watcher = Callable[..., None]


class CommandTable(Protocol):
    """The phone's shell as its commands see it: where commands are registered and run."""

    commands: dict[str, Command]

    def register(self, name: str, command: Command) -> None: ...

    def watch(self, name: str, watcher: Watcher) -> None: ...

    def execute(self, command_line: str, *args: Any, **kwargs: Any) -> Any: ...


class Phone(Protocol):
    """An emulated phone: its spec, simulated world, properties, file system, log and shell."""

    spec: PhoneSpec
    world: World
    props: dict[str, str]
    fs: DeviceFileSystem
    logs: LogBuffer
    shell: CommandTable
    dumpsys: dict[str, Callable[[], str]]
    kill_on_commands: set[str]

    def thermal_status(self) -> int: ...
