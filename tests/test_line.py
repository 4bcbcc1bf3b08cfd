"""The emulated production line: units planted faulty by the seed, swapped one after the other
into one fixture; a batch gives PASS for good units and FAIL with the reason for faulty ones,
all stored with the batch, and the batch page links every unit's report."""
from __future__ import annotations

import pytest

from phonebench.bench.procedures.acceptance.attempts import AttemptBook
from phonebench.bench.procedures.acceptance.line import run_line, run_station
from phonebench.bench.procedures.acceptance.runner import AcceptanceStation
from phonebench.bench.results.line_report import render_line
from phonebench.core.station import load_station
from phonebench.bench.store import open_store
from phonebench.emulation.line import EmulatedLine, plan_units
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
    # A sensor reading 6 degC high: the identity suite sees sysfs and the thermal HAL disagree; no
    # retest can clear that, so the run stops there and the later checks are not run (a faulty
    # unit leaves the fixture as soon as its fault shows).
    assert faulty.result.reason.startswith("Phone thermal sensors and battery reading: thermal_zone_vs_hal_max_diff")
    reasons = {f.check: f.reason for f in faulty.result.failures}
    assert reasons["dut-calibration"] == "not proven (not run)" and reasons["latency"] == "not proven (not run)"
    assert len(faulty.result.attempts) == 1  # the failure is not retestable
    good = next(u for u in run.units if not u.fault)
    assert good.world_s - faulty.world_s > 20  # on the line's clock, handling included in both
    assert set(run.steps) >= {"latency", "power", "weights"} and max(run.steps["latency"]) > 0
    assert figures["first_pass_yield"] == pytest.approx(1 / 2)
    assert figures["units_per_hour"] > 0 and figures["overhead_mean_s"] >= 0
    with open_store(results / "results.sqlite") as store:
        stored = AttemptBook(store).attempts(batch="B1")
        assert [(a.serial, a.outcome) for a in stored] == [(u.serial, u.result.outcome) for u in run.units]
        assert all(a.run_id and a.cycle_s > 0 for a in stored)
        faulty_run = store.load_run(next(a.run_id for a in stored if a.outcome == "fail")).data
        zones = [v for t in faulty_run["tests"] for v in t["verdicts"] if v["name"] == "thermal_zone_vs_hal_max_diff"]
        assert zones and zones[0]["outcome"] == "fail"
        good_run = store.load_run(next(a.run_id for a in stored if a.outcome == "pass")).data
        latency = next(v for t in good_run["tests"] for v in t["verdicts"] if v["name"] == "acceptance_voice_latency_max")
        # Sequential: decided at a planned look (5 or 8 trials), never fewer than the first.
        assert latency["outcome"] == "pass" and latency["n"] in (5, 8) and "sequential:" in latency["detail"]
    page = render_line(results / "B1" / "line.html", "B1", line.name, run.rows(), figures)
    html = page.read_text()
    assert all(u.serial in html for u in run.units) and "thermal_zone_vs_hal_max_diff" in html and "report.html" in html
    assert all(u.result.report.exists() for u in run.units)


def test_two_fixtures_share_one_scope_booked_between_them(tmp_path):
    plan = plan_units(4, 0, seed=5)
    with EmulatedLine(units=plan[0::2], seed=5, name="A") as a, EmulatedLine(units=plan[1::2], seed=6, name="B") as b:
        fixtures = {}
        for line in (a, b):
            station_file = line.write_station(tmp_path / f"{line.name}.toml", results_dir=tmp_path / "reports")
            calibrate(line, station_file)
            fixtures[line.name] = (line, AcceptanceStation(station_file, batch="S1"))
        try:
            run = run_station(fixtures, plan, "S1", shared=("scope",))
        finally:
            for _, station in fixtures.values():
                station.close()
    f = run.figures()
    assert f["as_expected"] and f["units"] == 4 and {u.fixture for u in run.units} == {"A", "B"}
    scope = run.shared["scope"]
    # Never two fixtures on the scope at once, and the one that waited shows it.
    slots = sorted((bk.start, bk.end) for bk in scope.bookings)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(slots, slots[1:])) and scope.conflicts == 0
    assert sum(scope.waited_s.values()) > 0  # both start together: one waits its turn
    assert f["per_fixture"]["B"]["shared_wait_s"] + f["per_fixture"]["A"]["shared_wait_s"] == \
        pytest.approx(sum(scope.waited_s.values()))
