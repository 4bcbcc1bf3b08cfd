"""Voice trials on the emulated station, each measured by the bench and compared with the world's
ground truth (when the stimulus started, when the phone's speech started and fell silent).

Shared by tests/test_onset_truth.py and benchmarks/bench_onset.py. The bench side is exactly what
a station runs (real drivers, the scope and the audio source as SCPI servers on loopback,
`phonebench.bench.checks.voice.analyse_trial`); only the truth is read from the world.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from phonebench.bench.checks import voice as voice_check
from phonebench.drivers.registry import open_instrument
from phonebench.emulation.instruments.awg import AwgServer
from phonebench.emulation.instruments.scope import INPUT_DELAY_S, KeysightScopeServer
from phonebench.emulation.voice import VOICE_BEHAVIOURS
from phonebench.emulation.world import World

VOICE_PERSONAS = tuple(sorted(VOICE_BEHAVIOURS))


@dataclass
class OnsetErrors:
    """Measured minus true time per answered trial, seconds (positive: the bench reads late)."""

    persona: str
    stimulus: list[float] = field(default_factory=list)
    answer: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    skipped: int = 0  # trials that were not "ok" (no answer, open-ended, invalid)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.asarray(self.stimulus), np.asarray(self.answer), np.asarray(self.end)


@contextlib.contextmanager
def voice_rig(persona: str, seed: int) -> Iterator[tuple[World, KeysightScopeServer, object, object]]:
    world = World(seed=seed, persona=persona)
    scope_server, awg_server = KeysightScopeServer(world), AwgServer(world)
    drivers = []
    try:
        for server in (scope_server, awg_server):
            server.start()
        scope = open_instrument("scope", scope_server.family, scope_server.address, poll_s=0)
        drivers.append(scope)
        stimulus = open_instrument("stimulus", awg_server.family, awg_server.address)
        drivers.append(stimulus)
        yield world, scope_server, scope, stimulus
    finally:
        for driver in drivers:
            driver.close()
        for server in (scope_server, awg_server):
            server.stop()


def onset_errors(persona: str, trials: int, seed: int = 3,
                 setup: voice_check.VoiceSetup = voice_check.VoiceSetup()) -> OnsetErrors:
    """`trials` stimulus -> answer trials; each onset compared with the world's truth."""
    errors = OnsetErrors(persona)
    with voice_rig(persona, seed) as (world, server, scope, stimulus):
        voice_check.configure(scope, stimulus, setup)
        for _ in range(trials):
            scope.single()
            stimulus.fire()
            scope.wait_triggered(timeout_s=setup.trigger_timeout_s)
            ch1, ch2 = scope.read_waveform(1, setup.points), scope.read_waveform(2, setup.points)
            stim, answer, end, status = voice_check.analyse_trial(ch1, ch2, setup)
            t_trigger = server.acq.t_trigger
            dialog = world.voice.dialogs[-1]
            world.wait_until(dialog.answer_end + 0.5)  # quiet before the next trial
            if status != "ok":
                errors.skipped += 1
                continue
            played = world.audio.events(1)[-1]
            lag = INPUT_DELAY_S[2]  # channel 2's input delay (what deskew calibration removes)
            errors.stimulus.append(stim - (played.t0 - t_trigger))
            errors.answer.append(answer - (dialog.speech_onset + lag - t_trigger))
            errors.end.append(end - (dialog.speech_end + lag - t_trigger))
    return errors
