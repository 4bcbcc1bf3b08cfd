"""Oscilloscope drivers against the dialogue their programming manuals describe, step by step.

Each transcript is what the host sends and what the instrument answers for one measurement,
written from the manual independently of the emulators: the driver must send exactly these
commands in this order and decode the answers to the expected values.
"""
from __future__ import annotations

import numpy as np
import pytest
from instrument_helpers import TranscriptResource, block, ok

from phonebench.core.errors import InstrumentError
from phonebench.drivers.scope import KeysightInfiniiVision, RigolDS1000Z

KEYSIGHT_IDN = "KEYSIGHT TECHNOLOGIES,DSOX3024T,MY58101234,07.50.2021102830"
RIGOL_IDN = "RIGOL TECHNOLOGIES,DS1104Z,DS1ZA201234567,00.04.04.SP4"
RIGOL_OK = ("SYST:ERR?", '0,"No error"')


def keysight_waveform_read(channel: int, preamble: str, codes: bytes) -> list:
    query = (f":WAVeform:SOURce CHANnel{channel};:WAVeform:FORMat BYTE;:WAVeform:UNSigned ON;"
             ":WAVeform:BYTeorder LSBFirst;:WAVeform:POINts:MODE RAW;:WAVeform:POINts 8;"
             ":WAVeform:PREamble?;:WAVeform:DATA?;:SYSTem:ERRor?")
    # One answer line: the preamble, the block, the error-queue entry, separated by ";".
    return [(query, preamble.encode() + b";" + block(codes) + b';+0,"No error"')]


def test_infiniivision_voice_trial_transcript():
    ch1_pre = "+0,+0,+8,+1,+5.00000000E-01,-4.00000000E-01,+0,+6.25000000E-03,+0.00000000E+00,+128"
    ch2_pre = "+0,+0,+8,+1,+5.00000000E-01,-4.00000000E-01,+0,+3.12500000E-03,+0.00000000E+00,+128"
    ch1 = bytes([128, 128, 208, 48, 128, 128, 128, 128])
    ch2 = bytes([128, 128, 128, 160, 96, 128, 128, 128])
    steps = [
        ("*IDN?", KEYSIGHT_IDN),
        *ok(":CHANnel1:DISPlay ON", ":CHANnel1:PROBe 1", ":CHANnel1:SCALe 0.2", ":CHANnel1:OFFSet 0",
            ":CHANnel1:COUPling DC"),
        *ok(":CHANnel2:DISPlay ON", ":CHANnel2:PROBe 1", ":CHANnel2:SCALe 0.1", ":CHANnel2:OFFSet 0",
            ":CHANnel2:COUPling DC"),
        # 10 divisions of 0.4 s, the centre 1.6 s after the trigger: -0.4 s .. 3.6 s.
        *ok(":TIMebase:REFerence CENTer", ":TIMebase:SCALe 0.4", ":TIMebase:POSition 1.6"),
        *ok(":TRIGger:MODE EDGE", ":TRIGger:EDGE:SOURce CHANnel1", ":TRIGger:EDGE:LEVel 0.05",
            ":TRIGger:EDGE:SLOPe POSitive", ":TRIGger:SWEep NORMal"),
        # :TER? and :AER? are event registers: set by the running scope until read. Stop, read both.
        *ok(":STOP"),
        (":TER?", "+1"),
        (":AER?", "+1"),
        *ok(":SINGle"),
        # Armed only once the 0.4 s before the trigger point have been acquired.
        (":AER?", "+0"),
        (":AER?", "+0"),
        (":AER?", "+1"),
        # (the stimulus fires here) then the trigger event register is polled.
        (":TER?", "+0"),
        (":TER?", "+1"),
        *keysight_waveform_read(1, ch1_pre, ch1),
        *keysight_waveform_read(2, ch2_pre, ch2),
        (":MEASure:DELay? CHANnel1,CHANnel2", "+2.61000000E-01"),
    ]
    res = TranscriptResource(steps)
    scope = KeysightInfiniiVision("TCPIP::192.0.2.7::5025::SOCKET", poll_s=0, resource=res)
    scope.configure_channel(1, 0.2)
    scope.configure_channel(2, 0.1)
    scope.set_timebase(0.4, 1.6)
    scope.set_edge_trigger(1, 0.05)
    scope.single()
    scope.wait_triggered(timeout_s=5)
    wf1, wf2 = scope.read_waveform(1, points=8), scope.read_waveform(2, points=8)
    delay = scope.measure_delay(1, 2)
    res.assert_done()
    # V = (code - yref) * yinc + yorigin; t = (i - xref) * xinc + xorigin.
    assert wf1.volts.tolist() == pytest.approx([0, 0, 0.5, -0.5, 0, 0, 0, 0])
    assert wf2.volts[3] == pytest.approx(0.1) and wf2.volts[4] == pytest.approx(-0.1)
    assert wf1.t.tolist() == pytest.approx([-0.4 + 0.5 * i for i in range(8)])
    assert delay == pytest.approx(0.261)


def test_infiniivision_invalid_delay_and_a_refused_setting_transcript():
    steps = [
        ("*IDN?", KEYSIGHT_IDN),
        (":MEASure:DELay? CHANnel1,CHANnel2", "+9.9E+37"),  # no edge on one channel
        (":CHANnel2:PROBe:SKEW 1e-06", None),
        ("SYST:ERR?", '-222,"Data out of range"'),
        ("SYST:ERR?", '+0,"No error"'),
    ]
    res = TranscriptResource(steps)
    scope = KeysightInfiniiVision("TCPIP::192.0.2.7::5025::SOCKET", poll_s=0, resource=res)
    assert scope.measure_delay(1, 2) is None
    with pytest.raises(InstrumentError, match=r'DSOX3024T s/n MY58101234\): `:CHANnel2:PROBe:SKEW 1e-06` failed: -222'):
        scope.set_deskew(2, 1e-6)
    res.assert_done()


def test_ds1000z_single_shot_raw_read_transcript():
    record = 300_000  # 250 kSa/s x 12 divisions x 0.1 s/div
    first = np.full(250_000, 152, dtype=np.uint8)
    second = np.full(record - 250_000, 102, dtype=np.uint8)
    pre1 = "0,2,250000,1,4.000000e-06,-6.000000e-01,0,8.000000e-03,0,127"
    pre2 = "0,2,50000,1,4.000000e-06,4.000000e-01,0,8.000000e-03,0,127"
    steps = [
        ("*IDN?", RIGOL_IDN),
        (":ACQuire:MDEPth 300000", None), RIGOL_OK,
        *[s for c in (":TIMebase:MAIN:SCALe 0.1", ":TIMebase:MAIN:OFFSet 0") for s in ((c, None), RIGOL_OK)],
        *[s for c in (":TRIGger:MODE EDGE", ":TRIGger:EDGe:SOURce CHANnel1", ":TRIGger:EDGe:LEVel 0.05",
                      ":TRIGger:EDGe:SLOPe POSitive", ":TRIGger:SWEep NORMal") for s in ((c, None), RIGOL_OK)],
        (":SINGle", None), RIGOL_OK,
        # The status shows the previous state until :SINGle takes effect, then the pre-trigger fill.
        (":TRIGger:STATus?", "STOP"),
        (":TRIGger:STATus?", "RUN"),
        (":TRIGger:STATus?", "WAIT"),
        # (the stimulus fires here)
        (":TRIGger:STATus?", "WAIT"),
        (":TRIGger:STATus?", "TD"),
        (":TRIGger:STATus?", "STOP"),
        # RAW memory is read with the scope stopped, one command per message, <= 250000 points a read.
        *[s for c in (":STOP", ":WAVeform:SOURce CHANnel1", ":WAVeform:MODE RAW", ":WAVeform:FORMat BYTE")
          for s in ((c, None), RIGOL_OK)],
        (":ACQuire:SRATe?", "2.500000e+05"),
        (":TIMebase:MAIN:SCALe?", "1.000000e-01"),
        (":WAVeform:STARt 1", None), RIGOL_OK, (":WAVeform:STOP 250000", None), RIGOL_OK,
        (":WAVeform:PREamble?", pre1),
        (":WAVeform:DATA?", block(first.tobytes())),
        (":WAVeform:STARt 250001", None), RIGOL_OK, (":WAVeform:STOP 300000", None), RIGOL_OK,
        (":WAVeform:PREamble?", pre2),
        (":WAVeform:DATA?", block(second.tobytes())),
        RIGOL_OK,  # the error queue after the whole read
    ]
    res = TranscriptResource(steps)
    scope = RigolDS1000Z("TCPIP::192.0.2.8::5555::SOCKET", poll_s=0, memory_depth=300_000, resource=res)
    scope.set_timebase(0.1, 0.0)
    scope.set_edge_trigger(1, 0.05)
    scope.single()
    scope.wait_triggered(timeout_s=5)
    wf = scope.read_waveform(1)
    res.assert_done()
    # V = (code - yorigin - yref) * yinc
    assert wf.volts.size == record
    assert wf.volts[0] == pytest.approx(0.2) and wf.volts[-1] == pytest.approx(-0.2)
    assert wf.t[0] == pytest.approx(-0.6) and wf.t[-1] == pytest.approx(-0.6 + (record - 1) * 4e-6)
