"""Where the project's own tests spend their time: a plugin tests/conftest.py registers when
$PHONEBENCH_TEST_COSTS names a folder (benchmarks/bench_test_suite.py sets it).

For every test: its setup, call and teardown seconds, the fixtures it used, its worker and the
commands of the processes it started (a `bench run`, `bench emulate`, a plain pytest, llama.cpp);
for every fixture set-up: the fixture's name, scope and seconds (a module- or session-scoped
fixture is paid once, where it is first set up, and that is where its cost shows); for every
session: its wall-clock start and end. One JSON line each, in a file per process, so xdist workers
never write one file at once; each line is flushed, so a killed worker keeps what it measured."""
from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest

ENV = "PHONEBENCH_TEST_COSTS"


class CostRecorder:
    def __init__(self, folder: Path, worker: str, *, tests: bool) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.worker = worker
        self.tests = tests  # False on an xdist controller: its workers record, relayed reports would count twice
        self.current: str | None = None
        self._out: IO[str] = open(folder / f"costs-{worker}-{os.getpid()}.jsonl", "a", encoding="utf-8")
        self._phases: dict[str, dict[str, float]] = {}
        self._outcomes: dict[str, str] = {}
        self._session_start = time.time()

    def write(self, row: dict[str, Any]) -> None:
        self._out.write(json.dumps({**row, "worker": self.worker}) + "\n")
        self._out.flush()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
                             ) -> Generator[None, None, None]:
        start = time.perf_counter()
        yield
        if self.tests:
            self.write({"kind": "fixture", "name": fixturedef.argname, "scope": fixturedef.scope,
                        "test": request.node.nodeid, "seconds": time.perf_counter() - start})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        self.current = item.nodeid
        yield
        self.current = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, Any, None]:
        outcome = yield
        fixtures = tuple(getattr(item, "fixturenames", ()))
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            fixtures += ("<hypothesis>",)
        outcome.get_result().phonebench_fixtures = fixtures

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.tests:
            return
        phases = self._phases.setdefault(report.nodeid, {})
        phases[report.when] = report.duration
        if report.failed:  # the worst phase is the test's outcome (a failed call, an error in set-up)
            self._outcomes[report.nodeid] = "failed" if report.when == "call" else "error"
        elif report.skipped:
            self._outcomes.setdefault(report.nodeid, "skipped")
        if report.when == "teardown":
            self._phases.pop(report.nodeid)
            outcome = self._outcomes.pop(report.nodeid, "passed")
            self.write({"kind": "test", "test": report.nodeid, "outcome": outcome,
                        "fixtures": sorted(getattr(report, "phonebench_fixtures", ())), **phases})

    def child(self, args: Any) -> None:
        if self.tests and self.current is not None:
            argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
            self.write({"kind": "child", "test": self.current, "argv": [os.fspath(a) for a in argv[:8]]})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write({"kind": "session", "start": self._session_start, "end": time.time(),
                    "exitstatus": int(exitstatus), "tests": self.tests})

    def close(self) -> None:
        self._out.close()


def _watch_children(recorder: CostRecorder) -> None:
    """Note each process a test starts (the cost of a whole `bench run` is its test's; this says which)."""
    original = subprocess.Popen.__init__

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        recorder.child(args)
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]


def record_costs(config: pytest.Config) -> None:
    folder = os.environ.get(ENV)
    if not folder:
        return
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    controller = worker == "main" and bool(config.getoption("numprocesses", None))
    recorder = CostRecorder(Path(folder), worker, tests=not controller)
    config.pluginmanager.register(recorder, "phonebench-test-costs")
    config.add_cleanup(recorder.close)
    if not controller:
        _watch_children(recorder)
