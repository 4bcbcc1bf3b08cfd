"""Overflow adapters on a DUT: choose by fingerprint, verify the signature, push, have the
device verify the checksum, activate atomically, confirm, and roll back on failure.

Only a build the fingerprint calls "known" gets an adapter: unknown, mismatched or inconsistent
builds are never trusted with one. An unsigned or tampered adapter is never pushed.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from phonebench.core import signing
from phonebench.core.errors import BenchError, DeviceError
from .fingerprint import FingerprintReport, fingerprint
from ..specs.profiles import Adapter, ProfileLibrary, load_library
from phonebench.drivers.runtime import RuntimeClient

log = logging.getLogger(__name__)

REMOTE_DIR = "/data/local/tmp/phonebench/adapters"


class AdapterRefused(BenchError):
    """The bench will not install this adapter (unsigned, tampered, or the build is not trusted)."""


class AdapterInstallFailed(DeviceError):
    """The device did not end up with the adapter; it keeps (or was rolled back to) the previous one."""


@dataclass
class AdapterOutcome:
    device: str
    adapter: str | None  # adapter name, None = no adapter needed
    sha256: str | None
    previous: str | None  # active checksum before
    active: str | None    # active checksum after
    action: str           # "activated", "already-active", "deactivated", "none-needed"


def choose_adapter(report: FingerprintReport, library: ProfileLibrary) -> Adapter | None:
    """The adapter the profile assigns to this known build; None when it needs none."""
    if not report.trusted:
        raise AdapterRefused(f"{report.device}: fingerprint verdict is {report.verdict} ({report.detail}); "
                             "no adapter is applied to a build that is not known",
                             hint="review the fingerprint report; an unknown build needs a reviewed profile first")
    return library.adapter(report.adapter or "none")


def verify_adapter(adapter: Adapter, trusted: Sequence[signing.TrustedKey]) -> signing.TrustedKey:
    try:
        return signing.verify_file(adapter.path, trusted, data=adapter.data)
    except signing.SignatureError as exc:
        raise AdapterRefused(f"refusing to install adapter {adapter.name}: {exc}", hint=exc.hint) from None


def apply_adapter(client: RuntimeClient, adapter: Adapter | None,
                  trusted: Sequence[signing.TrustedKey]) -> AdapterOutcome:
    """Make `adapter` the active one on the device (None: run without adapter)."""
    name = client.device.name
    previous = client.adapter_status().active
    if adapter is None:
        if previous is not None:
            client.adapter_remove()
        return AdapterOutcome(name, None, None, previous, None, "deactivated" if previous else "none-needed")
    verify_adapter(adapter, trusted)
    sha = adapter.sha256
    if previous == sha:
        return AdapterOutcome(name, adapter.name, sha, previous, sha, "already-active")
    remote = f"{REMOTE_DIR}/{sha}.json"
    try:
        client.device.push_bytes(adapter.data, remote)
        client.adapter_install(remote, sha)  # the device re-checks the checksum
        client.adapter_activate(sha)
        active = client.adapter_status().active
        if active != sha:
            raise AdapterInstallFailed(f"{name}: active adapter is {active}, not {sha}")
    except BenchError as exc:
        kept = rollback(client, previous)
        reason = str(exc).split("\n", 1)[0]  # without the nested hint
        raise AdapterInstallFailed(f"{name}: adapter {adapter.name} not activated: {reason}; "
                                   f"the device keeps adapter {kept or 'none'}",
                                   hint="re-run; if it persists, check free space in /data and the runtime log") from None
    log.info("%s: adapter %s (%s) active, was %s", name, adapter.name, sha[:12], previous)
    return AdapterOutcome(name, adapter.name, sha, previous, sha, "activated")


def shipped_numerics(client: RuntimeClient, library: ProfileLibrary | None = None) -> AdapterOutcome | None:
    """Fingerprint the unit and activate the adapter its profile assigns: the configuration a phone
    ships in (claim 9), in which it computes the model exactly, so its tokens can be checked against
    the bench's reference. None when the build is not trusted with an adapter: its tokens may then
    differ from the model's, and the token checks say so."""
    library = library or load_library()
    report = fingerprint(client.device, library, client=client)
    if not report.trusted:
        log.warning("%s: %s build, no adapter: tokens may not be the model's", client.device.name, report.verdict)
        return None
    return apply_adapter(client, choose_adapter(report, library), library.trusted)


def rollback(client: RuntimeClient, previous: str | None) -> str | None:
    """Make sure `previous` is the active adapter again; returns what is active afterwards."""
    active = client.adapter_status().active
    if active != previous:
        log.warning("%s: rolling back adapter %s -> %s", client.device.name, active, previous)
        if previous is None:
            client.adapter_remove()
        else:
            client.adapter_activate(previous)
        active = client.adapter_status().active
    return active
