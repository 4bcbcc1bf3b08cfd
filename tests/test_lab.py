"""The lab with the real parts: a labgrid-coordinator and two labgrid-exporters on loopback, each
host exporting an emulated bay; benches acquire places, wait for held ones, reclaim a killed
bench's place, and store into one PostgreSQL database."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.system_packages import require
from tests.postgres_helpers import ScratchPostgres, postgres_bindir

REPO = Path(__file__).resolve().parent.parent
IDENTITY = str(REPO / "suites" / "test_identity.py")
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(not (BIN / "labgrid-coordinator").exists(), reason="labgrid not installed (lab extra)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if postgres_bindir() is None:
        require("postgresql", False)
    folder = tmp_path_factory.mktemp("lab")
    port = _free_port()
    coordinator = f"127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LG_COORDINATOR": coordinator}
    env.pop("PHONEBENCH_STATION", None)
    procs = []

    def start(*command: str, log: str) -> subprocess.Popen:
        proc = subprocess.Popen(command, cwd=folder, env=env, stdout=open(folder / log, "w"), stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    def client(*args: str, user: str = "tester") -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "labgrid-client"), *args], env={**env, "LG_USERNAME": user},
                              capture_output=True, text=True, timeout=60)

    with ScratchPostgres() as pg:
        try:
            start(str(BIN / "labgrid-coordinator"), "-l", coordinator, log="coordinator.log")
            for host in ("hostA", "hostB"):
                start(sys.executable, "-m", "phonebench.bench.cli", "lab", "emulate", "--bays", "1", "-o", f"{host}.yaml",
                      log=f"{host}-emulate.log")
            _wait_for(lambda: all((folder / f"{h}.yaml").exists() for h in ("hostA", "hostB")), 120, "emulated hosts")
            for host in ("hostA", "hostB"):
                start(str(BIN / "labgrid-exporter"), "-c", coordinator, "--name", host, f"{host}.yaml",
                      log=f"{host}-exporter.log")
            _wait_for(lambda: client("resources").stdout.count("PhonebenchPhone") == 2, 60, "both exporters")
            for host in ("hostA", "hostB"):
                made = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "lab", "places", "--exporter", host,
                                       "--bay", "bay1", "--coordinator", coordinator], cwd=folder, env=env,
                                      capture_output=True, text=True, timeout=60)
                assert made.returncode == 0, made.stdout + made.stderr
            yield {"folder": folder, "env": {**env, "PHONEBENCH_DATABASE": pg.create_database("lab")},
                   "client": client, "coordinator": coordinator}
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def bench(lab, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", *args, "-q", IDENTITY], cwd=lab["folder"],
                            env=lab["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **kw)


def owner(lab, place: str) -> str:
    out = lab["client"]("-p", place, "show").stdout
    return next((line.split(": ", 1)[1] for line in out.splitlines() if line.strip().startswith("acquired:")), "")


def test_two_benches_on_two_places_share_one_store(lab):
    first, second = bench(lab, "--place", "hostA-bay1"), bench(lab, "--place", "hostB-bay1")
    out1, out2 = first.communicate(timeout=600)[0], second.communicate(timeout=600)[0]
    assert first.returncode == 0, out1
    assert second.returncode == 0, out2
    assert owner(lab, "hostA-bay1") == "None" and owner(lab, "hostB-bay1") == "None"  # released
    runs = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "runs"], cwd=lab["folder"], env=lab["env"],
                          capture_output=True, text=True, timeout=120)
    assert runs.returncode == 0, runs.stderr
    assert "hostA-bay1" in runs.stdout and "hostB-bay1" in runs.stdout  # both hosts' runs in the one store


def test_places_by_pattern_run_one_bench_per_place(lab):
    proc = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", "--places", "host*-bay1", "-q", IDENTITY],
                            cwd=lab["folder"], env=lab["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out
    assert "place hostA-bay1: exit code 0" in out and "place hostB-bay1: exit code 0" in out


def test_a_held_place_makes_the_bench_wait_then_fail_naming_the_holder(lab):
    held = lab["client"]("-p", "hostA-bay1", "acquire", user="alice")
    assert held.returncode == 0, held.stdout + held.stderr
    try:
        proc = bench(lab, "--place", "hostA-bay1", "--place-wait", "3")
        out = proc.communicate(timeout=120)[0]
        assert proc.returncode == 2, out
        assert "held by" in out and "alice" in out
    finally:
        lab["client"]("-p", "hostA-bay1", "release", user="alice")


def test_a_bench_waits_for_a_held_place_and_runs_once_it_is_released(lab):
    held = lab["client"]("-p", "hostA-bay1", "acquire", user="bob")
    assert held.returncode == 0, held.stdout + held.stderr
    proc = bench(lab, "--place", "hostA-bay1", "--place-wait", "300")
    said = []
    try:
        for line in proc.stdout:  # released only once the bench says it waits, however slow the host
            said.append(line)
            if "held by" in line:
                break
        assert proc.poll() is None, "".join(said)
    finally:
        lab["client"]("-p", "hostA-bay1", "release", user="bob")
    out = "".join(said) + proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out
    assert "held by" in out and "bob" in out  # it said whom it waited for


def test_a_killed_bench_leaves_its_place_reclaimable(lab):
    proc = bench(lab, "--place", "hostB-bay1")
    _wait_for(lambda: owner(lab, "hostB-bay1") not in ("", "None"), 120, "the bench to acquire its place")
    os.killpg(proc.pid, signal.SIGKILL)  # no chance to release
    proc.communicate(timeout=60)
    assert str(proc.pid) in owner(lab, "hostB-bay1")  # still held by the dead process
    again = bench(lab, "--place", "hostB-bay1", "--place-wait", "30")
    out = again.communicate(timeout=600)[0]
    assert again.returncode == 0, out
    assert owner(lab, "hostB-bay1") == "None"


def test_places_sharing_a_probe_board_take_turns_on_it(lab):
    """Two places of one exporter share its probe board and supply mainframe. While another
    process holds the board, `bench run --places` waits for it (it used to fail at once, "waited
    0 s", naming a temporary station file already deleted), then both places run; every station
    file a message names still exists."""
    folder, env = lab["folder"], {**lab["env"], "PHONEBENCH_LOCK_DIR": str(lab["folder"] / "locks")}
    emulator = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "lab", "emulate", "--bays", "2", "-o", "hostC.yaml"],
                                cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    exporter = holder = None
    try:
        assert "resources in" in emulator.stdout.readline()
        probes = {r["address"] for group in json.loads((folder / "hostC.yaml").read_text()).values()
                  for r in group.values() if r.get("role") == "thermal"}
        assert len(probes) == 1  # one board, a channel group per bay
        exporter = subprocess.Popen([str(BIN / "labgrid-exporter"), "-c", lab["coordinator"], "--name", "hostC",
                                     "hostC.yaml"], cwd=folder, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        _wait_for(lambda: lab["client"]("resources").stdout.count("PhonebenchPhone") == 4, 60, "hostC's bays")
        made = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "lab", "places", "--exporter", "hostC", "--bay", "bay1",
                               "--bay", "bay2", "--coordinator", lab["coordinator"]], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stdout + made.stderr
        holder = subprocess.Popen([sys.executable, "-c", "import sys\nfrom phonebench.drivers.locks import acquire\n"
                                   f"acquire({probes.pop()!r}, 'another run')\nprint('held', flush=True)\n"
                                   "sys.stdin.read()"], cwd=folder, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        run = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", "--places", "hostC-*", "--place-wait", "600",
                                "-q", IDENTITY], cwd=folder, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        said = []
        for line in run.stdout:  # a place's preflight says it waits for the board's holder
            said.append(line)
            if f"in use by pid {holder.pid} " in line and "waiting up to 600 s" in line:
                break
        holder.stdin.close()
        holder.wait(timeout=60)
        out = "".join(said) + run.communicate(timeout=900)[0]
        assert run.returncode == 0, out
        assert "place hostC-bay1: exit code 0" in out and "place hostC-bay2: exit code 0" in out
        named = set(re.findall(r"(/\S+?\.toml)\b", out))
        assert all(Path(p).exists() for p in named), named
    finally:
        for proc in (holder, exporter, emulator):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)


def _seed_history(path: Path, seconds: dict[str, float]) -> None:
    """A store whose only run measured the identity tests on EMU0001 (every emulated host's phone)."""
    from phonebench.bench.store import open_store
    from phonebench.core.records import RunRecord, TestRecord
    from phonebench.core.verdict import Outcome, Verdict

    run = RunRecord(run_id="history", started="2026-12-01T20:00:00+00:00", station={"name": "hostA-bay1"},
                    status="complete", duts={"EMU0001": {"serial": "EMU0001", "soc_manufacturer": "Q",
                                                         "soc_model": "SM8650"}})
    for test, lab_s in seconds.items():
        run.tests.append(TestRecord(nodeid=f"suites/test_identity.py::{test}[EMU0001]", dut="EMU0001",
                                    outcome="passed", duration_s=1.0, lab_time_s=lab_s,
                                    verdicts=[Verdict(name=test, value=1.0, unit="", outcome=Outcome.PASS, n=1,
                                                      n_required=1, claim=1)]))
    with open_store(path) as store:
        store.sync_run(run.to_dict())


def plan(lab, *args: str, suite: str = IDENTITY) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "plan", *args, suite], cwd=lab["folder"],
                          env=lab["env"], capture_output=True, text=True, timeout=300)


def test_plan_reads_the_places_without_acquiring_them_and_runs_them_at_once(lab):
    # hostA and hostB only: the probe-board test leaves hostC's places behind without an exporter
    history = {"test_identity_is_complete": 100.0, "test_runtime_contract_is_supported": 50.0,
               "test_thermal_zones_agree_with_thermal_service": 30.0, "test_battery_reading_is_plausible": 20.0}
    store = lab["folder"] / "plan-history.sqlite"
    _seed_history(store, history)
    held = lab["client"]("-p", "hostA-bay1", "acquire", user="carol")  # someone else's: a plan only reads it
    assert held.returncode == 0, held.stdout + held.stderr
    try:
        done = plan(lab, "--places", "host[AB]-bay1", "--database", str(store), "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        data = json.loads(done.stdout)
        assert "carol" in owner(lab, "hostA-bay1") and owner(lab, "hostB-bay1") == "None"  # nothing taken
        assert data["coordinator"] == lab["coordinator"] and data["bays_at_once"] == 2
        assert {b["bay"]: b["lab_time_s"] for b in data["bays"]} == {"hostA-bay1": 200.0, "hostB-bay1": 200.0}
        assert [(p["bay"], p["dut"], p["model"]) for p in data["phones"]] == [
            ("hostA-bay1", "EMU0001", "Q SM8650"), ("hostB-bay1", "EMU0001", "Q SM8650")]
        assert all(t["source"] == "store (1 run)" for p in data["phones"] for t in p["tests"])
        assert data["makespan_s"] == 200.0  # two places side by side
        one_at_a_time = plan(lab, "--places", "host[AB]-bay1", "--database", str(store), "--jobs", "1")
        assert one_at_a_time.returncode == 0, one_at_a_time.stdout + one_at_a_time.stderr
        lines = one_at_a_time.stdout.splitlines()
        assert "place hostA-bay1: EMU0001 (Q SM8650): 3.3 min of lab time" in one_at_a_time.stdout
        assert "1 place(s) at once" in lines[0] and lines[-1] == "makespan: 6.7 min"  # 400 s
    finally:
        lab["client"]("-p", "hostA-bay1", "release", user="carol")
    single = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--plan", "--place", "hostB-bay1",
                             "--coordinator", lab["coordinator"], IDENTITY], cwd=lab["folder"],
                            env={**lab["env"], "PHONEBENCH_DATABASE": str(store)}, capture_output=True, text=True,
                            timeout=300)
    assert single.returncode == 0, single.stdout + single.stderr
    assert "place hostB-bay1: EMU0001" in single.stdout and single.stdout.splitlines()[-1] == "makespan: 3.3 min"


def test_plan_on_a_pattern_matching_no_place_says_so_and_exits_2(lab):
    done = plan(lab, "--places", "rack9-*", "--coordinator", lab["coordinator"])
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"bench: error: no place matches 'rack9-*' on coordinator {lab['coordinator']}")
    assert "hostA-bay1" in done.stderr and "bench lab places" in done.stderr and "Traceback" not in done.stderr


def test_plan_on_places_predicts_the_lab_time_their_run_records(lab, tmp_path):
    """As tests/test_labtime_plan.py on a station file: a run on the places seeds the store, the
    plan from it is within 10 % of what the next run on the places records, place by place."""
    suite = str(REPO / "suites" / "test_instruments.py")  # the probes' warm-up and rest: a minute of lab time

    def run_places(folder: Path) -> dict[str, float]:
        done = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--places", "host[AB]-bay1",
                               "--results-dir", str(folder), "-q", suite], cwd=lab["folder"], env=lab["env"],
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        records = [json.loads(p.read_text()) for p in folder.glob("*/results.json")]
        return {r["station"]["name"]: r["lab_time_s"]["EMU0001"] for r in records}

    run_places(tmp_path / "first")
    planned = plan(lab, "--places", "host[AB]-bay1", "--json", suite=suite)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    data = json.loads(planned.stdout)
    assert all(t["source"].startswith("store") for p in data["phones"] for t in p["tests"])
    per_place = {b["bay"]: b["lab_time_s"] for b in data["bays"]}
    recorded = run_places(tmp_path / "second")
    assert set(recorded) == set(per_place) == {"hostA-bay1", "hostB-bay1"}
    for place, seconds in recorded.items():
        assert seconds > 30.0  # tens of seconds of lab time, not a rounding of nothing
        assert abs(seconds - per_place[place]) <= 0.10 * per_place[place], (place, seconds, per_place)
    assert data["makespan_s"] == max(per_place.values())
