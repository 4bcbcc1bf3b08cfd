"""The code version every record carries: the package version, and in a checkout the git commit."""
from __future__ import annotations

import subprocess
from functools import lru_cache
from importlib import metadata

from .paths import SOURCE_ROOT, is_checkout


@lru_cache(maxsize=1)
def package_version() -> str:
    try:
        return metadata.version("phonebench")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@lru_cache(maxsize=1)
def code_version() -> str:
    """`0.2.0` installed; `0.2.0+g1a2b3c4` (or `…-dirty`) in a git checkout."""
    version = package_version()
    if not is_checkout():
        return version
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                             timeout=5, cwd=SOURCE_ROOT)
    except (OSError, subprocess.SubprocessError):
        return version
    described = out.stdout.strip()
    return f"{version}+g{described}" if out.returncode == 0 and described else version
