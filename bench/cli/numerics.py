"""`bench fingerprint` (NPU microcode fingerprint of every DUT, optional adapter) and
`bench profiles sign|verify` (the signed firmware profile library)."""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from phonebench.core import signing
from phonebench.core.errors import BenchError
from phonebench.core.files import confined, safe_name, write_atomically
from ..specs.profiles import DEFAULT_ROOT, load_library
from . import Subcommands

log = logging.getLogger(__name__)

FLAGGED = ("mismatch", "inconsistent")


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("fingerprint", help="fingerprint the NPU microcode of each DUT against the profile library")
    p.add_argument("--station", help="station file (TOML); default: the embedded emulated station")
    p.add_argument("--dut", action="append", default=[], help="only this DUT (repeatable)")
    p.add_argument("--profiles", default=str(DEFAULT_ROOT), help="profile library folder (default: %(default)s)")
    p.add_argument("--pubkey", action="append", default=[],
                   help=f"trusted public key (repeatable; default: ${signing.TRUSTED_KEYS_ENV}, and the development key "
                        "where the station opts in)")
    p.add_argument("--apply", action="store_true", help="also install and activate the adapter on known builds")
    p.add_argument("--report-dir", help="where fingerprint.json and profile stubs go (default: reports/<run-id>)")
    p.set_defaults(func=cmd_fingerprint)

    prof = subparsers.add_parser("profiles", help="sign or verify the firmware profile library")
    sub = prof.add_subparsers(dest="profiles_command", metavar="sign|verify")
    sign = sub.add_parser("sign", help="validate, then sign every profile and adapter (writes <file>.sig)")
    sign.add_argument("--dir", default=str(DEFAULT_ROOT), help="profile library folder (default: %(default)s)")
    sign.add_argument("--key", help=f"Ed25519 private key, PEM (default: ${signing.SIGNING_KEY_ENV} or the dev key)")
    sign.set_defaults(func=cmd_sign)
    verify = sub.add_parser("verify", help="validate and verify every signature in the library")
    verify.add_argument("--dir", default=str(DEFAULT_ROOT), help="profile library folder (default: %(default)s)")
    verify.add_argument("--pubkey", action="append", default=[],
                        help=f"trusted public key (repeatable; default: ${signing.TRUSTED_KEYS_ENV}; the development "
                             "key only when named here)")
    verify.set_defaults(func=cmd_verify)
    prof.set_defaults(func=lambda args: _help(prof))


def _help(parser: argparse.ArgumentParser) -> int:
    """`bench profiles` without a subcommand: its help, and the usage error's exit code."""
    parser.print_help()
    return 2


def cmd_sign(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    load_library(root, require_signatures=False)  # never sign a library that does not validate
    key_path = signing.signing_key_path(args.key)
    private = signing.load_private_key(key_path)
    files = sorted(root.glob("*.toml")) + sorted((root / "adapters").glob("*.json"))
    for path in files:
        signing.sign_file(path, private)
    dev = " (the DEVELOPMENT key)" if key_path.resolve() == signing.DEV_PRIVATE_KEY.resolve() else ""
    print(f"signed {len(files)} files in {root} with key {signing.key_id(private.public_key())}{dev}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    library = load_library(args.dir, signing.trusted_keys(args.pubkey))
    keys = ", ".join(k.key_id + (" (DEVELOPMENT key)" if k.is_dev else "") for k in library.trusted)
    builds = sum(len(s.builds) for s in library.socs.values())
    print(f"{args.dir}: {len(library.socs)} SoC profiles ({builds} builds) and {len(library.adapters)} adapters "
          f"valid and signed; trusted keys: {keys}")
    return 0


def cmd_fingerprint(args: argparse.Namespace) -> int:
    from ..phone.adapters import apply_adapter, choose_adapter
    from ..phone.fingerprint import fingerprint
    from ..results.run_record import new_run_id
    from ..station.backend import open_station
    from phonebench.core.station import EmulatedConfig
    from ..station.owner import StationOwner
    from phonebench.drivers.runtime import RuntimeClient

    rows, flagged = [], 0
    # The embedded emulated station without instruments: a fingerprint needs only the phones.
    with open_station(args.station, emulated=None if args.station else EmulatedConfig(instruments=False)) as station, \
            signing.trusting(station.name, station.trusts_development_key), StationOwner(station) as owner:
        library = load_library(args.profiles, signing.trusted_keys(args.pubkey))
        report_dir = Path(args.report_dir) if args.report_dir else station.results_dir / f"{new_run_id()}-fingerprint"
        duts = [d for d in station.duts if not args.dut or d.name in args.dut]
        if not duts:
            raise BenchError(f"no DUT selected (station DUTs: {', '.join(d.name for d in station.duts) or 'none'})")
        for cfg in duts:
            try:
                device = owner.phone(cfg.name).opened()
                # The station clock times the NPU (its MAC throughput) where it is in the phone's time
                # domain; the inventory (expected_soc) is the lab's word on what is in the bay.
                client = RuntimeClient(device, clock=owner.clock())
                report = fingerprint(device, library, client, declared_soc=cfg.expected_soc)
                if args.apply and report.trusted:
                    outcome = apply_adapter(client, choose_adapter(report, library), library.trusted)
                    report.detail += f"; adapter {outcome.action}"
            except BenchError as exc:
                print(f"{cfg.name:12} ERROR {exc}")
                flagged += 1
                continue
            rows.append(report)
            print(report.summary())
            flagged += report.verdict in FLAGGED
    write_atomically(report_dir / "fingerprint.json", json.dumps([r.to_dict() for r in rows], indent=1, default=str))
    for report in rows:
        if report.verdict != "known":
            print(f"  {report.device}: {report.verdict.upper()}: {report.detail}")
        if report.stub:
            # The SoC model is the phone's own text: it names the file, never where it goes.
            name = safe_name(f"{report.soc_model}-{report.device}") + ".toml"
            stub = confined(report_dir, "profile-stubs", name)
            write_atomically(stub, report.stub)
            print(f"  {report.device}: profile stub for review: {stub}")
    calls = max((r.runtime_calls for r in rows), default=0)
    print(f"{len(rows)} DUTs fingerprinted ({calls} runtime calls each at most); report: {report_dir / 'fingerprint.json'}")
    return 1 if flagged else 0
