"""What the emulated oscilloscopes share: channel and trigger state, the acquisition in simulated
time, sampling the world, encoding waveforms and the measurements made on them.

The scope samples the world's audio fixture: stimulus on channel 1, the phone's answer on
channel 2. Status polls and waits for a trigger spend simulated time, so a trial takes simulated
seconds, not wall seconds. Waveforms are sent as the real instruments send them (preamble + IEEE
block of codes); each model (keysight.py, rigol.py) gives its scaling, preamble and commands.

What the real scopes do and a lenient emulator would hide (docs/instruments.md): a single
acquisition is not armed at once, the pre-trigger part of the record must fill first. A trigger
edge before that is not seen (the scope may trigger later, on the wrong edge).

Each channel keeps its own setup (scale, offset, coupling, probe, bandwidth limit, invert,
label, impedance, units). Enumerations are answered in their short forms (`MAX`, `CENT`).
"""
from __future__ import annotations

import logging
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..scpi import DATA_TYPE_ERROR, HEADER_SUFFIX, ILLEGAL_VALUE, Call, Handler, ScpiError, ieee_block, short_form
from .. import trace_timing
from ..server import InstrumentServer
from ...world import World

log = logging.getLogger(__name__)

POLL_QUANTUM_S = 0.05  # simulated time one status poll takes while nothing is due to trigger
AUTO_TRIGGER_S = 0.04  # AUTO sweep forces a trigger this long after arming
INVALID = 9.9e37  # what a scope returns for a measurement it cannot make
DESKEW_LIMIT_S = 100e-9  # the real scopes accept deskew values within ±100 ns
# Static input delay per channel (probe, cable and front end): what deskew calibrates out.
# A channel's deskew of +d shows its signal d earlier, so deskew = +INPUT_DELAY_S[n] removes it.
INPUT_DELAY_S = {1: 0.0, 2: 35e-9, 3: 0.0, 4: 0.0}
MEASURE_POINTS = 100_000
COMMAND_LATENCY_S = 0.5e-3  # simulated time a command unit takes to parse and execute
ARM_LATENCY_S = 2e-3  # :SINGle to the start of the pre-trigger fill
FORMAT_CODES = {"BYTE": 0, "WORD": 1, "ASCII": 4}  # the preamble's first field


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


class ScopeServer(InstrumentServer, ABC):
    """A 4-channel scope in `world`; a model subclass sets the constants below and registers
    the commands of its own manual (`_register`) after the shared ones."""

    FAULTS = InstrumentServer.FAULTS | {"garbage_block", "truncated_block", "wrong_preamble",
                                        "invalid_measure", "holes"}
    COMMAND_LATENCY_S = COMMAND_LATENCY_S
    SAVED_STATE: tuple[str, ...] = ("channels", "tb_scale", "tb_position", "tb_mode", "trig_source", "trig_level",
                                    "trig_rising", "trig_sweep", "acq_type", "acq_mode", "acq_count")
    SAVE_SLOTS = range(10)

    dialect: ClassVar[str]  # the model's short name, as scope_server() takes it
    BLOCK_DIGITS: ClassVar[int]  # digits of the IEEE block's length field
    SKEW_NODE: ClassVar[str]  # the per-channel deskew command
    TRIGGER_EDGE: ClassVar[str]  # the edge trigger's node, as the manual spells it
    COUPLINGS: ClassVar[tuple[str, ...]]
    UNITS: ClassVar[tuple[str, ...]]
    BANDWIDTH: ClassVar[tuple[str, str]]  # the words :BWLimit takes for off and on (besides 0 and 1)
    BANDWIDTH_ANSWERS: ClassVar[tuple[str, str]]  # what :BWLimit? answers for off and on
    ACQUIRE_TYPES: ClassVar[tuple[str, ...]]
    TIMEBASE_MODES: ClassVar[tuple[str, ...]]
    NUMBER_FORMAT: ClassVar[str]  # numeric answers, e.g. "{:+.8E}"
    LSB_FIRST: ClassVar[bool]  # byte order of WORD codes after *RST

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(port)
        self.world = world
        self._acq_count = 0
        self.reset()
        self._channel_commands()
        self._trigger_commands()
        self._common_commands()
        self._register()

    @abstractmethod
    def _register(self) -> None:
        """The model's own commands."""

    # --- state ----------------------------------------------------------------------------
    def reset(self) -> None:
        self.channels = {n: ChannelSetup(n, display=n <= 2, label=f"{n}") for n in range(1, 5)}
        self.tb_scale = 1e-3
        self.tb_position = 0.0
        self.trig_source = 1
        self.trig_level = 0.0
        self.trig_rising = True
        self.trig_sweep = "AUTO"
        # RUN (free running), STOP, ARMING (single: pre-trigger filling), ARMED, DONE (single complete).
        self.state = "RUN"
        self.arm_time = 0.0  # when the single acquisition starts filling its pre-trigger part
        self.armed_at = 0.0  # when it can accept a trigger
        self.run_checked = self.world.clock.now()  # running: events looked at up to here
        self.acq: Acquisition | None = None
        # Trigger and arm events, latched until read or *CLS (the InfiniiVision's :TER? and :AER?).
        self._ter = False
        self._aer = False
        self.wav_source = 1
        self.wav_format = "BYTE"
        self.wav_unsigned = True
        self.wav_lsb_first = self.LSB_FIRST
        self.tb_mode = "MAIN"
        self.acq_type = "NORMal"
        self.acq_mode = "RTIMe"
        self.acq_count = 8
        self.measure_source = 1

    @abstractmethod
    def _window(self) -> tuple[float, float]:
        """(first sample relative to trigger, span) of the acquisition window."""

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

    def _check_readable(self) -> None:
        """Before data is read: a model that waits for, or refuses, an unfinished acquisition says so here."""

    def _current_acquisition(self) -> Acquisition:
        """The acquisition the data commands read; a running scope shows its latest sweep."""
        self._check_readable()
        if self.state in ("RUN", "ARMING", "ARMED") or self.acq is None:
            x_origin, span = self._window()
            self._acq_count += 1
            self.acq = Acquisition(self._acq_count, self.world.clock.now() - x_origin - span, x_origin, span)
        return self.acq

    def _run_acquisition(self) -> None:
        self.state = "RUN"
        self.run_checked = self.world.clock.now()

    def _stop_acquisition(self) -> None:
        self._latch_running()
        if self.state != "DONE":
            self.state = "STOP"

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

    @abstractmethod
    def _scaling(self, channel: int, bits: int) -> tuple[float, float, float]:
        """(yinc, yorigin, yref) of the model's unsigned codes for a channel's setup."""

    @abstractmethod
    def _codes(self, volts: np.ndarray, channel: int, bits: int) -> np.ndarray:
        """Unsigned codes of `bits` for volts on a channel, clipped as the model clips them."""

    # --- waveform transfer --------------------------------------------------------------------
    @abstractmethod
    def _selection(self) -> tuple[int, int, int]:
        """(record points, first index, count) the next :WAV:DATA? returns."""

    @abstractmethod
    def _preamble_text(self, count: int, xinc: float, xorigin: float) -> str:
        """The model's :WAVeform:PREamble? answer for a transfer of `count` points."""

    def _bits(self) -> int:
        return 8 if self.wav_format == "BYTE" else 16

    def _preamble(self, acq: Acquisition) -> str:
        record, first, count = self._selection()
        xinc = acq.span_s / record
        return self._preamble_text(count, xinc, acq.x_origin + first * xinc)

    def _payload(self, acq: Acquisition) -> bytes:
        record, first, count = self._selection()
        bits = self._bits()
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
            if not self.wav_unsigned:
                codes = (codes.astype(np.int32) - (1 << (bits - 1))).astype(np.int16 if bits == 16 else np.int8)
            acq.blocks.clear()
            acq.blocks[key] = codes.astype(codes.dtype.newbyteorder("<" if self.wav_lsb_first else ">")).tobytes()
        return acq.blocks[key]

    def _wav_data(self, call: Call) -> bytes:
        payload = self._payload(self._current_acquisition())
        if self.take_fault("holes") and len(payload) > 100:
            hole = bytearray(payload)
            hole[len(hole) // 3: len(hole) // 3 + len(hole) // 50] = bytes(len(hole) // 50)
            payload = bytes(hole)
        if self.take_fault("garbage_block"):
            return b"\x00\x13garbage instead of a block"
        block = ieee_block(payload, self.BLOCK_DIGITS)
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

    def _measure_source(self, call: Call, index: int) -> int:
        return chan_number(call.arg(index)) if call.has(index) else self.measure_source

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

    def _number(self, value: float) -> str:
        """A numeric answer in the model's form (NUMBER_FORMAT)."""
        return self.NUMBER_FORMAT.format(value)

    # --- command tables ---------------------------------------------------------------------------
    def _channel_commands(self) -> None:
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
            off, on = self.BANDWIDTH
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
        t.add(":CHANnel<n>:COUPling", setter("coupling", lambda c: c.choice(0, *self.COUPLINGS)))
        t.add(":CHANnel<n>:COUPling?", lambda c: chan(c).coupling)
        t.add(":CHANnel<n>:RANGe", set_range)
        t.add(":CHANnel<n>:RANGe?", lambda c: self._number(8 * chan(c).scale_v))
        t.add(":CHANnel<n>:BWLimit", bwlimit)
        t.add(":CHANnel<n>:BWLimit?", lambda c: self.BANDWIDTH_ANSWERS[chan(c).bwlimit])
        t.add(":CHANnel<n>:INVert", setter("invert", lambda c: c.boolean(0)))
        t.add(":CHANnel<n>:INVert?", lambda c: str(int(chan(c).invert)))
        t.add(":CHANnel<n>:LABel", label)
        t.add(":CHANnel<n>:LABel?", lambda c: f'"{chan(c).label}"')
        t.add(":CHANnel<n>:UNITs", setter("units", lambda c: short_form(c.option(0, *self.UNITS))))
        t.add(":CHANnel<n>:UNITs?", lambda c: chan(c).units)
        t.add(":CHANnel<n>:PROBe", setter("probe", lambda c: c.number(0, 0.001, 10000.0)))
        t.add(":CHANnel<n>:PROBe?", lambda c: self._number(chan(c).probe))
        t.add(":CHANnel<n>:DISPlay", setter("display", lambda c: c.boolean(0)))
        t.add(":CHANnel<n>:DISPlay?", lambda c: "1" if chan(c).display else "0")
        t.add(self.SKEW_NODE, setter("skew_s", lambda c: c.number(0, -DESKEW_LIMIT_S, DESKEW_LIMIT_S)))
        t.add(self.SKEW_NODE + "?", lambda c: self._number(chan(c).skew_s))

    def _trigger_commands(self) -> None:
        t = self.tree
        edge = self.TRIGGER_EDGE

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

    def _common_commands(self) -> None:
        """Commands both manuals spell and answer alike."""
        t = self.tree
        t.add(":TRIGger:SWEep?", lambda c: self.trig_sweep[:4])
        t.add(":TIMebase:MODE", lambda c: setattr(self, "tb_mode", c.option(0, *self.TIMEBASE_MODES)))
        t.add(":TIMebase:MODE?", lambda c: short_form(self.tb_mode))
        t.add(":AUToscale", lambda c: self._autoscale())
        t.add(":ACQuire:TYPE", lambda c: setattr(self, "acq_type", c.option(0, *self.ACQUIRE_TYPES)))
        t.add(":ACQuire:TYPE?", lambda c: short_form(self.acq_type))
        t.add(":MEASure:SOURce", lambda c: setattr(self, "measure_source", chan_number(c.arg(0))))
        t.add(":MEASure:SOURce?", lambda c: f"CHAN{self.measure_source}")
        t.add(":RUN", lambda c: self._run_acquisition())
        t.add(":STOP", lambda c: self._stop_acquisition())
        t.add(":WAVeform:SOURce", lambda c: setattr(self, "wav_source", chan_number(c.arg(0))))
        t.add(":WAVeform:SOURce?", lambda c: f"CHAN{self.wav_source}")
        for index, node in enumerate(("XINCrement", "XORigin", "XREFerence", "YINCrement", "YORigin",
                                      "YREFerence"), start=4):
            t.add(f":WAVeform:{node}?", lambda c, i=index: self._preamble(self._current_acquisition()).split(",")[i])
        t.add(":WAVeform:PREamble?", self._wav_preamble)
        t.add(":WAVeform:DATA?", self._wav_data)


def code_type(bits: int) -> type[np.unsignedinteger]:
    """The unsigned integer type of `bits`-wide codes."""
    return np.uint16 if bits == 16 else np.uint8


def chan_number(word: str) -> int:
    """The channel a source argument names (`CHANnel2`, `CHAN2`); -224 for anything else."""
    text = word.strip().upper()
    digits = "".join(ch for ch in text if ch.isdigit())
    if not text.startswith("CHAN") or not digits or not 1 <= int(digits) <= 4:
        raise ScpiError(ILLEGAL_VALUE, f"source {word!r}")
    return int(digits)


def _nice_scale(volts_per_div: float) -> float:
    """The 1-2-5 scale at or above a wanted V/div, as the front panel steps."""
    decade = 10 ** np.floor(np.log10(max(volts_per_div, 1e-3)))
    return float(next(m * decade for m in (1, 2, 5, 10) if m * decade >= volts_per_div))
