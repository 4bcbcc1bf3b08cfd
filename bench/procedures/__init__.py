"""Procedures over a station: preflight, calibration, production acceptance."""
