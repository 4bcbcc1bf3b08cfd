"""What a calibration asks of the fixture: the loopback paths in place of the phone, and the
reference probe beside one thermocouple. A station with a fixture controller (the `fixture`
instrument: a relay box and probe arm, drivers/fixture.py; the emulated station has one) does it on
command; on any other an operator does each step when asked.
"""
from __future__ import annotations

import logging
from typing import Callable

from phonebench.drivers.fixture import LOOPBACK_PATHS, FixtureControl  # noqa: F401 - the protocol calibration uses

log = logging.getLogger(__name__)


# What the operator is asked to do on a real fixture (docs/production.md shows the hardware).
LOOPBACK_STEPS = {
    "electrical": "Take the phone out. Connect the stimulus output to BOTH scope inputs with the BNC tee "
                  "(equal cable lengths).",
    "acoustic": "Take the phone out. Remove the BNC tee; close the empty fixture so the measurement mic "
                "hears the stimulus speaker over the fixture's acoustic path.",
    None: "Reconnect the scope inputs as for testing and put the phone back into the fixture.",
}


class OperatorFixture:
    """A real fixture: each step is shown to the operator, who confirms it (e.g. presses Enter)."""

    def __init__(self, confirm: Callable[[str], None]) -> None:
        self.confirm = confirm

    def loopback(self, path: str | None) -> None:
        if path is not None and path not in LOOPBACK_PATHS:
            raise ValueError(f"unknown loopback path {path!r}; known: {', '.join(LOOPBACK_PATHS)}")
        self.confirm(LOOPBACK_STEPS[path])

    def place_reference(self, point: str) -> None:
        self.confirm(f"Tape the reference probe beside the thermocouple at {point} (thermal paste, same tape); "
                     f"let it settle for a minute.")


class PresetFixture:
    """A fixture nobody is asked about (`bench calibrate --unattended`, or `unattended = true` in
    the calibration settings): a relay board, or wiring done before the run, puts each loopback
    in place. Every step is logged; a loopback that is not there fails its procedure's criteria
    (a record stored as failed), it is never waited for."""

    def loopback(self, path: str | None) -> None:
        if path is not None and path not in LOOPBACK_PATHS:
            raise ValueError(f"unknown loopback path {path!r}; known: {', '.join(LOOPBACK_PATHS)}")
        log.info("fixture step taken as done (unattended): %s", LOOPBACK_STEPS[path])

    def place_reference(self, point: str) -> None:
        log.info("fixture step taken as done (unattended): reference probe beside %s", point)


# Procedures that ask the fixture for something (a loopback, the reference probe's position).
FIXTURE_PROCEDURES = ("scope-deskew", "fixture-delay", "thermocouple-offsets")

