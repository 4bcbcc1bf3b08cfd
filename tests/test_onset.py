"""phonebench.bench.stats.onset: onsets of synthetic scope waveforms with known truth."""
from __future__ import annotations

import numpy as np
import pytest

from phonebench.bench.stats.onset import OnsetDetector, OnsetStatus, measure_latency

FS = 100_000.0  # 100 kS/s scope capture
TOL = 0.4e-3  # onset accuracy: well under a millisecond for a ~400 ms latency


def capture(rng: np.random.Generator, onset_s: float | None, *, n: int = 60_000, amp: float = 0.5,
            freq: float = 1000.0, noise: float = 0.01, hum: float = 0.0, kind: str = "tone") -> np.ndarray:
    t = np.arange(n) / FS
    x = noise * rng.standard_normal(n) + hum * np.sin(2 * np.pi * 50 * t + 0.3)
    if onset_s is not None:
        on = t >= onset_s
        if kind == "tone":
            x[on] += amp * np.sin(2 * np.pi * freq * (t[on] - onset_s) + rng.uniform(0, 2 * np.pi))
        else:  # band-limited speech-like noise burst
            x[on] += amp * rng.standard_normal(on.sum())
    return x


@pytest.mark.parametrize("kind,amp,freq", [("tone", 0.5, 1000), ("tone", 0.2, 3000), ("tone", 2.0, 440),
                                           ("noise", 0.3, 0)])
def test_known_onsets(kind, amp, freq):
    rng = np.random.default_rng(1)
    det = OnsetDetector()
    for onset in rng.uniform(0.08, 0.45, 8):
        result = det.detect(capture(rng, onset, amp=amp, freq=freq, kind=kind), FS)
        assert result.found, result.reason
        assert result.time_s == pytest.approx(onset, abs=TOL)
        assert result.threshold == pytest.approx(6 * 0.01, rel=0.1)


def test_t0_and_not_before():
    rng = np.random.default_rng(2)
    x = capture(rng, 0.1)
    x[int(0.3 * FS):] += capture(rng, 0.0, n=x.size - int(0.3 * FS), noise=0)
    det = OnsetDetector()
    assert det.detect(x, FS, t0=5.0).time_s == pytest.approx(5.1, abs=TOL)
    # searching from 0.25 s on, while the first burst is still loud, finds where the search starts
    assert det.detect(x, FS, not_before_s=0.25).time_s == pytest.approx(0.25, abs=TOL)


def test_mains_hum_sets_its_own_floor():
    rng = np.random.default_rng(3)
    x = capture(rng, 0.2, hum=0.05, amp=0.6)  # hum 5x the noise, present from the start
    result = OnsetDetector().detect(x, FS)
    assert result.found and result.time_s == pytest.approx(0.2, abs=TOL)
    assert result.noise_rms > 0.03
    assert OnsetDetector().detect(capture(rng, None, hum=0.05), FS).status is OnsetStatus.NONE


def test_clicks_shorter_than_the_hold_time_are_rejected():
    rng = np.random.default_rng(4)
    x = capture(rng, 0.4)
    for at in (0.1, 0.2, 0.3):  # 0.5 ms clicks, far above the threshold
        i = int(at * FS)
        x[i:i + 50] += 2.0 * np.sign(rng.standard_normal(50))
    result = OnsetDetector().detect(x, FS)
    assert result.found and result.time_s == pytest.approx(0.4, abs=TOL)
    assert result.rejected == 3
    only_clicks = capture(rng, None)
    only_clicks[20_000:20_050] += 2.0
    alone = OnsetDetector().detect(only_clicks, FS)
    assert alone.status is OnsetStatus.NONE and "click" in alone.reason and alone.rejected == 1
    # negative control: with no hold time the click is taken for the onset
    assert OnsetDetector(hold_s=0.0).detect(x, FS).time_s == pytest.approx(0.1, abs=TOL)


def test_no_signal():
    rng = np.random.default_rng(5)
    result = OnsetDetector().detect(capture(rng, None), FS)
    assert result.status is OnsetStatus.NONE and not result.found and result.time_s is None
    assert "no rise above" in result.reason
    silent = OnsetDetector().detect(np.zeros(20_000), FS)  # digital silence: nothing rises either
    assert silent.status is OnsetStatus.NONE
    assert OnsetDetector().detect(capture(rng, 0.2, amp=0.03), FS).status is OnsetStatus.NONE  # below k x rms


def test_onsets_across_chunk_boundaries():
    rng = np.random.default_rng(6)
    det = OnsetDetector()
    for index in (32_768 + 5_000 - 3, 2 * 32_768 + 5_000 - 150, 3 * 32_768 + 5_000 + 1):
        onset = index / FS
        result = det.detect(capture(rng, onset, n=150_000), FS)
        assert result.time_s == pytest.approx(onset, abs=TOL), index


def test_integer_adc_codes():
    rng = np.random.default_rng(7)
    codes = np.round(capture(rng, 0.25) * 2000 + 37).astype(np.int16)  # offset, 16-bit codes
    result = OnsetDetector().detect(codes, FS)
    assert result.found and result.time_s == pytest.approx(0.25, abs=TOL)
    assert result.baseline == pytest.approx(37, abs=1)


def test_clipping_is_counted_and_does_not_move_the_onset():
    rng = np.random.default_rng(8)
    x = np.clip(capture(rng, 0.3, amp=3.0), -1.0, 1.0)
    result = OnsetDetector(clip_level=1.0).detect(x, FS)
    assert result.found and result.time_s == pytest.approx(0.3, abs=TOL)
    assert result.clipped > 0 and "clipped" in result.reason
    early = np.clip(capture(rng, 0.3, amp=3.0), -1.0, 1.0)
    early[100:110] = 1.0  # a clipped spike inside the quiet window
    bad = OnsetDetector(clip_level=1.0).detect(early, FS)
    assert bad.status is OnsetStatus.INVALID and "quiet window" in bad.reason


def test_holes_are_handled_honestly():
    rng = np.random.default_rng(9)
    x = capture(rng, 0.3)
    x[10_000:12_000] = np.nan  # a hole long before the onset: harmless
    result = OnsetDetector().detect(x, FS)
    assert result.found and result.time_s == pytest.approx(0.3, abs=TOL) and result.holes == 2000
    y = capture(rng, 0.3)
    y[29_000:31_000] = np.nan  # the onset falls inside the hole
    hidden = OnsetDetector().detect(y, FS)
    assert hidden.status is OnsetStatus.INVALID and "hole" in hidden.reason
    assert hidden.time_s == pytest.approx(0.31, abs=TOL)  # where the signal reappears, for the record
    z = capture(rng, 0.3)
    z[:4_000] = np.nan  # the quiet window is mostly missing
    assert OnsetDetector().detect(z, FS).status is OnsetStatus.INVALID


def test_signal_in_the_quiet_window_is_invalid():
    rng = np.random.default_rng(10)
    result = OnsetDetector().detect(capture(rng, 0.03), FS)
    assert result.status is OnsetStatus.INVALID and "not quiet" in result.reason
    assert OnsetDetector().detect(np.zeros(100), FS).status is OnsetStatus.INVALID  # too short


def test_latency_from_two_channels():
    rng = np.random.default_rng(11)
    stimulus = capture(rng, 0.1, n=80_000, amp=0.4, freq=1000)
    response = capture(rng, 0.1 + 0.4123 + 0.00029, n=80_000, amp=0.25, freq=700, kind="noise")
    # the response microphone hears the stimulus speaker faintly (crosstalk)
    response[int(0.1 * FS):int(0.2 * FS)] += 0.4 * stimulus[int(0.1 * FS):int(0.2 * FS)]
    latency = measure_latency(stimulus, response, FS, fixture_delay_s=0.00029, min_latency_s=0.15)
    assert latency.valid and latency.latency_s == pytest.approx(0.4123, abs=2 * TOL)
    naive = measure_latency(stimulus, response, FS, fixture_delay_s=0.00029)  # crosstalk taken as the answer
    assert naive.latency_s < 0.01
    mute = measure_latency(stimulus, capture(rng, None, n=80_000), FS)
    assert not mute.valid and mute.latency_s is None and "response: no-onset" in mute.reason
    dead = measure_latency(capture(rng, None, n=80_000), response, FS)
    assert not dead.valid and "stimulus" in dead.reason
