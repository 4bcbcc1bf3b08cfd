"""Emulated Keysight 33500B-series arbitrary waveform generator: the bench's audio stimulus source.

A speech clip is loaded as an arb (`DATA:ARB:DAC name,<int16 block>`), played once per trigger
in triggered-burst mode. A bus trigger (*TRG or TRIG1) puts the clip into the world at that
simulated instant: it shows on scope channel 1 and the phone's voice assistant hears it.
Amplitude follows the real instrument's trap: VOLT is Vpp into the OUTP:LOAD setting, so into
the fixture's high impedance a 50-ohm setting doubles the amplitude.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from emulation.instruments.scpi import ILLEGAL_VALUE, OUT_OF_RANGE, SETTINGS_CONFLICT, TRIGGER_IGNORED, Call, ScpiError
from emulation.instruments.server import InstrumentServer
from emulation.world import World

log = logging.getLogger(__name__)

IDN = "Keysight Technologies,33522B,MY57301234,4.03-1.19-2.00-52-00"
MIN_POINTS, MAX_POINTS = 8, 1_000_000
MAX_ARBS = 32


@dataclass
class Arb:
    samples: np.ndarray  # normalised to [-1, 1]


class AwgServer(InstrumentServer):
    family = "keysight-33500b"
    idn = IDN
    COMMAND_LATENCY_S = 1e-3  # simulated time a command unit takes (a *TRG plays this much later)

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(port)
        self.world = world
        self.arbs: dict[str, Arb] = {}
        self.played: list[float] = []  # world times of each utterance onset, for tests
        self.reset()
        self._register()

    def reset(self) -> None:
        self.function = "SINUSOID"
        self.arb_name = ""
        self.srate = 40_000.0
        self.vpp = 0.1
        self.offset = 0.0
        self.output_on = False
        self.load_ohm: float | None = 50.0  # None = high impedance (INF)
        self.burst_on = False
        self.burst_mode = "TRIGGERED"
        self.burst_cycles = 1
        self.trigger_source = "IMMEDIATE"
        self.big_endian = True

    def elapse(self, seconds: float) -> None:
        self.world.wait(seconds)

    def _peak_at_fixture_v(self) -> float:
        # VOLT is Vpp into the load the instrument is told about; the fixture is high impedance.
        return self.vpp / 2 * (2.0 if self.load_ohm is not None else 1.0)

    def bus_trigger(self) -> None:
        if not (self.burst_on and self.burst_mode == "TRIGGERED" and self.trigger_source == "BUS"):
            raise ScpiError(TRIGGER_IGNORED, "not in triggered burst with TRIG:SOUR BUS")
        if not self.output_on:
            log.info("%s: trigger with output off: nothing plays", self.family)
            return
        if self.function != "ARBITRARY" or self.arb_name not in self.arbs:
            raise ScpiError(SETTINGS_CONFLICT, "no arb selected (FUNC ARB; FUNC:ARB <name>)")
        clip = self.arbs[self.arb_name].samples
        if self.burst_cycles > 1:
            clip = np.tile(clip, self.burst_cycles)
        self.played.append(self.world.clock.now())
        self.world.play_stimulus(clip, self.srate, self._peak_at_fixture_v())

    def _register(self) -> None:
        t = self.tree

        def clear(call: Call) -> None:
            self.arbs.clear()
            self.arb_name = ""

        def store(name_arg: str, samples: np.ndarray) -> None:
            name = name_arg.strip().strip('"').upper()
            if not name or len(name) > 12:
                raise ScpiError(ILLEGAL_VALUE, f"arb name {name_arg!r}")
            if not MIN_POINTS <= samples.size <= MAX_POINTS:
                raise ScpiError(OUT_OF_RANGE, f"{samples.size} points; {MIN_POINTS}..{MAX_POINTS}")
            if name not in self.arbs and len(self.arbs) >= MAX_ARBS:
                raise ScpiError(OUT_OF_RANGE, "volatile memory full (DATA:VOL:CLE)")
            self.arbs[name] = Arb(samples)

        def data_dac(call: Call) -> None:
            block = call.block(1)
            if len(block) % 2:
                raise ScpiError(ILLEGAL_VALUE, "DAC block must hold 16-bit values")
            codes = np.frombuffer(block, dtype=">i2" if self.big_endian else "<i2")
            store(call.arg(0), np.clip(codes.astype(np.float64) / 32767.0, -1.0, 1.0))

        def data_float(call: Call) -> None:
            if len(call.args) == 2 and isinstance(call.args[1], bytes):
                block = call.args[1]
                if len(block) % 4:
                    raise ScpiError(ILLEGAL_VALUE, "float block must hold 32-bit values")
                samples = np.frombuffer(block, dtype=">f4" if self.big_endian else "<f4").astype(np.float64)
            else:
                samples = np.array([call.number(i, -1.0, 1.0) for i in range(1, len(call.args))])
            if samples.size and np.max(np.abs(samples)) > 1.0:
                raise ScpiError(OUT_OF_RANGE, "arb values must lie in [-1, 1]")
            store(call.arg(0), samples)

        def select(call: Call) -> None:
            name = call.arg(0).strip().strip('"').upper()
            if name not in self.arbs:
                raise ScpiError(ILLEGAL_VALUE, f"no arb named {name} in volatile memory")
            self.arb_name = name

        def function(call: Call) -> None:
            self.function = call.choice(0, "SINusoid", "SQUare", "RAMP", "PULSe", "NOISe", "DC", "ARBitrary")

        def load(call: Call) -> None:
            text = call.arg(0).strip().upper()
            self.load_ohm = None if text in ("INF", "INFINITY", "9.9E37") else call.number(0, 1.0, 10_000.0)

        def voltage(call: Call) -> None:
            self.vpp = call.number(0, 0.001, 20.0 if self.load_ohm is None else 10.0)

        t.add("[SOURce<n>]:DATA:VOLatile:CLEar", clear)
        t.add("[SOURce<n>]:DATA:ARBitrary:DAC", data_dac)
        t.add("[SOURce<n>]:DATA:ARBitrary", data_float)
        t.add("[SOURce<n>]:DATA:VOLatile:CATalog?", lambda c: ",".join(f'"{n}"' for n in self.arbs) or '""')
        t.add("[SOURce<n>]:FUNCtion[:SHAPe]", function)
        t.add("[SOURce<n>]:FUNCtion[:SHAPe]?", lambda c: self.function[:4])
        t.add("[SOURce<n>]:FUNCtion:ARBitrary", select)
        t.add("[SOURce<n>]:FUNCtion:ARBitrary?", lambda c: f'"{self.arb_name}"')
        t.add("[SOURce<n>]:FUNCtion:ARBitrary:SRATe",
              lambda c: setattr(self, "srate", c.number(0, 1e-6, 160e6)))
        t.add("[SOURce<n>]:FUNCtion:ARBitrary:SRATe?", lambda c: f"{self.srate:+.9E}")
        t.add("[SOURce<n>]:VOLTage[:LEVel][:IMMediate][:AMPLitude]", voltage)
        t.add("[SOURce<n>]:VOLTage[:LEVel][:IMMediate][:AMPLitude]?", lambda c: f"{self.vpp:+.9E}")
        t.add("[SOURce<n>]:VOLTage[:LEVel][:IMMediate]:OFFSet",
              lambda c: setattr(self, "offset", c.number(0, -5.0, 5.0)))
        t.add("[SOURce<n>]:BURSt:STATe", lambda c: setattr(self, "burst_on", c.boolean(0)))
        t.add("[SOURce<n>]:BURSt:MODE", lambda c: setattr(self, "burst_mode", c.choice(0, "TRIGgered", "GATed")))
        t.add("[SOURce<n>]:BURSt:NCYCles", lambda c: setattr(self, "burst_cycles", int(c.number(0, 1, 1e8))))
        t.add("OUTPut<n>[:STATe]", lambda c: setattr(self, "output_on", c.boolean(0)))
        t.add("OUTPut<n>[:STATe]?", lambda c: "1" if self.output_on else "0")
        t.add("OUTPut<n>:LOAD", load)
        t.add("OUTPut<n>:LOAD?", lambda c: "+9.9E+37" if self.load_ohm is None else f"{self.load_ohm:+.9E}")
        t.add("TRIGger<n>:SOURce", lambda c: setattr(
            self, "trigger_source", c.choice(0, "IMMediate", "EXTernal", "TIMer", "BUS")))
        t.add("TRIGger<n>:SOURce?", lambda c: self.trigger_source[:3])
        t.add("TRIGger<n>[:IMMediate]", lambda c: self.bus_trigger())
        t.add("FORMat:BORDer", lambda c: setattr(self, "big_endian", c.choice(0, "NORMal", "SWAPped") == "NORMAL"))
