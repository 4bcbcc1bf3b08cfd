"""Exception hierarchy: every error names the thing (file, device, instrument) and what to do."""
from __future__ import annotations


class BenchError(Exception):
    """Base of every error the bench reports to a user without a traceback."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message, self.hint = message, hint
        super().__init__(f"{message}\n  hint: {hint}" if hint else message)


class ConfigError(BenchError):
    """A station file, SLA profile or firmware profile is malformed."""


class UsageError(BenchError):
    """The command line asks for something that does not exist (a DUT, bay, persona, fault) or
    selects nothing: one line naming what exists, exit code USAGE (phonebench.core.exits)."""


class DeviceError(BenchError):
    """A DUT could not be reached, refused us, or died."""


class DeviceUnreachable(DeviceError):
    pass


class AuthRefused(DeviceError):
    pass


class DeviceDisconnected(DeviceError):
    pass


class CommandTimeout(DeviceError):
    pass


class TooMuchData(DeviceError):
    """The phone sent more than the bench takes: a packet over the size the link agreed on, a
    length field no protocol allows, shell output or a pulled file over its cap. Refused before
    anything is allocated for it; the link is closed (its stream state is unknown)."""


class CommandFailed(DeviceError):
    """A device command exited non-zero where success was required."""


class InstrumentError(BenchError):
    """An instrument is unreachable, silent, or reported an error."""


class InvalidMeasurement(BenchError):
    """A reading exists but cannot be trusted (clipped, NaN, 9.9E37, probe fault)."""


class UnsupportedCapability(BenchError):
    """The DUT's runtime or the bay's instrument does not offer what a check needs: the check is
    skipped with this reason."""
