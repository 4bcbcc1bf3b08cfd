"""The takt meter counts waits on every phone driver, whatever its transport."""
from __future__ import annotations

from phonebench.bench.station.waits import WaitMeter
from phonebench.drivers.adb import AdbPhone
from phonebench.drivers.adb_server import ServerAdbPhone
from phonebench.drivers.device import ShellCommands, ShellResult


class _LabPhone(ShellCommands):
    """A phone driver of a transport the meter was never told about."""

    name = "lab"

    def shell(self, command: str, timeout_s: float | None = None) -> ShellResult:
        return ShellResult(self.name, command, "", 0)


def test_every_phone_transport_is_timed_and_restored():
    originals = {cls: dict(cls.__dict__) for cls in (AdbPhone, ServerAdbPhone, _LabPhone)}
    with WaitMeter() as meter:
        for cls in (AdbPhone, ServerAdbPhone, _LabPhone):
            assert getattr(cls.__dict__["shell"], "__wait_meter__", None) is meter, cls
        assert getattr(ServerAdbPhone.__dict__["shell_timed"], "__wait_meter__", None) is meter
        assert _LabPhone().run("true") == "" and _LabPhone().getprop("x") == ""
        assert meter.totals().calls == 2  # run and getprop each wait on one shell call
    for cls, methods in originals.items():
        assert cls.__dict__["shell"] is methods["shell"]
