"""The fixture's controller: what a calibration asks of the fixture, done on command.

A calibration puts a loopback path in place of the phone and tapes the reference probe beside one
thermocouple. A station whose fixture has a controller (a relay box and probe arm speaking SCPI,
family `phonebench-fixture`; the emulated station's fixture is one) names it as the `fixture`
instrument; a station without one has an operator do each step when asked
(phonebench.bench.procedures.calibration.fixture.OperatorFixture).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from phonebench.core.errors import ConfigError
from .visa import ScpiInstrument

LOOPBACK_PATHS = ("acoustic", "electrical")
_LOOPBACK_WORDS = {"acoustic": "ACOustic", "electrical": "ELECtrical", None: "OFF"}


@runtime_checkable
class FixtureControl(Protocol):
    def loopback(self, path: str | None) -> None:
        """Put the loopback path in place of the phone ("acoustic" | "electrical"), or None: phone back."""

    def place_reference(self, point: str) -> None:
        """Tape the reference probe beside a probe point (cover_a, cover_b, ambient, ...)."""


class ScpiFixture(ScpiInstrument):
    """A fixture controller over SCPI: `:ROUTe:LOOPback`, `:PROBe:REFerence` (docs/instruments.md)."""

    role = "fixture"
    family = "phonebench-fixture"

    def loopback(self, path: str | None) -> None:
        if path not in _LOOPBACK_WORDS:
            raise ConfigError(f"unknown loopback path {path!r}", hint=f"known: {', '.join(LOOPBACK_PATHS)}")
        self.write(f":ROUTe:LOOPback {_LOOPBACK_WORDS[path]}")
        self.check_errors(f"loopback {path or 'off'}")

    def place_reference(self, point: str) -> None:
        self.write(f':PROBe:REFerence "{point}"')
        self.check_errors(f"reference probe at {point}")
