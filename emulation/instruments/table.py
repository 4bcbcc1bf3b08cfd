"""An emulated instrument's command tree declared as a table (the drivers' shape, drivers/scpi_table.py).

A row is one header of the model's manual with a small handler for each form it has:

    Command("OUTPut[:STATe]", write=set_output, query=get_output)
    Setting("[SOURce]:VOLTage:SLEW[:IMMediate]", 9.9e37, numeric(0.0, 9.9e37, "{:+.6E}"), channels=slot_channels)

A handler is a plain function `(server, call) -> answer`; `install(server, rows)` binds every row
to one server, in table order, into its CommandTree. A `Setting` is a command whose only effect
the emulator shows is its own query (InstrumentServer.add_setting). `extension=True` marks a row
the model's manual does not document (the emulator's own); tests/test_emulated_tables.py checks
each table against the manual's command list kept in tests/data/emulated_tables/<family>.toml.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .scpi import Call, Response
from .server import InstrumentServer, Kind

RowHandler = Callable[[Any, Call], Response]  # (server, call): the server is the model's own class
RowChannels = Callable[[Any, Call, int], list[int]]


@dataclass(frozen=True)
class Command:
    header: str  # the pattern without "?", e.g. "[SOURce]:VOLTage[:LEVel][:IMMediate][:AMPLitude]"
    write: RowHandler | None = None
    query: RowHandler | None = None
    extension: bool = False  # not in the model's manual

    def forms(self) -> list[str]:
        """The tree patterns the row defines: the header and/or its query."""
        return ([self.header] if self.write else []) + ([self.header + "?"] if self.query else [])


@dataclass(frozen=True)
class Setting:
    header: str
    default: Any
    kind: Kind
    channels: RowChannels | None = None  # reads the optional channel list; None: the setting has none
    reset: bool = True  # False: *RST leaves it alone (*PSC)
    extension: bool = False

    def forms(self) -> list[str]:
        return [self.header, self.header + "?"]


Row = Command | Setting


def install(server: InstrumentServer, rows: Iterable[Row]) -> None:
    """Add every row's forms to the server's command tree, each handler bound to the server."""
    for row in rows:
        if isinstance(row, Setting):
            channels = None if row.channels is None else functools.partial(row.channels, server)
            server.add_setting(row.header, row.default, row.kind, channels=channels, reset=row.reset)
            continue
        if row.write is not None:
            server.tree.add(row.header, functools.partial(row.write, server))
        if row.query is not None:
            server.tree.add(row.header + "?", functools.partial(row.query, server))


def forms(rows: Iterable[Row], extensions: bool | None = None) -> list[str]:
    """Every pattern the rows define (only the extensions' or only the others' when asked)."""
    return [form for row in rows if extensions is None or row.extension == extensions for form in row.forms()]
