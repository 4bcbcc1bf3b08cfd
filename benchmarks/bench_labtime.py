"""Lab time of the default suites on one emulated phone, from the run's own records, and the
simulated makespan of a nightly: 100 phones on 10 hosts of 10 bays, one results store.

Lab time is the station clock's (the emulated world's time server): what the run would take on
hardware. Runs `bench run --dut EMU0001` on the embedded emulated station (about 15 minutes of
wall time on a 2-core machine), or reads a finished run folder (--run-dir). Prints lab minutes per
test and per claim (a test feeding several claims counts for each), the phone's total, and, with
--before RUN_DIR, the same for an older run side by side.

The floors: what the profile's sample sizes cost at the run's own measured pace, read from its raw
data: the soak's seconds per long dialog times the dialogs claim 8 needs, the voice record times
the trials claims 1-2 need (and, as the least any design could spend, the trials times the dialog
limit itself), the cover loop's warm-up and readings. Their sum is the least one phone can take
with every claim decided on that phone at its stated confidence.

The nightly: every phone gets the measured per-phone lab time, each bay tests one phone at a time,
each host's bays run at once; every finished test is one write to the single results store,
whose service time per test is measured here by syncing the run's record into a fresh store
(SQLite by default, --database for a PostgreSQL URL). The store is a single queue; the night ends
when the last bay finishes and the store has written everything.

Usage: python benchmarks/bench_labtime.py [--run-dir DIR] [--before DIR] [--phones 100 --hosts 10 --bays 10]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from phonebench.bench.results import labtime  # noqa: E402
from phonebench.bench.specs.sla import load_profile  # noqa: E402
from phonebench.bench.store import open_store  # noqa: E402

TARGET_MIN = 55.0  # issue target: default suites per phone


def run_suites(folder: Path, dut: str) -> Path:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--dut", dut, "--results-dir", str(folder),
                    "--run-id", "labtime", "-q"], cwd=REPO, env=env, check=False)
    return folder / "labtime"


def load(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text(encoding="utf-8"))


def store_seconds_per_test(data: dict, database: str | None, repeats: int = 3) -> float:
    """Wall seconds the store takes per test record (the sink syncs after every test)."""
    tests = max(1, len(data["tests"]))
    best = float("inf")
    for i in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            url = database or str(Path(folder) / "store.sqlite")
            record = {**data, "run_id": f"{data['run_id']}-bench{i}-{time.time_ns()}"}
            with open_store(url) as store:
                start = time.perf_counter()
                for n in range(1, tests + 1):  # as the sink does: the record grown by one test each time
                    store.sync_run({**record, "tests": record["tests"][:n]})
                best = min(best, (time.perf_counter() - start) / tests)
    return best


def nightly(phone_s: float, tests_per_phone: int, store_s: float, phones: int, hosts: int, bays: int) -> dict:
    """Discrete-event nightly: bays test phones in turn, each test's record queues at the one store."""
    slots = hosts * bays
    offsets = [phone_s * (k + 1) / tests_per_phone for k in range(tests_per_phone)]  # tests evenly over the run
    bay_free = [0.0] * slots
    writes = []
    for phone in range(phones):
        bay = min(range(slots), key=bay_free.__getitem__)
        start = bay_free[bay]
        writes += [start + o for o in offsets]
        bay_free[bay] = start + phone_s
    store_done = 0.0
    for t in sorted(writes):
        store_done = max(store_done, t) + store_s
    lab_done = max(bay_free)
    return {"lab_s": lab_done, "store_s": store_done, "makespan_s": max(lab_done, store_done),
            "store_busy": len(writes) * store_s / max(lab_done, 1e-9)}


def print_run(label: str, data: dict, dut: str, other: dict | None = None) -> None:
    tests, claims = labtime.per_test(data, dut), labtime.per_claim(data, dut)
    before_tests = labtime.per_test(other, dut) if other else {}
    before_claims = labtime.per_claim(other, dut) if other else {}
    head = f"{'lab min':>8}" + (f" {'before':>8}" if other else "")
    print(f"\n{label}: lab time per test on {dut} (station clock)")
    print(f"{head}  test")
    for key in sorted(set(tests) | set(before_tests), key=lambda k: -tests.get(k, 0.0)):
        now = tests.get(key)
        cells = f"{'-' if now is None else f'{now / 60:.1f}':>8}"
        if other:
            then = before_tests.get(key)
            cells += f" {'-' if then is None else f'{then / 60:.1f}':>8}"
        if (now or 0) >= 6 or (before_tests.get(key) or 0) >= 6:
            print(f"{cells}  {key}")
    rest = sum(s for k, s in tests.items() if s < 6)
    print(f"{rest / 60:>8.1f}  (every test under 0.1 lab min)")
    shares = labtime.per_claim_share(data, dut)
    before_shares = labtime.per_claim_share(other, dut) if other else {}
    print(f"\nlab time per claim on {dut}, min: 'rides on' counts a study in full for each claim it feeds, "
          f"'share' splits it evenly over them")
    print(f"  {'claim':>8} {'rides on':>9} {'share':>7}" + (f" {'before':>9} {'share':>7}" if other else ""))
    for claim in sorted(set(claims) | set(before_claims)):
        line = f"  claim {claim:>2} {claims.get(claim, 0.0) / 60:9.1f} {shares.get(claim, 0.0) / 60:7.1f}"
        if other:
            line += f" {before_claims.get(claim, 0.0) / 60:9.1f} {before_shares.get(claim, 0.0) / 60:7.1f}"
        print(line)
    total = (data.get("lab_time_s") or {}).get(dut, 0.0)
    line = f"\nlab time of {dut}: {total / 60:.1f} min"
    if other:
        line += f" (before {(other.get('lab_time_s') or {}).get(dut, 0.0) / 60:.1f} min)"
    print(line)


def _raw(run_dir: Path, test: str, dut: str, name: str) -> np.lib.npyio.NpzFile | None:
    found = sorted(run_dir.glob(f"raw/*{test}*{dut}/{name}")) + sorted(run_dir.glob(f"bays/*/raw/*{test}*{dut}/{name}"))
    return np.load(found[0]) if found else None


def print_floors(run_dir: Path, data: dict, dut: str, profile_name: str = "default") -> None:
    """The least lab time the profile's sample sizes allow at this run's measured pace (module doc)."""
    profile = load_profile(profile_name, (REPO / "sla_profiles",))
    soak = _raw(run_dir, "test_npu_thermal_trip_soak", dut, "soak_trace.npz")
    trials = _raw(run_dir, "test_sustained_use", dut, "voice-waveforms.npz")
    loop = _raw(run_dir, "test_sustained_use", dut, "cover-temperature.npz")
    if soak is None or trials is None or loop is None:
        print("\nfloors: the run has no soak or sustained-use raw data for this phone")
        return
    total = (data.get("lab_time_s") or {}).get(dut, 0.0)
    t = np.asarray(soak["t"], dtype=float)
    per_dialog = float(np.median(np.diff(t[1:])))
    dialogs = profile.get("long_dialog_success").n_required
    record = trials["trial0_t"]
    per_trial = float(record[-1] - record[0]) + float(record[1] - record[0])
    voice_n = max(profile.get(m).n_required for m in ("voice_latency_p99", "voice_latency_std", "dialog_time_p99"))
    dialog_limit_s = profile.get("dialog_time_p99").limit / (1000.0 if profile.get("dialog_time_p99").unit == "ms" else 1.0)
    lt = np.asarray(loop["t"], dtype=float)
    start = int(loop["measure_from"])
    warmup, readings = float(lt[start]), float(lt[-1] - lt[start]) + float(lt[1] - lt[0])
    rows = [
        ("claim 8: trip approach and refine (this run)", float(t[1])),
        (f"claim 8: {dialogs} long dialogs x {per_dialog:.2f} s", dialogs * per_dialog),
        (f"claims 1-2: {voice_n} voice trials x {per_trial:.2f} s record", voice_n * per_trial),
        (f"claim 7: cover loop warm-up at its workload (this run)", warmup),
        (f"claim 7: cover readings after warm-up", readings),
    ]
    floor = sum(s for _, s in rows)
    print(f"\nfloors on {dut} at this run's pace (profile {profile_name}), lab min:")
    for label, seconds in rows:
        print(f"  {seconds / 60:6.1f}  {label}")
    print(f"  {floor / 60:6.1f}  sum of the long studies; everything else in the run: {(total - floor) / 60:.1f}")
    token_std = next((s for k, s in labtime.per_test(data, dut).items() if "test_token_latency_std" in k), 0.0)
    least = dialogs * per_dialog + voice_n * dialog_limit_s + readings + token_std
    print(f"  {least / 60:6.1f}  least any design could spend, against a target of {TARGET_MIN:g} min: the soak's "
          f"dialogs, {voice_n} trials each as short as the dialog limit ({dialog_limit_s:g} s), the cover "
          f"readings, claim 4's first sequential look ({token_std / 60:.1f}); no trip approach, no warm-up, "
          f"nothing for claims 3, 5, 6, 9-14")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, help="a finished run folder to read instead of running the suites")
    parser.add_argument("--before", type=Path, help="an older run folder to compare with")
    parser.add_argument("--dut", default="EMU0001")
    parser.add_argument("--database", help="results store URL to measure the write rate on (default: SQLite)")
    parser.add_argument("--phones", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--bays", type=int, default=10, help="bays per host, tested at once")
    args = parser.parse_args()
    run_dir = args.run_dir or run_suites(Path(tempfile.mkdtemp(prefix="bench-labtime-")), args.dut)
    data = load(run_dir)
    before = load(args.before) if args.before else None
    print_run(f"run {data['run_id']} ({data['status']})", data, args.dut, before)
    print_floors(run_dir, data, args.dut)
    phone_s = (data.get("lab_time_s") or {}).get(args.dut, 0.0)
    tests = sum(1 for t in data["tests"] if t.get("dut") == args.dut)
    store_s = store_seconds_per_test(data, args.database)
    print(f"\nstore write: {store_s * 1e3:.1f} ms per test record ({args.database or 'SQLite'}), "
          f"{tests} tests per phone")
    for label, seconds in ([("before", (before.get("lab_time_s") or {}).get(args.dut, 0.0))] if before else []) \
            + [("now", phone_s)]:
        night = nightly(seconds, tests, store_s, args.phones, args.hosts, args.bays)
        print(f"nightly ({label}): {args.phones} phones on {args.hosts} hosts x {args.bays} bays: makespan "
              f"{night['makespan_s'] / 60:.1f} min (bays done {night['lab_s'] / 60:.1f} min, store done "
              f"{night['store_s'] / 60:.1f} min, store busy {night['store_busy']:.2%} of the night)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
