"""The short sanity check of claims 1, 2 and 6 (a quick pass over a phone, not a demonstration).

A few voice dialogs, each answered within the latency and the dialog-time limits — the maximum of
a census of a handful of trials, no claim about a percentile (at most MAX_INVALID trials left
out, else INVALID for too few) — and one generate whose mean power is within the sustained-power
limit. The verdicts carry the entries' metric and claim, so the claims grid shows them beside the
demonstrations; their statistic is `max` or one value, never the entry's percentile.
"""
from __future__ import annotations

import numpy as np

from . import CheckResult
from .power import PowerRuns, battery_emulation, measure_sustained_power
from .voice import UNIT_SCALE, VoiceSetup, VoiceTrials, run_voice_trials
from ..specs.sla import SlaEntry
from ..stats import verdicts as stats
from phonebench.core.verdict import PlotHint, Verdict
from phonebench.drivers.device import Device
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.scope import Oscilloscope
from phonebench.drivers.stimulus import AudioStimulus

# The metric ids that usually hold the entries this check judges (a suite's `profile.pick(**ENTRIES)`).
ENTRIES = {"latency": "voice_latency_p99", "dialog": "dialog_time_p99", "sustained_power": "sustained_power_mean"}
TRIALS = 20
TOKENS = 64
MAX_INVALID = 2


def voice_and_power_sanity_check(scope: Oscilloscope, stimulus: AudioStimulus, supply: PowerAnalyzer, device: Device,
                                 *, latency: SlaEntry, dialog: SlaEntry, sustained_power: SlaEntry,
                                 trials: int = TRIALS, tokens: int = TOKENS, max_invalid: int = MAX_INVALID,
                                 fixture_delay_s: float = 0.0, fixture_calibrated: bool | None = None,
                                 setup: VoiceSetup = VoiceSetup()) -> CheckResult:
    """`trials` voice dialogs against the latency and dialog entries' limits, then one generate of
    `tokens` against the sustained-power limit; the phone runs on the analyzer (battery emulation)."""
    battery_emulation(supply)
    voice = run_voice_trials(scope, stimulus, device, trials, fixture_delay_s=fixture_delay_s,
                             fixture_calibrated=fixture_calibrated, setup=setup)
    verdicts = [_census_max(name, samples, entry, voice, max_invalid)
                for name, samples, entry in (("voice_latency_sanity_max", voice.latency_s, latency),
                                             ("dialog_time_sanity_max", voice.dialog_s, dialog))]
    runs = measure_sustained_power(supply, device, 1, tokens=tokens)
    power = _one_run(runs, sustained_power)
    raw = {"voice-trials": voice.raw(), "power-run": runs.raw(),
           **{v.name: {"samples": _valid(samples, v.unit)}
              for v, samples in zip(verdicts, (voice.latency_s, voice.dialog_s))}}
    verdicts = [v.but(raw=(v.name, "voice-trials")) for v in verdicts]
    return CheckResult([*verdicts, power.but(raw=("power-run",))], raw, measurement=voice)


def _valid(samples_s: np.ndarray, unit: str) -> np.ndarray:
    return samples_s[~np.isnan(samples_s)] * UNIT_SCALE[unit]


def _census_max(name: str, samples_s: np.ndarray, entry: SlaEntry, trials: VoiceTrials, max_invalid: int) -> Verdict:
    verdict = stats.extreme_verdict(name, _valid(samples_s, entry.unit), limit=entry.limit, unit=entry.unit,
                                    comparator=entry.comparator, min_samples=len(trials) - max_invalid)
    # A census maximum, not the entry's statistic, so no evaluate to carry these.
    return verdict.but(
        detail=f"{verdict.detail}; every one of {len(trials)} trials ({trials.invalid} invalid) within "
               f"{entry.metric}'s limit",
        metric=entry.metric, claim=entry.claim, plot=PlotHint("samples"),
        extra={"fixture_calibration": "applied" if trials.fixture_calibrated else "none applied"})


def _one_run(runs: PowerRuns, entry: SlaEntry) -> Verdict:
    verdict = stats.value_verdict("power_sanity_mean", float(runs.means_w[0]) if runs.runs else None,
                                  limit=entry.limit, unit=entry.unit, comparator=entry.comparator, statistic="mean")
    # The statistic here is not the entry's (one value against its limit), so no evaluate to carry these.
    return verdict.but(detail=(f"one generate of {runs.durations_s[0]:.1f} s at {runs.sample_rate_hz:.0f} S/s"
                               if runs.runs else "no run"),
                       metric=entry.metric, claim=entry.claim, plot=PlotHint("trace", y_label="W"))
