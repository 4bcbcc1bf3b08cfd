"""The SLA suite, instrument side: claims 1, 2, 6 and 7 measured with the scope, the audio
stimulus, the power analyzer and the thermal probes (bench/checks/{voice,power,thermal}.py;
claims 1, 2 and 7 from one sustained-use study, bench/checks/sustained.py).

Limits, confidence and sample counts come from the station's SLA profile; every verdict keeps
its raw series next to results.json (the first raw file of each verdict holds what its plot
needs). The fixture's acoustic delay comes from the station's calibration when it has one; the
latency verdicts say whether it was applied. `acceptance` marks the short sanity versions a
production line can afford on every unit.
"""
from __future__ import annotations

from typing import Any

import pytest

from phonebench.bench.checks import chamber_hold
from phonebench.bench.checks import power as power_check
from phonebench.bench.checks import sanity
from phonebench.bench.checks import sustained as sustained_check
from phonebench.bench.checks import thermal as thermal_check

pytestmark = pytest.mark.evidence("measured")  # the scope, the digitizer and the probes


@pytest.fixture
def fixture_delay(calibration: Any) -> float | None:
    """The fixture's acoustic delay from the station's calibration (None: not calibrated)."""
    return getattr(calibration, "fixture_delay_s", None)


@pytest.mark.regression
@pytest.mark.needs("supply")
def test_sustained_and_peak_power(dut, supply, sla, record):
    """Claim 6: sustained inference power (run means of long generates) and the peak."""
    power_check.battery_emulation(supply)
    power_check.sustained_power_check(supply, dut,
                                      sustained_power=sla.get(power_check.SUSTAINED)).record_into(record)


@pytest.mark.acceptance
@pytest.mark.line
@pytest.mark.needs("scope", "stimulus", "supply")
def test_voice_and_power_sanity(dut, scope, stimulus, supply, sla, fixture_delay, record):
    """Short line check: a few dialogs, each answered within the latency and dialog limits
    (every trial, no statistics over a handful), and one generate within the sustained power."""
    sanity.voice_and_power_sanity_check(scope, stimulus, supply, dut, **sla.pick(**sanity.ENTRIES),
                                        fixture_delay_s=fixture_delay or 0.0,
                                        fixture_calibrated=fixture_delay is not None).record_into(record)


@pytest.mark.regression
@pytest.mark.needs("stimulus")
def test_sustained_use(request, station, dut, stimulus, sla, fixture_delay, record, hold_air):
    """Claims 1, 2, 6 (energy per dialog) and 7 from one sustained-use study (bench/checks/sustained.py):
    the voice trials (p99 and std of the latency, p99 of the dialog; the first 27 also swept by the
    power analyzer's digitizer for their energy) are the first part of the warm-up of the cover loop
    (hottest back-cover probe and spread after warm-up); each verdict states its conditions. In a
    chamber the study starts once its air is stable at claim 7's ambient, and states it."""
    scope, thermal, supply = (_on_this_phone(request, station, dut, role) for role in ("scope", "thermal", "supply"))
    if scope is None and thermal is None:
        pytest.skip(f"no scope or thermal probe on {dut.name}: neither the voice nor the cover claim can be measured")
    if supply is not None:
        power_check.battery_emulation(supply)
    energy = sla.get(power_check.ENERGY) if supply is not None and scope is not None else None
    held = hold_air(sla.get(thermal_check.COVER_MAX))
    with chamber_hold.kept(record, held):
        result = sustained_check.sustained_use_check(
            scope, stimulus, thermal, dut, supply, **sla.pick(**sustained_check.ENTRIES), energy=energy,
            fixture_delay_s=fixture_delay or 0.0, fixture_calibrated=fixture_delay is not None,
            watch=held.watch if held else None)
    (held.attach(result) if held else result).record_into(record)


def _on_this_phone(request: pytest.FixtureRequest, station: Any, dut: Any, role: str) -> Any:
    """The station's instrument in `role` when it is wired to this phone, else None."""
    if role not in station.instruments or station.instrument_dut(role) != dut.name:
        return None
    return request.getfixturevalue(role)
