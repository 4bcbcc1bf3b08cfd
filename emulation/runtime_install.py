"""The runtime builds installed on an emulated phone, and `llmrt install` (docs/runtime-contract.md).

An install takes the phone's time as a real one does: reading and hashing the artefact, stopping
the runtime, unpacking it onto flash (at this unit's flash speed), starting the new runtime and
watching it come up. It fails as a real one fails: a digest that does not match what the bench
says it pushed, a signature the phone does not trust (emulation/build_artefact.py), no room on
/data, a runtime that crashes as it starts (then the previous build is started again). Only what
the phone installed decides how its runtime behaves from then on.
"""
from __future__ import annotations

import hashlib
import logging
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .build_artefact import MANIFEST, Artefact, ArtefactRefused, BuildManifest, parse_manifest, read_artefact

if TYPE_CHECKING:
    from .device import EmulatedPhone

log = logging.getLogger(__name__)

RUNTIME_DIR = "/data/vendor/llm/runtime"  # one folder per installed build, named by its artefact's SHA-256
ACTIVE_BUILD = "/data/vendor/llm/runtime.active"  # the SHA-256 of the build the runtime starts
VERIFY_BYTES_PER_S = 250e6  # reading and hashing the pushed artefact
WRITE_BYTES_PER_S = 120e6  # unpacking onto the unit's flash (its flash factor scales it)
STOP_S = 0.4  # stopping the running runtime
START_S = 1.5  # the runtime's start: loading the model
CRASH_WATCH_S = 3.0  # how long the installer watches a new runtime before it calls it started


class InstallError(Exception):
    """`llmrt install` failed: `kind` is the contract's (disk-full, bad-signature, crash-on-start,
    digest-mismatch, refused)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class InstalledBuild:
    sha256: str  # the artefact's
    manifest: BuildManifest


Start = Callable[[InstalledBuild], None]  # the runtime starts on this build (a new process)


class BuildStore:
    """The phone's installed builds on its file store, and the installer."""

    def __init__(self, phone: EmulatedPhone) -> None:
        self.phone = phone

    def active(self) -> InstalledBuild | None:
        """The build the runtime starts; None on a phone that never had one installed."""
        fs = self.phone.fs
        if not fs.exists(ACTIVE_BUILD):
            return None
        sha = fs.read(ACTIVE_BUILD).decode(errors="replace").strip()
        try:
            return InstalledBuild(sha, parse_manifest(fs.read(f"{RUNTIME_DIR}/{sha}/{MANIFEST}")))
        except (FileNotFoundError, ArtefactRefused) as exc:
            log.warning("%s: installed build %s is unreadable (%s)", self.phone.spec.serial, sha[:12], exc)
            return None

    def preinstall(self, data: bytes) -> InstalledBuild:
        """The build the phone left the factory with (no time passes: it was installed before)."""
        try:
            artefact = read_artefact(data)
        except ArtefactRefused as exc:
            raise InstallError(exc.kind, str(exc)) from None
        self._unpack(artefact)
        self._point_at(artefact.sha256)
        return InstalledBuild(artefact.sha256, artefact.manifest)

    def install(self, data: bytes, expected_sha256: str | None, start: Start) -> tuple[InstalledBuild, bool]:
        """Install `data` and start the runtime on it: (the build, whether it was new; an artefact
        already active is not installed again). InstallError says what failed; the previous build
        then still runs."""
        world, spec = self.phone.world, self.phone.spec
        world.wait(len(data) / VERIFY_BYTES_PER_S)
        sha = hashlib.sha256(data).hexdigest()
        if expected_sha256 is not None and sha != expected_sha256.lower():
            raise InstallError("digest-mismatch", f"artefact SHA-256 is {sha}, not {expected_sha256} (corrupted in "
                                                  "transfer?); not installed")
        try:
            artefact = read_artefact(data)
        except ArtefactRefused as exc:
            raise InstallError(exc.kind, f"{exc}; not installed") from None
        previous = self.active()
        if previous is not None and previous.sha256 == sha:
            return previous, False
        free = self.phone.fs.free_bytes()
        if free is not None and artefact.install_bytes > free:
            raise InstallError("disk-full", f"No space left on device: the build takes {artefact.install_bytes} "
                                            f"bytes, /data has {free} free; not installed")
        world.wait(STOP_S)
        try:
            self._unpack(artefact)
        except OSError as exc:  # the store filled while unpacking
            self._remove(artefact.sha256)
            world.wait(START_S)
            if previous is not None:
                start(previous)
            raise InstallError("disk-full", f"{exc.strerror or exc} while unpacking; not installed") from None
        world.wait(artefact.install_bytes / WRITE_BYTES_PER_S * world.variation.flash_read)
        self._point_at(artefact.sha256)
        world.wait(START_S)
        build = InstalledBuild(artefact.sha256, artefact.manifest)
        if artefact.manifest.behaviour_for(spec.product_model, spec.soc_model).crash_on_start:
            world.wait(CRASH_WATCH_S)
            self.phone.logs.log("F", "libc", "Fatal signal 11 (SIGSEGV), code 1 (SEGV_MAPERR) in tid 4242 (llmrt)",
                                pid=4242)
            if previous is not None:
                self._point_at(previous.sha256)
            self._remove(artefact.sha256)
            world.wait(START_S)
            if previous is not None:
                start(previous)
            raise InstallError("crash-on-start", f"runtime {artefact.manifest.version} crashed on start (SIGSEGV); "
                                                 f"rolled back to {previous.manifest.version if previous else 'none'}")
        if previous is not None:
            self._remove(previous.sha256)
        start(build)
        log.info("%s: runtime build %s (%s) installed", spec.serial, artefact.manifest.version, sha[:12])
        return build, True

    # --- the file store ---------------------------------------------------------------------
    def _unpack(self, artefact: Artefact) -> None:
        folder = f"{RUNTIME_DIR}/{artefact.sha256}"
        for name, data in artefact.files.items():
            self.phone.fs.write(posixpath.join(folder, name), data)
        self.phone.fs.write(f"{folder}/{MANIFEST}", artefact.manifest_bytes)

    def _point_at(self, sha: str) -> None:
        fs = self.phone.fs
        fs.write(ACTIVE_BUILD + ".tmp", f"{sha}\n".encode())
        fs.rename(ACTIVE_BUILD + ".tmp", ACTIVE_BUILD)

    def _remove(self, sha: str) -> None:
        fs, folder = self.phone.fs, f"{RUNTIME_DIR}/{sha}"
        for path in sorted(fs.glob(folder + "/*"), key=len, reverse=True):  # children before their folders
            fs.remove(path)
        if fs.exists(folder):
            fs.remove(folder)

