"""The DAQ970A's state and behaviour, the part of the emulated instrument its command table
(daq970a_table.py) acts on; daq970a.py joins the two into Daq970aServer (what the model does and
refuses is described there, after its manual)."""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from .daq970a_channel import LINE_HZ, MODULE_CHANNELS, MODULES, ChannelSetup
from .scpi import DATA_STALE, HARDWARE_MISSING, ILLEGAL_VALUE, OUT_OF_RANGE, SETTINGS_CONFLICT, Call, ScpiError
from .server import InstrumentServer
from ..world import World

log = logging.getLogger(__name__)

IDN = "Keysight Technologies,DAQ970A,MY58012345,A.03.02-02.40-03.02-00.52-03-02"
OVERLOAD = 9.9e37
RELAY_SETTLE_S = 0.002
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)  # the simulated clock counts from here


@dataclass(frozen=True)
class Wiring:
    """What is connected to a channel: a point of the world's thermal model and the sensor's error."""

    point: str
    sensor: str  # "TC:K", "FRTD" (4-wire PT100)
    offset_c: float
    noise_c: float


WIRING = {
    101: Wiring("cover_a", "TC:K", 0.35, 0.05),  # back cover over the SoC
    102: Wiring("cover_b", "TC:K", -0.25, 0.05),  # back cover over the battery
    103: Wiring("ambient", "TC:K", 0.15, 0.05),
    104: Wiring("reference", "FRTD", 0.0, 0.004),  # the reference PT100, taped where the fixture says
    105: Wiring("shield", "TC:K", 0.20, 0.05),  # the SoC's shield under the back cover
}


class Daq970aModel(InstrumentServer):
    family = "keysight-daq970a"
    idn = IDN
    SAVED_STATE = ("setup", "scan", "format", "time_type", "trigger_source", "trigger_timer_s", "trigger_count")
    SAVE_SLOTS = range(6)  # 0 is the power-down state
    options = ",".join(MODULES.get(slot, "0") for slot in (1, 2, 3))  # *OPT?: the module in each slot
    FAULTS = InstrumentServer.FAULTS

    def __init__(self, world: World, port: int = 0, wiring: dict[int, Wiring] | None = None) -> None:
        super().__init__(port)
        self.world = world
        self.wiring = dict(wiring or WIRING)
        self.rng = world.rng("daq970a")
        self.shield_rng = world.rng("daq970a:shield")  # its own stream: the other channels read as before it
        self.open_channels: set[int] = set()  # broken thermocouples
        self.reset()

    # --- state -----------------------------------------------------------------------------------
    def reset(self) -> None:
        self.setup: dict[int, ChannelSetup] = {}
        self.scan: list[int] = []
        self.format = {"CHAN": False, "UNIT": False, "TIME": False, "ALAR": False}
        self.time_type = "ABS"
        self.trigger_source = "IMM"
        self.trigger_timer_s = 1.0
        self.trigger_count = 1
        self.memory: list[tuple[float, str, float, int]] = []  # (value, unit, time, channel)
        self._sweeps_due: list[float] = []  # simulated times of the sweeps still to run
        self._scan_start = 0.0

    def set_probe_fault(self, channel: int, fault: str | None) -> None:
        """"open": the thermocouple on `channel` breaks; None repairs it."""
        if channel not in self.wiring:
            raise ValueError(f"no sensor wired to channel {channel}; wired: {sorted(self.wiring)}")
        if fault not in (None, "open"):
            raise ValueError(f"unknown probe fault {fault!r}; known: open")
        (self.open_channels.add if fault else self.open_channels.discard)(channel)

    def _channel(self, channel: int) -> ChannelSetup:
        slot, number = divmod(channel, 100)
        module = MODULES.get(slot)
        if module is None:
            raise ScpiError(HARDWARE_MISSING, f"no module in slot {slot} (channel {channel})")
        if not 1 <= number <= MODULE_CHANNELS[module]:
            raise ScpiError(ILLEGAL_VALUE, f"channel {channel} is not a {module} measurement channel")
        return self.setup.setdefault(channel, ChannelSetup())

    def _channels(self, call: Call, index: int) -> list[int]:
        channels = call.channels(index)
        for channel in channels:
            self._channel(channel)
        return channels

    def _paired_conflicts(self, channels: list[int]) -> None:
        four_wire = {c for c, s in self.setup.items() if s.function in ("FRTD", "FTH")}
        for channel in channels:
            if channel in {c + 10 for c in four_wire}:
                raise ScpiError(SETTINGS_CONFLICT, f"channel {channel} is the sense pair of 4-wire channel "
                                                   f"{channel - 10}")

    # --- measuring -------------------------------------------------------------------------------
    def _channel_time(self, setup: ChannelSetup) -> float:
        return 2 * setup.nplc / LINE_HZ + RELAY_SETTLE_S  # autozero doubles the integration

    def _measure(self, channel: int) -> tuple[float, str]:
        setup = self.setup.get(channel, ChannelSetup())
        wiring = self.wiring.get(channel)
        if setup.function == "VOLT":
            emf = 0.0 if wiring is None else 40e-6 * (self.world.surface_temperatures()[wiring.point] - 25.0)
            return emf + self.rng.normal(0, 1e-6), "VDC"
        compatible = wiring is not None and (
            (setup.function == "TC" and wiring.sensor.startswith("TC:"))
            or (setup.function in ("FRTD", "RTD") and wiring.sensor == "FRTD"))
        if not compatible:
            return OVERLOAD, setup.unit  # nothing (or another sensor kind) on the input: over range
        assert wiring is not None
        if setup.function == "TC" and setup.rjunction == "EXT":
            return OVERLOAD, setup.unit  # no external reference measured yet (power-on register value)
        if setup.function == "TC" and channel in self.open_channels:
            if setup.check:
                return OVERLOAD, setup.unit
            celsius = self.world.ambient_c + 3.0 + self.rng.normal(0, 1.5)  # a floating input
        else:
            rng = self.shield_rng if wiring.point == "shield" else self.rng
            celsius = (self.world.surface_temperatures()[wiring.point] + wiring.offset_c
                       + rng.normal(0.0, wiring.noise_c))
            if setup.function == "TC" and setup.rjunction == "FIX":
                # The fixed reference (0 °C unless set) stands in for the terminals' real temperature.
                celsius += setup.fixed_ref_c - self.world.ambient_c
        return {"C": celsius, "F": celsius * 9 / 5 + 32, "K": celsius + 273.15}[setup.unit], setup.unit

    def _sweep(self, t_start: float) -> None:
        for channel in self.scan:
            self.world.wait(self._channel_time(self.setup.get(channel, ChannelSetup())))
            value, unit = self._measure(channel)
            self.memory.append((value, unit, self.world.clock.now() - self._scan_start, channel))

    def _initiate(self) -> None:
        if not self.scan:
            raise ScpiError(SETTINGS_CONFLICT, "the scan list is empty (ROUTe:SCAN)")
        if self.trigger_source == "IMM":
            period = 0.0
        elif self.trigger_source == "TIM":
            period = self.trigger_timer_s
        else:
            raise ScpiError(SETTINGS_CONFLICT, f"trigger source {self.trigger_source} never fires here")
        self.memory.clear()
        self._scan_start = now = self.world.clock.now()
        self._sweeps_due = [now + i * period for i in range(self.trigger_count)]

    def _catch_up(self) -> None:
        """Run the sweeps whose time has come (reading memory fills as the scan goes)."""
        while self._sweeps_due and self._sweeps_due[0] <= self.world.clock.now():
            self._sweep(self._sweeps_due.pop(0))

    def _take(self, count: int | None, remove: bool) -> list[tuple[float, str, float, int]]:
        self._catch_up()
        count = len(self.memory) if count is None else count
        if count > len(self.memory):
            raise ScpiError(OUT_OF_RANGE, f"{count} readings asked, {len(self.memory)} in memory")
        taken = self.memory[:count]
        if remove:
            del self.memory[:count]
        return taken

    def _complete(self) -> None:
        """Run the sweeps still due (the instrument's FETCh? waits for them)."""
        while self._sweeps_due:
            due = self._sweeps_due.pop(0)
            self.world.wait_until(due)
            self._sweep(due)

    def _format(self, value: float, unit: str, t: float, channel: int) -> str:
        text = f"{value:+.8E}" + (f" {unit}" if self.format["UNIT"] else "")
        if self.format["TIME"]:
            if self.time_type == "REL":
                text += f",{t:+014.3f}"
            else:
                when = EPOCH + dt.timedelta(seconds=self._scan_start + t)
                text += f",{when:%Y,%m,%d,%H,%M},{when.second + when.microsecond / 1e6:06.3f}"
        if self.format["CHAN"]:
            text += f",{channel}"
        if self.format["ALAR"]:
            text += ",0"
        return text

    def _fetch(self, call: Call) -> str:
        if not self.memory and not self._sweeps_due:
            raise ScpiError(DATA_STALE, "no readings: INITiate first")
        self._complete()
        return ",".join(self._format(*reading) for reading in self.memory)

    def _read(self, call: Call) -> str:
        self._initiate()
        return self._fetch(call)
