"""Where a run is while it runs (docs/labtime.md, "While a run runs"): the progress lines and the
run's ETA from synthetic run records, then `bench run` piped on the emulated station, and Ctrl-C
in the middle of one. Nothing here asserts a wall time: the clock of the unit tests is a fake."""
from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from phonebench.bench.results.progress_view import BarView, BayWatch, LineView, make_view, wants_bars
from phonebench.bench.results.run_progress import CURRENT_TEST, PhonePlanned, RunProgress, eta_text, run_eta_s
from tests.adb_helpers import ADB_PATH, free_port, private_server_env
from tests.signal_helpers import sigint_as_from_a_terminal

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 1800  # a bound on a hung subprocess, never a measured time


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _test(nodeid: str, dut: str, lab_s: float | None, claims: list[int | None], outcome: str = "passed") -> dict:
    return {"nodeid": f"suites/test_x.py::{nodeid}[{dut}]", "dut": dut, "outcome": outcome, "lab_time_s": lab_s,
            "verdicts": [{"name": f"v{i}", "claim": c, "outcome": "pass"} for i, c in enumerate(claims)]}


def _progress(clock: FakeClock, **plans: float) -> RunProgress:
    return RunProgress({dut: PhonePlanned(seconds, {}) for dut, seconds in plans.items()}, clock=clock)


def test_a_line_per_claim_a_finished_test_decides_with_lab_minutes_against_the_plan():
    clock = FakeClock()
    progress = _progress(clock, EMU0002=48 * 60.0)
    progress.bay_started("bay2")
    assert progress.current("bay2", {"nodeid": "suites/test_x.py::test_a[EMU0002]", "dut": "EMU0002",
                                     "index": 1, "total": 9}) == ["EMU0002  started: 9 tests, 48.0 lab min planned"]
    clock.t += 120
    record = {"duts": {"EMU0002": {}}, "tests": [_test("test_a", "EMU0002", 600.0, [6, 7]),
                                                 _test("test_b", "EMU0002", 300.0, [6], outcome="failed")]}
    lines = progress.record("bay2", record)
    # each test's lines as of that test: 120 wall s for 10 lab min, 38 left at 12 s each is 456 s; then
    # 120 wall s for 15 lab min: 33 lab min left at 8 wall s per lab min is 264 s
    assert lines == [
        "EMU0002  claim 6 Power and energy: done (1 test)  lab 10.0 / 48.0 min planned  run ETA 8 min",
        "EMU0002  claim 7 Back-cover temperature: done (1 test)  lab 10.0 / 48.0 min planned  run ETA 8 min",
        "EMU0002  claim 6 Power and energy: done (2 tests, 1 failed)  lab 15.0 / 48.0 min planned  run ETA 4 min",
    ]
    assert progress.record("bay2", record) == []  # the same record again: nothing new


def test_a_test_deciding_no_claim_prints_nothing_but_counts():
    clock = FakeClock()
    progress = _progress(clock, EMU0001=600.0)
    progress.bay_started("bay1")
    lines = progress.record("bay1", {"tests": [_test("test_identity", "EMU0001", 30.0, [None])]})
    assert lines == ["EMU0001  started: tests, 10.0 lab min planned"]
    assert progress.phones["EMU0001"].tests_done == 1 and progress.phones["EMU0001"].lab_s == 30.0


def test_run_eta_is_the_slowest_phone_by_its_own_pace():
    clock = FakeClock()
    progress = _progress(clock, A=60 * 60.0, B=10 * 60.0)
    for bay in ("a", "b"):
        progress.bay_started(bay)
    clock.t += 600
    progress.record("a", {"tests": [_test("t", "A", 30 * 60.0, [1])]})  # 20 s per lab min, 30 min left: 600 s
    progress.record("b", {"tests": [_test("t", "B", 1 * 60.0, [1])]})  # 600 s per lab min, 9 min left: 5400 s
    assert progress.eta_s() == pytest.approx(5400.0)
    assert eta_text(progress.eta_s()) == "run ETA 1 h 30 min"
    clock.t += 400  # the tests now under way count as progress
    assert progress.eta_s() == pytest.approx(5000.0)
    assert eta_text(progress.eta_s()) == "run ETA 83 min"
    progress.bay_done("b")
    assert progress.eta_s() == pytest.approx(200.0)
    progress.bay_done("a")
    assert progress.eta_s() == 0.0


def test_a_bays_second_phone_counts_its_pace_from_its_own_start():
    clock = FakeClock()
    progress = _progress(clock, A=600.0, B=600.0)
    progress.bay_started("bay1")
    clock.t += 100
    progress.record("bay1", {"tests": [_test("t", "A", 600.0, [1])]})
    clock.t += 900
    progress.current("bay1", {"nodeid": "x::t[B]", "dut": "B"})
    clock.t += 60
    progress.record("bay1", {"tests": [_test("t", "A", 600.0, [1]), _test("t", "B", 300.0, [1])]})
    assert progress.phones["B"].remaining_wall_s(clock()) == pytest.approx(60.0)  # 300 lab s left at 0.2 s each


def test_no_eta_from_a_phones_first_seconds_of_lab_time():
    """`make run`, 2026-12-06: after tests of a few lab seconds the first lines promised "run ETA
    5 h 36 min" for an eight-minute run; a pace counts once a phone has done a minute of its plan."""
    clock = FakeClock()
    progress = _progress(clock, A=104 * 60.0)
    progress.bay_started("a")
    clock.t += 30
    progress.record("a", {"tests": [_test("weights", "A", 5.0, [11])]})
    assert progress.eta_s() is None
    clock.t += 30
    progress.record("a", {"tests": [_test("weights", "A", 5.0, [11]), _test("voice", "A", 120.0, [1])]})
    assert progress.eta_s() is not None


def test_eta_is_unknown_until_every_running_phone_has_a_pace():
    clock = FakeClock()
    progress = _progress(clock, A=600.0)
    progress.current("a", {"nodeid": "x::t[A]", "dut": "A"})
    progress.current("b", {"nodeid": "x::t[B]", "dut": "B"})  # no plan for B
    progress.record("a", {"tests": [_test("t", "A", 60.0, [1])]})
    assert progress.eta_s() is None
    assert eta_text(None) == "run ETA not known yet"
    assert run_eta_s([], clock()) == 0.0


def test_a_bays_instrument_tests_make_no_phone_and_leave_the_eta_known():
    """`make run`, 2026-12-06: each bay's instrument identity tests (no phone) became a phone named
    after the bay, with no plan, and every line said "run ETA not known yet" to the end."""
    clock = FakeClock()
    progress = _progress(clock, EMU0001=600.0)
    progress.bay_started("bay1")
    instrument = {"nodeid": "suites/test_instruments.py::test_instrument_identifies_itself[scope]", "dut": None,
                  "outcome": "passed", "lab_time_s": None, "verdicts": []}
    assert progress.current("bay1", {"nodeid": instrument["nodeid"], "dut": None, "index": 1, "total": 5}) == []
    clock.t += 60
    lines = progress.record("bay1", {"tests": [instrument, _test("t", "EMU0001", 60.0, [1])]})
    assert list(progress.phones) == ["EMU0001"] and not any(line.startswith("bay1") for line in lines)
    assert lines[-1].endswith("run ETA 9 min")
    clock.t += 60
    assert all("EMU0001" in line for line in progress.heartbeat())


def test_without_a_plan_or_a_clock_the_lines_say_so():
    clock = FakeClock()
    progress = RunProgress({}, clock=clock)
    (_, line) = progress.record("bay1", {"tests": [_test("t", "EMU0003", 90.0, [4])]})
    assert line == "EMU0003  claim 4 Token latency jitter: done (1 test)  lab 1.5 min (no plan)  run ETA not known yet"
    planned = RunProgress({"EMU0004": PhonePlanned(600.0, {"suites/test_x.py::t": 120.0})}, clock=clock)
    planned.bay_started("bay4")
    clock.t += 60
    (_, line) = planned.record("bay4", {"tests": [_test("t", "EMU0004", None, [4])]})
    # no lab time recorded: the pace is taken against the finished tests' planned lab time
    assert "lab time not recorded (10.0 min planned)" in line and "run ETA 4 min" in line


def test_heartbeat_at_least_once_a_minute_names_the_test_under_way():
    clock = FakeClock()
    progress = _progress(clock, EMU0001=600.0)
    progress.current("bay1", {"nodeid": "suites/t.py::test_soak[EMU0001]", "dut": "EMU0001", "index": 3, "total": 4})
    clock.t += 59
    assert progress.heartbeat() == []
    clock.t += 2
    (line,) = progress.heartbeat()
    assert line.startswith("EMU0001  still on test_soak (test 3 of 4, 1 min in)  lab 0.0 / 10.0 min planned")
    assert progress.heartbeat() == []  # said: the next one a minute later
    clock.t += 60
    assert len(progress.heartbeat()) == 1
    progress.bay_done("bay1")
    clock.t += 600
    assert progress.heartbeat() == []  # a finished phone is quiet


def test_heartbeat_names_the_claims_of_a_test_another_phone_has_finished():
    clock = FakeClock()
    progress = _progress(clock, EMU0001=600.0, EMU0002=600.0)
    progress.current("bay2", {"nodeid": "suites/test_x.py::test_study[EMU0002]", "dut": "EMU0002", "index": 2,
                              "total": 4})
    progress.record("bay1", {"tests": [_test("test_study", "EMU0001", 300.0, [1, 2])]})
    clock.t += 61
    (line,) = [x for x in progress.heartbeat() if x.startswith("EMU0002")]
    assert line.startswith("EMU0002  still on claims 1, 2: test_study (test 2 of 4, 1 min in)")


def test_a_bay_whose_phone_has_not_shown_up_says_it_is_starting():
    clock = FakeClock()
    progress = _progress(clock, EMU0001=600.0)
    progress.bay_started("bay1")
    clock.t += 61
    assert progress.heartbeat() == ["bay bay1: starting (1 min: collecting the tests, opening its phone)"]
    assert progress.heartbeat() == []
    progress.current("bay1", {"nodeid": "s::t[EMU0001]", "dut": "EMU0001"})
    clock.t += 61
    assert [line.split("  ")[0] for line in progress.heartbeat()] == ["EMU0001"]


def test_finished_line_when_the_bay_ends():
    clock = FakeClock()
    progress = _progress(clock, EMU0001=120.0)
    progress.record("bay1", {"duts": {"EMU0001": {}}, "tests": [_test("t", "EMU0001", 110.0, [3], "error")]})
    assert progress.bay_done("bay1") == [
        "EMU0001  finished: 1 tests, 1 failed  lab 1.8 / 2.0 min planned  run ETA <1 min"]
    assert progress.bay_done("bay1") == []


def test_bay_watch_reads_what_a_worker_rewrote_and_the_line_view_prints_it(tmp_path):
    clock = FakeClock()
    progress = _progress(clock, EMU0001=600.0)
    watch = BayWatch("bay1", tmp_path)
    assert watch.poll(progress) == []  # nothing written yet
    (tmp_path / CURRENT_TEST).write_text(json.dumps({"nodeid": "suites/test_x.py::t[EMU0001]", "dut": "EMU0001", "index": 1,
                                                     "total": 2}))
    (tmp_path / "results.json").write_text(json.dumps({"tests": []}))
    out = io.StringIO()
    view = LineView(progress, out)
    view.show(watch.poll(progress))
    assert watch.poll(progress) == []  # unchanged files are not read again
    (tmp_path / "results.json.tmp").write_text(json.dumps({"tests": [_test("t", "EMU0001", 60.0, [3])]}))
    os.replace(tmp_path / "results.json.tmp", tmp_path / "results.json")  # as write_atomically does
    (tmp_path / CURRENT_TEST).write_text("{half")  # a torn read is skipped, read again next time
    view.show(watch.poll(progress))
    clock.t += 61
    view.refresh()
    lines = out.getvalue().splitlines()
    assert lines[0] == "EMU0001  started: 2 tests, 10.0 lab min planned"
    assert lines[1].startswith("EMU0001  claim 3 First token: done (1 test)  lab 1.0 / 10.0 min planned")
    assert lines[2].startswith("EMU0001  between tests")


def test_bars_only_in_a_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    assert not wants_bars(io.StringIO())
    progress = RunProgress({})
    assert isinstance(make_view(progress, ["EMU0001"]), LineView)  # pytest's stdout is not a terminal

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert wants_bars(Tty())
    monkeypatch.setenv("TERM", "dumb")
    assert not wants_bars(Tty())
    out = Tty()
    bars = BarView(_progress(FakeClock(), EMU0001=600.0), ["EMU0001", "EMU0002"], out)
    bars.show(["EMU0001  claim 3 First token: done (1 test)"])
    bars.close()
    text = out.getvalue()
    assert "claim 3 First token" in text and "EMU0001" in text and "EMU0002" in text


# --- the real thing: `bench run` on the emulated station, piped ---------------------------------
LAB_LINE = re.compile(r"^EMU0001 +claim \d+ .*: done \(.*\)  lab \d+\.\d / \d+\.\d min planned  run ETA", re.M)


def _a_test_under_way(reports: Path, name: str) -> bool:
    for current in reports.glob("**/" + CURRENT_TEST):
        try:
            if name in json.loads(current.read_text()).get("nodeid", ""):
                return True
        except (OSError, ValueError):  # written atomically, but it may be replaced between glob and read
            continue
    return False


@pytest.fixture
def bench_env(tmp_path):
    (tmp_path / "home").mkdir()
    env = private_server_env(tmp_path / "home", free_port())  # never the user's adb server
    env.update(PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    env.pop("PHONEBENCH_STATION", None)
    env.pop("PHONEBENCH_DATABASE", None)
    env.pop("TERM", None)
    yield env
    subprocess.run([ADB_PATH, "-P", env["ANDROID_ADB_SERVER_PORT"], "kill-server"], env=env, capture_output=True,
                   timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.slow
@pytest.mark.integration
def test_bench_run_piped_prints_progress_lines_with_lab_minutes(tmp_path, bench_env):
    proc = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--dut", "EMU0001", "--seed", "1",
                           "-k", "identity or identifies or first_token"], cwd=tmp_path, env=bench_env, capture_output=True,
                          text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^EMU0001 +started: 5 tests, \d+\.\d lab min planned$", proc.stdout, re.M), proc.stdout
    assert LAB_LINE.search(proc.stdout), proc.stdout
    assert re.search(r"^EMU0001 +finished: 5 tests  lab \d+\.\d / ", proc.stdout, re.M), proc.stdout
    assert not re.search(r"^bay\S* +started", proc.stdout, re.M), proc.stdout  # instrument tests are no phone
    assert "\r" not in proc.stdout and "\x1b[" not in proc.stdout  # a log gets lines, not bars
    data = json.loads((tmp_path / "reports" / "latest" / "results.json").read_text())
    phone_tests = [t for t in data["tests"] if t["dut"] == "EMU0001"]
    assert data["status"] == "complete" and len(phone_tests) == 5  # progress is display only
    assert len(data["tests"]) > 5 and not any(t["dut"] for t in data["tests"] if t not in phone_tests)


@pytest.mark.slow
@pytest.mark.integration
def test_ctrl_c_in_the_middle_stores_the_run_incomplete_without_a_traceback(tmp_path, bench_env):
    proc = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", "--dut", "EMU0001",
                             "-k", "identity or token_latency_std"], cwd=tmp_path, env=bench_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            preexec_fn=sigint_as_from_a_terminal)
    stdout: list[str] = []
    stderr: list[str] = []
    readers = [threading.Thread(target=lambda: stdout.extend(proc.stdout), daemon=True),  # never a full pipe
               threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)]
    for reader in readers:
        reader.start()
    try:  # the long test under way, as the bay says in its current.json: the trigger is the run's own state
        while not _a_test_under_way(tmp_path / "reports", "token_latency_std"):
            if proc.poll() is not None:
                pytest.fail(f"bench run ended before its long test began (exit {proc.returncode}): "
                            + "".join(stdout) + "".join(stderr))
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for reader in readers:
        reader.join(timeout=60)
    out, err = "".join(stdout), "".join(stderr)
    assert code == 2, out + err  # interrupted (docs/faults.md)
    assert "Traceback" not in out + err
    assert "interrupted" in err
    run_dirs = [p for p in (tmp_path / "reports").iterdir() if p.is_dir() and not p.is_symlink()]
    (run_dir,) = run_dirs
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] != "complete"
    assert "stored incomplete" in err
