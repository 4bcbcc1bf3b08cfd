"""The onset detector against the emulated world's ground truth, for every voice persona: onsets
without bias, the end of the answer's speech within a few ms (tests/voice_truth.py measures
each trial with the real drivers and compares it with when the world played the sounds)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from voice_truth import VOICE_PERSONAS, onset_errors

from phonebench.bench.checks.voice import VoiceSetup
from phonebench.bench.stats.uncertainty import ANSWER_END_BIAS_S, ANSWER_END_SPREAD_S, ANSWER_ONSET_SPREAD_S

TRIALS = 60


@pytest.fixture(scope="module")
def errors():
    return {persona: onset_errors(persona, TRIALS) for persona in VOICE_PERSONAS}


def test_every_voice_persona_is_measured(errors):
    assert set(errors) == {"nominal", "slow", "jittery"}
    assert all(len(e.answer) == TRIALS and e.skipped == 0 for e in errors.values())


def test_onsets_are_unbiased(errors):
    stimulus, answer, _ = (np.concatenate(parts) for parts in zip(*(e.arrays() for e in errors.values())))
    latency = answer - stimulus
    assert abs(stimulus.mean()) <= 0.1e-3 and abs(answer.mean()) <= 0.1e-3
    assert abs(latency.mean()) <= 0.1e-3
    # The spread left is what the voice budget carries as the detector's residual (type B).
    assert answer.std() <= ANSWER_ONSET_SPREAD_S * 1.2 and np.abs(latency).max() < 4e-3


@pytest.mark.parametrize("persona", VOICE_PERSONAS)
def test_end_of_speech_within_a_few_ms(errors, persona):
    end = errors[persona].arrays()[2]
    assert abs(end.mean()) <= 5e-3 and np.abs(end).max() <= 20e-3
    assert abs(end.mean()) <= ANSWER_END_BIAS_S and end.std() <= ANSWER_END_SPREAD_S * 1.3


@pytest.mark.parametrize("ablation", ["k x RMS threshold", "no hangover"])
def test_negative_controls_read_the_end_of_speech_tens_of_ms_early(ablation):
    """Ending where the envelope drops under k x noise RMS (the onset's threshold) misses a word's
    quiet tail; without the hangover a last word cut off a few ms in is rejected as a click."""
    setup = VoiceSetup()
    if ablation == "no hangover":
        setup = replace(setup, hangover_s=0.0)
    else:
        setup = replace(setup, end_detector=replace(setup.end_detector, k_envelope=None))
    end = onset_errors("nominal", TRIALS, setup=setup).arrays()[2]
    assert end.min() < -20e-3
