"""Emulated Keysight 33500B-series waveform generator (a two-channel 33522B): the audio stimulus.

Modelled after the 33500 Series Operating and Service Guide's SCPI reference, per channel
(`SOURce1`/`SOURce2`, `OUTPut1`/`OUTPut2`, `TRIGger1`/`TRIGger2`; no suffix = channel 1), each
channel with its own settings and its own volatile arb memory:

- Waveforms: `FUNCtion SINusoid|SQUare|TRIangle|RAMP|PULSe|PRBS|NOISe|ARB|DC` (queries answer the
  short forms `SIN`, `SQU`, `TRI`, ...), `FREQuency`, `PHASe`, `FUNCtion:SQUare:DCYCle`,
  `FUNCtion:RAMP:SYMMetry`, `FUNCtion:PULSe:WIDTh`, `APPLy:<function> [f[,amp[,offset]]]`, `APPLy?`.
- Levels: `VOLTage` (in `VOLTage:UNIT VPP|VRMS|DBM`), `VOLTage:OFFSet`, `VOLTage:HIGH|LOW`, into the
  load set with `OUTPut:LOAD` (50 Ω at power-on, 1 Ω to 10 kΩ or INFinity). Amplitude and offset are
  bound together: |offset| + Vpp/2 <= 5 V into 50 Ω (10 V into high impedance); a setting past it is
  clipped to the limit and queues -222 "Data out of range". Changing the load rescales the displayed
  levels, the signal at the connector stays the same (no error).
- Arbs: `DATA:ARBitrary name,<values or float32 block>`, `DATA:ARBitrary:DAC name,<int16 list or block>`
  (byte order `FORMat:BORDer`), `DATA:VOLatile:CLEar|CATalog?|FREE?`, `FUNCtion:ARBitrary name`,
  `FUNCtion:ARBitrary:SRATe|POINts?|ADVance|FILTer`.
- Burst: `BURSt:STATe|MODE|NCYCles|INTernal:PERiod|PHASe`; triggers: `TRIGger:SOURce IMMediate|EXTernal|
  TIMer|BUS`, `TRIGger:SLOPe`, `TRIGger:DELay`, `TRIGger[:IMMediate]`, `*TRG` (every channel on BUS).
- Output: `OUTPut ON|OFF`, `OUTPut:LOAD`, `OUTPut:POLarity`; `SYSTem:BEEP`, `DISPlay:TEXT[:CLEar]`.
- Stored and answered back, acting on nothing modelled: burst gate polarity, output mode, sync
  and trigger out, trigger count/level/timer, voltage limits and autorange, `*PSC`.

The fixture is wired to channel 1's output (`WIRED_CHANNEL`): a bus-triggered burst there puts
its waveform (the arb clip or `NCYCles` periods of the built-in function) into the world at that
simulated instant - it shows on scope channel 1 and the phone hears it. Channel 2 drives nothing
the world can see, as on a bench wired to channel 1. A continuous (un-bursted) output is not put
into the world. VOLT is the amplitude into the set load; the fixture is high impedance, so the
connector's open-circuit voltage is what it sees (twice the 50 Ω setting).

The command tree is a table: awg_table.py (docs/instruments.md, "Emulated instruments as tables").
"""
from __future__ import annotations

from .awg_model import AwgModel
from .awg_table import COMMANDS
from .table import install
from ..world import World

__all__ = ["AwgServer"]


class AwgServer(AwgModel):
    """The 33522B with its command tree (awg_table.py) installed."""

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(world, port)
        install(self, COMMANDS)
