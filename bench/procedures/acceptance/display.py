"""What the operator sees: one large PASS / FAIL / STOP, the failing check in plain words, the
unit's cycle time and the station's takt. Plain text, readable from a metre away."""
from __future__ import annotations

from typing import Any

# 5-row block letters for the words the station shows.
_FONT = {
    "P": ["####", "#  #", "####", "#   ", "#   "],
    "A": [" ## ", "#  #", "####", "#  #", "#  #"],
    "S": [" ###", "#   ", " ## ", "   #", "### "],
    "F": ["####", "#   ", "### ", "#   ", "#   "],
    "I": ["###", " # ", " # ", " # ", "###"],
    "L": ["#   ", "#   ", "#   ", "#   ", "####"],
    "T": ["#####", "  #  ", "  #  ", "  #  ", "  #  "],
    "O": [" ## ", "#  #", "#  #", "#  #", " ## "],
}
BIG_WORD = {"pass": "PASS", "fail": "FAIL"}  # everything else stops the line: STOP
HEADLINE = {
    "pass": "unit accepted",
    "fail": "unit REJECTED",
    "incomplete": "test INCOMPLETE: unit not judged, retest it",
    "wrong-unit": "WRONG UNIT on the fixture",
    "refused": "station NOT CALIBRATED: no unit can be tested",
}


def big(word: str) -> list[str]:
    rows = ["", "", "", "", ""]
    for letter in word:
        glyph = _FONT[letter]
        for i in range(5):
            rows[i] += glyph[i].replace("#", "█") + "  "
    return [row.rstrip() for row in rows]


def operator_lines(serial: str, outcome: str, reason: str | None, *, attempts: int, cycle_s: float | None,
                   takt_s: float | None, failures: list[Any] | None = None, report: str | None = None) -> list[str]:
    word = BIG_WORD.get(outcome, "STOP")
    lines = ["", *("    " + row for row in big(word)), "",
             f"    {serial}: {HEADLINE.get(outcome, outcome)}"]
    if reason:
        lines.append(f"    why: {reason}")
    for failure in (failures or [])[1:4]:
        lines.append(f"         also: {failure.text() if hasattr(failure, 'text') else failure}")
    retest = "" if attempts <= 1 else f" ({attempts} attempts{', passed on retest' if outcome == 'pass' else ''})"
    timing = [f"cycle {cycle_s:.1f} s" if cycle_s is not None else None,
              f"station takt {takt_s:.1f} s/unit" if takt_s else None]
    lines.append("    " + " · ".join(t for t in timing if t) + retest)
    if report:
        lines.append(f"    report: {report}")
    lines.append("")
    return lines
