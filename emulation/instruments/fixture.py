"""Emulated fixture controller: the relays and the probe arm of an automated test fixture,
driven over SCPI like an instrument (family `phonebench-fixture`).

A calibration needs the phone replaced by a loopback path and the reference probe taped beside
one thermocouple. On a manual fixture an operator does it when asked; an automated fixture (a
relay box switching the audio paths, an arm placing the probe) does it on command. The emulated
station is such a fixture, acting on its bay's simulated world:

    *IDN?                                   -> phonebench,FX-1,FX-000001,1.0
    :ROUTe:LOOPback ACOustic|ELECtrical|OFF    the loopback path in place of the phone, or the phone back
    :ROUTe:LOOPback?                        -> ACO | ELEC | OFF
    :PROBe:REFerence "<point>"                 the reference probe beside a probe point (cover_a, ambient, ...)
    :PROBe:REFerence?                       -> "<point>" or "" when none was placed

A point the fixture has no probe at is -224 "Illegal parameter value"; anything else -113.
"""
from __future__ import annotations

from .scpi import ILLEGAL_VALUE, Call, ScpiError
from .server import InstrumentServer
from ..world import World

IDN = "phonebench,FX-1,FX-000001,1.0"
PATHS = {"ACO": "acoustic", "ACOUSTIC": "acoustic", "ELEC": "electrical", "ELECTRICAL": "electrical", "OFF": None}
SHORT = {"acoustic": "ACO", "electrical": "ELEC", None: "OFF"}


class FixtureServer(InstrumentServer):
    family = "phonebench-fixture"
    idn = IDN

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(port)
        self.world = world
        self.tree.add(":ROUTe:LOOPback", self._set_loopback)
        self.tree.add(":ROUTe:LOOPback?", lambda call: SHORT[self.world.fixture.loopback])
        self.tree.add(":PROBe:REFerence", self._place_reference)
        self.tree.add(":PROBe:REFerence?", lambda call: f'"{self.world.fixture.reference_point or ""}"')

    def _set_loopback(self, call: Call) -> None:
        word = call.arg(0).strip().upper()
        if word not in PATHS:
            raise ScpiError(ILLEGAL_VALUE, f"loopback {word!r}: ACOustic, ELECtrical or OFF")
        path = PATHS[word]
        self.world.set_fixture_loopback(path is not None, path=path or "acoustic")

    def _place_reference(self, call: Call) -> None:
        point = call.arg(0).strip().strip('"')
        try:
            self.world.place_reference_probe(point)
        except ValueError as exc:
            raise ScpiError(ILLEGAL_VALUE, str(exc)) from None
