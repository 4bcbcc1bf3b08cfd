"""33500B-series driver against the dialogue its programming manual describes: an arbitrary
waveform loaded as DAC codes, played once per bus trigger in triggered burst (independent of the emulator)."""
from __future__ import annotations

import numpy as np
from instrument_helpers import NO_ERROR_STEP, TranscriptResource, ok

from phonebench.drivers.stimulus import Keysight33500B

IDN = "Keysight Technologies,33522B,MY57301234,4.03-1.19-2.00-52-00"


def test_load_arm_fire_transcript():
    clip = np.array([0.0, 0.5, 1.0, 0.5, 0.0, -0.5, -1.0, -0.5])
    codes = np.array([0, 16384, 32767, 16384, 0, -16384, -32767, -16384], dtype="<i2")  # peak -> 32767
    steps = [
        ("*IDN?", IDN),
        *ok("SOUR1:DATA:VOL:CLE", "FORM:BORD SWAP"),  # SWAPped: little-endian 16-bit DAC codes
        (f"SOUR1:DATA:ARB:DAC UTTERANCE,<block 16 bytes: {codes.tobytes().hex()}>", None), NO_ERROR_STEP,
        *ok("SOUR1:FUNC ARB", "SOUR1:FUNC:ARB UTTERANCE", "SOUR1:FUNC:ARB:SRAT 16000",
            "OUTP1:LOAD INF", "SOUR1:VOLT 1", "SOUR1:VOLT:OFFS 0"),  # high-Z: VOLT is Vpp at the fixture
        *ok("SOUR1:BURS:MODE TRIG", "SOUR1:BURS:NCYC 1", "TRIG1:SOUR BUS", "SOUR1:BURS:STAT ON", "OUTP1 ON"),
        *ok("*TRG"),  # the error-queue read proves the trigger was taken
    ]
    res = TranscriptResource(steps)
    awg = Keysight33500B("TCPIP::192.0.2.10::5025::SOCKET", resource=res)
    awg.load_clip(clip, 16_000, amplitude_vpp=1.0)
    awg.arm()
    awg.fire()
    res.assert_done()
