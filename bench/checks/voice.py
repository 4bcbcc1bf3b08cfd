"""Claims 1 and 2: end-to-end voice latency and full dialog time, from two scope channels.

One trial: arm the scope (single, edge trigger on channel 1), fire the stimulus, read both
channels, find the stimulus onset on channel 1 and the phone's answer on channel 2 with the
envelope onset detector (threshold from each channel's measured noise floor, hysteresis, hold
time), and the end of the answer as the onset of the time-reversed record. The fixture's
acoustic delay (speaker -> phone, phone -> measurement mic) comes from the calibration record
and is subtracted; without one it is 0 and every verdict says so.

Per trial: latency = answer onset - stimulus onset - fixture delay; dialog = end of the answer's
speech - stimulus onset - fixture delay. A trial without an answer counts as an infinitely late
one (beyond any limit); an answer still playing when the record ends gives an infinite dialog
time (the record is longer than the dialog limit, so it is beyond it); a trial whose record
cannot support an onset (clipped quiet window, holes, no stimulus) is invalid and left out,
counted in the verdict.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from . import CheckResult
from phonebench.core.paths import data_dir
from ..stats.onset import Onset, OnsetDetector, OnsetStatus
from ..specs.sla import SlaEntry
from phonebench.core.verdict import Evidence, PlotHint, Verdict
from ..stats.uncertainty import calibration_of, voice_budget
from phonebench.drivers.device import Device
from phonebench.drivers.scope import Oscilloscope, Waveform
from phonebench.drivers.stimulus import AudioStimulus, read_wav

log = logging.getLogger(__name__)

DEFAULT_CLIP = data_dir("suites") / "data" / "utterance.wav"
METRICS = {"latency_p99": "voice_latency_p99", "latency_std": "voice_latency_std", "dialog_p99": "dialog_time_p99"}
UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6}


@dataclass(frozen=True)
class VoiceSetup:
    """How a trial is recorded. The record must outlast the dialog limit (3.8 s) with margin."""

    pre_s: float = 0.1  # before the trigger: the noise floor of both channels
    post_s: float = 4.5  # after the trigger: the whole answer
    sample_rate_hz: float = 10_000.0  # speech energy lies below 5 kHz; envelopes of 5 ms need no more
    ch1_v_div: float = 0.2  # stimulus, 0.5 V peak
    ch2_v_div: float = 0.1  # measurement microphone
    trigger_v: float = 0.05
    amplitude_vpp: float = 1.0
    min_latency_s: float = 0.05  # search the answer this long after the stimulus onset
    settle_s: float = 5.0  # extra wait after a trial whose answer outlasted the record
    trigger_timeout_s: float = 30.0
    detector: OnsetDetector = OnsetDetector(k=6.0, quiet_s=0.05, envelope_s=0.005, hold_s=0.01)
    # The end of speech, searched back from the record's quiet end: a word's decaying tail lies
    # below k x noise RMS, so the threshold comes from the envelope's own (much smaller) noise.
    end_detector: OnsetDetector = OnsetDetector(k=6.0, quiet_s=0.05, envelope_s=0.005, hold_s=0.01,
                                                k_envelope=8.0)
    hangover_s: float = 0.25  # a burst this close after the answer's speech is still the answer (pauses < 0.15 s)

    @property
    def points(self) -> int:
        return int(round((self.pre_s + self.post_s) * self.sample_rate_hz))


@dataclass
class VoiceTrials:
    """Onset times per trial, relative to each trial's trigger (s): the raw series behind the verdicts."""

    fixture_delay_s: float
    fixture_calibrated: bool
    sample_rate_hz: float
    stimulus_onset_s: list[float] = field(default_factory=list)  # NaN: invalid trial
    answer_onset_s: list[float] = field(default_factory=list)  # inf: no answer; NaN: invalid
    answer_end_s: list[float] = field(default_factory=list)  # inf: still speaking at the record's end
    status: list[str] = field(default_factory=list)  # "ok", "no-answer", "open-ended", "invalid: ..."
    waveforms: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    calibration: dict | None = None  # the scope's corrections and their uncertainties (uncertainty budget)

    def __len__(self) -> int:
        return len(self.status)

    @property
    def latency_s(self) -> np.ndarray:
        return np.asarray(self.answer_onset_s) - np.asarray(self.stimulus_onset_s) - self.fixture_delay_s

    @property
    def dialog_s(self) -> np.ndarray:
        return np.asarray(self.answer_end_s) - np.asarray(self.stimulus_onset_s) - self.fixture_delay_s

    @property
    def invalid(self) -> int:
        return sum(s.startswith("invalid") for s in self.status)

    def raw(self) -> dict[str, np.ndarray]:
        """Every trial's onsets: enough to recompute every verdict (waveforms: see raw_waveforms)."""
        return {"stimulus_onset_s": np.asarray(self.stimulus_onset_s),
                "answer_onset_s": np.asarray(self.answer_onset_s), "answer_end_s": np.asarray(self.answer_end_s),
                "status": np.asarray(self.status), "fixture_delay_s": np.asarray(self.fixture_delay_s)}

    def raw_waveforms(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for index, (t, ch1, ch2) in sorted(self.waveforms.items()):
            out[f"trial{index}_t"], out[f"trial{index}_ch1"], out[f"trial{index}_ch2"] = t, ch1, ch2
        return out


def arm_stimulus(stimulus: AudioStimulus, setup: VoiceSetup = VoiceSetup(),
                 clip: tuple[np.ndarray, float] | None = None) -> None:
    """Load the utterance (default: suites/data/utterance.wav) and wait for fire()."""
    samples, rate = clip if clip is not None else read_wav(DEFAULT_CLIP)
    stimulus.load_clip(samples, rate, amplitude_vpp=setup.amplitude_vpp)
    stimulus.arm()


def configure(scope: Oscilloscope, stimulus: AudioStimulus, setup: VoiceSetup,
              clip: tuple[np.ndarray, float] | None = None) -> None:
    """Load and arm the stimulus; both channels, the window and the edge trigger on channel 1."""
    arm_stimulus(stimulus, setup, clip)
    scope.configure_channel(scope.channel(1), setup.ch1_v_div)
    scope.configure_channel(scope.channel(2), setup.ch2_v_div)
    span = setup.pre_s + setup.post_s
    scope.set_timebase(span / 10, (setup.post_s - setup.pre_s) / 2)
    scope.set_edge_trigger(scope.channel(1), setup.trigger_v)


def run_voice_trials(scope: Oscilloscope, stimulus: AudioStimulus, device: Device, trials: int, *,
                     fixture_delay_s: float = 0.0, fixture_calibrated: bool | None = None,
                     setup: VoiceSetup = VoiceSetup(), clip: tuple[np.ndarray, float] | None = None,
                     keep_invalid: int = 2) -> VoiceTrials:
    """`trials` independent stimulus -> answer trials. Keeps the waveforms of the first trial, the
    slowest answered one and up to `keep_invalid` invalid ones (evidence, not the whole run)."""
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    configure(scope, stimulus, setup, clip)
    calibrated = fixture_calibrated if fixture_calibrated is not None else fixture_delay_s != 0.0
    result = VoiceTrials(fixture_delay_s, calibrated, setup.sample_rate_hz, calibration=calibration_of(scope))
    keeper = WaveformKeeper(invalid=keep_invalid)
    for index in range(trials):
        take_trial(scope, stimulus, device, result, index, setup, keeper)
    return result


@dataclass
class WaveformKeeper:
    """Which trials' waveforms are kept as evidence: the first, the slowest answered one, and up
    to `invalid` invalid ones (not the whole run: a trial's two channels are megabytes)."""

    invalid: int = 2
    slowest: int | None = None
    slowest_latency: float = -math.inf

    def keep(self, trials: VoiceTrials, index: int, latency_s: float, status: str) -> bool:
        invalid_kept = sum(trials.status[k].startswith("invalid") for k in trials.waveforms)
        keep = index == 0 or (status.startswith("invalid") and invalid_kept < self.invalid)
        if not keep and math.isfinite(latency_s) and latency_s > self.slowest_latency:
            if self.slowest is not None:
                trials.waveforms.pop(self.slowest, None)
            self.slowest, keep = index, True
        if math.isfinite(latency_s):
            self.slowest_latency = max(self.slowest_latency, latency_s)
        return keep


def take_trial(scope: Oscilloscope, stimulus: AudioStimulus, device: Device, trials: VoiceTrials, index: int,
               setup: VoiceSetup, keeper: WaveformKeeper, answer_end: Callable[[], None] | None = None) -> str:
    """One stimulus -> answer trial appended to `trials` (the scope and stimulus configured and
    armed); returns its status. An answer still running at the end of the record is waited out:
    by `answer_end` after every trial when given (the line's trials record only the answer's onset,
    so a pause between words can look like its end), else settle_s after an open-ended one."""
    scope.single()
    stimulus.fire()
    scope.wait_triggered(timeout_s=setup.trigger_timeout_s)
    ch1, ch2 = scope.read_waveform(scope.channel(1), setup.points), scope.read_waveform(scope.channel(2), setup.points)
    stim, answer, end, status = analyse_trial(ch1, ch2, setup)
    trials.stimulus_onset_s.append(stim)
    trials.answer_onset_s.append(answer)
    trials.answer_end_s.append(end)
    trials.status.append(status)
    latency = answer - stim
    if keeper.keep(trials, index, latency, status):
        trials.waveforms[index] = (ch1.t.astype(np.float32), ch1.volts, ch2.volts)
    if answer_end is not None:  # a record of the onset only cannot tell whether the answer is over
        answer_end()
    elif status == "open-ended":  # the phone is still talking: let it finish before the next trial
        device.run(["sleep", f"{setup.settle_s:g}"])
    log.debug("voice trial %d: %s, latency %.1f ms", index, status, 1e3 * latency)
    return status


def analyse_trial(ch1: Waveform, ch2: Waveform, setup: VoiceSetup = VoiceSetup()) -> tuple[float, float, float, str]:
    """(stimulus onset, answer onset, answer end, status) of one two-channel record, seconds re trigger."""
    nan = math.nan
    if ch1.holes or ch2.holes:
        return nan, nan, nan, f"invalid: {ch1.holes + ch2.holes} holes in the record"
    fs = 1.0 / ch1.sample_interval_s
    t0 = float(ch1.t[0])
    stim = _detector(setup, ch1).detect(ch1.volts, fs, t0=t0)
    if not stim.found or stim.time_s is None:
        return nan, nan, nan, f"invalid: stimulus {stim.status.value}: {stim.reason}"
    detector = _detector(setup, ch2)
    answer = detector.detect(ch2.volts, fs, t0=t0, not_before_s=stim.time_s + setup.min_latency_s)
    if answer.status is OnsetStatus.INVALID:
        return nan, nan, nan, f"invalid: answer: {answer.reason}"
    if not answer.found or answer.time_s is None:
        return float(stim.time_s), math.inf, math.inf, "no-answer"
    end = _end_of_sound(_detector(setup, ch2, end=True), ch2, fs, setup.hangover_s)
    if end is None or end.time_s is None:
        return float(stim.time_s), float(answer.time_s), math.inf, "open-ended"
    answer_end = float(ch2.t[-1]) - float(end.time_s)  # reversed axis: seconds back from the last sample
    return float(stim.time_s), float(answer.time_s), max(answer_end, float(answer.time_s)), "ok"


def _detector(setup: VoiceSetup, wave: Waveform, end: bool = False) -> OnsetDetector:
    # A few ADC codes: an 8-bit channel whose noise hides inside one code still needs a floor
    # (for the end detector: the least rise above the envelope's floor, one code).
    if end:
        return replace(setup.end_detector, min_threshold=max(setup.end_detector.min_threshold,
                                                             wave.preamble.yincrement))
    floor = 4 * wave.preamble.yincrement
    return replace(setup.detector, min_threshold=max(setup.detector.min_threshold, floor))


def _end_of_sound(detector: OnsetDetector, wave: Waveform, fs: float, hangover_s: float) -> Onset | None:
    """The last sound of the answer: the first onset of the time-reversed record (None: the record
    ends in sound, so its quiet window is not quiet).

    Searching backwards, the first rise that lasts the hold time is surely speech; a shorter
    burst after it (a word cut off a few ms in) still belongs to the answer when it comes within
    `hangover_s` of that speech, so the search takes the earliest rise within the hangover.
    """
    reversed_volts = wave.volts[::-1]
    speech = detector.detect(reversed_volts, fs, t0=0.0)
    if not speech.found or not speech.rejected:
        return speech if speech.found else None
    burst = replace(detector, hold_s=0.0).detect(reversed_volts, fs, t0=0.0)
    if burst.found and burst.time_s is not None and speech.time_s is not None \
            and speech.time_s - burst.time_s <= hangover_s:
        return burst
    return speech


def _voice_verdicts(trials: VoiceTrials, *, latency_p99: SlaEntry, latency_std: SlaEntry,
                    dialog_p99: SlaEntry, raw: Sequence[str] = (), note: str = "",
                    extra: Mapping[str, Any] | None = None) -> list[Verdict]:
    """p99 and std of the latency (claim 1) and p99 of the dialog time (claim 2), by their entries
    (METRICS: the metric ids that usually hold them); each points at its own samples (named as the
    verdict), then the raw data named `raw`; `note` ends each detail and `extra` joins each
    verdict's facts."""
    return [_verdict(entry, samples_s, trials, raw, note, extra or {})
            for entry, samples_s in ((latency_p99, trials.latency_s), (latency_std, trials.latency_s),
                                     (dialog_p99, trials.dialog_s))]


def _verdict(entry: SlaEntry, samples_s: np.ndarray, trials: VoiceTrials, raw: Sequence[str], note: str,
             extra: Mapping[str, Any]) -> Verdict:
    scale = UNIT_SCALE.get(entry.unit)
    if scale is None:
        raise ValueError(f"{entry.metric}: unit {entry.unit!r} is not a time unit ({', '.join(UNIT_SCALE)})")
    valid = samples_s[~np.isnan(samples_s)]  # invalid trials are left out (and counted)
    if entry.statistic == "std":
        valid = valid[np.isfinite(valid)]  # unanswered trials fail the percentile, not the spread
    finite = valid[np.isfinite(valid)]
    budget = voice_budget(finite * scale, _statistic(entry), scale, sample_interval_s=1.0 / trials.sample_rate_hz,
                          dialog=entry.metric.startswith("dialog"),
                          fixture_delay_s=trials.fixture_delay_s if trials.fixture_calibrated else None,
                          calibration=trials.calibration,
                          typical_s=float(np.median(finite)) if finite.size else 0.0)
    unanswered = sum(s == "no-answer" for s in trials.status)
    notes = [f"{len(trials)} trials", f"{trials.invalid} invalid (left out)", f"{unanswered} unanswered"]
    if trials.fixture_calibrated:
        notes.append(f"fixture delay {1e6 * trials.fixture_delay_s:.1f} us subtracted (calibration)")
    else:
        notes.append("no fixture calibration applied: acoustic delay not subtracted")
    return entry.evaluate(
        valid * scale, evidence=Evidence.MEASURED, uncertainty=budget, raw=(entry.metric, *raw) if raw else (),
        detail_suffix="; ".join(part for part in (", ".join(notes), note) if part),
        plot=PlotHint("samples", x_label=f"{entry.metric} ({entry.unit})"),
        extra={"trials": len(trials), "invalid_trials": trials.invalid, "unanswered": unanswered,
               "fixture_delay_s": trials.fixture_delay_s,
               "fixture_calibration": "applied" if trials.fixture_calibrated else "none applied",
               "sample_rate_hz": trials.sample_rate_hz, **extra})


def _statistic(entry: SlaEntry) -> str:
    return f"p{100 * entry.p:.10g}" if entry.statistic == "percentile" and entry.p is not None else entry.statistic


def trials_needed(*entries: SlaEntry) -> int:
    """Trials the voice entries need (the largest of their required sample counts)."""
    return max(entry.n_required for entry in entries)


def voice_check(scope: Oscilloscope, stimulus: AudioStimulus, device: Device, *, latency_p99: SlaEntry,
                latency_std: SlaEntry, dialog_p99: SlaEntry, trials: int | None = None, fixture_delay_s: float = 0.0,
                fixture_calibrated: bool | None = None, setup: VoiceSetup = VoiceSetup(),
                clip: tuple[np.ndarray, float] | None = None) -> CheckResult:
    """Claims 1 and 2 by their entries (METRICS: the metric ids that usually hold them); `trials`
    defaults to what the entries need. Each verdict points at its own samples (what its plot
    shows), the trials and the waveforms; `measurement` is the VoiceTrials."""
    count = trials if trials is not None else trials_needed(latency_p99, latency_std, dialog_p99)
    result = run_voice_trials(scope, stimulus, device, count, fixture_delay_s=fixture_delay_s,
                              fixture_calibrated=fixture_calibrated, setup=setup, clip=clip)
    verdicts = _voice_verdicts(result, latency_p99=latency_p99, latency_std=latency_std, dialog_p99=dialog_p99,
                              raw=("voice-trials", "voice-waveforms"))
    raw = {"voice-trials": result.raw(), "voice-waveforms": result.raw_waveforms(),
           **{v.name: {"samples": verdict_samples(result, v)} for v in verdicts}}
    return CheckResult(verdicts, raw, measurement=result)


def verdict_samples(trials: VoiceTrials, verdict: Verdict) -> np.ndarray:
    """The valid samples behind a voice verdict, in its unit (what its `samples` plot shows)."""
    seconds = trials.dialog_s if verdict.name.startswith("dialog") else trials.latency_s
    return seconds[~np.isnan(seconds)] * UNIT_SCALE[verdict.unit]
