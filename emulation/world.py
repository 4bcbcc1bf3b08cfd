"""The simulated world one emulated phone lives in: clock, activity, supply, heat and sound.

The phone's runtime reports work (`work(phase, seconds)`); reactions that play out by themselves
(a spoken answer) are scheduled on the activity timeline. From that one story the power
analyzer digitizes current and voltage, the thermal model heats the die, board and cover that
the probes and the device's own thermal zones read, and the scope hears stimulus and answer.

Time moves only through `work`, `wait` and `wait_until` (device work, and instruments or hosts
that wait); physics integrates on every clock step. Everything is deterministic given the seed
and the sequence of calls.

SLA personas (PhoneSpec.sla_persona, `SLA_PERSONAS_WORLD`) change the physics: "slow" and
"jittery" voice latency, "power-hungry" (NPU draws 20 % more and stays awake 90 s after each
answer), "hot" (poor heat loss: cover over 41.7 °C), "uneven-heat" (no spreader: hotspots more
than 3 °C apart). Any other name (the runtime's personas) leaves the world nominal.

Hooks for calibration and the production line (the real fixture's equivalents in brackets):

- `set_fixture_loopback(True)` [phone out, loopback coupler in]: the stimulus reaches both scope
  channels and no phone answers. path="acoustic" (default): channel 2 through the measurement
  mic over the fixture's 10 cm of air (`fixture_delay_s()` = 291.5 µs), the delay the latency
  check subtracts. path="electrical" [BNC tee into both inputs]: channel 2 gets the same
  voltage as channel 1 at once, so only the scope's channel skew remains. The emulated scope's
  channel 2 input lags by `phonebench.emulation.instruments.scope.INPUT_DELAY_S[2]` (35 ns, inside the
  ±100 ns that `:CHANnel2:PROBe:SKEW` accepts on the real scope); deskew +35 ns removes it.
  Measure it on the electrical path with a fast edge (an arb step at >= 100 MSa/s, 20 ns/div,
  `:MEASure:DELay?` or both waveforms), then the acoustic delay on the acoustic path.
- Instrument errors to calibrate out: the power analyzer reads current with a +1.8 mA zero
  offset (`power_analyzer.CURRENT_ZERO_OFFSET_A`, visible with the output off); the generic
  probe board's thermocouples read T1 +0.4 °C, T2 -0.3 °C, T3 +0.1 °C off. Its `REF` channel is
  a reference-grade sensor (no offset, 0.01 °C) taped beside one thermocouple:
  `place_reference_probe("cover_b")` moves it [the operator moves it]; it starts beside T1
  ("cover_a"). A Fluke/Hart server (dialect "fluke") is a second, reference thermometer.
- Production line: build the next phone on this world and load it, instruments stay attached::

      phone = emulated_phone(spec, world=world)   # spec.seed and spec.sla_persona apply
      world.load_phone(phone)                    # ambient temperature, fresh battery, no loopback
      AdbDaemon(phone).start()                   # the previous unit's daemon is stopped first

  The clock keeps running (time is monotonic across units); the activity and sound of the
  previous unit are gone; the battery emulator's settings stay, as on a real fixture.
"""
from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .audio import (
    FIXTURE_PATH_M,
    LOOPBACK_GAIN,
    SPEAKER_TO_PHONE_M,
    SPEED_OF_SOUND_M_S,
    AudioEvent,
    AudioScene,
)
from phonebench.core.station import RoomConfig
from .clock import SimClock
from .room import AirSource, Room
from .supply import DEFAULT_RIPPLE_HZ, Supply
from .thermal_model import Cooling, ThermalModel
from .timeline import Timeline
from .unit_variation import NOMINAL, UnitVariation, for_spec, spec_night_seed
from .voice import VOICE_BEHAVIOURS, Dialog, VoiceAssistant

log = logging.getLogger(__name__)

# Phone power draw by activity, watts (battery side), at the nominal NPU clock.
PHASE_POWER_W = {
    "idle": 0.45,
    "audio": 1.1,  # microphone, DSP and ASR while listening
    "prefill": 4.6,
    "decode": 3.9,
    "speak": 4.1,  # streaming decode while the speaker plays the answer
    "cpu_decode": 4.4,  # layers migrated to the CPU near the NPU trip point
    "npu_awake": 2.6,  # NPU clocked but idle: a unit that misses its power gating
}
# Phases whose draw follows the NPU clock (dynamic power ~ f * V^2, V roughly follows f).
NPU_PHASES = frozenset({"prefill", "decode", "speak", "npu_awake"})
NPU_NOMINAL_MHZ = 1100.0
FRESH_CAPACITY_PCT = 87.0  # state of charge of a unit entering the fixture
BATTERY_CAPACITY_WH = 18.5  # 4800 mAh at 3.85 V


@dataclass(frozen=True)
class PowerProfile:
    npu_scale: float = 1.0  # NPU phases draw idle + scale x (nominal - idle)
    awake_tail_s: float = 0.0  # NPU left awake after each spoken answer


# Personas (PhoneSpec.sla_persona) that change the physics; others leave it nominal.
THERMAL_PERSONAS = {
    "hot": Cooling(cover_scale=0.55, board_scale=0.7),
    # Delaminated spreader: the hotspots decouple and the SoC's heat goes straight up.
    "uneven-heat": Cooling(link_scales=(("cover_a", "cover_b", 0.0), ("board", "cover_a", 1.45),
                                        ("battery", "cover_b", 0.67))),
}
POWER_PERSONAS = {"power-hungry": PowerProfile(npu_scale=1.2, awake_tail_s=90.0)}
SLA_PERSONAS_WORLD: set[str] = {"nominal", *VOICE_BEHAVIOURS, *THERMAL_PERSONAS, *POWER_PERSONAS}
LOOPBACK_PATHS = ("acoustic", "electrical")

Observer = Callable[[float], None]  # called with the world time after each physics step


class ChamberAir(Protocol):
    """A thermal chamber's air model (emulation/chamber.py), as the world reads it."""

    def air_temperature_c(self, t: float) -> float: ...


class _InChamber:
    """A chamber's air as the world's air source (World.set_air)."""

    def __init__(self, chamber: ChamberAir) -> None:
        self.chamber = chamber

    def air_c(self, t: float) -> float:
        return self.chamber.air_temperature_c(t)


@dataclass
class Fixture:
    """What the bench's fixture does around the phone (see the module docstring)."""

    loopback: str | None = None  # None: the phone is in the fixture; else a LOOPBACK_PATHS entry
    reference_point: str = "cover_a"  # where the reference probe (REF) is taped


@dataclass
class BatteryState:
    voltage_v: float
    current_a: float  # positive = discharging
    temp_c: float
    capacity_pct: float


class World:
    def __init__(self, clock: SimClock | None = None, ambient_c: float = 25.0, seed: int = 0,
                 persona: str = "nominal", room: RoomConfig | None = None) -> None:
        self.clock = clock or SimClock()
        self.seed = seed  # the night's noise (emulation/unit_variation.py, night_seed)
        # The air around the phone: the room's (a steady ambient_c unless a room is given), its
        # thermostat at the night's own point of its cycle; a thermal chamber replaces it (set_air).
        self.air: AirSource = Room(room or RoomConfig(ambient_c=ambient_c), t0=self.clock.now(),
                                   phase=float(self.rng("room").random()))
        self._lock = threading.RLock()
        self.phase = "idle"  # what the runtime is doing right now (inside work())
        self.npu_freq_mhz = NPU_NOMINAL_MHZ
        self.capacity_pct = FRESH_CAPACITY_PCT
        self.battery_capacity_wh = BATTERY_CAPACITY_WH
        self.timeline = Timeline()
        self.background: dict[str, tuple[float, float]] = {}  # load name -> (since t, watts): e.g. the GPU load
        self.supply = Supply()
        self.audio = AudioScene()
        self.fixture = Fixture()
        self.phone: object | None = None  # the unit loaded with load_phone (None: built with it)
        self.persona = "nominal"
        self.power_profile = PowerProfile()
        self.variation = NOMINAL  # this unit's process variation (apply_unit)
        self.build_power = 1.0  # the runtime build's NPU dynamic power (emulation/runtime_builds.py)
        self.build_speak_power = 1.0  # and its spoken answers' on top (a dialog's TTS path)
        self.thermal = ThermalModel(ambient_c)
        self.voice = VoiceAssistant(self, "nominal", self.rng("voice"))
        self.apply_persona(persona)
        self.thermal.settle(self._idle_heat())  # a phone that has idled on the bench a while
        self._observers: list[Observer] = []
        self._steps = 0
        self.clock.add_listener(self._step)

    # --- configuration ------------------------------------------------------------------
    def rng(self, stream: str) -> np.random.Generator:
        """An independent, reproducible random stream for one consumer (named by a stable string)."""
        return np.random.default_rng([self.seed, zlib.crc32(stream.encode())])

    def apply_persona(self, name: str) -> None:
        """Apply an SLA persona's physics: voice behaviour, power draw and cooling.

        Names the world does not model (the runtime's personas) leave its physics nominal.
        """
        with self._lock:
            self.persona = name
            if name not in SLA_PERSONAS_WORLD:
                log.debug("persona %r changes nothing in the world's physics", name)
            self.voice.set_behaviour(name if name in VOICE_BEHAVIOURS else "nominal")
            self.power_profile = POWER_PERSONAS.get(name, PowerProfile())
            self._rebuild_thermal()

    def apply_unit(self, variation: UnitVariation) -> None:
        """The unit's own process variation (phonebench.emulation.unit_variation): its power draw,
        heat loss and audio path from now on."""
        with self._lock:
            self.variation = variation
            self._rebuild_thermal()

    def _rebuild_thermal(self) -> None:
        cooling = THERMAL_PERSONAS.get(self.persona, Cooling())
        unit = self.variation.cooling
        cooling = Cooling(cover_scale=cooling.cover_scale * unit, board_scale=cooling.board_scale * unit,
                          link_scales=cooling.link_scales)
        previous = self.thermal.t.copy()
        self.thermal = ThermalModel(self.ambient_c, cooling)
        self.thermal.t = previous

    # --- the air ------------------------------------------------------------------------------
    def air_c(self, t: float | None = None) -> float:
        """The air temperature at the phone at station-clock time t (now if None), °C: the one
        place the world answers it (the thermal model's ambient, the ambient probe's reading)."""
        return self.air.air_c(self.clock.now() if t is None else t)

    @property
    def ambient_c(self) -> float:
        """The air temperature now, °C."""
        return self.air_c()

    def set_air(self, air: AirSource) -> None:
        """Another source of the air temperature from now on (a thermal chamber's model)."""
        with self._lock:
            self.air = air

    # --- fixture and production line ----------------------------------------------------------
    def set_fixture_loopback(self, on: bool, path: str = "acoustic") -> None:
        """Phone out, loopback in (on) or the phone back in the fixture (off); see the module doc."""
        if path not in LOOPBACK_PATHS:
            raise ValueError(f"unknown loopback path {path!r}; known: {', '.join(LOOPBACK_PATHS)}")
        with self._lock:
            self.fixture.loopback = path if on else None

    @staticmethod
    def fixture_delay_s() -> float:
        """The fixture's true acoustic delay (stimulus speaker -> phone, phone -> measurement mic)."""
        return FIXTURE_PATH_M / SPEED_OF_SOUND_M_S

    def place_reference_probe(self, point: str) -> None:
        """Tape the reference probe (the generic probe board's REF channel) beside `point`."""
        known = set(self.thermal.temperatures()) | {"ambient"}
        if point not in known:
            raise ValueError(f"no probe point {point!r}; points: {', '.join(sorted(known))}")
        with self._lock:
            self.fixture.reference_point = point

    def load_phone(self, phone: object) -> None:
        """A new unit enters the fixture: its seed and persona, ambient temperature, fresh battery.

        The phone must have been built on this world (emulated_phone(spec, world=world)), so its
        sensors and runtime read this world. Instruments stay attached; the supply keeps its
        settings; the previous unit's activity, sound and answers are gone.
        """
        if getattr(phone, "world", None) is not self:
            raise ValueError("load_phone: the phone was built on another world; "
                             "create it with emulated_phone(spec, world=<this world>)")
        spec = phone.spec  # type: ignore[attr-defined]
        with self._lock:
            self.phone = phone
            self.seed = spec_night_seed(spec)
            self.variation = for_spec(spec)
            self.timeline = Timeline()
            self.background = {}
            self.audio = AudioScene()
            self.fixture.loopback = None
            self.capacity_pct = FRESH_CAPACITY_PCT
            self.npu_freq_mhz = NPU_NOMINAL_MHZ
            self.voice = VoiceAssistant(self, "nominal", self.rng("voice"))
            self.apply_persona(spec.sla_persona)
            self.thermal.ambient_c = self.ambient_c
            self.thermal.t = self.thermal.steady_state(np.zeros_like(self.thermal.t))  # at ambient
        log.info("unit %s (seed %d, persona %s) loaded into the fixture", getattr(spec, "serial", "?"),
                 self.seed, self.persona)

    def _idle_heat(self) -> np.ndarray:
        return self.thermal.heat("idle", self.phase_power_w("idle"))

    def set_npu_frequency(self, mhz: float) -> None:
        if mhz <= 0:
            raise ValueError(f"NPU frequency must be positive, got {mhz}")
        self.npu_freq_mhz = float(mhz)

    def phase_power_w(self, phase: str) -> float:
        try:
            power = PHASE_POWER_W[phase]
        except KeyError:
            raise ValueError(f"unknown phone activity {phase!r}; known: {sorted(PHASE_POWER_W)}") from None
        idle = PHASE_POWER_W["idle"] * self.variation.leakage
        dynamic = (power - PHASE_POWER_W["idle"]) * self.variation.dynamic
        if phase in NPU_PHASES:
            dynamic *= self.power_profile.npu_scale * self.build_power * (self.npu_freq_mhz / NPU_NOMINAL_MHZ) ** 2
        if phase == "speak":
            dynamic *= self.build_speak_power
        power = idle + dynamic
        return power

    def add_observer(self, observer: Observer) -> None:
        with self._lock:
            self._observers.append(observer)

    def remove_observer(self, observer: Observer) -> None:
        with self._lock:
            if observer in self._observers:
                self._observers.remove(observer)

    def use_chamber(self, chamber: ChamberAir) -> None:
        """The phone sits in a chamber: from now on its ambient is the chamber's air."""
        self.set_air(_InChamber(chamber))

    # --- time ---------------------------------------------------------------------------
    def work(self, phase: str, seconds: float) -> float:
        """Run the phone in `phase` for `seconds` of simulated time; returns the end time."""
        power = self.phase_power_w(phase)
        with self._lock:
            now = self.clock.now()
            self.timeline.record(now, now + seconds, phase, power)
            previous, self.phase = self.phase, phase
            try:
                return self.clock.advance(seconds)
            finally:
                self.phase = previous

    def wait(self, seconds: float) -> float:
        with self._lock:
            return self.clock.advance(seconds)

    def wait_until(self, t: float) -> float:
        with self._lock:
            return self.clock.advance(max(0.0, t - self.clock.now()))

    def schedule(self, phase: str, t0: float, t1: float) -> None:
        """Future (or ongoing) activity that plays out by itself, e.g. speaking an answer."""
        if t1 > t0:
            with self._lock:
                self.timeline.schedule(t0, t1, phase, self.phase_power_w(phase))

    # --- what the device reports ----------------------------------------------------------
    def _activity(self, t: float) -> tuple[str, float]:
        segment = self.timeline.at(t)
        if segment is None:
            return "idle", self.phase_power_w("idle")
        return segment.phase, segment.power_w

    def power_w(self) -> float:
        with self._lock:
            now = self.clock.now()
            return self._activity(now)[1] + float(self._background_at(np.array([now]))[0])

    def set_background(self, name: str, watts: float) -> None:
        """A load beside the runtime's work (the GPU load generator) draws `watts` from now on
        (0: it stopped); it shows on the supply and heats the SoC."""
        with self._lock:
            if watts > 0:
                self.background[name] = (self.clock.now(), float(watts))
            else:
                self.background.pop(name, None)

    def _background_at(self, times: np.ndarray) -> np.ndarray:
        extra = np.zeros(times.shape)
        for since, watts in self.background.values():
            extra[times >= since] += watts
        return extra

    def temperatures(self) -> dict[str, float]:
        """The phone's own sensors (thermal zones, dumpsys), °C."""
        with self._lock:
            t = self.thermal.temperatures()
        # The skin thermistor sits inside the cover between the two hotspots, nearer the SoC.
        skin = 0.7 * t["cover_a"] + 0.3 * t["cover_b"] - 0.3
        return {"npu": t["npu"], "cpu": t["cpu"], "board": t["board"], "skin": skin, "battery": t["battery"]}

    def surface_temperatures(self) -> dict[str, float]:
        """Every node a bench probe can be taped to, plus ambient, °C."""
        with self._lock:
            points = self.thermal.temperatures()
            points["ambient"] = self.ambient_c
            points["reference"] = points[self.fixture.reference_point]
        return points

    def battery_state(self) -> BatteryState:
        with self._lock:
            volts, current = self._electrical_now()
            return BatteryState(voltage_v=volts, current_a=current,
                                temp_c=self.thermal.temperatures()["battery"], capacity_pct=self.capacity_pct)

    # --- supply ---------------------------------------------------------------------------
    def _electrical_now(self) -> tuple[float, float]:
        source_v, ohms = self.supply.source(self.capacity_pct)
        current = self.supply.current_now(self.power_w(), source_v, ohms)
        return source_v - current * ohms, current

    @property
    def supply_v(self) -> float:
        """Terminal voltage at the phone now (sags with load through the source's resistance)."""
        with self._lock:
            return self._electrical_now()[0]

    @supply_v.setter
    def supply_v(self, volts: float) -> None:
        """Power the phone from a bench supply at `volts` (what a battery emulator's VOLT does)."""
        with self._lock:
            self.supply.emulator_on = True
            self.supply.setpoint_v = float(volts)

    @property
    def ripple_v(self) -> float:
        """Sine ripple amplitude on the phone's supply, volts (0 when none runs)."""
        return self.supply.active_ripple_v()

    @ripple_v.setter
    def ripple_v(self, amplitude: float) -> None:
        with self._lock:
            self.supply.emulator_on = True
            self.supply.ripple_amplitude_v = float(amplitude)
            self.supply.ripple_hz = self.supply.ripple_hz or DEFAULT_RIPPLE_HZ
            self.supply.ripple_running = amplitude > 0
            self.supply.ripple_t0 = self.clock.now()

    def ripple_amplitude_v(self) -> float:
        return self.ripple_v

    def electrical_at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(terminal volts, amps) the phone sees and draws at each ascending time (no meter noise)."""
        with self._lock:
            power = self.timeline.power_at(times, self.phase_power_w("idle")) + self._background_at(times)
            source, ohms = self.supply.source_at(times, self.capacity_pct)
            current = self.supply.current_for_power(power, source, ohms)
            return source - current * ohms, current

    # --- sound ----------------------------------------------------------------------------
    def play_stimulus(self, samples: np.ndarray, sample_rate: float, peak_v: float,
                      t0: float | None = None) -> Dialog | None:
        """The audio source plays a clip: it appears on scope channel 1 and the phone hears it
        over the fixture's speaker path (in loopback, channel 2 hears it instead; no answer)."""
        with self._lock:
            onset = self.clock.now() if t0 is None else t0
            event = AudioEvent(1, onset, np.asarray(samples, dtype=float), sample_rate, peak_v, label="stimulus")
            self.audio.play(event)
            if self.fixture.loopback == "acoustic":
                self.audio.play(AudioEvent(2, onset + self.fixture_delay_s(), event.samples, sample_rate,
                                           peak_v * LOOPBACK_GAIN, label="loopback"))
                return None
            if self.fixture.loopback == "electrical":
                self.audio.play(AudioEvent(2, onset, event.samples, sample_rate, peak_v, label="loopback"))
                return None
            heard_v = peak_v * float(np.max(np.abs(event.samples))) if event.samples.size else 0.0
            return self.voice.hear(onset + SPEAKER_TO_PHONE_M / SPEED_OF_SOUND_M_S, event.t1 - event.t0, heard_v)

    # --- physics --------------------------------------------------------------------------
    def _step(self, t: float, dt: float) -> None:
        # Called by the clock from the thread that advances it (which holds self._lock when
        # time moves through work/wait/wait_until): no locking here, so no lock-order cycles.
        phase, power = self._activity(t)
        extra = sum(w for since, w in self.background.values() if since <= t)
        source_v, ohms = self.supply.source(self.capacity_pct)
        power += extra
        current = self.supply.current_now(power, source_v, ohms)
        q = self.thermal.heat(phase, power - extra) + self.thermal.heat_at("cpu", extra)  # the GPU sits by the CPU
        if not self.supply.emulator_on:
            q = q + self.thermal.heat_at("battery", current * current * ohms)
        self.thermal.ambient_c = self.air.air_c(t + 0.5 * dt)  # the room's air over this step
        self.thermal.step(q, dt)
        self.capacity_pct = max(0.0, self.capacity_pct - 100.0 * power * dt / 3600.0 / self.battery_capacity_wh)
        self._steps += 1
        if self._steps % 2000 == 0:
            self.timeline.trim(t)
            self.audio.trim(t)
        for observer in list(self._observers):
            observer(t + dt)
