"""A whole station run on the lab's path: `bench run --station` against an emulated station, its
phones reached through the adb server (the default transport), beside the same run with the
direct transport.

Each run starts the emulated station as its own process and runs through the station file it
writes, exactly as `make run` does. Printed per transport: the whole run's wall time, the lab time
(the station clock: the emulated world's time while the tests ran, what the run would take on
hardware) summed over the run's tests, the verdicts and their evidence kinds, and the ratio
server / direct of the wall time measured in this one invocation (the machine's speed cancels).

    .venv/bin/python benchmarks/bench_station_run.py [--phones N] [-k EXPR]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # as benchmarks/bench_line.py: run as a script from the checkout

from phonebench.core.station import EmulatedConfig, EmulatedPhoneConfig, StationConfig  # noqa: E402
from phonebench.core.station_writer import write_emulated_station  # noqa: E402
DEFAULT_SELECTION = "identity or energy_per_dialog or first_token or voice_latency_sanity or weights_merkle"


def station_file(folder: Path, transport: str, phones: int) -> Path:
    """The emulated station to start, written by the bench's one station writer."""
    personas = ("SM8650-MP", "SM8650-ES", "MT6989-MP", "SM8650-MP2")
    emulated = EmulatedConfig(transport=transport, phones=[
        EmulatedPhoneConfig(serial=f"EMU{i + 1:04d}", npu_persona=personas[i % 4], seed=i) for i in range(phones)])
    return write_emulated_station(folder / f"{transport}.toml", StationConfig(name=f"bench-{transport}", source=None),
                                  emulated)


def one_run(folder: Path, transport: str, phones: int, selection: str) -> dict:
    station = station_file(folder, transport, phones)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "-q", "--station", str(station),
                           "--run-id", transport, "-k", selection], cwd=folder, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    results = folder / "reports" / transport / "results.json"
    data = json.loads(results.read_text()) if results.exists() else {"tests": []}
    verdicts = [v for t in data["tests"] for v in t["verdicts"]]
    return {"transport": transport, "exit": proc.returncode, "wall_s": wall, "tests": len(data["tests"]),
            "lab_s": sum(t.get("lab_time_s") or 0.0 for t in data["tests"]),
            "outcomes": collections.Counter(v["outcome"] for v in verdicts),
            "evidence": collections.Counter(v.get("evidence") or "unstated" for v in verdicts),
            "tail": proc.stdout.strip().splitlines()[-3:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=2, help="emulated phones, a bay each (default 2)")
    parser.add_argument("-k", default=DEFAULT_SELECTION, help="which tests (a pytest -k expression)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="phonebench-bench-run-") as tmp:
        rows = [one_run(Path(tmp), transport, args.phones, args.k) for transport in ("server", "direct")]
    print(f"whole station run, {args.phones} phones (a bay each), -k {args.k!r}")
    print(f"{'transport':10} {'exit':>4} {'tests':>5} {'wall s':>8} {'lab s':>9}  verdicts / evidence")
    for r in rows:
        print(f"{r['transport']:10} {r['exit']:>4} {r['tests']:>5} {r['wall_s']:>8.1f} {r['lab_s']:>9.1f}  "
              f"{dict(r['outcomes'])} / {dict(r['evidence'])}")
        if r["exit"] != 0:
            print("   " + " | ".join(r["tail"]))
    server, direct = rows
    print(f"wall time server / direct: {server['wall_s'] / direct['wall_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
