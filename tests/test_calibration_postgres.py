"""A line's stations sharing one PostgreSQL store: calibration records written by one station are
current for another, and attempt numbers count per unit across stations (a private cluster,
tests/postgres_helpers.py ScratchPostgres; skipped without the server binaries)."""
from __future__ import annotations

import datetime as dt

import pytest

from phonebench.bench.procedures.acceptance.attempts import AttemptBook
from phonebench.bench.procedures.calibration.book import CalibrationBook
from phonebench.bench.procedures.calibration.records import Criterion, Equipment, Reading, conclude
from phonebench.bench.procedures.calibration.state import CALIBRATED, FAILED, role_calibration
from phonebench.bench.store import open_store
from tests.system_packages import require
from tests.postgres_helpers import ScratchPostgres, postgres_bindir


@pytest.fixture(scope="module")
def pg_url():
    if postgres_bindir() is None:
        require("postgresql", False)
    with ScratchPostgres() as server:
        yield server.create_database("line")


def test_stations_share_calibration_records_and_attempt_numbers(pg_url):
    supply = Equipment("instrument", "Keysight", "N6705C", "MY9", "1.0", "supply", "AT-43")
    fixture = Equipment.fixture("station-1")
    with open_store(pg_url) as one, open_store(pg_url) as two:
        zero = conclude(supply, "supply-zero", "1.0", [Reading("current_zero_a", 1.8e-3, "A", 1e-6, 20)],
                        {"current_zero_a": 1.8e-3}, [Criterion("current_zero_a", "A", max_abs=5e-3)],
                        dt.timedelta(days=7))
        CalibrationBook(one).save(zero)
        seen = role_calibration(CalibrationBook(two), "supply", supply, fixture)
        assert seen.state == CALIBRATED and seen.corrections == {"current_zero_a": 1.8e-3}
        assert CalibrationBook(two).latest(supply, "supply-zero").results[0].uncertainty == 1e-6
        bad = conclude(supply, "supply-zero", "1.0", [Reading("current_zero_a", 9e-3, "A")], {"current_zero_a": 9e-3},
                       [Criterion("current_zero_a", "A", max_abs=5e-3)], dt.timedelta(days=7),
                       performed=zero.performed + dt.timedelta(minutes=1))
        CalibrationBook(two).save(bad)
        assert role_calibration(CalibrationBook(one), "supply", supply, fixture).state == FAILED
        first = AttemptBook(one).record("R5CT1", "fail", "why", station="station-1")
        second = AttemptBook(two).start("R5CT1", station="station-2", retest_of=first.attempt)
        AttemptBook(two).finish(second, "pass", None, failing=[], cycle_s=50.0, overhead_s=0.8)
        stored = AttemptBook(one).attempts(serial="R5CT1")
        assert [(a.attempt, a.station, a.outcome) for a in stored] == [(1, "station-1", "fail"),
                                                                      (2, "station-2", "pass")]
