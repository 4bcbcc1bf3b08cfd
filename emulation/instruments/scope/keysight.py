"""Emulated Keysight InfiniiVision X (DSOX3024T): its command set and what it does differently.

- :TER? and :AER? are event registers, latched until read or *CLS. A running scope triggers and
  arms over and over, so both read 1 after :SINGle unless cleared before.
- Reading waveform data of a single acquisition that has not completed is refused (-230).
- :DIGitize is sequential: *OPC? and the data commands after it wait (in simulated time) until
  it has triggered.
- Codes are 8-bit (BYTE) or 16-bit (WORD), unsigned or signed, MSBFirst after *RST; the
  preamble's numbers are `+1.00000000E+00`-style, blocks `#8...`.
"""
from __future__ import annotations

import logging

import numpy as np

from ..scpi import DATA_STALE, HEADER_SUFFIX, Call, Handler, ScpiError, short_form
from ..server import enumerated, fixed, numeric, on_off
from .base import FORMAT_CODES, ScopeServer, chan_number, code_type

log = logging.getLogger(__name__)

DIGITIZE_MAX_WAIT_S = 30.0  # *OPC? after :DIGitize gives up (stays silent) after this long
REFERENCES = {"LEFT": 0.1, "CENTER": 0.5, "RIGHT": 0.9}  # :TIMebase:REFerence, as a share of the screen
TYPE_CODES = {"NORMal": 0, "PEAK": 1, "AVERage": 2, "HRESolution": 3}  # the preamble's acquisition type


class KeysightScopeServer(ScopeServer):
    dialect = "keysight"
    family = "keysight-infiniivision"
    idn = "KEYSIGHT TECHNOLOGIES,DSOX3024T,MY58101234,07.50.2021102830"
    options = "0"  # *OPT?: the licensed options (none here)
    no_error = '+0,"No error"'
    SAVED_STATE = ScopeServer.SAVED_STATE + ("tb_reference",)
    BLOCK_DIGITS = 8  # `#800001000...`
    SKEW_NODE = ":CHANnel<n>:PROBe:SKEW"
    TRIGGER_EDGE = "EDGE"
    COUPLINGS = ("DC", "AC")  # no GND on the InfiniiVision
    UNITS = ("VOLT", "AMPere")
    BANDWIDTH = ("OFF", "ON")
    BANDWIDTH_ANSWERS = ("0", "1")
    ACQUIRE_TYPES = ("NORMal", "AVERage", "HRESolution", "PEAK")
    TIMEBASE_MODES = ("MAIN", "WINDow", "XY", "ROLL")
    NUMBER_FORMAT = "{:+.8E}"
    LSB_FIRST = False  # MSBFirst after *RST (:WAVeform:BYTeorder)
    RAW_POINTS = 4_000_000  # acquisition record in RAW/MAX points mode (3000T: 4 Mpts)
    NORMAL_POINTS = 62_500

    def reset(self) -> None:
        super().reset()
        self.tb_reference = "CENTER"
        self._digitize_pending = False
        self.wav_points_mode = "NORMal"
        self.wav_points = self.NORMAL_POINTS

    def _window(self) -> tuple[float, float]:
        span = 10 * self.tb_scale
        return self.tb_position - REFERENCES[self.tb_reference] * span, span

    def _check_readable(self) -> None:
        if self._digitize_pending:
            # :DIGitize is sequential on the InfiniiVision: what follows waits until it is done.
            self.complete_pending()
        if self.state in ("ARMING", "ARMED"):
            raise ScpiError(DATA_STALE, "the single acquisition has not completed (wait for :TER? = 1)")

    def complete_pending(self) -> bool:
        if not self._digitize_pending:
            return True
        deadline = self.world.clock.now() + DIGITIZE_MAX_WAIT_S
        while not self._resolve(poll=True):
            if self.world.clock.now() >= deadline:
                log.warning("%s: :DIGitize never triggered; *OPC? stays silent like the real scope", self.family)
                return False
        self._digitize_pending = False
        return True

    # --- waveform encoding ------------------------------------------------------------------------
    def _scaling(self, channel: int, bits: int) -> tuple[float, float, float]:
        setup = self.channels[channel]
        full = 1 << bits
        return 8 * setup.scale_v / full, setup.offset_v, float(full // 2)

    def _codes(self, volts: np.ndarray, channel: int, bits: int) -> np.ndarray:
        yinc, yorigin, yref = self._scaling(channel, bits)
        # 0 = hole; 1 and the top code = clipped low / high.
        return np.clip(np.rint((volts - yorigin) / yinc) + yref, 1, (1 << bits) - 1).astype(code_type(bits))

    def _selection(self) -> tuple[int, int, int]:
        limit = self.NORMAL_POINTS if self.wav_points_mode == "NORMal" else self.RAW_POINTS
        points = min(self.wav_points, limit)
        return points, 0, points

    def _preamble_text(self, count: int, xinc: float, xorigin: float) -> str:
        bits = self._bits()
        yinc, yorigin, yref = self._scaling(self.wav_source, bits)
        if not self.wav_unsigned:
            yref -= 1 << (bits - 1)
        return (f"+{FORMAT_CODES[self.wav_format]},+{TYPE_CODES[self.acq_type]},+{count},+1,{xinc:+.8E},"
                f"{xorigin:+.8E},+0,{yinc:+.8E},{yorigin:+.8E},{int(yref):+d}")

    # --- commands -------------------------------------------------------------------------------
    def _register(self) -> None:
        t = self.tree

        def setup_query(call: Call) -> str:
            n = call.suffixes[0]
            if n not in self.channels:
                raise ScpiError(HEADER_SUFFIX, f"channel {n}")
            c = self.channels[n]
            return (f":CHAN{n}:RANG {8 * c.scale_v:+.2E};OFFS {c.offset_v:+.5E};COUP {c.coupling};"
                    f"IMP {short_form(c.impedance)};DISP {int(c.display)};BWL {int(c.bwlimit)};INV {int(c.invert)};"
                    f'LAB "{c.label}";UNIT {c.units};PROB {c.probe:+.2E};PROB:SKEW {c.skew_s:+.2E};STYP SING')

        def timebase_query(call: Call) -> str:
            return (f":TIM:MODE {short_form(self.tb_mode)};REF {self.tb_reference[:4]};"
                    f"MAIN:RANG {10 * self.tb_scale:+.2E};POS {self.tb_position:+.1E}")

        def sweep(call: Call) -> None:
            self._latch_running()  # what the old sweep mode triggered stays latched
            self.trig_sweep = call.choice(0, "AUTO", "NORMal")

        t.add(":TRIGger:SWEep", sweep)
        t.add(":CHANnel<n>?", setup_query)
        t.add(":CHANnel<n>:IMPedance", lambda c: setattr(self.channels[_suffix_channel(c)], "impedance",
                                                         c.option(0, "ONEMeg", "FIFTy")))
        t.add(":CHANnel<n>:IMPedance?", lambda c: short_form(self.channels[_suffix_channel(c)].impedance))
        t.add(":TIMebase?", timebase_query)
        self._stored_settings()
        t.add(":SYSTem:PRESet", lambda c: self.reset())
        t.add(":ACQuire:MODE", lambda c: setattr(self, "acq_mode", c.option(0, "RTIMe", "SEGMented")))
        t.add(":ACQuire:MODE?", lambda c: short_form(self.acq_mode))
        t.add(":ACQuire:COUNt", lambda c: setattr(self, "acq_count", int(c.number(0, 2, 65536))))
        t.add(":ACQuire:COUNt?", lambda c: f"+{self.acq_count}")
        t.add(":ACQuire:SRATe?", lambda c: f"{self.RAW_POINTS / self._window()[1]:+.8E}")
        for item, node in (("VPP", "VPP"), ("VMAX", "VMAX"), ("VMIN", "VMIN"), ("VAVG", "VAVerage"),
                           ("VRMS", "VRMS"), ("VTOP", "VTOP"), ("VBASE", "VBASe"), ("VAMP", "VAMPlitude")):
            t.add(f":MEASure:{node}?", lambda c, item=item: self._statistic(self._measure_source(c, 0), item))
        for node in ("FREQuency", "PERiod", "PWIDth", "NWIDth", "DUTYcycle", "RISetime", "FALLtime"):
            t.add(f":MEASure:{node}?", lambda c, node=node: self._timing(self._measure_source(c, 0), node))
        t.add(":MEASure:PHASe?", lambda c: self._phase(self._measure_source(c, 0), self._measure_source(c, 1)))
        self._register_acquisition()

    def _register_acquisition(self) -> None:
        t = self.tree

        def digitize(call: Call) -> None:
            for index in range(len(call.args)):
                chan_number(call.arg(index))  # only the analog channels are modelled
            self._arm()
            self._digitize_pending = True

        def ter(call: Call) -> str:
            self._latch_running()
            self._resolve(poll=True)
            fired, self._ter = self._ter, False  # reading the event register clears it
            return "+1" if fired else "+0"

        def aer(call: Call) -> str:
            self._wait_armed()
            armed, self._aer = self._aer, False
            return "+1" if armed else "+0"

        def operation_condition(call: Call) -> str:
            # Bit 3 (8) Run: acquiring; bit 5 (32) Wait Trig: armed, waiting for the trigger.
            self._latch_running()
            running = self.state in ("RUN", "ARMING", "ARMED")
            return f"+{(8 if running else 0) | (32 if self.state == 'ARMED' else 0)}"

        def reference(call: Call) -> None:
            self.tb_reference = call.choice(0, "LEFT", "CENTer", "RIGHt")

        t.add(":TIMebase:SCALe", lambda c: setattr(self, "tb_scale", c.number(0, 1e-9, 50.0)))
        t.add(":TIMebase:SCALe?", lambda c: self._number(self.tb_scale))
        t.add(":TIMebase:RANGe", lambda c: setattr(self, "tb_scale", c.number(0, 1e-8, 500.0) / 10))
        t.add(":TIMebase:RANGe?", lambda c: self._number(10 * self.tb_scale))
        t.add(":TIMebase:POSition", lambda c: setattr(self, "tb_position", c.number(0, -500.0, 500.0)))
        t.add(":TIMebase:POSition?", lambda c: self._number(self.tb_position))
        t.add(":TIMebase:REFerence", reference)
        t.add(":TIMebase:REFerence?", lambda c: self.tb_reference[:4])
        t.add(":SINGle", lambda c: self._arm())
        t.add(":DIGitize", digitize)
        t.add(":TER?", ter)
        t.add(":AER?", aer)
        t.add(":OPERegister:CONDition?", operation_condition)
        self._register_waveform()

    def _register_waveform(self) -> None:
        t = self.tree

        def wav_format(call: Call) -> None:
            self.wav_format = call.choice(0, "ASCii", "BYTE", "WORD")

        def delay(call: Call) -> str:
            return self._delay(chan_number(call.arg(0)), chan_number(call.arg(1)))

        def points(call: Call) -> None:
            self.wav_points = int(call.number(0, 100, self.RAW_POINTS))

        t.add(":ACQuire:POINts?", lambda c: f"+{self.RAW_POINTS}")
        t.add(":WAVeform:FORMat", wav_format)
        t.add(":WAVeform:FORMat?", lambda c: {"ASCII": "ASC"}.get(self.wav_format, self.wav_format))
        t.add(":WAVeform:UNSigned", lambda c: setattr(self, "wav_unsigned", c.boolean(0)))
        t.add(":WAVeform:UNSigned?", lambda c: "1" if self.wav_unsigned else "0")
        t.add(":WAVeform:BYTeorder", lambda c: setattr(
            self, "wav_lsb_first", c.choice(0, "LSBFirst", "MSBFirst") == "LSBFIRST"))
        t.add(":WAVeform:BYTeorder?", lambda c: "LSBF" if self.wav_lsb_first else "MSBF")
        t.add(":WAVeform:POINts:MODE", lambda c: setattr(
            self, "wav_points_mode", c.option(0, "NORMal", "MAXimum", "RAW")))
        t.add(":WAVeform:POINts:MODE?", lambda c: short_form(self.wav_points_mode))
        t.add(":WAVeform:TYPE?", lambda c: short_form(self.acq_type)[:4])
        t.add(":WAVeform:COUNt?", lambda c: "+1")
        t.add(":WAVeform:POINts", points)
        t.add(":WAVeform:POINts?", lambda c: f"+{self._selection()[2]}")
        t.add(":MEASure:DELay?", delay)

    def _stored_settings(self) -> None:
        """Documented commands whose effect the emulator shows only in their own query, and the
        display/status ones that follow from the channel state."""
        t = self.tree

        def display(on: bool) -> Handler:
            return lambda c: setattr(self.channels[chan_number(c.arg(0))], "display", on)

        for node, default, kind in (
                (":AUToscale:AMODE", "NORMal", enumerated("NORMal", "CURRent")),
                (":AUToscale:CHANnels", "ALL", enumerated("ALL", "DISPlayed")),
                (":MTEenable", 0, numeric(0, 65535, "+{:.0f}")), (":OPEE", 0, numeric(0, 65535, "+{:.0f}")),
                (":OVLenable", 0, numeric(0, 65535, "+{:.0f}")),
                (":ACQuire:COMPlete", 100, numeric(0, 100, "+{:.0f}")),
                (":CHANnel<n>:PROBe:STYPe", "SINGle", enumerated("DIFFerential", "SINGle")),
                (":CHANnel<n>:VERNier", False, on_off()), (":SYSTem:LOCK", False, on_off()),
                (":TIMebase:VERNier", False, on_off()), (":TIMebase:WINDow:POSition", 0.0, numeric(-500, 500)),
                (":TIMebase:WINDow:RANGe", 1e-3, numeric(1e-9, 500)),
                (":TIMebase:WINDow:SCALe", 1e-4, numeric(1e-10, 50)),
                (":TRIGger:HFReject", False, on_off()), (":TRIGger:NREJect", False, on_off()),
                (":TRIGger:HOLDoff", 40e-9, numeric(40e-9, 10.0)),
                (":TRIGger[:EDGE]:COUPling", "DC", enumerated("AC", "DC", "LFReject")),
                (":TRIGger[:EDGE]:REJect", "OFF", enumerated("OFF", "LFReject", "HFReject")),
                (":WAVeform:VIEW", "MAIN", enumerated("MAIN"))):
            self.add_setting(node, default, kind)
        t.add(":MTERegister[:EVENt]?", lambda c: "+0")
        t.add(":OVLRegister?", lambda c: "+0")  # no input overloaded (the emulated inputs are 1 MOhm)
        t.add(":OPERegister[:EVENt]?", lambda c: f"+{8 if self.state in ('RUN', 'ARMING', 'ARMED') else 0}")
        t.add(":BLANk", display(False))
        t.add(":VIEW", display(True))
        t.add(":STATus?", lambda c: str(int(self.channels[chan_number(c.arg(0))].display)))
        t.add(":SERial?", lambda c: f'"{self.idn.split(",")[2]}"')
        t.add(":CHANnel<n>:BANDwidth?",
              lambda c: f"{25e6 if self.channels[_suffix_channel(c)].bwlimit else 200e6:+.8E}")
        t.add(":CHANnel<n>:PROBe:ID?", fixed('"No Probe"', _suffix_channel))  # a plain passive probe
        t.add(":CHANnel<n>:PROTection?", fixed("NORM", _suffix_channel))  # 1 MOhm inputs never trip
        t.add(":CHANnel<n>:PROTection:CLEar", fixed(None, _suffix_channel))
        t.add(":MEASure:CLEar", fixed(None))
        t.add(":TRIGger:FORCe", lambda c: self._force())


def _suffix_channel(call: Call) -> int:
    if call.suffixes[0] not in range(1, 5):
        raise ScpiError(HEADER_SUFFIX, f"channel {call.suffixes[0]}")
    return call.suffixes[0]
