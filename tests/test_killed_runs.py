"""Whole `bench run` processes killed at seeded points of the record's life (PHONEBENCH_KILL_AT,
core/killpoints.py: between tests, inside a verdict, inside the store's transaction, before
and after each results.json write), each followed by the next `bench run`, which heals it; then
`bench runs`. Every run's results.json and stored run end equal, with a final status, and
nothing a killed run had recorded is missing."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from phonebench.core.killpoints import ENV
from tests.signal_helpers import sigint_ignored
from phonebench.core.paths import SOURCE_ROOT
from phonebench.bench.store import open_store

WAIT_S = 900.0  # an upper bound for a loaded machine: a hang fails, nothing is timed
TESTS = 4  # suites/test_identity.py on one phone
STATION = """[station]
name = "kill-rack"
[emulated]
instruments = false
[[emulated.phone]]
serial = "EMU0001"
"""
EVENT_POINTS = [f"{when}:{event}@1" for event in ("start", "dut", "finish") for when in ("write", "written", "stored")]
TEST_POINTS = [f"{when}:test@{n}" for n in range(1, TESTS + 1) for when in ("write", "written", "stored")]
OTHER_POINTS = [f"verdict@{n}" for n in range(1, 9)] + ["raw@1", "raw@2"] + [f"store-commit@{n}" for n in range(1, 7)]


def bench(folder: Path, *args: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env.update(PYTHONPATH=str(SOURCE_ROOT), PHONEBENCH_MIN_FREE_MB="0", **({ENV: kill_at} if kill_at else {}))
    return subprocess.run([sys.executable, "-m", "phonebench.bench.cli", *args], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=WAIT_S)


def run(folder: Path, run_id: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    return bench(folder, "run", "--station", "station.toml", "--no-preflight", "-q", "-k", "identity",
                 "--results-dir", "reports", "--run-id", run_id, kill_at=kill_at)


def _stations_left(folder: Path) -> list[str]:
    """Emulated stations started by this test's runs still running (each stops once its run is
    gone and its stdin closes: waited for, up to WAIT_S, never timed)."""
    import psutil

    deadline = time.monotonic() + WAIT_S
    while True:
        left = [" ".join(p.info["cmdline"]) for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] and "emulate" in p.info["cmdline"] and str(folder) in " ".join(p.info["cmdline"])]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _tests(data: dict) -> list[tuple]:
    return [(t["nodeid"], t["outcome"], [(v["name"], v["value"], v["outcome"]) for v in t["verdicts"]])
            for t in data["tests"]]


def test_killed_bench_runs_heal_at_the_next_start(tmp_path: Path) -> None:
    (tmp_path / "station.toml").write_text(STATION, encoding="utf-8")
    points = random.Random(20261201).sample(EVENT_POINTS + TEST_POINTS + OTHER_POINTS, 22)
    killed: dict[str, str] = {}
    for i, point in enumerate(points):
        run_id = f"k{i:02d}-{point.replace(':', '-').replace('@', '-')}"
        done = run(tmp_path, run_id, kill_at=point)
        assert done.returncode == -signal.SIGKILL, f"{point} was not reached: {done.stdout[-800:]}{done.stderr[-800:]}"
        killed[run_id] = point
    assert _stations_left(tmp_path) == [], "a killed run left its emulated station running"
    last = run(tmp_path, "after")  # heals the last killed run at its start, then runs whole
    assert last.returncode == 0, last.stdout[-2000:] + last.stderr[-2000:]
    listed = bench(tmp_path, "runs", "--results-dir", "reports", "--limit", "0")
    assert listed.returncode == 0 and "healed:" not in listed.stdout  # every run start healed the one before

    with open_store(tmp_path / "reports" / "results.sqlite") as store:
        for run_id, point in killed.items():
            results = tmp_path / "reports" / run_id / "results.json"
            if not results.exists():  # killed before its first record (or while healing the run
                assert point == "write:start@1" or point.startswith("store-commit"), point  # before it)
                continue  # nothing was measured
            on_disk = json.loads(results.read_text(encoding="utf-8"))
            stored = store.load_run(run_id).data
            assert on_disk["status"] in ("incomplete", "complete"), point
            assert stored["status"] == on_disk["status"], point
            assert _tests(stored) == _tests(on_disk), f"{point}: the store and results.json differ"
            what, _, nth = point.partition("@")
            if what.endswith(":test"):  # a finished test is in both as soon as results.json took it
                assert len(on_disk["tests"]) == int(nth) - (what == "write:test"), point
            if what.endswith(":finish"):
                assert len(on_disk["tests"]) == TESTS, point
            assert not (results.parent / ".recording.lock").exists(), point
        statuses = {r.run_id: r.status for r in store.list_runs(limit=None)}
    assert statuses.pop("after") == "complete"
    assert "running" not in statuses.values()
    assert f"healed: run {list(killed)[-1]} was killed" in last.stdout


def _ignores_sigint(pid: int) -> bool:
    """Linux: SIGINT in the process's ignored-signals mask (/proc/PID/status, SigIgn)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigIgn:"))
    return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)


def test_a_bays_run_killed_9_leaves_no_worker_and_is_listed_incomplete_with_what_finished(tmp_path: Path) -> None:
    """kill -9 of a two-bay `bench run`'s process group once a bay has finished a test: every bay
    worker dies with it (no worker records vanished phones as errors), and the next bench command
    merges what the bays kept into one run stored incomplete."""
    import psutil

    env = {k: v for k, v in os.environ.items() if k != ENV}
    env.update(PYTHONPATH=str(SOURCE_ROOT), PHONEBENCH_MIN_FREE_MB="0")
    proc = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", "--bays", "2", "-k", "identity",
                             "--no-preflight", "--run-id", "killed-bays"], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=sigint_ignored)
    run_dir = tmp_path / "reports" / "killed-bays"
    deadline = time.monotonic() + WAIT_S
    workers: list[int] = []
    while time.monotonic() < deadline:
        bay_results = list(run_dir.glob("bays/*/results.json"))
        if any(json.loads(p.read_text() or "{}").get("tests") for p in bay_results if p.stat().st_size):
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    children = psutil.Process(proc.pid).children(recursive=True)
    workers = [c.pid for c in children]
    bay_workers = [c.pid for c in children if "pytest" in c.cmdline()]
    assert bay_workers and not [p for p in bay_workers if _ignores_sigint(p)]  # the parent stops them by SIGINT
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    while time.monotonic() < deadline and any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                                              for p in workers):
        time.sleep(0.2)
    assert not [p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    listed = bench(tmp_path, "runs", "--results-dir", "reports")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("killed-bays"))
    assert "incomplete" in row.split()
    with open_store(tmp_path / "reports" / "results.sqlite") as store:
        stored = store.load_run("killed-bays").data
    assert stored["status"] == "incomplete" and len(stored["tests"]) >= 1
    errors = [t for t in stored["tests"] if t["outcome"] == "error"]
    assert not errors, errors  # no worker drove a vanished phone
