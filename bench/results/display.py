"""How a verdict reads to a person, in one place for the report, the terminal summary and the
operator page: one spelling per unit, one naming scheme for checks, numbers without Python's
`None`, the limit with its tolerance, the bound with its confidence and the expanded uncertainty."""
from __future__ import annotations

import numbers
import re
from phonebench.core.verdict import Verdict

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


def check_name(v: Verdict) -> str:
    """The check's one display name: its SLA metric id when it has one, else its own name, with
    dots read as underscores so `dialog.energy` and `voice_latency_p99` follow one scheme."""
    return str(v.metric or v.name or "").replace(".", "_")


def limit_text(v: Verdict) -> str:
    """`≤ 410 ms`, `== 72 ± 2 °C` (the tolerance shown), or empty without a limit."""
    if v.limit is None:
        return ""
    comparator = {"<=": "≤", ">=": "≥"}.get(v.comparator, v.comparator)
    tolerance = v.extra.get("tolerance")
    tol = f" ± {number(tolerance)}" if tolerance is not None else ""
    return f"{comparator} {number(v.limit)}{tol} {unit(v.unit)}".rstrip()


def bound_text(v: Verdict) -> str:
    """`bound 395 ms @ 95 %`, `bound 395 ms` (confidence unstated), or empty without a bound."""
    if v.bound is None:
        return ""
    at = f" @ {v.confidence:.0%}".replace("%", " %") if v.confidence is not None else ""
    return f"bound {with_unit(v.bound, v.unit)}{at}"


def expanded(v: Verdict) -> float | None:
    """The verdict's expanded uncertainty U, None when it states none."""
    u = v.uncertainty.expanded if v.uncertainty is not None else None
    return None if u is None or u != u else u  # a stored budget without U reads back as NaN


def uncertainty_text(v: Verdict) -> str:
    u = expanded(v)
    return "" if u is None else f"U ±{with_unit(u, v.unit)}"


def value_text(v: Verdict) -> str:
    """`p99 380 ms ≤ 410 ms (bound 395 ms @ 95 %, U ±4 ms)`: what was judged against what."""
    if v.value is None and v.limit is None:  # a classification (a fingerprint): its detail says it
        return str(v.explanation or v.extra.get("verdict") or "no numeric value")
    head = f"{v.statistic or 'value'} {with_unit(v.value, v.unit)}"
    limit = limit_text(v)
    extras = [t for t in (bound_text(v), uncertainty_text(v)) if t]
    return head + (f" vs limit {limit}" if limit else "") + (f" ({', '.join(extras)})" if extras else "")


def evidence_text(v: Verdict) -> str:
    return v.evidence.value if v.evidence is not None else "evidence unstated"


def duration_text(seconds: float | None) -> str:
    """Lab time as a person reads it (`42 s`, `12.5 min`, `2.1 h`); empty when unknown."""
    if seconds is None:
        return ""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
