"""The nightly compares like with like (issue 49), end to end: three emulated nights through the
lab's path (`bench run` on a station file, `bench accept-build`, `bench compare --against
accepted`). The accepted night in the rack's room; the same build on a night 2 degC warmer calls
no thermal regression; the same warm night on `npu-hungry-10pct` is called by its power gate, and
the cover's change, referred to 25 degC, is shown with its confidence interval.

As cheap as it shows that: one phone (a model's gates pool its phones; one is enough here), the
nightly profile, claim 6's sustained power and the sustained-use study (the cover gate) only. The
gates' power on a full fleet is benchmarks/bench_nightly_gates.py's (docs/nightly.md)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITE = str(REPO / "suites" / "test_sla_instruments.py")
GATES = "test_sustained_use or test_sustained_and_peak_power"
NIGHT = """\
[station]
name = "nightly-room"
sla_profile = "nightly"

[emulated]
seed = 20261206  # every night the same noise: the room is all that differs

[room]
ambient_c = {ambient_c}

[[emulated.phone]]
serial = "EMU-NR1"
npu_persona = "SM8650-MP"
seed = 4
build = "{build}"
"""
BASE_ROOM_C = 24.6  # the rack's first bay's (emulation/room.py)


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    return env


def _bench(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phonebench.bench.cli", *args], cwd=folder, env=_env(),
                          capture_output=True, text=True, timeout=1800)


def _night(folder: Path, run_id: str, ambient_c: float, build: str = "") -> dict:
    station = folder / f"{run_id}.toml"
    station.write_text(NIGHT.format(ambient_c=ambient_c, build=build))
    proc = _bench(folder, "run", "--station", station.name, "--run-id", run_id, "-q", SUITE, "-k", GATES)
    # 1: a verdict failed its absolute limit (the hungry build's sustained power is over 4.2 W too)
    assert proc.returncode == (1 if build else 0), proc.stdout + proc.stderr
    data = json.loads((folder / "reports" / run_id / "results.json").read_text())
    assert data["status"] == "complete", data.get("problems")
    return data


def _row(output: str, statistic: str) -> str:
    """The model-level row of the comparison table (claim, statistic, ..., call)."""
    return next(line for line in output.splitlines() if re.match(rf"\s*[\d-]+\s+{statistic}\s", line))


def test_a_warm_night_is_no_thermal_regression_and_a_hungry_build_on_it_is_called(tmp_path):
    accepted = _night(tmp_path, "room-base", BASE_ROOM_C)
    assert _bench(tmp_path, "accept-build", "room-base").returncode == 0
    warm = _night(tmp_path, "room-warm", BASE_ROOM_C + 2.0)
    covers = [next(v for t in night["tests"] for v in t["verdicts"] if v["name"] == "cover_temp_max")
              for night in (accepted, warm)]
    rooms = [c["extra"]["ambient"]["mean_c"] for c in covers]
    assert 1.5 < rooms[1] - rooms[0] < 2.5  # the ambient probe read the warmer room
    # As read the cover was ~2 degC hotter; referred to 25 degC it was not (the comparison's value)
    assert 1.5 < covers[1]["extra"]["ambient"]["raw_value"] - covers[0]["extra"]["ambient"]["raw_value"] < 2.5
    assert abs(covers[1]["value"] - covers[0]["value"]) < 0.3

    same_build = _bench(tmp_path, "compare", "room-warm", "--against", "accepted", "--sla-profile", "nightly")
    assert same_build.returncode == 0, same_build.stdout + same_build.stderr  # nothing regressed
    cover = _row(same_build.stdout, "cover_temp_max")
    assert cover.endswith("unchanged"), same_build.stdout

    hungry = _night(tmp_path, "room-warm-hungry", BASE_ROOM_C + 2.0, build="npu-hungry-10pct")
    assert hungry["duts"]["EMU-NR1"]["runtime_version"] != accepted["duts"]["EMU-NR1"]["runtime_version"]
    called = _bench(tmp_path, "compare", "room-warm-hungry", "--against", "accepted", "--sla-profile", "nightly")
    assert called.returncode == 1, called.stdout + called.stderr
    assert _row(called.stdout, "power_sustained_mean").endswith("regressed"), called.stdout
    cover = _row(called.stdout, "cover_temp_max")  # referred to 25 degC: the build's own heat, with its CI
    low, high = (float(x) for x in re.search(r"\[([-+][\d.e+-]+), ([-+][\d.e+-]+)\] degC", cover).groups())
    assert low < high and high > 0.0, called.stdout
