"""One fixture of the operator station, in its own process: an AcceptanceStation (on a station
file's DUT, or on an emulated line's fixture) that accepts scanned serials one at a time and
reports progress and results as plain dicts on a queue."""
from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
from multiprocessing.process import BaseProcess
import os
import signal
import tempfile
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from phonebench.core.errors import ConfigError

if TYPE_CHECKING:  # the station and the line are imported where they start (in the fixture's process)
    from multiprocessing.queues import Queue

    from ..procedures.acceptance.runner import AcceptanceStation
    from ..station.backend import EmulatedLine
    from .progress import Send

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmulatedUnits:
    """An emulated line behind the fixture: the units an operator can place on it."""

    count: int = 20
    faulty: int = 2
    seed: int = 7
    faults: tuple[str, ...] = ()
    serial_format: str = "LN{seed:02d}{n:04d}"


@dataclass(frozen=True)
class FixtureSpec:
    name: str
    results_dir: Path
    station_file: Path | None = None  # a real station's file (with dut), or None with `emulated`
    dut: str | None = None
    emulated: EmulatedUnits | None = None
    calibration_config: str | None = None
    retries: int = 1  # retests a unit gets (the retest policy): the acceptance run's own, then the operator's
    retestable: tuple[str, ...] | None = None
    profile: str = "acceptance"
    batch: str | None = None
    operator: str = ""  # who started the page: the start-up calibration's record; each unit names its own
    options: dict[str, Any] = field(default_factory=dict)


def start_fixture(spec: FixtureSpec, events: Queue[dict[str, Any]]) -> tuple[BaseProcess, Queue[dict[str, Any]]]:
    """The fixture's process and its command queue; it posts {"fixture": name, "event": ...} to `events`."""
    ctx = mp.get_context("spawn")  # a clean interpreter: no server threads or sockets inherited
    commands = ctx.Queue()
    process = ctx.Process(target=_main, args=(spec, commands, events), name=f"fixture-{spec.name}", daemon=True)
    process.start()
    return process, commands


def _stop_with_the_station() -> None:
    """SIGTERM ends this worker as Ctrl-C ends `bench accept` (its emulated line stops listening,
    an attempt under way is stored incomplete); SIGINT is the station's to handle (it stops every
    worker); a station process that dies without stopping it ends it too."""
    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = mp.parent_process()
    if parent is not None:
        def watch(station: BaseProcess) -> None:
            station.join()
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, args=(parent,), name="station-watch", daemon=True).start()


def _main(spec: FixtureSpec, commands: Queue[dict[str, Any]], events: Queue[dict[str, Any]]) -> None:
    def send(event: dict[str, Any]) -> None:
        events.put({"fixture": spec.name, **event})

    _stop_with_the_station()
    try:
        with _station(spec, send) as (station, line):
            send({"event": "ready", "station": station.station.name, "dut": station.dut.name,
                  "units": [u.serial for u in line.units] if line is not None else []})
            while True:
                command = commands.get()
                if command.get("action") == "stop":
                    return
                operator = str(command.get("operator") or "")  # the page's signed-in operator
                if command.get("action") == "accept":
                    _accept(station, line, str(command["serial"]), send, operator)
                elif command.get("action") == "repair":
                    station.attempts.dispose(str(command["serial"]), station.station.name, "repair",
                                             operator=operator or station.operator)
                    send({"event": "disposed", "serial": command["serial"], "disposition": "repair"})
    except KeyboardInterrupt:
        log.info("fixture %s: stopped by a signal", spec.name)
    except Exception as exc:  # the page must say why the fixture is down, not just go quiet
        log.error("fixture %s stopped: %s", spec.name, exc)
        send({"event": "down", "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0]}",
              "trace": traceback.format_exc(limit=3)})


@contextlib.contextmanager
def _station(spec: FixtureSpec, send: Send) -> Iterator[tuple[AcceptanceStation, EmulatedLine | None]]:
    from ..procedures.acceptance.disposition import RetestPolicy
    from ..procedures.acceptance.runner import AcceptanceStation
    from .progress import ProgressReporter

    policy = RetestPolicy(retries=spec.retries) if spec.retestable is None else \
        RetestPolicy(retries=spec.retries, retestable=frozenset(spec.retestable))
    with contextlib.ExitStack() as stack:
        line = None
        station_file = spec.station_file
        if spec.emulated is not None:
            from ..station.backend import emulated_line

            e = spec.emulated
            line = stack.enter_context(emulated_line(count=e.count, faulty=e.faulty, seed=e.seed,
                                                     **({"faults": e.faults} if e.faults else {}),
                                                     name=f"emulated-line-{spec.name}", serial_format=e.serial_format))
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"phonebench-{spec.name}-")))
            station_file = line.write_station(folder / "fixture.toml", results_dir=spec.results_dir)
        if station_file is None:
            raise ConfigError(f"fixture {spec.name}: neither a station file nor emulated units")
        station = stack.enter_context(AcceptanceStation(
            station_file, dut=spec.dut, results_dir=spec.results_dir, calibration_config=spec.calibration_config,
            policy=policy, operator=spec.operator, batch=spec.batch, profile=spec.profile,
            observers=(ProgressReporter(send),)))
        if line is not None and station.check_calibration():
            from ..procedures.calibration.runner import calibrate_station
            from ..procedures.calibration.settings import load_settings

            send({"event": "calibrating"})
            calibrate_station(station.station, None, load_settings(spec.calibration_config),
                              operator=station.operator, results_dir=spec.results_dir)
        yield station, line


def _accept(station: AcceptanceStation, line: EmulatedLine | None, serial: str, send: Send, operator: str) -> None:
    if line is not None:  # the operator places the unit with this serial (an unknown one: the last stays)
        unit = next((u for u in line.units if u.serial == serial), None)
        if unit is not None:
            line.load(unit)
        elif line.phone is None:
            line.load(line.units[0])
    send({"event": "started", "serial": serial, "operator": operator or None})
    result = station.accept(serial, operator=operator or None)
    deciding = next((f for f in result.failures if f.kind == result.outcome), None)
    send({"event": "result", "serial": serial, "outcome": result.outcome, "reason": result.reason,
          "plain": deciding.plain_text() if deciding is not None else result.reason,
          "attempts": len(result.attempts), "cycle_s": result.cycle_s, "takt_s": result.takt_s,
          "failures": [{"check": f.check, "words": f.words, "reason": f.reason, "kind": f.kind,
                        "plain": f.plain, "not_run": f.not_run} for f in result.failures],
          "first_pass": result.first_pass, "operator": operator or None,
          "run_id": result.attempts[-1].run_id if result.attempts else None})
