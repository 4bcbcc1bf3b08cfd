"""The emulated phone's voice assistant: hears an utterance, thinks (drawing power), answers aloud.

Answer latency (utterance onset to the first sound of the answer) is drawn from a named
behaviour: a fixed pipeline floor plus a gamma-distributed variable part, with optional rare
stalls. "nominal" meets the product's claims (p99 <= 410 ms, std <= 87 ms, dialog <= 3.8 s to
the end of the answer) with margin enough that 300 trials rarely see one answer past 410 ms;
"slow" and "jittery" are units that miss them. Times are at the phone: the bench's fixture adds
its acoustic delay (phonebench.emulation.audio.FIXTURE_PATH_M) to what the scope shows.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .audio import MIC_DISTANCE_M, SPEED_OF_SOUND_M_S, AudioEvent, AudioScene, synth_speech

log = logging.getLogger(__name__)

ANSWER_SAMPLE_RATE = 16_000.0
ANSWER_VARIANTS = 6  # distinct synthesized answers, reused (synthesis is the slow part)
HEARING_THRESHOLD_V = 0.02  # quieter stimuli do not wake the assistant
THINK_START_S = 0.04  # ASR streams; the model starts working this long after speech begins


@dataclass(frozen=True)
class VoiceBehaviour:
    name: str
    latency_floor_s: float  # VAD, endpointing, first TTS frame: the part that never varies
    latency_shape: float  # gamma shape of the variable part
    latency_scale_s: float  # gamma scale of the variable part
    answer_min_s: float  # spoken answer length, uniform in [min, max]
    answer_max_s: float
    answer_peak_v: float = 0.35  # at the measurement mic preamp (scope channel 2)
    stall_probability: float = 0.0  # rare long stalls (GC pause, model swap)
    stall_s: float = 0.0

    def draw_latency(self, rng: np.random.Generator) -> float:
        latency = self.latency_floor_s + rng.gamma(self.latency_shape, self.latency_scale_s)
        if self.stall_probability and rng.random() < self.stall_probability:
            latency += self.stall_s
        return float(latency)


VOICE_BEHAVIOURS = {
    # mean 248 ms, std 24 ms, p99.9 ~ 335 ms, P(> 410 ms) ~ 3e-5; dialog <= 3.3 s
    "nominal": VoiceBehaviour("nominal", 0.200, 4.0, 0.012, 1.6, 2.9),
    # p99 ~ 500 ms; long answers push dialogs past 3.8 s
    "slow": VoiceBehaviour("slow", 0.340, 4.0, 0.020, 2.8, 3.6),
    # mean like nominal, std ~ 120 ms and 2 % stalls of 400 ms
    "jittery": VoiceBehaviour("jittery", 0.120, 1.3, 0.100, 1.6, 2.9, stall_probability=0.02, stall_s=0.4),
}


@dataclass
class Dialog:
    utterance_onset: float
    utterance_end: float
    latency_s: float  # drawn; what the bench should measure (plus the fixture's acoustic delay)
    answer_onset: float
    answer_end: float
    # Ground truth at the measurement mic (what the bench's onset detector should find): the
    # answer's first sound, and the instant its speech ends (last above -30 dB re its peak;
    # before answer_end when the clip ends in a pause or a word's inaudible tail).
    speech_onset: float = float("nan")
    speech_end: float = float("nan")

    @property
    def duration_s(self) -> float:
        return self.answer_end - self.utterance_onset


class _AwakeTail(Protocol):
    awake_tail_s: float  # how long the NPU stays awake after an answer (0: power-gated at once)


class DialogStage(Protocol):
    """What the assistant acts on (the simulated world): its seed, the schedule of the phone's
    work phases, the audio scene it speaks into, the unit's power profile."""

    seed: int
    audio: AudioScene
    power_profile: _AwakeTail

    def schedule(self, phase: str, t0: float, t1: float) -> None: ...


class VoiceAssistant:
    def __init__(self, world: DialogStage, behaviour: str, rng: np.random.Generator) -> None:
        self.world = world
        self.rng = rng
        self.behaviour = VOICE_BEHAVIOURS["nominal"]
        self.set_behaviour(behaviour)
        self.dialogs: deque[Dialog] = deque(maxlen=10_000)
        self._answers: list[np.ndarray] = []
        self._busy_until = float("-inf")

    def set_behaviour(self, name: str) -> None:
        if name not in VOICE_BEHAVIOURS:
            raise ValueError(f"unknown voice behaviour {name!r}; known: {sorted(VOICE_BEHAVIOURS)}")
        self.behaviour = VOICE_BEHAVIOURS[name]

    def _answer_clip(self, duration_s: float) -> np.ndarray:
        if not self._answers:
            synth_rng = np.random.default_rng([self.world.seed, 0x70CE])
            longest = max(b.answer_max_s for b in VOICE_BEHAVIOURS.values())
            self._answers = [synth_speech(longest, ANSWER_SAMPLE_RATE, synth_rng, f0_hz=190.0)
                             for _ in range(ANSWER_VARIANTS)]
        clip = self._answers[int(self.rng.integers(len(self._answers)))][:int(duration_s * ANSWER_SAMPLE_RATE)].copy()
        fade = min(len(clip), int(0.02 * ANSWER_SAMPLE_RATE))
        if fade:
            clip[-fade:] *= np.linspace(1.0, 0.0, fade)
        return clip

    def hear(self, onset: float, duration_s: float, peak_v: float) -> Dialog | None:
        """An utterance reached the phone's microphone; schedule the answer. None: too quiet to hear."""
        if peak_v < HEARING_THRESHOLD_V:
            log.info("utterance at %.6f too quiet (%.3f V peak): no answer", onset, peak_v)
            return None
        b = self.behaviour
        latency = b.draw_latency(self.rng) + self.world.variation.audio_latency_s  # this unit's audio path
        # A phone still answering the previous question finishes it first.
        answer_onset = max(onset + latency, self._busy_until + b.latency_floor_s)
        answer_len = float(self.rng.uniform(b.answer_min_s, b.answer_max_s))
        onset, answer_onset = float(onset), float(answer_onset)
        dialog = Dialog(onset, onset + duration_s, answer_onset - onset, answer_onset, answer_onset + answer_len)
        self._busy_until = dialog.answer_end
        world = self.world
        world.schedule("audio", onset, dialog.utterance_end)
        world.schedule("prefill", onset + THINK_START_S, answer_onset)
        world.schedule("speak", answer_onset, dialog.answer_end)
        tail = world.power_profile.awake_tail_s
        if tail > 0:  # a unit whose NPU is not power-gated after answering
            world.schedule("npu_awake", dialog.answer_end, dialog.answer_end + tail)
        acoustic_delay = MIC_DISTANCE_M / SPEED_OF_SOUND_M_S
        answer = AudioEvent(2, answer_onset + acoustic_delay, self._answer_clip(answer_len),
                            ANSWER_SAMPLE_RATE, b.answer_peak_v, label="answer")
        world.audio.play(answer)
        dialog.speech_onset, dialog.speech_end = answer.t0, answer.sound_end()
        self.dialogs.append(dialog)
        log.debug("dialog: onset %.6f latency %.1f ms answer %.2f s", onset, 1e3 * dialog.latency_s, answer_len)
        return dialog
