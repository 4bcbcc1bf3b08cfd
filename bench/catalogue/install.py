"""Installing a catalogue build on a phone over ADB, as the runtime contract says (docs/builds.md;
docs/runtime-contract.md, "install").

1. The artefact's SHA-256 is computed here and held against the catalogue's, before anything
   reaches the phone: an artefact that does not match is never pushed.
2. It is pushed to the bench's folder on the phone, `llmrt install PATH --sha256 HEX` installs it
   (the runtime checks the digest again, then its signature, its room, its start), and the pushed
   copy is removed.
3. The runtime's identity and status are read back.

The record keeps what the bench pushed (its digest: measured, here) beside what the runtime then
says it runs (its version and artefact digest: the phone's word, `reported`). A failure raises
InstallFailed with its kind and the record of the attempt.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from dataclasses import dataclass
from typing import Any

from phonebench.core.errors import (BenchError, CommandFailed, CommandTimeout, DeviceDisconnected, DeviceUnreachable,
                                    TooMuchData, UnsupportedCapability)
from phonebench.core.phone_text import printable
from phonebench.core.verdict import Evidence
from phonebench.drivers.clock import HostClock, StationClock
from phonebench.drivers.device import Device
from phonebench.drivers.runtime import RuntimeClient, RuntimeCommandFailed, RuntimeProtocolError
from .catalogue import CatalogueBuild

log = logging.getLogger(__name__)

INSTALLED = "installed"
# Why an install failed. From the phone: disk-full, bad-signature, crash-on-start, refused (anything
# else it refuses: not its artefact format, no install capability), digest-mismatch (what arrived is
# not what was pushed). From the bench, before the phone sees anything: digest-mismatch (the
# artefact is not the catalogue's), missing-artefact. unreachable: the phone was lost on the way.
FAILURE_KINDS = ("disk-full", "bad-signature", "crash-on-start", "digest-mismatch", "unreachable",
                 "missing-artefact", "refused")
REMOTE_DIR = "/data/local/tmp/phonebench/builds"
INSTALL_TIMEOUT_S = 600.0  # a large build on a slow phone: verified, unpacked, started
_LOST = (DeviceUnreachable, DeviceDisconnected, CommandTimeout, TooMuchData)
_NO_SPACE = "No space left on device"


@dataclass(frozen=True)
class InstallRecord:
    build_id: str
    pushed_sha256: str  # what the bench pushed, hashed here
    reported_version: str  # the phone's word: the runtime version it reports after the install
    phone_seconds: float  # the install on the phone's clock (the phone's word; nan: not read)
    station_seconds: float  # the install on the station clock, push to read-back
    outcome: str  # "installed" | a FAILURE_KINDS entry
    device: str = ""
    previous_version: str = ""  # the phone's word before the install
    reported_sha256: str = ""  # the phone's word: the artefact it says it runs now
    message: str = ""  # why it failed

    @property
    def installed(self) -> bool:
        return self.outcome == INSTALLED

    def to_dict(self) -> dict[str, Any]:
        """As a record keeps it: unknown times as null, and what rests on the phone's word said so."""
        out = {k: (None if isinstance(v, float) and math.isnan(v) else v)
               for k, v in dataclasses.asdict(self).items()}
        out["evidence"] = {"pushed_sha256": Evidence.MEASURED.value, "station_seconds": Evidence.MEASURED.value,
                           "reported_version": Evidence.REPORTED.value, "reported_sha256": Evidence.REPORTED.value,
                           "previous_version": Evidence.REPORTED.value, "phone_seconds": Evidence.REPORTED.value}
        return out


class InstallFailed(BenchError):
    """The build is not installed: `kind` says why (FAILURE_KINDS), `record` is the attempt."""

    def __init__(self, kind: str, message: str, hint: str | None = None, record: InstallRecord | None = None) -> None:
        super().__init__(message, hint)
        self.kind = kind
        self.record = record


_HINTS = {
    "disk-full": "free space on the phone's /data (old builds, pulled logs), then install again",
    "bad-signature": "the phone does not trust the artefact's signature: have the build system sign it with the "
                     "key the phone's runtime trusts (docs/builds.md)",
    "crash-on-start": "the build crashed as it started and the phone went back to its previous build: a bisection "
                      "skips such a build; report it to the runtime team",
    "digest-mismatch": "the artefact is not the one the catalogue names: rebuild it or fix the catalogue's sha256",
    "missing-artefact": "the build system listed the build but its artefact is not there: a bisection skips it",
    "unreachable": "check the phone's connection (`bench station check`) and install again",
    "refused": "see the runtime's message; docs/runtime-contract.md says what `llmrt install` takes",
}


def read_artefact(build: CatalogueBuild) -> bytes:
    """The build's artefact, checked against the catalogue's digest; InstallFailed if missing or different."""
    try:
        data = build.artefact.read_bytes()
    except FileNotFoundError:
        raise InstallFailed("missing-artefact", f"build {build.id}: artefact {build.artefact} does not exist",
                            hint=_HINTS["missing-artefact"]) from None
    except OSError as exc:
        raise InstallFailed("missing-artefact", f"build {build.id}: artefact {build.artefact} cannot be read: "
                                                f"{exc.strerror or exc}", hint=_HINTS["missing-artefact"]) from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != build.sha256:
        raise InstallFailed("digest-mismatch", f"build {build.id}: artefact {build.artefact} has SHA-256 {actual}, "
                                               f"the catalogue says {build.sha256}; not pushed",
                            hint=_HINTS["digest-mismatch"])
    return data


def install_build(device: Device, build: CatalogueBuild, *, station_clock: StationClock | None = None,
                  client: RuntimeClient | None = None, timeout_s: float = INSTALL_TIMEOUT_S) -> InstallRecord:
    """Install `build` on `device`; its InstallRecord, or InstallFailed (its `record` says how far it got)."""
    clock = station_clock or HostClock()
    attempt = _Attempt(device, build, client or RuntimeClient(device), clock)
    data = read_artefact(build)  # before anything reaches the phone
    try:
        return attempt.run(data, timeout_s)
    except InstallFailed:
        raise
    except RuntimeCommandFailed as exc:
        kind = str(exc.answer.get("kind", ""))
        raise attempt.failed(kind if kind in FAILURE_KINDS else "refused", _first_line(exc)) from None
    except _LOST as exc:
        raise attempt.failed("unreachable", _first_line(exc)) from None
    except CommandFailed as exc:  # the push, refused by the phone's adbd
        raise attempt.failed("disk-full" if _NO_SPACE in str(exc) else "refused", _first_line(exc)) from None
    except (UnsupportedCapability, RuntimeProtocolError) as exc:
        raise attempt.failed("refused", _first_line(exc)) from None


class _Attempt:
    """One install's steps and what is known of it so far."""

    def __init__(self, device: Device, build: CatalogueBuild, client: RuntimeClient, clock: StationClock) -> None:
        self.device, self.build, self.client, self.clock = device, build, client, clock
        self.t0 = clock.now()
        self.phone_t0: float | None = None
        self.previous = ""

    def run(self, data: bytes, timeout_s: float) -> InstallRecord:
        client, build = self.client, self.build
        client.require("install")
        self.phone_t0 = client.status().t
        self.previous = printable(str(client.identity(refresh=True).runtime_version))
        remote = f"{REMOTE_DIR}/{build.sha256}.artefact"
        self.device.push_bytes(data, remote)
        try:
            answer = client.install(remote, build.sha256, timeout_s=timeout_s)
        finally:
            self._remove(remote)
        status = client.status()
        version = printable(str(client.identity(refresh=True).runtime_version))
        said = answer.get("installed")
        running = (status.build or {}).get("sha256", said)
        record = self._record(INSTALLED, version, status.t, running)
        if said != build.sha256 or running != build.sha256:
            raise InstallFailed("digest-mismatch", f"{self.device.name}: the runtime says it installed "
                                                   f"{printable(str(said), 64)} and runs {printable(str(running), 64)}; "
                                                   f"the bench pushed {build.sha256}", hint=_HINTS["digest-mismatch"],
                                record=dataclasses.replace(record, outcome="digest-mismatch"))
        log.info("%s: build %s installed (%s; was %s)", self.device.name, build.id, version, self.previous)
        return record

    def failed(self, kind: str, message: str) -> InstallFailed:
        """The failure, with the record of the attempt (what the phone runs now, if it still answers)."""
        version, phone_t, running = "", None, ""
        if kind != "unreachable":
            try:
                status = self.client.status()
                phone_t, running = status.t, str((status.build or {}).get("sha256", ""))
                version = printable(str(self.client.identity(refresh=True).runtime_version))
            except BenchError as exc:
                log.info("%s: after the failed install the runtime did not answer: %s", self.device.name, exc)
        record = self._record(kind, version, phone_t, running, message)
        return InstallFailed(kind, f"{self.device.name}: build {self.build.id} not installed ({kind}): {message}",
                             hint=_HINTS[kind], record=record)

    def _record(self, outcome: str, version: str, phone_t: float | None, running: object,
                message: str = "") -> InstallRecord:
        phone_s = phone_t - self.phone_t0 if phone_t is not None and self.phone_t0 is not None else math.nan
        return InstallRecord(build_id=self.build.id, pushed_sha256=self.build.sha256, reported_version=version,
                             phone_seconds=float(phone_s), station_seconds=self.clock.now() - self.t0, outcome=outcome,
                             device=self.device.name, previous_version=self.previous,
                             reported_sha256=printable(str(running or ""), 64), message=message)

    def _remove(self, remote: str) -> None:
        """The pushed copy goes: a nightly installs a build a night, and /data is not the bench's."""
        try:
            self.device.shell(["rm", "-f", remote])
        except BenchError as exc:
            log.warning("%s: the pushed artefact %s stays on the phone: %s", self.device.name, remote, exc)


def _first_line(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0]
