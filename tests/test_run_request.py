"""One typed run request (phonebench.bench.station.request): `bench run` and a lab's plain pytest
build equal requests for equal inputs, the SLA profile is found by one search rule, a bay's worker
gets the request whole, and `bench plan` plans the default emulated fleet as `bench run` runs it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from phonebench.bench.cli import build_parser, main
from phonebench.bench.cli.request import from_cli
from phonebench.bench.station.request import Mode, ProfileRef, RunRequest, Selection, StationRef, resolve_profile
from phonebench.core.paths import SOURCE_ROOT
from phonebench.core.station import StationConfig, load_station
from phonebench.fixtures.session import BENCH

STATION = """\
[station]
name = "lab"
sla_profile = "mine"

[emulated]
instruments = false

[[emulated.phone]]
serial = "EMU0001"

[[emulated.phone]]
serial = "EMU0002"
"""

# A profile of the lab's own, beside its station file: found there, before the shipped ones.
MINE = 'name = "mine"\nextends = "default"\n'
NIGHTLY_OF_THE_LAB = 'name = "lab-nightly"\nextends = "nightly"\n'

TESTS = "def test_nothing_to_open():\n    pass\n"


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lab's folder as its engineers run from it: a station file, its profiles, a test file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PHONEBENCH_STATION", raising=False)
    monkeypatch.delenv("PHONEBENCH_DATABASE", raising=False)
    (tmp_path / "station.toml").write_text(STATION)
    (tmp_path / "mine.toml").write_text(MINE)
    (tmp_path / "nightly.toml").write_text(NIGHTLY_OF_THE_LAB)
    (tmp_path / "test_lab.py").write_text(TESTS)
    return tmp_path


def cli_request(*argv: str) -> RunRequest:
    return from_cli(build_parser().parse_args(["run", *argv]))


class _Request:
    """The request the plugin's session holds, taken when pytest is configured."""

    request: RunRequest | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self.request = config.stash[BENCH].request


def pytest_request(*argv: str) -> RunRequest:
    """The request plain pytest with the plugin builds from `argv` (collection only: nothing opens)."""
    taken = _Request()
    code = pytest.main([*argv, "-p", "phonebench", "-p", "no:cacheprovider", "--collect-only", "-qq",
                        "--import-mode=importlib",  # each test's test_lab.py is another module
                        "-W", "ignore::pytest.PytestAssertRewriteWarning"],  # this process imported the plugin
                       plugins=[taken])
    assert code in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) and taken.request is not None
    return taken.request


SAME_INPUTS = [
    ["test_lab.py", "--station", "station.toml"],
    ["test_lab.py", "--station", "station.toml", "--dut", "EMU0002", "-m", "acceptance", "-k", "voice",
     "--sla-profile", "nightly", "--results-dir", "out", "--run-id", "night-1", "--persona", "slow",
     "--fault", "kill-on:llmrt"],
    ["test_lab.py", "--station", "station.toml", "--bay", "bay2", "--sla-profile", str(Path("mine.toml"))],
    ["test_lab.py", "--dut", "EMU0003", "--sla-profile", "nightly"],  # the embedded emulated fleet
]


@pytest.mark.parametrize("argv", SAME_INPUTS, ids=["station", "everything", "one-bay", "fleet"])
def test_bench_run_and_plain_pytest_build_equal_requests(lab: Path, argv: list[str]) -> None:
    assert cli_request(*argv) == pytest_request(*argv)


def test_the_request_says_what_the_run_is(lab: Path) -> None:
    request = cli_request(*SAME_INPUTS[1])
    assert request.station == StationRef(file=Path("station.toml"), persona="slow", faults=("kill-on:llmrt",))
    assert request.selection == Selection(suites=("test_lab.py",), duts=("EMU0002",), marker="acceptance",
                                          keyword="voice")
    assert request.results.folder == lab / "out" and request.results.run_id == "night-1"
    assert request.store == f"sqlite:///{lab / 'out' / 'results.sqlite'}"
    assert (request.profile.name, request.mode) == ("lab-nightly", Mode.NIGHTLY)  # the lab's nightly, not ours


def test_the_profile_is_looked_for_beside_the_station_then_among_the_shipped_ones(lab: Path) -> None:
    station = load_station(lab / "station.toml")
    assert resolve_profile(None, station).path == lab / "mine.toml"  # the station's own profile, in its folder
    assert resolve_profile("nightly", station).path == lab / "nightly.toml"  # its folder first
    shipped = SOURCE_ROOT / "sla_profiles" / "nightly.toml"
    assert resolve_profile("nightly", None).path == shipped
    assert resolve_profile("nightly", StationConfig(name="emulated", source=None)).path == shipped
    assert resolve_profile("acceptance", station).path == SOURCE_ROOT / "sla_profiles" / "acceptance.toml"
    assert resolve_profile(None, None) == ProfileRef("default", SOURCE_ROOT / "sla_profiles" / "default.toml")


def test_a_profile_found_once_stays_with_the_run_on_the_station_file_it_writes(lab: Path) -> None:
    """`bench run` runs an emulated station through the file it writes elsewhere, and a place
    through the file its resources make: the profile found beside the lab's station stays."""
    request = cli_request("--station", "station.toml")
    elsewhere = lab / "run" / "emulated" / "station.toml"
    moved = request.at_station(elsewhere)
    assert moved.station == StationRef(file=elsewhere)
    assert (moved.profile, moved.results, moved.store) == (request.profile, request.results, request.store)


def test_a_bay_worker_gets_the_request_whole_as_json(lab: Path) -> None:
    request = cli_request("test_lab.py", "--station", "station.toml", "--dut", "EMU0002", "--dut", "EMU0001",
                          "--sla-profile", "nightly", "--jobs", "2").in_run(lab / "reports" / "r1")
    worker = request.for_bay("bay2", ["EMU0002"], lab / "reports" / "r1" / "bays" / "bay2")
    assert worker.selection.duts == ("EMU0002",) and worker.bay == "bay2" and worker.jobs is None
    assert (worker.results.folder, worker.results.run_id) == (lab / "reports" / "r1" / "bays", "bay2")
    assert RunRequest.from_json(worker.to_json()) == worker
    assert RunRequest.from_json(request.to_json()) == request


def test_a_store_password_never_goes_into_the_request(lab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHONEBENCH_DATABASE", "postgresql://bench:secret@db.lab:5432/results")
    request = cli_request("--station", "station.toml")
    assert request.store == "postgresql://bench@db.lab:5432/results"
    assert "secret" not in request.to_json()


def test_a_lab_acceptance_run_is_an_acceptance_request(lab: Path) -> None:
    request = pytest_request("test_lab.py", "--station", "station.toml", "--require-calibration")
    assert request.mode is Mode.ACCEPTANCE
    assert cli_request("test_lab.py", "--station", "station.toml").mode is Mode.RELEASE


def test_inputs_that_do_not_go_together_are_one_line_each(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--station", "station.toml", "--bays", "2"]) == 2
    assert main(["plan", "--bays", "7"]) == 2
    assert main(["plan", "--place", "rack7-a", "--station", "station.toml"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bench: error: ")]
    assert len(errors) == 3
    assert "--bays makes an emulated fleet; it does not go with --station" in errors[0]
    assert "--bays 7: the emulated rack has 1 to 4 bays" in errors[1]
    assert "--place builds the station from the place's resources" in errors[2]
    assert not (lab / "reports").exists()


def test_plan_without_a_station_plans_the_fleet_as_bench_run_runs_it(lab: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The default emulated fleet has a bay per phone, tested at once: its makespan is the longest
    phone's lab time, not the sum of them."""
    suite = str(SOURCE_ROOT / "suites" / "test_sla_runtime.py")
    assert main(["plan", "--json", "-k", "first_token", "--database", str(lab / "none.sqlite"), suite]) == 0
    plan = json.loads(capsys.readouterr().out)
    bays = {phone["dut"]: phone["bay"] for phone in plan["phones"]}
    assert len(bays) > 1 and len(set(bays.values())) == len(bays)  # a bay per phone
    assert plan["bays_at_once"] == len(bays)
    assert plan["makespan_s"] == max(phone["lab_time_s"] for phone in plan["phones"])
    assert not (lab / "none.sqlite").exists()  # planning never creates a store

