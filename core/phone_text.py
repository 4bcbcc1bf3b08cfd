"""Text from a phone, made safe to show and to write. The phone is outside the trust boundary:
getprop values, runtime version strings and shell output may carry terminal escape sequences,
bidi overrides or newlines that forge lines in a file a reviewer signs (docs/security)."""
from __future__ import annotations

import unicodedata

MAX_PHONE_TEXT = 256  # a build fingerprint is ~100 characters; nothing a phone names itself is longer
# Characters a terminal, an editor or a TOML parser acts on instead of showing: controls (C0, DEL,
# C1: ESC and CSI start escape sequences), format characters (bidi overrides, zero-width),
# line and paragraph separators, lone surrogates.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in _HIDDEN


def _visible(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, limit: int = MAX_PHONE_TEXT) -> str:
    """`text` with every hidden character shown as a visible escape (ESC -> "\\x1b", a newline
    -> "\\x0a"), cut at `limit` characters with a note of how many more there were. Work is
    bounded by `limit`, however long `text` is."""
    if len(text) <= limit and not any(_hidden(c) for c in text):
        return text
    out: list[str] = []
    used = 0
    for index, char in enumerate(text):
        piece = _visible(char) if _hidden(char) else char
        if used + len(piece) > limit:
            out.append(f"...(+{len(text) - index} chars)")
            break
        out.append(piece)
        used += len(piece)
    return "".join(out)


def toml_string(text: str) -> str:
    """A TOML basic string holding exactly `text`: quotes, backslashes and every hidden character
    escaped (TOML forbids raw controls; format characters are escaped so that a reviewer's editor
    shows them), lone surrogates (not encodable) as U+FFFD."""
    out = ['"']
    for char in text:
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif _hidden(char):
            code = ord(char)
            out.append("\\uFFFD" if 0xD800 <= code <= 0xDFFF else
                       f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)
