"""An in-process Device (phonebench.drivers.device protocol) over an EmulatedPhone: no ADB, same shell.

Output is merged like ADB shell v1 (stdout then stderr). Also a pytest plugin so the HIL
numerics suite runs against in-process phones without the station:

    python -m pytest -p tests.device_double suites/test_numerics.py --double-persona SM8650-ES

(the `dut`, `runtime` and `record` fixtures here stand in for the phonebench plugin's).
"""
from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

from phonebench.bench.specs.sla import SlaProfile, load_profile
from phonebench.core.station import DutConfig
from phonebench.core.verdict import Verdict
from phonebench.core.judge import compare
from phonebench.drivers.adb import timed_lines
from phonebench.drivers.device import ShellResult, TimedShellResult
from phonebench.emulation.device import EmulatedPhone
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.npu_personas import default_fleet, phone_spec
from phonebench.drivers.runtime import RuntimeClient
from phonebench.fixtures.collection import MARKERS
from phonebench.fixtures.phones import with_capabilities
from phonebench.fixtures.verdicts import Record

PushHook = Callable[[str, bytes], bytes]


class PhoneDevice:
    """Device protocol over an in-process EmulatedPhone. `push_hook` may alter pushed bytes
    (fault injection: a corrupted transfer); `log` keeps every command sent."""

    def __init__(self, phone: EmulatedPhone, name: str | None = None, push_hook: PushHook | None = None) -> None:
        self.phone = phone
        self.name = name or phone.spec.serial
        self.push_hook = push_hook
        self.log: list[str] = []

    def shell(self, command: str | Sequence[str], timeout_s: float | None = None) -> ShellResult:
        line = command if isinstance(command, str) else " ".join(shlex.quote(a) for a in command)
        self.log.append(line)
        result = self.phone.shell.execute(line)
        output = (result.stdout + result.stderr).decode("utf-8", errors="replace")
        return ShellResult(self.name, line, output, result.status)

    def shell_timed(self, command: str | Sequence[str], clock: Callable[[], float],
                    timeout_s: float | None = None) -> TimedShellResult:
        """shell() streaming: each chunk a command emits is stamped with `clock` as it comes out."""
        line = command if isinstance(command, str) else " ".join(shlex.quote(a) for a in command)
        self.log.append(line)
        chunks: list[tuple[float, bytes]] = []
        sent_t = clock()
        result = self.phone.shell.execute(line, sink=lambda data: chunks.append((clock(), data)), merge_stderr=True)
        if result.stdout or result.stderr:
            chunks.append((clock(), result.stdout + result.stderr))
        output = b"".join(c for _, c in chunks).decode("utf-8", errors="replace")
        return TimedShellResult(self.name, line, output, result.status, sent_t=sent_t,
                                lines=timed_lines(chunks))

    def run(self, command: str | Sequence[str], timeout_s: float | None = None) -> str:
        return self.shell(command, timeout_s).check().output

    def push_bytes(self, data: bytes, remote: str, mode: int = 0o644) -> None:
        self.log.append(f"push {remote}")
        self.phone.fs.write(remote, self.push_hook(remote, data) if self.push_hook else data, mode)

    def pull_bytes(self, remote: str) -> bytes:
        return self.phone.fs.read(remote)

    def push(self, local: str | Path, remote: str) -> None:
        local = Path(local)
        self.push_bytes(local.read_bytes(), remote, local.stat().st_mode & 0o7777)

    def pull(self, remote: str, local: str | Path) -> None:
        Path(local).write_bytes(self.phone.fs.read(remote))

    def getprop(self, key: str) -> str:
        return self.phone.props.get(key, "")

    def close(self) -> None:
        pass


class WorldClock:
    """A station clock read in-process: the phone's world time, what the emulated time server answers."""

    name = "clock (in-process world)"
    resolution_s = 1e-6

    def __init__(self, device: PhoneDevice) -> None:
        self.world = device.phone.world

    def now(self) -> float:
        return self.world.clock.now()

    def close(self) -> None:
        pass


def make_device(persona: str, serial: str = "EMU-T1", **overrides: Any) -> PhoneDevice:
    return PhoneDevice(emulated_phone(phone_spec(persona, serial, **overrides)))


# --- pytest plugin: `-p tests.device_double` ---------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--double-persona", action="append", default=[],
                     help="in-process phone persona for the dut fixture (repeatable; default: the fleet)")
    parser.addoption("--double-fault", action="append", default=[], help="fault injected into each phone")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"capabilities: {MARKERS['capabilities']}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dut" in metafunc.fixturenames:
        personas = metafunc.config.getoption("--double-persona") or [s.npu_persona for s in default_fleet()]
        metafunc.parametrize("dut", personas, indirect=True, ids=personas)


@pytest.fixture(autouse=True, scope="session")
def development_station() -> Iterator[None]:
    """In-process emulated phones are a development station: it opts in to the development key."""
    from phonebench.core import signing

    with signing.trusting(None, development=True):
        yield


@pytest.fixture
def dut(request: pytest.FixtureRequest) -> PhoneDevice:
    faults = request.config.getoption("--double-fault")
    return make_device(request.param, f"EMU-{request.param}", faults=list(faults))


@pytest.fixture
def runtime(request: pytest.FixtureRequest, dut: PhoneDevice) -> RuntimeClient:
    """The plugin's `runtime`, its `capabilities` marker asked the same way."""
    return with_capabilities(request, RuntimeClient(dut))


@pytest.fixture
def clock(dut: PhoneDevice) -> WorldClock:
    """The station clock the plugin gives: here the phone's own world's, read in-process."""
    return WorldClock(dut)


class _Inventory:
    """The plugin's `station` as far as the suites ask it: no DUT declares an expected SoC."""

    def dut(self, name: str) -> Any:
        return DutConfig(name=name, address="in-process")


@pytest.fixture
def station() -> _Inventory:
    return _Inventory()


class _Record:
    """The phonebench plugin's `record`: verdicts and raw data; a failing verdict fails the test."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []
        self.raw_data: dict[str, Any] = {}

    def __call__(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        return verdict

    def check(self, name: str, value: float | None, unit: str, limit: float | None, comparator: str = "<=",
              **kwargs: Any) -> Verdict:
        return self(compare(name, value, unit, limit, comparator, **kwargs))

    judge = Record.judge  # the plugin's own: the profile's entry evaluated, then recorded here

    def raw(self, name: str, data: Any) -> str:
        self.raw_data[name] = data
        return f"raw/{name}"


@pytest.fixture
def record() -> _Record:
    return _Record()


@pytest.fixture
def sla() -> SlaProfile:
    """The plugin's `sla`: here the product's default profile."""
    return load_profile("default")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    result = yield
    rec = getattr(item, "funcargs", {}).get("record")
    failing = [v for v in rec.verdicts if not v.passed] if isinstance(rec, _Record) else []
    if failing:
        pytest.fail("verdicts failed:\n  " + "\n  ".join(f"{v.name}: {v.value} vs {v.comparator} {v.limit} "
                                                          f"[{v.explanation}]" for v in failing), pytrace=False)
    return result


@contextlib.contextmanager
def emulated_supplies() -> Iterator[Callable[[PhoneDevice], Any]]:
    """attach(device) -> an N6705C driver on an emulated analyzer in that phone's world; every
    server and driver is closed at exit."""
    from phonebench.drivers.power import KeysightN6705C
    from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer

    started: list[tuple[Any, Any]] = []

    def attach(device: PhoneDevice) -> Any:
        server = PowerAnalyzerServer(device.phone.world)
        server.start()
        supply = KeysightN6705C(server.address, timeout_s=5)
        started.append((server, supply))
        return supply

    try:
        yield attach
    finally:
        for server, supply in started:
            supply.close()
            server.stop()


@contextlib.contextmanager
def emulated_shield_probes() -> Iterator[Callable[[PhoneDevice], Any]]:
    """attach(device) -> a ShieldProbe over a DAQ970A driver on an emulated DAQ970A in that phone's
    world, wired as a thermal lab does: T1, T2 on the cover, T4 (channel 105) on the SoC's shield."""
    from phonebench.bench.checks.thermal_trip import instrument_shield
    from phonebench.drivers.daq970a import KeysightDaq970a
    from phonebench.emulation.instruments.daq970a import Daq970aServer

    started: list[tuple[Any, Any]] = []

    def attach(device: PhoneDevice) -> Any:
        server = Daq970aServer(device.phone.world)
        server.start()
        daq = KeysightDaq970a(server.address, channels={"T1": 101, "T2": 102, "T3": 103, "T4": 105})
        started.append((server, daq))
        return instrument_shield(daq, "T4")

    try:
        yield attach
    finally:
        for server, daq in started:
            daq.close()
            server.stop()
