"""The air around a bay: the one place the emulated world asks "what is the air temperature at
time t" (`AirSource.air_c`). A `Room` answers it from the station file's `[room]` table
(docs/station-file.md, "The room"); a thermal chamber's model can answer it instead
(`World.set_air`), and everything that reads the air — the phone's thermal model, the ambient
probe — follows.

Time in a room is the station clock's, counted from the room's start (the station's start).
"""
from __future__ import annotations

import math
from typing import Protocol

from phonebench.core.station import RoomConfig

# The default emulated rack's bays sit at slightly different ambients, as real racks do (the top of
# a rack is warmer, a bay by the door cooler): bay k gets RACK_AMBIENTS_C[(k - 1) % 4].
RACK_AMBIENTS_C = (24.6, 25.3, 24.9, 25.5)


class AirSource(Protocol):
    def air_c(self, t: float) -> float:
        """Air temperature at the phone, °C, at station-clock time t (s)."""
        ...


class Room:
    """A bay's room: ambient_c moved by its profile, and its door (RoomConfig's fields)."""

    def __init__(self, config: RoomConfig, t0: float = 0.0, phase: float = 0.0) -> None:
        self.config = config
        self.t0 = t0  # the room's start on the station clock
        self.phase = phase  # where in its cycle the thermostat is at t0 (a fraction of a period)

    def air_c(self, t: float) -> float:
        c = self.config
        s = t - self.t0
        air = c.ambient_c
        if c.profile == "hvac":  # the thermostat's cycle
            air += c.hvac_amplitude_c * math.sin(2.0 * math.pi * (s / c.hvac_period_s + self.phase))
        elif c.profile == "warm-night":  # the building warms through the night, then holds
            air += c.ramp_c * min(max(s, 0.0) / c.ramp_s, 1.0)
        if c.door_open_at_s is not None and c.door_open_at_s <= s < c.door_open_at_s + c.door_open_for_s:
            air += c.door_delta_c  # the corridor's air, while the door stands open
        return air


def rack_room(bay_index: int) -> RoomConfig:
    """The default room of the emulated rack's `bay_index`-th bay (1-based): steady, at its own ambient."""
    return RoomConfig(ambient_c=RACK_AMBIENTS_C[(bay_index - 1) % len(RACK_AMBIENTS_C)])
