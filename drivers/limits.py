"""How much the bench takes from a phone in one piece: the caps on a pulled file held in memory
and on one command's output (docs/adb.md). The phone is outside the trust boundary: without a cap
a phone (or whatever answers on its address) decides how much host memory a read commits.

Defaults suit a lab: a weights manifest, a hash device or a test model file fits in 256 MiB, and no
command the bench runs prints near 64 MiB. A lab pulling a bigger file sets
PHONEBENCH_MAX_PULL_MB (or a driver's max_pull_bytes); PHONEBENCH_MAX_SHELL_MB likewise.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from phonebench.core.errors import ConfigError

MIB = 1024 * 1024
DEFAULT_MAX_PULL_BYTES = 256 * MIB
DEFAULT_MAX_SHELL_BYTES = 64 * MIB
ENV_MAX_PULL = "PHONEBENCH_MAX_PULL_MB"
ENV_MAX_SHELL = "PHONEBENCH_MAX_SHELL_MB"
# Protocol bounds, whatever the caps: AOSP's adb never sends a larger piece of each kind.
MAX_SYNC_DATA = 64 * 1024      # a sync DATA block (file_sync_protocol.h SYNC_DATA_MAX)
MAX_SYNC_TEXT = 64 * 1024      # a sync FAIL message or a LIST entry's name
MAX_SHELL_PACKET = 1024 * 1024  # a shell-protocol packet (adbd frames at most MAX_PAYLOAD)


@dataclass(frozen=True)
class ByteLimits:
    """The caps one driver applies: bytes of one pull_bytes, bytes of one command's output."""

    pull_bytes: int = DEFAULT_MAX_PULL_BYTES
    shell_bytes: int = DEFAULT_MAX_SHELL_BYTES


def _mib(env: dict[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"{name}={text!r} is not a size in MiB", hint=f"e.g. {name}={default // MIB}")
    return int(value * MIB)


def byte_limits(pull_bytes: int | None = None, shell_bytes: int | None = None,
                env: dict[str, str] | None = None) -> ByteLimits:
    """The caps given, else the environment's (PHONEBENCH_MAX_PULL_MB, PHONEBENCH_MAX_SHELL_MB), else the defaults."""
    env = dict(os.environ) if env is None else env
    pull = pull_bytes if pull_bytes is not None else _mib(env, ENV_MAX_PULL, DEFAULT_MAX_PULL_BYTES)
    shell = shell_bytes if shell_bytes is not None else _mib(env, ENV_MAX_SHELL, DEFAULT_MAX_SHELL_BYTES)
    for name, value in (("max_pull_bytes", pull), ("max_shell_bytes", shell)):
        if value <= 0:
            raise ConfigError(f"{name} = {value}: a cap must be a positive number of bytes")
    return ByteLimits(pull, shell)
