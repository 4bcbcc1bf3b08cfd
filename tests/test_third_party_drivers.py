"""The emulated instruments driven by a maintained instrument library's drivers (pymeasure), the
way a lab script uses them before the hardware arrives: set up, acquire, read back, check the
error queue. Each works for the reason the programming manual gives (noted at the step).

pymeasure has drivers for the 33500 family and the InfiniiVision 1000X (same command set as the
emulated 3000T for what is used here); for the DAQ970A and the DS1000Z, which it has no driver
for, its generic SCPI instrument is what a lab script would use."""
from __future__ import annotations

import numpy as np
import pytest

pymeasure = pytest.importorskip("pymeasure")
from pymeasure.instruments import Instrument  # noqa: E402
from pymeasure.instruments.agilent import Agilent33500  # noqa: E402
from pymeasure.instruments.generic_types import SCPIMixin  # noqa: E402
from pymeasure.instruments.keysight import KeysightDSOX1102G  # noqa: E402

from phonebench.emulation.instruments.awg import AwgServer  # noqa: E402
from phonebench.emulation.instruments.daq970a import Daq970aServer  # noqa: E402
from phonebench.emulation.instruments.scope import KeysightScopeServer, RigolScopeServer  # noqa: E402
from phonebench.emulation.world import World  # noqa: E402

VISA = {"visa_library": "@py", "read_termination": "\n", "write_termination": "\n"}


class ScpiInstrument(SCPIMixin, Instrument):
    """pymeasure's generic SCPI instrument."""


@pytest.fixture()
def world():
    return World(seed=21)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_pymeasure_33500_sets_each_channel_and_fires_a_sine_burst(world):
    with AwgServer(world) as server:
        gen = Agilent33500(server.address, **VISA)
        gen.reset()
        gen.clear()
        assert gen.id.startswith("Keysight Technologies,33522B")
        assert gen.shape == "SIN"  # FUNCtion? answers the short form
        ch1, ch2 = gen.ch_1, gen.ch_2
        ch1.shape, ch1.frequency, ch1.amplitude, ch1.offset = "SIN", 1000, 0.5, 0.1
        ch2.shape, ch2.frequency, ch2.amplitude = "TRI", 5000, 2.0  # triangle is a function
        ch2.output_load = "INF"
        # Each channel keeps its own settings (SOURce1/SOURce2, OUTPut1/OUTPut2).
        assert (ch1.shape, ch1.frequency, ch1.amplitude, ch1.offset) == ("SIN", 1000, 0.5, 0.1)
        # OUTPut2:LOAD INF after VOLT: the displayed amplitude doubles, the output itself is unchanged.
        assert (ch2.shape, ch2.frequency, ch2.amplitude) == ("TRI", 5000, 4.0)
        assert float(ch1.output_load) == 50 and float(ch2.output_load) == pytest.approx(9.9e37)
        assert ch1.amplitude_unit == "VPP" and ch1.phase == 0
        # A DAC-code list becomes channel 2's arb without touching channel 1's memory.
        ch2.data_volatile_clear()
        ch2.data_arb("RAMP8", range(-32000, 32000, 8000), data_format="DAC")
        ch2.arb_file = "RAMP8"
        assert gen.ask("SOUR1:DATA:VOL:CAT?").strip() == '""'
        # A triggered burst of the built-in sine on channel 1 (the fixture's channel), bus-triggered.
        ch1.burst_mode, ch1.burst_ncycles, ch1.burst_state = "TRIG", 3, True
        gen.trigger_source = "BUS"
        ch1.output = True
        gen.trigger()  # *TRG;*WAI
        gen.wait_for_trigger(timeout=5)
        event = world.audio.events(1)[-1]
        assert event.peak_v == pytest.approx(0.5)  # 0.5 Vpp into 50 ohm is 1 Vpp open circuit
        assert event.samples.size / event.sample_rate == pytest.approx(3 / 1000, rel=0.01)
        assert gen.check_errors() == []
        # Offset + amplitude beyond 5 V into 50 ohm: clipped, with -222 in the queue.
        ch1.amplitude = 9.0
        ch1.offset = 1.0
        errors = gen.check_errors()
        assert [int(e[0]) for e in errors] == [-222] and ch1.offset == pytest.approx(0.5)
        gen.adapter.close()


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
def test_pymeasure_infiniivision_sets_up_digitizes_and_downloads(world):
    with KeysightScopeServer(world) as server:
        scope = KeysightDSOX1102G(server.address, **VISA)
        scope.factory_reset()
        scope.clear_status()
        scope.ch1.setup(bwlimit=True, coupling="dc", display=True, invert=False, label="STIM", offset=0.0,
                        probe_attenuation=1, scale=0.2)
        scope.ch2.setup(scale=0.5, invert=True)
        config = scope.ch1.current_configuration  # parsed from :CHANnel1?
        assert config["BWL"] is True and config["LAB"] == '"STIM"' and config["RANG"] == pytest.approx(1.6)
        assert scope.ch2.current_configuration["INV"] is True and scope.ch2.current_configuration["BWL"] is False
        scope.timebase_setup(mode="main", offset=0.0, scale=1e-3)
        assert scope.timebase == {"MODE": "MAIN", "REF": "CENT", "MAIN:RANG": pytest.approx(1e-2), "POS": 0.0}
        scope.acquisition_type = "normal"
        scope.acquisition_mode = "realtime"
        assert (scope.acquisition_type, scope.acquisition_mode) == ("normal", "realtime")
        scope.digitize("channel1")  # sequential: the next command waits for the acquisition
        data, preamble = scope.download_data(source="channel1", points=2000)  # ASCii, #8 block header
        assert preamble["points"] == 2000 and data.size == 2000 and np.all(np.isfinite(data))
        assert scope.waveform_points_mode == "normal" and scope.waveform_format == "ascii"
        scope.autoscale()
        scope.default_setup()  # :SYSTem:PRESet
        assert scope.check_errors() == []
        scope.write(":DIGitize BOGUS")  # a source the scope does not have is refused
        assert [int(e[0]) for e in scope.check_errors()] == [-224]
        scope.adapter.close()


def test_pymeasure_generic_scpi_on_the_daq970a_measures_temperature(world):
    with Daq970aServer(world) as server:
        daq = ScpiInstrument(server.address, "DAQ970A", **VISA)
        daq.reset()
        daq.clear()
        assert daq.options == ["DAQM901A", "0", "0"] and daq.status == "+0" and daq.complete == "1"
        celsius = daq.values("MEAS:TEMP? TC,DEF,(@101)")[0]  # DEFault: the J type
        assert daq.ask("SENS:TEMP:TRAN:TC:TYPE? (@101)").strip() == "J" and 20 < celsius < 45
        daq.write("CONF TC,K,(@101)")  # CONFigure needs its :TEMPerature node
        assert [int(e[0]) for e in daq.check_errors()] == [-113]
        daq.write("CONF:TEMP TC,K,(@101:103);:ROUT:SCAN (@101:103)")
        readings = daq.values("READ?")
        assert len(readings) == 3 and all(20 < r < 60 for r in readings)
        assert daq.check_errors() == []
        daq.adapter.close()


def test_pymeasure_generic_scpi_on_the_ds1000z_reads_a_screen(world):
    with RigolScopeServer(world) as server:
        scope = ScpiInstrument(server.address, "DS1104Z", **VISA)
        scope.clear()
        scope.write(":WAV:SOUR CHAN1;:WAV:MODE NORM;:WAV:FORM BYTE")
        block = scope.adapter.connection.query_binary_values(":WAV:DATA?", datatype="B", container=np.array)
        assert block.size == 1200  # the screen record, in a #9 block
        assert scope.ask(":WAV:MODE?").strip() == "NORM"
        assert scope.check_errors() == []
        scope.adapter.close()
