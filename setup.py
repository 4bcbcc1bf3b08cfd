"""Build hook: one installed name, `phonebench`, over the design card's top-level folders
(phonebench.bench is bench/, phonebench.drivers is drivers/, ...), so a lab repository's own
`fixtures/` or `drivers/` package never collides with ours (docs/architecture.md). An installed
phonebench also carries its data folders (suites, SLA profiles, firmware profiles, example
stations) as package data under phonebench/bench/_data/, where phonebench.core.paths finds them.
A checkout (and an editable install) uses the folders where they are."""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

FOLDERS = ("core", "drivers", "emulation", "bench", "fixtures")
DATA_FOLDERS = ("suites", "sla_profiles", "firmware_profiles", "stations")


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "phonebench" / "bench" / "_data"
        for name in DATA_FOLDERS:
            shutil.copytree(name, target / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


packages = [f"phonebench.{pkg}" for pkg in find_packages(include=[f"{folder}*" for folder in FOLDERS])]
setup(
    cmdclass={"build_py": BuildWithData},
    packages=packages,
    package_dir={f"phonebench.{folder}": folder for folder in FOLDERS},
)
