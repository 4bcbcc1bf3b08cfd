"""One decoding policy for bytes from outside: files, phones and instruments.

Text the bench reads is UTF-8 (files: without or with a BOM; instruments: ASCII, a subset). Bytes
that are not, are refused with an error naming where they came from, the offset and the bytes,
and what to do — never a bare UnicodeDecodeError. Phones' free-form shell output, where a stray
byte must not lose a measurement, is decoded with replacement (`lenient=True`) and logged.

Numbers read from instruments are IEEE 488.2 numeric responses (NR1/NR2/NR3): Python's float()
also takes "1_0E-4", "infinity" or "  nan ", which no instrument sends and must not become data.
"""
from __future__ import annotations

import codecs
import logging
import math
import re
from pathlib import Path

from .errors import BenchError, ConfigError

log = logging.getLogger(__name__)

_BOMS = {codecs.BOM_UTF16_LE: "UTF-16", codecs.BOM_UTF16_BE: "UTF-16", codecs.BOM_UTF32_LE: "UTF-32",
         codecs.BOM_UTF32_BE: "UTF-32"}
# IEEE 488.2 section 8.7: optional sign, digits with an optional point, optional exponent.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_WORDS = {"NAN": math.nan, "INF": math.inf, "+INF": math.inf, "-INF": -math.inf, "NINF": -math.inf}


class DecodeError(BenchError):
    """Bytes from a file, phone or instrument are not text in the expected encoding."""


def describe_bad_bytes(data: bytes, exc: UnicodeDecodeError) -> str:
    start = max(exc.start - 8, 0)
    return f"byte {exc.start}: {data[exc.start:exc.end]!r} in {data[start:exc.end + 8]!r}"


def decode(data: bytes, source: str, *, encoding: str = "utf-8", lenient: bool = False,
           error: type[BenchError] = DecodeError, hint: str | None = None) -> str:
    """`data` as text; raises `error` naming `source` (a file, "dut1: getprop", "scope @ TCPIP::...").

    With lenient=True undecodable bytes become U+FFFD and a warning names the source: for
    free-form phone output whose other lines still carry measurements.
    """
    data = bytes(data)
    for bom, name in _BOMS.items():
        if data.startswith(bom) and encoding.lower().replace("-", "") in ("utf8", "ascii"):
            raise error(f"{source}: is {name} text, expected {encoding.upper()}",
                        hint=hint or f"save it as UTF-8 (e.g. `iconv -f {name} -t UTF-8`)")
    if data.startswith(codecs.BOM_UTF8) and encoding.lower().replace("-", "") == "utf8":
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        if lenient:
            log.warning("%s: undecodable bytes replaced (%s)", source, describe_bad_bytes(data, exc))
            return data.decode(encoding, errors="replace")
        kind = "binary data, not text" if b"\x00" in data[:4096] else f"not {encoding.upper()} text"
        raise error(f"{source}: {kind} ({describe_bad_bytes(data, exc)})",
                    hint=hint or "is it the right file or device? text must be UTF-8") from None
    if "\x00" in text and not lenient:  # valid UTF-8, but no text file or answer holds NUL
        raise error(f"{source}: binary data, not text (NUL at byte {data.index(0)})",
                    hint=hint or "is it the right file or device? text must be UTF-8")
    return text


def read_text(path: str | Path, what: str, *, error: type[BenchError] = ConfigError,
              hint: str | None = None) -> str:
    """A text file the bench was given (station, SLA profile, firmware profile, signature, CSV).

    Raises `error` naming `what` and the path: missing, unreadable, binary, or not UTF-8."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist", hint=hint or "check the path") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a folder, not a file", hint=hint or "give the file's path") from None
    except OSError as exc:
        raise error(f"{what} {path} cannot be read: {exc.strerror or exc}",
                    hint=hint or "check the path and its permissions") from None
    return decode(data, f"{what} {path}", error=error, hint=hint)


def parse_number(text: str, source: str, *, error: type[BenchError] = DecodeError) -> float:
    """An IEEE 488.2 numeric response (NR1, NR2 or NR3) as a float; anything else raises `error`.

    Overload markers (9.9E37) and the NAN / INF / NINF words some models print are numbers here:
    what they mean is the driver's business, which knows the instrument."""
    stripped = text.strip()
    word = _WORDS.get(stripped.upper())
    if word is not None:
        return word
    if not _NUMBER.fullmatch(stripped):
        raise error(f"{source}: answered {text[:80]!r}, not a number",
                    hint="the instrument may be another model or in a different mode")
    return float(stripped)
