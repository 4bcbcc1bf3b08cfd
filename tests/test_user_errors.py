"""A user's mistake on the command line is one line naming what exists and a documented exit
code (docs/faults.md), never a traceback, and leaves no run folder or store behind."""
from __future__ import annotations

from pathlib import Path

import pytest

from phonebench.bench.cli import main
from phonebench.core.exits import USAGE

STATION = """[station]
name = "two-phones"
results_dir = "out"
[[dut]]
name = "bay1"
adb = "127.0.0.1:1"
[[dut]]
name = "bay2"
adb = "127.0.0.1:2"
"""


def one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    text = (out + err).strip()
    assert "Traceback" not in text and "pytest.UsageError" not in text
    assert len(text.splitlines()) == 1, text
    return text


@pytest.mark.parametrize("argv, says", [
    (["--dut", "EMU0009"], "--dut EMU0009: not a DUT of station 'emulated'; known: EMU0001, EMU0002"),
    (["--persona", "nosuch"], "--persona nosuch: not a persona of the emulated phones; known: answer-replay, audit-drop"),
    (["--fault", "nosuch"], "--fault nosuch: not a fault of the emulated phones (or kill-on:COMMAND); known:"),
    (["--bay", "nosuch"], "--bay nosuch: not a bay of the emulated station; known: bay1, bay2, bay3, bay4"),
    (["--bays", "2", "--bay", "bay7"], "--bay bay7: not a bay of the emulated station; known: bay1, bay2"),
])
def test_an_unknown_name_is_one_line_and_exit_4(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", *argv]) == USAGE == 4
    assert says in one_line_error(capsys)
    assert not (tmp_path / "reports").exists()  # no run folder claimed for a mistake


def test_a_station_files_duts_are_named(capsys, tmp_path):
    station = tmp_path / "lab.toml"
    station.write_text(STATION)
    assert main(["run", "--station", str(station), "--dut", "bay3", "--no-preflight"]) == USAGE
    assert "--dut bay3: not a DUT of station 'two-phones'; known: bay1, bay2" in one_line_error(capsys)
    assert main(["run", "--station", str(station), "--persona", "slow"]) == USAGE
    assert f"{station} has real phones" in one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def test_option_help_lists_the_personas_and_faults(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps at hyphens
    assert "oneofanswer-replay,audit-drop," in text and ",nominal," in text and ",slow," in text
    assert "no-redundancy" in text and "kill-on:COMMAND" in text


def test_a_store_in_a_folder_that_does_not_exist_is_an_error(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "--database", "no-such-folder/x.sqlite"]) == 2
    assert "the folder" in one_line_error(capsys) and not (tmp_path / "no-such-folder").exists()
    assert main(["runs", "--database", "x.sqlite"]) == 2
    assert "no results store at" in one_line_error(capsys) and not (tmp_path / "x.sqlite").exists()


def test_bench_runs_elsewhere_creates_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 0
    assert one_line_error(capsys).startswith("no runs yet:")
    assert list(tmp_path.iterdir()) == []


def test_bench_report_without_a_store_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "some-run"]) == 2
    assert "no results store at" in one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []
