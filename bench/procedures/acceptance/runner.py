"""One production acceptance of one scanned unit on a station: refuse to start on an
uncalibrated station, stop on a wrong or unreadable serial, run the acceptance profile as a
pytest run (results.json, report, store), decide its disposition, retest what the policy allows, and keep
every attempt in the store.

    station = AcceptanceStation("line1.toml")
    result = station.accept("R5CT1234")        # -> UnitResult; result.exit_code for automation
"""
from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from phonebench.core.paths import data_dir
from ...store import StoreError
from .attempts import FAIL, INCOMPLETE, PASS, REFUSED, WRONG_UNIT, AttemptBook
from .takt import StopOnFault
from .disposition import Failure, Disposition, RetestPolicy, disposition_of, merge_retest
from ..calibration.book import CalibrationBook
from ..calibration.settings import load_settings
from ..calibration.state import REFUSED_EXIT, UNREADABLE_EXIT
from ..calibration.station import evaluate
from phonebench.core.errors import BenchError, ConfigError
from ...results.run_record import new_run_id
from phonebench.core.station import DutConfig, StationConfig, load_station
from ...station.waits import WaitMeter

log = logging.getLogger(__name__)

SUITES_DIR = data_dir("suites")
# The acceptance profile's tests, in the takt plan's order: identity first (cheap, and every
# result needs it), the numerics' fingerprint and adapter checks (seconds, and they catch an
# erratic NPU), then the acceptance suite (serial, DUT calibration, weights, then the long
# sequential measurements), so a faulty unit fails as early as its fault shows.
SUITES = ("suites/test_identity.py", "suites/test_numerics.py", "suites/test_acceptance.py")
DESELECT = ("suites/test_numerics.py::test_llamacpp_throughput",)  # a lab benchmark, not a line check
def held(detail: str) -> str:
    """Why a unit is held (not refused) when the calibration records cannot be read."""
    return f"held, not tested: the calibration records could not be read ({detail}); fix the results store, " \
           "then scan the unit again"


EXIT_CODES = {PASS: 0, FAIL: 1, WRONG_UNIT: 3, INCOMPLETE: 4, REFUSED: 5}
SERIAL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{2,39}$")


@dataclass
class AttemptResult:
    attempt: int
    outcome: str
    reason: str | None
    failures: list[Failure] = field(default_factory=list)
    run_id: str | None = None
    run_dir: Path | None = None
    cycle_s: float = 0.0
    overhead_s: float | None = None
    waits_s: float | None = None
    tests: list[str] = field(default_factory=list)  # what ran: suites, or the retested node ids
    disposition: Disposition | None = None
    not_run: list[str] = field(default_factory=list)  # tests the run stopped before (at a failure)


@dataclass
class UnitResult:
    serial: str
    outcome: str
    reason: str | None
    attempts: list[AttemptResult]
    cycle_s: float
    overhead_s: float | None
    takt_s: float | None = None
    read_serial: str | None = None

    @property
    def first_pass(self) -> bool:
        return bool(self.attempts) and self.attempts[0].outcome == PASS

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    @property
    def failures(self) -> list[Failure]:
        return self.attempts[-1].failures if self.attempts else []

    @property
    def report(self) -> Path | None:
        folder = next((a.run_dir for a in reversed(self.attempts) if a.run_dir is not None), None)
        return folder / "report.html" if folder is not None else None


class AcceptanceStation:
    def __init__(self, station_file: str | Path, *, dut: str | None = None, results_dir: str | Path | None = None,
                 calibration_config: str | Path | None = None, policy: RetestPolicy = RetestPolicy(),
                 operator: str = "", batch: str | None = None, profile: str = "acceptance",
                 observers: tuple[Any, ...] = ()) -> None:
        from ...store import open_store, resolve_database_url

        self.observers = tuple(observers)  # pytest plugin objects that watch each run (live progress)
        self.station_file = Path(station_file)
        self.station: StationConfig = load_station(self.station_file)
        if self.station.emulated is not None:
            raise ConfigError(f"{self.station_file}: an acceptance station needs a fixed fixture, not [emulated]",
                              hint="run `bench emulate --write-station FILE` and accept against FILE, "
                                   "or run `bench accept` without --station")
        self.dut = self._pick_dut(dut)
        self.results_dir = Path(results_dir) if results_dir is not None else self.station.results_dir
        self.calibration_config = calibration_config
        self.settings = load_settings(calibration_config)
        self.policy = policy
        self.operator = operator or self.settings.operator_name()
        self.batch = batch
        self.profile = profile
        self.store = open_store(resolve_database_url(self.station.database, self.results_dir))
        self.attempts = AttemptBook(self.store)
        self.book = CalibrationBook(self.store)
        self.meter = WaitMeter()

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> AcceptanceStation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pick_dut(self, name: str | None) -> DutConfig:
        if name is not None:
            return self.station.dut(name)
        if len(self.station.duts) != 1:
            names = ", ".join(d.name for d in self.station.duts)
            raise ConfigError(f"station {self.station.name!r} has {len(self.station.duts)} DUTs",
                              hint=f"pass --dut with the fixture to test: {names}")
        return self.station.duts[0]

    # --- before any test ------------------------------------------------------------------
    def check_calibration(self) -> list[str]:
        """Problems that forbid an acceptance run (an empty list: every instrument is calibrated)."""
        from ...station.owner import StationOwner

        identities, problems = {}, []
        with StationOwner(self.station) as owner:
            for role, cfg in self.station.instruments.items():
                try:
                    identities[role] = owner.identity(role)
                except BenchError as exc:
                    problems.append(f"{role} at {cfg.address} cannot be reached to check its calibration: "
                                    f"{str(exc).splitlines()[0]}")
        state = evaluate(self.book, self.station.name, identities, self.settings, self.station.location)
        return problems + state.problems()

    def read_serial(self) -> str:
        """ro.serialno of the unit on the fixture (BenchError if it cannot be read)."""
        from ...station.owner import StationOwner

        with StationOwner(self.station) as owner, owner.connected(self.dut.name, connect_timeout_s=5.0) as phone:
            serial = phone.getprop("ro.serialno").strip()
        if not SERIAL.match(serial):
            raise BenchError(f"{self.dut.name} at {self.dut.address}: the phone reports serial {serial!r}",
                             hint="the unit's identity is unreadable: check its provisioning")
        return serial

    # --- one unit --------------------------------------------------------------------------
    def accept(self, scanned: str, *, operator: str | None = None) -> UnitResult:
        """One scanned unit; `operator` is who scanned it (the operator page's signed-in name),
        recorded on its attempts instead of the station's own."""
        scanned = scanned.strip()
        started = time.perf_counter()
        station_operator = self.operator
        if operator:
            self.operator = operator
        try:
            with self.meter:
                waits_before = self.meter.totals().any_s
                result = self._accept(scanned, started)
                waits = self.meter.totals().any_s - waits_before
        finally:
            self.operator = station_operator
        result.cycle_s = time.perf_counter() - started
        result.overhead_s = max(0.0, result.cycle_s - waits)
        result.takt_s = self.attempts.takt_s(self.station.name)
        return result

    def _stopped(self, scanned: str, outcome: str, reason: str, started: float,
                 read_serial: str | None = None) -> UnitResult:
        """An attempt that ends before any test: stored, shown, never a pass."""
        stored = self.attempts.record(scanned, outcome, reason, station=self.station.name, batch=self.batch,
                                      read_serial=read_serial, operator=self.operator)
        attempt = AttemptResult(stored.attempt, outcome, reason,
                                [Failure("preflight", "Before testing", reason, outcome)],
                                cycle_s=time.perf_counter() - started)
        log.info("unit %s: %s (%s)", scanned, outcome, reason)
        return UnitResult(scanned, outcome, reason, [attempt], attempt.cycle_s, None, read_serial=read_serial)

    def _accept(self, scanned: str, started: float) -> UnitResult:
        if not SERIAL.match(scanned):
            return self._stopped(scanned or "(empty)", INCOMPLETE,
                                 f"scanned serial {scanned!r} is unreadable (expected 3-40 letters, digits, . _ -)",
                                 started)
        try:
            problems = self.check_calibration()
        except StoreError as exc:  # the store, not the station: the unit is held, never refused as uncalibrated
            return self._stopped(scanned, INCOMPLETE, held(str(exc).splitlines()[0]), started)
        if problems:
            return self._stopped(scanned, REFUSED, "; ".join(problems), started)
        try:
            read = self.read_serial()
        except BenchError as exc:
            return self._stopped(scanned, INCOMPLETE, f"serial unreadable: {str(exc).splitlines()[0]}", started)
        if read != scanned:
            return self._stopped(scanned, WRONG_UNIT, f"the phone on the fixture is {read}, not the scanned "
                                                      f"{scanned}: wrong unit on the fixture", started, read)
        attempts: list[AttemptResult] = []
        data: dict[str, Any] | None = None
        targets: list[str] = list(SUITES)
        retest_of: int | None = None
        while True:
            attempt, data = self._attempt(scanned, read, targets, data, retest_of)
            attempts.append(attempt)
            retests = (attempt.disposition.retest_nodeids(self.policy, attempt.not_run)
                       if attempt.disposition is not None else [])
            if not retests or len(attempts) > self.policy.retries:
                break
            targets, retest_of = retests, attempt.attempt
            log.info("unit %s: retesting %s", scanned, ", ".join(retests))
        last = attempts[-1]
        return UnitResult(scanned, last.outcome, last.reason, attempts, 0.0, None, read_serial=read)

    def _attempt(self, serial: str, read: str, targets: list[str], previous: dict[str, Any] | None,
                 retest_of: int | None) -> tuple[AttemptResult, dict[str, Any] | None]:
        t0 = time.perf_counter()
        waits0 = self.meter.totals().any_s
        policy = {"retries": self.policy.retries, "retestable": sorted(self.policy.retestable)}
        record = self.attempts.start(serial, station=self.station.name, batch=self.batch, retest_of=retest_of,
                                     operator=self.operator, details={"tests": targets, "policy": policy})
        run_id = new_run_id()
        run_dir = self.results_dir / run_id
        self.attempts.update(record, run_id=run_id, read_serial=read)
        try:
            code, data, not_run = self._run(serial, run_id, run_dir, targets)
        except KeyboardInterrupt:
            self.attempts.finish(record, INCOMPLETE, "interrupted by the operator", failing=[],
                                 cycle_s=time.perf_counter() - t0, overhead_s=None)
            raise
        merged = merge_retest(previous, data) if previous is not None and data is not None else data
        disposition = disposition_of(merged)
        outcome, reason = disposition.outcome, disposition.reason
        if code == REFUSED_EXIT:
            outcome, reason = REFUSED, "the run refused to start: calibration not current (see pytest.log)"
        elif code == UNREADABLE_EXIT:  # the store, not the station: hold the unit, never call it uncalibrated
            outcome, reason = INCOMPLETE, held("see pytest.log")
        cycle = time.perf_counter() - t0
        overhead = max(0.0, cycle - (self.meter.totals().any_s - waits0))
        self.attempts.finish(record, outcome, reason, failing=[f.to_dict() for f in disposition.failures],
                             cycle_s=cycle, overhead_s=overhead,
                             details={"passed_checks": disposition.passed, "pytest_exit": int(code)})
        attempt = AttemptResult(record.attempt, outcome, reason, disposition.failures, run_id, run_dir, cycle, overhead,
                                cycle - overhead, list(targets), disposition, not_run)
        log.info("unit %s attempt %d: %s in %.2f s (bench overhead %.2f s)", serial, record.attempt, outcome, cycle,
                 overhead)
        return attempt, merged

    def _run(self, serial: str, run_id: str, run_dir: Path,
             targets: list[str]) -> tuple[int, dict[str, Any] | None, list[str]]:
        """The acceptance tests as one pytest run (in this process), stopped at the first failure;
        its output goes to pytest.log. Returns the exit code, the results and the tests not run."""
        run_dir.mkdir(parents=True, exist_ok=True)
        # no:unraisableexception: its gc.collect() at the end costs the line 0.2 s of takt per unit.
        args = [*(_absolute(t) for t in targets), "-p", "phonebench", "--rootdir", str(SUITES_DIR.parent),
                "-p", "no:cacheprovider", "-p", "no:unraisableexception", "-p", "no:labgrid", "-m", "acceptance",
                "--station", str(self.station_file), "--dut", self.dut.name,
                "--results-dir", str(self.results_dir), "--run-id", run_id,
                "--junitxml", str(run_dir / "junit.xml"), "-o", "junit_family=xunit2", "-q",
                "--require-calibration", "--scanned-serial", serial, "--acceptance-profile", self.profile]
        for nodeid in DESELECT:
            args += ["--deselect", nodeid]
        if self.calibration_config:
            args += ["--calibration-config", str(self.calibration_config)]
        with open(run_dir / "pytest.log", "w", encoding="utf-8") as out, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            stop = StopOnFault()
            code = pytest.main(args, plugins=[*self.observers, stop])
        results = run_dir / "results.json"
        try:
            return int(code), json.loads(results.read_text(encoding="utf-8")), _relative(stop.not_run)
        except (OSError, json.JSONDecodeError) as exc:
            log.error("unit %s: no usable results in %s (%s); pytest exit %s", serial, run_dir, exc, int(code))
            return int(code), None, []


def _relative(nodeids: list[str]) -> list[str]:
    """Node ids as the retest targets name them (relative to the suites' root)."""
    return [n for n in nodeids if n.startswith("suites/")]


def _absolute(target: str) -> str:
    path, sep, rest = target.partition("::")
    return str(SUITES_DIR.parent / path) + sep + rest
