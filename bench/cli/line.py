"""`bench calibrate`, `bench accept` and `bench line`: calibration records, production acceptance
of one scanned unit, and the emulated production line. Exit codes: docs/production.md."""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Iterator

from phonebench.core.errors import ConfigError, UsageError
from phonebench.core.files import UnsafePath, check_name
from . import Subcommands

if TYPE_CHECKING:  # the faces import what they run where they run it: `bench --help` stays quick
    from phonebench.core.station import StationConfig
    from phonebench.drivers.fixture import FixtureControl
    from phonebench.drivers.thermal import ThermalProbe
    from ..procedures.acceptance.disposition import RetestPolicy
    from ..procedures.acceptance.line import LineUnitResult
    from ..procedures.acceptance.runner import AcceptanceStation
    from ..procedures.calibration.book import CalibrationBook
    from ..procedures.calibration.procedures import Context
    from ..procedures.calibration.runner import Outcome
    from ..procedures.calibration.settings import CalibrationSettings
    from ..station.backend import EmulatedLine
    from ..station.owner import StationOwner

SERVE_STOP_GRACE_S = 5.0  # a stopped operator station lets a busy fixture finish this long, then stops it

# Exit codes: phonebench.bench.procedures.acceptance.EXIT_CODES (pass 0, fail 1, wrong unit 3, incomplete 4, not
# calibrated 5); 2 is any usage or setup error (phonebench.bench.cli).


def register(subparsers: Subcommands) -> None:
    c = subparsers.add_parser("calibrate", help="run calibration procedures and store their records")
    c.add_argument("--station", help="station file (TOML); default: the embedded emulated station")
    c.add_argument("--procedure", action="append", default=[],
                   help="procedure or group (repeatable): instruments (default), dut, all, scope-deskew, "
                        "fixture-delay, supply-zero, thermocouple-offsets, dut-ripple-onset, dut-skin-offset")
    c.add_argument("--dut", help="the DUT for dut procedures (default: the one the instruments are wired to)")
    c.add_argument("--status", action="store_true", help="only show the station's calibration state")
    c.add_argument("--bay", help="only this bay of a multi-bay station (default: every bay)")
    c.add_argument("--unattended", action="store_true",
                   help="ask nobody: a relay board (or wiring done beforehand) sets the fixture's loopbacks "
                        "(also `unattended = true` in the calibration settings); without a terminal, "
                        "fixture steps need this")
    _common(c)
    c.set_defaults(func=calibrate)

    a = subparsers.add_parser("accept", help="production acceptance of one scanned unit: PASS / FAIL")
    a.add_argument("--serial", required=True, help="the serial the operator scanned")
    a.add_argument("--station", help="station file (TOML); default: an emulated fixture with unit EMU0001")
    a.add_argument("--dut", help="the fixture's DUT name, if the station has several")
    _acceptance_args(a)
    _common(a)
    a.set_defaults(func=accept)

    line = subparsers.add_parser("line", help="an emulated production line: N phones back to back; "
                                              "`bench line serve`: the operator station in a browser; "
                                              "`bench line operators add|remove|list`: who may sign in to it")
    line.add_argument("mode", nargs="?", choices=("batch", "serve", "operators"), default="batch",
                      help="batch (default): the emulated batch; serve: the operator page; "
                           "operators: add NAME, remove NAME or list the page's operators")
    line.add_argument("words", nargs="*", metavar="add|remove|list NAME", help="operators: what to do, to whom")
    line.add_argument("--station", help="serve: the station file (one fixture per DUT); "
                                        "default: emulated fixtures")
    line.add_argument("--fixtures", type=int, default=None,
                      help="emulated fixtures side by side (default: 1 for a batch, 2 for serve)")
    line.add_argument("--share", default="scope",
                      help="batch with several fixtures: instrument roles the fixtures share, booked between "
                           "them (comma-separated; default scope; '' for none)")
    line.add_argument("--host", default="127.0.0.1", help="serve: address to listen on (default loopback only)")
    line.add_argument("--port", type=int, default=8080, help="serve: port (default 8080; 0 = any free one)")
    line.add_argument("--operators", metavar="FILE",
                      help="serve, operators: the operators file (names and password hashes, mode 0600; "
                           "default $PHONEBENCH_OPERATORS, else ~/.config/phonebench/operators.json)")
    line.add_argument("--tls-cert", metavar="PEM", help="serve: the page's TLS certificate (chain)")
    line.add_argument("--tls-key", metavar="PEM", help="serve: the certificate's private key")
    line.add_argument("--insecure-http-on-network", action="store_true",
                      help="serve: allow plain HTTP on a --host that is not loopback (warned at start and on "
                           "the page: passwords and sessions cross the network readable)")
    line.add_argument("--password-stdin", action="store_true",
                      help="operators add: read the password from stdin's first line (never from the command line)")
    line.add_argument("--count", type=int, default=20, help="units in the batch (default 20)")
    line.add_argument("--faulty", type=int, default=2, help="how many of them are faulty (default 2)")
    line.add_argument("--seed", type=int, default=7, help="which units are faulty, and the units' own seeds")
    line.add_argument("--faults", default=",".join(_default_faults()),
                      help="fault kinds given to the faulty units in turn (phonebench.emulation.line.FAULT_KINDS)")
    line.add_argument("--no-calibrate", action="store_true",
                      help="do not calibrate the line's instruments first (acceptance then refuses if they are not)")
    _acceptance_args(line)
    _common(line)
    line.set_defaults(func=run_line)


def _default_faults() -> tuple[str, ...]:
    from ..station.backend import default_line_faults

    return default_line_faults()


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir", help="run folders and the default store go here (default: the station's)")
    p.add_argument("--calibration-config", help="calibration settings TOML (default $PHONEBENCH_CALIBRATION)")
    p.add_argument("--operator", default="", help="who runs the station (recorded; default $USER); the operator "
                                                  "page records each unit with the signed-in operator instead")


def _acceptance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retries", type=int, default=1, help="retests allowed after a failed attempt (default 1)")
    p.add_argument("--retest", default=None,
                   help="checks that may be retested, comma-separated (default: latency,power,redundancy)")
    p.add_argument("--profile", default="acceptance", help="acceptance SLA profile (default: acceptance)")
    p.add_argument("--batch", help="a batch / lot id stored with every attempt")


def _batch(args: argparse.Namespace) -> str | None:
    """`bench line`'s --batch, which names the batch's folder under the results: a plain name or a
    usage error (`bench accept` and `serve` only store it with the attempts)."""
    if args.batch is None:
        return None
    try:
        return check_name(args.batch, "--batch")
    except UnsafePath as exc:
        raise UsageError(str(exc).split("\n  hint:", 1)[0], hint=exc.hint) from None


def _policy(args: argparse.Namespace) -> RetestPolicy:
    from ..procedures.acceptance.disposition import RetestPolicy

    try:
        if args.retest is None:
            return RetestPolicy(retries=args.retries)
        return RetestPolicy(retries=args.retries,
                            retestable=frozenset(c.strip() for c in args.retest.split(",") if c.strip()))
    except ValueError as exc:
        raise ConfigError(f"retest policy: {exc}", hint="e.g. --retries 1 --retest latency,power") from None


# --- bench calibrate -----------------------------------------------------------------------
def calibrate(args: argparse.Namespace) -> int:
    from ..station.backend import open_station
    from ..procedures.calibration.settings import load_settings

    settings = load_settings(args.calibration_config)
    with open_station(args.station) as station:
        bays = [args.bay] if args.bay else station.bay_names()
        views = [station] if len(bays) == 1 and (station.bay or len(station.bays) <= 1) else \
            [station.for_bay(bay) for bay in bays]
        codes = [_calibrate_bay(args, view, settings) for view in views]
    return max(codes, default=0)


def _calibrate_bay(args: argparse.Namespace, station: StationConfig, settings: CalibrationSettings) -> int:
    """Calibrate one bay's instruments (and, when asked, its DUT) through the station's owner."""
    from ..procedures.calibration.procedures import Context, ambient_conditions
    from ..procedures.calibration.runner import calibrate_instruments, expand, measuring_instruments
    from ..procedures.calibration.station import open_book
    from ..station.owner import StationOwner

    names = expand(args.procedure or ["instruments"])
    if station.bay:
        print(f"bay {station.bay}:")
    results_dir = Path(args.results_dir) if args.results_dir else station.results_dir
    book = open_book(station.database, results_dir)
    try:
        with StationOwner(station) as owner, measuring_instruments(owner) as instruments:
            if args.status:
                return _print_status(book, station, instruments, settings)
            ctx = Context(station=station.name, settings=settings, location=station.location,
                          operator=args.operator or settings.operator_name(),
                          ambient=ambient_conditions(instruments.get("thermal"), settings))
            fixture = owner.fixture() or _real_fixture(args.unattended or settings.unattended, names)
            reference = _reference_thermometer(settings)
            try:
                outcome = calibrate_instruments(instruments, fixture, book, ctx, names, reference)
            finally:
                if reference is not None:
                    reference.close()
            if any(n.startswith("dut-") for n in names):
                dut_outcome = _calibrate_dut(owner, instruments, book, ctx, names, args.dut)
                outcome.records += dut_outcome.records
                outcome.skipped.update(dut_outcome.skipped)
        _print_records(outcome)
        return 0 if outcome.ok and outcome.records else 1
    finally:
        book.store.close()


def _reference_thermometer(settings: CalibrationSettings) -> ThermalProbe | None:
    if not settings.reference.address:
        return None
    from phonebench.drivers.registry import open_instrument

    return open_instrument("thermal", settings.reference.family or "fluke-hart", settings.reference.address)


def _real_fixture(unattended: bool, names: list[str]) -> FixtureControl:
    """The operator's fixture, asked at the terminal; unattended, one nobody is asked about. With
    no terminal to ask at (cron, CI, </dev/null) the command stops before any procedure runs."""
    from ..procedures.calibration.fixture import FIXTURE_PROCEDURES, OperatorFixture, PresetFixture

    if unattended:
        return PresetFixture()
    steps = [n for n in names if n in FIXTURE_PROCEDURES]
    if steps and not sys.stdin.isatty():
        raise NeedsOperator(f"bench calibrate: {', '.join(steps)} ask the operator to set up the fixture, and "
                            "there is no terminal to ask at (stdin is not a terminal: cron, CI, </dev/null)",
                            hint="run it at a terminal; where a relay board or wiring done beforehand sets the "
                                 "loopbacks, pass --unattended (or set unattended = true in the calibration "
                                 "settings); or choose --procedure supply-zero")
    return OperatorFixture(_confirm)


class NeedsOperator(ConfigError):
    """A step needs a person at a terminal and there is none."""


def _confirm(step: str) -> None:
    print(f"\n>>> {step}")
    try:
        input("    press Enter when done ")
    except EOFError:  # the terminal went away mid-calibration
        raise NeedsOperator(f"bench calibrate: no answer to the fixture step ({step})",
                            hint="run it at a terminal, or with --unattended") from None


def _calibrate_dut(owner: StationOwner, instruments: dict[str, Any], book: CalibrationBook, ctx: Context,
                   names: list[str], dut_name: str | None) -> Outcome:
    """DUT calibration with the instruments corrected by their (just updated) records."""
    from ..procedures.calibration.corrections import corrected
    from ..procedures.calibration.runner import calibrate_dut
    from ..procedures.calibration.station import StationCalibrationView

    station = owner.station
    wired = station.instrument_dut("supply") or station.duts[0].name  # the unit the instruments measure
    view = StationCalibrationView(station.name, station.location, ctx.settings, book)
    fixed = {role: corrected(role, driver, view.role(role, driver.identity)) for role, driver in instruments.items()}
    slot = owner.phone(dut_name or wired)
    return calibrate_dut(slot.opened(), slot.identified(), fixed, book, ctx, names)


def _print_records(outcome: Outcome) -> None:
    for record in outcome.records:
        mark = "PASS" if record.passed else "FAIL"
        adjust = ", ".join(f"{k} = {v:.6g}" for k, v in record.adjustments.items())
        due = f"due {record.due:%Y-%m-%d}" if record.due else "not applied"
        print(f"  {mark}  {record.procedure:22} {record.equipment.label()}")
        print(f"        {record.certificate} · {due} · {adjust}")
        if record.reason:
            print(f"        why: {record.reason}")
    for name, why in outcome.skipped.items():
        print(f"  skip  {name:22} {why}")


def _print_status(book: CalibrationBook, station: StationConfig, instruments: dict[str, Any],
                  settings: CalibrationSettings) -> int:
    from ..procedures.acceptance.attempts import REFUSED
    from ..procedures.acceptance.runner import EXIT_CODES
    from ..procedures.calibration.station import evaluate

    state = evaluate(book, station.name, {r: d.identity for r, d in instruments.items()}, settings, station.location)
    for role, cal in state.roles.items():
        print(f"  {role:9} {cal.state:13} " + ", ".join(f"{k} = {v:.6g}" for k, v in cal.corrections.items()))
        for s in cal.procedures:
            r = s.record
            when = f"{r.certificate}, due {r.due:%Y-%m-%d}" if r is not None and r.due else \
                (f"{r.certificate} failed" if r is not None else "no record")
            print(f"            {s.procedure}: {s.state} ({when})")
    print(f"station {station.name}: {state.state}")
    return 0 if state.ok else EXIT_CODES[REFUSED]


# --- bench accept --------------------------------------------------------------------------
@contextlib.contextmanager
def _accept_station(args: argparse.Namespace) -> Iterator[Path]:
    """The station file to accept against; without one, an emulated fixture holding EMU0001."""
    if args.station:
        yield Path(args.station)
        return
    from ..station.backend import emulated_line

    results = Path(args.results_dir or "reports").resolve()
    with emulated_line(count=1, seed=0, name="emulated", serial_format="EMU{n:04d}") as line, \
            tempfile.TemporaryDirectory(prefix="phonebench-fixture-") as tmp:
        yield line.write_station(Path(tmp) / "fixture.toml", results_dir=results)


def accept(args: argparse.Namespace) -> int:
    from ..procedures.acceptance.display import operator_lines
    from ..procedures.acceptance.runner import AcceptanceStation

    with _accept_station(args) as station_file, \
            AcceptanceStation(station_file, dut=args.dut, results_dir=args.results_dir,
                              calibration_config=args.calibration_config, policy=_policy(args),
                              operator=args.operator, batch=args.batch, profile=args.profile) as station:
        result = station.accept(args.serial)
    print("\n".join(operator_lines(result.serial, result.outcome, result.reason, attempts=len(result.attempts),
                                   cycle_s=result.cycle_s, takt_s=result.takt_s, failures=result.failures,
                                   report=str(result.report) if result.report else None)))
    sys.stdout.flush()
    return result.exit_code


# --- bench line ----------------------------------------------------------------------------
def run_line(args: argparse.Namespace) -> int:
    if args.mode == "operators":
        from .operators import manage_operators

        return manage_operators(args)
    if args.words:
        raise UsageError(f"bench line {args.mode}: unexpected {' '.join(args.words)[:80]!r}",
                         hint="`bench line operators add NAME` manages the page's operators")
    if args.mode == "serve":  # the batch only labels the attempts there: it names no folder
        return serve_line(args)
    _batch(args)  # it names the batch's folder: refused before any phone or instrument starts
    from ..procedures.acceptance.line import run_line as run_batch
    from ..station.backend import emulated_line
    from ..results.line_report import render_line
    from ..results.run_record import new_run_id

    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    fixtures = args.fixtures if args.fixtures is not None else 1
    if fixtures < 1:
        raise ConfigError(f"bench line: --fixtures {fixtures}: a station needs at least one fixture")
    try:
        line = emulated_line(count=args.count, faulty=args.faulty, seed=args.seed, faults=faults,
                             name="emulated-line" if fixtures == 1 else "emulated-line-A")
    except ValueError as exc:
        raise ConfigError(f"bench line: {exc}", hint="e.g. --count 20 --faulty 2") from None
    if fixtures > 1:
        return _run_station(args, line, fixtures)
    results = Path(args.results_dir or "reports").resolve()
    batch = _batch(args) or f"line-{new_run_id()}"
    with line:
        station_file = line.write_station(results / batch / "station.toml", results_dir=results)
        with _station(args, station_file, results, batch) as station:
            _calibrate(args, station, line, results)
            print(f"batch {batch}: {len(line.units)} units through {station_file}")
            run = run_batch(line, station, batch, on_unit=_print_unit)
    figures = run.figures()
    page = render_line(results / batch / "line.html", batch, line.name, run.rows(), figures)
    _print_figures(figures)
    _print_steps(run.steps)
    print(f"batch report: {page}")
    print(f"store: every attempt of batch {batch} (`bench runs` lists the unit runs)")
    return 0 if figures["as_expected"] else 1


def _station(args: argparse.Namespace, station_file: Path, results: Path, batch: str) -> AcceptanceStation:
    from ..procedures.acceptance.runner import AcceptanceStation

    return AcceptanceStation(station_file, results_dir=results, calibration_config=args.calibration_config,
                             policy=_policy(args), operator=args.operator, batch=batch, profile=args.profile)


def _calibrate(args: argparse.Namespace, station: AcceptanceStation, line: EmulatedLine, results: Path) -> None:
    from ..procedures.calibration.runner import calibrate_station
    from ..procedures.calibration.settings import load_settings

    if not args.no_calibrate and station.check_calibration():
        print(f"calibrating the line's instruments and fixture ({line.name}) ...")
        _print_records(calibrate_station(station.station, None,
                                         load_settings(args.calibration_config), operator=station.operator,
                                         results_dir=results))


def _run_station(args: argparse.Namespace, first: EmulatedLine, count: int) -> int:
    """Several emulated fixtures side by side, the units dealt to whichever is free first; `first`
    is fixture A's line, planned with the whole batch."""
    from ..procedures.acceptance.line import run_station
    from ..station.backend import emulated_line
    from ..results.run_record import new_run_id

    results = Path(args.results_dir or "reports").resolve()
    batch = _batch(args) or f"line-{new_run_id()}"
    shared = tuple(r.strip() for r in args.share.split(",") if r.strip())
    plan = first.units
    with contextlib.ExitStack() as stack:
        fixtures = {}
        for i in range(count):
            name = chr(ord("A") + i)
            # Each other fixture's line starts holding its first unit of the plan, dealt in turn.
            line = stack.enter_context(first if i == 0 else emulated_line(
                units=plan[i::count] or plan[:1], seed=args.seed + i, name=f"emulated-line-{name}"))
            station_file = line.write_station(results / batch / f"station-{name}.toml", results_dir=results)
            station = stack.enter_context(_station(args, station_file, results, batch))
            _calibrate(args, station, line, results)
            fixtures[name] = (line, station)
        print(f"batch {batch}: {len(plan)} units through {count} fixtures"
              + (f", sharing {', '.join(shared)}" if shared else ""))
        run = run_station(fixtures, plan, batch, shared=shared, on_unit=_print_unit)
    f = run.figures()
    print(f"\n  units {f['units']}: PASS {f['passed']}, FAIL {f['failed']}"
          f"  (as planted: {'yes' if f['as_expected'] else 'NO'})")
    for name, fig in f["per_fixture"].items():
        print(f"  fixture {name}: {fig['units']} units, {fig['units_per_hour_sim']:.0f} units/hour "
              f"(phone/instrument clock, {fig['handling_s']:g} s handling), waited {fig['shared_wait_s']:.1f} s "
              f"for shared instruments")
    print(f"  station: {f['units_per_hour_sim']:.0f} units/hour over {f['world_s']:.0f} s of station clock")
    steps: dict[str, list[float]] = {}
    for fixture_run in run.fixtures.values():
        for name, used in fixture_run.steps.items():
            steps.setdefault(name, []).extend(used)
    _print_steps(steps)
    for role, s in f["shared"].items():
        print(f"  shared {role}: busy {s['busy_s']:.0f} s ({100 * s['utilisation']:.0f} %), waits "
              + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(s["waited_s"].items())) + f", conflicts {s['conflicts']}")
    print(f"store: every attempt of batch {batch} (`bench runs` lists the unit runs)")
    return 0 if f["as_expected"] else 1


def serve_line(args: argparse.Namespace) -> int:
    """The operator station: a page on loopback (or over TLS), one worker process per fixture;
    operators sign in from the operators file."""
    from phonebench.core.station import load_station
    from ..operator.accounts import OperatorBook, default_path
    from ..operator.app import OperatorStation, serve
    from ..operator.exposure import check_exposure, tls_context
    from ..operator.fixture import EmulatedUnits, FixtureSpec

    tls = bool(args.tls_cert or args.tls_key)
    check_exposure(args.host, tls=tls, insecure_network=args.insecure_http_on_network)  # before any fixture starts;
    # serve() warns of the opt-out on stderr once it listens
    operators = OperatorBook(args.operators or default_path())
    operators.operators()  # missing, unsafe or malformed: said now, not at the first sign-in
    if tls:
        tls_context(args.tls_cert, args.tls_key)  # a bad certificate or key: said before any fixture starts

    policy = _policy(args)
    results = Path(args.results_dir or "reports").resolve()
    common = dict(results_dir=results, calibration_config=args.calibration_config, retries=policy.retries,
                  retestable=tuple(sorted(policy.retestable)), profile=args.profile, batch=args.batch,
                  operator=args.operator)
    if args.station:
        config = load_station(args.station)
        specs = [FixtureSpec(name=d.name, station_file=Path(args.station), dut=d.name, **common) for d in config.duts]
        title = f"{config.name}: operator station"
    else:
        faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
        specs = [FixtureSpec(name=chr(ord("A") + i), emulated=EmulatedUnits(
            count=args.count, faulty=args.faulty, seed=args.seed + i, faults=faults), **common)
            for i in range(args.fixtures or 2)]
        title = "emulated line: operator station"
    # SIGTERM (a service manager, `kill`) stops the station as Ctrl-C does: every fixture worker
    # ends and stops listening, not only this process.
    signal.signal(signal.SIGTERM, _interrupt)
    with OperatorStation(specs, title=title) as station:
        server = serve(station, args.host, args.port, operators=operators, tls_cert=args.tls_cert,
                       tls_key=args.tls_key, insecure_network=args.insecure_http_on_network)
        print(f"operator station on {'https' if tls else 'http'}://{args.host}:{server.server_port}/ "
              f"(operators sign in from {operators.path}; Ctrl-C stops it)")
        for spec in specs:
            if spec.emulated is not None:
                print(f"  fixture {spec.name}: emulated units "
                      + ", ".join(spec.emulated.serial_format.format(seed=spec.emulated.seed, n=n)
                                  for n in range(1, min(spec.emulated.count, 5) + 1)) + ", ...")
        sys.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("operator station: stopping the fixtures")
        finally:
            server.server_close()
            station.stop(grace_s=SERVE_STOP_GRACE_S)
    return 0


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _print_unit(unit: LineUnitResult) -> None:
    r = unit.result
    overhead = f"{r.overhead_s:.2f}" if r.overhead_s is not None else "-"
    retest = f" after {len(r.attempts)} attempts" if len(r.attempts) > 1 else ""
    print(f"  {unit.serial}  {r.outcome.upper():10} cycle {r.cycle_s:5.2f} s  overhead {overhead:>5} s{retest}"
          + (f"  why: {r.reason}" if r.reason else ""))
    sys.stdout.flush()


def _print_steps(steps: dict[str, list[float]]) -> None:
    from ..procedures.acceptance.takt import BUDGETS

    print("  clock per check        budget   mean    max  (s, phone/instrument clock, per unit)")
    for name, used in steps.items():
        budget = f"{BUDGETS[name].budget_s:6.1f}" if name in BUDGETS else "     -"
        print(f"    {name:<18} {budget} {sum(used) / max(len(used), 1):6.1f} {max(used, default=0.0):6.1f}")


def _print_figures(f: dict[str, Any]) -> None:
    print(f"\n  units {f['units']}: PASS {f['passed']}, FAIL {f['failed']}, other {f['other']}"
          f"  (as planted: {'yes' if f['as_expected'] else 'NO'})")
    print(f"  first-pass yield        {100 * f['first_pass_yield']:.1f} %")
    print(f"  units per hour          {f['units_per_hour']:.0f} (emulated, wall clock); "
          f"{f['units_per_hour_real_time']:.0f} with real-time phones and instruments")
    print(f"  units per hour          {f['units_per_hour_sim']:.0f} on the phone/instrument clock "
          f"({f['handling_s']:g} s handling per unit); test time {f['test_per_good_unit_s']:.1f} s per good unit, "
          f"{f['test_per_faulty_unit_s']:.1f} s per faulty one")
    print(f"  cycle time              {f['cycle_mean_s']:.2f} s/unit (wall)")
    print(f"  bench overhead          {f['overhead_mean_s']:.2f} s/unit mean, {f['overhead_max_s']:.2f} s max "
          f"(time not waiting for a phone or an instrument)")
