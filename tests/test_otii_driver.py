"""The Otii driver (drivers/otii.py) through Qoitech's unmodified client against the emulated Otii
server: identity, power checks whose results agree with the N6705C's on the same phone within
their stated uncertainties, the ripple checks refused with a reason, and bad addresses named."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from device_double import PhoneDevice

from phonebench.bench.checks import power as power_check
from phonebench.bench.checks import redundancy
from phonebench.bench.specs.sla import load_profile
from phonebench.core.errors import ConfigError, InstrumentError, UnsupportedCapability
from phonebench.core.verdict import Evidence
from phonebench.drivers.registry import open_instrument
from phonebench.emulation.device import PhoneSpec
from phonebench.emulation.instruments.otii import OtiiServer
from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.world import World

PROFILE = load_profile("default")
SEED = 11


@contextlib.contextmanager
def supplied(server_type: type, seed: int = SEED) -> Iterator[tuple[Any, PhoneDevice, World]]:
    """One phone in its world behind one supply of `server_type`, through the lab's driver."""
    world = World(seed=seed)
    phone = emulated_phone(PhoneSpec(serial="EMU-OTII", seed=seed), world=world)
    server = server_type(world)
    server.start()
    supply = None
    try:
        supply = open_instrument("supply", server.family, server.address)
        yield supply, PhoneDevice(phone), world
    finally:
        if supply is not None:
            supply.close()
        server.stop()


def test_the_driver_names_the_otii_and_states_what_it_can_do():
    with supplied(OtiiServer) as (otii, _, _):
        identity = otii.identity
        assert (identity.manufacturer, identity.model, identity.family) == ("Qoitech", "Otii Arc", "qoitech-otii")
        assert identity.serial.startswith("Arc") and identity.firmware
        assert not otii.features.ripple and not otii.features.series_resistance
        assert "Otii Arc" in otii.accuracy.source
        assert otii.digitizer_interval(163.84e-6) == pytest.approx(1e-4)  # 6.1 kS/s asked: 10 kS/s
        assert otii.digitizer_interval(1e-5) == pytest.approx(2e-5)  # faster than it can: its fastest


def test_a_recording_is_a_sweep_with_its_pretrigger_and_the_phone_current_in_it():
    with supplied(OtiiServer) as (otii, device, world):
        power_check.battery_emulation(otii)
        trace = otii.digitize(2000, 1e-4, pretrigger_points=500)
        assert trace.current_a.size == trace.voltage_v.size == 2000 and trace.pretrigger_points == 500
        assert trace.t[0] == pytest.approx(-0.05) and trace.interval_s == pytest.approx(1e-4)
        assert 3.7 < float(np.mean(trace.voltage_v)) < 3.9  # the setpoint at the phone's terminals
        assert float(np.mean(trace.current_a)) > 0.05  # the idle phone draws through the Otii
        assert otii.measure_current() == pytest.approx(float(np.mean(trace.current_a)), rel=0.3)


@pytest.mark.slow  # two series of long generates; tests/test_otii_bay.py makes it the lab's way too
def test_sustained_power_on_an_otii_agrees_with_the_n6705c_on_the_same_phone():
    entry = PROFILE.get(power_check.SUSTAINED)
    verdicts = {}
    for server_type in (OtiiServer, PowerAnalyzerServer):
        with supplied(server_type) as (supply, device, _):
            power_check.battery_emulation(supply)
            result = power_check.sustained_power_check(supply, device, sustained_power=entry, runs=4, tokens=60)
            verdicts[server_type.__name__] = result.verdicts[0]
    otii, n6705c = verdicts["OtiiServer"], verdicts["PowerAnalyzerServer"]
    assert otii.evidence is Evidence.MEASURED and otii.outcome is n6705c.outcome  # 4 runs: too few to decide
    sources = " ".join(c.note for c in otii.uncertainty.components)
    assert "Otii Arc" in sources and "N6781A" not in sources
    combined = float(np.hypot(otii.uncertainty.expanded, n6705c.uncertainty.expanded))
    assert abs(otii.value - n6705c.value) <= combined, (otii.value, n6705c.value, combined)


def test_the_ripple_checks_are_refused_with_the_reason_not_failed():
    with supplied(OtiiServer) as (otii, _, _):
        with pytest.raises(UnsupportedCapability, match="no ripple source.*keysight-n6705c"):
            redundancy.require_ripple(otii)
        with pytest.raises(InstrumentError, match="no arbitrary-waveform source"):
            otii.set_ripple(0.05, 217.0)
        with pytest.raises(InstrumentError, match="cannot put 0.08 ohm in series"):
            otii.set_output_resistance(0.08)


def test_a_value_outside_the_arc_is_refused_with_the_server_s_own_words():
    with supplied(OtiiServer) as (otii, _, _):
        with pytest.raises(InstrumentError, match="set the main voltage to 5 V: Invalid key value"):
            otii.set_voltage(5.0)


def test_no_server_and_a_visa_address_are_named_with_what_to_do():
    with pytest.raises(InstrumentError, match="no Otii server answers") as gone:
        open_instrument("supply", "qoitech-otii", "127.0.0.1:9", timeout_s=1.0)
    assert "Automation" in gone.value.hint
    with pytest.raises(ConfigError, match="is not host:port"):
        open_instrument("supply", "qoitech-otii", "TCPIP::10.0.0.6::5025::SOCKET")
