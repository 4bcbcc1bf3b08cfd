"""Emulated Rigol DS1000Z (DS1104Z): its command set and what it does differently.

- :SINGle (and :TRIGger:SWEep SINGle) takes effect a moment later: :TRIGger:STATus? still reads
  the previous state meanwhile.
- :WAVeform:MODE RAW reads the acquisition memory, which needs the scope stopped (-221), at
  most 250,000 BYTE (125,000 WORD) points per :WAVeform:DATA? (-222); :WAVeform:STARt/STOP pick
  the points. The memory depth is shared by the channels on.
- Codes are unsigned bytes or little-endian words, no *OPT?; numbers are `1.000000e+00`-style,
  blocks `#9...`. :MEASure:ITEM? measures the voltages, the times and the delays.
"""
from __future__ import annotations

import numpy as np

from ..scpi import ILLEGAL_VALUE, OUT_OF_RANGE, SETTINGS_CONFLICT, Call, ScpiError
from ..server import enumerated, fixed, numeric, on_off
from .base import FORMAT_CODES, POLL_QUANTUM_S, ScopeServer, chan_number, code_type

MODE_CODES = {"NORMAL": 0, "MAXIMUM": 1, "RAW": 2}  # the preamble's type field: the :WAVeform:MODE
# :MEASure:ITEM? items of the DS1000Z (the emulator measures the voltages and the delays).
ITEMS = ("VMAX", "VMIN", "VPP", "VTOP", "VBASe", "VAMP", "VAVG", "VRMS", "OVERshoot", "MARea", "MPARea",
         "PREShoot", "PERiod", "FREQuency", "RTIMe", "FTIMe", "PWIDth", "NWIDth", "PDUTy", "NDUTy", "RDELay",
         "FDELay", "RPHase", "FPHase", "TVMAX", "TVMIN", "PSLEWrate", "NSLEWrate", "VUPper", "VMID", "VLOWer",
         "VARIance", "PVRMs", "PPULses", "NPULses", "PEDGes", "NEDGes")
TIMING_ITEMS = ("PERiod", "FREQuency", "RTIMe", "FTIMe", "PWIDth", "NWIDth", "PDUTy")
VOLTAGE_ITEMS = ("VPP", "VMAX", "VMIN", "VAVG", "VRMS", "VTOP", "VBASe", "VAMP")


class RigolScopeServer(ScopeServer):
    dialect = "rigol"
    family = "rigol-ds1000z"
    idn = "RIGOL TECHNOLOGIES,DS1104Z,DS1ZA201234567,00.04.04.SP4"
    options = None  # the DS1000Z has no *OPT?
    no_error = '0,"No error"'
    BLOCK_DIGITS = 9  # `#9000001200...`
    SKEW_NODE = ":CHANnel<n>:TCALibrate"
    TRIGGER_EDGE = "EDGe"
    COUPLINGS = ("DC", "AC", "GND")
    UNITS = ("VOLTage", "WATT", "AMPere", "UNKNown")
    BANDWIDTH = ("OFF", "20M")
    BANDWIDTH_ANSWERS = BANDWIDTH
    ACQUIRE_TYPES = ("NORMal", "AVERages", "PEAK", "HRESolution")
    TIMEBASE_MODES = ("MAIN", "XY", "ROLL")
    NUMBER_FORMAT = "{:.6e}"
    LSB_FIRST = True  # words are always little-endian
    SINGLE_LATENCY_S = 0.1  # :SINGle reaches the acquisition system this much later
    SCREEN_POINTS = 1200
    DEPTHS = (12_000, 120_000, 1_200_000, 12_000_000, 24_000_000)  # with one channel on
    AUTO_DEPTH = 1_200_000
    BATCH = {"BYTE": 250_000, "WORD": 125_000}  # points one memory read may return

    def reset(self) -> None:
        super().reset()
        self.stale_status = ""  # what :TRIG:STAT? says until :SINGle takes effect
        self.wav_mode = "NORMAL"
        self.memory_depth: int | None = None  # None = AUTO
        self.wav_start, self.wav_stop = 1, self.SCREEN_POINTS

    def _window(self) -> tuple[float, float]:
        span = 12 * self.tb_scale
        return self.tb_position - span / 2, span

    def _single(self) -> None:
        self.stale_status = self._status_word()
        self.trig_sweep = "NORMAL"
        self._arm(self.SINGLE_LATENCY_S)

    def _status_word(self) -> str:
        """:TRIGger:STATus? once the acquisition system has taken the last command in."""
        if self.state == "RUN":
            return "AUTO" if self.trig_sweep == "AUTO" else "RUN"
        return {"ARMING": "RUN", "ARMED": "WAIT"}.get(self.state, "STOP")

    # --- waveform encoding ------------------------------------------------------------------------
    def _scaling(self, channel: int, bits: int) -> tuple[float, float, float]:
        setup = self.channels[channel]
        wide = 256 if bits == 16 else 1
        yinc = setup.scale_v / 25 / wide
        return yinc, float(np.rint(setup.offset_v / yinc)), float(127 * wide)

    def _codes(self, volts: np.ndarray, channel: int, bits: int) -> np.ndarray:
        yinc, yorigin, yref = self._scaling(channel, bits)
        return np.clip(np.rint(volts / yinc + yorigin + yref), 0, (1 << bits) - 1).astype(code_type(bits))

    def _selection(self) -> tuple[int, int, int]:
        if self.wav_mode == "RAW" and self.state not in ("STOP", "DONE"):
            raise ScpiError(SETTINGS_CONFLICT, "RAW memory reads need the scope stopped (:STOP)")
        record = self.SCREEN_POINTS if self.wav_mode == "NORMAL" else (self.memory_depth or self.AUTO_DEPTH)
        start, stop = self.wav_start, min(self.wav_stop, record)
        if start > stop:
            raise ScpiError(SETTINGS_CONFLICT, f"start {start} after stop {stop}")
        count = stop - start + 1
        if self.wav_mode != "NORMAL" and count > self.BATCH[self.wav_format]:
            raise ScpiError(OUT_OF_RANGE, f"{count} points in one read; at most {self.BATCH[self.wav_format]}")
        return record, start - 1, count

    def _preamble_text(self, count: int, xinc: float, xorigin: float) -> str:
        yinc, yorigin, yref = self._scaling(self.wav_source, self._bits())
        return (f"{FORMAT_CODES[self.wav_format]},{MODE_CODES[self.wav_mode]},{count},1,{xinc:.6e},{xorigin:.6e},0,"
                f"{yinc:.6e},{int(yorigin)},{int(yref)}")

    # --- commands -------------------------------------------------------------------------------
    def _register(self) -> None:
        t = self.tree

        def sweep(call: Call) -> None:
            self.trig_sweep = call.choice(0, "AUTO", "NORMal", "SINGle")
            if self.trig_sweep == "SINGLE":
                self._single()

        def status(call: Call) -> str:
            now = self.world.clock.now()
            if self.state == "ARMING" and now < self.arm_time:
                # :SINGle has not reached the acquisition system yet: the previous state shows.
                self.world.wait(min(POLL_QUANTUM_S, self.arm_time - now))
                return self.stale_status
            if self.state == "ARMING":
                self._wait_armed()
                if self.state == "ARMING":
                    return "RUN"  # filling the pre-trigger part; not armed yet
            if self.state == "ARMED":
                return "STOP" if self._resolve(poll=True) else "WAIT"
            return self._status_word()

        def averages(call: Call) -> None:
            count = int(call.number(0, 2, 1024))
            if count & (count - 1):
                raise ScpiError(ILLEGAL_VALUE, f"{count} averages; a power of 2 from 2 to 1024")
            self.acq_count = count

        t.add(":TRIGger:SWEep", sweep)
        t.add(":TRIGger:STATus?", status)
        t.add(":ACQuire:AVERages", averages)
        t.add(":ACQuire:AVERages?", lambda c: str(self.acq_count))
        t.add(":CLEar", lambda c: None)
        t.add(":TFORce", lambda c: self._force())
        t.add(":MEASure:CLEar", fixed(None, lambda c: c.option(0, "ITEM1", "ITEM2", "ITEM3", "ITEM4", "ITEM5", "ALL")))
        for node, default, kind in (
                (":CHANnel<n>:VERNier", False, on_off()), (":TIMebase:DELay:ENABle", False, on_off()),
                (":TRIGger:COUPling", "DC", enumerated("AC", "DC", "LFReject", "HFReject")),
                (":TRIGger:HOLDoff", 16e-9, numeric(16e-9, 10.0, "{:.6e}")), (":TRIGger:NREJect", False, on_off())):
            self.add_setting(node, default, kind)
        self._register_timebase_and_waveform()

    def _register_timebase_and_waveform(self) -> None:
        t = self.tree

        def depth(call: Call) -> None:
            text = call.arg(0).strip().upper()
            if text == "AUTO":
                self.memory_depth = None
                return
            value = int(call.number(0))
            # The memory is shared: two channels on get half of each depth, three or four a quarter.
            on = sum(setup.display for setup in self.channels.values())
            share = 1 if on <= 1 else 2 if on == 2 else 4
            allowed = tuple(d // share for d in self.DEPTHS)
            if value not in allowed:
                raise ScpiError(ILLEGAL_VALUE, f"memory depth {value} with {on} channel(s) on; allowed AUTO or "
                                               f"{allowed}")
            self.memory_depth = value

        def item(call: Call) -> str:
            name = call.option(0, *ITEMS)
            if name in TIMING_ITEMS:
                return self._timing(self._measure_source(call, 1), name)
            if name in ("RPHase", "FPHase"):
                return self._phase(self._measure_source(call, 1), self._measure_source(call, 2))
            if name in ("RDELay", "FDELay"):
                return self._delay(chan_number(call.arg(1)), chan_number(call.arg(2)))
            if name not in VOLTAGE_ITEMS:
                call.rest(1)
                raise ScpiError(ILLEGAL_VALUE, f"measurement item {name} is not modelled")
            return self._statistic(self._measure_source(call, 1), name)

        t.add(":TIMebase[:MAIN]:SCALe", lambda c: setattr(self, "tb_scale", c.number(0, 5e-9, 50.0)))
        t.add(":TIMebase[:MAIN]:SCALe?", lambda c: self._number(self.tb_scale))
        t.add(":TIMebase[:MAIN]:OFFSet", lambda c: setattr(self, "tb_position", c.number(0, -500.0, 500.0)))
        t.add(":TIMebase[:MAIN]:OFFSet?", lambda c: self._number(self.tb_position))
        t.add(":SINGle", lambda c: self._single())
        t.add(":ACQuire:MDEPth", depth)
        t.add(":ACQuire:MDEPth?", lambda c: str(self.memory_depth) if self.memory_depth else "AUTO")
        t.add(":ACQuire:SRATe?", lambda c: self._number((self.memory_depth or self.AUTO_DEPTH) / self._window()[1]))
        t.add(":WAVeform:MODE", lambda c: setattr(self, "wav_mode", c.choice(0, "NORMal", "MAXimum", "RAW")))
        t.add(":WAVeform:MODE?", lambda c: {"MAXIMUM": "MAX"}.get(self.wav_mode, self.wav_mode[:4]))
        t.add(":WAVeform:FORMat", lambda c: setattr(self, "wav_format", c.choice(0, "BYTE", "WORD")))
        t.add(":WAVeform:FORMat?", lambda c: self.wav_format)
        t.add(":WAVeform:STARt", lambda c: setattr(self, "wav_start", int(c.number(0, 1, self.DEPTHS[-1]))))
        t.add(":WAVeform:STARt?", lambda c: str(self.wav_start))
        t.add(":WAVeform:STOP", lambda c: setattr(self, "wav_stop", int(c.number(0, 1, self.DEPTHS[-1]))))
        t.add(":WAVeform:STOP?", lambda c: str(self.wav_stop))
        t.add(":MEASure:ITEM?", item)
