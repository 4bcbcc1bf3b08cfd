"""The 33522B's state and behaviour, the part of the emulated instrument its command table
(awg_table.py) acts on; awg.py joins the two into AwgServer (what the model does and
refuses is described there, after its manual)."""
from __future__ import annotations

import logging
import math

import numpy as np

from .awg_channel import CHANNELS, MAX_FREQUENCY, MIN_FREQUENCY, MIN_VPP_50_OHM, WIRED_CHANNEL, Arb, Channel
from .scpi import OUT_OF_RANGE, SETTINGS_CONFLICT, TRIGGER_IGNORED, ScpiError, short_form
from .server import InstrumentServer
from ..world import World

log = logging.getLogger(__name__)

IDN = "Keysight Technologies,33522B,MY57301234,4.03-1.19-2.00-52-00"
OPTIONS = "MEM"  # *OPT?: the 16 MSa memory option
BURST_RENDER_RATE = 200_000.0  # samples/s at which a built-in burst is put into the world
MAX_RENDER_SAMPLES = 2_000_000


class AwgModel(InstrumentServer):
    family = "keysight-33500b"
    idn = IDN
    options = OPTIONS
    SAVED_STATE = ("channels",)
    SAVE_SLOTS = range(5)  # 0 is the power-down state, 1-4 the user's
    COMMAND_LATENCY_S = 1e-3  # simulated time a command unit takes (a *TRG plays this much later)

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(port)
        self.world = world
        self.played: list[float] = []  # world times of each burst onset on the wired output, for tests
        self.reset()

    def reset(self) -> None:
        self.channels = {n: Channel() for n in CHANNELS}
        self.big_endian = True
        self.display_text = ""

    @property
    def arbs(self) -> dict[str, Arb]:
        """Channel 1's volatile memory (the wired channel's clips, for tests)."""
        return self.channels[WIRED_CHANNEL].arbs

    def elapse(self, seconds: float) -> None:
        self.world.wait(seconds)

    # --- triggering ------------------------------------------------------------------------
    def bus_trigger(self) -> None:
        """*TRG: every channel whose trigger source is BUS and which is in triggered burst."""
        taken = [n for n, ch in self.channels.items()
                 if ch.trigger_source == "BUS" and ch.burst_on and ch.burst_mode == "TRIGgered"]
        if not taken:
            raise ScpiError(TRIGGER_IGNORED, "no channel in triggered burst with TRIG:SOUR BUS")
        for n in taken:
            self._fire(n)

    def _trigger_channel(self, n: int) -> None:
        ch = self.channels[n]
        if not (ch.burst_on and ch.burst_mode == "TRIGgered"):
            raise ScpiError(TRIGGER_IGNORED, f"channel {n} is not in triggered burst")
        self._fire(n)

    def _fire(self, n: int) -> None:
        ch = self.channels[n]
        if not ch.output_on:
            log.info("%s: channel %d triggered with its output off: nothing plays", self.family, n)
            return
        samples, rate = self._burst_waveform(ch)
        if n != WIRED_CHANNEL:
            log.info("%s: channel %d burst; the fixture hangs on channel %d", self.family, n, WIRED_CHANNEL)
            return
        if ch.polarity == "INVerted":
            samples = -samples
        self.played.append(self.world.clock.now())
        self.world.play_stimulus(samples, rate, ch.open_circuit_peak())

    def _burst_waveform(self, ch: Channel) -> tuple[np.ndarray, float]:
        """(samples in [-1, 1], sample rate) of one triggered burst."""
        if ch.function == "ARB":
            if ch.arb_name not in ch.arbs:
                raise ScpiError(SETTINGS_CONFLICT, "no arb selected (FUNC:ARB <name>)")
            cycles = max(1, int(ch.burst_cycles))
            return np.tile(ch.arbs[ch.arb_name].samples, cycles), ch.srate
        if ch.function in ("NOISe", "PRBS", "DC"):
            raise ScpiError(SETTINGS_CONFLICT, f"a burst of {short_form(ch.function)} is not modelled")
        rate = max(BURST_RENDER_RATE, 20 * ch.frequency)
        count = int(round(ch.burst_cycles * rate / ch.frequency))
        if count > MAX_RENDER_SAMPLES:
            raise ScpiError(SETTINGS_CONFLICT, f"a burst of {count} samples is not modelled")
        cycle = (np.arange(count) * ch.frequency / rate + (ch.burst_phase + ch.phase) / 360.0) % 1.0
        shape = {
            "SINusoid": lambda x: np.sin(2 * np.pi * x),
            "SQUare": lambda x: np.where(x < ch.duty / 100, 1.0, -1.0),
            "PULSe": lambda x: np.where(x < ch.pulse_width * ch.frequency, 1.0, -1.0),
            "TRIangle": lambda x: 1 - 4 * np.abs(((x + 0.25) % 1.0) - 0.5),
            "RAMP": lambda x: _ramp(x, ch.symmetry / 100),
        }[ch.function]
        return shape(cycle), rate

    # --- levels ------------------------------------------------------------------------------
    def _amplitude_display(self, ch: Channel) -> float:
        """The amplitude in the channel's VOLT:UNIT."""
        if ch.unit == "VPP":
            return ch.vpp
        vrms = ch.vpp / _crest(ch.function)
        if ch.unit == "VRMS":
            return vrms
        assert ch.load_ohm is not None  # DBM needs a finite load (refused otherwise)
        return 10 * math.log10(vrms ** 2 / ch.load_ohm / 1e-3)

    def _vpp_from(self, ch: Channel, value: float) -> float:
        if ch.unit == "VPP":
            return value
        if ch.unit == "DBM":
            if ch.load_ohm is None:
                raise ScpiError(SETTINGS_CONFLICT, "dBm needs a finite OUTP:LOAD")
            value = math.sqrt(10 ** (value / 10) * 1e-3 * ch.load_ohm)
        return value * _crest(ch.function)

    def _set_levels(self, ch: Channel, vpp: float | None = None, offset: float | None = None) -> None:
        """Apply amplitude and/or offset within |offset| + Vpp/2 <= Vmax; a value past the limit is
        clipped to it and -222 queued, as the instrument does."""
        v_max = ch.v_max()
        min_vpp = MIN_VPP_50_OHM * ch.gain()
        if vpp is not None:
            limit = 2 * (v_max - abs(ch.offset if offset is None else offset))
            if vpp > limit or vpp < min_vpp:
                clipped = max(min(vpp, limit), min_vpp)
                self.push_error(ScpiError(OUT_OF_RANGE, f"amplitude {vpp:g} Vpp clipped to {clipped:g}"))
                vpp = clipped
            ch.vpp = vpp
        if offset is not None:
            limit = max(v_max - ch.vpp / 2, 0.0)
            if abs(offset) > limit:
                clipped = math.copysign(limit, offset)
                self.push_error(ScpiError(OUT_OF_RANGE, f"offset {offset:g} V clipped to {clipped:g}"))
                offset = clipped
            ch.offset = offset

    def _set_load(self, ch: Channel, load: float | None) -> None:
        """The displayed levels follow the load; the connector's voltage stays (no error)."""
        ratio = 1.0 / ch.gain()
        ch.load_ohm = load
        ratio *= ch.gain()
        ch.vpp *= ratio
        ch.offset *= ratio

    def _set_frequency(self, ch: Channel, value: float) -> None:
        top = MAX_FREQUENCY[ch.function]
        if not MIN_FREQUENCY <= value <= top:
            clipped = min(max(value, MIN_FREQUENCY), top)
            self.push_error(ScpiError(OUT_OF_RANGE, f"frequency {value:g} Hz clipped to {clipped:g}"))
            value = clipped
        ch.frequency = value

    def _amplitude_display_of(self, ch: Channel, vpp: float) -> float:
        saved, ch.vpp = ch.vpp, vpp
        try:
            return self._amplitude_display(ch)
        finally:
            ch.vpp = saved

    def _high_low(self, ch: Channel, high: float, low: float) -> None:
        if high <= low:
            raise ScpiError(SETTINGS_CONFLICT, f"high level {high:g} V not above low level {low:g} V")
        vpp, middle = high - low, (high + low) / 2
        if abs(middle) + vpp / 2 > ch.v_max() + 1e-12:
            raise ScpiError(OUT_OF_RANGE, f"levels {low:g}..{high:g} V beyond ±{ch.v_max():g} V")
        ch.vpp, ch.offset = vpp, middle


def _crest(function: str) -> float:
    """Vpp / Vrms of a built-in waveform (sine 2√2, square 2, triangle and ramp 2√3)."""
    return {"SQUare": 2.0, "PULSe": 2.0, "TRIangle": 2 * math.sqrt(3), "RAMP": 2 * math.sqrt(3)}.get(
        function, 2 * math.sqrt(2))


def _ramp(x: np.ndarray, symmetry: float) -> np.ndarray:
    """A ramp rising for `symmetry` of the period, from -1 to 1, then falling."""
    rising = x < symmetry
    up = np.where(symmetry > 0, 2 * x / max(symmetry, 1e-12) - 1, 1.0)
    down = 1 - 2 * (x - symmetry) / max(1 - symmetry, 1e-12)
    return np.where(rising, up, down)
