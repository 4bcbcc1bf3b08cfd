"""An emulated N6705C mainframe with an N6781A module in several slots, each powering its own bay.

Each populated slot is a full single-module emulator (power_analyzer.PowerAnalyzerServer, not
listening itself) wired to one bay's world. A message goes to the slot its channel list names,
`(@2)`, rewritten to the module's `(@1)`; a message naming no channel (`*IDN?`, `SYST:ERR?`,
`FORM REAL`) goes to the slot this connection addressed last, so a bay's own sequence of
commands, errors and sweeps stays in its module. What the real mainframe shares across slots
and this one keeps per slot (the data format, the error queue) never differs within one bay's
use, which is the only use the bench makes of it (one bay at a time, under the bay lock).
A message naming several slots, or an empty slot, is refused as the real one refuses an empty
slot: error -241 "Hardware missing".
"""
from __future__ import annotations

import re

from .power_analyzer import IDN, PowerAnalyzerServer
from .power_analyzer_table import MODULE
from .scpi import HARDWARE_MISSING, ScpiError
from .server import Connection, InstrumentServer
from ..world import World

SLOTS = 4
_CHANNELS = re.compile(rb"\(@([0-9,:\s]+)\)")
_MODULE_QUERY = re.compile(rb"SYST(EM)?:CHAN(NEL)?:MOD(EL)?\?", re.IGNORECASE)


class MainframeServer(InstrumentServer):
    family = "keysight-n6705c"
    idn = IDN

    def __init__(self, worlds: dict[int, World], port: int = 0) -> None:
        super().__init__(port)
        bad = [slot for slot in worlds if not 1 <= slot <= SLOTS]
        if bad:
            raise ValueError(f"N6705C slots are 1 to {SLOTS}, got {bad}")
        self.modules = {slot: PowerAnalyzerServer(world) for slot, world in worlds.items()}
        self._addressed: dict[Connection, int] = {}

    def _slots(self, message: bytes) -> set[int]:
        slots: set[int] = set()
        for group in _CHANNELS.findall(message):
            for part in group.replace(b" ", b"").split(b","):
                lo, _, hi = part.partition(b":")
                slots.update(range(int(lo), int(hi or lo) + 1))
        return slots

    def handle_message(self, conn: Connection, message: bytes) -> None:
        slots = self._slots(message)
        if _MODULE_QUERY.search(message) and slots:
            # Which modules are fitted is the mainframe's answer, not a module's.
            conn.send(",".join(MODULE if s in self.modules else '""' for s in sorted(slots)).encode() + b"\n")
            return
        if len(slots) > 1 or (slots and not slots <= set(self.modules)):
            target = self.modules.get(self._addressed.get(conn, min(self.modules)))
            if target is not None:
                missing = sorted(slots - set(self.modules)) or sorted(slots)
                target.push_error(ScpiError(HARDWARE_MISSING, f"no module in slot(s) {missing}"))
            return
        slot = next(iter(slots)) if slots else self._addressed.get(conn, min(self.modules))
        self._addressed[conn] = slot
        self.modules[slot].handle_message(conn, _CHANNELS.sub(b"(@1)", message))

    def on_disconnect(self, conn: Connection) -> None:
        self._addressed.pop(conn, None)
        super().on_disconnect(conn)
