"""The same drivers on pyvisa-sim (`@sim`): nothing in them depends on the VISA backend.

Fixture names avoid the plugin's instrument roles (scope, supply, ...), which open the station."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from phonebench.drivers.registry import known_families, open_instrument

SIM = f"{Path(__file__).parent / 'data' / 'instruments_sim.yaml'}@sim"


@pytest.fixture()
def sim_supply():
    instrument = open_instrument("supply", "keysight-n6705c", "TCPIP0::supply.sim::inst0::INSTR", backend=SIM)
    yield instrument
    instrument.close()


def test_supply_driver_runs_on_the_simulated_backend(sim_supply):
    supply = sim_supply
    assert supply.identity.model == "N6705C" and supply.identity.options == {"module@1": "N6781A"}
    supply.set_voltage(3.85)
    assert supply.query_float("VOLT? (@1)") == 3.85
    assert supply.measure_voltage() == pytest.approx(3.849)


def test_simulated_errors_and_invalid_readings_surface_the_same_way(sim_supply):
    supply = sim_supply
    with pytest.raises(InstrumentError, match='VOLT 30,\\(@1\\)` failed: -113'):
        supply.set_voltage(30)  # outside the property's range
    with pytest.raises(InvalidMeasurement, match="overload"):
        supply.measure_current()


def test_scope_driver_on_the_simulated_backend():
    scope = open_instrument("scope", "keysight-infiniivision", "TCPIP0::scope.sim::inst0::INSTR",
                            backend=SIM, poll_s=0)
    scope.wait_triggered(timeout_s=1)
    assert scope.measure_delay(1, 2) is None  # 9.9E+37
    assert scope.measure_delay(1, 3) == pytest.approx(0.261)
    scope.close()


def test_registry_refuses_unknown_roles_families_and_options():
    with pytest.raises(ConfigError, match="unknown instrument role 'dmm'"):
        open_instrument("dmm", "keysight-34465a", "x")
    with pytest.raises(ConfigError) as err:
        open_instrument("scope", "tektronix-mso5", "x")
    assert "keysight-infiniivision" in str(err.value) and "rigol-ds1000z" in str(err.value)
    with pytest.raises(ConfigError, match="bad option"):
        open_instrument("scope", "rigol-ds1000z", "x", bogus=1)
    assert known_families() == {"scope": ["keysight-infiniivision", "rigol-ds1000z"], "supply": ["keysight-n6705c", "qoitech-otii"],
                                "thermal": ["fluke-1521", "fluke-1529", "fluke-hart", "generic-ascii", "keysight-daq970a"],
                                "stimulus": ["keysight-33500b"], "clock": ["host", "phonebench-clock"],
                                "fixture": ["phonebench-fixture"], "chamber": ["watlow-f4t"]}


@pytest.mark.filterwarnings("ignore:read string doesn't end with termination characters")
def test_absent_instruments_are_clear_errors():
    with pytest.raises(InstrumentError, match="nowhere.sim.*answered ''"):
        open_instrument("supply", "keysight-n6705c", "TCPIP0::nowhere.sim::inst0::INSTR", backend=SIM)
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(InstrumentError, match=f"127.0.0.1::{port}::SOCKET.*refused"):
        open_instrument("supply", "keysight-n6705c", f"TCPIP::127.0.0.1::{port}::SOCKET", timeout_s=1)
