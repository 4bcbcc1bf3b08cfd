"""Oscilloscope drivers: exact command sequences, waveform decoding, and the emulated scopes with faults."""
from __future__ import annotations

import numpy as np
import pytest
from instrument_helpers import ScriptedResource, block, onset_s

from phonebench.core.errors import InstrumentError, InvalidMeasurement
from phonebench.drivers.scope import KeysightInfiniiVision, Oscilloscope, Preamble, RigolDS1000Z, Waveform
from phonebench.emulation import audio as audio_module
from phonebench.emulation.audio import synth_speech
from phonebench.emulation.instruments.scope import KeysightScopeServer, RigolScopeServer, scope_server
from phonebench.emulation.world import World

KEYSIGHT_IDN = "KEYSIGHT TECHNOLOGIES,DSOX3024T,MY58101234,07.50.2021102830"
RIGOL_IDN = "RIGOL TECHNOLOGIES,DS1104Z,DS1ZA201234567,00.04.04.SP4"
PREAMBLE = "+0,+0,+6,+1,+1.00000000E-03,-2.00000000E-03,+0,+1.00000000E-02,+5.00000000E-01,+128"


def decode_keysight(codes, preamble, channel, source=""):
    """InfiniiVision unsigned codes: 0 = hole, 1 = clipped low, top code = clipped high."""
    return Waveform(channel, preamble, codes, "keysight", source)


def decode_rigol(codes, preamble, channel, source=""):
    """DS1000Z codes: V = (code - yorigin - yref) * yinc; the ADC rails 0 and 255 are clipped."""
    return Waveform(channel, preamble, codes, "rigol", source)


def keysight(answers: dict) -> tuple[KeysightInfiniiVision, ScriptedResource]:
    res = ScriptedResource({"*IDN?": KEYSIGHT_IDN, **answers})
    return KeysightInfiniiVision("TCPIP::scripted::5025::SOCKET", poll_s=0, resource=res), res


# --- exact command sequences ---------------------------------------------------------------------

def test_keysight_setup_sequence_checks_the_error_queue_after_each_command():
    scope, res = keysight({":TER?": "+1", ":AER?": ["+1", "+0", "+1"]})
    res.log.clear()
    scope.set_edge_trigger(1, 0.05)
    assert res.log == [":TRIGger:MODE EDGE", "SYST:ERR?", ":TRIGger:EDGE:SOURce CHANnel1", "SYST:ERR?",
                       ":TRIGger:EDGE:LEVel 0.05", "SYST:ERR?", ":TRIGger:EDGE:SLOPe POSitive", "SYST:ERR?",
                       ":TRIGger:SWEep NORMal", "SYST:ERR?"]
    res.log.clear()
    scope.configure_channel(2, 0.1, offset_v=0.02)
    scope.set_timebase(0.5, 2.0)
    scope.set_deskew(2, 5e-9)
    scope.single()
    assert res.commands() == [":CHANnel2:DISPlay ON", ":CHANnel2:PROBe 1", ":CHANnel2:SCALe 0.1",
                              ":CHANnel2:OFFSet 0.02", ":CHANnel2:COUPling DC", ":TIMebase:REFerence CENTer",
                              ":TIMebase:SCALe 0.5", ":TIMebase:POSition 2", ":CHANnel2:PROBe:SKEW 5e-09",
                              # Stopped, the latched events read (cleared), armed, and armed confirmed.
                              ":STOP", ":TER?", ":AER?", ":SINGle", ":AER?", ":AER?"]
    assert scope.identity.model == "DSOX3024T" and scope.identity.serial == "MY58101234"


def test_keysight_waits_for_ter_then_reads_a_decoded_waveform():
    codes = bytes([128, 0, 1, 255, 138, 118])
    scope, res = keysight({":TER?": ["+0", "+0", "+1"], ":WAVeform:PREamble?": PREAMBLE,
                           ":WAVeform:DATA?": block(codes)})
    res.log.clear()
    scope.wait_triggered(timeout_s=5)
    wf = scope.read_waveform(1, points=6)
    # Settings, preamble, data and error check travel in one message: one round trip per channel read.
    assert res.commands() == [":TER?", ":TER?", ":TER?",
                              ":WAVeform:SOURce CHANnel1;:WAVeform:FORMat BYTE;:WAVeform:UNSigned ON;"
                              ":WAVeform:BYTeorder LSBFirst;:WAVeform:POINts:MODE RAW;:WAVeform:POINts 6;"
                              ":WAVeform:PREamble?;:WAVeform:DATA?;:SYSTem:ERRor?"]
    assert (wf.holes, wf.clipped_low, wf.clipped_high) == (1, 1, 1)
    assert wf.valid.tolist() == [True, False, False, False, True, True]
    assert np.isnan(wf.volts[1])
    assert wf.volts[[0, 4, 5]] == pytest.approx([0.5, 0.6, 0.4], abs=1e-6)
    assert wf.t == pytest.approx(-2e-3 + 1e-3 * np.arange(6))
    with pytest.raises(InvalidMeasurement, match="clipped"):
        wf.require_valid()


def test_keysight_delay_measurement_invalid_value_is_none_not_a_number():
    scope, _ = keysight({":MEASure:DELay? CHANnel1,CHANnel2": ["+9.9E+37", "+2.5E-01"]})
    assert scope.measure_delay(1, 2) is None
    assert scope.measure_delay(1, 2) == pytest.approx(0.25)


def test_keysight_no_trigger_times_out_with_a_clear_error():
    scope, _ = keysight({":TER?": "+0"})
    with pytest.raises(InstrumentError, match=r"no trigger \(`:TER\?` = 1\) within 0.05 s"):
        scope.wait_triggered(timeout_s=0.05)


def test_instrument_error_names_instrument_command_and_message():
    scope, res = keysight({"SYST:ERR?": ['-222,"Data out of range"', '+0,"No error"']})
    with pytest.raises(InstrumentError) as err:
        scope.set_deskew(1, 1e-3)
    text = str(err.value)
    assert "scope keysight-infiniivision at TCPIP::scripted" in text
    assert ":CHANnel1:PROBe:SKEW 0.001" in text and '-222,"Data out of range"' in text


def test_rigol_reads_the_raw_record_in_batches():
    record = 600_000
    answers = {"*IDN?": RIGOL_IDN, ":ACQuire:SRATe?": "1.200000e+05", ":TIMebase:MAIN:SCALe?": "4.166667e-01",
               ":TRIGger:STATus?": ["WAIT", "TD", "STOP"]}
    starts = iter([1, 250_001, 500_001])

    def preamble(_: str) -> str:
        return f"0,2,{250_000},1,8.333333e-06,-1.000000e+00,0,4.000000e-03,0,127"

    def data(_: str) -> bytes:
        start = next(starts)
        count = min(250_000, record - start + 1)
        return block(np.full(count, 127 + (start // 250_000), dtype=np.uint8).tobytes())

    res = ScriptedResource({**answers, ":WAVeform:PREamble?": preamble, ":WAVeform:DATA?": data})
    scope = RigolDS1000Z("TCPIP::scripted::5555::SOCKET", poll_s=0, resource=res)
    res.log.clear()
    scope.wait_triggered(timeout_s=5)
    wf = scope.read_waveform(1)
    cmds = res.commands()
    assert cmds[:3] == [":TRIGger:STATus?"] * 3
    # Stopped before the RAW read; one command per message.
    assert cmds[3:9] == [":STOP", ":WAVeform:SOURce CHANnel1", ":WAVeform:MODE RAW", ":WAVeform:FORMat BYTE",
                         ":ACQuire:SRATe?", ":TIMebase:MAIN:SCALe?"]
    batches = ((1, 250_000), (250_001, 500_000), (500_001, 600_000))
    assert cmds[9:] == [c for a, b in batches for c in (f":WAVeform:STARt {a}", f":WAVeform:STOP {b}",
                                                          ":WAVeform:PREamble?", ":WAVeform:DATA?")]
    assert wf.volts.size == record and wf.preamble.points == record
    assert wf.volts[0] == pytest.approx(0.0, abs=1e-6) and wf.volts[-1] == pytest.approx(2 * 4e-3, abs=1e-6)
    assert wf.t[-1] == pytest.approx(-1.0 + (record - 1) * 8.333333e-6)


def test_decoders_follow_each_vendors_formula():
    pre = Preamble.parse("0,2,4,1,1e-6,0,0,0.004,25,127", "rigol")
    wf = decode_rigol(np.array([127, 152, 0, 255], dtype=np.uint8), pre, 1)
    assert wf.volts[:2] == pytest.approx([-0.1, 0.0], abs=1e-6)  # (code - yorigin - yref) * yinc
    assert (wf.clipped_low, wf.clipped_high) == (1, 1)
    words = np.array([0, 1, 32768, 65535, 33768], dtype="<u2")
    pre = Preamble.parse("+1,+0,+5,+1,+1E-06,+0,+0,+1E-04,+0,+32768", "keysight")
    wf = decode_keysight(words, pre, 2)
    assert (wf.holes, wf.clipped_low, wf.clipped_high) == (1, 1, 1)
    assert wf.volts[4] == pytest.approx(0.1)


@pytest.mark.parametrize("text, message", [("1,2,3", "10"), ("a,b,c,d,e,f,g,h,i,j", "not numeric"),
                                            ("0,0,0,1,1e-6,0,0,1e-3,0,128", "inconsistent"),
                                            ("0,0,10,1,nan,0,0,1e-3,0,128", "NaN"),
                                            ("0,0,10,1,1e-6,0,0,inf,0,128", "infinite"),
                                            ("0,0,10,1,9.9E+37,0,0,1e-3,0,128", "9.9E37")])
def test_bad_preambles_are_rejected(text, message):
    with pytest.raises(InstrumentError, match=message):
        Preamble.parse(text, "scope")


def test_block_and_preamble_disagreeing_is_an_error():
    with pytest.raises(InstrumentError, match="preamble says 6"):
        decode_keysight(np.zeros(5, dtype=np.uint8) + 128, Preamble.parse(PREAMBLE, "k"), 1)


# --- against the emulated scopes -------------------------------------------------------------------

DRIVERS = {"keysight": KeysightInfiniiVision, "rigol": RigolDS1000Z}


@pytest.fixture(params=["keysight", "rigol"])
def bench(request):
    world = World(seed=3)
    server = scope_server(world, request.param)
    server.start()
    options = {"memory_depth": 60_000} if request.param == "rigol" else {}  # two channels on: 6k, 60k, ...
    scope = DRIVERS[request.param](server.address, poll_s=0, timeout_s=2, **options)
    scope.configure_channel(1, 0.2)
    scope.configure_channel(2, 0.1)
    scope.set_timebase(0.4, 1.5)
    scope.set_edge_trigger(1, 0.05)
    yield world, server, scope
    scope.close()
    server.stop()


def fire(world: World, peak_v: float = 0.5):
    clip = synth_speech(0.3, 16_000, np.random.default_rng(11))
    return world.play_stimulus(clip, 16_000, peak_v)


def test_emulated_scope_captures_stimulus_and_answer(bench):
    world, server, scope = bench
    assert isinstance(scope, Oscilloscope)
    scope.single()
    start = world.clock.now()
    dialog = fire(world)
    scope.wait_triggered(timeout_s=5)
    assert world.clock.now() > start + 3.0  # the record filled in simulated time
    ch1, ch2 = scope.read_waveform(1, points=60_000), scope.read_waveform(2, points=60_000)
    assert ch1.require_valid() and ch2.require_valid()
    latency = onset_s(ch2.t, ch2.volts) - onset_s(ch1.t, ch1.volts)
    assert latency == pytest.approx(dialog.latency_s, abs=0.006)
    # The scope's own edge measurement sees roughly the same delay on these clean bursts.
    assert scope.measure_delay(1, 2) == pytest.approx(dialog.latency_s, abs=0.03)


def test_no_answer_makes_the_delay_measurement_invalid(bench):
    world, server, scope = bench
    scope.configure_channel(1, 0.002)  # keep a quiet stimulus on screen
    scope.set_edge_trigger(1, 0.008)
    scope.single()
    assert fire(world, peak_v=0.015) is None  # too quiet: the phone does not answer
    scope.wait_triggered(timeout_s=5)
    assert scope.measure_delay(1, 2) is None


def test_clipping_is_counted_and_invalid(bench):
    world, server, scope = bench
    scope.configure_channel(1, 0.02)  # +-80 mV on screen for a 500 mV burst
    scope.set_edge_trigger(1, 0.05)
    scope.single()
    fire(world)
    scope.wait_triggered(timeout_s=5)
    wf = scope.read_waveform(1, points=20_000)
    assert wf.clipped_high > 0 and wf.clipped_low > 0
    with pytest.raises(InvalidMeasurement, match="clipped"):
        wf.require_valid()


def test_no_stimulus_means_no_trigger_and_a_timeout(bench):
    world, server, scope = bench
    scope.single()
    with pytest.raises(InstrumentError, match="no trigger"):
        scope.wait_triggered(timeout_s=0.2)


@pytest.mark.parametrize("fault, message", [("garbage_block", "instead of a definite-length binary block"),
                                            ("truncated_block", "truncated or stalled"),
                                            ("wrong_preamble", "fields")])
def test_transfer_faults_give_clear_errors_and_the_next_read_works(bench, fault, message):
    world, server, scope = bench
    scope.single()
    fire(world)
    scope.wait_triggered(timeout_s=5)
    server.inject_fault(fault)
    scope.timeout_s = 0.3
    with pytest.raises(InstrumentError, match=message):
        scope.read_waveform(1, points=20_000)
    scope.timeout_s = 2
    assert scope.read_waveform(1, points=20_000).require_valid().volts.size >= 20_000


def test_silent_scope_times_out(bench):
    world, server, scope = bench
    server.inject_fault("silence")
    scope.timeout_s = 0.2
    with pytest.raises(InstrumentError, match="no answer to"):
        scope.measure_delay(1, 2)


def test_invalid_measurement_fault_reads_as_none(bench):
    world, server, scope = bench
    server.inject_fault("invalid_measure")
    assert scope.measure_delay(1, 2) is None


def test_unknown_command_and_out_of_range_deskew_are_reported(bench):
    world, server, scope = bench
    with pytest.raises(InstrumentError, match='-113,"Undefined header'):
        scope.configure(":FROB:NICATE 1")
    with pytest.raises(InstrumentError, match="-222"):
        scope.set_deskew(2, 1e-6)
    scope.set_deskew(2, 50e-9)
    if isinstance(scope, KeysightInfiniiVision):  # a bad setting inside the one-round-trip waveform setup
        with pytest.raises(InstrumentError, match=r":WAVeform:POINts 50;.*failed: -222"):
            scope.read_waveform(1, points=50)
        assert scope.read_waveform(1, points=100).volts.size == 100


def test_keysight_holes_are_nan_and_invalid():
    world = World()
    with KeysightScopeServer(world) as server:
        scope = KeysightInfiniiVision(server.address, poll_s=0)
        server.inject_fault("holes")
        wf = scope.read_waveform(1, points=10_000)
        assert wf.holes == 200 and np.isnan(wf.volts).sum() == 200
        with pytest.raises(InvalidMeasurement, match="200 holes"):
            wf.require_valid()
        scope.close()


def test_deskew_shifts_the_channels_time_axis(monkeypatch):
    # Noise-free fixture: an 80 ns shift is far below the jitter noise puts on a slow audio edge.
    monkeypatch.setitem(audio_module.NOISE_RMS_V, 1, 0.0)
    world = World(seed=5)
    with KeysightScopeServer(world) as server:
        scope = KeysightInfiniiVision(server.address, poll_s=0)
        scope.configure_channel(1, 0.2)
        scope.set_timebase(20e-6, 0)  # 200 µs window, 1 M points: 0.2 ns per point
        scope.set_edge_trigger(1, 0.05)
        clip = synth_speech(0.3, 16_000, np.random.default_rng(11))
        edges = []
        for skew in (0.0, 80e-9):
            scope.set_deskew(1, skew)
            scope.single()
            world.play_stimulus(clip, 16_000, 0.5)
            scope.wait_triggered(timeout_s=5)
            wf = scope.read_waveform(1, points=1_000_000)
            edges.append(wf.t[np.flatnonzero(wf.volts >= 0.05)[0]])
            world.wait(1.0)
        assert edges[0] - edges[1] == pytest.approx(80e-9, abs=3e-9)
        scope.close()


def test_same_seed_same_waveform():
    def capture() -> np.ndarray:
        world = World(seed=9)
        with KeysightScopeServer(world) as server:
            scope = KeysightInfiniiVision(server.address, poll_s=0)
            scope.set_timebase(0.4, 1.5)
            scope.set_edge_trigger(1, 0.05)
            scope.single()
            fire(world)
            scope.wait_triggered(timeout_s=5)
            volts = scope.read_waveform(2, points=5000).volts
            scope.close()
            return volts
    assert np.array_equal(capture(), capture())


def test_keysight_digitize_then_opc_waits_in_simulated_time_or_stays_silent():
    world = World(seed=8)
    with KeysightScopeServer(world) as server:
        scope = KeysightInfiniiVision(server.address, poll_s=0, timeout_s=2)
        scope.set_timebase(0.4, 1.6)
        scope.set_edge_trigger(1, 0.05)
        scope.write(":DIGitize CHANnel1,CHANnel2")
        start = world.clock.now()
        # The utterance starts after the 0.4 s pre-trigger part has filled: an earlier edge is not seen.
        clip = synth_speech(0.3, 16_000, np.random.default_rng(11))
        world.play_stimulus(clip, 16_000, 0.5, t0=start + 0.5)
        assert scope.query("*OPC?") == "1"
        assert world.clock.now() >= start + 0.5 + 3.6  # trigger + the post-trigger part of the window
        assert scope.read_waveform(2, points=10_000).require_valid().volts.max() > 0.1
        scope.write(":DIGitize CHANnel1")  # nothing will trigger it: the scope never completes
        scope.timeout_s = 0.3
        with pytest.raises(InstrumentError, match="no answer to `\\*OPC\\?`"):
            scope.query("*OPC?")
        scope.close()


# --- the strict emulator rejects what the real scopes would ------------------------------------------

def test_keysight_ter_stays_latched_from_a_running_scope_until_read():
    world = World(seed=4)
    with KeysightScopeServer(world) as server:
        scope = KeysightInfiniiVision(server.address, poll_s=0)
        scope.set_timebase(0.4, 1.5)
        scope.set_edge_trigger(1, 0.05)
        scope.configure(":SINGle")  # what the old driver did: no clear, no arm check
        assert scope.query(":TER?") == "+1"  # stale: the running scope's auto triggers, not this shot
        assert scope.query(":TER?") == "+0"  # reading cleared it
        scope.configure(":RUN", "*CLS")
        scope.single()  # the driver clears both registers and waits for the arm
        assert scope.query(":TER?") == "+0"
        scope.close()


def test_keysight_stimulus_before_the_arm_is_missed_and_early_data_reads_are_refused():
    world = World(seed=4)
    with KeysightScopeServer(world) as server:
        scope = KeysightInfiniiVision(server.address, poll_s=0, timeout_s=1)
        scope.set_timebase(0.4, 1.5)  # 0.5 s of record before the trigger must fill first
        scope.set_edge_trigger(1, 0.05)
        scope.configure(":STOP", "*CLS", ":SINGle")
        assert scope.query(":AER?") == "+0"  # not armed yet
        with pytest.raises(InstrumentError, match="-230"):
            scope.read_waveform(1, points=1000)
        fire(world)  # fired before the scope is armed: the edge is not seen
        with pytest.raises(InstrumentError, match="no trigger"):
            scope.wait_triggered(timeout_s=0.2)
        scope.close()


def test_keysight_operation_register_shows_run_and_wait_trig():
    world = World(seed=4)
    with KeysightScopeServer(world) as server:
        scope = KeysightInfiniiVision(server.address, poll_s=0)
        scope.set_timebase(0.4, 1.5)
        scope.set_edge_trigger(1, 0.05)
        assert int(scope.query(":OPERegister:CONDition?")) & 8  # running
        scope.single()
        assert int(scope.query(":OPERegister:CONDition?")) == 8 | 32  # acquiring, waiting for trigger
        fire(world)
        scope.wait_triggered(timeout_s=5)
        assert int(scope.query(":OPERegister:CONDition?")) == 0  # single acquisition done: stopped
        scope.close()


def test_rigol_status_lags_single_and_raw_reads_need_the_scope_stopped():
    world = World(seed=4)
    with RigolScopeServer(world) as server:
        scope = RigolDS1000Z(server.address, poll_s=0, timeout_s=1)
        scope.set_timebase(0.4, 1.5)
        scope.set_edge_trigger(1, 0.05)
        scope.configure(":STOP")
        scope.configure(":SINGle")
        assert scope.query(":TRIGger:STATus?") == "STOP"  # the previous state: polling STOP returns at once
        scope.configure(":RUN", ":WAVeform:MODE RAW")
        scope.timeout_s = 0.2
        with pytest.raises(InstrumentError, match="-221.*stopped"):
            scope.query_block(":WAVeform:DATA?", np.uint8)
        scope.timeout_s = 1
        scope.single()  # waits for WAIT
        assert scope.query(":TRIGger:STATus?") == "WAIT"
        fire(world)
        scope.wait_triggered(timeout_s=5)
        assert scope.read_waveform(1, points=12_000).require_valid().volts.size == 12_000
        scope.close()


def test_rigol_rejects_a_read_of_more_than_250000_points():
    world = World(seed=4)
    with RigolScopeServer(world) as server:
        scope = RigolDS1000Z(server.address, poll_s=0, timeout_s=0.3)
        scope.configure(":STOP", ":WAVeform:MODE RAW", ":WAVeform:STARt 1", ":WAVeform:STOP 300000")
        with pytest.raises(InstrumentError, match="-222"):
            scope.query_block(":WAVeform:DATA?", np.uint8)
        scope.close()


def test_rigol_memory_depth_follows_the_channels_on():
    world = World(seed=4)
    with RigolScopeServer(world) as server:
        with pytest.raises(InstrumentError, match=r"-224.*memory depth 120000 with 2 channel"):
            RigolDS1000Z(server.address, poll_s=0, memory_depth=120_000)  # a one-channel depth
        scope = RigolDS1000Z(server.address, poll_s=0, memory_depth=600_000)
        scope.configure(":CHANnel2:DISPlay OFF", ":ACQuire:MDEPth 1200000")
        scope.configure(":CHANnel2:DISPlay ON", ":CHANnel3:DISPlay ON")
        with pytest.raises(InstrumentError, match="-224"):
            scope.configure(":ACQuire:MDEPth 600000")
        scope.configure(":ACQuire:MDEPth 300000")
        scope.close()
