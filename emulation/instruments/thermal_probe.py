"""Emulated thermal probes on a serial line (reached as pyserial `socket://127.0.0.1:PORT`).

Three dialects, each answering only what its model answers:

- "generic": the bench's ASCII contract — a MAX31855-style thermocouple board. `*IDN?`,
  `CHAN?` (names), `READ?` -> `T1=25.25,T2=31.50,T3=25.00,REF=25.01,CJ=26.1`, `STREAM <ms>` /
  `STREAM OFF` (acknowledged `OK`); streamed lines `<device_ms>,<T1>,...,<CJ>`; faults as `nan` or
  `ERR:<code>`; unknown commands answer `ERR:CMD`. Fault "stream-tail" sends one more stream
  line after the `OK` of `STREAM OFF` (a sample taken while the command was parsed), the race a
  real board's firmware has too.
- "fluke": a Hart/Fluke 1529 Chub-E4, four channels at 9600 baud. `FETC? <n>` (= `MEAS?` =
  `READ?`, none waits) answers the most recent measurement as a bare number in the display unit;
  `FORM:STAM ON` switches to `<new>,<ch>,<value>,<unit>,<h>,<m>,<s>,<year>,<month>,<day>`. One
  command per line: a `;` compound is refused. Refused commands queue `-113,"Undefined header"`
  (and the like) for `SYST:ERR?`. Channels measure once per sample period (`SENS:APER`).
  An open sensor answers the overload value 9.9E+37 (the emulator's choice: the user guide we
  read does not say what the serial line carries then).
- "fluke1521": a 1521/1522 handheld, one channel at 2400 baud: `fetch?`/`read?`/`meas?` (or `f`,
  `rea`, `me`) -> `t: 25.587 C`, `u` / `u=F` the unit, `*ver` -> `ver.1521,1.03`; anything else is
  ignored (no answer).

Every character costs its transfer time on the simulated clock at the model's baud rate (10 bits
per character), so polling a thermometer takes simulated time as it takes real time.

Probes are taped to points of the world's thermal model (back-cover hotspots, ambient, ...);
each channel has its own offset error, noise and resolution. The generic board's `REF` input is
a reference-grade sensor (4-wire PT100, no offset) taped beside one thermocouple
(`World.place_reference_probe`), the reference for calibrating the thermocouples' offsets. Streams are paced by simulated
time: a line is emitted for every sample period the world's clock passes.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass

import numpy as np

from .scpi import ILLEGAL_VALUE, UNDEFINED_HEADER, Call, ScpiError
from .server import Connection, InstrumentServer, on_off
from ..world import World

log = logging.getLogger(__name__)

GENERIC_IDN = "phonebench,TC4-MAX31855,TC4-000123,1.2.0"
FLUKE_IDN = "HART SCIENTIFIC,1529,A3B417,1.60"
HANDHELD_VERSION = "ver.1521,1.03"
PROBE_FAULTS = ("nan", "ERR:OC", "ERR:SCG", "ERR:SCV")  # MAX31855: open, short to GND, short to VCC
HANDHELD_FAULT_TEXT = "-------"  # what the handheld shows for an open sensor
OVERLOAD_TEXT = "9.9E+37"
BAUD = {"generic": 115_200, "fluke": 9600, "fluke1521": 2400}
DIALECTS = tuple(BAUD)
EPOCH = dt.datetime(2026, 1, 5, 8, 0, 0, tzinfo=dt.timezone.utc)  # the thermometers' clocks at t = 0


@dataclass(frozen=True)
class ProbeChannel:
    point: str  # node of the world's thermal model (see World.surface_temperatures)
    offset_c: float  # uncorrected sensor error, what calibration finds
    noise_c: float
    resolution_c: float


GENERIC_CHANNELS = {
    "T1": ProbeChannel("cover_a", 0.40, 0.08, 0.25),  # back cover over the SoC
    "T2": ProbeChannel("cover_b", -0.30, 0.08, 0.25),  # back cover over the battery
    "T3": ProbeChannel("ambient", 0.10, 0.08, 0.25),
    "T4": ProbeChannel("shield", 0.20, 0.08, 0.25),  # the SoC's shield under the back cover (a thermal lab's)
    "REF": ProbeChannel("reference", 0.0, 0.005, 0.01),  # wherever the fixture tapes it
}
FLUKE_CHANNELS = {
    "1": ProbeChannel("cover_a", 0.012, 0.003, 0.001),
    "2": ProbeChannel("cover_b", -0.008, 0.003, 0.001),
    "3": ProbeChannel("battery", 0.005, 0.003, 0.001),
    "4": ProbeChannel("ambient", 0.002, 0.003, 0.001),
}
HANDHELD_CHANNELS = {"1": ProbeChannel("reference", 0.003, 0.003, 0.001)}
COLD_JUNCTION_RISE_C = 1.2  # the probe board sits a little above ambient


class ThermalProbeServer(InstrumentServer):
    FAULTS = InstrumentServer.FAULTS | {"error", "stream-tail", "binary"}

    def __init__(self, world: World, dialect: str = "generic", port: int = 0,
                 channels: dict[str, ProbeChannel] | None = None) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown probe dialect {dialect!r}; known: {', '.join(DIALECTS)}")
        super().__init__(port)
        self.world = world
        self.dialect = dialect
        self.family = {"generic": "generic-ascii", "fluke": "fluke-1529", "fluke1521": "fluke-1521"}[dialect]
        self.idn = GENERIC_IDN if dialect == "generic" else FLUKE_IDN
        defaults = {"generic": GENERIC_CHANNELS, "fluke": FLUKE_CHANNELS, "fluke1521": HANDHELD_CHANNELS}[dialect]
        self.channels = dict(channels or defaults)
        self.probe_faults: dict[str, str] = {}
        self.rng = world.rng(f"probe:{dialect}")
        # The shield channel came later: its noise has a stream of its own, so the other channels
        # read as they did before it (their recorded calibrations and transcripts still hold).
        self.shield_rng = world.rng(f"probe:{dialect}:shield")
        self._boot = world.clock.now() - 12.345  # the board has been up a while
        self._streams: dict[Connection, tuple[float, list[float]]] = {}  # conn -> (period, [next time])
        self.period_s = 1.0
        self.unit = "C"
        self.stamp = False  # 1529 FORM:STAM
        self._measured: dict[str, tuple[int, float | str]] = {}  # 1529: channel -> (sample index, value)
        self._read_index: dict[str, int] = {}  # 1529: channel -> sample index last fetched
        if dialect == "fluke":
            self._register_fluke()

    def _format_address(self, port: int) -> str:
        return f"socket://127.0.0.1:{port}"

    def set_probe_fault(self, channel: str, fault: str | None) -> None:
        """Make a channel report a probe fault (nan, ERR:OC, ...) until cleared with None."""
        if channel not in self.channels:
            raise ValueError(f"no channel {channel!r}; channels: {sorted(self.channels)}")
        if fault is None:
            self.probe_faults.pop(channel, None)
        elif self.dialect == "generic" and fault not in PROBE_FAULTS:
            raise ValueError(f"unknown probe fault {fault!r}; known: {PROBE_FAULTS}")
        else:
            self.probe_faults[channel] = fault

    # --- sensing --------------------------------------------------------------------------
    def _sample(self) -> dict[str, float | str]:
        points = self.world.surface_temperatures()
        out: dict[str, float | str] = {}
        for name, ch in self.channels.items():
            if name in self.probe_faults:
                out[name] = self.probe_faults[name]
                continue
            rng = self.shield_rng if ch.point == "shield" else self.rng
            value = points[ch.point] + ch.offset_c + rng.normal(0.0, ch.noise_c)
            out[name] = round(value / ch.resolution_c) * ch.resolution_c
        return out

    def _cold_junction(self) -> float:
        return round((self.world.ambient_c + COLD_JUNCTION_RISE_C) / 0.0625) * 0.0625

    @staticmethod
    def _text(value: float | str) -> str:
        return value if isinstance(value, str) else f"{value:.2f}"

    def _transfer(self, characters: int) -> None:
        """The serial line's time for `characters` (8N1: 10 bits each), on the simulated clock."""
        self.world.wait(characters * 10 / BAUD[self.dialect])

    # --- message dispatch ----------------------------------------------------------------------
    def handle_message(self, conn: Connection, message: bytes) -> None:
        if self.dialect == "fluke":
            self._transfer(len(message) + 1)
            if b";" in message:  # the 1529 takes one command per line
                with self.lock:
                    self.push_error(ScpiError(UNDEFINED_HEADER, "compound commands are not accepted"))
                return
            super().handle_message(conn, message)
            return
        line = message.decode("ascii", "replace").strip()
        with self.lock:
            self.commands_seen.append(line)
            if self.dialect == "fluke1521":
                self._transfer(len(message) + 1)
                reply = self._handheld(line)
            else:
                reply = self._generic(conn, line)
            if reply is None:
                return
            if self.take_fault("silence"):
                return
            if self.take_fault("binary"):
                conn.send(b"\xff\xfe\x80" + reply.encode() + b"\n")
                return
            if self.take_fault("garbage"):
                reply = self._garbage()
            elif self.take_fault("error"):
                reply = "ERR:ADC"
            if self.dialect == "fluke1521":
                self._transfer(len(reply) + 2)
            conn.send(reply.encode() + b"\n")
            if line.upper() == "STREAM OFF" and self.take_fault("stream-tail"):
                conn.send(self._stream_line(self.world.clock.now()).encode() + b"\n")

    def _garbage(self) -> str:
        return bytes(self.rng.integers(33, 127, int(self.rng.integers(3, 30)), dtype=np.uint8)).decode()

    # --- generic dialect ---------------------------------------------------------------------
    def _generic(self, conn: Connection, line: str) -> str | None:
        word, _, arg = line.partition(" ")
        word = word.upper()
        if word == "*IDN?":
            return self.idn
        if word == "CHAN?":
            return ",".join([*self.channels, "CJ"])
        if word == "READ?":
            sample = self._sample()
            return ",".join(f"{k}={self._text(v)}" for k, v in sample.items()) + f",CJ={self._cold_junction():.2f}"
        if word == "STREAM":
            if arg.strip().upper() == "OFF":
                self._stop_stream(conn)
                return "OK"
            try:
                period_ms = int(arg)
            except ValueError:
                return "ERR:ARG"
            if not 100 <= period_ms <= 60_000:
                return "ERR:RANGE"
            self._start_stream(conn, period_ms / 1000.0)
            return "OK"
        return "ERR:CMD"

    def _stream_line(self, t: float) -> str:
        device_ms = int(round((t - self._boot) * 1000))
        values = [self._text(v) for v in self._sample().values()]
        return ",".join([str(device_ms), *values, f"{self._cold_junction():.2f}"])

    def _start_stream(self, conn: Connection, period_s: float) -> None:
        self._stop_stream(conn)
        self._streams[conn] = (period_s, [self.world.clock.now() + period_s])
        if len(self._streams) == 1:
            self.world.add_observer(self._on_time)

    def _stop_stream(self, conn: Connection) -> None:
        if self._streams.pop(conn, None) is not None and not self._streams:
            self.world.remove_observer(self._on_time)

    def on_disconnect(self, conn: Connection) -> None:
        with self.lock:
            self._stop_stream(conn)

    def stop(self) -> None:
        with self.lock:
            self._streams.clear()
            self.world.remove_observer(self._on_time)
        super().stop()

    def _on_time(self, now: float) -> None:
        # Runs in the thread that advances the world clock: only queue lines here.
        for conn, (period, next_t) in list(self._streams.items()):
            while next_t[0] <= now + 1e-4:  # clock steps accumulate rounding (0.24 µs ulp)
                if self.take_fault("garbage"):
                    conn.send_line(self._garbage().encode() + b"\n")
                if self.take_fault("error"):
                    conn.send_line(b"ERR:ADC\n")
                else:
                    conn.send_line(self._stream_line(next_t[0]).encode() + b"\n")
                next_t[0] += period

    # --- 1521/1522 handheld ------------------------------------------------------------------------
    def _handheld(self, line: str) -> str | None:
        text = line.strip().lower()
        if text == "*ver":
            return HANDHELD_VERSION
        if text in ("f", "fetch?", "rea", "read?", "me", "meas?", "measure?"):
            value = self._sample()["1"]
            if isinstance(value, str):
                return f"t: {HANDHELD_FAULT_TEXT} {self.unit}"
            return f"t: {self._convert(value):.3f} {self.unit}"
        if text in ("u", "units"):
            return f"u: {self.unit}"
        if text.startswith(("u=", "units=")) and text.split("=", 1)[1].upper() in ("C", "F", "K"):
            self.unit = text.split("=", 1)[1].upper()
            return None
        log.debug("fluke1521: ignored %r", line)
        return None

    def _convert(self, celsius: float) -> float:
        return {"C": celsius, "F": celsius * 9 / 5 + 32, "K": celsius + 273.15}[self.unit]

    # --- 1529 Chub-E4 ---------------------------------------------------------------------------
    def _measurement(self, name: str) -> tuple[int, float | str]:
        """(sample index, value) of a channel's most recent measurement: one per sample period."""
        index = int(math.floor(self.world.clock.now() / self.period_s + 1e-9))
        cached = self._measured.get(name)
        if cached is None or cached[0] != index:
            cached = self._measured[name] = (index, self._sample()[name])
        return cached

    def _register_fluke(self) -> None:
        t = self.tree

        def channel(call: Call) -> str:
            name = call.arg(0).strip() if call.args else min(self.channels)
            if name not in self.channels:
                raise ScpiError(ILLEGAL_VALUE, f"channel {name}")
            return name

        def fetch(call: Call) -> str:
            name = channel(call)
            index, value = self._measurement(name)
            fresh = int(self._read_index.get(name) != index)
            self._read_index[name] = index
            text = OVERLOAD_TEXT if isinstance(value, str) else f"{self._convert(value):.4f}"
            if not self.stamp:
                answer = text
            else:
                when = EPOCH + dt.timedelta(seconds=index * self.period_s)
                answer = (f"{fresh},{name},{text},{self.unit},{when.hour},{when.minute},{when.second},"
                          f"{when.year},{when.month},{when.day}")
            self._transfer(len(answer) + 2)
            return answer

        def aperture(call: Call) -> None:
            self.period_s = call.number(0, 0.1, 3600.0)

        def unit(call: Call) -> None:
            self.unit = call.choice(0, "C", "F", "K")

        def stamp(call: Call) -> None:
            self.stamp = call.boolean(0)

        for verb in ("FETCh", "MEASure", "READ"):
            t.add(f"{verb}[:TEMPerature]?", fetch)
        t.add("FORMat:STAMp", stamp)
        t.add("FORMat:STAMp?", lambda c: str(int(self.stamp)))
        t.add("SENSe:APERture", aperture)
        t.add("SENSe:APERture?", lambda c: f"{self.period_s:g}")
        t.add("UNIT:TEMPerature", unit)
        t.add("UNIT:TEMPerature?", lambda c: self.unit)
        self.add_setting("INITiate:CONTinuous", True, on_off())
        self.add_setting("ROUTe:SCAN:STATe", True, on_off())
        t.add("SYSTem:BEEP[:IMMediate]", lambda c: None)
        t.add("SYSTem:DATE?", lambda c: f"{self._clock():%Y,%m,%d}")
        t.add("SYSTem:TIME?", lambda c: f"{self._clock():%H,%M,%S}")

    def _clock(self) -> dt.datetime:
        """The readout's own clock (set at the factory: the thermometers' EPOCH at world time 0)."""
        return EPOCH + dt.timedelta(seconds=self.world.clock.now())
