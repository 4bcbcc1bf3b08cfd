"""SCPI message parsing for the emulated instruments (IEEE 488.2 / SCPI-1999 subset).

- Program messages end at "\\n"; units are separated by ";" outside strings, parentheses and
  binary blocks. A unit without a leading ":" continues the previous unit's path.
- Headers match long or short mnemonic forms (`:WAVeform:POINts` == `:WAV:POIN`), case-blind,
  with optional `[nodes]`; a numeric suffix only on the nodes that take one (`CHANnel<n>` matches
  `CHAN2`; `:TIMebase2` is an undefined header).
- The path rule (SCPI-1999 vol. 1, 6.2.4): after `;` a header without a leading `:` continues
  from the current path, the parent of the last node used; a leading `:` starts again at the
  root; common commands (`*...`) leave the path alone. A relative header that does not resolve
  is undefined (-113): it is never retried from the root.
- Arguments are strings, or bytes for definite-length blocks (`#<n><len><data>`). Numeric
  arguments take MINimum/MAXimum/DEFault where a handler gives those values, and unit suffixes
  with SI multipliers (`100 mV`, `1 KHZ`, `10US`; `MHZ` and `MOHM` are mega).
- Every argument a handler does not read is one too many: -108 "Parameter not allowed".
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

Arg = str | bytes
Response = str | bytes | None

# Standard SCPI error codes used by the emulators.
UNDEFINED_HEADER = (-113, "Undefined header")
HEADER_SUFFIX = (-114, "Header suffix out of range")
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
INFINITY = 9.9e37  # what SCPI's INFinity stands for


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


_MULTIPLIERS = {"": 1.0, "EX": 1e18, "PE": 1e15, "T": 1e12, "G": 1e9, "MA": 1e6, "K": 1e3, "M": 1e-3,
                "U": 1e-6, "N": 1e-9, "P": 1e-12, "F": 1e-15, "A": 1e-18}
_UNITS = ("HZ", "OHM", "VPP", "VRMS", "DBM", "PCT", "DEG", "RAD", "CEL", "V", "A", "S", "W")
_NUMBER = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:E[+-]?\d+)?)\s*([A-Z]*)")


def parse_number(text: str) -> float:
    """A decimal numeric value with an optional unit suffix: `2.5`, `100 mV`, `1KHZ`, `10 US`."""
    upper = text.strip().upper()
    m = _NUMBER.fullmatch(upper)
    if m is None:
        raise ScpiError(DATA_TYPE_ERROR, f"{text.strip()!r} is not a number")
    value, suffix = float(m.group(1)), m.group(2)
    if not suffix:
        return value
    if suffix in ("MHZ", "MOHM"):  # SCPI's exception: M is mega for these two
        return value * 1e6
    for unit in _UNITS:
        prefix = suffix[:-len(unit)] if suffix.endswith(unit) else None
        if prefix is not None and prefix in _MULTIPLIERS:
            return value * _MULTIPLIERS[prefix]
    raise ScpiError(ILLEGAL_VALUE, f"unit suffix {suffix!r} in {text.strip()!r}")


def short_form(option: str) -> str:
    """A mnemonic's short form, as queries answer enumerations: MAXimum -> MAX, LSBFirst -> LSBF."""
    short = "".join(ch for ch in option if ch.isupper() or ch.isdigit())
    return short or option.upper()


@dataclass
class Call:
    """One parsed program message unit, handed to a handler.

    `used` counts the arguments the handler read; the server refuses the unit when some were
    not read (-108 "Parameter not allowed")."""

    header: str
    args: list[Arg]
    suffixes: tuple[int, ...] = ()
    used: int = 0

    def _touch(self, index: int) -> None:
        self.used = max(self.used, index + 1)

    def has(self, index: int) -> bool:
        """Whether an optional argument was given (reading it counts it as used)."""
        return index < len(self.args)

    def rest(self, index: int) -> list[Arg]:
        """Every argument from `index` on (a list of values), all counted as used."""
        self.used = max(self.used, len(self.args))
        return self.args[index:]

    def arg(self, index: int) -> str:
        self._touch(index)
        if index >= len(self.args):
            raise ScpiError(MISSING_PARAMETER, self.header)
        value = self.args[index]
        if isinstance(value, bytes):
            raise ScpiError(DATA_TYPE_ERROR, "block where a value was expected")
        return value

    def block(self, index: int) -> bytes:
        self._touch(index)
        value = self.args[index] if index < len(self.args) else None
        if value is None:
            raise ScpiError(MISSING_PARAMETER, self.header)
        if not isinstance(value, bytes):
            raise ScpiError(DATA_TYPE_ERROR, "expected a definite-length block")
        return value

    def number(self, index: int, minimum: float | None = None, maximum: float | None = None,
               default: float | None = None) -> float:
        """A numeric argument within [minimum, maximum] (-222 outside); MIN, MAX and DEF name
        those bounds and the default where given."""
        value = self.keyword_number(index, minimum, maximum, default)
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise ScpiError(OUT_OF_RANGE, f"{value:g} not in [{_g(minimum)}, {_g(maximum)}]")
        return value

    def keyword_number(self, index: int, minimum: float | None = None, maximum: float | None = None,
                       default: float | None = None) -> float:
        """A numeric argument, MIN/MAX/DEF resolved, not range-checked (for handlers that clip)."""
        text = self.arg(index).strip()
        for word, value in (("MINimum", minimum), ("MAXimum", maximum), ("DEFault", default)):
            if _mnemonic_matches(word, text):
                if value is None:
                    raise ScpiError(ILLEGAL_VALUE, f"{text} is not accepted here")
                return value
        if _mnemonic_matches("INFinity", text) or _mnemonic_matches("NINFinity", text):
            return INFINITY if text.upper().startswith("INF") else -INFINITY  # SCPI's 9.9E37
        return parse_number(text)

    def boolean(self, index: int) -> bool:
        text = self.arg(index).strip().upper()
        if text in ("1", "ON"):
            return True
        if text in ("0", "OFF"):
            return False
        raise ScpiError(ILLEGAL_VALUE, f"{text!r} is not ON/OFF/1/0")

    def choice(self, index: int, *options: str) -> str:
        """Match a character parameter against long-form options; returns the long form."""
        return self.option(index, *options).upper()

    def option(self, index: int, *options: str) -> str:
        """Match a character parameter against options; returns the option as written (`MAXimum`),
        whose `short_form` is what a query answers."""
        text = self.arg(index).strip()
        for option in options:
            if _mnemonic_matches(option, text):
                return option
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


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


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
        return _mnemonic_matches(self.pattern, word), None


Handler = Callable[[Call], Response]


class CommandTree:
    """Command patterns -> handlers, e.g. add(":WAVeform:POINts[:COUNt]?", fn)."""

    def __init__(self) -> None:
        self._entries: list[tuple[list[_Node], bool, Handler]] = []
        self._cache: dict[tuple[str, bool], tuple[Handler, tuple[int, ...]] | None] = {}
        self.patterns: list[str] = []  # as registered, for conformance figures

    def add(self, pattern: str, handler: Handler) -> None:
        self.patterns.append(pattern)
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
            block, i = _block_at(message, i)
            close_arg()
            args.append(block)
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


def _block_at(message: bytes, i: int) -> tuple[bytes, int]:
    """The definite-length block whose "#" is message[i], and the index of its last byte."""
    digits = message[i + 1] - 0x30
    length = int(message[i + 2:i + 2 + digits] or b"0")
    start = i + 2 + digits
    if start + length > len(message):
        raise ScpiError(INVALID_BLOCK, f"block declares {length} bytes, {len(message) - start} present")
    return bytes(message[start:start + length]), start + length - 1


def resolve_header(header: str, base: list[str]) -> tuple[list[str], bool, list[str]]:
    """(words, is_query, new base path) for a header, following SCPI's path rule: a relative
    header continues from `base`, the new base is the parent of its last node."""
    query = header.endswith("?")
    text = header.rstrip("?")
    if text.startswith("*"):
        return [text.upper()], query, base
    absolute = text.startswith(":")
    words = [w for w in text.lstrip(":").split(":") if w]
    full = words if absolute else base + words
    return full, query, full[:-1]


def ieee_block(payload: bytes, digits: int = 0) -> bytes:
    """Definite-length arbitrary block: #<digits><length><payload>; `digits` fixes the length
    field's width as some models do (InfiniiVision: always 8, `#800001000...`)."""
    length = str(len(payload)).zfill(digits).encode()
    return b"#" + str(len(length)).encode() + length + payload
