"""Emulated thermal probes on a serial line (reached as pyserial `socket://127.0.0.1:PORT`).

Two dialects:
- "generic": the bench's ASCII contract — a MAX31855-style thermocouple board. `*IDN?`,
  `CHAN?` (names), `READ?` -> `T1=25.25,T2=31.50,T3=25.00,CJ=26.1`, `STREAM <ms>` / `STREAM OFF`
  (acknowledged `OK`); streamed lines `<device_ms>,<T1>,<T2>,<T3>,<CJ>`; faults as `nan` or
  `ERR:<code>`; unknown commands answer `ERR:CMD`.
- "fluke": a Hart/Fluke 1529-style 4-channel thermometer speaking SCPI: `FETC? <ch>` ->
  `t: 25.587 C`, `READ? <ch>` waits one sample period first, `SENS:APER <s>` sets the period.

Probes are taped to points of the world's thermal model (back-cover hotspots, ambient, ...);
each channel has its own offset error, noise and resolution. The generic board's `REF` input is
a reference-grade sensor (4-wire PT100, no offset) taped beside one thermocouple
(`World.place_reference_probe`), the reference for calibrating the thermocouples' offsets. Streams are paced by simulated
time: a line is emitted for every sample period the world's clock passes.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from emulation.instruments.scpi import ILLEGAL_VALUE, Call, ScpiError
from emulation.instruments.server import Connection, InstrumentServer
from emulation.world import World

log = logging.getLogger(__name__)

GENERIC_IDN = "phonebench,TC4-MAX31855,TC4-000123,1.2.0"
FLUKE_IDN = "HART SCIENTIFIC,1529,A3B417,1.60"
PROBE_FAULTS = ("nan", "ERR:OC", "ERR:SCG", "ERR:SCV")  # MAX31855: open, short to GND, short to VCC
FLUKE_FAULT_TEXT = "-------"  # what the thermometer shows for an open sensor


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
    "REF": ProbeChannel("reference", 0.0, 0.005, 0.01),  # wherever the fixture tapes it
}
FLUKE_CHANNELS = {
    "1": ProbeChannel("cover_a", 0.012, 0.003, 0.001),
    "2": ProbeChannel("cover_b", -0.008, 0.003, 0.001),
    "3": ProbeChannel("battery", 0.005, 0.003, 0.001),
    "4": ProbeChannel("ambient", 0.002, 0.003, 0.001),
}
COLD_JUNCTION_RISE_C = 1.2  # the probe board sits a little above ambient


class ThermalProbeServer(InstrumentServer):
    FAULTS = InstrumentServer.FAULTS | {"error"}

    def __init__(self, world: World, dialect: str = "generic", port: int = 0,
                 channels: dict[str, ProbeChannel] | None = None) -> None:
        if dialect not in ("generic", "fluke"):
            raise ValueError(f"unknown probe dialect {dialect!r}; known: generic, fluke")
        super().__init__(port)
        self.world = world
        self.dialect = dialect
        self.family = "generic-ascii" if dialect == "generic" else "fluke-hart"
        self.idn = GENERIC_IDN if dialect == "generic" else FLUKE_IDN
        self.channels = dict(channels or (GENERIC_CHANNELS if dialect == "generic" else FLUKE_CHANNELS))
        self.probe_faults: dict[str, str] = {}
        self.rng = world.rng(f"probe:{dialect}")
        self._boot = world.clock.now() - 12.345  # the board has been up a while
        self._streams: dict[Connection, tuple[float, list[float]]] = {}  # conn -> (period, [next time])
        self.period_s = 1.0
        self.unit = "C"
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
            value = points[ch.point] + ch.offset_c + self.rng.normal(0.0, ch.noise_c)
            out[name] = round(value / ch.resolution_c) * ch.resolution_c
        return out

    def _cold_junction(self) -> float:
        return round((self.world.ambient_c + COLD_JUNCTION_RISE_C) / 0.0625) * 0.0625

    @staticmethod
    def _text(value: float | str) -> str:
        return value if isinstance(value, str) else f"{value:.2f}"

    # --- generic dialect ---------------------------------------------------------------------
    def handle_message(self, conn: Connection, message: bytes) -> None:
        if self.dialect == "fluke":
            super().handle_message(conn, message)
            return
        line = message.decode("ascii", "replace").strip()
        with self.lock:
            self.commands_seen.append(line)
            reply = self._generic(conn, line)
            if reply is None:
                return
            if self.take_fault("silence"):
                return
            if self.take_fault("garbage"):
                reply = self._garbage()
            elif self.take_fault("error"):
                reply = "ERR:ADC"
        conn.send(reply.encode() + b"\n")

    def _garbage(self) -> str:
        return bytes(self.rng.integers(33, 127, int(self.rng.integers(3, 30)), dtype=np.uint8)).decode()

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
                    device_ms = int(round((next_t[0] - self._boot) * 1000))
                    values = [self._text(v) for v in self._sample().values()]
                    conn.send_line(",".join([str(device_ms), *values, f"{self._cold_junction():.2f}"]).encode()
                                   + b"\n")
                next_t[0] += period

    # --- fluke dialect ---------------------------------------------------------------------------
    def _register_fluke(self) -> None:
        t = self.tree

        def channel(call: Call) -> str:
            name = call.arg(0).strip() if call.args else "1"
            if name not in self.channels:
                raise ScpiError(ILLEGAL_VALUE, f"channel {name}")
            return name

        def reading(name: str) -> str:
            value = self._sample()[name]
            if isinstance(value, str):
                return f"t: {FLUKE_FAULT_TEXT} {self.unit}"
            converted = {"C": value, "F": value * 9 / 5 + 32, "K": value + 273.15}[self.unit]
            return f"t: {converted:.3f} {self.unit}"

        def fetch(call: Call) -> str:
            return reading(channel(call))

        def read(call: Call) -> str:
            name = channel(call)
            self.world.wait(self.period_s)  # a new measurement takes one sample period
            return reading(name)

        def aperture(call: Call) -> None:
            self.period_s = call.number(0, 0.1, 3600.0)

        def unit(call: Call) -> None:
            self.unit = call.choice(0, "C", "F", "K")

        t.add("FETCh[:TEMPerature]?", fetch)
        t.add("READ[:TEMPerature]?", read)
        t.add("SENSe:APERture", aperture)
        t.add("SENSe:APERture?", lambda c: f"{self.period_s:g}")
        t.add("UNIT:TEMPerature", unit)
        t.add("UNIT:TEMPerature?", lambda c: self.unit)
        t.add("ROUTe:COUNt?", lambda c: str(len(self.channels)))
