"""Identity and device-state sanity: every result must be traceable to a unit and a build."""
from __future__ import annotations

import pytest

from phonebench.bench.phone.device_state import read_battery, read_thermal_status, read_thermal_zones

# What a phone says about itself (properties, thermal zones, battery): nothing independent.
pytestmark = [pytest.mark.acceptance, pytest.mark.regression, pytest.mark.evidence("self-reported")]

SUPPORTED_CONTRACTS = ("1.",)


@pytest.mark.acceptance(check="identity")
def test_identity_is_complete(dut_identity, sla, record):
    missing = [f for f in ("serial", "soc_manufacturer", "soc_model", "build_fingerprint", "runtime_version",
                           "microcode") if not getattr(dut_identity, f)]
    record.judge(sla, "identity_fields_missing", len(missing), detail=", ".join(missing))


@pytest.mark.acceptance(check="identity")
def test_runtime_contract_is_supported(dut_identity, sla, record):
    contract = dut_identity.runtime_contract or ""
    supported = contract.startswith(SUPPORTED_CONTRACTS)
    record.judge(sla, "runtime_contract_supported", int(supported),
                 detail=f"contract {contract or 'absent'}; bench speaks {', '.join(SUPPORTED_CONTRACTS)}x")


@pytest.mark.acceptance(check="device-state")
def test_thermal_zones_agree_with_thermal_service(dut, sla, record):
    zones = {z.type: z.celsius for z in read_thermal_zones(dut)}
    report = read_thermal_status(dut)
    record.raw("thermal", {"zones": zones, "hal": report.temperatures, "status": report.status})
    shared = sorted(set(zones) & set(report.temperatures))
    worst = max((abs(zones[n] - report.temperatures[n][1]) for n in shared), default=None)
    record.judge(sla, "thermal_zone_vs_hal_max_diff", worst, n=len(shared),
                 detail="sysfs thermal zones against dumpsys thermalservice, same sensor names")
    record.judge(sla, "thermal_zone_max", max(zones.values()), n=len(zones))
    record.judge(sla, "thermal_status", report.status, detail="0 none .. 6 shutdown; at rest")


@pytest.mark.acceptance(check="device-state")
def test_battery_reading_is_plausible(dut, sla, record):
    battery = read_battery(dut)
    record.raw("battery", battery.__dict__)
    record.judge(sla, "battery_voltage_min", battery.voltage_v)
    record.judge(sla, "battery_voltage_max", battery.voltage_v)
    record.judge(sla, "battery_capacity", battery.capacity_pct)
