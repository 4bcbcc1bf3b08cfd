"""The emulated 33522B's output channel: its settings (power-on / *RST values) and the limits that
bind them, after the 33500 Series Operating and Service Guide. Shared by the server (awg.py) and
its command table (awg_table.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CHANNELS = (1, 2)
WIRED_CHANNEL = 1  # the output the fixture's scope input and speaker amplifier hang on
MIN_POINTS, MAX_POINTS = 8, 1_000_000
MAX_ARBS = 32
SOURCE_OHM = 50.0
MAX_V_50_OHM = 5.0  # |offset| + Vpp/2 into 50 ohm
MIN_VPP_50_OHM = 1e-3
FUNCTIONS = ("SINusoid", "SQUare", "TRIangle", "RAMP", "PULSe", "PRBS", "NOISe", "ARB", "DC")
MAX_FREQUENCY = {"SINusoid": 30e6, "SQUare": 30e6, "TRIangle": 200e3, "RAMP": 200e3, "PULSe": 30e6,
                 "PRBS": 30e6, "NOISe": 30e6, "ARB": 30e6, "DC": 30e6}
MIN_FREQUENCY = 1e-6
INFINITE = 9.9e37


@dataclass
class Arb:
    samples: np.ndarray  # normalised to [-1, 1]


@dataclass
class Channel:
    """One output's settings (power-on / *RST values)."""

    function: str = "SINusoid"
    frequency: float = 1e3
    vpp: float = 0.1  # into the set load
    offset: float = 0.0
    phase: float = 0.0
    unit: str = "VPP"
    duty: float = 50.0
    symmetry: float = 100.0
    pulse_width: float = 100e-6
    output_on: bool = False
    load_ohm: float | None = 50.0  # None = INFinity
    polarity: str = "NORMal"
    burst_on: bool = False
    burst_mode: str = "TRIGgered"
    burst_cycles: float = 1.0
    burst_period: float = 10e-3
    burst_phase: float = 0.0
    trigger_source: str = "IMMediate"
    trigger_slope: str = "POSitive"
    trigger_delay: float = 0.0
    arb_name: str = ""
    srate: float = 40_000.0
    arb_advance: str = "SRATe"
    arb_filter: str = "NORMal"
    arbs: dict[str, Arb] = field(default_factory=dict)  # each channel has its own volatile memory

    def v_max(self) -> float:
        """Largest |level| into the set load: 5 V into 50 ohm, 10 V open circuit."""
        return MAX_V_50_OHM * self.gain()

    def gain(self) -> float:
        """Displayed volts per volt into 50 ohm for the set load (1 at 50 ohm, 2 at INFinity)."""
        if self.load_ohm is None:
            return 2.0
        return 2.0 * self.load_ohm / (self.load_ohm + SOURCE_OHM)

    def open_circuit_peak(self) -> float:
        """Peak volts at a high-impedance input (the fixture) for the set amplitude."""
        return self.vpp / 2 * 2.0 / self.gain()
