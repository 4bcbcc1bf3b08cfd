"""Emulated Keysight N6705C DC power analyzer with an N6781A source/measure module in slot 1.

The output powers the emulated phone: voltage, current limit, battery-emulation output
resistance and the ARB sine ripple go into the world's supply, so the phone sees them. The
digitizer samples the world's terminal voltage and current (with meter noise) over the sweep
window; fetching waits in simulated time until the sweep has finished.

As on the real mainframe, after INIT:ACQ the digitizer first fills its pre-trigger points
(SENS:SWE:OFFS:POIN < 0); a trigger that arrives before that is ignored (-211 "Trigger
ignored" is queued) and the sweep never starts, so a later FETC waits forever. The Operation
Status condition register (STAT:OPER:COND? (@1)) shows the state: bit 3 WTG-meas once the
digitizer is waiting for its trigger, bit 4 MEAS-active while initiated or sweeping, bit 5
WTG-tran / bit 6 TRAN-active for the transient (ARB) system, bit 2 OFF for an output that is
off, bit 0 CV otherwise. Polling it while the pre-trigger points fill takes simulated time.

The command tree is a table: power_analyzer_table.py (docs/instruments.md, "Emulated instruments as
tables").
"""
from __future__ import annotations

from .power_analyzer_model import PowerAnalyzerModel, IDN, CURRENT_ZERO_OFFSET_A
from .power_analyzer_table import COMMANDS
from .table import install
from ..world import World

__all__ = ["PowerAnalyzerServer", "IDN", "CURRENT_ZERO_OFFSET_A"]


class PowerAnalyzerServer(PowerAnalyzerModel):
    """The N6705C with its command tree (power_analyzer_table.py) installed."""

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(world, port)
        install(self, COMMANDS)
