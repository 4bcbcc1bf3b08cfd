"""Test tiers. Every test here is `unit` (pure code, no server, no subprocess), `integration`
(real protocol servers on loopback, the stock adb client, a database, a browser) or also `slow`
(whole bench runs, production-line batches, soaks). `make test-fast` runs `-m "not slow"`;
`make test` runs everything. The tier of a module is declared here, in one place."""
from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import zlib
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import pytest

from phonebench.core.threads import one_blas_thread
from phonebench.drivers.adb_binary import find_adb

ADB = find_adb()

SLOW = {
    "test_acceptance_e2e", "test_acceptance_checks", "test_bench_run", "test_calibration_plugin", "test_line",
    "test_dialog_hil", "test_sla_instruments", "test_report_browser", "test_store_postgres",
    "test_calibration_postgres", "test_stock_adb", "test_lab", "test_bays", "test_fingerprint", "test_runtime_sla_emulation",
    "test_ab_emulated",  # bench ab / bench bisect through the emulated station: real installs and segments
    "test_sla_runtime", "test_fixture_hooks", "test_llamacpp_emulated", "test_calibration_procedures",
    "test_operator_page", "test_user_errors_run", "test_example_lab", "test_labtime_plan",
    # real adb servers, subprocess bench runs, whole emulated soaks: seconds each
    "test_adb_driver", "test_recovery_plugin", "test_token_evidence", "test_safety_evidence",
    "test_llamacpp_real", "test_adapters", "test_fault_catalogue_process", "test_lab_path", "test_plain_pytest",
    "test_phone_locks", "test_emulated_mix_run", "test_unattended", "test_killed_runs",
    "test_tokens_checked", "test_first_contact", "test_mobly", "test_cross_wired",
    # many processes on one store at once (SQLite and PostgreSQL)
    "test_store_concurrency",
    # seeded Monte-Carlo coverage studies, fuzzing, the reference model against the published one
    "test_run_coverage", "test_fuzz_parsers", "test_reference_model",
    # a forger per class against the honest phone, on both transports: whole emulated checks
    "test_forgers",
    # a store's chain under many writers and on PostgreSQL; the operator page and the line with a
    # real emulated fixture; progress of real bench runs; the voice onsets against every persona
    "test_store_chain", "test_operator_auth", "test_progress_lines", "test_onset_truth",
    # planted rescue files against real bays runs, a run into PostgreSQL searched for its password
    "test_host_security",
    # bench runs of thermal claims in an emulated chamber, a door opened mid-run
    "test_chamber_runs",
    # emulated nights and release runs in rooms of different ambients (issue 49)
    "test_nightly_room", "test_release_ambients",
}
INTEGRATION = SLOW | {
    "test_adapters", "test_adb_driver", "test_adbd", "test_merkle", "test_power", "test_scope", "test_stimulus",
    "test_store", "test_thermal", "test_scpi_server", "test_instrument_sim", "test_runtime_client",
    "test_world", "test_report", "test_matrix", "test_labtime", "test_fault_catalogue", "test_daq970a", "test_locks",
    "test_preflight", "test_fixture_controller", "test_aggregate", "test_conformance", "test_third_party_drivers",
    "test_heal", "test_emulated_otii", "test_otii_driver", "test_chamber", "test_chamber_hold", "test_phone_bytes",
    "test_install", "test_night_seeds",
}


# Modules that must run by themselves (`make test` runs them first, alone): their tests start a
# host's worth of processes on one store at once, or kill whole runs at seeded points and wait for
# what the killed run left behind (its emulated station, its lock) to be cleaned up.
ALONE = {"test_store_concurrency", "test_killed_runs"}
# Modules of whole A/Bs and bisections through the emulated fleet (tens of lab minutes each, near as
# many wall minutes on two cores): `make test-long`, not `make test` (docs/testing.md).
LONG = {"test_ab_emulated"}

# Each module's measured seconds (benchmarks/bench_test_suite.py --write-order): the costliest run
# first, so the last module a worker starts is a short one. A module not listed counts by its tier.
MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")
TIER_SECONDS = {"slow": 60.0, "integration": 10.0, "unit": 2.0}


def pytest_configure(config: pytest.Config) -> None:
    from tests.costs_plugin import record_costs

    record_costs(config)  # where the time goes, only when asked (benchmarks/bench_test_suite.py)
    one_blas_thread()  # make test leaves the plugin out, whose configure would do it (core/threads.py)
    if not config.pluginmanager.has_plugin("phonebench"):  # make test leaves it out (-p no:phonebench)
        from phonebench.fixtures.collection import MARKERS

        for name, text in MARKERS.items():  # the suites some tests import still name its markers
            config.addinivalue_line("markers", f"{name}: {text}")


# Modules split over several workers (name -> parts): their tests share nothing costly (each
# drives its own emulated phone), and whole they would be the last worker's long tail.
SPLIT = {"test_forgers": 4}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = _module(item)
        if module in SLOW:
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.integration if module in INTEGRATION else pytest.mark.unit)
        if module in ALONE:
            item.add_marker(pytest.mark.alone)
        if module in LONG:
            item.add_marker(pytest.mark.long)
    items.sort(key=lambda item: -_unit_cost(item))  # stable: a module's own tests keep their order


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """make test's unit of work on a worker: a test module, or a part of a split one (SPLIT),
    handed out in collection order (costliest first). xdist's own loadfile cannot split a module,
    and its loadgroup marks do not reach node ids under pytest 9."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            parts = SPLIT.get(Path(path).stem)
            return f"{path}#{zlib.crc32(nodeid.encode()) % parts}" if parts else path

    return ModuleScheduling(config, log)


def _module(item: pytest.Item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""


def _unit_cost(item: pytest.Item) -> float:
    module = _module(item)
    measured = _measured_seconds().get(module)
    if measured is None:
        measured = TIER_SECONDS["slow" if module in SLOW else "integration" if module in INTEGRATION else "unit"]
    return measured / SPLIT.get(module, 1)


@functools.cache
def _measured_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(MODULE_SECONDS.read_text()).items()}
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="session", autouse=True)
def lock_folder_of_this_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each process of the suite (an xdist worker, or the one process of a serial run) has its own
    lock folder, inherited by every bench it starts: two workers never see each other's locks (the
    host-wide folder a lab's benches share is tested where a test sets it). Its adb server port is
    its own too (below); its files are under its own tmp_path."""
    if os.environ.get("PHONEBENCH_LOCK_DIR"):
        yield  # the caller chose one
        return
    folder = tmp_path_factory.getbasetemp() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["PHONEBENCH_LOCK_DIR"] = str(folder)
    try:
        yield
    finally:
        os.environ.pop("PHONEBENCH_LOCK_DIR", None)


@pytest.fixture(scope="session", autouse=True)
def private_default_adb_server() -> Iterator[None]:
    """The project's tests never share the user's (or a lab's) adb server on 5037: the benches they
    start reach their phones through a server of their own on a free port (started on first use,
    as a bench starts a missing server), killed at the end. A `make run` or a lab's nightly on the
    same host keeps its server; Debian's adb 29 aborts under a burst of connects from both."""
    if "ANDROID_ADB_SERVER_PORT" in os.environ or "ADB_SERVER_SOCKET" in os.environ:
        yield  # the caller chose a server
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
    try:
        yield
    finally:
        os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
        if ADB is not None:
            subprocess.run([ADB.path, "-P", str(port), "kill-server"], capture_output=True, timeout=30,
                           stdin=subprocess.DEVNULL, check=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line at the end: the tests skipped for a missing Debian package, and the install command."""
    from tests.system_packages import INSTALL, package_of

    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
        package = package_of(text)
        if package is not None:
            counts[package] = counts.get(package, 0) + 1
    if counts:
        listed = ", ".join(f"{p} ({n} tests)" for p, n in sorted(counts.items()))
        install = " ".join(INSTALL[p] for p in sorted(counts))
        terminalreporter.write_line(f"skipped for missing system packages: {listed}; install them with "
                                    f"`sudo apt-get install {install}` (or `make system-deps` as root)", yellow=True)


@pytest.fixture(autouse=True)
def no_instrument_lock_left_behind() -> Iterator[None]:
    """A test that leaves an instrument or phone lock held in this process fails: the lock outlives
    it, and a later bench on the same address (an emulator reusing the port) finds it busy."""
    from phonebench.drivers import locks

    before = set(locks._held)
    yield
    left = sorted(set(locks._held) - before)
    if left:
        for address in left:  # release, so one leak does not fail every later test too
            held = locks._held.pop(address)
            os.close(held.fd)
        pytest.fail(f"lock(s) left held after the test: {', '.join(left)} (a driver or phone not closed)")
