"""The emulated scopes' time measurements (frequency, period, widths, duty cycle, edges, phase)
on traces whose answers are known, and the 9.9E+37 cases (None here) where a scope cannot measure."""
from __future__ import annotations

import numpy as np
import pytest

from phonebench.emulation.instruments import trace_timing

DT = 1e-6
T = np.arange(100_000) * DT  # 100 ms


def test_sine_frequency_period_and_rise_time():
    noise = np.random.default_rng(0).normal(0, 0.01, T.size)
    sine = np.sin(2 * np.pi * 1000 * T) + noise
    assert trace_timing.measure("FREQuency", sine, DT) == pytest.approx(1000, rel=1e-3)
    assert trace_timing.measure("PERiod", sine, DT) == pytest.approx(1e-3, rel=1e-3)
    # 10 % to 90 % of a sine: 2 asin(0.8) / (2 pi f), widened a little by the noise on the extremes.
    assert trace_timing.measure("RISetime", sine, DT) == pytest.approx(2 * np.arcsin(0.8) / (2 * np.pi * 1000), rel=0.1)


def test_pulse_widths_and_duty_cycle():
    square = np.where((T * 1000) % 1 < 0.25, 1.0, -1.0)
    assert trace_timing.measure("PWIDth", square, DT) == pytest.approx(0.25e-3, abs=2 * DT)
    assert trace_timing.measure("NWIDth", square, DT) == pytest.approx(0.75e-3, abs=2 * DT)
    assert trace_timing.measure("DUTYcycle", square, DT) == pytest.approx(25, abs=0.5)


def test_phase_of_a_lagging_sine_and_what_cannot_be_measured():
    a = np.sin(2 * np.pi * 1000 * T)
    b = np.sin(2 * np.pi * 1000 * T - np.pi / 2)
    assert trace_timing.phase(a, b, DT) == pytest.approx(90, abs=0.5)
    assert trace_timing.measure("FREQuency", np.zeros(T.size), DT) is None  # no signal
    one_edge = np.where(T > 0.05, 1.0, -1.0)
    assert trace_timing.measure("PERiod", one_edge, DT) is None  # one edge: no period
    with pytest.raises(ValueError):
        trace_timing.measure("JITTer", a, DT)
