"""Live progress of an acceptance run: a pytest plugin object that reports each step (an
acceptance check) as it starts and ends, sent to whoever listens (the operator page)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..procedures.acceptance.disposition import CHECKS

Send = Callable[[dict[str, Any]], None]


class ProgressReporter:
    """Steps are the acceptance checks the run's tests declare, in the order they first run."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self._check_of: dict[str, str] = {}
        self._failed: set[str] = set()
        self._skipped: set[str] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from phonebench.fixtures.collection import acceptance_check

        steps: list[str] = []
        self._failed.clear()
        self._skipped.clear()
        for item in session.items:
            check = acceptance_check(item) or "other"
            self._check_of[item.nodeid] = check
            if check not in steps:
                steps.append(check)
        self.send({"event": "plan", "steps": [{"check": c, "words": _words(c)} for c in steps]})

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.send({"event": "step", "check": self._check_of.get(nodeid, "other"), "state": "running"})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        check = self._check_of.get(report.nodeid, "other")
        if report.failed:
            self._failed.add(check)
            self.send({"event": "step", "check": check, "state": "fail"})
        elif report.skipped:
            self._skipped.add(check)
        elif report.when == "teardown" and check not in self._failed:
            self.send({"event": "step", "check": check, "state": "skipped" if check in self._skipped else "done"})


def _words(check: str) -> str:
    return CHECKS[check].words if check in CHECKS else "Other checks"
