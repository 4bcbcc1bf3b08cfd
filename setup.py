"""Build hook: an installed phonebench carries its data folders (suites, SLA profiles, firmware
profiles, example stations) as package data under bench/_data/, where phonebench.core.paths finds them.
A checkout (and an editable install) uses the folders where they are."""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_FOLDERS = ("suites", "sla_profiles", "firmware_profiles", "stations")


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "bench" / "_data"
        for name in DATA_FOLDERS:
            shutil.copytree(name, target / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithData})
