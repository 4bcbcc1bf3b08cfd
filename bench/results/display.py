"""How a verdict reads to a person, in one place for the report, the terminal summary and the
operator page: one spelling per unit, one naming scheme for checks, numbers without Python's
`None`, the limit with its tolerance, the bound with its confidence and the expanded uncertainty."""
from __future__ import annotations

import numbers
import re
from typing import Any

UNIT_SPELLING = {"degC": "°C", "C": "°C", "deg C": "°C", "celsius": "°C"}
MISSING = "–"  # shown where a value is absent; never "None"


def number(value: object) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):  # numpy's float32 too
        return f"{float(value):.4g}"
    return str(value)


def unit(text: str | None) -> str:
    """One spelling per unit: `degC` and `°C` both read °C."""
    text = (text or "").strip()
    return UNIT_SPELLING.get(text, text)


def prose(text: str | None) -> str:
    """A check's free-text detail with the same unit spelling (`2 degC` reads `2 °C`)."""
    return re.sub(r"(?<=[\d ])degC\b", "°C", text or "")


def with_unit(value: object, unit_text: str | None) -> str:
    u = unit(unit_text)
    if value is None:
        return MISSING
    return f"{number(value)} {u}".rstrip() if u not in ("%",) else f"{number(value)} %"


def check_name(v: dict[str, Any]) -> str:
    """The check's one display name: its SLA metric id when it has one, else its own name, with
    dots read as underscores so `dialog.energy` and `voice_latency_p99` follow one scheme."""
    return str(v.get("metric") or v.get("name") or "").replace(".", "_")


def limit_text(v: dict[str, Any]) -> str:
    """`≤ 410 ms`, `== 72 ± 2 °C` (the tolerance shown), or empty without a limit."""
    if v.get("limit") is None:
        return ""
    comparator = {"<=": "≤", ">=": "≥"}.get(v.get("comparator") or "", v.get("comparator") or "")
    tolerance = (v.get("extra") or {}).get("tolerance")
    tol = f" ± {number(tolerance)}" if tolerance is not None else ""
    return f"{comparator} {number(v['limit'])}{tol} {unit(v.get('unit'))}".rstrip()


def bound_text(v: dict[str, Any]) -> str:
    """`bound 395 ms @ 95 %`, `bound 395 ms` (confidence unstated), or empty without a bound."""
    if v.get("bound") is None:
        return ""
    confidence = v.get("confidence")
    at = f" @ {confidence:.0%}".replace("%", " %") if isinstance(confidence, (int, float)) else ""
    return f"bound {with_unit(v['bound'], v.get('unit'))}{at}"


def uncertainty_text(v: dict[str, Any]) -> str:
    expanded = (v.get("uncertainty") or {}).get("expanded")
    return "" if expanded is None else f"U ±{with_unit(expanded, v.get('unit'))}"


def value_text(v: dict[str, Any]) -> str:
    """`p99 380 ms ≤ 410 ms (bound 395 ms @ 95 %, U ±4 ms)`: what was judged against what."""
    statistic = v.get("statistic") or "value"
    if v.get("value") is None and v.get("limit") is None:  # a classification (a fingerprint): its detail says it
        return str(v.get("detail") or (v.get("extra") or {}).get("verdict") or "no numeric value")
    head = f"{statistic} {with_unit(v.get('value'), v.get('unit'))}"
    limit = limit_text(v)
    extras = [t for t in (bound_text(v), uncertainty_text(v)) if t]
    return head + (f" vs limit {limit}" if limit else "") + (f" ({', '.join(extras)})" if extras else "")


def evidence_text(v: dict[str, Any]) -> str:
    return str(v.get("evidence") or "evidence unstated")


def duration_text(seconds: float | None) -> str:
    """Lab time as a person reads it (`42 s`, `12.5 min`, `2.1 h`); empty when unknown."""
    if seconds is None:
        return ""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
