"""Emulated Keysight DAQ970A data acquisition system with a DAQM901A 20-channel multiplexer in
slot 1, thermocouples and a 4-wire PT100 wired to the phone fixture. A raw SCPI socket (port
5025 on the real unit), reached through pyvisa like the real one.

What it implements, after the DAQ970A / 34970A programming references:

- `CONFigure:TEMPerature TC,<type>,(@list)` (types B E J K N R S T, DEFault = J), `... FRTD|RTD,85|91,
  (@list)`, `... THERmistor|FTHermistor,2252|5000|10000,(@list)` (optional resolution parameters
  `1,<res>` are accepted); `CONFigure:VOLTage:DC [range[,res]],(@list)`; CONFigure also makes the
  list the scan list. A 4-wire channel n (1-10) takes channel n+10 for its sense pair.
  `MEASure:TEMPerature? ...` and `MEASure:VOLTage:DC? ...` take the same parameters and are
  CONFigure + READ? in one. `CONFigure? (@list)` answers each channel's function.
- `[SENSe:]TEMPerature:TRANsducer:TCouple:TYPE <type>,(@list)` (and `?`),
  `[SENSe:]TEMPerature:TRANsducer:TCouple:RJUNction:TYPE INTernal|EXTernal|FIXed,(@list)`,
  `...:TCouple:CHECk ON|OFF,(@list)` (open-thermocouple check), `[SENSe:]TEMPerature:NPLC`,
  `UNIT:TEMPerature C|F|K[,(@list)]`.
- `ROUTe:SCAN (@list)` / `ROUTe:SCAN?`, `TRIGger:SOURce IMMediate|TIMer|BUS`, `TRIGger:TIMer`,
  `TRIGger:COUNt`, `INITiate`, `FETCh?` (waits for the scan to complete), `READ?` (= INIT; FETC?),
  `ABORt`, `FORMat:READing:CHANnel|UNIT|TIME|ALARm ON|OFF`, `FORMat:READing:TIME:TYPE ABSolute|RELative`,
  `SYSTem:CTYPe? <slot*100>`.
- Readings `+2.53070000E+01[ C][,<time>][,<channel>]` separated by commas; an overload or an open
  thermocouple (with CHECk ON) is `+9.90000000E+37`. An open thermocouple with the check off
  reads a plausible, wrong value (the unterminated input floats), as on the real instrument.
- Time: each channel of a sweep costs its integration time (NPLC x 20 ms at 50 Hz, twice with
  autozero) plus relay settling, on the simulated clock; timed sweeps wait for their trigger.

Everything else is refused with the standard error queue entry (`-113,"Undefined header"`,
`-221,"Settings conflict"`, ...). Reading memory: `R?`, `DATA:REMove?`, `DATA:LAST?`,
`DATA:POINts?`. Not emulated (refused, although the real unit has them): endless scans
(`TRIG:COUN INF`), alarms, the internal DMM without a channel list.

The command tree is a table: daq970a_table.py (docs/instruments.md, "Emulated instruments as tables").
"""
from __future__ import annotations

from .daq970a_model import Daq970aModel, Wiring
from .daq970a_table import COMMANDS
from .table import install
from ..world import World

__all__ = ["Daq970aServer"]


class Daq970aServer(Daq970aModel):
    """The DAQ970A with its command tree (daq970a_table.py) installed."""

    def __init__(self, world: World, port: int = 0, wiring: dict[int, Wiring] | None = None) -> None:
        super().__init__(world, port, wiring)
        install(self, COMMANDS)
