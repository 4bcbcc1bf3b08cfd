"""Where the bench's own data lives: suites, SLA profiles, firmware profiles, example stations.

In a source checkout these are the folders at the repository's top level. An installed package
carries copies of them as package data under `bench/_data/` (see setup.py); `data_dir` finds
either, so no other module computes the repository's location.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the checkout, when running from one
DATA_FOLDERS = ("suites", "sla_profiles", "firmware_profiles", "stations")


def data_dir(name: str) -> Path:
    """The folder `name` (one of DATA_FOLDERS) of this installation."""
    if name not in DATA_FOLDERS:
        raise ValueError(f"unknown data folder {name!r}; known: {', '.join(DATA_FOLDERS)}")
    checkout = SOURCE_ROOT / name
    if checkout.is_dir():
        return checkout
    return Path(str(resources.files("bench") / "_data" / name))


def is_checkout() -> bool:
    """Whether the bench runs from a source checkout (a git work tree), not an installed copy."""
    return (SOURCE_ROOT / "pyproject.toml").is_file() and (SOURCE_ROOT / "bench").is_dir()
