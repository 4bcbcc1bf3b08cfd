"""The emulated DAQ970A's channel set-up and the DAQM901A's limits, after the DAQ970A Programming
Guide. Shared by the server (daq970a.py) and its command table (daq970a_table.py)."""
from __future__ import annotations

from dataclasses import dataclass

MODULES = {1: "DAQM901A"}  # slot -> module; the other slots are empty
MODULE_CHANNELS = {"DAQM901A": 20}  # voltage/temperature channels (121, 122 are current only)
TC_TYPES = ("B", "E", "J", "K", "N", "R", "S", "T")
DEFAULT_TC = "J"  # what DEFault selects (the manual's default thermocouple type)
RTD_ALPHAS = ("85", "91")
THERMISTORS = ("2252", "5000", "10000")
LINE_HZ = 50.0


@dataclass
class ChannelSetup:
    function: str = "VOLT"  # VOLT (power-on default), TC, FRTD, RTD, THER, FTH
    kind: str = ""  # thermocouple type, RTD alpha or thermistor value
    rjunction: str = "INT"
    check: bool = False
    nplc: float = 1.0
    unit: str = "C"
    fixed_ref_c: float = 0.0  # the FIXed reference junction temperature
