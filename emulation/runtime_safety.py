"""The runtime's two protections: voltage redundancy (claim 10) and the NPU thermal trip (claim 8).

Redundancy: the runtime senses the supply ripple amplitude (a PMIC ADC reading; here the world's
`ripple_amplitude_v()`) on every call. In auto mode it engages when the ripple exceeds
trigger_mv and releases below release_mv (hysteresis; a release above the trigger acts as the
trigger). The auto state is tracked in every mode, so forcing the mode off for a measurement and
back to auto does not forget it. Mode on/off forces it. What the runtime reports (`reported`) is
what it does (`active`) unless a persona lies: "redundancy-flag-only" raises the flag without
dual compute, "ripple-sensed-low" has a PMIC reading that is a fraction of the real ripple.

Thermal: before each step the runtime reads the NPU temperature. At the trip temperature it
migrates a quarter of the layers to the CPU, another quarter every ESCALATE_S while still at or
above the trip, and brings them back a quarter at a time once the NPU has cooled HYSTERESIS_C
below it. Each change is an event the runtime streams. A persona with kill_at_trip reproduces
the old product: the process is killed at the trip instead. "trip-misreported" writes a fixed
temperature into its migrate events instead of the one it acted on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runtime_personas import RuntimePersona

LAYERS = 48            # transformer layers of the product's model (what migrates)
MIGRATION_STEP = 12
ESCALATE_S = 1.0
HYSTERESIS_C = 3.0
LATE_RELEASE_MARGIN_MV = 5.0


@dataclass
class RedundancyController:
    works: bool = True
    fixed_trigger_mv: float | None = None  # a runtime that ignores its configured trigger
    flag_only: bool = False  # reports engaged without computing twice
    sense_gain: float = 1.0  # what the ripple sensor reads per mV of real ripple
    engaged: bool = False  # the auto state machine
    sensed_mv: float = 0.0

    @classmethod
    def for_persona(cls, persona: "RuntimePersona") -> "RedundancyController":
        return cls(works=persona.redundancy_works, fixed_trigger_mv=persona.redundancy_trigger_mv,
                   flag_only=persona.redundancy_flag_only, sense_gain=persona.ripple_sense_gain)

    def update(self, ripple_mv: float, trigger_mv: float, release_mv: float) -> None:
        ripple_mv *= self.sense_gain
        self.sensed_mv = ripple_mv
        if self.fixed_trigger_mv is not None:
            trigger_mv, release_mv = self.fixed_trigger_mv, self.fixed_trigger_mv - LATE_RELEASE_MARGIN_MV
        release_mv = min(release_mv, trigger_mv)
        if not self.engaged and ripple_mv > trigger_mv:
            self.engaged = True
        elif self.engaged and ripple_mv < release_mv:
            self.engaged = False

    def reported(self, mode: str) -> bool:
        """What `llmrt status` says about redundancy."""
        return self.works and (mode == "on" or (mode == "auto" and self.engaged))

    def active(self, mode: str) -> bool:
        """Whether the runtime really computes twice and votes now."""
        return self.reported(mode) and not self.flag_only


class ThermalKill(Exception):
    """The inference process is killed by the thermal governor (kill_at_trip persona)."""

    def __init__(self, npu_c: float) -> None:
        super().__init__(f"killed at NPU {npu_c:.1f} degC")
        self.npu_c = npu_c


@dataclass
class ThermalGovernor:
    trip_c: float = 72.0
    kill_at_trip: bool = False
    reported_c: float | None = None  # written into migrate events instead of the temperature acted on
    layers_on_cpu: int = 0
    migrations: int = 0   # migrate events (each step to the CPU)
    trips: int = 0        # migrations that started from all layers on the NPU
    _last_change_t: float = field(default=float("-inf"), repr=False)

    @classmethod
    def for_persona(cls, persona: "RuntimePersona") -> "ThermalGovernor":
        return cls(trip_c=persona.trip_c, kill_at_trip=persona.kill_at_trip, reported_c=persona.trip_reported_c)

    @property
    def cpu_fraction(self) -> float:
        return self.layers_on_cpu / LAYERS

    def check(self, t: float, npu_c: float, cpu_c: float) -> dict[str, Any] | None:
        """Act on the NPU temperature; returns the event to stream, if anything changed."""
        if npu_c >= self.trip_c:
            if self.kill_at_trip:
                raise ThermalKill(npu_c)
            first = self.layers_on_cpu == 0
            if self.layers_on_cpu < LAYERS and (first or t - self._last_change_t >= ESCALATE_S):
                self.layers_on_cpu += MIGRATION_STEP
                self.migrations += 1
                self.trips += int(first)
                return self._event(t, "migrate", npu_c, cpu_c)
        elif self.layers_on_cpu and npu_c <= self.trip_c - HYSTERESIS_C and t - self._last_change_t >= ESCALATE_S:
            self.layers_on_cpu -= MIGRATION_STEP
            return self._event(t, "restore", npu_c, cpu_c)
        return None

    def _event(self, t: float, action: str, npu_c: float, cpu_c: float) -> dict[str, Any]:
        self._last_change_t = t
        if action == "migrate" and self.reported_c is not None:
            npu_c = self.reported_c
        return {"event": "thermal", "t": t, "action": action, "npu_c": round(npu_c, 2), "cpu_c": round(cpu_c, 2),
                "layers_on_cpu": self.layers_on_cpu, "layers": LAYERS}

    def reset(self) -> None:
        self.layers_on_cpu = 0
        self._last_change_t = float("-inf")
