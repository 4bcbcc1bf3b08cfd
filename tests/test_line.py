"""The emulated production line: units planted faulty by the seed, swapped one after the other
into one fixture; a batch gives PASS for good units and FAIL with the reason for faulty ones,
all stored with the batch, and the batch page links every unit's report."""
from __future__ import annotations

import pytest

from bench.acceptance.attempts import AttemptBook
from bench.acceptance.line import run_line
from bench.acceptance.runner import AcceptanceStation
from bench.line_report import render_line
from bench.core.station import load_station
from bench.store import open_store
from emulation.line import EmulatedLine, plan_units
from tests.production_helpers import calibrate


def test_units_are_planned_by_the_seed():
    units = plan_units(20, 2, seed=7, faults=("no-redundancy", "skin-sensor-drift"))
    assert [u.serial for u in units[:2]] == ["LN070001", "LN070002"] and len({u.spec.seed for u in units}) == 20
    bad = [u for u in units if u.fault]
    assert [u.fault for u in bad] == ["no-redundancy", "skin-sensor-drift"]
    assert bad[0].spec.sla_persona == "no-redundancy" and bad[1].spec.faults == ["skin-sensor-drift"]
    assert [u.index for u in bad] == [u.index for u in plan_units(20, 2, seed=7) if u.fault]  # reproducible
    assert sum(u.fault is not None for u in plan_units(20, 0)) == 0
    with pytest.raises(ValueError, match="faulty"):
        plan_units(3, 4)
    with pytest.raises(ValueError, match="unknown fault"):
        plan_units(3, 1, faults=("gremlins",))


def test_the_fixture_keeps_its_address_and_instruments_from_unit_to_unit(tmp_path):
    with EmulatedLine(count=2, seed=3) as line:
        station = load_station(line.write_station(tmp_path / "line.toml"))
        address, scope = station.duts[0].address, line.instruments["scope"].address
        first_world = line.phone.world
        line.load(line.units[1])
        assert line.adb_address == address and line.instruments["scope"].address == scope
        assert line.phone.spec.serial == "LN030002" and line.phone.world is first_world
        line.remove_phone()
        assert not line.daemon.listening


def test_a_batch_passes_good_units_and_fails_faulty_ones_with_reasons(tmp_path):
    results = tmp_path / "reports"
    with EmulatedLine(count=2, faulty=1, seed=7, faults=("skin-sensor-drift",)) as line:
        station_file = line.write_station(tmp_path / "line.toml", results_dir=results)
        calibrate(line, station_file)
        with AcceptanceStation(station_file, batch="B1") as station:
            run = run_line(line, station, "B1")
    figures = run.figures()
    faulty = next(u for u in run.units if u.fault)
    assert figures["as_expected"] and (figures["passed"], figures["failed"]) == (1, 1)
    assert faulty.result.outcome == "fail" and faulty.result.exit_code == 1
    # A sensor reading 6 degC high: the identity suite sees sysfs and the thermal HAL disagree, and
    # the unit's skin-offset calibration fails (stored as failed, nothing written to the phone).
    assert faulty.result.reason.startswith("Phone thermal sensors and battery reading: thermal_zone_vs_hal_max_diff")
    reasons = {f.check: f.reason for f in faulty.result.failures}
    assert reasons["dut-calibration"].startswith("calibration_dut_skin_offset")
    assert len(faulty.result.attempts) == 1  # neither failure is retestable
    assert figures["first_pass_yield"] == pytest.approx(1 / 2)
    assert figures["units_per_hour"] > 0 and figures["overhead_mean_s"] >= 0
    with open_store(results / "results.sqlite") as store:
        stored = AttemptBook(store).attempts(batch="B1")
        assert [(a.serial, a.outcome) for a in stored] == [(u.serial, u.result.outcome) for u in run.units]
        assert all(a.run_id and a.cycle_s > 0 for a in stored)
        faulty_run = store.load_run(next(a.run_id for a in stored if a.outcome == "fail")).data
        skin = [v for t in faulty_run["tests"] for v in t["verdicts"] if v["name"] == "calibration_dut_skin_offset"]
        assert skin and skin[0]["outcome"] == "fail"
    page = render_line(results / "B1" / "line.html", "B1", line.name, run.rows(), figures)
    html = page.read_text()
    assert all(u.serial in html for u in run.units) and "thermal_zone_vs_hal_max_diff" in html and "report.html" in html
    assert all(u.result.report.exists() for u in run.units)
