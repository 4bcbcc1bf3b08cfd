"""Time measurements on a sampled trace, as an oscilloscope makes them (frequency, period, widths,
duty cycle, rise and fall times, phase): mid-level (50 %) crossings between the trace's top and
base for the period and widths, 10 %-90 % for the edges. None where the trace does not allow the
measurement (too few edges, no signal), which the scope answers as 9.9E+37.

The top and base are the trace's extremes (the scope's histogram modes differ from them by about
the noise); a hysteresis of a tenth of the amplitude keeps noise from making extra crossings.
"""
from __future__ import annotations

import numpy as np

HYSTERESIS = 0.1  # of the amplitude


def _crossings(volts: np.ndarray, level: float, band: float, rising: bool) -> np.ndarray:
    """Sample positions (fractional, interpolated) where the trace crosses `level` in one
    direction, after having been beyond `level -/+ band` on the other side."""
    v = (volts - level) if rising else (level - volts)
    state = np.where(v >= 0, 1, np.where(v < -band, -1, 0))
    marked = np.flatnonzero(state)  # samples clearly on one side; the ones in the band keep the last side
    sides = state[marked]
    i = marked[np.flatnonzero((sides[1:] == 1) & (sides[:-1] == -1)) + 1]
    j = i - 1  # below the level (in the band or beyond it)
    step = v[i] - v[j]
    frac = np.divide(-v[j], step, out=np.zeros(i.shape), where=step != 0)
    return j + np.clip(frac, 0.0, 1.0)


def edges(volts: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(rising, falling) mid-level crossing times in seconds from the first sample; None without a signal."""
    top, base = float(np.max(volts)), float(np.min(volts))
    amplitude = top - base
    if amplitude <= 0:
        return None
    mid, band = (top + base) / 2, HYSTERESIS * amplitude
    return _crossings(volts, mid, band, True) * dt, _crossings(volts, mid, band, False) * dt


def period(volts: np.ndarray, dt: float) -> float | None:
    found = edges(volts, dt)
    if found is None or found[0].size < 2:
        return None
    return float(np.mean(np.diff(found[0])))


def width(volts: np.ndarray, dt: float, positive: bool) -> float | None:
    """The first whole pulse: rising to the next falling edge (positive), or falling to rising."""
    found = edges(volts, dt)
    if found is None:
        return None
    start, end = found if positive else found[::-1]
    if start.size == 0:
        return None
    later = end[end > start[0]]
    return float(later[0] - start[0]) if later.size else None


def transition(volts: np.ndarray, dt: float, rising: bool) -> float | None:
    """10 % to 90 % (rising) or 90 % to 10 % (falling) time of the first such edge."""
    top, base = float(np.max(volts)), float(np.min(volts))
    amplitude = top - base
    if amplitude <= 0:
        return None
    low, high = base + 0.1 * amplitude, base + 0.9 * amplitude
    band = HYSTERESIS * amplitude / 2
    first, second = (low, high) if rising else (high, low)
    starts = _crossings(volts, first, band, rising)
    ends = _crossings(volts, second, band, rising)
    for start in starts:
        later = ends[ends > start]
        if later.size:
            return float(later[0] - start) * dt
    return None


def measure(name: str, volts: np.ndarray, dt: float) -> float | None:
    """One of FREQuency, PERiod, PWIDth, NWIDth, DUTYcycle, RISetime, FALLtime (upper case short or long)."""
    key = name.upper()[:4]
    if key in ("FREQ", "PERI"):
        p = period(volts, dt)
        return None if p is None else (1 / p if key == "FREQ" else p)
    if key in ("PWID", "NWID"):
        return width(volts, dt, key == "PWID")
    if key in ("DUTY", "PDUT"):
        p, w = period(volts, dt), width(volts, dt, True)
        return None if p is None or w is None else 100 * w / p
    if key in ("RISE", "RTIM", "FALL", "FTIM"):
        return transition(volts, dt, key in ("RISE", "RTIM"))
    raise ValueError(f"no time measurement {name!r}")


def phase(volts_a: np.ndarray, volts_b: np.ndarray, dt: float) -> float | None:
    """Degrees by which b's first rising edge follows a's, in a's period, within (-180, 180]."""
    p = period(volts_a, dt)
    a, b = edges(volts_a, dt), edges(volts_b, dt)
    if p is None or a is None or b is None or a[0].size == 0 or b[0].size == 0:
        return None
    degrees = (b[0][0] - a[0][0]) / p * 360.0
    return float(180.0 - (180.0 - degrees) % 360.0)
