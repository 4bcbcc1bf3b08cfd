"""Audio onset detection on scope waveforms, and voice latency from two channels.

The envelope is a trailing moving average of |x - baseline| over `envelope_s`. The threshold is
k x the RMS measured in a quiet leading window (so hum and noise set their own floor), or, with
`k_envelope`, the envelope's own noise level plus k_envelope x its standard deviation in that
window: an average over `envelope_s` fluctuates far less than the samples, so this sees sounds a
few noise RMS below k x RMS (the decaying tail of a word). An onset is the first time the
envelope rises above the threshold *and* stays above the lower (hysteresis) threshold for
`hold_s`, so a click shorter than the hold time is rejected.

The reported time is the start of the rise, not the threshold crossing (which moves with the
signal's amplitude and attack). A trailing average has no group delay at the start of a rise: it
leaves its noise level with the first loud sample and then grows as a power of the time since,
(t - t0)^p: p = 1 for a step, 2 for a linear attack shorter than the window. Searching back from
the confirmed crossing, the envelope's last rises through three low levels in geometric ratio
(1, 2 and 4 steps above its level just before the rise; a step is 3 x the envelope's own noise,
so the levels sit in the rise's first samples, before a voice's pitch pulses make the envelope
lumpy) fix t0
whatever p is: for a power law the three times since t0 are in geometric ratio too (Aitken's
extrapolation). When noise makes the three crossings inconsistent, the attack is taken as
linear (p = 2). The sum over whole samples puts the extrapolated point half a sample before the
continuous start, which is added back.

Speed: the record is scanned in cache-sized chunks; a chunk whose samples all stay within the
threshold of the baseline cannot hold a crossing (an average never exceeds its largest term) and
is skipped after a min/max, so the envelope is computed only where something happens.
Holes (NaN) are left out of the average; an onset right after a hole is reported INVALID with
its time, because the true onset may lie inside the hole. Clipped samples are counted (and make
the result INVALID only when they sit in the quiet window, where they corrupt the noise floor).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.typing import ArrayLike

log = logging.getLogger(__name__)

_CHUNK = 1 << 15  # samples per scan step: float64 chunk plus temporaries stay in L2


class OnsetStatus(str, Enum):
    FOUND = "onset"
    NONE = "no-onset"  # nothing rose above the threshold for the hold time
    INVALID = "invalid"  # the record cannot support an onset time (see reason)


@dataclass(frozen=True)
class Onset:
    status: OnsetStatus
    time_s: float | None  # t0 + index / fs; also given (with the reason) for some INVALID results
    index: float | None  # sub-sample index of the onset
    threshold: float  # high threshold, in the waveform's units
    noise_rms: float  # RMS of the quiet window around its mean
    baseline: float  # mean of the quiet window (DC offset)
    clipped: int = 0  # clipped samples seen in the scanned part of the record
    holes: int = 0  # NaN samples seen in the scanned part of the record
    rejected: int = 0  # rises shorter than the hold time (clicks)
    reason: str = ""

    @property
    def found(self) -> bool:
        return self.status is OnsetStatus.FOUND


@dataclass(frozen=True)
class OnsetDetector:
    k: float = 6.0  # threshold = k x noise RMS
    quiet_s: float = 0.05  # leading window that must hold noise only
    envelope_s: float = 0.002  # moving-average length (1-5 ms)
    hold_s: float = 0.005  # the envelope must stay above the low threshold this long
    hysteresis: float = 0.5  # low threshold = hysteresis x threshold (x its height above the floor)
    min_threshold: float = 0.0  # floor, e.g. a few ADC codes for a digitally silent channel
    k_envelope: float | None = None  # threshold = envelope floor + k_envelope x envelope std (quiet window)
    clip_level: float | None = None  # |x| >= clip_level is clipped (the scope's full scale)

    def __post_init__(self) -> None:
        if not (self.k > 0 and self.quiet_s > 0 and self.envelope_s > 0 and self.hold_s >= 0
                and 0 < self.hysteresis <= 1 and (self.k_envelope is None or self.k_envelope > 0)):
            raise ValueError(f"bad onset detector settings: {self}")

    def detect(self, x: ArrayLike, fs: float, *, t0: float = 0.0, not_before_s: float | None = None) -> Onset:
        """First onset in `x` sampled at `fs` Hz; times are t0 + index / fs.

        `not_before_s` starts the search later (e.g. the response channel after the stimulus).
        """
        x = np.asarray(x)
        if x.ndim != 1:
            raise ValueError(f"onset detection takes one channel (1-D array), got shape {x.shape}")
        return _Scan(self, x, float(fs), t0).run(not_before_s)


@dataclass(frozen=True)
class Latency:
    latency_s: float | None  # response onset - stimulus onset - fixture delay; None when not valid
    stimulus: Onset
    response: Onset
    fixture_delay_s: float
    reason: str = ""

    @property
    def valid(self) -> bool:
        return self.latency_s is not None


def measure_latency(stimulus: ArrayLike, response: ArrayLike, fs: float, *, fixture_delay_s: float = 0.0,
                    detector: OnsetDetector | None = None, response_detector: OnsetDetector | None = None,
                    t0: float = 0.0, min_latency_s: float = 0.0) -> Latency:
    """Latency = onset(response) - onset(stimulus) - fixture delay, both channels on one time base.

    The response is searched from the stimulus onset + `min_latency_s` on (raise it to skip
    acoustic crosstalk of the stimulus into the response microphone).
    """
    detector = detector or OnsetDetector()
    first = detector.detect(stimulus, fs, t0=t0)
    if not first.found or first.time_s is None:
        none = Onset(OnsetStatus.INVALID, None, None, math.nan, math.nan, math.nan,
                     reason="not searched: no stimulus onset")
        return Latency(None, first, none, fixture_delay_s, f"stimulus: {first.status.value}: {first.reason}")
    second = (response_detector or detector).detect(response, fs, t0=t0, not_before_s=first.time_s + min_latency_s)
    if not second.found or second.time_s is None:
        return Latency(None, first, second, fixture_delay_s, f"response: {second.status.value}: {second.reason}")
    return Latency(second.time_s - first.time_s - fixture_delay_s, first, second, fixture_delay_s)


class _Scan:
    """One detection pass over one record."""

    def __init__(self, cfg: OnsetDetector, x: np.ndarray, fs: float, t0: float) -> None:
        self.cfg, self.x, self.fs, self.t0 = cfg, x, fs, t0
        self.w = max(1, round(cfg.envelope_s * fs))
        self.hold = max(1, round(cfg.hold_s * fs))
        self.nq = round(cfg.quiet_s * fs)
        self.block = max(1, self.w // 8)  # block length for the envelope's upper bound
        self.clipped = self.holes = self.rejected = 0
        self.base = self.rms = self.floor = self.spread = self.t_hi = self.t_lo = math.nan
        self.start = self.nq

    def run(self, not_before_s: float | None) -> Onset:
        x, cfg = self.x, self.cfg
        if self.nq < max(8, self.w) or x.size < self.nq + self.w + self.hold:
            return self._result(OnsetStatus.INVALID, reason=f"record of {x.size} samples is too short for a "
                                f"{cfg.quiet_s} s quiet window, {cfg.envelope_s} s envelope and {cfg.hold_s} s hold")
        quiet = x[:self.nq].astype(np.float64)
        valid = quiet[~np.isnan(quiet)]
        if valid.size < self.nq // 2:
            return self._result(OnsetStatus.INVALID, reason=f"quiet window is {self.nq - valid.size} of "
                                f"{self.nq} samples NaN: no noise floor")
        self.base = float(valid.mean())
        dev = np.abs(valid - self.base)
        self.rms = float(np.sqrt(np.mean(dev * dev)))
        self.floor = float(dev.mean())  # the envelope's level on noise alone
        quiet_env = self._envelope(self.w - 1, self.nq)
        quiet_env = quiet_env[np.isfinite(quiet_env)]
        self.spread = float(quiet_env.std()) if quiet_env.size > 1 else 0.0  # the envelope's own noise
        if cfg.k_envelope is None:
            self.t_hi = max(cfg.k * self.rms, cfg.min_threshold)
            self.t_lo = max(cfg.hysteresis * self.t_hi, self.floor)
        else:  # min_threshold is then the least rise above the floor
            self.t_hi = self.floor + max(cfg.k_envelope * self.spread, cfg.min_threshold)
            self.t_lo = self.floor + cfg.hysteresis * (self.t_hi - self.floor)
        if self.t_hi == 0.0:
            self.t_hi = np.finfo(np.float64).tiny  # digital silence: any departure is a rise
        if cfg.clip_level is not None and np.any(np.abs(valid) >= cfg.clip_level):
            return self._result(OnsetStatus.INVALID, reason="clipped samples in the quiet window: noise floor unknown")
        half = valid.size // 2
        first_rms = float(np.sqrt(np.mean(dev[:half] ** 2)))
        last_rms = float(np.sqrt(np.mean(dev[half:] ** 2)))
        if last_rms > 3.0 * first_rms + cfg.min_threshold:
            return self._result(OnsetStatus.INVALID, reason=f"quiet window is not quiet (RMS {first_rms:.3g} then "
                                f"{last_rms:.3g}): the signal starts too early or quiet_s is too long")
        self.start = self.nq
        if not_before_s is not None:
            self.start = max(self.start, math.ceil((not_before_s - self.t0) * self.fs))
        return self._search(self.start)

    def _search(self, start: int) -> Onset:
        x, n = self.x, self.x.size
        lo_bound, hi_bound = self.base - self.t_hi, self.base + self.t_hi
        clip = self.cfg.clip_level
        pos = start
        while pos < n:
            end = min(pos + _CHUNK, n)
            # The envelope at pos averages back to pos - w + 1: those samples must be quiet too.
            seg = x[max(0, pos - self.w + 1):end]
            top, bottom = seg.max(), seg.min()  # NaN propagates: such chunks take the careful path
            if top <= hi_bound and bottom >= lo_bound:
                pos = end
                continue
            if clip is not None and (top >= clip or bottom <= -clip):
                self.clipped += int(np.count_nonzero(np.abs(x[pos:end]) >= clip))
            holes = bool(np.isnan(top) or np.isnan(bottom))
            if holes:
                self.holes += int(np.count_nonzero(np.isnan(x[pos:end])))
            found, pos = self._scan_chunk(pos, end, holes)
            if found is not None:
                return found
        how = (f"{self.cfg.k:g} x noise RMS {self.rms:.3g}" if self.cfg.k_envelope is None
               else f"envelope floor + {self.cfg.k_envelope:g} x its spread")
        reason = (f"no rise above {self.t_hi:.3g} ({how}) "
                  f"lasting {self.cfg.hold_s:g} s")
        if self.rejected:
            reason += f"; {self.rejected} shorter rise(s) rejected as clicks"
        return self._result(OnsetStatus.NONE, reason=reason)

    def _scan_chunk(self, pos: int, end: int, holes: bool) -> tuple[Onset | None, int]:
        """Look for a confirmed onset at output indices [pos, end); returns (result, next position).

        Sums of |x - baseline| over short blocks bound every window sum from above, so the
        exact envelope is computed only where that bound reaches the threshold (a stream of
        clicks costs one pass, not an envelope).
        """
        skip_to = pos
        for lo, hi in ([(pos, end)] if holes else self._hot_regions(pos, end)):
            lo = max(lo, skip_to)
            while lo < hi:
                step = min(hi, lo + self.w)  # a rise usually crosses early: look a window at a time
                env = self._envelope(lo, step)
                above = np.flatnonzero(env > self.t_hi)
                if above.size == 0:
                    lo = step
                    continue
                cand = lo + int(above[0])
                cold = None if holes else self._cold_block_after(cand, min(cand + self.hold, end))
                if cold is not None:  # the envelope surely dips below the low threshold there
                    self.rejected += 1
                    lo = skip_to = cold
                    continue
                confirm = self._envelope(cand, cand + self.hold)
                if confirm.size < self.hold:
                    return self._result(OnsetStatus.NONE, reason=f"rise at {self._time(cand):.6g} s but the "
                                        f"record ends before the {self.cfg.hold_s:g} s hold time"), end
                dips = np.flatnonzero(~(confirm > self.t_lo))  # NaN (a hole) is not "above"
                if dips.size == 0:
                    return self._onset(cand), end
                self.rejected += 1
                lo = skip_to = cand + int(dips[0]) + 1  # resume after the dip
        return None, max(end, skip_to)

    def _hot_regions(self, pos: int, end: int) -> list[tuple[int, int]]:
        """Output ranges in [pos, end) where the envelope may exceed the threshold."""
        lead = max(0, pos - self.w + 1)
        a = np.abs(self.x[lead:end] - self.base)
        m = self.block
        sums = np.concatenate((a, np.zeros(-a.size % m))).reshape(-1, m).sum(axis=1)
        c = np.concatenate(([0.0], np.cumsum(sums)))
        span = -(-self.w // m) + 1  # blocks a window ending in block j can touch
        j = np.arange(1, c.size)
        bound = (c[j] - c[np.maximum(j - span, 0)]) / self.w
        self._bound, self._bound_lead = bound, lead
        hot = np.flatnonzero(bound > self.t_hi)
        if hot.size == 0:
            return []
        cuts = np.flatnonzero(np.diff(hot) > 1)
        starts, stops = hot[np.r_[0, cuts + 1]], hot[np.r_[cuts, hot.size - 1]] + 1
        return [(max(pos, lead + int(a) * m), min(end, lead + int(b) * m))
                for a, b in zip(starts, stops, strict=True)]

    def _cold_block_after(self, lo: int, hi: int) -> int | None:
        """End of the first block inside [lo, hi) whose envelope bound is within the low threshold."""
        m, lead = self.block, self._bound_lead
        first, stop = -(-(lo - lead) // m), (hi - lead) // m
        cold = np.flatnonzero(self._bound[first:stop] <= self.t_lo)
        return None if cold.size == 0 else lead + (first + int(cold[0]) + 1) * m

    def _envelope(self, lo: int, hi: int) -> np.ndarray:
        """Trailing mean of |x - baseline| over w samples, for output indices lo..hi-1 (NaN-aware)."""
        hi = min(hi, self.x.size)
        first = max(0, lo - self.w + 1)
        a = np.abs(self.x[first:hi] - self.base)
        c = np.cumsum(a)
        if c.size and np.isnan(c[-1]):  # a hole: average the samples that are there
            holes = np.isnan(a)
            a[holes] = 0.0
            counts = _window_sums(np.cumsum(~holes, dtype=np.float64), self.w, lo - first)
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(counts > 0, _window_sums(np.cumsum(a), self.w, lo - first) / counts, np.nan)
        return _window_sums(c, self.w, lo - first) / self.w

    def _onset(self, cand: int) -> Onset:
        """Refine a confirmed crossing at `cand` to the start of the envelope's rise."""
        back = max(0, cand - 4 * self.w)
        env = self._envelope(back, cand + 1)
        e_prev = env[-2] if env.size > 1 else self.floor
        t_hi = cand - 1 + _frac(e_prev, env[-1], self.t_hi)
        # Levels just above the envelope's noise: the rise's first samples, before a voice's
        # pitch pulses make the envelope lumpy.
        step = max(3.0 * self.spread, (self.t_hi - self.floor) / 32.0)
        # The rise starts from the envelope's level just before it, which hum can lift above the
        # quiet window's mean: the lowest point of the last two windows, if higher.
        base = max(self.floor, float(np.nanmin(env[-2 * self.w:])))
        t1, t2, t4 = (self._last_below(env, back, base + f * step) for f in (1.0, 2.0, 4.0))
        if t1 is None or t2 is None or t4 is None or not t1 <= t2 <= t4 <= t_hi:
            index = t_hi  # already above the lowest level for 4 windows: keep the crossing
        else:
            convexity = t1 + t4 - 2.0 * t2
            t0 = (t1 * t4 - t2 * t2) / convexity if convexity > 1e-9 else math.nan
            if not t1 - (t4 - t1) <= t0 <= t1:  # noise in the crossings: take the attack as linear
                t0 = 2.0 * t1 - t4
            index = t0 + 0.5
        index = max(min(index, t_hi), float(self.start))  # never before the search began
        gap_from = max(0, math.floor(index) - self.w - 1)
        if np.isnan(self.x[gap_from:cand + 1]).any():
            return self._result(OnsetStatus.INVALID, index=index,
                                reason="onset next to a hole (NaN samples): the true onset may lie inside it")
        return self._result(OnsetStatus.FOUND, index=index)

    @staticmethod
    def _last_below(env: np.ndarray, back: int, level: float) -> float | None:
        """Sub-sample index (in record samples) where `env` last rose through `level`."""
        below = np.flatnonzero(~(env[:-1] > level))
        if below.size == 0:
            return None
        j = int(below[-1])
        return back + j + _frac(env[j], env[j + 1], level)

    def _time(self, index: float) -> float:
        return self.t0 + index / self.fs

    def _result(self, status: OnsetStatus, index: float | None = None, reason: str = "") -> Onset:
        if self.clipped and status is OnsetStatus.FOUND:
            reason = f"{self.clipped} clipped samples after the onset (time unaffected)"
        return Onset(status=status, time_s=None if index is None else self._time(index), index=index,
                     threshold=self.t_hi, noise_rms=self.rms, baseline=self.base, clipped=self.clipped,
                     holes=self.holes, rejected=self.rejected, reason=reason)


def _window_sums(c: np.ndarray, w: int, lead: int) -> np.ndarray:
    """Sums of the (up to) w values ending at each output, from the running sum c of values that
    start `lead` samples before the first output."""
    sums = c[lead:].copy()
    drop = w - lead  # first output whose window no longer reaches the first value
    if drop < sums.size:
        sums[drop:] -= c[:sums.size - drop]
    return sums


def _frac(before: float, after: float, level: float) -> float:
    """Fraction of a sample step at which a line from `before` to `after` crosses `level`."""
    if not (math.isfinite(before) and math.isfinite(after)) or after == before:
        return 1.0
    return min(max((level - before) / (after - before), 0.0), 1.0)
