"""`bench ab` / `bench bisect` on the command line before any phone is touched, and what `bench
trend` offers under a change point."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from phonebench.bench.ab.report import bisect_command, bisect_offer
from phonebench.bench.ab.session import resolve_build, seeded
from phonebench.bench.catalogue.catalogue import load_catalogue
from phonebench.bench.cli import main
from phonebench.bench.cli.compare import render_trend
from phonebench.bench.results.trend import ChangePoint, NightValue, Series
from phonebench.core.station import EmulatedConfig
from phonebench.emulation.catalogue_factory import write_catalogue


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_catalogue(tmp_path_factory.mktemp("cat"), n_builds=4, payload_bytes=256)


def test_an_unknown_build_is_one_line_naming_the_catalogue(catalogue, capsys):
    assert main(["ab", "3.6.0-dev.001", "nope", "--catalogue", str(catalogue)]) == 2
    err = capsys.readouterr().err
    assert "no build 'nope'" in err and str(catalogue) in err and "Traceback" not in err


def test_a_reversed_range_and_an_unknown_gate_are_said(catalogue, capsys):
    assert main(["bisect", "--good", "3.6.0-dev.004", "--bad", "3.6.0-dev.001", "--catalogue", str(catalogue)]) == 2
    assert "is not before" in capsys.readouterr().err
    assert main(["ab", "3.6.0-dev.001", "3.6.0-dev.002", "--catalogue", str(catalogue), "--metric", "joy"]) == 4
    assert "no A/B gate 'joy'" in capsys.readouterr().err


def test_a_runs_recorded_version_names_its_catalogue_build(catalogue):
    cat = load_catalogue(catalogue)
    assert resolve_build(cat, "3.6.0-dev.002") == "3.6.0-dev.002"
    assert resolve_build(cat, "llmrt 3.6.0-dev.003-emu") == "3.6.0-dev.003"
    with pytest.raises(Exception, match="no build"):
        resolve_build(cat, "llmrt 3.6.0-dev.00-emu")


def test_emulated_phones_get_their_own_seeds():
    phones = seeded(EmulatedConfig(), 40).phones
    assert [p.seed for p in phones] == [40, 41, 42, 43]


def test_the_bisect_command_for_a_trend_change_point():
    assert bisect_command("a b", "c", ["first_token"], ["PB-Emu Dimensity 9300"]) == \
        "bench bisect --good 'a b' --bad c --metric first_token --model 'PB-Emu Dimensity 9300'"
    assert bisect_offer("first_token_p99 (p50)", "M", ["1.0"], ["1.1"]) == \
        "bench bisect --good 1.0 --bad 1.1 --metric first_token --model M --catalogue PATH"
    assert bisect_offer("cover_max", "M", ["1.0"], ["1.1"]) == \
        "bench bisect --good 1.0 --bad 1.1 --model M --catalogue PATH"
    assert bisect_offer("first_token", "M", ["1.0", "1.1"], ["1.1"]) is None  # the nights before ran two builds
    assert bisect_offer("first_token", "M", ["1.1"], ["1.1"]) is None  # not a build change

    def night(run: str, build: str) -> NightValue:
        return NightValue(run, dt.datetime(2026, 12, 1), (build,), 100.0, 2)

    series = Series("token_latency_p50", "M", "ms", 4, True,
                    [night("r1", "3.6.0-dev.001"), night("r2", "3.6.0-dev.002")])
    series.changes = [ChangePoint(1, series.nights[0], series.nights[1], 100.0, 107.0, 0.001, "regressed")]
    lines = render_trend([series])
    assert any("which build? bench bisect --good 3.6.0-dev.001 --bad 3.6.0-dev.002 --metric token_median" in line
               for line in lines)


def test_the_default_gates_are_those_every_bay_can_measure():
    from phonebench.bench.ab.gates import DEFAULT_METRICS, ENERGY_PER_DIALOG, defaults_for

    everything = {"supply", "stimulus", "clock"}
    assert defaults_for([everything, everything]) == (DEFAULT_METRICS, [])
    kept, left_out = defaults_for([everything, {"supply", "clock"}])  # one bay has no stimulus
    assert ENERGY_PER_DIALOG not in kept and set(kept) == set(DEFAULT_METRICS) - {ENERGY_PER_DIALOG}
    assert left_out == [f"{ENERGY_PER_DIALOG} left out: a bay has no stimulus (wire it, or name the gate with "
                        "--metric to require it)"]
