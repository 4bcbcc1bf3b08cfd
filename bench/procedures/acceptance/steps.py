"""Sequential variants of the acceptance measurements (production takt): they take trials or
runs one at a time and stop when phonebench.bench.stats.sequential decides, instead of a fixed count. The
measurement of one trial or run is the lab check's own (phonebench.bench.checks.voice, phonebench.bench.checks.power);
only the loop around it is here.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from ...checks.power import PowerRuns, measure_sustained_power
from ...checks.voice import VoiceSetup, VoiceTrials, WaveformKeeper, configure, take_trial
from ...stats.sequential import SequentialPlan, SequentialResult, mean_rule, tolerance_rule
from phonebench.drivers.device import Device
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.scope import Oscilloscope
from phonebench.drivers.stimulus import AudioStimulus

log = logging.getLogger(__name__)


def acceptance_voice_setup(post_s: float) -> VoiceSetup:
    """The lab's voice set-up with a record just long enough for a good unit's whole dialog: the
    acceptance check decides on the latency only, and a longer record is time the line waits. An
    answer outlasting it is still seen (open-ended) and waited out before the next trial."""
    return replace(VoiceSetup(), post_s=post_s)


@dataclass
class SequentialVoice:
    trials: VoiceTrials
    decision: SequentialResult


def sequential_voice_trials(scope: Oscilloscope, stimulus: AudioStimulus, device: Device, limit_ms: float,
                            plan: SequentialPlan, *, p: float = 0.99, fixture_delay_s: float = 0.0,
                            fixture_calibrated: bool = False, setup: VoiceSetup = VoiceSetup()) -> SequentialVoice:
    """Voice trials until `tolerance_rule` decides (at most plan.n_max). Invalid trials (no
    stimulus seen) do not count towards a look; no answer within the record counts as past the
    limit. The first trial's and the slowest answered trial's waveforms are kept."""
    configure(scope, stimulus, setup)
    trials = VoiceTrials(fixture_delay_s, fixture_calibrated, setup.sample_rate_hz)
    decision = SequentialResult("continue", 0, None, "no trials")
    keeper = WaveformKeeper(invalid=0)
    for index in range(2 * plan.n_max):  # invalid trials are retried, within bounds
        status = take_trial(scope, stimulus, device, trials, index, setup, keeper)
        valid = 1e3 * trials.latency_s[~np.isnan(trials.latency_s)]
        decision = tolerance_rule(valid, limit_ms, plan, p=p)
        log.debug("voice trial %d: %s -> %s", index, status, decision.decision)
        if decision.decision != "continue" or valid.size >= plan.n_max:
            break
    return SequentialVoice(trials, decision)


@dataclass
class SequentialPower:
    runs: PowerRuns
    decision: SequentialResult


def sequential_power(supply: PowerAnalyzer, device: Device, limit_w: float, plan: SequentialPlan, *,
                     tokens: int) -> SequentialPower:
    """Generate runs digitized whole until `mean_rule` decides (at most plan.n_max runs). The
    first look's runs share one warm-up; a rare undecided unit pays one warm-up per later look."""
    runs = measure_sustained_power(supply, device, plan.looks[0], tokens=tokens)
    decision = mean_rule(runs.means_w, limit_w, plan)
    for look in plan.looks[1:]:
        if decision.decision != "continue":
            break
        more = measure_sustained_power(supply, device, look - len(runs.runs), tokens=tokens)
        runs.runs += more.runs
        runs.durations_s += more.durations_s
        runs.idle_w += more.idle_w
        runs.truncated += more.truncated
        decision = mean_rule(runs.means_w, limit_w, plan)
    return SequentialPower(runs, decision)
