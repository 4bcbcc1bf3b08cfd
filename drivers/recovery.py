"""Device recovery as Tradefed and Mobly do it: after a reboot or a lost connection, wait for the
phone to go away, then for it to come back and finish booting (`sys.boot_completed` = 1), each
wait bounded. A phone that does not come back is broken: DeviceBroken says so, and the bench
stops using it for the rest of the run instead of retrying forever.

Works on any driver with `online()` (one bounded look, no retries), `close()` and `getprop()`:
phonebench.drivers.adb.AdbPhone and phonebench.drivers.adb_server.ServerAdbPhone.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from phonebench.core.errors import DeviceError

log = logging.getLogger(__name__)


class DeviceBroken(DeviceError):
    """The phone did not come back (or never finished booting) within the recovery bounds."""


@dataclass(frozen=True)
class RecoveryPolicy:
    gone_timeout_s: float = 30.0    # a reboot must take the phone off within this
    online_timeout_s: float = 180.0  # ... and bring adbd back within this
    boot_timeout_s: float = 180.0    # ... and sys.boot_completed within this, once adbd is back
    poll_s: float = 0.1


def _name(device: Any) -> str:
    return getattr(device, "name", repr(device))


def wait_gone(device: Any, timeout_s: float, poll_s: float = 0.1) -> bool:
    """True once the phone is off ADB; False if it stayed within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not device.online():
            return True
        time.sleep(poll_s)
    return False


def wait_online(device: Any, timeout_s: float, poll_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not device.online():
        if time.monotonic() >= deadline:
            raise DeviceBroken(f"{_name(device)}: did not come back on ADB within {timeout_s:g} s",
                               hint="check the phone (boot loop? battery? cable or Wi-Fi); it is left out for the "
                                    "rest of this run")
        time.sleep(poll_s)


def wait_boot_completed(device: Any, timeout_s: float, poll_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            last = device.getprop("sys.boot_completed")
            if last == "1":
                return
        except DeviceError as exc:  # adbd may restart once more during boot
            last = f"({exc.__class__.__name__})"
            device.close()
        if time.monotonic() >= deadline:
            raise DeviceBroken(f"{_name(device)}: back on ADB but not booted within {timeout_s:g} s "
                               f"(sys.boot_completed = {last or 'unset'})",
                               hint="the phone may be stuck in boot; it is left out for the rest of this run")
        time.sleep(poll_s)


def recover(device: Any, policy: RecoveryPolicy = RecoveryPolicy()) -> None:
    """After a lost connection: back online and booted, or DeviceBroken."""
    device.close()
    wait_online(device, policy.online_timeout_s, policy.poll_s)
    wait_boot_completed(device, policy.boot_timeout_s, policy.poll_s)
    log.info("%s: recovered (online, boot completed)", _name(device))


def reboot_and_wait(device: Any, policy: RecoveryPolicy = RecoveryPolicy()) -> None:
    """`adb reboot`, then gone, back and booted (each bounded), or DeviceBroken."""
    log.info("%s: rebooting", _name(device))
    device.reboot()
    if not wait_gone(device, policy.gone_timeout_s, policy.poll_s):
        raise DeviceBroken(f"{_name(device)}: asked to reboot but still on ADB after {policy.gone_timeout_s:g} s",
                           hint="the reboot request was ignored (permissions? a user build refusing it?)")
    recover(device, policy)
