"""`bench runs`, `bench report`, `bench matrix`, `bench store-import`: the results store from the
command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from phonebench.core.errors import BenchError
from . import Subcommands

if TYPE_CHECKING:  # the store is imported where a command opens it
    from ..store.store import Store


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("runs", help="list the runs in the results store")
    _store_args(p)
    p.add_argument("--limit", type=int, default=30, help="newest N runs (0: all; default 30)")
    p.add_argument("--station-name", help="only runs of this station")
    p.set_defaults(func=runs)

    p = subparsers.add_parser("report", help="render a run's HTML report (from the store, or a run folder)")
    _store_args(p)
    p.add_argument("run", help='a run id from `bench runs`, "latest", or a run folder holding results.json')
    p.add_argument("--output", help="where to write it (default: report.html in the run folder)")
    p.set_defaults(func=report)

    p = subparsers.add_parser("matrix", help="the microcode compatibility matrix across stored runs")
    _store_args(p)
    p.add_argument("--against", metavar="FILE|DATE",
                   help="mark regressions and new rows against an earlier matrix (CSV/Markdown) or a date")
    p.add_argument("--format", choices=("md", "csv", "html"),
                   help="output format (default: from --output's suffix, else md)")
    p.add_argument("--output", help="write to this file instead of printing")
    p.set_defaults(func=matrix)

    p = subparsers.add_parser("store-import", help="import run folders (results.json) into the results store")
    _store_args(p)
    p.add_argument("folders", nargs="+", help="run folders, or folders holding run folders (e.g. reports/)")
    p.add_argument("--amend", action="store_true",
                   help="store a changed results.json as an amendment of the stored run (a new version; the "
                        "original stays readable): one run folder, with --by and --reason")
    p.add_argument("--by", help="with --amend: who amends it (an operator or user name)")
    p.add_argument("--reason", help="with --amend: why")
    p.set_defaults(func=store_import)


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--database", help="store URL or SQLite path (default: $PHONEBENCH_DATABASE, the station's "
                                      "`database`, else <results-dir>/results.sqlite)")
    p.add_argument("--station", help="station file whose results store to use")
    p.add_argument("--results-dir", help="results folder (default: the station's, ./reports)")


def _results_dir(args: argparse.Namespace) -> Path:
    if args.results_dir:
        return Path(args.results_dir)
    if args.station:
        from phonebench.core.station import load_station

        return load_station(args.station).results_dir
    return Path("reports")


def given_database(database: str) -> str:
    """The store --database names, as a URL; refused when it carries a password, which every user
    of the host reads on a command line (`ps`)."""
    from phonebench.core.dburl import PASSWORD_HINT, password_of, to_url
    from phonebench.core.errors import ConfigError

    if password_of(database):
        raise ConfigError("--database: the URL carries a password, which every user of this host sees "
                          "in the process list", hint=PASSWORD_HINT)
    return to_url(database)


def database_url(args: argparse.Namespace) -> str:
    from ..store import resolve_database_url

    if args.database:
        return given_database(args.database)
    configured, results_dir = None, Path(args.results_dir or "reports")
    if args.station:
        from phonebench.core.station import load_station

        station = load_station(args.station)
        configured = getattr(station, "database", None)
        results_dir = Path(args.results_dir) if args.results_dir else station.results_dir
    return resolve_database_url(configured, results_dir)


class NoStore(BenchError):
    """A command that reads the results store was pointed at none."""


def _sqlite_path(url: str) -> Path | None:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def _open(args: argparse.Namespace, *, reading: bool = True) -> Store:
    """The results store. A given --database whose folder does not exist is an error (a typo must
    not become a new empty store); a command that only reads never creates one (nor ./reports)."""
    from ..store import open_store

    url = database_url(args)
    path = _sqlite_path(url)
    if path is not None and args.database and not path.parent.is_dir():
        raise NoStore(f"--database {args.database}: the folder {path.parent} does not exist; give the path of "
                      "an existing results store (`bench run` writes <results-dir>/results.sqlite)")
    if path is not None and reading and not path.is_file():
        raise NoStore(f"no results store at {path}: nothing was recorded there; run `bench run` first, or "
                      "point at a store with --database FILE|URL or --station FILE")
    return open_store(url)


def runs(args: argparse.Namespace) -> int:
    from ..store.heal import heal_killed_runs

    try:
        store_cm = _open(args)
    except NoStore as exc:
        if args.database:
            raise
        print(f"no runs yet: {str(exc).removeprefix('no results store at ')}")
        return 0
    with store_cm as store:
        for healed in heal_killed_runs(store, _results_dir(args)):
            print(f"healed: {healed}")
        found = store.list_runs(limit=args.limit or None, station=args.station_name)
    if not found:
        print("no runs in the results store; `bench run` records one")
        return 0
    header = ("run", "started", "station", "status", "passed", "failed", "error", "skipped", "DUTs")
    table = [header] + [(r.run_id, (r.started or "-")[:19].replace("T", " "), r.station or "-", r.status,
                         *(str(r.summary.get(k, 0)) for k in ("passed", "failed", "error", "skipped")),
                         ", ".join(r.duts) or "-") for r in found]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    print(f"next: bench report {found[0].run_id}  (the run's report; `bench matrix` for the compatibility matrix)")
    return 0


def heal_before_run(results_dir: Path, store_url: str) -> None:
    """`bench run`: before anything else, heal the runs a killed bench left in `results_dir` and
    the store at `store_url` (docs/faults.md), and say so. A store that cannot be opened is the
    run's own sink's to report."""
    from ..store import StoreError, open_store
    from ..store.heal import heal_killed_runs

    try:
        with open_store(store_url) as store:
            healed = heal_killed_runs(store, results_dir)
    except StoreError:
        return
    for item in healed:
        print(f"healed: {item}")


def report(args: argparse.Namespace) -> int:
    from ..report import render_data, render_run

    folder = Path(args.run)
    if (folder / "results.json").is_file():
        path = render_run(folder, args.output)
    else:
        with _open(args) as store:
            stored = store.load_run(args.run)
        run_dir = stored.run_dir if stored.run_dir and stored.run_dir.is_dir() else None
        if run_dir is None:
            print(f"run folder {stored.run_dir or '(not recorded)'} is gone: plots of raw data are left out",
                  file=sys.stderr)
        if args.output:
            output = Path(args.output)
        else:
            output = run_dir / "report.html" if run_dir else Path(f"report-{stored.data['run_id']}.html")
        path = render_data(stored.data, run_dir, output)
    print(path)
    return 0


def matrix(args: argparse.Namespace) -> int:
    from ..results import matrix as mx

    fmt = args.format or (Path(args.output).suffix.lstrip(".").replace("markdown", "md") if args.output else "md")
    if fmt not in mx.FORMATS:
        raise BenchError(f"--output {args.output}: cannot tell the format from the suffix",
                         hint="add --format md, csv or html")
    earlier_rows, before = None, None
    if args.against:
        before = mx.parse_date(args.against)
        if before is None:
            earlier_rows = mx.load_matrix_file(Path(args.against))
    with _open(args) as store:
        current = mx.build_matrix(store)
        if before is not None:
            earlier = mx.build_matrix(store, before=before)
            earlier_rows = [r.values() for r in earlier.rows]
    if earlier_rows is not None:
        mx.compare(current, earlier_rows, args.against)
    text = mx.FORMATS[fmt](current)
    if args.output:
        from ..report.render import write_atomically

        write_atomically(Path(args.output), text)
        print(f"{args.output}: {len(current.rows)} rows"
              + (f", {len(current.regressions)} regressed" if current.against else ""))
    else:
        sys.stdout.write(text)
    return 0


def store_import(args: argparse.Namespace) -> int:
    from phonebench.core.errors import UsageError

    amend = None
    if args.amend:
        if not (args.by or "").strip() or not (args.reason or "").strip():
            raise UsageError("--amend needs --by NAME (who amends the run) and --reason TEXT (why)")
        if len(args.folders) != 1:
            raise UsageError("--amend takes one run folder: an amendment is of one run")
        amend = (args.by, args.reason)
    elif args.by or args.reason:
        raise UsageError("--by and --reason go with --amend")
    failed = 0
    with _open(args, reading=False) as store:
        for folder in args.folders:
            try:
                results = store.import_folder(folder, amend=amend)
            except BenchError as exc:
                print(f"bench: {exc}", file=sys.stderr)
                failed += 1
                continue
            for r in results:
                print(f"{r.run_id}: {r.tests_stored} tests ({r.tests_added} new)"
                      + (f", stored as an amendment by {args.by}: the original stays readable" if r.amended else ""))
    return 1 if failed else 0
