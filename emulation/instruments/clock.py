"""Emulated station time server: the emulated world's clock, read over SCPI like an instrument.

The emulated world runs on simulated time, faster than real time, so the host's clock tells
nothing about when something happened in it. This server is the station clock of an emulated
station (phonebench.drivers.clock.ScpiClock, family `phonebench-clock`):

    *IDN?               -> phonebench,TS-1,TS-000001,1.0
    :TIME:MONotonic?    -> the world's time in seconds, e.g. 1800000012.345678
    :TIME:RESolution?   -> the step of those answers in seconds (1e-06)

Reading the time never advances it. Anything else is answered like a SCPI instrument would:
-113 "Undefined header" in the error queue.
"""
from __future__ import annotations

from .scpi import Call
from .server import InstrumentServer
from ..world import World

IDN = "phonebench,TS-1,TS-000001,1.0"
RESOLUTION_S = 1e-6


class ClockServer(InstrumentServer):
    family = "phonebench-clock"
    idn = IDN

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(port)
        self.world = world
        self.tree.add(":TIME:MONotonic?", self._monotonic)
        self.tree.add(":TIME:RESolution?", lambda call: f"{RESOLUTION_S:.0e}")

    def _monotonic(self, call: Call) -> str:
        return f"{self.world.clock.now():.6f}"
