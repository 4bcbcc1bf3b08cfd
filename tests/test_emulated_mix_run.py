"""A lab with a Rigol scope and a Fluke 1529 readout rehearses on the emulated station: the
instrument suite runs through `bench run` with those families and passes, reached by the drivers
the lab would use (phonebench.drivers.scope.RigolDS1000Z, phonebench.drivers.thermal_fluke.Fluke1529)."""
from __future__ import annotations

from pathlib import Path

from test_bench_run import bench

REPO = Path(__file__).resolve().parent.parent
INSTRUMENT_SUITE = str(REPO / "suites" / "test_instruments.py")


def test_instrument_suite_passes_on_a_rigol_and_fluke_station(tmp_path):
    station = tmp_path / "station.toml"
    station.write_text('[emulated]\nseed = 1\nscope = "rigol-ds1000z"\nthermal = "fluke-1529"\n'
                       '[[emulated.phone]]\nserial = "EMU-T1"\n')
    proc, data = bench(tmp_path, "run", "--station", str(station), INSTRUMENT_SUITE, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RIGOL TECHNOLOGIES DS1104Z" in proc.stdout and "HART SCIENTIFIC 1529" in proc.stdout
    assert data["status"] == "complete"
    assert data["tests"] and all(t["outcome"] == "passed" for t in data["tests"])
    verdicts = [v for t in data["tests"] for v in t["verdicts"]]
    assert {"dialog_answer_latency_one_trial", "thermal_rise_under_load"} <= {v["name"] for v in verdicts}
    assert all(v["outcome"] != "fail" for v in verdicts)


def test_bench_emulate_names_the_valid_families_for_a_wrong_one(tmp_path):
    proc, _ = bench(tmp_path, "emulate", "--instrument", "thermal=omega-ir", "--seconds", "0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "'omega-ir' is not an emulated thermal family" in proc.stderr
    assert "fluke-1529" in proc.stderr
