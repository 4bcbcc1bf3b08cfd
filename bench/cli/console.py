"""How `bench run` shows a run: what it prints, what pytest prints, whether the station is checked first."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Console:
    """How `bench run` shows a run and whether it checks the station first: none of it changes
    what the run is (its RunRequest)."""

    quiet: bool = False  # CI logs: no live lines or bars, the summary lists only what failed
    verbose: bool = False  # the summary lists every test and verdict
    pytest_lines: bool = False  # pytest's own per-test lines
    preflight: bool = True  # the station preflight before the tests

    def pytest_options(self) -> list[str]:
        """What pytest prints (its junit.xml goes in the run's folder: `junit_options`)."""
        options = ["-o", "junit_family=xunit2", "-v" if self.pytest_lines else "-qq"]
        return options + (["--live"] if not (self.quiet or self.pytest_lines) else [])


def junit_options(folder: Path) -> list[str]:
    """pytest's junit.xml of a session recorded in `folder`."""
    return ["--junitxml", str(folder / "junit.xml")]
