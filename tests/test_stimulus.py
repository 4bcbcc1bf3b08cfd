"""Audio stimulus: the 33500B driver's command sequence, the emulated generator, WAV clips."""
from __future__ import annotations

import wave

import numpy as np
import pytest
from instrument_helpers import ScriptedResource

from phonebench.core.errors import ConfigError, InstrumentError
from phonebench.drivers.stimulus import AudioStimulus, Keysight33500B, read_wav
from phonebench.emulation.audio import SPEAKER_TO_PHONE_M, SPEED_OF_SOUND_M_S, synth_speech
from phonebench.emulation.instruments.awg import AwgServer
from phonebench.emulation.world import World

IDN = "Keysight Technologies,33522B,MY57301234,4.03-1.19-2.00-52-00"
CLIP = synth_speech(0.3, 16_000, np.random.default_rng(2))


def test_load_arm_fire_sequence():
    res = ScriptedResource({"*IDN?": IDN})
    awg = Keysight33500B("TCPIP::scripted::5025::SOCKET", resource=res)
    res.log.clear()
    awg.load_clip(CLIP * 0.3, 16_000, amplitude_vpp=1.0)
    awg.arm()
    awg.fire()
    assert res.commands() == [
        "SOUR1:DATA:VOL:CLE", "FORM:BORD SWAP", f"SOUR1:DATA:ARB:DAC UTTERANCE,<block {2 * CLIP.size} bytes>",
        "SOUR1:FUNC ARB", "SOUR1:FUNC:ARB UTTERANCE", "SOUR1:FUNC:ARB:SRAT 16000", "OUTP1:LOAD INF",
        "SOUR1:VOLT 1", "SOUR1:VOLT:OFFS 0", "SOUR1:BURS:MODE TRIG", "SOUR1:BURS:NCYC 1", "TRIG1:SOUR BUS",
        "SOUR1:BURS:STAT ON", "OUTP1 ON", "*TRG"]
    assert res.log[-1] == "SYST:ERR?"  # fire() returns only once the trigger is known to be taken


def test_silent_clip_is_refused():
    awg = Keysight33500B("TCPIP::scripted::5025::SOCKET", resource=ScriptedResource({"*IDN?": IDN}))
    with pytest.raises(ConfigError, match="silent"):
        awg.load_clip(np.zeros(100), 16_000)


@pytest.fixture()
def bench():
    world = World(seed=6)
    with AwgServer(world) as server:
        awg = Keysight33500B(server.address, timeout_s=2)
        yield world, server, awg
        awg.close()


def test_fire_puts_the_utterance_into_the_world_at_that_instant(bench):
    world, server, awg = bench
    assert isinstance(awg, AudioStimulus)
    awg.load_clip(CLIP, 16_000, amplitude_vpp=1.0)
    awg.arm()
    world.wait(1.25)
    fired_at = world.clock.now()
    awg.fire()
    (event,) = world.audio.events(1)
    assert event.t0 == server.played[0] and event.peak_v == pytest.approx(0.5)  # 1 Vpp into high impedance
    assert fired_at < event.t0 < fired_at + 0.005  # the trigger command's own latency
    assert event.samples == pytest.approx(CLIP, abs=1e-4)
    dialog = world.voice.dialogs[-1]
    # The phone hears it after the fixture's speaker-to-phone air path.
    assert dialog.utterance_onset == pytest.approx(event.t0 + SPEAKER_TO_PHONE_M / SPEED_OF_SOUND_M_S, abs=1e-6)
    assert dialog.answer_onset > event.t0
    assert server.arbs["UTTERANCE"].samples.size == CLIP.size


def test_fifty_ohm_setting_doubles_the_amplitude_into_the_fixture(bench):
    world, server, awg = bench
    awg.load_clip(CLIP, 16_000, amplitude_vpp=1.0)
    # What a driver that forgot the load setting leaves: the power-on 50 ohm when VOLT is set.
    # (Changing the load after VOLT would rescale the displayed amplitude, not the output.)
    awg.configure("OUTP1:LOAD 50", "SOUR1:VOLT 1")
    awg.arm()
    awg.fire()
    assert world.audio.events(1)[0].peak_v == pytest.approx(1.0)


def test_fire_without_arming_is_an_instrument_error(bench):
    world, server, awg = bench
    awg.load_clip(CLIP, 16_000)
    with pytest.raises(InstrumentError, match="-211"):
        awg.fire()
    assert world.audio.events(1) == []


def test_too_quiet_a_stimulus_is_not_heard(bench):
    world, server, awg = bench
    awg.load_clip(CLIP, 16_000, amplitude_vpp=0.02)
    awg.arm()
    awg.fire()
    assert len(world.audio.events(1)) == 1 and world.audio.events(2) == []


def test_read_wav_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "clip.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes((CLIP * 20_000).astype("<i2").tobytes())
    samples, rate = read_wav(path)
    assert rate == 16_000 and samples * 32768 == pytest.approx(np.round(CLIP * 20_000), abs=1)
    with pytest.raises(ConfigError, match="cannot read"):
        read_wav(tmp_path / "missing.wav")
    eight_bit = tmp_path / "8bit.wav"
    with wave.open(str(eight_bit), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(1)
        out.setframerate(8000)
        out.writeframes(bytes(100))
    with pytest.raises(ConfigError, match="16-bit"):
        read_wav(eight_bit)
