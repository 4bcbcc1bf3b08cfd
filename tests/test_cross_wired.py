"""A cross-wired bay is caught (issue 31): two bays whose supply cables are swapped (an emulated
station fault: every address and identity in the station file stays right) fail the wiring check
on both phones, each naming its supply and the likely mix-up; the same station wired straight
passes. The pattern each phone works in is drawn from entropy, so two bays running the same test
at the same moment cannot match each other's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STATION = """[station]
name = "{name}"
[emulated]
seed = 1
{wiring}
[[emulated.phone]]
serial = "EMU-W1"
npu_persona = "SM8650-MP"
[[emulated.phone]]
serial = "EMU-W2"
npu_persona = "MT6991-MP"
"""


def _run(tmp_path: Path, name: str, wiring: str) -> tuple[subprocess.CompletedProcess, dict]:
    station = tmp_path / f"{name}.toml"
    station.write_text(STATION.format(name=name, wiring=wiring))
    done = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--station", str(station), "-k",
                           "wired", "--run-id", name, "--no-preflight"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=900)
    return done, json.loads((tmp_path / "reports" / name / "results.json").read_text())


def _verdicts(data: dict) -> dict[str, dict]:
    return {t["dut"]: v for t in data["tests"] for v in t["verdicts"] if v["name"] == "supply_follows_this_phone_ms"}


def test_swapped_supply_cables_fail_both_bays_naming_the_mix_up(tmp_path: Path) -> None:
    done, data = _run(tmp_path, "crossed", 'cross_wired = ["bay1", "bay2"]')
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = _verdicts(data)
    assert set(verdicts) == {"EMU-W1", "EMU-W2"}
    for phone, verdict in verdicts.items():
        assert verdict["outcome"] == "fail" and verdict["evidence"] == "measured"
        assert verdict["detail"].startswith("cross-wired?") and f"does not follow {phone}" in verdict["detail"]
    assert done.stdout.count("cross-wired?") == 2  # said on the screen, not only in the record


def test_the_same_bays_wired_straight_pass(tmp_path: Path) -> None:
    done, data = _run(tmp_path, "straight", "")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {v["outcome"] for v in _verdicts(data).values()} == {"pass"}


@pytest.mark.parametrize("value", ['["bay1"]', '["bay1", "bay1"]'])
def test_cross_wired_names_two_different_bays(tmp_path: Path, value: str) -> None:
    from phonebench.core.errors import ConfigError
    from phonebench.core.station import load_station

    path = tmp_path / "bad.toml"
    path.write_text(STATION.format(name="bad", wiring=f"cross_wired = {value}"))
    with pytest.raises(ConfigError, match="two different bay names"):
        load_station(path)
