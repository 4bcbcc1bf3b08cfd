"""Calibration (issue 7): ISO/IEC 17025 equipment records in the results store, the procedures
that produce them (scope deskew, fixture delay, supply zero, thermocouple offsets, and per unit
the DUT's ripple onset and skin-sensor offset), the corrections current records make, and the
policy: expired or missing calibration blocks acceptance runs; lab runs carry the state.

    from phonebench.bench.procedures.calibration import CalibrationBook, station_calibration, corrected

Modules: records (the record and its conclusion), book (storage), state (states and policy),
corrections (corrected instrument wrappers), procedures and dut (the measurements), runner
(running them and keeping the records), fixture (loopback and reference-probe steps),
settings (asset tags, intervals, criteria), station (a station's calibration view).
"""
from phonebench.bench.procedures.calibration.book import CalibrationBook
from phonebench.bench.procedures.calibration.corrections import corrected, uncorrected
from phonebench.bench.procedures.calibration.records import CalibrationRecord, Criterion, Equipment, Reading, conclude
from phonebench.bench.procedures.calibration.settings import CalibrationSettings, load_settings
from phonebench.bench.procedures.calibration.state import (
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
