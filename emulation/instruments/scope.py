"""Emulated 4-channel oscilloscope: Keysight InfiniiVision X or Rigol DS1000Z command set.

The scope samples the world's audio fixture: stimulus on channel 1, the phone's answer on
channel 2. Status polls (:TER?, :AER?, :TRIGger:STATus?) and *OPC? after :DIGitize wait in
simulated time, so a trial takes simulated seconds, not wall seconds. Waveforms are encoded
exactly as the real instruments do (preamble + IEEE block of codes).

What the real scopes do and a lenient emulator would hide (docs/instruments.md):
- A single acquisition is not armed at once: the pre-trigger part of the record must fill
  first. A trigger edge before that is not seen (the scope may trigger later, on the wrong edge).
- InfiniiVision: :TER? and :AER? are event registers, latched until read or *CLS. A running
  scope triggers and arms over and over, so both read 1 after :SINGle unless cleared before.
  Reading waveform data of a single acquisition that has not completed is refused (-230).
- DS1000Z: :SINGle takes effect a moment later (the status still reads the previous state
  meanwhile); RAW memory reads need the scope stopped; at most 250,000 BYTE points per read.

Each channel keeps its own setup (scale, offset, coupling, probe, bandwidth limit, invert,
label, impedance, units). Enumerations are answered in their short forms (`MAX`, `CENT`).
"""
from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .scpi import (
    DATA_STALE,
    DATA_TYPE_ERROR,
    HEADER_SUFFIX,
    ILLEGAL_VALUE,
    OUT_OF_RANGE,
    SETTINGS_CONFLICT,
    Call,
    Handler,
    ScpiError,
    ieee_block,
    short_form,
)
from . import trace_timing
from .server import InstrumentServer, enumerated, fixed, numeric, on_off
from ..world import World

log = logging.getLogger(__name__)

POLL_QUANTUM_S = 0.05  # simulated time one status poll takes while nothing is due to trigger
AUTO_TRIGGER_S = 0.04  # AUTO sweep forces a trigger this long after arming
DIGITIZE_MAX_WAIT_S = 30.0  # *OPC? after :DIGitize gives up (stays silent) after this long
INVALID = 9.9e37  # what a scope returns for a measurement it cannot make
DESKEW_LIMIT_S = 100e-9  # the real scopes accept deskew values within ±100 ns
# Static input delay per channel (probe, cable and front end): what deskew calibrates out.
# A channel's deskew of +d shows its signal d earlier, so deskew = +INPUT_DELAY_S[n] removes it.
INPUT_DELAY_S = {1: 0.0, 2: 35e-9, 3: 0.0, 4: 0.0}
MEASURE_POINTS = 100_000
COMMAND_LATENCY_S = 0.5e-3  # simulated time a command unit takes to parse and execute
ARM_LATENCY_S = 2e-3  # :SINGle to the start of the pre-trigger fill
RIGOL_SINGLE_LATENCY_S = 0.1  # DS1000Z: :SINGle reaches the acquisition system this much later
KEYSIGHT_RAW_POINTS = 4_000_000  # acquisition record in RAW/MAX points mode (3000T: 4 Mpts)
KEYSIGHT_NORMAL_POINTS = 62_500
RIGOL_SCREEN_POINTS = 1200
RIGOL_DEPTHS = (12_000, 120_000, 1_200_000, 12_000_000, 24_000_000)
RIGOL_AUTO_DEPTH = 1_200_000
RIGOL_BATCH = {"BYTE": 250_000, "WORD": 125_000}

IDN = {
    "keysight": "KEYSIGHT TECHNOLOGIES,DSOX3024T,MY58101234,07.50.2021102830",
    "rigol": "RIGOL TECHNOLOGIES,DS1104Z,DS1ZA201234567,00.04.04.SP4",
}
# *OPT?: the InfiniiVision answers its licensed options (none here: "0"); the DS1000Z has no *OPT?.
OPTIONS = {"keysight": "0", "rigol": None}
NO_ERROR = {"keysight": '+0,"No error"', "rigol": '0,"No error"'}  # the empty error queue's answer
BLOCK_DIGITS = {"keysight": 8, "rigol": 9}  # `#800001000...` / `#9000001200...`
ACQUIRE_TYPES = {"keysight": ("NORMal", "AVERage", "HRESolution", "PEAK"),
                 "rigol": ("NORMal", "AVERages", "PEAK", "HRESolution")}
TIMEBASE_MODES = {"keysight": ("MAIN", "WINDow", "XY", "ROLL"), "rigol": ("MAIN", "XY", "ROLL")}
# :MEASure:ITEM? items of the DS1000Z (the emulator measures the voltages and the delays).
RIGOL_ITEMS = ("VMAX", "VMIN", "VPP", "VTOP", "VBASe", "VAMP", "VAVG", "VRMS", "OVERshoot", "MARea", "MPARea",
               "PREShoot", "PERiod", "FREQuency", "RTIMe", "FTIMe", "PWIDth", "NWIDth", "PDUTy", "NDUTy", "RDELay",
               "FDELay", "RPHase", "FPHase", "TVMAX", "TVMIN", "PSLEWrate", "NSLEWrate", "VUPper", "VMID", "VLOWer",
               "VARIance", "PVRMs", "PPULses", "NPULses", "PEDGes", "NEDGes")
TIMING_ITEMS = ("PERiod", "FREQuency", "RTIMe", "FTIMe", "PWIDth", "NWIDth", "PDUTy")
BANDWIDTH = {"keysight": ("OFF", "ON"), "rigol": ("OFF", "20M")}  # what :BWLimit takes


@dataclass
class ChannelSetup:
    number: int = 1
    scale_v: float = 1.0
    offset_v: float = 0.0
    coupling: str = "DC"
    probe: float = 1.0
    display: bool = True
    skew_s: float = 0.0
    bwlimit: bool = False
    invert: bool = False
    label: str = ""
    impedance: str = "ONEMeg"
    units: str = "VOLT"


@dataclass
class Acquisition:
    id: int
    t_trigger: float  # world time of the trigger
    x_origin: float  # first sample, relative to the trigger
    span_s: float
    records: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    blocks: dict[tuple, bytes] = field(default_factory=dict)  # encoded transfers, reused on re-reads


class ScopeServer(InstrumentServer):
    FAULTS = InstrumentServer.FAULTS | {"garbage_block", "truncated_block", "wrong_preamble",
                                        "invalid_measure", "holes"}
    COMMAND_LATENCY_S = COMMAND_LATENCY_S
    SAVED_STATE = ("channels", "tb_scale", "tb_position", "tb_reference", "tb_mode", "trig_source", "trig_level",
                   "trig_rising", "trig_sweep", "acq_type", "acq_mode", "acq_count")
    SAVE_SLOTS = range(10)

    def __init__(self, world: World, dialect: str = "keysight", port: int = 0) -> None:
        if dialect not in IDN:
            raise ValueError(f"unknown scope dialect {dialect!r}; known: {sorted(IDN)}")
        super().__init__(port)
        self.world = world
        self.dialect = dialect
        self.family = "keysight-infiniivision" if dialect == "keysight" else "rigol-ds1000z"
        self.idn = IDN[dialect]
        self.options = OPTIONS[dialect]
        self.no_error = NO_ERROR[dialect]
        self._acq_count = 0
        self.reset()
        (self._register_keysight if dialect == "keysight" else self._register_rigol)()

    # --- state ----------------------------------------------------------------------------
    def reset(self) -> None:
        self.channels = {n: ChannelSetup(n, display=n <= 2, label=f"{n}") for n in range(1, 5)}
        self.tb_scale = 1e-3
        self.tb_position = 0.0
        self.tb_reference = "CENTER"
        self.trig_source = 1
        self.trig_level = 0.0
        self.trig_rising = True
        self.trig_sweep = "AUTO"
        # RUN (free running), STOP, ARMING (single: pre-trigger filling), ARMED, DONE (single complete).
        self.state = "RUN"
        self.arm_time = 0.0  # when the single acquisition starts filling its pre-trigger part
        self.armed_at = 0.0  # when it can accept a trigger
        self.run_checked = self.world.clock.now()  # running: events looked at up to here
        self.stale_status = ""  # DS1000Z: what :TRIG:STAT? says until :SINGle takes effect
        self.acq: Acquisition | None = None
        self._digitize_pending = False
        self._ter = False  # trigger event register (latched until read or *CLS)
        self._aer = False  # arm event register (likewise)
        self.wav_source = 1
        self.wav_format = "BYTE"
        self.wav_unsigned = True
        self.wav_lsb_first = False  # InfiniiVision: MSBFirst after *RST (:WAVeform:BYTeorder)
        self.wav_points_mode = "NORMal"
        self.wav_points = KEYSIGHT_NORMAL_POINTS if self.dialect == "keysight" else RIGOL_SCREEN_POINTS
        self.rigol_mode = "NORMAL"
        self.rigol_depth: int | None = None  # None = AUTO
        self.rigol_start, self.rigol_stop = 1, RIGOL_SCREEN_POINTS
        self.tb_mode = "MAIN"
        self.acq_type = "NORMal"
        self.acq_mode = "RTIMe"
        self.acq_count = 8
        self.measure_source = 1

    def _window(self) -> tuple[float, float]:
        """(first sample relative to trigger, span) of the acquisition window."""
        if self.dialect == "keysight":
            span = 10 * self.tb_scale
            reference = {"LEFT": 0.1, "CENTER": 0.5, "RIGHT": 0.9}[self.tb_reference]
            return self.tb_position - reference * span, span
        span = 12 * self.tb_scale
        return self.tb_position - span / 2, span

    def _find_trigger(self, t_from: float) -> float | None:
        audio = self.world.audio
        if abs(self.trig_level) < 4 * audio.noise_rms_v(self.trig_source):
            return t_from  # the level sits in the noise: the scope triggers on noise at once
        return audio.first_crossing(self.trig_source, self.trig_level, t_from, self.trig_rising)

    def elapse(self, seconds: float) -> None:
        self.world.wait(seconds)

    def _arm(self, latency_s: float = ARM_LATENCY_S) -> None:
        """Start a single acquisition: armed once the pre-trigger part of the record has filled."""
        self._latch_running()
        now = self.world.clock.now()
        x_origin, _ = self._window()
        self.state = "ARMING"
        self.arm_time = now + latency_s
        self.armed_at = self.arm_time + max(0.0, -x_origin)

    def _latch_running(self) -> None:
        """A running scope arms and triggers continuously: latch what happened since the last look."""
        now = self.world.clock.now()
        if self.state == "RUN":
            self._aer = True
            edge = self._find_trigger(self.run_checked)
            if self.trig_sweep == "AUTO" or (edge is not None and edge <= now):
                self._ter = True
        elif self.state == "ARMING" and now >= self.armed_at:
            self.state = "ARMED"
        if self.state == "ARMED":
            self._aer = True
        self.run_checked = now

    def _wait_armed(self) -> None:
        """A status poll while the pre-trigger part fills: simulated time passes."""
        if self.state == "ARMING":
            self.world.wait(min(POLL_QUANTUM_S, max(0.0, self.armed_at - self.world.clock.now())))
        self._latch_running()

    def _resolve(self, poll: bool) -> bool:
        """Finish a single acquisition if its trigger is due; a poll waits a quantum otherwise."""
        if self.state not in ("ARMING", "ARMED"):
            return self.state == "DONE"
        # Edges before the scope is armed are not seen.
        t_trigger = self._find_trigger(self.armed_at)
        if t_trigger is None and self.trig_sweep == "AUTO":
            t_trigger = self.armed_at + AUTO_TRIGGER_S
        if t_trigger is None:
            if poll:
                self.world.wait(POLL_QUANTUM_S)
                self._latch_running()
            return False
        self._complete_at(t_trigger)
        return True

    def _complete_at(self, t_trigger: float) -> None:
        x_origin, span = self._window()
        self._acq_count += 1
        self.acq = Acquisition(self._acq_count, t_trigger, x_origin, span)
        self.world.wait_until(t_trigger + x_origin + span)  # the record fills in simulated time
        self.state = "DONE"
        self._ter = self._aer = True
        log.debug("%s triggered at %.6f (acquisition %d)", self.family, t_trigger, self._acq_count)

    def _force(self) -> None:
        """:TRIGger:FORCe / :TFORce: trigger now if armed (not before the pre-trigger part is in)."""
        self._latch_running()
        if self.state == "ARMED":
            self._complete_at(self.world.clock.now())
        elif self.state == "RUN":
            self._ter = True

    def _current_acquisition(self) -> Acquisition:
        """The acquisition the data commands read; a running scope shows its latest sweep."""
        if self._digitize_pending:
            # :DIGitize is sequential on the InfiniiVision: what follows waits until it is done.
            self.complete_pending()
        if self.state in ("ARMING", "ARMED") and self.dialect == "keysight":
            raise ScpiError(DATA_STALE, "the single acquisition has not completed (wait for :TER? = 1)")
        if self.state in ("RUN", "ARMING", "ARMED") or self.acq is None:
            x_origin, span = self._window()
            self._acq_count += 1
            self.acq = Acquisition(self._acq_count, self.world.clock.now() - x_origin - span, x_origin, span)
        return self.acq

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

    def _run_acquisition(self) -> None:
        self.state = "RUN"
        self.run_checked = self.world.clock.now()

    def _stop_acquisition(self) -> None:
        self._latch_running()
        if self.state != "DONE":
            self.state = "STOP"

    def _rigol_status(self) -> str:
        if self.state == "RUN":
            return "AUTO" if self.trig_sweep == "AUTO" else "RUN"
        return {"ARMING": "RUN", "ARMED": "WAIT"}.get(self.state, "STOP")

    def _cls(self, call: Call) -> None:
        super()._cls(call)
        self._ter = self._aer = False

    # --- signal -----------------------------------------------------------------------------
    def _record(self, acq: Acquisition, channel: int, points: int) -> np.ndarray:
        """Volts at the probe tip as the scope displays them (probe factor, coupling, skew)."""
        key = (channel, points)
        if key not in acq.records:
            setup = self.channels[channel]
            xinc = acq.span_s / points
            offsets = acq.x_origin + np.arange(points) * xinc + (setup.skew_s - INPUT_DELAY_S[channel])
            rng = np.random.default_rng([self.world.seed, zlib.crc32(self.family.encode()), acq.id, channel])
            volts = self.world.audio.acquire(channel, acq.t_trigger, offsets, rng) * setup.probe
            if setup.invert:
                volts = -volts
            if setup.coupling == "GND":
                volts[:] = 0.0
            if len(acq.records) > 8:
                acq.records.clear()
            acq.records[key] = volts
        return acq.records[key]

    def _scaling(self, channel: int, bits: int) -> tuple[float, float, float]:
        """(yinc, yorigin, yref) of this dialect's unsigned codes for a channel's setup."""
        setup = self.channels[channel]
        full = 1 << bits
        if self.dialect == "keysight":
            return 8 * setup.scale_v / full, setup.offset_v, float(full // 2)
        wide = 256 if bits == 16 else 1
        yinc = setup.scale_v / 25 / wide
        return yinc, float(np.rint(setup.offset_v / yinc)), float(127 * wide)

    def _codes(self, volts: np.ndarray, channel: int, bits: int) -> np.ndarray:
        yinc, yorigin, yref = self._scaling(channel, bits)
        full = 1 << bits
        dtype = np.uint16 if bits == 16 else np.uint8
        if self.dialect == "keysight":
            # 0 = hole; 1 and the top code = clipped low / high.
            return np.clip(np.rint((volts - yorigin) / yinc) + yref, 1, full - 1).astype(dtype)
        return np.clip(np.rint(volts / yinc + yorigin + yref), 0, full - 1).astype(dtype)

    # --- waveform transfer --------------------------------------------------------------------
    def _selection(self) -> tuple[int, int, int]:
        """(record points, first index, count) the next :WAV:DATA? returns."""
        if self.dialect == "rigol" and self.rigol_mode == "RAW" and self.state not in ("STOP", "DONE"):
            raise ScpiError(SETTINGS_CONFLICT, "RAW memory reads need the scope stopped (:STOP)")
        if self.dialect == "keysight":
            limit = KEYSIGHT_NORMAL_POINTS if self.wav_points_mode == "NORMal" else KEYSIGHT_RAW_POINTS
            points = min(self.wav_points, limit)
            return points, 0, points
        record = RIGOL_SCREEN_POINTS if self.rigol_mode == "NORMAL" else (self.rigol_depth or RIGOL_AUTO_DEPTH)
        start, stop = self.rigol_start, min(self.rigol_stop, record)
        if start > stop:
            raise ScpiError(SETTINGS_CONFLICT, f"start {start} after stop {stop}")
        count = stop - start + 1
        if self.rigol_mode != "NORMAL" and count > RIGOL_BATCH[self.wav_format]:
            raise ScpiError(OUT_OF_RANGE, f"{count} points in one read; at most {RIGOL_BATCH[self.wav_format]}")
        return record, start - 1, count

    def _preamble(self, acq: Acquisition) -> str:
        record, first, count = self._selection()
        bits = 8 if self.wav_format == "BYTE" else 16
        yinc, yorigin, yref = self._scaling(self.wav_source, bits)
        xinc = acq.span_s / record
        xorigin = acq.x_origin + first * xinc
        fmt_code = {"BYTE": 0, "WORD": 1, "ASCII": 4}[self.wav_format]
        if self.dialect == "keysight":
            if not self.wav_unsigned:
                yref -= 1 << (bits - 1)
            type_code = {"NORMal": 0, "PEAK": 1, "AVERage": 2, "HRESolution": 3}[self.acq_type]
            return (f"+{fmt_code},+{type_code},+{count},+1,{xinc:+.8E},{xorigin:+.8E},+0,"
                    f"{yinc:+.8E},{yorigin:+.8E},{int(yref):+d}")
        type_code = {"NORMAL": 0, "MAXIMUM": 1, "RAW": 2}[self.rigol_mode]
        return f"{fmt_code},{type_code},{count},1,{xinc:.6e},{xorigin:.6e},0,{yinc:.6e},{int(yorigin)},{int(yref)}"

    def _payload(self, acq: Acquisition) -> bytes:
        record, first, count = self._selection()
        bits = 8 if self.wav_format == "BYTE" else 16
        key = ("block", self.wav_source, record, first, count, self.wav_format, self.wav_unsigned, self.wav_lsb_first)
        if key not in acq.blocks:
            volts = self._record(acq, self.wav_source, record)[first:first + count]
            codes = self._codes(volts, self.wav_source, bits)
            if self.wav_format == "ASCII":  # volts as the scope computes them from its codes, comma-separated
                yinc, yorigin, yref = self._scaling(self.wav_source, bits)
                values = (codes.astype(np.float64) - yref) * yinc + yorigin
                acq.blocks.clear()
                acq.blocks[key] = ",".join(f"{v:+.6E}" for v in values).encode()
                return acq.blocks[key]
            if self.dialect == "keysight" and not self.wav_unsigned:
                codes = (codes.astype(np.int32) - (1 << (bits - 1))).astype(np.int16 if bits == 16 else np.int8)
            little = self.wav_lsb_first or self.dialect == "rigol"
            acq.blocks.clear()
            acq.blocks[key] = codes.astype(codes.dtype.newbyteorder("<" if little else ">")).tobytes()
        return acq.blocks[key]

    def _wav_data(self, call: Call) -> bytes:
        payload = self._payload(self._current_acquisition())
        if self.take_fault("holes") and len(payload) > 100:
            hole = bytearray(payload)
            hole[len(hole) // 3: len(hole) // 3 + len(hole) // 50] = bytes(len(hole) // 50)
            payload = bytes(hole)
        if self.take_fault("garbage_block"):
            return b"\x00\x13garbage instead of a block"
        block = ieee_block(payload, BLOCK_DIGITS[self.dialect])
        if self.take_fault("truncated_block"):
            return block[:len(block) // 2]
        return block

    def _wav_preamble(self, call: Call) -> str:
        preamble = self._preamble(self._current_acquisition())
        if self.take_fault("wrong_preamble"):
            return ",".join(preamble.split(",")[:7])
        return preamble

    # --- measurements ---------------------------------------------------------------------------
    def _edge_time(self, acq: Acquisition, channel: int) -> float | None:
        """First rising crossing of half the peak, on the displayed (screen-limited) trace."""
        setup = self.channels[channel]
        volts = self._record(acq, channel, MEASURE_POINTS)
        volts = np.clip(volts, setup.offset_v - 4 * setup.scale_v, setup.offset_v + 4 * setup.scale_v)
        peak = float(np.max(volts))
        if peak < 5 * self.world.audio.noise_rms_v(channel) * setup.probe:
            return None
        index = np.flatnonzero(volts >= peak / 2)
        return acq.x_origin + index[0] * acq.span_s / MEASURE_POINTS

    def _delay(self, source_a: int, source_b: int) -> str:
        acq = self._current_acquisition()
        t_a, t_b = self._edge_time(acq, source_a), self._edge_time(acq, source_b)
        if self.take_fault("invalid_measure") or t_a is None or t_b is None:
            value = INVALID
        else:
            value = t_b - t_a
        return self._number(value)

    # --- command tables ---------------------------------------------------------------------------
    def _channel_commands(self, skew_node: str) -> None:
        t = self.tree

        def chan(call: Call) -> ChannelSetup:
            n = call.suffixes[0]
            if n not in self.channels:
                raise ScpiError(HEADER_SUFFIX, f"channel {n}; the model has channels 1 to {len(self.channels)}")
            return self.channels[n]

        def label(call: Call) -> None:
            text = call.arg(0).strip()
            if len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0]:
                raise ScpiError(DATA_TYPE_ERROR, f"{text!r} is not a quoted string")
            chan(call).label = text[1:-1].upper()[:10]  # upper case, at most 10 characters

        def set_range(call: Call) -> None:
            setup = chan(call)
            setup.scale_v = call.number(0, 8e-3 * setup.probe, 80.0 * setup.probe) / 8

        def bwlimit(call: Call) -> None:
            off, on = BANDWIDTH[self.dialect]
            text = call.arg(0).strip().upper()
            value = {"0": False, "1": True, off: False, on: True}.get(text)
            if value is None:
                raise ScpiError(ILLEGAL_VALUE, f"{text!r}: {off} or {on}")
            chan(call).bwlimit = value

        def setter(attr: str, convert: Callable[[Call], object]) -> Handler:
            return lambda c: setattr(chan(c), attr, convert(c))

        t.add(":CHANnel<n>:SCALe", setter("scale_v", lambda c: c.number(0, 1e-3, 10.0)))
        t.add(":CHANnel<n>:SCALe?", lambda c: self._number(chan(c).scale_v))
        t.add(":CHANnel<n>:OFFSet", setter("offset_v", lambda c: c.number(0, -40.0, 40.0)))
        t.add(":CHANnel<n>:OFFSet?", lambda c: self._number(chan(c).offset_v))
        couplings = ("DC", "AC") if self.dialect == "keysight" else ("DC", "AC", "GND")  # no GND on the InfiniiVision
        t.add(":CHANnel<n>:COUPling", setter("coupling", lambda c: c.choice(0, *couplings)))
        t.add(":CHANnel<n>:COUPling?", lambda c: chan(c).coupling)
        t.add(":CHANnel<n>:RANGe", set_range)
        t.add(":CHANnel<n>:RANGe?", lambda c: self._number(8 * chan(c).scale_v))
        t.add(":CHANnel<n>:BWLimit", bwlimit)
        t.add(":CHANnel<n>:BWLimit?", lambda c: (BANDWIDTH[self.dialect][1] if chan(c).bwlimit else
                                                 BANDWIDTH[self.dialect][0]) if self.dialect == "rigol"
              else str(int(chan(c).bwlimit)))
        t.add(":CHANnel<n>:INVert", setter("invert", lambda c: c.boolean(0)))
        t.add(":CHANnel<n>:INVert?", lambda c: str(int(chan(c).invert)))
        t.add(":CHANnel<n>:LABel", label)
        t.add(":CHANnel<n>:LABel?", lambda c: f'"{chan(c).label}"')
        t.add(":CHANnel<n>:UNITs", setter("units", lambda c: short_form(
            c.option(0, "VOLT", "AMPere") if self.dialect == "keysight" else
            c.option(0, "VOLTage", "WATT", "AMPere", "UNKNown"))))
        t.add(":CHANnel<n>:UNITs?", lambda c: chan(c).units)
        t.add(":CHANnel<n>:PROBe", setter("probe", lambda c: c.number(0, 0.001, 10000.0)))
        t.add(":CHANnel<n>:PROBe?", lambda c: self._number(chan(c).probe))
        t.add(":CHANnel<n>:DISPlay", setter("display", lambda c: c.boolean(0)))
        t.add(":CHANnel<n>:DISPlay?", lambda c: "1" if chan(c).display else "0")
        t.add(skew_node, setter("skew_s", lambda c: c.number(0, -DESKEW_LIMIT_S, DESKEW_LIMIT_S)))
        t.add(skew_node + "?", lambda c: self._number(chan(c).skew_s))

    def _measure_source(self, call: Call, index: int) -> int:
        return _chan_number(call.arg(index)) if call.has(index) else self.measure_source

    def _statistic(self, channel: int, name: str) -> str:
        """:MEASure:VPP? and kin over the displayed (screen-limited) trace of the current acquisition."""
        setup = self.channels[channel]
        volts = self._record(self._current_acquisition(), channel, MEASURE_POINTS)
        low, high = setup.offset_v - 4 * setup.scale_v, setup.offset_v + 4 * setup.scale_v
        if self.take_fault("invalid_measure") or np.max(volts) > high or np.min(volts) < low:
            value = INVALID  # clipped: the scope cannot measure off the screen
        else:
            # VTOP/VBASe/VAMP as the extremes: the scope's histogram modes, for the waveforms here
            # (audio bursts over noise), differ from them by about the noise.
            value = {"VPP": np.ptp(volts), "VMAX": np.max(volts), "VMIN": np.min(volts), "VTOP": np.max(volts),
                     "VBASE": np.min(volts), "VAMP": np.ptp(volts),
                     "VAVG": np.mean(volts), "VRMS": np.sqrt(np.mean(volts ** 2))}[name.upper()]
        return self._number(value)

    def _timing(self, channel: int, name: str) -> str:
        """:MEASure:FREQuency? and the other time measurements on the current acquisition."""
        acq = self._current_acquisition()
        volts = self._record(acq, channel, MEASURE_POINTS)
        noisy = np.ptp(volts) < 10 * self.world.audio.noise_rms_v(channel) * self.channels[channel].probe
        value = None if noisy or self.take_fault("invalid_measure") else trace_timing.measure(
            name, volts, acq.span_s / MEASURE_POINTS)
        return self._number(INVALID if value is None else value)

    def _phase(self, source_a: int, source_b: int) -> str:
        acq = self._current_acquisition()
        value = trace_timing.phase(self._record(acq, source_a, MEASURE_POINTS),
                                   self._record(acq, source_b, MEASURE_POINTS), acq.span_s / MEASURE_POINTS)
        return self._number(INVALID if value is None or self.take_fault("invalid_measure") else value)

    def _autoscale(self) -> None:
        """:AUToscale: channels carrying a signal are shown at a scale that fits it, the others
        turned off, the trigger set on the first of them; no signal anywhere changes nothing."""
        self._run_acquisition()
        acq = self._current_acquisition()
        found = []
        for n, setup in self.channels.items():
            volts = self._record(acq, n, MEASURE_POINTS)
            if np.ptp(volts) > 10 * self.world.audio.noise_rms_v(n) * setup.probe:
                found.append((n, float(np.min(volts)), float(np.max(volts))))
        if not found:
            log.info("%s: autoscale found no signal; settings unchanged", self.family)
            return
        for n, setup in self.channels.items():
            setup.display = any(f[0] == n for f in found)
        for n, low, high in found:
            setup = self.channels[n]
            setup.scale_v = _nice_scale((high - low) / 6)
            setup.offset_v = (high + low) / 2
        n, low, high = found[0]
        self.trig_source, self.trig_level, self.trig_rising = n, (high + low) / 2, True
        self.trig_sweep = "AUTO"

    def _keysight_settings(self) -> None:
        """Documented commands whose effect the emulator shows only in their own query, and the
        display/status ones that follow from the channel state."""
        t = self.tree

        def display(on: bool) -> Handler:
            return lambda c: setattr(self.channels[_chan_number(c.arg(0))], "display", on)

        for node, default, kind in (
                (":AUToscale:AMODE", "NORMal", enumerated("NORMal", "CURRent")),
                (":AUToscale:CHANnels", "ALL", enumerated("ALL", "DISPlayed")),
                (":MTEenable", 0, numeric(0, 65535, "+{:.0f}")), (":OPEE", 0, numeric(0, 65535, "+{:.0f}")),
                (":OVLenable", 0, numeric(0, 65535, "+{:.0f}")), (":ACQuire:COMPlete", 100, numeric(0, 100, "+{:.0f}")),
                (":CHANnel<n>:PROBe:STYPe", "SINGle", enumerated("DIFFerential", "SINGle")),
                (":CHANnel<n>:VERNier", False, on_off()), (":SYSTem:LOCK", False, on_off()),
                (":TIMebase:VERNier", False, on_off()), (":TIMebase:WINDow:POSition", 0.0, numeric(-500, 500)),
                (":TIMebase:WINDow:RANGe", 1e-3, numeric(1e-9, 500)), (":TIMebase:WINDow:SCALe", 1e-4, numeric(1e-10, 50)),
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
        t.add(":STATus?", lambda c: str(int(self.channels[_chan_number(c.arg(0))].display)))
        t.add(":SERial?", lambda c: f'"{self.idn.split(",")[2]}"')
        t.add(":CHANnel<n>:BANDwidth?", lambda c: f"{25e6 if self.channels[_suffix_channel(c)].bwlimit else 200e6:+.8E}")
        t.add(":CHANnel<n>:PROBe:ID?", fixed('"No Probe"', _suffix_channel))  # a plain passive probe
        t.add(":CHANnel<n>:PROTection?", fixed("NORM", _suffix_channel))  # 1 MOhm inputs never trip
        t.add(":CHANnel<n>:PROTection:CLEar", fixed(None, _suffix_channel))
        t.add(":MEASure:CLEar", fixed(None))
        t.add(":TRIGger:FORCe", lambda c: self._force())

    def _number(self, value: float) -> str:
        """A numeric answer in the model's form: +1.00000000E+00 (InfiniiVision), 1.000000e+00 (DS1000Z)."""
        return f"{value:+.8E}" if self.dialect == "keysight" else f"{value:.6e}"

    def _rigol_averages(self, call: Call) -> None:
        count = int(call.number(0, 2, 1024))
        if count & (count - 1):
            raise ScpiError(ILLEGAL_VALUE, f"{count} averages; a power of 2 from 2 to 1024")
        self.acq_count = count

    def _trigger_commands(self, edge: str) -> None:
        t = self.tree

        def source(call: Call) -> None:
            word = call.arg(0).upper()
            digits = "".join(ch for ch in word if ch.isdigit())
            if not word.startswith("CHAN") or not digits or int(digits) not in self.channels:
                raise ScpiError(ILLEGAL_VALUE, f"trigger source {word}")
            self.trig_source = int(digits)

        def slope(call: Call) -> None:
            self.trig_rising = call.choice(0, "POSitive", "NEGative") == "POSITIVE"

        def mode(call: Call) -> None:
            call.choice(0, "EDGE")  # only edge triggering is emulated

        t.add(":TRIGger:MODE", mode)
        t.add(":TRIGger:MODE?", lambda c: "EDGE")
        t.add(f":TRIGger[:{edge}]:SOURce", source)
        t.add(f":TRIGger[:{edge}]:SOURce?", lambda c: f"CHAN{self.trig_source}")
        t.add(f":TRIGger[:{edge}]:LEVel", lambda c: setattr(self, "trig_level", c.number(0, -100.0, 100.0)))
        t.add(f":TRIGger[:{edge}]:LEVel?", lambda c: self._number(self.trig_level))
        t.add(f":TRIGger[:{edge}]:SLOPe", slope)
        t.add(f":TRIGger[:{edge}]:SLOPe?", lambda c: "POS" if self.trig_rising else "NEG")

    def _register_keysight(self) -> None:
        t = self.tree
        self._channel_commands(":CHANnel<n>:PROBe:SKEW")
        self._trigger_commands("EDGE")

        def digitize(call: Call) -> None:
            for index in range(len(call.args)):
                _chan_number(call.arg(index))  # only the analog channels are modelled
            self._arm()
            self._digitize_pending = True

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

        def wav_format(call: Call) -> None:
            self.wav_format = call.choice(0, "ASCii", "BYTE", "WORD")

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

        def delay(call: Call) -> str:
            return self._delay(_chan_number(call.arg(0)), _chan_number(call.arg(1)))

        def points(call: Call) -> None:
            self.wav_points = int(call.number(0, 100, KEYSIGHT_RAW_POINTS))

        def keysight_sweep(call: Call) -> None:
            self._latch_running()  # what the old sweep mode triggered stays latched
            self.trig_sweep = call.choice(0, "AUTO", "NORMal")

        t.add(":TRIGger:SWEep", keysight_sweep)
        t.add(":TRIGger:SWEep?", lambda c: self.trig_sweep[:4])
        t.add(":CHANnel<n>?", setup_query)
        t.add(":CHANnel<n>:IMPedance", lambda c: setattr(self.channels[_suffix_channel(c)], "impedance",
                                                         c.option(0, "ONEMeg", "FIFTy")))
        t.add(":CHANnel<n>:IMPedance?", lambda c: short_form(self.channels[_suffix_channel(c)].impedance))
        t.add(":TIMebase?", timebase_query)
        self._keysight_settings()
        t.add(":TIMebase:MODE", lambda c: setattr(self, "tb_mode", c.option(0, *TIMEBASE_MODES["keysight"])))
        t.add(":TIMebase:MODE?", lambda c: short_form(self.tb_mode))
        t.add(":AUToscale", lambda c: self._autoscale())
        t.add(":SYSTem:PRESet", lambda c: self.reset())
        t.add(":ACQuire:TYPE", lambda c: setattr(self, "acq_type", c.option(0, *ACQUIRE_TYPES["keysight"])))
        t.add(":ACQuire:TYPE?", lambda c: short_form(self.acq_type))
        t.add(":ACQuire:MODE", lambda c: setattr(self, "acq_mode", c.option(0, "RTIMe", "SEGMented")))
        t.add(":ACQuire:MODE?", lambda c: short_form(self.acq_mode))
        t.add(":ACQuire:COUNt", lambda c: setattr(self, "acq_count", int(c.number(0, 2, 65536))))
        t.add(":ACQuire:COUNt?", lambda c: f"+{self.acq_count}")
        t.add(":ACQuire:SRATe?", lambda c: f"{KEYSIGHT_RAW_POINTS / self._window()[1]:+.8E}")
        t.add(":MEASure:SOURce", lambda c: setattr(self, "measure_source", _chan_number(c.arg(0))))
        t.add(":MEASure:SOURce?", lambda c: f"CHAN{self.measure_source}")
        for item, node in (("VPP", "VPP"), ("VMAX", "VMAX"), ("VMIN", "VMIN"), ("VAVG", "VAVerage"),
                           ("VRMS", "VRMS"), ("VTOP", "VTOP"), ("VBASE", "VBASe"), ("VAMP", "VAMPlitude")):
            t.add(f":MEASure:{node}?", lambda c, item=item: self._statistic(self._measure_source(c, 0), item))
        for node in ("FREQuency", "PERiod", "PWIDth", "NWIDth", "DUTYcycle", "RISetime", "FALLtime"):
            t.add(f":MEASure:{node}?", lambda c, node=node: self._timing(self._measure_source(c, 0), node))
        t.add(":MEASure:PHASe?", lambda c: self._phase(self._measure_source(c, 0), self._measure_source(c, 1)))
        t.add(":TIMebase:SCALe", lambda c: setattr(self, "tb_scale", c.number(0, 1e-9, 50.0)))
        t.add(":TIMebase:SCALe?", lambda c: f"{self.tb_scale:+.8E}")
        t.add(":TIMebase:RANGe", lambda c: setattr(self, "tb_scale", c.number(0, 1e-8, 500.0) / 10))
        t.add(":TIMebase:RANGe?", lambda c: f"{10 * self.tb_scale:+.8E}")
        t.add(":TIMebase:POSition", lambda c: setattr(self, "tb_position", c.number(0, -500.0, 500.0)))
        t.add(":TIMebase:POSition?", lambda c: f"{self.tb_position:+.8E}")
        t.add(":TIMebase:REFerence", reference)
        t.add(":TIMebase:REFerence?", lambda c: self.tb_reference[:4])
        t.add(":SINGle", lambda c: self._arm())
        t.add(":RUN", lambda c: self._run_acquisition())
        t.add(":STOP", lambda c: self._stop_acquisition())
        t.add(":DIGitize", digitize)
        t.add(":TER?", ter)
        t.add(":AER?", aer)
        t.add(":OPERegister:CONDition?", operation_condition)
        t.add(":ACQuire:POINts?", lambda c: f"+{KEYSIGHT_RAW_POINTS}")
        t.add(":WAVeform:SOURce", lambda c: setattr(self, "wav_source", _chan_number(c.arg(0))))
        t.add(":WAVeform:SOURce?", lambda c: f"CHAN{self.wav_source}")
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
        for index, node in enumerate(("XINCrement", "XORigin", "XREFerence", "YINCrement", "YORigin",
                                      "YREFerence"), start=4):
            t.add(f":WAVeform:{node}?", lambda c, i=index: self._preamble(self._current_acquisition()).split(",")[i])
        t.add(":WAVeform:POINts", points)
        t.add(":WAVeform:POINts?", lambda c: f"+{self._selection()[2]}")
        t.add(":WAVeform:PREamble?", self._wav_preamble)
        t.add(":WAVeform:DATA?", self._wav_data)
        t.add(":MEASure:DELay?", delay)

    def _register_rigol(self) -> None:
        t = self.tree
        self._channel_commands(":CHANnel<n>:TCALibrate")
        self._trigger_commands("EDGe")

        def sweep(call: Call) -> None:
            self.trig_sweep = call.choice(0, "AUTO", "NORMal", "SINGle")
            if self.trig_sweep == "SINGLE":
                self.stale_status = self._rigol_status()
                self.trig_sweep = "NORMAL"
                self._arm(RIGOL_SINGLE_LATENCY_S)

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
            return self._rigol_status()

        def depth(call: Call) -> None:
            text = call.arg(0).strip().upper()
            if text == "AUTO":
                self.rigol_depth = None
                return
            value = int(call.number(0))
            # The memory is shared: two channels on get half of each depth, three or four a quarter.
            on = sum(setup.display for setup in self.channels.values())
            share = 1 if on <= 1 else 2 if on == 2 else 4
            allowed = tuple(d // share for d in RIGOL_DEPTHS)
            if value not in allowed:
                raise ScpiError(ILLEGAL_VALUE, f"memory depth {value} with {on} channel(s) on; allowed AUTO or "
                                               f"{allowed}")
            self.rigol_depth = value

        def wav_mode(call: Call) -> None:
            self.rigol_mode = call.choice(0, "NORMal", "MAXimum", "RAW")

        def item_rigol(call: Call) -> str:
            name = call.option(0, *RIGOL_ITEMS)
            if name in TIMING_ITEMS:
                return self._timing(self._measure_source(call, 1), name)
            if name in ("RPHase", "FPHase"):
                return self._phase(self._measure_source(call, 1), self._measure_source(call, 2))
            if name not in ("VPP", "VMAX", "VMIN", "VAVG", "VRMS", "VTOP", "VBASe", "VAMP", "RDELay", "FDELay"):
                call.rest(1)
                raise ScpiError(ILLEGAL_VALUE, f"measurement item {name} is not modelled")
            if name in ("RDELay", "FDELay"):
                return self._delay(_chan_number(call.arg(1)), _chan_number(call.arg(2)))
            return self._statistic(self._measure_source(call, 1), name)

        t.add(":TRIGger:SWEep", sweep)
        t.add(":TRIGger:SWEep?", lambda c: self.trig_sweep[:4])
        t.add(":TRIGger:STATus?", status)
        t.add(":TIMebase:MODE", lambda c: setattr(self, "tb_mode", c.option(0, *TIMEBASE_MODES["rigol"])))
        t.add(":TIMebase:MODE?", lambda c: short_form(self.tb_mode))
        t.add(":AUToscale", lambda c: self._autoscale())
        t.add(":ACQuire:TYPE", lambda c: setattr(self, "acq_type", c.option(0, *ACQUIRE_TYPES["rigol"])))
        t.add(":ACQuire:TYPE?", lambda c: short_form(self.acq_type))
        t.add(":ACQuire:AVERages", lambda c: self._rigol_averages(c))
        t.add(":ACQuire:AVERages?", lambda c: str(self.acq_count))
        t.add(":MEASure:SOURce", lambda c: setattr(self, "measure_source", _chan_number(c.arg(0))))
        t.add(":MEASure:SOURce?", lambda c: f"CHAN{self.measure_source}")
        t.add(":CLEar", lambda c: None)
        t.add(":TFORce", lambda c: self._force())
        t.add(":MEASure:CLEar", fixed(None, lambda c: c.option(0, "ITEM1", "ITEM2", "ITEM3", "ITEM4", "ITEM5", "ALL")))
        for node, default, kind in (
                (":CHANnel<n>:VERNier", False, on_off()), (":TIMebase:DELay:ENABle", False, on_off()),
                (":TRIGger:COUPling", "DC", enumerated("AC", "DC", "LFReject", "HFReject")),
                (":TRIGger:HOLDoff", 16e-9, numeric(16e-9, 10.0, "{:.6e}")), (":TRIGger:NREJect", False, on_off())):
            self.add_setting(node, default, kind)
        for index, node in enumerate(("XINCrement", "XORigin", "XREFerence", "YINCrement", "YORigin",
                                      "YREFerence"), start=4):
            t.add(f":WAVeform:{node}?", lambda c, i=index: self._preamble(self._current_acquisition()).split(",")[i])
        t.add(":TIMebase[:MAIN]:SCALe", lambda c: setattr(self, "tb_scale", c.number(0, 5e-9, 50.0)))
        t.add(":TIMebase[:MAIN]:SCALe?", lambda c: f"{self.tb_scale:.6e}")
        t.add(":TIMebase[:MAIN]:OFFSet", lambda c: setattr(self, "tb_position", c.number(0, -500.0, 500.0)))
        t.add(":TIMebase[:MAIN]:OFFSet?", lambda c: f"{self.tb_position:.6e}")
        def single(call: Call) -> None:
            self.stale_status = self._rigol_status()
            self.trig_sweep = "NORMAL"
            self._arm(RIGOL_SINGLE_LATENCY_S)

        t.add(":SINGle", single)
        t.add(":RUN", lambda c: self._run_acquisition())
        t.add(":STOP", lambda c: self._stop_acquisition())
        t.add(":ACQuire:MDEPth", depth)
        t.add(":ACQuire:MDEPth?", lambda c: str(self.rigol_depth) if self.rigol_depth else "AUTO")
        t.add(":ACQuire:SRATe?", lambda c: f"{(self.rigol_depth or RIGOL_AUTO_DEPTH) / self._window()[1]:.6e}")
        t.add(":WAVeform:SOURce", lambda c: setattr(self, "wav_source", _chan_number(c.arg(0))))
        t.add(":WAVeform:SOURce?", lambda c: f"CHAN{self.wav_source}")
        t.add(":WAVeform:MODE", wav_mode)
        t.add(":WAVeform:MODE?", lambda c: {"MAXIMUM": "MAX"}.get(self.rigol_mode, self.rigol_mode[:4]))
        t.add(":WAVeform:FORMat", lambda c: setattr(self, "wav_format", c.choice(0, "BYTE", "WORD")))
        t.add(":WAVeform:FORMat?", lambda c: self.wav_format)
        t.add(":WAVeform:STARt", lambda c: setattr(self, "rigol_start", int(c.number(0, 1, RIGOL_DEPTHS[-1]))))
        t.add(":WAVeform:STARt?", lambda c: str(self.rigol_start))
        t.add(":WAVeform:STOP", lambda c: setattr(self, "rigol_stop", int(c.number(0, 1, RIGOL_DEPTHS[-1]))))
        t.add(":WAVeform:STOP?", lambda c: str(self.rigol_stop))
        t.add(":WAVeform:PREamble?", self._wav_preamble)
        t.add(":WAVeform:DATA?", self._wav_data)
        t.add(":MEASure:ITEM?", item_rigol)


def _nice_scale(volts_per_div: float) -> float:
    """The 1-2-5 scale at or above a wanted V/div, as the front panel steps."""
    decade = 10 ** np.floor(np.log10(max(volts_per_div, 1e-3)))
    return float(next(m * decade for m in (1, 2, 5, 10) if m * decade >= volts_per_div))


def _suffix_channel(call: Call) -> int:
    if call.suffixes[0] not in range(1, 5):
        raise ScpiError(HEADER_SUFFIX, f"channel {call.suffixes[0]}")
    return call.suffixes[0]


def _chan_number(word: str) -> int:
    text = word.strip().upper()
    digits = "".join(ch for ch in text if ch.isdigit())
    if not text.startswith("CHAN") or not digits or not 1 <= int(digits) <= 4:
        raise ScpiError(ILLEGAL_VALUE, f"source {word!r}")
    return int(digits)
