"""The simulated world one emulated phone lives in: clock, activity, supply, heat and sound.

The phone's runtime reports work (`work(phase, seconds)`); reactions that play out by themselves
(a spoken answer) are scheduled on the activity timeline. From that one story the power
analyzer digitizes current and voltage, the thermal model heats the die, board and cover that
the probes and the device's own thermal zones read, and the scope hears stimulus and answer.

Time moves only through `work`, `wait` and `wait_until` (device work, and instruments or hosts
that wait); physics integrates on every clock step. Everything is deterministic given the seed
and the sequence of calls.
"""
from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from emulation.audio import AudioEvent, AudioScene
from emulation.clock import SimClock
from emulation.supply import DEFAULT_RIPPLE_HZ, Supply
from emulation.thermal_model import Cooling, ThermalModel
from emulation.timeline import Timeline
from emulation.voice import VOICE_BEHAVIOURS, Dialog, VoiceAssistant

log = logging.getLogger(__name__)

# Phone power draw by activity, watts (battery side), at the nominal NPU clock.
PHASE_POWER_W = {
    "idle": 0.45,
    "audio": 1.1,  # microphone, DSP and ASR while listening
    "prefill": 4.6,
    "decode": 3.9,
    "speak": 4.1,  # streaming decode while the speaker plays the answer
    "cpu_decode": 4.4,  # layers migrated to the CPU near the NPU trip point
}
# Phases whose draw follows the NPU clock (dynamic power ~ f * V^2, V roughly follows f).
NPU_PHASES = frozenset({"prefill", "decode", "speak"})
NPU_NOMINAL_MHZ = 1100.0

# Personas (PhoneSpec.sla_persona) that change the physics; others leave it nominal.
THERMAL_PERSONAS = {"hot": Cooling(cover_scale=0.55, board_scale=0.7)}

Observer = Callable[[float], None]  # called with the world time after each physics step


@dataclass
class BatteryState:
    voltage_v: float
    current_a: float  # positive = discharging
    temp_c: float
    capacity_pct: float


class World:
    def __init__(self, clock: SimClock | None = None, ambient_c: float = 25.0, seed: int = 0,
                 persona: str = "nominal") -> None:
        self.clock = clock or SimClock()
        self.ambient_c = ambient_c
        self.seed = seed
        self._lock = threading.RLock()
        self.phase = "idle"  # what the runtime is doing right now (inside work())
        self.npu_freq_mhz = NPU_NOMINAL_MHZ
        self.capacity_pct = 87.0
        self.battery_capacity_wh = 18.5
        self.timeline = Timeline()
        self.supply = Supply()
        self.audio = AudioScene()
        self.persona = "nominal"
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
        """Apply an SLA persona's physics: voice behaviour (slow, jittery) and cooling (hot)."""
        with self._lock:
            self.persona = name
            self.voice.set_behaviour(name if name in VOICE_BEHAVIOURS else "nominal")
            previous = self.thermal.t.copy()
            self.thermal = ThermalModel(self.ambient_c, THERMAL_PERSONAS.get(name, Cooling()))
            self.thermal.t = previous

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
        if phase in NPU_PHASES:
            idle = PHASE_POWER_W["idle"]
            power = idle + (power - idle) * (self.npu_freq_mhz / NPU_NOMINAL_MHZ) ** 2
        return power

    def add_observer(self, observer: Observer) -> None:
        with self._lock:
            self._observers.append(observer)

    def remove_observer(self, observer: Observer) -> None:
        with self._lock:
            if observer in self._observers:
                self._observers.remove(observer)

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
            return self._activity(self.clock.now())[1]

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
            power = self.timeline.power_at(times, self.phase_power_w("idle"))
            source, ohms = self.supply.source_at(times, self.capacity_pct)
            current = self.supply.current_for_power(power, source, ohms)
            return source - current * ohms, current

    # --- sound ----------------------------------------------------------------------------
    def play_stimulus(self, samples: np.ndarray, sample_rate: float, peak_v: float,
                      t0: float | None = None) -> Dialog | None:
        """The audio source plays a clip: it appears on scope channel 1 and the phone hears it."""
        with self._lock:
            onset = self.clock.now() if t0 is None else t0
            event = AudioEvent(1, onset, np.asarray(samples, dtype=float), sample_rate, peak_v, label="stimulus")
            self.audio.play(event)
            heard_v = peak_v * float(np.max(np.abs(event.samples))) if event.samples.size else 0.0
            return self.voice.hear(onset, event.t1 - event.t0, heard_v)

    # --- physics --------------------------------------------------------------------------
    def _step(self, t: float, dt: float) -> None:
        # Called by the clock from the thread that advances it (which holds self._lock when
        # time moves through work/wait/wait_until): no locking here, so no lock-order cycles.
        phase, power = self._activity(t)
        source_v, ohms = self.supply.source(self.capacity_pct)
        current = self.supply.current_now(power, source_v, ohms)
        q = self.thermal.heat(phase, power)
        if not self.supply.emulator_on:
            q = q + self.thermal.heat_at("battery", current * current * ohms)
        self.thermal.step(q, dt)
        self.capacity_pct = max(0.0, self.capacity_pct - 100.0 * power * dt / 3600.0 / self.battery_capacity_wh)
        self._steps += 1
        if self._steps % 2000 == 0:
            self.timeline.trim(t)
            self.audio.trim(t)
        for observer in list(self._observers):
            observer(t + dt)
