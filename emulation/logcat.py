"""The emulated phone's `logcat` command (threadtime format, as Android prints it).

What lands here is what a real phone logs around the bench's work: boot, the runtime starting
and stopping, thermal status changes. Times are the phone's simulated clock. A reboot clears the
buffer, as it clears a real phone's in-memory log.
"""
from __future__ import annotations

import calendar
import time as _time
from collections.abc import Callable

from .logbuffer import LEVELS, LogEntry
from .phone_api import Phone
from .shell import CommandResult, ShellContext


def _parse_time(text: str, now: float) -> float | None:
    """-T/-t time: 'sssss.mmm' (epoch seconds) or 'MM-DD hh:mm:ss.mmm' (this year, UTC)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        head, _, frac = text.partition(".")
        year = _time.gmtime(now).tm_year
        parsed = _time.strptime(f"{year}-{head}", "%Y-%m-%d %H:%M:%S")
        return calendar.timegm(parsed) + (float(f"0.{frac}") if frac else 0.0)
    except ValueError:
        return None


BUFFERS = {"main", "system", "crash", "radio", "events", "kernel", "security", "stats", "default", "all"}
FORMATS = {"threadtime"}  # what this phone prints; another format is refused, not faked
FOLLOW_POLL_S = 0.05  # how often (host time) a following logcat looks for new lines


def _levels_from(specs: list[str], env: dict[str, str]) -> tuple[dict[str, str], str] | str:
    """Filter specs TAG:LEVEL (and ANDROID_LOG_TAGS) -> ({tag: level}, default level), or an error."""
    wanted, default = {}, "V"
    for spec in [*env.get("ANDROID_LOG_TAGS", "").split(), *specs]:
        tag, _, level = spec.partition(":")
        level = (level or "V").upper()[:1]
        if level not in LEVELS + "S":
            return f"invalid filter expression {spec!r}"
        if tag == "*":
            default = level
        else:
            wanted[tag] = level
    return wanted, default


def logcat(argv: list[str], ctx: ShellContext) -> CommandResult:
    """`logcat [-d] [-c] [-T time|count] [-t time|count] [-v threadtime] [-b BUFFER] [TAG:LEVEL...]`.
    Without -d (or -t) it follows the log, as Android's does, until the caller goes away."""
    phone: Phone = ctx.phone
    args, dump, since, last, specs = argv[1:], False, None, None, []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-c":
            phone.logs.clear()
            return CommandResult()
        if arg == "-d":
            dump = True
        elif arg in ("-t", "-T") and i + 1 < len(args):
            value = args[i + 1]
            i += 1
            dump = dump or arg == "-t"  # -t implies -d; -T does not
            if value.isdigit():
                last = int(value)
            else:
                since = _parse_time(value, phone.world.clock.now())
                if since is None:
                    return CommandResult(stderr=f"logcat: bad time {value!r}\n".encode(), status=1)
        elif arg == "-v" and i + 1 < len(args):
            i += 1
            if args[i] not in FORMATS:
                return CommandResult(stderr=f"logcat: the emulated phone prints -v threadtime only, not "
                                            f"{args[i]!r}\n".encode(), status=1)
        elif arg == "-b" and i + 1 < len(args):
            i += 1
            unknown = set(args[i].split(",")) - BUFFERS
            if unknown:
                return CommandResult(stderr=f"logcat: unknown buffer {', '.join(sorted(unknown))}\n".encode(), status=1)
        elif arg.startswith("-"):
            return CommandResult(stderr=f"logcat: unsupported option {arg}\n".encode(), status=1)
        else:
            specs.append(arg)
        i += 1
    levels = _levels_from(specs, ctx.env)
    if isinstance(levels, str):
        return CommandResult(stderr=f"logcat: {levels}\n".encode(), status=1)
    shown = _filter(*levels)
    position, entries = phone.logs.after(0)
    if since is not None:
        entries = [e for e in entries if e.time >= since]
    if last is not None:
        entries = entries[-last:] if last else []
    entries = [e for e in entries if shown(e)]
    header = "--------- beginning of main\n"
    text = (header if entries else "") + "".join(e.threadtime() + "\n" for e in entries)
    if dump:
        return CommandResult(text.encode())
    if ctx.sink is None:  # a caller that collects output cannot be followed for ever
        return CommandResult(stderr=b"logcat: following the log needs a stream; add -d for a dump\n", status=1)
    headed = bool(entries)
    ctx.emit(text.encode())
    while not ctx.gone():
        _time.sleep(FOLLOW_POLL_S)
        position, new = phone.logs.after(position)
        new = [e for e in new if shown(e)]
        if new:
            ctx.emit(((header if not headed else "") + "".join(e.threadtime() + "\n" for e in new)).encode())
            headed = True
    return CommandResult()


def _filter(wanted: dict[str, str], default: str) -> Callable[[LogEntry], bool]:
    order = LEVELS + "S"

    def shown(entry: LogEntry) -> bool:
        level = wanted.get(entry.tag, default)
        return level != "S" and order.index(entry.level) >= order.index(level)

    return shown
