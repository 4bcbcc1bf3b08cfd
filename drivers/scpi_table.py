"""Instrument commands declared as data: a table of settings, bound to an instrument or a channel.

A `Setting` is one SCPI property: the set command, the query that reads it back, its unit and
what values it accepts (a range, or a map from the driver's value to the wire word). A table is
a mapping name -> Setting in the order the instrument wants them sent; `Bound.apply(**values)`
sends the settings given, `Bound.setup(**values)` those and every one with a default (the fixed
part of a set-up), in table order, each checked against the error queue. A `Channel` is a table
bound to one channel, so `scope.channel(1).scale = 0.2` sends `:CHANnel1:SCALe 0.2` and
`scope.channel(1).scale` reads it back. Templates use `{ch}` for the channel's wire form and `{}`
for the value.

`requires(state)` guards a method declaratively (labgrid's `check_active`): the driver refuses
with an error naming the instrument and the step that was skipped.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from phonebench.core.errors import ConfigError


class _Instrument(Protocol):
    name: str

    def configure(self, *commands: str) -> None: ...

    def query(self, command: str) -> str: ...

    def query_float(self, command: str) -> float: ...


@dataclass(frozen=True)
class Setting:
    command: str | None  # e.g. ":CHANnel{ch}:SCALe {:g}"; None for a read-only measurement
    query: str | None = None  # e.g. ":CHANnel{ch}:SCALe?"
    unit: str = ""
    limits: tuple[float, float] | None = None  # inclusive
    choices: Mapping[Any, str] | tuple[str, ...] | None = None  # driver value -> wire word, or the words
    default: Any = None  # sent by setup() when no value is given; None: sent only when given

    def render(self, name: str, value: Any, instrument: str, **where: object) -> str:
        if self.command is None:
            raise ConfigError(f"{instrument}: {name} is a measurement, it cannot be set", hint="read it instead")
        if self.choices is not None:
            words = self.choices if isinstance(self.choices, Mapping) else {c: c for c in self.choices}
            if value not in words:
                raise ConfigError(f"{instrument}: {name} {value!r} is not one of {list(words)}",
                                  hint="fix the value in the test or station file")
            value = words[value]
        elif self.limits is not None:
            low, high = self.limits
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (number and math.isfinite(value) and low <= value <= high):
                raise ConfigError(f"{instrument}: {name} {value!r} {self.unit} is outside "
                                  f"{low:g}..{high:g} {self.unit}", hint="fix the value in the test or station file")
        return self.command.format(value, **where)


Table = Mapping[str, Setting]


def fixed(command: str) -> Setting:
    """A command without a value, part of every setup() of its table (e.g. `:TRIGger:MODE EDGE`)."""
    return Setting(command, default=True)


class Bound:
    """A table bound to an instrument (and, for a channel, the channel's wire form as `ch`)."""

    def __init__(self, instrument: _Instrument, table: Table, **where: object) -> None:
        object.__setattr__(self, "_instrument", instrument)
        object.__setattr__(self, "_table", table)
        object.__setattr__(self, "_where", where)

    def commands(self, defaults: bool, **values: Any) -> list[str]:
        """The wire commands for `values` (None: not given), with the defaults if asked, in table order."""
        unknown = set(values) - set(self._table)
        if unknown:
            raise ConfigError(f"{self._instrument.name}: no setting {sorted(unknown)}",
                              hint=f"this family's table has {list(self._table)}")
        out = []
        for name, setting in self._table.items():
            value = values.get(name)
            value = setting.default if value is None and defaults else value
            if value is not None:
                out.append(setting.render(name, value, self._instrument.name, **self._where))
        return out

    def apply(self, **values: Any) -> None:
        """Send the given settings in table order, each checked against the error queue."""
        self._instrument.configure(*self.commands(False, **values))

    def setup(self, **values: Any) -> None:
        """apply(), plus every setting the table gives a default (a fixed part of the set-up)."""
        self._instrument.configure(*self.commands(True, **values))

    def query_of(self, name: str) -> str:
        query = self._table[name].query
        if query is None:
            raise ConfigError(f"{self._instrument.name}: {name} cannot be read back", hint="the table has no query")
        return query.format(**self._where)

    def read(self, name: str) -> float:
        return self._instrument.query_float(self.query_of(name))

    def __getattr__(self, name: str) -> float:
        if name.startswith("_") or name not in self._table:
            raise AttributeError(name)
        return self.read(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self.apply(**{name: value})  # an unknown name is refused there, listing the table


class Channel(Bound):
    """One channel of a multi-channel instrument: its number and its table."""

    def __init__(self, instrument: _Instrument, number: int, table: Table, wire: str | None = None) -> None:
        super().__init__(instrument, table, ch=wire if wire is not None else number)
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "wire", str(self._where["ch"]))  # how commands address it, e.g. "(@1)"

    def __repr__(self) -> str:
        return f"<channel {self.number} of {self._instrument.name}>"


def number_of(channel: int | Channel) -> int:
    """A channel argument as its number: the role interfaces take Channel objects; the drivers also
    accept a bare number from scripts and instrument tests."""
    return channel.number if isinstance(channel, Channel) else int(channel)


F = TypeVar("F", bound=Callable[..., Any])


def requires(state: str, before: str, hint: str) -> Callable[[F], F]:
    """Refuse the method while `self.<state>` is None: the step `before` (e.g. "arm()") has not run."""
    def decorate(method: F) -> F:
        @functools.wraps(method)
        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(self, state) is None:
                raise ConfigError(f"{self.name}: {method.__name__}() before {before}", hint=hint)
            return method(self, *args, **kwargs)
        return guarded  # type: ignore[return-value]
    return decorate


def setter(name: str, via: str = "ch") -> Callable[[Any, Any], None]:
    """A driver method that sets one row of the table bound at `self.<via>` (e.g. `set_voltage`)."""
    def set_one(self: Any, value: Any) -> None:
        getattr(self, via).apply(**{name: value})
    set_one.__name__ = set_one.__qualname__ = f"set_{name}"
    return set_one


def sequence(*commands: str, via: str = "ch") -> Callable[[Any], None]:
    """A driver method that sends fixed commands (`{ch}`: the channel of `self.<via>`), each checked."""
    def send(self: Any) -> None:
        self.configure(*(c.format(ch=getattr(self, via).wire) for c in commands))
    return send
