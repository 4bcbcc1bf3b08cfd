"""The A/B's installer: catalogue builds put on a phone by the catalogue's `install_build`, every
attempt's record written to the results folder's installs/ (docs/builds.md), a build's own fault
turned into BuildUnusable (a bisection skips it) and a lost phone into the unit's error."""
from __future__ import annotations

import logging
from pathlib import Path

from phonebench.core.errors import DeviceUnreachable
from phonebench.drivers.device import Device
from phonebench.drivers.runtime import RuntimeClient
from ..catalogue.catalogue import Catalogue
from ..catalogue.install import InstallFailed, InstallRecord, install_build
from ..catalogue.records import write_install_record
from .protocol import BuildUnusable
from .records import Installed

log = logging.getLogger(__name__)

PHONES_FAULT = ("unreachable",)  # the phone, not the build: the unit stops, the build is not skipped


class CatalogueInstaller:
    """bench/ab/measure.Installer over a catalogue."""

    def __init__(self, catalogue: Catalogue, results_dir: Path | None) -> None:
        self.catalogue, self.results_dir = catalogue, results_dir

    def __call__(self, device: Device, client: RuntimeClient, build_id: str) -> Installed:
        build = self.catalogue.get(build_id)
        try:
            record = install_build(device, build, station_clock=client.clock, client=client)
        except InstallFailed as exc:
            self._keep(exc.record)
            if exc.kind in PHONES_FAULT:
                raise DeviceUnreachable(str(exc), hint=exc.hint) from None
            raise BuildUnusable(build_id, exc.kind, str(exc).split("\n", 1)[0]) from None
        self._keep(record)
        return Installed(build_id, record.station_seconds, record.reported_version, record.pushed_sha256)

    def _keep(self, record: InstallRecord | None) -> None:
        if record is not None and self.results_dir is not None:
            write_install_record(self.results_dir, record)
