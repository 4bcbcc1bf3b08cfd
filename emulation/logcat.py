"""The emulated phone's `logcat` command (threadtime format, as Android prints it).

What lands here is what a real phone logs around the bench's work: boot, the runtime starting
and stopping, thermal status changes. Times are the phone's simulated clock. A reboot clears the
buffer, as it clears a real phone's in-memory log.
"""
from __future__ import annotations

import calendar
import time as _time

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


def logcat(argv: list[str], ctx: ShellContext) -> CommandResult:
    """`logcat -d [-T time|count] [-t time|count] [-c] [-v threadtime]`; without -d (streaming)
    it refuses rather than hang the caller."""
    phone: Phone = ctx.phone
    args, dump, since, last = argv[1:], False, None, None
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
            i += 1  # threadtime is the only format served
        elif arg.startswith("-"):
            return CommandResult(stderr=f"logcat: unsupported option {arg}\n".encode(), status=1)
        i += 1
    if not dump:
        return CommandResult(stderr=b"logcat: the emulated phone serves dumps only: add -d\n", status=1)
    entries = phone.logs.entries()
    if since is not None:
        entries = [e for e in entries if e.time >= since]
    if last is not None:
        entries = entries[-last:]
    header = "--------- beginning of main\n" if entries else ""
    return CommandResult((header + "".join(e.threadtime() + "\n" for e in entries)).encode())
