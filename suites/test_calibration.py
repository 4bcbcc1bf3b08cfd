"""Instrument and fixture calibration as a suite (`bench run -m calibration`, marker
`calibration`): each procedure measures with the bare instrument, stores its ISO/IEC 17025
record (passed or failed) in the results store, and shows it as a verdict.

The procedures need the loopback fixture and the reference probe placed: a station with a fixture
controller (`[instruments.fixture]`; the emulated station has one) does that on command; any other
runs them with `bench calibrate`, which asks the operator for each step. Calibration-marked tests run only when selected by marker (they change the station).
"""
from __future__ import annotations

import pytest

from phonebench.bench.procedures.calibration import procedures
from phonebench.bench.procedures.calibration.corrections import uncorrected
from phonebench.bench.procedures.calibration.records import record_verdict

pytestmark = [pytest.mark.calibration, pytest.mark.evidence("measured")]


@pytest.fixture
def ctx(request, station, calibration_context):
    if "thermal" in station.instruments:
        calibration_context.ambient = procedures.ambient_conditions(uncorrected(request.getfixturevalue("thermal")),
                                                                    calibration_context.settings)
    return calibration_context


def _keep(book, record, recorder) -> None:
    book.save(record)
    verdict = record_verdict(record)
    # The record step: the saved calibration record joins the verdict's raw data.
    recorder(verdict.but(raw=(*verdict.raw, recorder.raw(record.procedure, record.to_dict()))))


@pytest.mark.needs("scope", "stimulus")
def test_scope_deskew_and_fixture_delay(scope, stimulus, fixture_control, calibration_book, ctx, record):
    """Channel-2 skew on the electrical loopback (programmed if it passes), then the fixture's
    acoustic delay on the acoustic loopback with the deskewed scope."""
    deskew = procedures.deskew_scope(uncorrected(scope), stimulus, fixture_control, ctx)
    _keep(calibration_book, deskew, record)
    delay = procedures.measure_fixture_delay(uncorrected(scope), stimulus, fixture_control, ctx, deskew)
    _keep(calibration_book, delay, record)


@pytest.mark.needs("supply")
def test_supply_zero(supply, calibration_book, ctx, record):
    """The current meter's reading with the output off is its zero error."""
    _keep(calibration_book, procedures.supply_zero(uncorrected(supply), ctx), record)


@pytest.mark.needs("thermal")
def test_thermocouple_offsets(thermal, fixture_control, calibration_book, ctx, record):
    """Each thermocouple against the reference probe taped beside it."""
    _keep(calibration_book, procedures.thermocouple_offsets(uncorrected(thermal), fixture_control, ctx), record)
