"""Shared set-up for the production tests: an emulated line's fixture with a station file, its
results store, and calibration records for its instruments."""
from __future__ import annotations

from typing import Any

import contextlib
from pathlib import Path
from typing import Iterator

from phonebench.bench.procedures.calibration.runner import INSTRUMENT_PROCEDURES, calibrate_station
from phonebench.bench.procedures.calibration.settings import CalibrationSettings
from phonebench.core.station import load_station
from phonebench.emulation.line import EmulatedLine


@contextlib.contextmanager
def line_station(tmp_path: Path, count: int = 1, faulty: int = 0, faults: tuple[str, ...] = ("skin-sensor-drift",),
                 seed: int = 7) -> Iterator[tuple[EmulatedLine, Path, Path]]:
    """(line, station file, results folder); the store is <results>/results.sqlite."""
    results = tmp_path / "reports"
    with EmulatedLine(count=count, faulty=faulty, seed=seed, faults=faults) as line:
        yield line, line.write_station(tmp_path / "station.toml", results_dir=results), results


def calibrate(line: EmulatedLine, station_file: Path, names: tuple[str, ...] = INSTRUMENT_PROCEDURES) -> list:
    """Calibrate the line's instruments and fixture into its store; returns the records."""
    return calibrate_station(load_station(station_file), None, CalibrationSettings(),
                             operator="tester", names=names).records


class EmulatedFixture:
    """A fixture acting on a simulated world directly (tests of the procedures without a station;
    a station's own fixture is its `fixture` instrument)."""

    def __init__(self, world: Any) -> None:
        self.world = world

    def loopback(self, path: str | None) -> None:
        self.world.set_fixture_loopback(path is not None, path=path or "acoustic")

    def place_reference(self, point: str) -> None:
        self.world.place_reference_probe(point)
