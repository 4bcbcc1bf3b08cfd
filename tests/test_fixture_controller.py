"""The fixture controller (family phonebench-fixture): what a calibration asks of the fixture, on
command over SCPI, against the emulated station's fixture acting on its bay's world."""
from __future__ import annotations

import pytest

from phonebench.core.errors import InstrumentError
from phonebench.drivers.fixture import ScpiFixture
from phonebench.emulation.instruments.fixture import FixtureServer
from phonebench.emulation.world import World


@pytest.fixture
def rig():
    world = World(seed=1)
    server = FixtureServer(world)
    server.start()
    driver = ScpiFixture(server.address)
    try:
        yield world, driver
    finally:
        driver.close()
        server.stop()


def test_loopback_paths_and_the_phone_back(rig):
    world, driver = rig
    driver.loopback("electrical")
    assert world.fixture.loopback == "electrical" and driver.query(":ROUTe:LOOPback?") == "ELEC"
    driver.loopback("acoustic")
    assert world.fixture.loopback == "acoustic" and driver.query(":ROUT:LOOP?") == "ACO"
    driver.loopback(None)
    assert world.fixture.loopback is None and driver.query(":ROUTe:LOOPback?") == "OFF"


def test_reference_probe_placed_and_an_unknown_point_refused_by_the_instrument(rig):
    world, driver = rig
    driver.place_reference("ambient")
    assert world.fixture.reference_point == "ambient"
    assert driver.query(":PROBe:REFerence?") == '"ambient"'
    with pytest.raises(InstrumentError, match="-224"):
        driver.place_reference("nowhere")
    assert world.fixture.reference_point == "ambient"


def test_identity_and_unknown_headers(rig):
    _, driver = rig
    assert (driver.identity.manufacturer, driver.identity.model) == ("phonebench", "FX-1")
    driver.write(":ROUTe:BOGus ON")
    assert "-113" in driver.query("SYST:ERR?")
