"""SCPI message parsing for the emulated instruments (IEEE 488.2 / SCPI-1999 subset).

- Program messages end at "\\n"; units are separated by ";" outside strings, parentheses and
  binary blocks. A unit without a leading ":" continues the previous unit's path.
- Headers match long or short mnemonic forms (`:WAVeform:POINts` == `:WAV:POIN`), case-blind,
  with optional `[nodes]` and numeric suffixes (`CHANnel<n>` matches `CHAN2`).
- Arguments are strings, or bytes for definite-length blocks (`#<n><len><data>`).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

Arg = str | bytes
Response = str | bytes | None

# Standard SCPI error codes used by the emulators.
UNDEFINED_HEADER = (-113, "Undefined header")
MISSING_PARAMETER = (-109, "Missing parameter")
PARAMETER_NOT_ALLOWED = (-108, "Parameter not allowed")
DATA_TYPE_ERROR = (-104, "Data type error")
ILLEGAL_VALUE = (-224, "Illegal parameter value")
OUT_OF_RANGE = (-222, "Data out of range")
SETTINGS_CONFLICT = (-221, "Settings conflict")
TRIGGER_IGNORED = (-211, "Trigger ignored")
DATA_STALE = (-230, "Data corrupt or stale")
HARDWARE_MISSING = (-241, "Hardware missing")
INVALID_BLOCK = (-161, "Invalid block data")
QUEUE_OVERFLOW = (-350, "Queue overflow")


class ScpiError(Exception):
    def __init__(self, error: tuple[int, str], detail: str = "") -> None:
        self.code, self.message = error
        self.detail = detail
        super().__init__(f"{self.code},{self.message}{'; ' + detail if detail else ''}")

    def entry(self) -> str:
        text = f"{self.message}; {self.detail}" if self.detail else self.message
        return f'{self.code},"{text}"'


class QueryBlocked(Exception):
    """A query waits for something that will not happen (a fetch of a sweep that never started):
    the parser stays in it, so the rest of the message is not executed and nothing is answered."""


@dataclass
class Call:
    """One parsed program message unit, handed to a handler."""

    header: str
    args: list[Arg]
    suffixes: tuple[int, ...] = ()

    def arg(self, index: int) -> str:
        if index >= len(self.args):
            raise ScpiError(MISSING_PARAMETER, self.header)
        value = self.args[index]
        if isinstance(value, bytes):
            raise ScpiError(DATA_TYPE_ERROR, "block where a value was expected")
        return value

    def block(self, index: int) -> bytes:
        value = self.args[index] if index < len(self.args) else None
        if not isinstance(value, bytes):
            raise ScpiError(DATA_TYPE_ERROR, "expected a definite-length block")
        return value

    def number(self, index: int, minimum: float | None = None, maximum: float | None = None) -> float:
        text = self.arg(index).strip()
        try:
            value = float(text)
        except ValueError:
            raise ScpiError(DATA_TYPE_ERROR, f"{text!r} is not a number") from None
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise ScpiError(OUT_OF_RANGE, f"{value:g} not in [{minimum:g}, {maximum:g}]")
        return value

    def boolean(self, index: int) -> bool:
        text = self.arg(index).strip().upper()
        if text in ("1", "ON"):
            return True
        if text in ("0", "OFF"):
            return False
        raise ScpiError(ILLEGAL_VALUE, f"{text!r} is not ON/OFF/1/0")

    def choice(self, index: int, *options: str) -> str:
        """Match a character parameter against long-form options; returns the long form."""
        text = self.arg(index).strip()
        for option in options:
            if _mnemonic_matches(option, text):
                return option.upper()
        raise ScpiError(ILLEGAL_VALUE, f"{text!r} not one of {', '.join(options)}")

    def channels(self, index: int) -> list[int]:
        """A channel list `(@1)`, `(@1,2)` or `(@1:3)`."""
        text = self.arg(index).strip()
        m = re.fullmatch(r"\(@\s*([0-9,:\s]+)\)", text)
        if not m:
            raise ScpiError(DATA_TYPE_ERROR, f"{text!r} is not a channel list")
        out: list[int] = []
        for part in m.group(1).split(","):
            lo, _, hi = part.strip().partition(":")
            out.extend(range(int(lo), int(hi or lo) + 1))
        return out


def _mnemonic_matches(pattern: str, word: str) -> bool:
    short = "".join(ch for ch in pattern if ch.isupper() or ch.isdigit())
    return word.upper() in (short.upper(), pattern.upper())


@dataclass
class _Node:
    pattern: str  # e.g. "CHANnel"
    optional: bool
    suffix: bool  # takes a numeric suffix (<n>)
    short: str = field(init=False)

    def __post_init__(self) -> None:
        self.short = "".join(ch for ch in self.pattern if ch.isupper()).upper()

    def match(self, word: str) -> tuple[bool, int | None]:
        if self.pattern.startswith("*"):
            return word.upper() == self.pattern.upper(), None
        if self.suffix:
            m = re.fullmatch(r"([A-Za-z_]+)(\d*)", word)
            if not m or not _mnemonic_matches(self.pattern, m.group(1)):
                return False, None
            return True, int(m.group(2)) if m.group(2) else 1
        # A node without a declared suffix still accepts the default suffix 1 (`OUTP1`).
        m = re.fullmatch(r"([A-Za-z_]+?)(1?)", word)
        return bool(m and _mnemonic_matches(self.pattern, m.group(1))), None


Handler = Callable[[Call], Response]


class CommandTree:
    """Command patterns -> handlers, e.g. add(":WAVeform:POINts[:COUNt]?", fn)."""

    def __init__(self) -> None:
        self._entries: list[tuple[list[_Node], bool, Handler]] = []
        self._cache: dict[tuple[str, bool], tuple[Handler, tuple[int, ...]] | None] = {}

    def add(self, pattern: str, handler: Handler) -> None:
        query = pattern.endswith("?")
        body = pattern.rstrip("?")
        if body.startswith("*"):
            nodes = [_Node(body, False, False)]
        else:
            nodes = []
            for optional, word in re.findall(r"(\[?):?([A-Za-z*]+(?:<n>)?)\]?", body):
                nodes.append(_Node(word.replace("<n>", ""), bool(optional), word.endswith("<n>")))
        self._entries.append((nodes, query, handler))
        self._cache.clear()

    def lookup(self, words: list[str], query: bool) -> tuple[Handler, tuple[int, ...]] | None:
        key = (":".join(words).upper(), query)
        if key not in self._cache:
            self._cache[key] = next(
                ((handler, suffixes) for nodes, is_query, handler in self._entries
                 if is_query == query for suffixes in [_match(nodes, words)] if suffixes is not None), None)
        return self._cache[key]


def _match(nodes: list[_Node], words: list[str]) -> tuple[int, ...] | None:
    if not nodes:
        return () if not words else None
    node = nodes[0]
    if words:
        ok, suffix = node.match(words[0])
        if ok:
            rest = _match(nodes[1:], words[1:])
            if rest is not None:
                return ((suffix,) if suffix is not None else ()) + rest
    if node.optional:
        rest = _match(nodes[1:], words)
        if rest is not None:
            return ((1,) if node.suffix else ()) + rest
    return None


_SPECIAL = re.compile(rb"[\"'#\n]")


def find_message_end(buf: bytes | bytearray, start: int = 0) -> int | None:
    """Index of the "\\n" ending the first program message in buf, skipping strings and blocks.

    None when the message is not complete yet.
    """
    i = start
    while True:
        m = _SPECIAL.search(buf, i)
        if m is None:
            return None
        ch, i = buf[m.start()], m.start()
        if ch == 0x0A:
            return i
        if ch in (0x22, 0x27):  # quoted string
            close = buf.find(bytes([ch]), i + 1)
            if close < 0:
                return None
            i = close + 1
        else:  # '#': a definite-length block only when a nonzero digit follows
            if i + 1 >= len(buf):
                return None
            digits = buf[i + 1] - 0x30
            if not 1 <= digits <= 9:
                i += 1
                continue
            if i + 2 + digits > len(buf):
                return None
            try:
                length = int(buf[i + 2:i + 2 + digits])
            except ValueError:
                i += 1
                continue
            end = i + 2 + digits + length
            if end > len(buf):
                return None
            i = end


_PLAIN = re.compile(rb"[\"'#()]")


def _split_plain(message: bytes) -> list[tuple[str, list[Arg]]]:
    """split_units for a message without strings, blocks or channel lists (the common case)."""
    units: list[tuple[str, list[Arg]]] = []
    for unit in message.decode("latin-1").split(";"):
        header, _, rest = unit.strip().partition(" ")
        if not header:
            continue
        rest = rest.strip()
        units.append((header, [a.strip() for a in rest.split(",") if a.strip()] if rest else []))
    return units


def split_units(message: bytes) -> list[tuple[str, list[Arg]]]:
    """Split one program message into (header, args) units."""
    if _PLAIN.search(message) is None and b"\t" not in message:
        return _split_plain(message)
    units: list[tuple[str, list[Arg]]] = []
    args: list[Arg] = []
    current = bytearray()
    header: str | None = None
    depth = 0
    i = 0

    def close_arg() -> None:
        text = current.decode("latin-1").strip()
        if text:
            args.append(text)
        current.clear()

    def close_unit() -> None:
        nonlocal header
        if header is None:
            text = current.decode("latin-1").strip()
            if text:
                units.append((text, []))
        else:
            close_arg()
            units.append((header, list(args)))
        current.clear()
        args.clear()
        header = None

    while i < len(message):
        ch = message[i]
        if header is None and ch in (0x20, 0x09) and current.strip():
            header = current.decode("latin-1").strip()
            current.clear()
        elif ch in (0x22, 0x27):
            close = message.find(bytes([ch]), i + 1)
            close = len(message) - 1 if close < 0 else close
            current += message[i:close + 1]
            i = close
        elif ch == 0x23 and header is not None and i + 1 < len(message) and 0x31 <= message[i + 1] <= 0x39:
            digits = message[i + 1] - 0x30
            length = int(message[i + 2:i + 2 + digits] or b"0")
            start = i + 2 + digits
            if start + length > len(message):
                raise ScpiError(INVALID_BLOCK, f"block declares {length} bytes, {len(message) - start} present")
            close_arg()
            args.append(bytes(message[start:start + length]))
            i = start + length - 1
        elif ch == 0x28:
            depth += 1
            current.append(ch)
        elif ch == 0x29:
            depth -= 1
            current.append(ch)
        elif ch == 0x2C and depth == 0 and header is not None:
            close_arg()
        elif ch == 0x3B and depth == 0:
            close_unit()
        else:
            current.append(ch)
        i += 1
    close_unit()
    return units


def resolve_header(header: str, base: list[str]) -> tuple[list[str], bool, list[str]]:
    """(words, is_query, new base path) for a header, following SCPI's relative-path rule."""
    query = header.endswith("?")
    text = header.rstrip("?")
    if text.startswith("*"):
        return [text.upper()], query, base
    absolute = text.startswith(":")
    words = [w for w in text.lstrip(":").split(":") if w]
    full = words if absolute else base + words
    return full, query, full[:-1]


def ieee_block(payload: bytes) -> bytes:
    """Definite-length arbitrary block: #<digits><length><payload>."""
    length = str(len(payload)).encode()
    return b"#" + str(len(length)).encode() + length + payload
