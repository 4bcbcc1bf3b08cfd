"""The acceptance measurements' takt pieces: the voice trials taken one at a time until
phonebench.bench.stats.sequential decides, instead of a fixed count (one trial is the lab check's
own, phonebench.bench.checks.voice; only the loop around it is here), the answer's end waited on
the supply, and the line's sweep sizing for the sequential power check
(phonebench.bench.checks.power.sequential_power_check).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ...checks.power import SweepSizing, battery_emulation
from ...checks.voice import VoiceSetup, VoiceTrials, WaveformKeeper, configure, take_trial
from ...stats.sequential import SequentialPlan, SequentialResult, tolerance_rule
from phonebench.drivers.device import Device
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.scope import Oscilloscope
from phonebench.drivers.stimulus import AudioStimulus

log = logging.getLogger(__name__)

QUIET_POLL_S = 0.05  # the supply read every this often while the phone answers
QUIET_READS = 2  # consecutive reads at idle: the answer is over
QUIET_ABOVE_IDLE_W = 0.5  # speaking draws watts over idle; quiet is within this of the idle draw


def acceptance_voice_setup(post_s: float) -> VoiceSetup:
    """The lab's voice set-up with a record just long enough for a good unit's whole dialog: the
    acceptance check decides on the latency only, and a longer record is time the line waits. An
    answer outlasting it is still seen (open-ended) and waited out before the next trial."""
    return replace(VoiceSetup(), post_s=post_s)


@dataclass
class SequentialVoice:
    trials: VoiceTrials
    decision: SequentialResult


def answer_end_by_power(supply: PowerAnalyzer, device: Device, *, max_s: float) -> Callable[[], None]:
    """A wait until the phone's draw on the supply is back at its idle level (read now, the phone
    quiet): the spoken answer is over. The line's voice trials then record only the answer's onset
    and wait out the rest on the supply, not on a record as long as the longest good dialog. The
    pacing rests on the instrument; a phone that stays awake after answering is waited for max_s."""
    battery_emulation(supply)  # the analyzer feeds the phone, so its draw is what the meter reads
    idle_w = _draw_w(supply)

    def wait() -> None:
        waited, quiet = 0.0, 0
        while waited < max_s and quiet < QUIET_READS:
            device.run(["sleep", f"{QUIET_POLL_S:g}"])
            waited += QUIET_POLL_S
            quiet = quiet + 1 if _draw_w(supply) < idle_w + QUIET_ABOVE_IDLE_W else 0
        if quiet < QUIET_READS:
            log.info("%s: still drawing over idle %.2f W after %.1f s: next trial anyway", device.name, idle_w, max_s)
    return wait


def _draw_w(supply: PowerAnalyzer) -> float:
    return supply.measure_voltage() * supply.measure_current()


def sequential_voice_trials(scope: Oscilloscope, stimulus: AudioStimulus, device: Device, limit_ms: float,
                            plan: SequentialPlan, *, p: float = 0.99, fixture_delay_s: float = 0.0,
                            fixture_calibrated: bool = False, setup: VoiceSetup = VoiceSetup(),
                            answer_end: Callable[[], None] | None = None) -> SequentialVoice:
    """Voice trials until `tolerance_rule` decides (at most plan.n_max). Invalid trials (no
    stimulus seen) do not count towards a look; no answer within the record counts as past the
    limit. The first trial's and the slowest answered trial's waveforms are kept. `answer_end`
    waits out an answer that outlasts the record (default: the setup's settle time)."""
    configure(scope, stimulus, setup)
    trials = VoiceTrials(fixture_delay_s, fixture_calibrated, setup.sample_rate_hz)
    decision = SequentialResult("continue", 0, None, "no trials")
    keeper = WaveformKeeper(invalid=0)
    for index in range(2 * plan.n_max):  # invalid trials are retried, within bounds
        status = take_trial(scope, stimulus, device, trials, index, setup, keeper, answer_end)
        valid = 1e3 * trials.latency_s[~np.isnan(trials.latency_s)]
        decision = tolerance_rule(valid, limit_ms, plan, p=p)
        log.debug("voice trial %d: %s -> %s", index, status, decision.decision)
        if decision.decision != "continue" or valid.size >= plan.n_max:
            break
    return SequentialVoice(trials, decision)


# The line's sweeps (takt): a 4-token warm-up sizes them (the phone has just answered voice trials:
# it is warm), and they end 20 % + 0.3 s after the expected run instead of 50 % + 1 s. The runs,
# their count and the sequential rule are the lab's: the decision's error rates do not change.
LINE_SWEEPS = SweepSizing(warmup_tokens=4, factor=1.2, slack_s=0.3, rest_s=0.6)
