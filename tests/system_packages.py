"""Tests that need a Debian package skip, naming it, when it is missing; `make test` as a user
without root then passes and ends with one line of what was skipped and how to install it
(tests/conftest.py). On CI, run as root, `make system-deps` installs them: absent there is a failure."""
from __future__ import annotations

import os
import re

import pytest

PREFIX = "needs Debian's "
# package -> what else `apt-get install` needs beside it
INSTALL = {"adb": "adb", "postgresql": "postgresql", "chromium": "chromium chromium-driver",
           "cryptsetup-bin": "cryptsetup-bin"}


def reason(package: str) -> str:
    return f"{PREFIX}{package} (sudo apt-get install {INSTALL[package]})"


def require(package: str, present: bool) -> None:
    """Skip the calling test (or fixture) when `package` is absent, or fail where it must be there."""
    if present:
        return
    if os.environ.get("CI") and os.geteuid() == 0:
        pytest.fail(f"{reason(package)}: CI runs `make system-deps` as root, which should have installed it")
    pytest.skip(reason(package))


def needs(package: str, present: bool) -> pytest.MarkDecorator:
    """The same as a marker, for a module or a test."""
    must = bool(os.environ.get("CI")) and os.geteuid() == 0
    return pytest.mark.skipif(not present and not must, reason=reason(package))


def package_of(skip_reason: str) -> str | None:
    found = re.search(re.escape(PREFIX) + r"([\w.+-]+)", skip_reason)
    return found.group(1) if found else None
