"""Sound in the emulated fixture, as voltages on the scope's two channels.

Channel 1 carries the stimulus (the audio source's output, teed to the scope); channel 2 the
measurement microphone in front of the phone's speaker. Events are clips placed at simulated
instants; an acquisition samples their sum at the scope's sample times and adds the fixture's
noise and mains hum, so an onset has to be found, not read off.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

NOISE_RMS_V = {1: 0.0015, 2: 0.004}  # preamp + room noise at each scope input
HUM_V = {1: 0.0, 2: 0.002}  # 50 Hz pickup on the microphone cable
HUM_HZ = 50.0
SPEED_OF_SOUND_M_S = 343.0
# Fixture geometry. The stimulus speaker faces the phone's microphone, the measurement mic the
# phone's speaker; the fixture's acoustic delay (what calibration measures and the latency
# check subtracts) is the sum of both paths: 10 cm of air, 291.5 µs.
SPEAKER_TO_PHONE_M = 0.08
MIC_DISTANCE_M = 0.02  # measurement mic to phone speaker: 58 µs of air
FIXTURE_PATH_M = SPEAKER_TO_PHONE_M + MIC_DISTANCE_M
# With the phone out of the fixture (loopback) the measurement mic hears the stimulus speaker
# over the same 10 cm, at this fraction of the stimulus voltage.
LOOPBACK_GAIN = 0.4
KEEP_S = 600.0
# Where speech ends for the ground truth: 30 dB under the answer's peak. The measurement mic's
# noise sits ~39 dB under the answer's peak, so a word's tail below -30 dB is not there to hear.
AUDIBLE_DB = -30.0


@dataclass
class AudioEvent:
    channel: int
    t0: float  # simulated instant of the clip's first sample
    samples: np.ndarray  # float, peak-normalised shape of the sound
    sample_rate: float
    peak_v: float  # volts at the scope input for a sample of 1.0
    label: str = ""

    @property
    def t1(self) -> float:
        return self.t0 + len(self.samples) / self.sample_rate

    def sound_end(self, below_peak_db: float = AUDIBLE_DB) -> float:
        """Ground truth for end-of-speech checks: the instant the clip last falls below
        `below_peak_db` re its peak for good (a clip that ends in a pause went quiet before t1)."""
        level = 10.0 ** (below_peak_db / 20.0) * float(np.max(np.abs(self.samples), initial=0.0))
        loud = np.flatnonzero(np.abs(self.samples) >= level) if level > 0 else np.empty(0, int)
        return self.t0 + (int(loud[-1]) + 1 if loud.size else 0) / self.sample_rate


def synth_speech(duration_s: float, sample_rate: float, rng: np.random.Generator,
                 f0_hz: float = 120.0) -> np.ndarray:
    """A speech-like clip: voiced syllables (harmonics shaped by two formants) with pauses.

    Its first syllable starts at sample 0 with a 4 ms attack, so the clip's onset is its start.
    """
    n = max(int(duration_s * sample_rate), 1)
    out = np.zeros(n)
    start = 0
    first = True
    while start < n:
        length = int(rng.uniform(0.11, 0.26) * sample_rate)
        stop = min(start + length, n)
        t = np.arange(stop - start) / sample_rate
        f0 = f0_hz * rng.uniform(0.85, 1.2) * (1.0 + 0.04 * np.sin(2 * np.pi * 5.0 * t))
        phase = 2 * np.pi * np.cumsum(f0) / sample_rate
        f1, f2 = rng.uniform(300, 800), rng.uniform(900, 2300)
        syllable = np.zeros(stop - start)
        for k in range(1, 16):
            fk = k * f0_hz
            if fk > 0.45 * sample_rate:
                break
            weight = 1.0 / (1.0 + ((fk - f1) / 120.0) ** 2) + 0.6 / (1.0 + ((fk - f2) / 200.0) ** 2)
            syllable += weight * np.sin(k * phase)
        attack = np.minimum(t / 0.004, 1.0)
        release = np.clip((t[-1] - t) / 0.02, 0.0, 1.0) if t.size else t
        envelope = attack * release * np.exp(-t / rng.uniform(0.15, 0.4))
        loudness = 1.0 if first else rng.uniform(0.5, 1.0)
        out[start:stop] = loudness * envelope * syllable
        first = False
        start = stop + int(rng.uniform(0.03, 0.12) * sample_rate)
    peak = float(np.max(np.abs(out)))
    return out / peak if peak > 0 else out


class AudioScene:
    """Every clip played in the fixture; sampled by the scope per channel."""

    def __init__(self) -> None:
        self._events: dict[int, list[AudioEvent]] = {1: [], 2: []}
        self._longest = 0.0  # bounds the look-back when searching events by start time

    def play(self, event: AudioEvent) -> None:
        if event.channel not in self._events:
            raise ValueError(f"the fixture wires audio to scope channels 1 and 2, not {event.channel}")
        bisect.insort(self._events[event.channel], event, key=lambda e: e.t0)
        self._longest = max(self._longest, event.t1 - event.t0)

    def _near(self, channel: int, t_lo: float, t_hi: float) -> list[AudioEvent]:
        """Events on a channel that may overlap [t_lo, t_hi]."""
        events = self._events.get(channel, [])
        lo = bisect.bisect_left(events, t_lo - self._longest, key=lambda e: e.t0)
        hi = bisect.bisect_right(events, t_hi, key=lambda e: e.t0)
        return events[lo:hi]

    def events(self, channel: int) -> list[AudioEvent]:
        return list(self._events.get(channel, []))

    def trim(self, now: float) -> None:
        for channel, events in self._events.items():
            if events and events[0].t1 < now - KEEP_S:
                self._events[channel] = [e for e in events if e.t1 >= now - KEEP_S]

    def clean(self, channel: int, t0: float, offsets: np.ndarray) -> np.ndarray:
        """Noise-free voltage at instants t0 + offsets (offsets ascending).

        Times are split so that sub-microsecond sample spacing survives: at simulated epochs
        near 1.8e9 s a float64 absolute time only resolves 0.24 µs.
        """
        volts = np.zeros(offsets.shape)
        if offsets.size == 0:
            return volts
        for event in self._near(channel, t0 + offsets[0], t0 + offsets[-1]):
            start = event.t0 - t0  # event start on the offsets' axis
            end = start + len(event.samples) / event.sample_rate
            if end <= offsets[0] or start >= offsets[-1]:
                continue
            lo, hi = np.searchsorted(offsets, (start, end))
            position = (offsets[lo:hi] - start) * event.sample_rate
            volts[lo:hi] += event.peak_v * np.interp(position, np.arange(len(event.samples)), event.samples)
        return volts

    def acquire(self, channel: int, t0: float, offsets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """What the scope input sees at t0 + offsets: the clips plus noise and hum."""
        volts = self.clean(channel, t0, offsets)
        # Noise and hum in float32 (half the cost); the scope quantises to 8 or 16 bits anyway.
        noise = rng.standard_normal(offsets.shape, dtype=np.float32)
        noise *= np.float32(NOISE_RMS_V.get(channel, 0.002))
        volts += noise
        hum = HUM_V.get(channel, 0.0)
        if hum:
            # Offsets span seconds: in float32 the phase is still good to 1e-4 rad.
            phase = np.float32(2 * np.pi * HUM_HZ * (t0 % (1.0 / HUM_HZ)))
            angle = offsets.astype(np.float32)
            angle *= np.float32(2 * np.pi * HUM_HZ)
            angle += phase
            volts += np.float32(hum) * np.sin(angle)
        return volts

    def noise_rms_v(self, channel: int) -> float:
        return float(np.hypot(NOISE_RMS_V.get(channel, 0.002), HUM_V.get(channel, 0.0) / np.sqrt(2)))

    def first_crossing(self, channel: int, level_v: float, t_from: float, rising: bool = True) -> float | None:
        """First instant >= t_from where the noise-free signal crosses level_v (edge trigger)."""
        events = self._events.get(channel, [])
        for event in events[bisect.bisect_left(events, t_from - self._longest, key=lambda e: e.t0):]:
            if event.t1 <= t_from:
                continue
            start = max(int(np.ceil((t_from - event.t0) * event.sample_rate)), 0)
            wave = event.peak_v * event.samples[start:]
            # Before the clip the channel rests at 0 V.
            previous = np.concatenate(([event.peak_v * event.samples[start - 1] if start else 0.0], wave[:-1]))
            hits = (previous < level_v) & (wave >= level_v) if rising else (previous > level_v) & (wave <= level_v)
            index = np.flatnonzero(hits)
            if index.size:
                i = int(index[0])
                span = wave[i] - previous[i]
                fraction = (level_v - previous[i]) / span if span else 0.0
                return event.t0 + (start + i - 1 + fraction) / event.sample_rate
        return None
