"""Identity and device-state sanity: every result must be traceable to a unit and a build."""
from __future__ import annotations

import pytest

from phonebench.bench.phone.device_state import read_battery, read_thermal_status, read_thermal_zones

# What a phone says about itself (properties, thermal zones, battery): nothing independent.
pytestmark = [pytest.mark.acceptance, pytest.mark.regression, pytest.mark.evidence("self-reported")]

SUPPORTED_CONTRACTS = ("1.",)


@pytest.mark.acceptance(check="identity")
def test_identity_is_complete(dut_identity, record):
    missing = [f for f in ("serial", "soc_manufacturer", "soc_model", "build_fingerprint", "runtime_version",
                           "microcode") if not getattr(dut_identity, f)]
    record.check("identity_fields_missing", len(missing), "fields", 0, "==", detail=", ".join(missing))


@pytest.mark.acceptance(check="identity")
def test_runtime_contract_is_supported(dut_identity, record):
    contract = dut_identity.runtime_contract or ""
    supported = contract.startswith(SUPPORTED_CONTRACTS)
    record.check("runtime_contract_supported", int(supported), "bool", 1, "==",
                 detail=f"contract {contract or 'absent'}; bench speaks {', '.join(SUPPORTED_CONTRACTS)}x")


@pytest.mark.acceptance(check="device-state")
def test_thermal_zones_agree_with_thermal_service(dut, record):
    zones = {z.type: z.celsius for z in read_thermal_zones(dut)}
    report = read_thermal_status(dut)
    record.raw("thermal", {"zones": zones, "hal": report.temperatures, "status": report.status})
    shared = sorted(set(zones) & set(report.temperatures))
    worst = max((abs(zones[n] - report.temperatures[n][1]) for n in shared), default=None)
    record.check("thermal_zone_vs_hal_max_diff", worst, "degC", 2.0, "<=", n=len(shared),
                 detail="sysfs thermal zones against dumpsys thermalservice, same sensor names")
    record.check("thermal_zone_max", max(zones.values()), "degC", 95.0, "<=", n=len(zones))
    record.check("thermal_status", report.status, "level", 2, "<=", detail="0 none .. 6 shutdown; at rest")


@pytest.mark.acceptance(check="device-state")
def test_battery_reading_is_plausible(dut, record):
    battery = read_battery(dut)
    record.raw("battery", battery.__dict__)
    record.check("battery_voltage_min", battery.voltage_v, "V", 3.3, ">=")
    record.check("battery_voltage_max", battery.voltage_v, "V", 4.5, "<=")
    record.check("battery_capacity", battery.capacity_pct, "%", 5.0, ">=")
