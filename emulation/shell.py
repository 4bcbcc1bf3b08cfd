"""A small POSIX-like shell for the emulated phone: what the bench sends, answered like toybox/mksh.

The line is parsed as mksh would (phonebench.emulation.shell_parse): quoting, variables and
assignments, `;` `&&` `||`, pipes, `>` `>>` `2>&1` `2>/dev/null`; what it does not implement is
refused with exit 2 and a message, and a command that fails inside still ends with a status.
A registry lets the runtime and other device parts add their own commands.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable

from .phone_api import Phone
from .shell_parse import Command as ParsedCommand
from .shell_parse import Pipeline, ShellSyntaxError, Word, parse, split_list

log = logging.getLogger(__name__)
DEFAULT_ENV = {"PATH": "/product/bin:/apex/com.android.runtime/bin:/system/bin:/system/xbin:/odm/bin:/vendor/bin",
               "HOME": "/", "SHELL": "/system/bin/sh", "USER": "shell", "LOGNAME": "shell",
               "ANDROID_DATA": "/data", "ANDROID_ROOT": "/system", "EXTERNAL_STORAGE": "/sdcard", "TMPDIR": "/data/local/tmp"}


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
    stdin: bytes | None = None  # the previous command's stdout in a pipeline
    closed: Callable[[], bool] | None = None  # the caller has gone (a command streaming until stopped ends)

    def gone(self) -> bool:
        return self.closed is not None and self.closed()

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


_EXIT = -1  # internal: the segment was `exit N` (N carried in stdout)
SHELL_PID = 4242  # what $$ says


class DaemonKilled(Exception):
    """Raised inside a command to make the emulated adbd drop every connection (fault injection)."""


def _syntax(exc: ShellSyntaxError) -> CommandResult:
    return CommandResult(stderr=f"/system/bin/sh: {exc}\n".encode(), status=2)


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

    def execute(self, line: str, sink: Callable[[bytes], None] | None = None, merge_stderr: bool = False,
                closed: Callable[[], bool] | None = None) -> CommandResult:
        """Run a command line; with a sink, commands that stream (ShellContext.emit) send their
        output through it as they produce it, and the result holds only what is left. `closed`
        tells a command that streams until stopped (logcat) that the caller has gone."""
        ctx = ShellContext(self.phone, env=dict(DEFAULT_ENV), sink=sink, merge_stderr=merge_stderr, closed=closed)
        try:
            parse(line, lambda name: "")  # the whole line's structure, before any of it runs
        except ShellSyntaxError as exc:
            return _syntax(exc)
        out, err, status = ctx.held_out, ctx.held_err, 0
        for op, segment in split_list(line):
            if (op == "&&" and status != 0) or (op == "||" and status == 0):
                continue
            try:  # expanded now, so `X=1; echo $X` sees the assignment before it
                pipelines = parse(segment, lambda name, last=status: self._lookup(name, ctx, last))
            except ShellSyntaxError as exc:
                result = _syntax(exc)
                return CommandResult(bytes(out), bytes(err) + result.stderr, result.status)
            for pipeline in pipelines:
                result = self._run_pipeline(pipeline, ctx)
                if result.status == _EXIT:
                    return CommandResult(bytes(out), bytes(err) + result.stderr, int(result.stdout or 0) & 0xFF)
                out += result.stdout
                err += result.stderr
                status = result.status
        return CommandResult(bytes(out), bytes(err), status)

    @staticmethod
    def _lookup(name: str, ctx: ShellContext, status: int) -> str:
        if name == "?":
            return str(status)
        if name == "$":
            return str(SHELL_PID)
        if name == "#":
            return "0"
        return ctx.env.get(name, "")

    def _run_pipeline(self, pipeline: Pipeline, ctx: ShellContext) -> CommandResult:
        """Each command's stdout is the next one's stdin; stderr of all of them is kept."""
        stdin: bytes | None = None
        errors = bytearray()
        last = len(pipeline.commands) - 1
        for k, command in enumerate(pipeline.commands):
            result = self._run_command(command, ctx, stdin, stream=k == last, alone=last == 0)
            errors += result.stderr
            if k < last:
                stdin = result.stdout
            else:
                return CommandResult(result.stdout, bytes(errors), result.status)
        raise AssertionError("a pipeline has at least one command")

    def _expand_globs(self, words: list[Word]) -> list[str]:
        # Like sh: an unquoted pattern with no match stays literal.
        out = []
        for word in words:
            matches = self.phone.fs.glob(word.text) if word.globbable else []
            out.extend(matches or [word.text])
        return out

    def _run_command(self, command: ParsedCommand, ctx: ShellContext, stdin: bytes | None, stream: bool,
                     alone: bool) -> CommandResult:
        if not command.argv:  # `X=42`: shell variables from here on
            ctx.env.update(command.assignments)
            return CommandResult()
        argv = self._expand_globs(command.argv)
        env = {**ctx.env, **dict(command.assignments)}  # `VAR=value cmd`: for this command only
        if argv[0] == "export":
            for assignment in argv[1:]:
                key, _, value = assignment.partition("=")
                ctx.env[key] = value
            return CommandResult()
        if argv[0] == "exec":  # no process to replace here: run the command
            argv = argv[1:]
            if not argv:
                return CommandResult()
        if argv[0] == "exit":
            code = argv[1] if len(argv) > 1 and argv[1].isdigit() else "0"
            return CommandResult(stdout=code.encode(), status=_EXIT) if alone else CommandResult(status=int(code) & 0xFF)
        name = argv[0].rsplit("/", 1)[-1]
        fn = self.commands.get(name)
        if fn is None or ("/" in argv[0] and not self.phone.fs.exists(argv[0])):
            return CommandResult(stderr=f"/system/bin/sh: {argv[0]}: not found\n".encode(), status=127)
        if name in self.phone.kill_on_commands:
            raise DaemonKilled(name)
        streams = stream and command.stdout_to is None and command.stderr is None
        run_ctx = dataclasses.replace(ctx, env=env, stdin=stdin, sink=ctx.sink if streams else None)
        watcher = self.watchers.get(name)
        if watcher is not None:
            watcher(argv, None)
        try:
            result = fn(argv, run_ctx)
        except DaemonKilled:
            raise
        except Exception as exc:  # a bug in an emulated command: an error with a status, never a hang-up
            if ctx.closed is not None and ctx.closed():
                raise
            log.exception("emulated %s failed", name)
            result = CommandResult(stderr=f"{name}: emulated command failed: {type(exc).__name__}: {exc}\n".encode(),
                                   status=1)
        if watcher is not None:
            watcher(argv, result)
        if command.stderr == "null":
            result = CommandResult(result.stdout, b"", result.status)
        elif command.stderr == "stdout":
            result = CommandResult(result.stdout + result.stderr, b"", result.status)
        if command.stdout_to is not None:
            target = command.stdout_to
            if target != "/dev/null":
                old = self.phone.fs.read(target) if command.append and self.phone.fs.exists(target) else b""
                self.phone.fs.write(target, old + result.stdout)
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
    for path in argv[1:] or ["-"]:
        if path == "-":
            out += ctx.stdin or b""
            continue
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
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
    force, recursive = "f" in flags, "r" in flags or "R" in flags
    for path in (a for a in argv[1:] if not a.startswith("-")):
        st = ctx.phone.fs.stat(path)
        if st is not None and st.is_dir:
            if not recursive:
                return _fail("rm", f"{path}: Is a directory")
            try:
                _remove_tree(ctx, path)
            except PermissionError as exc:
                return _fail("rm", f"{exc}: Permission denied")
            continue
        try:
            ctx.phone.fs.remove(path)
        except FileNotFoundError:
            if not force:
                return _fail("rm", f"{path}: No such file or directory")
        except OSError as exc:
            return _fail("rm", f"{path}: {exc}")
    return _ok()


def _remove_tree(ctx: ShellContext, path: str) -> None:
    for name in ctx.phone.fs.listdir(path):
        child = f"{path.rstrip('/')}/{name}"
        st = ctx.phone.fs.stat(child)
        if st is not None and st.is_dir:
            _remove_tree(ctx, child)
        else:
            ctx.phone.fs.remove(child)
    ctx.phone.fs.remove(path)


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
    """toybox grep for what tools use: PATTERN [FILE...] (stdin without files), -i -v -q -c -F -E -e
    -w -x; patterns are regular expressions (basic and extended are the same here)."""
    flags, patterns, files, i = set(), [], [], 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-e" and i + 1 < len(argv):
            patterns.append(argv[i + 1])
            i += 1
        elif arg.startswith("-") and len(arg) > 1 and not files and not (patterns and arg == "-"):
            unknown = set(arg[1:]) - set("ivqcFEwxsHh")
            if unknown:
                return _fail("grep", f"unknown option -{''.join(sorted(unknown))} (the emulated grep knows "
                             "-i -v -q -c -F -E -e -w -x -s)", 2)
            flags |= set(arg[1:])
        elif not patterns and "e" not in flags:
            patterns.append(arg)
        else:
            files.append(arg)
        i += 1
    if not patterns:
        return _fail("grep", "usage: grep [-ivqcFEwx] PATTERN [FILE...]", 2)
    try:
        regex = re.compile("|".join(f"(?:{re.escape(p) if 'F' in flags else p})" for p in patterns),
                           re.IGNORECASE if "i" in flags else 0)
    except re.error as exc:
        return _fail("grep", f"bad regex: {exc}", 2)

    def matches(line: str) -> bool:
        found = regex.fullmatch(line) if "x" in flags else (
            re.search(rf"(?<!\w)(?:{regex.pattern})(?!\w)", line, regex.flags) if "w" in flags else regex.search(line))
        return (found is not None) != ("v" in flags)

    sources: list[tuple[str, bytes | None]] = [(f, None) for f in files] or [("(standard input)", ctx.stdin or b"")]
    out, count, errors, status = [], 0, [], 1
    for name, data in sources:
        if data is None:
            try:
                data = ctx.phone.fs.read(name)
            except (FileNotFoundError, IsADirectoryError):
                if "s" not in flags:
                    errors.append(f"grep: {name}: No such file or directory\n")
                status = 2
                continue
        for line in data.decode(errors="replace").splitlines():
            if matches(line):
                count += 1
                out.append(f"{name}:{line}\n" if len(files) > 1 else f"{line}\n")
    text = "" if "q" in flags else (f"{count}\n" if "c" in flags else "".join(out))
    return CommandResult(text.encode(), "".join(errors).encode(), 0 if count else status)


def _lines_of(argv: list[str], ctx: ShellContext, name: str) -> tuple[int, list[bytes]] | CommandResult:
    """`head`/`tail` [-n N | -N] [FILE]: the count and the input's lines."""
    count, paths, i = 10, [], 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-n" and i + 1 < len(argv) and argv[i + 1].lstrip("-+").isdigit():
            count, i = int(argv[i + 1].lstrip("+")), i + 1
        elif arg.startswith("-n") and arg[2:].isdigit():
            count = int(arg[2:])
        elif arg.startswith("-") and arg[1:].isdigit():
            count = int(arg[1:])
        elif arg.startswith("-") and arg != "-":
            return _fail(name, f"unknown option {arg} (the emulated {name} knows -n N)")
        else:
            paths.append(arg)
        i += 1
    data = b""
    for path in paths or ["-"]:
        if path == "-":
            data += ctx.stdin or b""
            continue
        try:
            data += ctx.phone.fs.read(path)
        except (FileNotFoundError, IsADirectoryError):
            return _fail(name, f"{path}: No such file or directory")
    return count, data.splitlines(keepends=True)


def _head(argv: list[str], ctx: ShellContext) -> CommandResult:
    got = _lines_of(argv, ctx, "head")
    return got if isinstance(got, CommandResult) else CommandResult(b"".join(got[1][:got[0]]))


def _tail(argv: list[str], ctx: ShellContext) -> CommandResult:
    got = _lines_of(argv, ctx, "tail")
    return got if isinstance(got, CommandResult) else CommandResult(b"".join(got[1][-got[0]:] if got[0] else []))


def _wc(argv: list[str], ctx: ShellContext) -> CommandResult:
    """`wc -l` / `-c` / `-w` of stdin or one file."""
    flags = {a for a in argv[1:] if a.startswith("-")}
    paths = [a for a in argv[1:] if not a.startswith("-")]
    if not flags <= {"-l", "-c", "-w"} or len(paths) > 1:
        return _fail("wc", "the emulated wc counts one input with -l, -w or -c")
    try:
        data = ctx.phone.fs.read(paths[0]) if paths else (ctx.stdin or b"")
    except (FileNotFoundError, IsADirectoryError):
        return _fail("wc", f"{paths[0]}: No such file or directory")
    counts = {"-l": data.count(b"\n"), "-w": len(data.split()), "-c": len(data)}
    chosen = [counts[f] for f in ("-l", "-w", "-c") if f in flags] or [counts["-l"], counts["-w"], counts["-c"]]
    return _ok(" ".join(str(c) for c in chosen) + (f" {paths[0]}" if paths else "") + "\n")


def _id(argv: list[str], ctx: ShellContext) -> CommandResult:
    """toybox id as the shell user: -u / -g (numbers), -n with them (names), -G (groups)."""
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
    if set(flags) - set("ugnGr"):
        return _fail("id", f"unknown option -{flags}")
    if "u" in flags or "g" in flags:
        return _ok(("shell" if "n" in flags else "2000") + "\n")
    if "G" in flags:
        return _ok(("shell input log adb sdcard_rw net_bt inet" if "n" in flags
                    else "2000 1004 1007 1011 1015 3002 3003") + "\n")
    return _ok("uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),1011(adb),1015(sdcard_rw),"
               "3002(net_bt),3003(inet) context=u:r:shell:s0\n")


def _log(argv: list[str], ctx: ShellContext) -> CommandResult:
    """`log [-p PRIORITY] [-t TAG] MESSAGE...`: one line into the phone's log (logcat shows it)."""
    priority, tag, i = "i", "log", 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("-p", "-t") and i + 1 < len(argv):
            if argv[i] == "-p":
                priority = argv[i + 1]
            else:
                tag = argv[i + 1]
            i += 2
        else:
            return _fail("log", f"unknown option {argv[i]}: usage: log [-p v|d|i|w|e] [-t TAG] MESSAGE")
    level = priority[:1].upper()
    if level not in "VDIWEF":
        return _fail("log", f"bad priority {priority!r}")
    ctx.phone.logs.log(level, tag, " ".join(argv[i:]), pid=SHELL_PID)
    return _ok()


SCREEN_SIZE = (1080, 2400)


def _screencap(argv: list[str], ctx: ShellContext) -> CommandResult:
    """`screencap [-p] [FILE]`: the (blank) screen as PNG with -p or a .png name, else the raw
    format (width, height, pixel format 1 = RGBA_8888, then the pixels)."""
    args = [a for a in argv[1:] if not a.startswith("-")]
    options = {a for a in argv[1:] if a.startswith("-")}
    if options - {"-p"} or len(args) > 1:
        return _fail("screencap", "usage: screencap [-p] [FILENAME] (the emulated one takes no display id)")
    width, height = SCREEN_SIZE
    png = "-p" in options or (bool(args) and args[0].endswith(".png"))
    data = _png(width, height) if png else struct.pack("<III", width, height, 1) + bytes(width * height * 4)
    if args:
        ctx.phone.fs.write(args[0], data)
        return _ok()
    return CommandResult(data)


def _png(width: int, height: int) -> bytes:
    """A valid RGB PNG of a black screen."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    rows = (b"\0" + bytes(width * 3)) * height
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


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
    "id": _id,
    "cd": lambda argv, ctx: _fail("cd", "the emulated shell keeps no working directory: use absolute paths", 2),
    "head": _head,
    "tail": _tail,
    "wc": _wc,
    "log": _log,
    "screencap": _screencap,
    "uname": lambda argv, ctx: _ok("Linux\n"),
}
