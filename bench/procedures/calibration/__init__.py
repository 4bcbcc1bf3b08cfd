"""Calibration (issue 7): ISO/IEC 17025 equipment records in the results store, the procedures
that produce them (scope deskew, fixture delay, supply zero, thermocouple offsets, and per unit
the DUT's ripple onset and skin-sensor offset), the corrections current records make, and the
policy: expired or missing calibration blocks acceptance runs; lab runs carry the state.

    from . import CalibrationBook, station_calibration, corrected

Modules: records (the record and its conclusion), book (storage), state (states and policy),
corrections (corrected instrument wrappers), procedures and dut (the measurements), runner
(running them and keeping the records), fixture (loopback and reference-probe steps),
settings (asset tags, intervals, criteria), station (a station's calibration view).
"""
from .book import CalibrationBook
from .corrections import corrected, uncorrected
from .records import CalibrationRecord, Criterion, Equipment, Reading, conclude
from .settings import CalibrationSettings, load_settings
from .state import (
    CALIBRATED,
    EXPIRED,
    FAILED,
    NOT_REQUIRED,
    UNCALIBRATED,
    CalibrationRequired,
    RoleCalibration,
    StationCalibration,
    station_calibration,
)

__all__ = ["CALIBRATED", "EXPIRED", "FAILED", "NOT_REQUIRED", "UNCALIBRATED", "CalibrationBook",
           "CalibrationRecord", "CalibrationRequired", "CalibrationSettings", "Criterion", "Equipment", "Reading",
           "RoleCalibration", "StationCalibration", "conclude", "corrected", "load_settings", "station_calibration",
           "uncorrected"]
