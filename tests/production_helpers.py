"""Shared set-up for the production tests: an emulated line's fixture with a station file, its
results store, and calibration records for its instruments."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from bench.calibration.fixture import EmulatedFixture
from bench.calibration.runner import INSTRUMENT_PROCEDURES, calibrate_station
from bench.calibration.settings import CalibrationSettings
from bench.core.station import load_station
from emulation.line import EmulatedLine


@contextlib.contextmanager
def line_station(tmp_path: Path, count: int = 1, faulty: int = 0, faults: tuple[str, ...] = ("skin-sensor-drift",),
                 seed: int = 7) -> Iterator[tuple[EmulatedLine, Path, Path]]:
    """(line, station file, results folder); the store is <results>/results.sqlite."""
    results = tmp_path / "reports"
    with EmulatedLine(count=count, faulty=faulty, seed=seed, faults=faults) as line:
        yield line, line.write_station(tmp_path / "station.toml", results_dir=results), results


def calibrate(line: EmulatedLine, station_file: Path, names: tuple[str, ...] = INSTRUMENT_PROCEDURES) -> list:
    """Calibrate the line's instruments and fixture into its store; returns the records."""
    return calibrate_station(load_station(station_file), EmulatedFixture(line.world), CalibrationSettings(),
                             operator="tester", names=names).records
