"""A small POSIX-like shell for the emulated phone: what the bench sends, answered like toybox/mksh.

Supports `;`, `&&`, `||`, quoting, `$?`, and redirection of stdout to a file (`>`), plus a
registry so the runtime and other device parts add their own commands.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
from dataclasses import dataclass, field
from typing import Callable

from .phone_api import Phone


@dataclass
class CommandResult:
    stdout: bytes = b""
    stderr: bytes = b""
    status: int = 0


@dataclass
class ShellContext:
    phone: Phone
    env: dict[str, str] = field(default_factory=dict)
    # Where output goes the moment it is produced (adbd's stream), like a pipe; None: collected.
    sink: Callable[[bytes], None] | None = None
    merge_stderr: bool = False
    held_out: bytearray = field(default_factory=bytearray)  # earlier segments' output, not yet sent
    held_err: bytearray = field(default_factory=bytearray)

    def emit(self, data: bytes) -> bytes:
        """Send stdout now when the caller streams (what came before goes first); returns what
        the command must still return in its CommandResult (all of it when nothing streams)."""
        if self.sink is None:
            return data
        held = bytes(self.held_out + self.held_err if self.merge_stderr else self.held_out)
        self.held_out.clear()
        self.held_err.clear()
        self.sink(held + data)
        return b""


Command = Callable[[list[str], ShellContext], CommandResult]
# Told about a command as it starts (result None) and as it ends (its result): the phone's log.
Watcher = Callable[[list[str], "CommandResult | None"], None]


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_EXIT = -1  # internal: the segment was `exit N` (N carried in stdout)


class DaemonKilled(Exception):
    """Raised inside a command to make the emulated adbd drop every connection (fault injection)."""


def _split_sequence(line: str) -> list[tuple[str, str]]:
    """Split on ;, && and || outside quotes. Returns [(operator_before, segment)]."""
    parts: list[tuple[str, str]] = []
    op, buf, quote, i = ";", [], None, 0
    while i < len(line):
        ch = line[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"' and i + 1 < len(line):
                buf.append(line[i + 1])
                i += 1
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif ch == "\\" and i + 1 < len(line):
            buf.append(line[i:i + 2])
            i += 1
        elif line.startswith("&&", i) or line.startswith("||", i):
            parts.append((op, "".join(buf)))
            op, buf = line[i:i + 2], []
            i += 1
        elif ch in ";\n":
            parts.append((op, "".join(buf)))
            op, buf = ";", []
        else:
            buf.append(ch)
        i += 1
    parts.append((op, "".join(buf)))
    return [(o, s) for o, s in parts if s.strip()]


def _expand_status(segment: str, status: int) -> str:
    """Replace $? outside single quotes."""
    out, quote, i = [], None, 0
    while i < len(segment):
        ch = segment[i]
        if ch == "'" and quote != '"':
            quote = None if quote == "'" else "'"
        elif ch == '"' and quote != "'":
            quote = None if quote == '"' else '"'
        if quote != "'" and segment.startswith("$?", i):
            out.append(str(status))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


class Shell:
    def __init__(self, phone: Phone) -> None:
        self.phone = phone
        self.commands: dict[str, Command] = {}
        self.watchers: dict[str, Watcher] = {}
        for name, fn in _BUILTINS.items():
            self.commands[name] = fn

    def register(self, name: str, command: Command) -> None:
        self.commands[name] = command

    def watch(self, name: str, watcher: Watcher) -> None:
        self.watchers[name] = watcher

    def execute(self, line: str, sink: Callable[[bytes], None] | None = None,
                merge_stderr: bool = False) -> CommandResult:
        """Run a command line; with a sink, commands that stream (ShellContext.emit) send their
        output through it as they produce it, and the result holds only what is left."""
        ctx = ShellContext(self.phone, sink=sink, merge_stderr=merge_stderr)
        out, err, status = ctx.held_out, ctx.held_err, 0
        for op, segment in _split_sequence(line):
            if (op == "&&" and status != 0) or (op == "||" and status == 0):
                continue
            result = self._run_segment(_expand_status(segment, status), ctx)
            if result.status == _EXIT:
                status = int(result.stdout or 0)
                break
            out += result.stdout
            err += result.stderr
            status = result.status
        return CommandResult(bytes(out), bytes(err), status)

    def _expand_globs(self, argv: list[str]) -> list[str]:
        # Like sh: a pattern with no match stays literal (quoting is not tracked: good enough here).
        out = []
        for arg in argv:
            matches = self.phone.fs.glob(arg) if any(c in arg for c in "*?[") else []
            out.extend(matches or [arg])
        return out

    def _run_segment(self, segment: str, ctx: ShellContext) -> CommandResult:
        try:
            argv = shlex.split(segment)
        except ValueError as exc:
            return CommandResult(stderr=f"sh: syntax error: {exc}\n".encode(), status=2)
        redirect, append = None, False
        for token in (">>", ">"):
            if token in argv:
                idx = argv.index(token)
                if idx + 1 >= len(argv):
                    return CommandResult(stderr=b"sh: syntax error: unexpected newline\n", status=2)
                redirect, append = argv[idx + 1], token == ">>"
                argv = argv[:idx] + argv[idx + 2:]
                break
        argv = self._expand_globs(argv)
        while argv and _ASSIGNMENT.match(argv[0]):  # `VAR=value cmd`: environment for this command
            key, _, value = argv.pop(0).partition("=")
            ctx.env[key] = value
        if argv and argv[0] == "export":  # `adb logcat` sends `export ANDROID_LOG_TAGS=...; exec logcat`
            for assignment in argv[1:]:
                key, _, value = assignment.partition("=")
                ctx.env[key] = value
            return CommandResult()
        if argv and argv[0] == "exec":  # no process to replace here: run the command
            argv = argv[1:]
            if not argv:
                return CommandResult()
        if argv and argv[0] == "exit":
            code = argv[1] if len(argv) > 1 and argv[1].isdigit() else "0"
            return CommandResult(stdout=code.encode(), status=_EXIT)
        name = argv[0].rsplit("/", 1)[-1] if argv else ""
        command = self.commands.get(name)
        if command is None or ("/" in argv[0] and not self.phone.fs.exists(argv[0])):
            return CommandResult(stderr=f"/system/bin/sh: {argv[0]}: not found\n".encode(), status=127)
        if name in self.phone.kill_on_commands:
            raise DaemonKilled(name)
        watcher = self.watchers.get(name)
        if watcher is not None:
            watcher(argv, None)
        result = command(argv, ctx if redirect is None else dataclasses.replace(ctx, sink=None))
        if watcher is not None:
            watcher(argv, result)
        if redirect is not None:
            old = self.phone.fs.read(redirect) if append and self.phone.fs.exists(redirect) else b""
            self.phone.fs.write(redirect, old + result.stdout)
            result = CommandResult(b"", result.stderr, result.status)
        return result


# --- builtins -------------------------------------------------------------------------------
def _ok(text: str = "") -> CommandResult:
    return CommandResult(stdout=text.encode())


def _fail(name: str, message: str, status: int = 1) -> CommandResult:
    return CommandResult(stderr=f"{name}: {message}\n".encode(), status=status)


def _echo(argv: list[str], ctx: ShellContext) -> CommandResult:
    args = argv[1:]
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    return _ok(" ".join(args) + ("\n" if newline else ""))


def _cat(argv: list[str], ctx: ShellContext) -> CommandResult:
    out = bytearray()
    for path in argv[1:]:
        try:
            out += ctx.phone.fs.read(path)
        except IsADirectoryError:
            return CommandResult(bytes(out), f"cat: {path}: Is a directory\n".encode(), 1)
        except FileNotFoundError:
            return CommandResult(bytes(out), f"cat: {path}: No such file or directory\n".encode(), 1)
    return CommandResult(bytes(out))


def _ls(argv: list[str], ctx: ShellContext) -> CommandResult:
    """Lists what exists and complains about the rest (exit 1), like toybox ls."""
    paths = [a for a in argv[1:] if not a.startswith("-")] or ["/"]
    lines, errors = [], []
    for path in paths:
        st = ctx.phone.fs.stat(path)
        if st is None:
            errors.append(f"ls: {path}: No such file or directory\n")
        elif st.is_dir and len(paths) == 1:
            lines.extend(ctx.phone.fs.listdir(path))
        else:
            lines.append(path)
    return CommandResult("".join(f"{line}\n" for line in lines).encode(), "".join(errors).encode(),
                         1 if errors else 0)


def _rm(argv: list[str], ctx: ShellContext) -> CommandResult:
    force = any(a.startswith("-") and "f" in a for a in argv[1:])
    for path in (a for a in argv[1:] if not a.startswith("-")):
        try:
            ctx.phone.fs.remove(path)
        except FileNotFoundError:
            if not force:
                return _fail("rm", f"{path}: No such file or directory")
        except OSError as exc:
            return _fail("rm", f"{path}: {exc}")
    return _ok()


def _mkdir(argv: list[str], ctx: ShellContext) -> CommandResult:
    for path in (a for a in argv[1:] if not a.startswith("-")):
        ctx.phone.fs.mkdir(path)
    return _ok()


def _mv(argv: list[str], ctx: ShellContext) -> CommandResult:
    args = [a for a in argv[1:] if not a.startswith("-")]
    if len(args) != 2:
        return _fail("mv", "needs 2 arguments")
    try:
        ctx.phone.fs.rename(*args)
    except FileNotFoundError:
        return _fail("mv", f"{args[0]}: No such file or directory")
    return _ok()


def _sha256sum(argv: list[str], ctx: ShellContext) -> CommandResult:
    lines = []
    for path in argv[1:]:
        try:
            lines.append(f"{hashlib.sha256(ctx.phone.fs.read(path)).hexdigest()}  {path}\n")
        except (FileNotFoundError, IsADirectoryError):
            return CommandResult("".join(lines).encode(), f"sha256sum: {path}: No such file or directory\n".encode(), 1)
    return _ok("".join(lines))


def _getprop(argv: list[str], ctx: ShellContext) -> CommandResult:
    props = ctx.phone.props
    if len(argv) > 1:
        return _ok(props.get(argv[1], argv[2] if len(argv) > 2 else "") + "\n")
    return _ok("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))


def _grep(argv: list[str], ctx: ShellContext) -> CommandResult:
    """`grep PATTERN FILE...` with a fixed-string pattern ("." matches any non-empty line)."""
    if len(argv) < 3:
        return _fail("grep", "usage: grep PATTERN FILE...", 2)
    pattern, files = argv[1], argv[2:]
    lines, status = [], 1
    for path in files:
        try:
            text = ctx.phone.fs.read(path).decode(errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            continue
        for line in text.splitlines():
            if line and (pattern == "." or pattern in line):
                lines.append(f"{path}:{line}\n" if len(files) > 1 else f"{line}\n")
                status = 0
    return CommandResult("".join(lines).encode(), status=status)


def _sleep(argv: list[str], ctx: ShellContext) -> CommandResult:
    try:
        seconds = float(argv[1])
    except (IndexError, ValueError):
        return _fail("sleep", "invalid number")
    ctx.phone.world.wait(seconds)
    return _ok()


def _dumpsys(argv: list[str], ctx: ShellContext) -> CommandResult:
    service = argv[1] if len(argv) > 1 else ""
    renderer = ctx.phone.dumpsys.get(service)
    if renderer is None:
        return _ok(f"Can't find service: {service}\n")
    return _ok(renderer())


def _stat(argv: list[str], ctx: ShellContext) -> CommandResult:
    # toybox: stat -c '%s %Y' path -> size mtime
    paths = [a for a in argv[1:] if not a.startswith("-") and "%" not in a]
    lines = []
    for path in paths:
        st = ctx.phone.fs.stat(path)
        if st is None:
            return _fail("stat", f"'{path}': No such file or directory")
        lines.append(f"{st.size} {st.mtime}\n")
    return _ok("".join(lines))


_BUILTINS: dict[str, Command] = {
    "echo": _echo,
    "true": lambda argv, ctx: _ok(),
    "false": lambda argv, ctx: CommandResult(status=1),
    "cat": _cat,
    "ls": _ls,
    "rm": _rm,
    "mkdir": _mkdir,
    "mv": _mv,
    "sha256sum": _sha256sum,
    "getprop": _getprop,
    "sleep": _sleep,
    "grep": _grep,
    "dumpsys": _dumpsys,
    "stat": _stat,
    "id": lambda argv, ctx: _ok("uid=2000(shell) gid=2000(shell) groups=2000(shell)\n"),
    "uname": lambda argv, ctx: _ok("Linux\n"),
}
