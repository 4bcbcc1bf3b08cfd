"""Calibration records, procedures, corrections and policy — each rule with its negative control.

The procedures run against the emulated fixture (a world with a scope, AWG, power analyzer and
probe board on loopback servers), whose instruments carry known errors: channel-2 skew 35 ns,
current zero +1.8 mA, thermocouples T1 +0.4, T2 -0.3, T3 +0.1 degC, fixture path 10 cm of air.
"""
from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pytest

from phonebench.bench.procedures.calibration import procedures
from phonebench.bench.procedures.calibration.book import CalibrationBook
from phonebench.bench.procedures.calibration.corrections import CorrectedScope, CorrectedSupply, CorrectedThermal, corrected
from phonebench.bench.procedures.calibration.dut import ripple_onset, skin_offset, unit_equipment
from phonebench.bench.procedures.calibration.fixture import OperatorFixture
from tests.production_helpers import EmulatedFixture
from phonebench.bench.procedures.calibration.procedures import Context
from phonebench.bench.procedures.calibration.records import Criterion, Equipment, Reading, conclude, record_verdict, utcnow
from phonebench.bench.procedures.calibration.runner import calibrate_instruments, expand
from phonebench.bench.procedures.calibration.settings import CalibrationSettings, Limits, load_settings, parse_settings
from phonebench.bench.procedures.calibration.state import (
    CALIBRATED,
    EXPIRED,
    FAILED,
    NOT_REQUIRED,
    UNCALIBRATED,
    CalibrationRequired,
    role_calibration,
    station_calibration,
)
from phonebench.core.errors import ConfigError
from phonebench.bench.phone.identity import collect_identity
from phonebench.bench.store import open_store
from phonebench.core.verdict import Outcome
from phonebench.drivers.power import KeysightN6705C
from phonebench.drivers.scope import KeysightInfiniiVision
from phonebench.drivers.stimulus import Keysight33500B
from phonebench.drivers.thermal_generic import GenericAsciiProbe
from phonebench.emulation.device import PhoneSpec
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.instruments.awg import AwgServer
from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
from phonebench.emulation.instruments.scope import INPUT_DELAY_S, KeysightScopeServer
from phonebench.emulation.instruments.thermal_probe import GENERIC_CHANNELS, ThermalProbeServer
from phonebench.emulation.world import World
from tests.device_double import PhoneDevice

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def book(tmp_path):
    store = open_store(tmp_path / "results.sqlite")
    yield CalibrationBook(store)
    store.close()


@pytest.fixture
def rig():
    """The emulated fixture with its instruments, each with its known error."""
    world = World(seed=3)
    phone = emulated_phone(PhoneSpec(seed=3), world=world)
    servers = {"scope": KeysightScopeServer(world), "stimulus": AwgServer(world), "supply": PowerAnalyzerServer(world),
               "thermal": ThermalProbeServer(world)}
    for server in servers.values():
        server.start()
    drivers = {"scope": KeysightInfiniiVision(servers["scope"].address, poll_s=0),
               "stimulus": Keysight33500B(servers["stimulus"].address),
               "supply": KeysightN6705C(servers["supply"].address),
               "thermal": GenericAsciiProbe(servers["thermal"].address, timeout_s=1.0)}
    try:
        yield world, phone, servers, drivers
    finally:
        for driver in drivers.values():
            driver.close()
        for server in servers.values():
            server.stop()


def ctx(settings: CalibrationSettings | None = None) -> Context:
    return Context(station="test-station", settings=settings or CalibrationSettings(), location="bench 1",
                   operator="tester", ambient={"temperature_c": 25.0, "source": "test"})


def record_of(book: CalibrationBook, equipment: Equipment, procedure: str, value: float, *, limit: float = 1.0,
              performed: dt.datetime = NOW, days: float = 30.0):
    rec = conclude(equipment, procedure, "1.0", [Reading("x", value, "u")], {"x_correction": value},
                   [Criterion("x", "u", max_abs=limit)], dt.timedelta(days=days), performed=performed)
    return book.save(rec)


SCOPE = Equipment("instrument", "KEYSIGHT", "DSOX3024T", "MY1", "07.50", "scope")
FIXTURE = Equipment.fixture("test-station")
SUPPLY = Equipment("instrument", "Keysight", "N6705C", "MY2", "1.0", "supply")


# --- records and the book --------------------------------------------------------------------
def test_a_record_passes_only_inside_its_criteria_and_a_failed_one_has_no_due_date():
    good = conclude(SUPPLY, "supply-zero", "1.0", [Reading("current_zero_a", 1.8e-3, "A")], {"current_zero_a": 1.8e-3},
                    [Criterion("current_zero_a", "A", max_abs=5e-3)], dt.timedelta(days=7), performed=NOW)
    assert good.passed and good.due == NOW + dt.timedelta(days=7) and good.reason is None
    bad = conclude(SUPPLY, "supply-zero", "1.0", [Reading("current_zero_a", 12e-3, "A")], {"current_zero_a": 12e-3},
                   [Criterion("current_zero_a", "A", max_abs=5e-3)], dt.timedelta(days=7), performed=NOW)
    assert not bad.passed and bad.due is None and "beyond ±0.005 A" in bad.reason
    missing = conclude(SUPPLY, "supply-zero", "1.0", [], {}, [Criterion("current_zero_a", "A", max_abs=5e-3)],
                       dt.timedelta(days=7))
    assert not missing.passed and "not measured" in missing.reason
    assert record_verdict(good).outcome is Outcome.PASS and record_verdict(bad).outcome is Outcome.FAIL
    assert good.certificate != bad.certificate


def test_the_book_keeps_every_iso_17025_field_and_finds_the_newest_record(book):
    first = record_of(book, SUPPLY, "supply-zero", 0.5, performed=NOW - dt.timedelta(days=2))
    second = record_of(book, SUPPLY, "supply-zero", 0.7, performed=NOW)
    record_of(book, SCOPE, "scope-deskew", 0.1)
    latest = book.latest(SUPPLY, "supply-zero")
    assert latest.id == second.id and latest.adjustments == {"x_correction": 0.7}
    assert [r.id for r in book.history(SUPPLY)] == [second.id, first.id]
    stored = latest.to_dict()
    for key in ("equipment", "procedure", "procedure_version", "performed", "due", "results", "adjustments",
                "acceptance", "certificate", "ambient", "operator", "status"):
        assert key in stored
    assert stored["equipment"]["firmware"] == "1.0" and stored["equipment"]["serial"] == "MY2"


# --- policy ----------------------------------------------------------------------------------
def test_policy_states_and_which_corrections_apply(book):
    def state(now=NOW):
        return role_calibration(book, "supply", SUPPLY, FIXTURE, now)

    assert state().state == UNCALIBRATED and state().corrections == {}
    record_of(book, SUPPLY, "supply-zero", 0.4)
    assert state().state == CALIBRATED and state().corrections == {"x_correction": 0.4}
    # Past its due date: expired (a lab run still corrects with it, and says so).
    later = state(NOW + dt.timedelta(days=31))
    assert later.state == EXPIRED and later.corrections == {"x_correction": 0.4}
    assert "expired on" in later.problems[0]
    # Negative control: a newer calibration outside its criteria is stored as failed, and neither
    # it nor the older passed record is applied.
    failed = record_of(book, SUPPLY, "supply-zero", 3.0, performed=NOW + dt.timedelta(hours=1))
    assert not failed.passed and book.get(failed.id).status == "failed"
    now = state(NOW + dt.timedelta(hours=2))
    assert now.state == FAILED and now.corrections == {} and "failed" in now.problems[0]
    assert role_calibration(book, "stimulus", SUPPLY, FIXTURE).state == NOT_REQUIRED


def test_each_bay_s_unit_has_its_own_calibration_and_never_another_s_corrections(book):
    """Two bays, a supply each: the view keys calibration by the unit, not by the role."""
    from phonebench.bench.procedures.calibration.station import StationCalibrationView, instrument_equipment
    from phonebench.drivers.visa import InstrumentIdentity

    bay1, bay2 = (InstrumentIdentity("Keysight", "N6705C", serial, "1.0", f"addr{serial}") for serial in ("MY2", "MY3"))
    view = StationCalibrationView("test-station", "", CalibrationSettings(), book)
    record_of(book, instrument_equipment("supply", bay1, view.settings), "supply-zero", 0.4, performed=utcnow())
    first, second = view.role("supply", bay1), view.role("supply", bay2)
    assert first.state == CALIBRATED and first.corrections == {"x_correction": 0.4}
    assert second.state == UNCALIBRATED and second.corrections == {}
    assert "MY3" in " ".join(second.problems) and "MY2" not in " ".join(second.problems)
    assert set(view.roles) == {"supply", "supply@MY3"} and not view.station().ok


def test_acceptance_requires_every_instrument_calibrated_and_an_expired_one_blocks_it(book):
    record_of(book, SCOPE, "scope-deskew", 0.0)
    record_of(book, FIXTURE, "fixture-delay", 0.0)
    record_of(book, SUPPLY, "supply-zero", 0.0, days=7)
    ok = station_calibration(book, {"scope": SCOPE, "supply": SUPPLY}, FIXTURE, NOW + dt.timedelta(days=1))
    assert ok.ok and ok.state == CALIBRATED
    ok.require()
    expired = station_calibration(book, {"scope": SCOPE, "supply": SUPPLY}, FIXTURE, NOW + dt.timedelta(days=8))
    assert expired.roles["supply"].state == EXPIRED and expired.roles["scope"].state == CALIBRATED
    with pytest.raises(CalibrationRequired, match="supply-zero calibration .* expired"):
        expired.require()
    missing = station_calibration(book, {"scope": SCOPE, "supply": SUPPLY,
                                         "thermal": Equipment("instrument", "p", "b", "s")}, FIXTURE, NOW)
    with pytest.raises(CalibrationRequired, match="never calibrated"):
        missing.require()


# --- procedures on the emulated fixture ------------------------------------------------------
def test_deskew_measures_the_channel_skew_and_programs_it(rig):
    world, _phone, _servers, d = rig
    record = procedures.deskew_scope(d["scope"], d["stimulus"], EmulatedFixture(world), ctx())
    assert record.passed, record.reason
    assert record.reading("skew_as_found_s").value == pytest.approx(INPUT_DELAY_S[2], abs=1e-9)
    assert abs(record.reading("skew_as_left_s").value) < 1e-9
    assert record.adjustments["ch2_deskew_s"] == pytest.approx(35e-9, abs=1e-9)
    assert float(d["scope"].query(":CHANnel2:PROBe:SKEW?")) == pytest.approx(35e-9, abs=1e-9)
    assert world.fixture.loopback is None  # the phone is back in the fixture afterwards


def test_a_skew_beyond_the_deskew_range_fails_and_is_not_programmed(rig, monkeypatch):
    world, _phone, _servers, d = rig
    monkeypatch.setitem(INPUT_DELAY_S, 2, 250e-9)  # a wrong cable: beyond what deskew can take
    record = procedures.deskew_scope(d["scope"], d["stimulus"], EmulatedFixture(world), ctx())
    assert not record.passed and "beyond" in record.reason
    assert float(d["scope"].query(":CHANnel2:PROBe:SKEW?")) == 0.0


def test_fixture_delay_is_the_acoustic_loopback_delay(rig):
    world, _phone, _servers, d = rig
    fixture = EmulatedFixture(world)
    deskew = procedures.deskew_scope(d["scope"], d["stimulus"], fixture, ctx())
    record = procedures.measure_fixture_delay(d["scope"], d["stimulus"], fixture, ctx(), deskew)
    assert record.passed, record.reason
    assert record.adjustments["fixture_delay_s"] == pytest.approx(world.fixture_delay_s(), abs=1e-6)
    assert record.reference["scope_deskew"]["certificate"] == deskew.certificate
    assert not world.voice.dialogs  # the loopback never woke the phone


def test_fixture_delay_fails_when_the_fixture_is_not_what_its_documents_say(rig):
    world, _phone, _servers, d = rig
    settings = dataclasses.replace(CalibrationSettings(), fixture_path_m=0.20)  # documented 20 cm, really 10 cm
    record = procedures.measure_fixture_delay(d["scope"], d["stimulus"], EmulatedFixture(world), ctx(settings))
    assert not record.passed and "delay_over_geometry" in record.reason


def test_supply_zero_and_an_out_of_tolerance_meter_stored_as_failed_and_not_applied(rig, book, monkeypatch):
    _world, _phone, _servers, d = rig
    equipment = Equipment.instrument(d["supply"].identity, "supply")
    record = book.save(procedures.supply_zero(d["supply"], ctx()))
    assert record.passed and record.adjustments["current_zero_a"] == pytest.approx(1.8e-3, abs=0.05e-3)
    import phonebench.emulation.instruments.power_analyzer_model as pa

    monkeypatch.setattr(pa, "CURRENT_ZERO_OFFSET_A", 12e-3)  # the meter drifted out of tolerance
    bad = book.save(procedures.supply_zero(d["supply"], ctx()))
    assert not bad.passed and "current_zero_a" in bad.reason and bad.due is None
    assert book.get(bad.id).status == "failed" and book.get(bad.id).adjustments["current_zero_a"] > 10e-3
    state = role_calibration(book, "supply", equipment, FIXTURE)
    assert state.state == FAILED and state.corrections == {}
    supply = corrected("supply", d["supply"], state)
    assert supply.measure_current() == pytest.approx(12e-3, abs=0.1e-3)  # nothing subtracted


def test_thermocouple_offsets_against_the_reference_probe(rig):
    world, _phone, servers, d = rig
    record = procedures.thermocouple_offsets(d["thermal"], EmulatedFixture(world), ctx())
    assert record.passed, record.reason
    for channel in ("T1", "T2", "T3"):
        assert record.adjustments[f"{channel}_offset_c"] == pytest.approx(GENERIC_CHANNELS[channel].offset_c,
                                                                           abs=0.06)
    assert record.reference["reference"]["input"] == "REF"


def test_a_thermocouple_beyond_its_criteria_fails(rig):
    world, _phone, servers, d = rig
    servers["thermal"].channels["T2"] = dataclasses.replace(GENERIC_CHANNELS["T2"], offset_c=2.5)  # damaged junction
    record = procedures.thermocouple_offsets(d["thermal"], EmulatedFixture(world), ctx())
    assert not record.passed and "T2_offset_c" in record.reason and "T1" not in record.reason


def test_calibrate_instruments_stores_every_record_and_the_corrections_then_apply(rig, book):
    world, _phone, _servers, d = rig
    outcome = calibrate_instruments(d, EmulatedFixture(world), book, ctx())
    assert outcome.ok and [r.procedure for r in outcome.records] == list(expand(["instruments"]))
    state = station_calibration(book, {r: Equipment.instrument(drv.identity, r) for r, drv in d.items()},
                                Equipment.fixture("test-station"))
    assert state.ok and state.fixture_delay_s == pytest.approx(world.fixture_delay_s(), abs=1e-6)
    d["scope"].set_deskew(2, 0.0)
    scope = corrected("scope", d["scope"], state.roles["scope"])
    assert isinstance(scope, CorrectedScope) and scope.fixture_delay_s == state.fixture_delay_s
    assert float(d["scope"].query(":CHANnel2:PROBe:SKEW?")) == pytest.approx(35e-9, abs=1e-9)
    supply = corrected("supply", d["supply"], state.roles["supply"])
    assert isinstance(supply, CorrectedSupply)
    supply.output(False)
    assert abs(supply.measure_current()) < 0.1e-3 < abs(d["supply"].measure_current())
    trace = supply.digitize(2000, 20.48e-6, quantities=("current",))
    assert abs(float(np.mean(trace.current_a))) < 0.1e-3
    thermal = corrected("thermal", d["thermal"], state.roles["thermal"])
    assert isinstance(thermal, CorrectedThermal)
    world.place_reference_probe("cover_a")
    readings = [thermal.read() for _ in range(30)]
    assert np.mean([r["T1"] - r["REF"] for r in readings]) == pytest.approx(0.0, abs=0.06)
    assert corrected("stimulus", d["stimulus"], state.roles["stimulus"]) is d["stimulus"]


# --- DUT calibration -------------------------------------------------------------------------
def _dut(world, phone):
    device = PhoneDevice(phone)
    return device, collect_identity(device, "dut", "double")


def test_dut_ripple_onset_sets_the_redundancy_trigger_below_the_units_onset(rig):
    world, phone, _servers, d = rig
    device, identity = _dut(world, phone)
    record = ripple_onset(device, d["supply"], unit_equipment(identity), ctx())
    assert record.passed, record.reason
    onset = phone.shell.commands["llmrt"].onset_mv  # the unit's true onset
    assert record.reading("last_clean_mv").value < onset <= record.reading("first_error_mv").value
    config = device.run("llmrt config get")
    assert '"redundancy.mode": "auto"' in config
    trigger = record.adjustments["redundancy.trigger_mv"]
    assert trigger == record.reading("last_clean_mv").value - 2.0 and f'"redundancy.trigger_mv": {trigger}' in config
    assert world.ripple_amplitude_v() == 0.0  # the sweep left no ripple on


def test_a_unit_whose_npu_errs_without_ripple_fails_ripple_calibration_and_keeps_its_config(rig):
    world, _phone, _servers, d = rig
    erratic = emulated_phone(PhoneSpec(seed=4, faults=["npu-erratic"]), world=world)
    world.load_phone(erratic)
    device, identity = _dut(world, erratic)
    record = ripple_onset(device, d["supply"], unit_equipment(identity), ctx())
    assert not record.passed and "ripple_onset_mv" in record.reason
    assert '"redundancy.trigger_mv": 30.0' in device.run("llmrt config get")  # nothing written


def test_dut_skin_offset_written_and_a_drifting_sensor_fails(rig, book):
    world, phone, _servers, d = rig
    calibrate_instruments({"thermal": d["thermal"]}, EmulatedFixture(world), book, ctx())
    thermal = corrected("thermal", d["thermal"], role_calibration(
        book, "thermal", Equipment.instrument(d["thermal"].identity, "thermal"), FIXTURE))
    device, identity = _dut(world, phone)
    record = skin_offset(device, thermal, unit_equipment(identity), ctx())
    assert record.passed and record.adjustments["thermal.skin_offset_c"] == pytest.approx(0.3, abs=0.15)
    assert '"thermal.skin_offset_c": 0.' in device.run("llmrt config get")
    drifting = emulated_phone(PhoneSpec(serial="EMU0009", seed=9, faults=["skin-sensor-drift"]), world=world)
    world.load_phone(drifting)
    device, identity = _dut(world, drifting)
    bad = skin_offset(device, thermal, unit_equipment(identity), ctx())
    assert not bad.passed and "skin_offset_c" in bad.reason
    assert '"thermal.skin_offset_c": 0.0' in device.run("llmrt config get")


# --- settings and the operator fixture -------------------------------------------------------
def test_settings_file_and_its_errors(tmp_path):
    path = tmp_path / "cal.toml"
    path.write_text('[calibration]\noperator = "ana"\nasset_tags = { scope = "AT-7" }\n'
                    'intervals_days = { supply-zero = 1 }\nlimits = { max_current_zero_a = 0.002 }\n'
                    '[calibration.reference]\nfamily = "fluke-hart"\naddress = "/dev/ttyUSB1"\n'
                    'channels = { T1 = "T1", T2 = "T2" }\ncertificate = "UKAS-1"\n')
    settings = load_settings(path)
    assert settings.operator_name() == "ana" and settings.asset_tag("scope") == "AT-7"
    assert settings.interval("supply-zero") == dt.timedelta(days=1)
    assert settings.limits == dataclasses.replace(Limits(), max_current_zero_a=0.002)
    assert settings.reference.channels == {"T1": "T1", "T2": "T2"} and settings.reference.certificate == "UKAS-1"
    with pytest.raises(ConfigError, match="unknown calibration setting"):
        parse_settings({"calibration": {"operater": "x"}})
    with pytest.raises(ConfigError, match="max_skew"):
        parse_settings({"calibration": {"limits": {"max_skew": 1}}})
    with pytest.raises(ConfigError, match="do not exist"):
        load_settings(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="unknown calibration procedure"):
        expand(["deskew"])


def test_a_real_fixture_asks_the_operator_for_each_step():
    steps = []
    fixture = OperatorFixture(steps.append)
    fixture.loopback("electrical")
    fixture.place_reference("cover_b")
    fixture.loopback(None)
    assert "BNC tee" in steps[0] and "cover_b" in steps[1] and "put the phone back" in steps[2]
    with pytest.raises(ValueError):
        fixture.loopback("optical")


def test_the_onset_bisection_finds_what_the_step_by_step_sweep_finds_in_log2_steps():
    import math

    from phonebench.bench.procedures.calibration.dut import bracket_onset

    grid = [14.0 + k for k in range(33)]
    for onset in [13.5, *[g - 0.5 for g in grid], 99.0]:
        calls = []

        def errors_at(a: float) -> int:
            calls.append(a)
            return 3 if a > onset else 0

        sweep = bracket_onset(grid, errors_at)
        erring = [a for a, e in sweep if e]
        clean = [a for a, e in sweep if not e]
        linear_first = next((a for a in grid if a > onset), None)
        assert (erring[0] if erring else None) == linear_first
        assert (max(clean) if clean else None) == (max((a for a in grid if a <= onset), default=None))
        assert len(calls) <= math.ceil(math.log2(len(grid) + 1))
